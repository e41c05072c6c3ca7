"""The fast engine is array-module generic: run on a strict stand-in for CuPy it computes the
same bits, and never turns a device array into numpy nor mixes numpy arrays into device
operations (what the GPU engine, ``engine="gpu"``, relies on); the integer FP32 FMA of the
block-wise epilogue; the GPU engine's one-line error where there is no GPU."""

import numpy as np
import pytest
from fake_device import Dev, FakeKernels, Mixed, fake, to_fake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_engine import CONFIGS, _config_set, _fp16_c, _fp32_edges, _specs
from test_tree import TREE

import mxsim
from mxsim import formats, presets, units, vectors
from mxsim.engine import fast, gpu
from mxsim.engine.fast import fma_fp32
from mxsim.errors import UnitError
from mxsim.formats import xp


def _on_device(spec, vs, kernel=True):
    """D on the fake device (checked to stay there) equals D on numpy, bit for bit: with the
    numpy-style step, and (``kernel``) with step kernels passed in as the GPU engine does."""
    want = fast.dot(spec, vs, kernel=kernel)
    for kernels in (False, FakeKernels) if kernel else (False,):
        got = fast.dot(spec, to_fake(vs), kernel=kernels)
        assert isinstance(got, Dev), type(got)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(fake.asnumpy(got), want)


def test_fake_device_refuses_what_cupy_refuses():
    """The stand-in fails code that would fail on CuPy, so the tests below can fail."""
    d = Dev(np.arange(4))
    assert xp.of(d) is fake and xp.of(np.arange(2), 3) is np
    with pytest.raises(Mixed):
        np.asarray(d)
    with pytest.raises(Mixed):
        np.where(d > 1, np.zeros(4), d)
    with pytest.raises(Mixed):
        d + np.ones(4)
    with pytest.raises(Mixed):
        np.zeros(4)[:] = d
    with pytest.raises(Mixed):
        fake.concatenate([d, np.arange(2)])
    assert isinstance(np.where(d > 1, d, 0), Dev) and isinstance(d.max(), Dev)
    assert int(fake.asarray(np.arange(3)).sum()) == 3


@pytest.mark.parametrize("preset,opts", CONFIGS,
                         ids=[f"{p}-{'-'.join(str(v) for v in o.values())}" for p, o in CONFIGS])
def test_engine_presets_on_device(preset, opts):
    for family in ("normal", "specials", "zeros", "subnormal"):
        vs = _config_set(family, opts, m=2, n=opts.get("n", 3))
        spec = presets.get(preset).spec_for(vs)
        _on_device(spec, vs)


def test_engine_stacked_entries_and_tree_on_device():
    """Many small batch entries (stacked block-diagonally) and a reduction-tree unit."""
    vs = vectors.generate("normal", a_format="e4m3", m=2, n=3, k=64, batch=(5,), seed=2)
    _on_device(presets.get("hopper-wgmma").spec_for(vs), vs)
    _on_device(presets.get("hopper-cublas").spec_for(vs), vs, kernel=False)
    for family in ("normal", "specials"):
        vs = vectors.generate(family, a_format="e4m3", m=2, n=2, k=64, scale_format="e8m0",
                              block=8, seed=4)
        _on_device(TREE, vs)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=_specs(), family=st.sampled_from(vectors.FAMILIES), seed=st.integers(0, 2 ** 16),
       n_inst=st.integers(1, 2), with_c=st.booleans())
def test_engine_random_specs_on_device(spec, family, seed, n_inst, with_c):
    if family == "nan-scale" and spec.scale_format is None:
        family = "scale-extremes"
    vs = vectors.generate(family, a_format=spec.a_format, b_format=spec.b_format, m=2, n=2,
                          k=spec.k * n_inst, scale_format=spec.scale_format, block=spec.block,
                          with_c=with_c, seed=seed)
    if spec.d_format == "fp16" and with_c:
        vs = _fp16_c(vs)
    _on_device(spec, vs, kernel=False)


def _fma_float64(x, y, z):
    """The FMA the engine used before (float64 product, TwoSum round-to-odd, one rounding
    to FP32): a second, independent algorithm to hold the integer one to."""
    with np.errstate(all="ignore"):
        f64 = [np.asarray(v, np.uint32).view(np.float32).astype(np.float64) for v in (x, y, z)]
        prod = f64[0] * f64[1]
        s = prod + f64[2]
        bb = s - prod
        err = (prod - (s - bb)) + (f64[2] - bb)
        even = (s.view(np.uint64) & np.uint64(1)) == 0
        fix = np.isfinite(s) & (err != 0) & even
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
        return s.astype(np.float32).view(np.uint32)


def _adversarial_fma(rng, size):
    """Triples that cancel exactly or nearly (z = -fl(x*y) and its neighbours), land the
    product far below z (sticky and borrow), overflow, underflow to subnormals, and mix
    signed zeros, Inf and NaN."""
    x, y = _fp32_edges(rng, size), _fp32_edges(rng, size)
    with np.errstate(all="ignore"):
        p = (x.view(np.float32) * y.view(np.float32)).view(np.uint32)
    z = p ^ np.uint32(0x80000000)                                   # -fl(x*y)
    z = (z.astype(np.int64) + rng.integers(-2, 3, size)).clip(0, 0xFFFFFFFF).astype(np.uint32)
    far = rng.integers(0, 1 << 32, size, dtype=np.uint64).astype(np.uint32)
    pick = rng.integers(0, 3, size)
    return x, y, np.where(pick == 0, z, np.where(pick == 1, far, _fp32_edges(rng, size)))


def test_fma_fp32_integer_equals_float64_round_to_odd():
    rng = np.random.default_rng(5)
    for x, y, z in (_adversarial_fma(rng, 20000),
                    tuple(rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)
                          for _ in range(3))):
        got, want = fma_fp32(x, y, z), _fma_float64(x, y, z)
        fp32 = formats.get("fp32")
        nan = fp32.classify(want) == formats.Class.NAN
        assert (fp32.classify(got)[nan] == formats.Class.NAN).all()
        np.testing.assert_array_equal(got[~nan], want[~nan])
        assert (got[nan] == fp32.code_of_nan).all()           # one canonical NaN
        dev = fma_fp32(Dev(x), Dev(y), Dev(z))
        np.testing.assert_array_equal(fake.asnumpy(dev), got)


def test_fma_fp32_hand_cases():
    """Signed zeros, exact cancellation, the borrow of a tiny subtrahend, overflow."""
    bits = lambda *v: np.array(v, np.float32).view(np.uint32)          # noqa: E731
    # x * y = 1.5 + 2**-23 + 2**-24, a tie; z = -+2**-100 tips it down (the borrow) or up.
    tie = 1 + 2.0 ** -23
    x = bits(0.0, -0.0, 1.0, tie, tie, 3.4e38, 1.0, -0.0)
    y = bits(-1.0, 1.0, 1.0, 1.5, 1.5, 2.0, np.inf, np.inf)
    z = bits(-0.0, -0.0, -1.0, -2.0 ** -100, 2.0 ** -100, 0.0, -np.inf, 1.0)
    got = fma_fp32(x, y, z)
    want = [0x80000000, 0x80000000, 0, 0x3FC00001, 0x3FC00002, 0x7F800000,
            formats.get("fp32").code_of_nan, formats.get("fp32").code_of_nan]
    assert [int(v) for v in got] == want


def test_gpu_engine_without_a_gpu_is_one_line():
    if gpu.available():
        pytest.skip("a GPU is here: the device check covers the engine")
    msg = r"^engine 'gpu' needs CuPy and an NVIDIA GPU \([^\n]+\); use --engine fast$"
    assert "gpu" in units.ENGINES
    with pytest.raises(UnitError, match=msg):
        mxsim.matmul(np.zeros((2, 32), np.uint8), np.zeros((32, 2), np.uint8),
                     unit="hopper-wgmma", engine="gpu")
    vs = vectors.generate("normal", m=2, n=2, k=32)
    with pytest.raises(UnitError, match=msg):
        gpu.dot(presets.get("hopper-wgmma").spec_for(vs), vs)


def test_exact_sum2_rounds_like_the_exact_sum():
    """The two-term sum of add_round and the FMA, rounded to formats of every width and mode,
    equals the exact sum (Python integers) rounded by round_to: significands up to 62 bits
    (reduction-tree leaves), far-apart and equal exponents, exact and near cancellation."""
    from mxsim.engine.fast.adders import exact_sum2
    rng = np.random.default_rng(8)
    n = 3000
    width = rng.integers(0, 63, (2, n))
    g = rng.integers(0, 2 ** 62, (2, n), dtype=np.uint64) >> (62 - width).astype(np.uint64)
    lsb = rng.integers(-150, 40, (2, n))
    lsb[1, : n // 3] = lsb[0, : n // 3] + rng.integers(-3, 4, n // 3)   # near each other
    g[1, : n // 6] = g[0, : n // 6] + rng.integers(-2, 3, n // 6).astype(np.uint64)
    sign = rng.integers(0, 2, (2, n))
    neg, mag, base, sticky, zero = exact_sum2(sign[0], g[0].astype(np.int64), lsb[0],
                                              sign[1], g[1].astype(np.int64), lsb[1])
    # The exact sum as an integer at the lowest LSB, 64 bits of it and a sticky bit.
    lo = int(lsb.min())
    want = [(-1) ** int(sign[0, i]) * int(g[0, i]) * 2 ** int(lsb[0, i] - lo)
            + (-1) ** int(sign[1, i]) * int(g[1, i]) * 2 ** int(lsb[1, i] - lo) for i in range(n)]
    cut = [max(abs(v).bit_length() - 64, 0) for v in want]
    w_sig = np.array([abs(v) >> c for v, c in zip(want, cut, strict=True)], np.uint64)
    w_sticky = np.array([abs(v) & ((1 << c) - 1) != 0 for v, c in zip(want, cut, strict=True)])
    w_lsb = lo + np.array(cut)
    assert (zero == np.array([v == 0 for v in want])).all()
    for name in ("fp32", "bf16", "fp16", "e8m13", "e4m3"):
        fmt = formats.get(name)
        for mode in ("rne", "rz", "ru", "rd"):
            got = formats.round_to(fmt, neg, base, mag, sticky, mode, "saturate")
            ref = formats.round_to(fmt, np.array([v < 0 for v in want]), w_lsb, w_sig, w_sticky,
                                   mode, "saturate")
            np.testing.assert_array_equal(got, ref, err_msg=f"{name} {mode}")


def test_gpu_entry_and_units_plumbing_on_the_stand_in(monkeypatch):
    """engine="gpu" through units and mxsim.engine.gpu.dot (transfers, kernels hook, D back
    to numpy or left on the device) with the stand-in as the GPU: the fast engine's bits."""
    from mxsim.engine.gpu import array
    monkeypatch.setattr(gpu, "why_unavailable", lambda: None)
    monkeypatch.setattr(gpu, "_kernels", lambda: FakeKernels)
    monkeypatch.setattr(array, "to_device", to_fake)
    monkeypatch.setattr(array, "to_host", fake.asnumpy)
    for preset, opts in CONFIGS[:6] + CONFIGS[-3:]:
        vs = _config_set("normal", opts, m=2, n=opts.get("n", 3))
        unit = units.get(preset)
        want = unit.compute(vs, engine="fast")
        got = unit.compute(vs, engine="gpu")
        assert type(got) is np.ndarray and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        on_device = gpu.dot(unit.spec_for(vs), vs, device_out=True)
        assert isinstance(on_device, Dev)
        np.testing.assert_array_equal(fake.asnumpy(on_device), want)
    assert units.path(units.get("hopper-wgmma"), vs, engine="gpu")["path"] == "gpu"
