"""The compiled loops of MX quantisation (mxsim.quantize._kernel) against the numpy path they
replace and the exact path: block maxima, the table encoder on every exponent field, shift and
special value, and whole quantisations by every rule and element format, on one thread and on
several (chunk order, and the first NaN-only block's error, kept)."""

from __future__ import annotations

import numpy as np
import pytest

from mxsim import formats
from mxsim import quantize as q
from mxsim.formats import Rounding
from mxsim.quantize import _kernel
from mxsim.quantize import blocks as qblocks
from mxsim.quantize import elements as qelements
from mxsim.quantize import mx as qmx

pytestmark = pytest.mark.skipif(not _kernel.available(), reason="needs numba (the fast extra)")


def adversarial(rng: np.random.Generator, rows: int) -> np.ndarray:
    """FP32 bit patterns: every exponent field (subnormals, the top binade, Inf and NaN),
    mantissas at both ends, random bits, zeros of both signs."""
    field = rng.integers(0, 256, (rows, 32), dtype=np.uint32)
    man = rng.choice(np.array([0, 1, 2, 0x7FFF, 0x8000, 0x8001, 0x400000, 0x7FFFFF], np.uint32),
                     (rows, 32))
    man = np.where(rng.random((rows, 32)) < 0.5, man,
                   rng.integers(0, 1 << 23, (rows, 32), dtype=np.uint32))
    sign = rng.integers(0, 2, (rows, 32), dtype=np.uint32) << np.uint32(31)
    bits = sign | (field << np.uint32(23)) | man
    # Blocks of one scale each: a block's range is what the scale rules see.
    centre = rng.integers(1, 255, (rows, 1), dtype=np.uint32)
    near = np.clip(centre.astype(np.int64) + rng.integers(-12, 3, (rows, 32)), 0, 254)
    tame = sign | (near.astype(np.uint32) << np.uint32(23)) | man
    return np.where(rng.random((rows, 1)) < 0.7, tame, bits).astype(np.uint32)


def test_block_amax_equals_row_max():
    rng = np.random.default_rng(1)
    b = adversarial(rng, 4000)
    assert np.array_equal(_kernel.block_amax(b), qblocks.row_max(b & np.uint32(0x7FFFFFFF)))


@pytest.mark.parametrize("rounding", [Rounding.RNE, Rounding.RZ])
@pytest.mark.parametrize("fmt", q.ELEMENT_FORMATS)
def test_encode_equals_the_table_path_on_every_shift(fmt, rounding):
    """Every element shift a rule gives (2**-k for k in -127..128), every exponent field."""
    rng = np.random.default_rng(2)
    b = adversarial(rng, 256 * 4)
    k = np.repeat(np.arange(-127, 129, dtype=np.int64), 4)
    f = formats.get(fmt)
    want = qelements.elements_fast(b, k, f, rounding)
    got = _kernel.encode(b, k, qelements.lut(fmt, rounding.value, "zero"))
    assert np.array_equal(got, want)


@pytest.fixture
def compiled(monkeypatch):
    """Every size through the compiled loops, and chunks small enough to be many."""
    monkeypatch.setattr(qmx, "KERNEL_MIN", 0)
    monkeypatch.setattr(qmx, "_FAST_CHUNK", 1 << 12)


@pytest.mark.parametrize("rounding", ["rne", "rz"])
@pytest.mark.parametrize("fmt", q.ELEMENT_FORMATS)
def test_to_mx_compiled_equals_exact(compiled, fmt, rounding):
    rng = np.random.default_rng(3)
    x = adversarial(rng, 640).view(np.float32)
    for rule in q.rules_for(fmt):
        for axis in (-1, -2):
            s0, e0 = qmx._to_mx(x, fmt, 32, rule, rounding, axis, None, None, 32, "quantize",
                                fast=False)
            s1, e1 = q.to_mx(x, fmt, 32, rule, rounding, axis=axis, nan_blocks="quantize")
            assert np.array_equal(s1, s0), (rule, axis)
            assert np.array_equal(e1, e0), (rule, axis)


def test_the_first_nan_only_block_is_named_from_many_chunks(compiled):
    x = np.random.default_rng(4).normal(size=(4096, 32)).astype(np.float32)
    x[3000] = np.nan
    x[1000] = np.nan
    with pytest.raises(q.QuantizeError, match="Block 1000 "):
        q.to_mx(x, "e4m3", 32, "floor")


def test_a_large_input_takes_the_compiled_path_and_equals_numpy(monkeypatch):
    x = np.random.default_rng(5).normal(size=(1 << 10, 1 << 9)).astype(np.float32)
    got = q.to_mx(x, "e4m3", 32, "rceil")
    monkeypatch.setattr(qmx, "KERNEL_MIN", 1 << 62)
    want = q.to_mx(x, "e4m3", 32, "rceil")
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@pytest.mark.parametrize("two_d", [False, True])
def test_to_nvfp4_compiled_equals_numpy(monkeypatch, two_d):
    """NVFP4 (UE4M3 scales, FP32 multipliers, E2M1 elements; NaN and Inf blocks) through the
    compiled loop and through numpy: every scale and element code, every per-tensor scale."""
    from mxsim.quantize import nvfp4 as qnv
    rng = np.random.default_rng(6)
    x = adversarial(rng, 512).view(np.float32).reshape(256, 64)
    tame = rng.normal(size=(256, 64)).astype(np.float32) * np.float32(3)
    monkeypatch.setattr(_kernel, "CHUNK", 1 << 10)           # many chunks, on every core
    for data, pts in ((x, 1.0), (x, 0.37), (tame, None), (tame, 2.0 ** -20)):
        for axis in (-1, -2):
            kw = dict(per_tensor_scale=pts, two_d=two_d, axis=axis, nan_blocks="quantize")
            monkeypatch.setattr(qnv, "KERNEL_MIN", 0)
            got = q.to_nvfp4(data, **kw)
            monkeypatch.setattr(qnv, "KERNEL_MIN", 1 << 62)
            want = q.to_nvfp4(data, **kw)
            for g, w in zip(got, want, strict=True):
                assert np.array_equal(g, w), (pts, axis)


def _adversarial_amax(rng, fmax: float) -> np.ndarray:
    """Finite FP32 amax bit patterns: random over every binade, zero, the subnormals, the
    largest, and values whose ``amax / max`` lands on each side of a power of two (where the
    FP32 log2 rounds onto an integer)."""
    rand = rng.integers(0, 0x7F800000, 1 << 16, dtype=np.int64).astype(np.uint32)
    edges = [0, 1, 2, 3, 0x7FFFFF, 0x800000, 0x800001, 0x7F7FFFFF, 0x7F7FFFFE]
    with np.errstate(over="ignore"):        # the top powers overflow to Inf, dropped below
        powers = (np.float32(fmax) * np.ldexp(np.float32(1), np.arange(-140, 120))).astype(
            np.float32).view(np.uint32).astype(np.int64)
    near = np.concatenate([powers + d for d in range(-40, 41)])
    near = near[(near >= 0) & (near < 0x7F800000)].astype(np.uint32)
    return np.concatenate([rand, np.array(edges, np.uint32), near])


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "int8"])
def test_compiled_rceil_scales_equal_scale_finite(fmt):
    from mxsim.quantize import rules
    f = formats.get(fmt)
    amax = _adversarial_amax(np.random.default_rng(7), f.max)
    code, k = _kernel.rceil_scales(amax, f)
    want_code, want_k = rules.scale_finite(rules.ScaleRule.RCEIL, f, amax)
    np.testing.assert_array_equal(code, want_code)
    np.testing.assert_array_equal(k, want_k)


@pytest.mark.parametrize("pts", [1.0, 0.37, 3.0e-30, 6.5e35, 2.0 ** -126, 2.0 ** -149])
def test_compiled_nvfp4_scales_equal_numpy(pts):
    from mxsim.quantize import nvfp4
    amax = _adversarial_amax(np.random.default_rng(8), 6.0)
    pts = np.float32(pts)
    code, r = _kernel.nvfp4_scales(amax, pts, nvfp4._UE4M3_MIN, nvfp4._UE4M3_MAX,
                                   qelements.lut("e4m3", "rne", "zero"), nvfp4._e4m3_values())
    want_code, want_r = nvfp4._scales(amax, pts)
    np.testing.assert_array_equal(code, want_code)
    np.testing.assert_array_equal(r.view(np.uint32), want_r.view(np.uint32))
