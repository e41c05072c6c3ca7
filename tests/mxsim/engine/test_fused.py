"""The whole-dot kernel (engine._fused) == the step kernel == the numpy paths, bit for bit.

test_engine.py's twins run it too (fast.dot takes it wherever it applies); here it meets the
units it is for on their own terms: drawn specs of consecutive steps, C in the first step and
+0 zeros, every generator family, shapes across column tiles and row chunks, batches, chains
with promotion, and every preset spec it applies to.
"""

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mxsim import formats, presets, vectors
from mxsim.engine import fast
from mxsim.engine.fast import fused
from mxsim.engine.fast.operands import INF, NAN, Operands
from mxsim.engine.fast.paths import INTEGER_STEP
from mxsim.spec import UnitSpec

pytest.importorskip("numba")

_ELEMS = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "int8")


def _three(spec: UnitSpec, vs: vectors.VectorSet) -> np.ndarray:
    assert fused.applies(spec)
    d_whole = fast.dot(spec, vs)
    d_step = fast.dot(spec, vs, whole=False)
    d_numpy = fast.dot(spec, vs, kernel=False)
    np.testing.assert_array_equal(fast.dot(spec, vs, kernel=INTEGER_STEP), d_numpy)
    assert d_whole.dtype == d_numpy.dtype
    np.testing.assert_array_equal(d_step, d_numpy)
    np.testing.assert_array_equal(d_whole, d_numpy)
    return d_whole


@st.composite
def _specs(draw):
    k = draw(st.sampled_from([8, 16, 32, 64]))
    a_format, b_format = draw(st.sampled_from(_ELEMS)), draw(st.sampled_from(_ELEMS))
    scale = draw(st.sampled_from([None, "e8m0", "ue4m3"]))
    block = None if scale is None else draw(st.sampled_from([b for b in (16, 32) if k % b == 0]
                                                            or [None]))
    scale = None if block is None else scale
    cuts = sorted(draw(st.sets(st.integers(1, k - 1), max_size=3)))
    edges = [0, *cuts, k]
    d_format = draw(st.sampled_from(["fp32", "fp32", "fp16"]))
    return UnitSpec(
        name="drawn", a_format=a_format, b_format=b_format, scale_format=scale, block=block,
        k=k, schedule=[list(range(edges[i], edges[i + 1])) for i in range(len(edges) - 1)],
        frac_bits=draw(st.integers(0, 30)),
        align=draw(st.sampled_from(["rz", "rd", "rne", "rz-jam"])),
        product=draw(st.sampled_from(["raw", "normalized"])), c_mode="step",
        acc_format=draw(st.sampled_from(["fp32", "e8m13", "e8m10", "fp16", "bf16"])),
        acc_rounding=draw(st.sampled_from(["rz", "rne", "ru", "rd", "rna"])),
        d_format=d_format, e_zero=draw(st.integers(-200, 5)),
        overflow=draw(st.sampled_from(["inf", "ieee", "saturate"])), zero_sign="positive",
        promote_every=(draw(st.one_of(st.none(), st.integers(1, 3)))
                       if d_format == "fp32" else None),
        promote_rounding=draw(st.sampled_from(["rne", "rz", "ru"])))


def _fp16_c(vs: vectors.VectorSet) -> vectors.VectorSet:
    if vs.c is None:
        return vs
    c = formats.get("fp16").encode(vs.c.view(np.float32), saturate=False)
    return vs.replace(c=c, c_format="fp16")


def drawn_set(spec: UnitSpec, family: str, seed: int, n_inst: int, with_c: bool,
              shape: tuple[int, int]) -> vectors.VectorSet:
    """A set of ``family`` for a drawn spec: ``n_inst`` instructions deep, C in FP16 for FP16
    output (a family that needs block scales falls back to scale-extremes without them)."""
    if family == "nan-scale" and spec.scale_format is None:
        family = "scale-extremes"
    vs = vectors.generate(family, a_format=spec.a_format, b_format=spec.b_format, m=shape[0],
                          n=shape[1], k=spec.k * n_inst, scale_format=spec.scale_format,
                          block=spec.block, with_c=with_c, seed=seed)
    if spec.d_format == "fp16":
        vs = _fp16_c(vs)
    return vs


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=_specs(), family=st.sampled_from(vectors.FAMILIES), seed=st.integers(0, 2 ** 16),
       n_inst=st.integers(1, 4), with_c=st.booleans(),
       shape=st.sampled_from([(1, 1), (3, 5), (2, 130), (33, 7)]))
def test_fused_drawn_specs_equal_step_kernel_and_numpy(spec, family, seed, n_inst, with_c,
                                                       shape):
    _three(spec, drawn_set(spec, family, seed, n_inst, with_c, shape))


def _applicable() -> list[tuple[str, UnitSpec]]:
    found = {}
    for name in presets.names():
        for spec in presets.get(name).all_specs():
            if fused.applies(spec):
                found.setdefault((name, spec.a_format, spec.b_format, spec.scale_format,
                                  spec.d_format), (name, spec))
    return sorted(found.values(), key=lambda x: x[0])


_PRESET_SPECS = _applicable()


def test_fused_applies_to_the_common_presets():
    names = {name for name, _ in _PRESET_SPECS}
    assert {"hopper-wgmma", "hopper-cublas", "hopper-cublas-fast", "blackwell-mxf8f6f4",
            "blackwell-f8f6f4", "ada-mma-f8", "hopper-mma-f16"} <= names
    assert not fused.applies(presets.get("ocp-fp32").spec("e4m3", scale_format="e8m0", block=32))
    assert not fused.applies(presets.get("exact").spec("e4m3"))


@pytest.mark.parametrize("name,spec", _PRESET_SPECS, ids=[f"{n}-{s.a_format}-{s.b_format}-"
                                                            f"{s.scale_format}-{s.d_format}"
                                                            for n, s in _PRESET_SPECS])
def test_fused_every_preset_spec(name, spec):
    for family, seed in (("normal", 1), ("specials", 2), ("cancellation", 3)):
        if family == "specials" and spec.scale_format is not None:
            family = "nan-scale"
        vs = vectors.generate(family, a_format=spec.a_format, b_format=spec.b_format, m=3,
                              n=129, k=spec.k * 3, scale_format=spec.scale_format,
                              block=spec.block, with_c=seed != 1, seed=seed)
        if spec.d_format == "fp16":
            vs = _fp16_c(vs)
        _three(spec, vs)


def test_fused_many_row_chunks_and_a_batch(monkeypatch):
    """Row chunks on threads and batch entries: the same bits as one call."""
    vs = vectors.generate("llm", a_format="e4m3", m=40, n=300, k=64, seed=5, with_c=True)
    spec = presets.get("hopper-cublas").spec_for(vs)
    whole = _three(spec, vs)
    monkeypatch.setattr(fused, "_CHUNK_PRODUCTS", 64 * 300 * 3)
    np.testing.assert_array_equal(fast.dot(spec, vs), whole)
    batch = vectors.generate_suite(["normal", "specials", "max"], count=2, a_format="e5m2",
                                   m=4, n=6, k=64)
    d = _three(presets.get("hopper-wgmma").spec_for(batch), batch)
    assert d.shape == (6, 4, 6)


@pytest.mark.parametrize("fmt", ["fp32", "e8m13", "e8m10", "fp16", "bf16", "e5m10"])
@pytest.mark.parametrize("rounding", ["rz", "rne"])
@pytest.mark.parametrize("overflow", ["inf", "ieee", "saturate"])
def test_branch_free_rounding_is_round_to(fmt, rounding, overflow):
    """The kernel's branch-free step rounding == formats.round_to, code for code: random
    sums at every scale, and the edges: halfway cases, carries into the next binade, the
    subnormal range and below it, shifts of 63, 64 and more, overflow, zero."""
    from mxsim.engine import _fused
    from mxsim.formats.rounding import rounding_params
    f = formats.get(fmt)
    rng = np.random.default_rng(20261206)
    n = 20000
    bits = rng.integers(0, 63, n)
    totals = rng.integers(0, 1 << 62, n, dtype=np.int64) >> (62 - bits)
    m = f.man_bits
    edges = []
    for w in range(m, m + 4):     # ties, all-ones below the cut, carries
        base = np.int64(1) << w
        edges += [base, base - 1, base + 1, (base | (base >> (w - m))) + (base >> (w - m + 1)),
                  (np.int64(1) << (w + 1)) - 1, (np.int64(1) << (w + 1)) - (base >> (w - m + 1))]
    edges += [1, 2, 3, (1 << 62) - 1, 1 << 62, 0]
    # Every shift below the smallest subnormal, 0 .. 69, of sums with their top bit anywhere.
    tops = np.array([(1 << b) + d for b in (0, 1, 30, 61, 62) for d in (-1, 0, 1)
                     if (1 << b) + d > 0], np.int64)
    grid_t, grid_s = np.meshgrid(tops, np.arange(70))
    totals = np.concatenate([totals, np.array(edges * 40, np.int64), grid_t.ravel()])
    lsbs = rng.integers(f.emin - m - 130, f.emax + 4, len(totals))
    lsbs[:n // 4] = rng.integers(f.emin - m - 70, f.emin - m + 4, n // 4)
    lsbs[-grid_s.size:] = f.emin - m - grid_s.ravel()
    totals = np.where(rng.integers(0, 2, len(totals)) == 1, -totals, totals)
    got = _fused.round_sums(rounding_params(f, rounding, overflow), totals, lsbs)
    want = formats.round_to(f, (totals < 0).astype(np.uint8), lsbs, np.abs(totals).astype(
        np.uint64), False, rounding, overflow, kernel=False).astype(np.int64)
    want = np.where(totals == 0, 0, want)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (totals[bad[:5]], lsbs[bad[:5]], got[bad[:5]], want[bad[:5]])


_SIDE_CASES = [(a, b, scale, block)
               for a, b in (("e4m3", "e5m2"), ("e3m2", "e2m3"), ("e2m1", "int8"))
               for scale, block in ((None, None), ("e8m0", 32), ("ue4m3", 16))]
_SIDE_CASES.append(("fp16", "bf16", None, None))      # scales go with MX element formats


@pytest.mark.parametrize("specials", ["ieee", "none"])
@pytest.mark.parametrize("a_format,b_format,scale,block", _SIDE_CASES)
def test_fused_packed_sides_are_the_operands(a_format, b_format, scale, block, specials):
    """The kernel's sides looked up from the codes (fused.packed_sides, compiled) == the
    sides of Operands.of by instruction, field for field, with and without the signs folded
    in, and the rows that hold a NaN or an Inf: every code of A and B, every scale code, a
    batch, rows and columns in several chunks and column groups."""
    rng = np.random.default_rng(len(a_format) + 3 * len(b_format))
    fa, fb = formats.get(a_format), formats.get(b_format)
    k, m, n = 128, 150, 130
    a = rng.integers(0, 1 << fa.bits, (2, m, k)).astype(fa.code_dtype)
    b = rng.integers(0, 1 << fb.bits, (2, k, n)).astype(fb.code_dtype)
    a.reshape(-1)[:min(a.size, 1 << fa.bits)] = np.arange(min(a.size, 1 << fa.bits))
    b.reshape(-1)[:min(b.size, 1 << fb.bits)] = np.arange(min(b.size, 1 << fb.bits))
    kw = {}
    if scale is not None:
        sa = rng.integers(0, 256, (2, m, k // block)).astype(np.uint8)
        sa.reshape(-1)[:256] = np.arange(256)
        kw = dict(scale_format=scale, block=block, a_scale=sa,
                  b_scale=rng.integers(0, 256, (2, k // block, n)).astype(np.uint8))
    vs = vectors.VectorSet(a=a, b=b, a_format=a_format, b_format=b_format, **kw)
    spec = UnitSpec(name="sides", a_format=a_format, b_format=b_format, scale_format=scale,
                    block=block, k=32, frac_bits=13, acc_format="fp32", d_format="fp32",
                    specials=specials)
    ops = Operands.of(spec, vs)
    for bi, signed in itertools.product(range(2), (False, True)):
        *got, special_a, special_b = fused.packed_sides(spec, vs, bi, signed)
        for w, g, special, side in zip(fused.sides(ops, bi), got, (special_a, special_b), "ab",
                                       strict=True):
            np.testing.assert_array_equal(
                special, ((w[4] & (NAN | INF)) != 0).any(axis=1), err_msg=side)
            if signed:
                w[1] = np.where(w[0] == 1, -w[1], w[1])
                w[0] = 0
            rows = w.shape[1]
            w = w.reshape(5, rows, k // spec.k, spec.k).transpose(2, 0, 1, 3)
            if signed and side == "b":               # (K / k, 5, k, N) for the signed steps
                w = w.transpose(0, 1, 3, 2)
            assert g.dtype == w.dtype and g.shape == w.shape and g.flags.c_contiguous
            np.testing.assert_array_equal(g, w, err_msg=f"{side} signed={signed}")
