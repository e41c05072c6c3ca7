"""The ``exact`` unit: fast engine == fraction reference, and directed cases with known bits."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mxsim import formats, vectors
from mxsim.engine import fast, reference
from mxsim.vectors import VectorSet

PAIRS = [("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e5m2", "e5m2"), ("e3m2", "e2m3"),
         ("e2m1", "e2m1"), ("int8", "int8"), ("int8", "e4m3")]
SCALES = [(None, "block"), ("e8m0", "block"), ("ue4m3", "block"), ("fp32", "tensor"),
          ("fp32", "row"), ("fp32", "block")]


def _bits(x: float) -> int:
    return int(np.float32(x).view(np.uint32))


def _assert_twins(vs: VectorSet) -> np.ndarray:
    d_fast = fast.matmul_exact(vs)
    d_ref = reference.matmul_exact(vs)
    np.testing.assert_array_equal(d_fast, d_ref)
    return d_fast


# Every family under every scale configuration, the format pair rotating through PAIRS so
# that each pair meets every family and every scale kind.
GRID = [(fam, sf, gran, *PAIRS[(i + j) % len(PAIRS)])
        for i, fam in enumerate(vectors.FAMILIES) for j, (sf, gran) in enumerate(SCALES)
        if not (fam == "nan-scale" and sf is None)]


@pytest.mark.parametrize("family,scale_format,granularity,a_format,b_format", GRID,
                         ids=[f"{f}-{s}-{g}-{a}x{b}" for f, s, g, a, b in GRID])
def test_exact_fast_equals_reference(family, scale_format, granularity, a_format, b_format):
    k = 256 if (scale_format, granularity) == ("fp32", "block") else 64
    n = 128 if (scale_format, granularity) == ("fp32", "block") else 3
    vs = vectors.generate(family, a_format=a_format, b_format=b_format, m=2, n=n, k=k,
                          scale_format=scale_format, scale_granularity=granularity, seed=7)
    _assert_twins(vs)


@pytest.mark.parametrize("a_format,b_format", PAIRS, ids=[f"{a}x{b}" for a, b in PAIRS])
def test_exact_every_pair_uniform_codes(a_format, b_format):
    vs = vectors.generate("uniform", a_format=a_format, b_format=b_format, m=4, n=4, k=96,
                          scale_format="e8m0", seed=9)
    _assert_twins(vs)


@pytest.mark.parametrize("family", ["normal", "llm", "cancellation", "one-large", "c-negligible"])
@pytest.mark.parametrize("scale_format", [None, "e8m0"])
def test_exact_long_k_4096_equals_reference(family, scale_format):
    vs = vectors.generate(family, a_format="e4m3", b_format="e5m2", m=2, n=2, k=4096,
                          scale_format=scale_format, seed=3)
    _assert_twins(vs)


def test_exact_batched_and_no_c():
    vs = vectors.generate("normal", a_format="e2m1", m=3, n=2, k=32, batch=(2, 3),
                          scale_format="ue4m3", with_c=False, seed=1)
    d = _assert_twins(vs)
    assert d.shape == (2, 3, 3, 2)


def test_exact_nvfp4_tensor_scale():
    vs = vectors.generate("normal", a_format="e2m1", m=4, n=4, k=64, scale_format="ue4m3",
                          seed=2)
    vs = vs.replace(tensor_scale=np.array(0.0123, np.float32))
    d = _assert_twins(vs)
    vs0 = vectors.generate("normal", a_format="e2m1", m=4, n=4, k=64, scale_format="ue4m3",
                           seed=2, with_c=False)
    vs0 = vs0.replace(tensor_scale=np.array(2.0 ** -3, np.float32))
    plain = vectors.generate("normal", a_format="e2m1", m=4, n=4, k=64, scale_format="ue4m3",
                             seed=2, with_c=False)
    # A power-of-two tensor scale only moves the exponent.
    expect = fast.matmul_exact(plain).view(np.float32) * np.float32(2.0 ** -3)
    np.testing.assert_array_equal(fast.matmul_exact(vs0), expect.view(np.uint32))
    assert d.dtype == np.uint32


# -- directed cases whose bits are derived by hand, independent of both engines ------------

E4M3 = formats.get("e4m3")


def _one_dot(a_vals, b_vals, c=None, a_scale=None, b_scale=None, fmt="e4m3"):
    """One dot product; with E8M0 scales the operands are zero-padded to whole blocks."""
    f = formats.get(fmt)
    if a_scale is not None:
        pad = -len(a_vals) % 32
        a_vals, b_vals = list(a_vals) + [0.0] * pad, list(b_vals) + [0.0] * pad
    sat = not f.has_nan                       # keep Inf as Inf where the format has it
    a = f.encode(np.array(a_vals, np.float64), saturate=sat).reshape(1, -1)
    b = f.encode(np.array(b_vals, np.float64), saturate=sat).reshape(-1, 1)
    np.testing.assert_array_equal(f.decode(a).ravel(), a_vals)   # operands are exact
    kw = {}
    if a_scale is not None:
        kw = dict(a_scale=np.array(a_scale, np.uint8).reshape(1, -1),
                  b_scale=np.array(b_scale, np.uint8).reshape(-1, 1),
                  scale_format="e8m0", block=32)
    cc = None if c is None else np.array([[c]], np.float32).view(np.uint32)
    vs = VectorSet(a=a, b=b, a_format=fmt, b_format=fmt, c=cc, **kw)
    return int(_assert_twins(vs)[0, 0])


def test_exact_tie_rounds_to_even():
    # 1 + 2**-24 is the midpoint between 1 and 1 + 2**-23: ties to the even 1.0.
    assert _one_dot([2.0 ** -9], [2.0 ** -9], c=1.0, a_scale=[127 - 6],
                    b_scale=[127]) == _bits(1.0)
    # 1 + 3 * 2**-24 is the midpoint between 1 + 2**-23 and 1 + 2**-22: ties to the even one.
    assert _one_dot([2.0 ** -9, 2.0 ** -8], [2.0 ** -9, 2.0 ** -9], c=1.0,
                    a_scale=[127 - 6], b_scale=[127]) == _bits(1.0) + 2


def test_exact_no_double_rounding():
    # Two products of 2**-24 each: 1 + 2**-23 exactly.
    assert _one_dot([1.0, 1.0], [1.0, 1.0], c=1.0, a_scale=[127 - 12],
                    b_scale=[127 - 12]) == _bits(1.0) + 1
    # 1 + 2**-24 + 2**-61: a bit far below the tie must round up. A float64 accumulator
    # would lose the 2**-61 (1 + 2**-24 is already exact to 2**-52) and round the tie to 1.0.
    a3 = [1.0] + [0.0] * 31 + [1.0] + [0.0] * 31
    b3 = [1.0] + [0.0] * 31 + [1.0] + [0.0] * 31
    got = _one_dot(a3, b3, c=1.0, a_scale=[127 - 12, 127 - 30], b_scale=[127 - 12, 127 - 31])
    assert got == _bits(1.0) + 1


def test_exact_cancellation_gives_positive_zero():
    assert _one_dot([3.0, 3.0], [5.0, -5.0], c=0.0) == 0x00000000
    assert _one_dot([3.0], [5.0], c=-15.0) == 0x00000000
    assert _one_dot([448.0, -448.0], [448.0, 448.0], c=-0.0) == 0x00000000


def test_exact_negative_zero_only_when_all_terms_are_negative_zero():
    assert _one_dot([-0.0, 0.0], [1.0, -2.0], c=-0.0) == 0x80000000
    assert _one_dot([-0.0, 0.0], [1.0, 2.0], c=-0.0) == 0x00000000
    assert _one_dot([-0.0], [1.0], c=0.0) == 0x00000000
    assert _one_dot([-0.0], [1.0]) == 0x00000000          # absent C is +0


def test_exact_overflow_and_extreme_scales():
    # 448 * 448 * 2**127 * 2**127 overflows FP32 to +Inf under RNE.
    assert _one_dot([448.0], [448.0], a_scale=[0xFE], b_scale=[0xFE]) == 0x7F800000
    assert _one_dot([-448.0], [448.0], a_scale=[0xFE], b_scale=[0xFE]) == 0xFF800000
    # 2**-9 * 2**-9 * 2**-127 * 2**-127 is far below FP32's smallest subnormal: rounds to +0.
    assert _one_dot([2.0 ** -9], [2.0 ** -9], a_scale=[0], b_scale=[0]) == 0
    # ... and just above half of the smallest subnormal it rounds up to it.
    assert _one_dot([1.0, 2.0 ** -9], [1.0, 2.0 ** -9], a_scale=[127 - 75],
                    b_scale=[127 - 75]) == 1
    # Exactly half of the smallest subnormal ties to even: +0.
    assert _one_dot([1.0], [1.0], a_scale=[127 - 75], b_scale=[127 - 75]) == 0
    # The largest FP32 value is reachable exactly: (2 - 2**-23) * 2**127.
    c = np.float32(3.4028234663852886e38)
    assert _one_dot([0.0], [0.0], c=float(c)) == _bits(c)


def test_exact_special_values():
    e5 = "e5m2"
    inf, nan = float("inf"), float("nan")
    f = formats.get(e5)
    assert _one_dot([inf, 1.0], [1.0, 1.0], fmt=e5) == 0x7F800000
    assert _one_dot([inf, -inf], [1.0, 1.0], fmt=e5) == 0x7FFFFFFF
    assert _one_dot([inf], [0.0], fmt=e5) == 0x7FFFFFFF
    assert _one_dot([1.0], [1.0], c=-inf, fmt=e5) == 0xFF800000
    assert _one_dot([inf], [1.0], c=-inf, fmt=e5) == 0x7FFFFFFF
    assert _one_dot([1.0], [1.0], c=nan, fmt=e5) == 0x7FFFFFFF
    a = np.array([[f.code_of_nan, 0x3C]], np.uint8)
    vs = VectorSet(a=a, b=np.array([[0x3C], [0x3C]], np.uint8), a_format=e5,
                   b_format=e5)
    assert int(_assert_twins(vs)[0, 0]) == 0x7FFFFFFF
    # A NaN E8M0 scale poisons its block even when the elements are zero.
    assert _one_dot([0.0], [0.0], a_scale=[0xFF], b_scale=[127]) == 0x7FFFFFFF


def test_exact_inf_times_zero_scale_is_nan():
    """An e5m2 Inf in a block whose UE4M3 scale is zero: Inf * 0 is NaN (found by hypothesis)."""
    a = np.zeros((1, 16), np.uint8)
    a[0, 0] = formats.get("e5m2").code_of_inf
    b = np.full((16, 1), 0x38, np.uint8)                     # e4m3 1.0
    vs = VectorSet(a=a, b=b, a_format="e5m2", b_format="e4m3",
                   a_scale=np.zeros((1, 1), np.uint8), b_scale=np.full((1, 1), 0x38, np.uint8),
                   scale_format="ue4m3", block=16)
    assert int(_assert_twins(vs)[0, 0]) == 0x7FFFFFFF


def test_exact_is_order_independent():
    vs = vectors.generate("llm", a_format="e4m3", m=4, n=4, k=512, seed=11)
    perm = np.random.default_rng(0).permutation(512)
    shuffled = VectorSet(a=vs.a[:, perm], b=vs.b[perm], c=vs.c)
    np.testing.assert_array_equal(fast.matmul_exact(vs), fast.matmul_exact(shuffled))


def test_exact_transpose_symmetry():
    vs = vectors.generate("normal", a_format="e5m2", b_format="int8", m=3, n=5, k=64,
                          scale_format="e8m0", seed=4)
    t = VectorSet(a=vs.b.T.copy(), b=vs.a.T.copy(), a_format="int8", b_format="e5m2",
                  c=vs.c.T.copy(), a_scale=vs.b_scale.T.copy(), b_scale=vs.a_scale.T.copy(),
                  scale_format="e8m0", block=32)
    np.testing.assert_array_equal(fast.matmul_exact(vs).T, fast.matmul_exact(t))


def test_exact_chunking_does_not_change_results(monkeypatch):
    vs = vectors.generate("normal", a_format="e4m3", m=9, n=7, k=128, seed=5)
    whole = fast.matmul_exact(vs)
    from mxsim.engine.fast import exact
    monkeypatch.setattr(exact, "_CHUNK_TERMS", 7 * 128 * 2)     # two rows at a time
    np.testing.assert_array_equal(fast.matmul_exact(vs), whole)


_ELEMS = ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "int8"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a_format=st.sampled_from(_ELEMS), b_format=st.sampled_from(_ELEMS),
       scale=st.sampled_from([None, "e8m0", "ue4m3"]), k_blocks=st.integers(1, 3),
       data=st.data())
def test_exact_random_codes_property(a_format, b_format, scale, k_blocks, data):
    """Arbitrary codes (NaN/Inf/0x80 included), scales and C bits: the twins agree."""
    k = 32 * k_blocks
    fa, fb = formats.get(a_format), formats.get(b_format)
    codes = st.lists(st.integers(0, (1 << fa.bits) - 1), min_size=2 * k, max_size=2 * k)
    a = np.array(data.draw(codes), np.uint8).reshape(2, k)
    b = np.array(data.draw(st.lists(st.integers(0, (1 << fb.bits) - 1), min_size=2 * k,
                                    max_size=2 * k)), np.uint8).reshape(k, 2)
    c_bits = data.draw(st.lists(st.integers(0, 2 ** 32 - 1), min_size=4, max_size=4))
    kw = {}
    if scale is not None:
        block = 32 if scale == "e8m0" else 16
        nb = k // block
        s = st.lists(st.integers(0, 255), min_size=2 * nb, max_size=2 * nb)
        kw = dict(a_scale=np.array(data.draw(s), np.uint8).reshape(2, nb),
                  b_scale=np.array(data.draw(s), np.uint8).reshape(nb, 2),
                  scale_format=scale, block=block)
    vs = VectorSet(a=a, b=b, a_format=a_format, b_format=b_format,
                   c=np.array(c_bits, np.uint32).reshape(2, 2), **kw)
    _assert_twins(vs)


@pytest.mark.slow
def test_exact_every_family_at_k_4096_equals_reference():
    """The K = 4096 chains of the issue, every family at once, scaled and unscaled."""
    for scale_format in (None, "e8m0"):
        vs = vectors.generate_suite(vectors.FAMILIES, a_format="e5m2", b_format="e4m3", m=1,
                                    n=2, k=4096, scale_format=scale_format, seed=12)
        _assert_twins(vs)


def test_exact_one_dot_longer_than_float64_limb_sums():
    """K = 2**23 + 1 in one dot: 2**23 pieces near 2**31 share a limb, so a float64 limb sum
    passes 2**53 and the last product's odd piece was rounded away (0x38000000 where the exact
    sum is 0x37ffffff). Limb sums now run over at most 2**22 terms and add in int64."""
    p = 1 << 23
    a = np.full((1, p + 1), 0x3C, np.uint8)               # e5m2 1.0
    b = np.full((p + 1, 1), 0x38, np.uint8)               # e5m2 0.5
    b[-1] = 0x01                                          # 2**-16, last in the limb sums
    s = np.float32(2 - 2 ** -23)                          # FP32 scale: 24 significand bits
    c = np.float32(-(2 ** 24 - 1) / 2)                    # cancels s * p / 2 exactly
    vs = VectorSet(a=a, b=b, a_format="e5m2", b_format="e5m2", scale_format="fp32",
                   a_scale=np.array(s), b_scale=np.array(np.float32(1)),
                   c=np.array([[c]]).view(np.uint32))
    # The exact sum: s * (p / 2 + 2**-16) + c = s * 2**-16 = (2**24 - 1) * 2**-39.
    assert int(fast.matmul_exact(vs)[0, 0]) == _bits((2 ** 24 - 1) * 2.0 ** -39) == 0x37FFFFFF
