"""FP32 dequantisation (``from_mx``/``from_nvfp4`` with ``dtype=np.float32``): the compiled
loop equals the exact float64 values rounded once to FP32, bit for bit, on every element code
times every scale code, on subnormal and overflowing products, NaN scales, odd shapes, axes,
non-contiguous and non-uint8 input, sizes below the loop's threshold and many chunks; and
equals torchao's ``to_dtype`` (MX) and ``NVFP4Tensor.dequantize`` (single-level NVFP4).
Seeds are fixed in each test."""

from __future__ import annotations

import numpy as np
import pytest

from mxsim import formats
from mxsim import quantize as q
from mxsim.errors import FormatError
from mxsim.quantize import _kernel
from mxsim.quantize import mx as qmx
from mxsim.quantize import nvfp4 as qnv

MX_FORMATS = ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "int8"]
F32 = np.float32


def fp32(v: np.ndarray) -> np.ndarray:
    """Exact float64 values rounded once to FP32 (the reference); overflow gives ±Inf."""
    with np.errstate(over="ignore"):
        return v.astype(np.float32)


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


def assert_bits_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == np.float32 and got.shape == want.shape, what
    g, w = bits(got), bits(want)
    bad = np.flatnonzero(g != w)
    assert bad.size == 0, (f"{what}: {bad.size} differ, first at {bad[0]}: "
                           f"{g.flat[bad[0]]:#010x} != {w.flat[bad[0]]:#010x}")


@pytest.fixture
def compiled(monkeypatch):
    """Every size through the compiled loop, in many chunks (on every core)."""
    if not _kernel.available():
        pytest.skip("needs numba (the fast extra)")
    monkeypatch.setattr(qmx, "KERNEL_MIN", 0)
    monkeypatch.setattr(qnv, "KERNEL_MIN", 0)
    monkeypatch.setattr(_kernel, "CHUNK", 1 << 10)


def every_code_times_every_scale(fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """(256 scales, one block of every code per scale)."""
    n = 1 << formats.get(fmt).bits
    codes = np.tile(np.arange(n, dtype=np.uint8), (256, 1))
    scales = np.arange(256, dtype=np.uint8)[:, None]
    return scales, codes


@pytest.mark.parametrize("fmt", MX_FORMATS)
def test_from_mx_fp32_every_code_and_scale(compiled, fmt):
    s, e = every_code_times_every_scale(fmt)
    blk = e.shape[1]
    want = fp32(q.from_mx(s, e, fmt, blk))
    assert_bits_equal(q.from_mx(s, e, fmt, blk, dtype=np.float32), want, fmt)
    got = q.from_mx(s, e, fmt, blk, dtype="float32")
    assert (bits(got)[255] == 0x7FC00000).all()                   # NaN scale: the block NaN
    finite = np.isfinite(want)
    # Exact wherever FP32 holds the value (the smallest element times 2**-127 is a subnormal).
    assert np.array_equal(got[finite].astype(np.float64), q.from_mx(s, e, fmt, blk)[finite])


@pytest.mark.parametrize("pts", [1.0, 0.37, 2.0 ** -20, 1e-45, 2.0 ** -140 * 3, 3.0e38, 6e-39])
def test_from_nvfp4_fp32_every_code_and_scale(compiled, pts):
    """One rounding of e2m1 * ue4m3 * pts: subnormal results, overflow to Inf, NaN scales."""
    e = np.tile(np.arange(16, dtype=np.uint8), (256, 1))
    s = np.arange(256, dtype=np.uint8)[:, None]
    want = fp32(q.from_nvfp4(s, e, pts, block=16))
    assert_bits_equal(q.from_nvfp4(s, e, pts, block=16, dtype=np.float32), want, f"{pts}")
    assert (bits(want)[[0x7F, 0xFF]] == 0x7FC00000).all()


def test_from_nvfp4_fp32_rounds_once(compiled):
    """e2m1 * ue4m3 * pts rounds once: rounding ue4m3 * pts to FP32 first (torchao's order)
    gives other bits for some products; ours are the exact values rounded once."""
    e = np.tile(np.arange(16, dtype=np.uint8), (128, 1))
    s = np.arange(128, dtype=np.uint8)[:, None]
    pts = F32(0.37)
    got = q.from_nvfp4(s, e, pts, dtype=np.float32)
    assert_bits_equal(got, fp32(q.from_nvfp4(s, e, pts)), "once")
    with np.errstate(invalid="ignore"):
        s_pts = formats.get("ue4m3").decode(s).astype(np.float32) * pts
        twice = formats.get("e2m1").decode(e).astype(np.float32) * s_pts
    differ = (bits(got) != bits(twice)) & ~np.isnan(got)
    assert differ.any()


def random_codes(rng: np.random.Generator, fmt: str, shape) -> np.ndarray:
    return rng.integers(0, 1 << formats.get(fmt).bits, shape, dtype=np.uint8)


def adversarial_scales(rng: np.random.Generator, shape) -> np.ndarray:
    """E8M0 codes at both ends of the range (subnormal and overflowing products), NaN, 127."""
    edge = np.array([0, 1, 2, 10, 116, 117, 127, 240, 250, 252, 253, 254, 255], np.uint8)
    return np.where(rng.random(shape) < 0.5, rng.choice(edge, shape),
                    rng.integers(0, 256, shape)).astype(np.uint8)


@pytest.mark.parametrize("fmt", MX_FORMATS)
def test_from_mx_fp32_shapes_axes_and_layouts(compiled, fmt):
    rng = np.random.default_rng(11)
    for shape, axis, blk in (((3, 5, 64), -1, 32), ((3, 64, 5), -2, 32), ((64, 7), 0, 16),
                             ((96,), 0, 32), ((2, 3, 4, 32), 2, 2)):
        e = random_codes(rng, fmt, shape)
        sshape = list(shape)
        sshape[axis] //= blk
        s = adversarial_scales(rng, tuple(sshape))
        want = fp32(q.from_mx(s, e, fmt, blk, axis))
        assert_bits_equal(q.from_mx(s, e, fmt, blk, axis, dtype=np.float32), want,
                          f"{shape} axis {axis}")
    # Non-contiguous views and codes that are not uint8.
    e = random_codes(rng, fmt, (64, 128))
    s = adversarial_scales(rng, (64, 8))
    want = fp32(q.from_mx(s[::2], e[::2, ::2], fmt, 8))
    assert_bits_equal(q.from_mx(s[::2], e[::2, ::2], fmt, 8, dtype=np.float32), want, "strided")
    want = fp32(q.from_mx(s.T, e.T, fmt, 16, axis=0))
    assert_bits_equal(q.from_mx(s.T.astype(np.int64), e.T.astype(np.int16), fmt, 16, axis=0,
                                dtype=np.float32), want, "transposed int")


def test_from_nvfp4_fp32_shapes_and_axes(compiled):
    rng = np.random.default_rng(12)
    for shape, axis in (((4, 3, 32), -1), ((4, 32, 3), -2), ((48,), 0)):
        e = random_codes(rng, "e2m1", shape)
        sshape = list(shape)
        sshape[axis] //= 16
        s = rng.integers(0, 256, sshape, dtype=np.uint8)
        for pts in (1.0, 0.37, 1e-40):
            want = fp32(q.from_nvfp4(s, e, pts, 16, axis))
            assert_bits_equal(q.from_nvfp4(s, e, pts, 16, axis, dtype=np.float32), want,
                              f"{shape} {axis} {pts}")


@pytest.mark.parametrize("fmt", MX_FORMATS)
def test_from_mx_fp32_below_and_above_the_threshold(fmt):
    """The default thresholds: a small input through numpy, a large one through the loop."""
    rng = np.random.default_rng(13)
    for rows in (4, (qmx.KERNEL_MIN // 256) + 3):
        e = random_codes(rng, fmt, (rows, 256))
        s = adversarial_scales(rng, (rows, 8))
        want = fp32(q.from_mx(s, e, fmt))
        assert_bits_equal(q.from_mx(s, e, fmt, dtype=np.float32), want, f"{rows} rows")


def test_from_nvfp4_fp32_below_and_above_the_threshold():
    rng = np.random.default_rng(14)
    for rows in (4, (qnv.KERNEL_MIN // 256) + 3):
        e = random_codes(rng, "e2m1", (rows, 256))
        s = rng.integers(0, 256, (rows, 16), dtype=np.uint8)
        want = fp32(q.from_nvfp4(s, e, 0.37))
        assert_bits_equal(q.from_nvfp4(s, e, 0.37, dtype=np.float32), want, f"{rows} rows")


@pytest.mark.parametrize("fmt", ["e3m2", "e2m3", "e2m1"])
def test_from_mx_fp32_code_out_of_range(compiled, fmt):
    e = np.zeros((4, 32), np.uint8)
    e[3, 7] = 1 << formats.get(fmt).bits
    s = np.zeros((4, 1), np.uint8)
    top = (1 << formats.get(fmt).bits) - 1
    with pytest.raises(FormatError, match=rf"^Codes of {fmt} must lie in \[0, {top}\]$"):
        q.from_mx(s, e, fmt, dtype=np.float32)


def test_from_nvfp4_fp32_code_out_of_range(compiled):
    e = np.zeros((4, 16), np.uint8)
    e[2, 3] = 16
    with pytest.raises(FormatError, match=r"^Codes of e2m1 must lie in \[0, 15\]$"):
        q.from_nvfp4(np.zeros((4, 1), np.uint8), e, dtype=np.float32)


def test_from_mx_bad_dtype():
    s, e = np.zeros((1, 1), np.uint8), np.zeros((1, 32), np.uint8)
    with pytest.raises(q.QuantizeError, match=r"^dtype must be float64 or float32, not "
                                              r"<class 'numpy.float16'>$"):
        q.from_mx(s, e, "e4m3", dtype=np.float16)
    with pytest.raises(q.QuantizeError, match=r"^dtype must be float64 or float32, not 'x'$"):
        q.from_nvfp4(s, e[:, :16], dtype="x")


def test_from_mx_float64_is_unchanged():
    rng = np.random.default_rng(15)
    e = random_codes(rng, "e4m3", (8, 64))
    s = adversarial_scales(rng, (8, 2))
    want = formats.get("e4m3").decode(e) * np.repeat(formats.get("e8m0").decode(s), 32, axis=1)
    got = q.from_mx(s, e, "e4m3")
    assert got.dtype == np.float64
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64))


# -- torchao ---------------------------------------------------------------------------------

def _torch():
    pytest.importorskip("torchao")
    import torch
    return torch


def torchao_from_mx(s: np.ndarray, e: np.ndarray, fmt: str, block: int) -> np.ndarray:
    torch = _torch()
    from torchao.prototype.mx_formats.mx_tensor import to_dtype
    dtypes = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "e3m2": "fp6_e3m2",
              "e2m3": "fp6_e2m3", "e2m1": torch.float4_e2m1fn_x2}
    d = torch.from_numpy(formats.pack_fp4(e) if fmt == "e2m1" else e)
    if fmt in ("e4m3", "e5m2"):
        d = d.view(dtypes[fmt])
    scale = torch.from_numpy(s).view(torch.float8_e8m0fnu)
    return to_dtype(d, scale, dtypes[fmt], block, torch.float32).numpy()


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1"])
def test_from_mx_fp32_equals_torchao(compiled, fmt):
    """torchao's to_dtype: FP32 element times FP32 2**(s - 127), the same one rounding. Its NaN
    bits differ (torch casts an FP8 NaN to 0x7FF00000 with its sign): NaN positions compared."""
    s, e = every_code_times_every_scale(fmt)
    blk = e.shape[1]
    rng = np.random.default_rng(16)
    e2 = random_codes(rng, fmt, (64, 256))
    s2 = adversarial_scales(rng, (64, 256 // blk))
    for ss, ee in ((s, e), (s2, e2)):
        got = q.from_mx(ss, ee, fmt, blk, dtype=np.float32)
        peer = torchao_from_mx(ss, ee, fmt, blk)
        nan = np.isnan(got)
        assert np.array_equal(nan, np.isnan(peer))
        assert np.array_equal(bits(got)[~nan], bits(peer)[~nan])


def torchao_from_nvfp4(s: np.ndarray, e: np.ndarray, pts) -> np.ndarray:
    torch = _torch()
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor
    t = NVFP4Tensor(torch.from_numpy(formats.pack_fp4(e)),
                    torch.from_numpy(s).view(torch.float8_e4m3fn), 16, torch.float32,
                    per_tensor_scale=None if pts is None else torch.tensor(float(pts)))
    return t.dequantize(torch.float32).numpy()


def test_from_nvfp4_fp32_equals_torchao_single_level(compiled):
    """Single-level NVFP4 (no per-tensor scale): torchao's e2m1 * ue4m3 is exact, as ours."""
    rng = np.random.default_rng(17)
    x = rng.standard_normal((64, 256)).astype(np.float32) * F32(100)
    s, e, _ = q.to_nvfp4(x, 1.0)
    s[0, :] = np.arange(16, dtype=np.uint8) * 8        # subnormal UE4M3 scales, 0x78: 256
    s[1, :2] = 0x7F                                     # NaN
    got = q.from_nvfp4(s, e, 1.0, dtype=np.float32)
    peer = torchao_from_nvfp4(s, e, None)
    nan = np.isnan(got)
    assert np.array_equal(nan, np.isnan(peer))
    assert np.array_equal(bits(got)[~nan], bits(peer)[~nan])


def test_from_nvfp4_fp32_differs_from_torchao_two_level_only_by_its_rounding(compiled):
    """With a per-tensor scale torchao rounds fl32(pts * ue4m3) first; where that product is
    exact (here pts a power of two) the two agree bit for bit, elsewhere they may not."""
    rng = np.random.default_rng(18)
    x = rng.standard_normal((64, 256)).astype(np.float32)
    s, e, pts = q.to_nvfp4(x)
    got = q.from_nvfp4(s, e, pts, dtype=np.float32)
    peer = torchao_from_nvfp4(s, e, pts)
    twice = ((e2m1 := formats.get("e2m1").decode(e).astype(np.float32))
             * np.repeat((formats.get("ue4m3").decode(s).astype(np.float32) * pts), 16, 1))
    assert np.array_equal(bits(peer), bits(twice.astype(np.float32)))
    assert np.array_equal(bits(got), bits(fp32(q.from_nvfp4(s, e, pts))))
    assert (bits(got) != bits(peer)).any()
    p2 = F32(2.0 ** -9)
    assert np.array_equal(bits(q.from_nvfp4(s, e, p2, dtype=np.float32)),
                          bits(torchao_from_nvfp4(s, e, p2)))
    assert e2m1.dtype == np.float32
