"""The NVFP4 pipeline: torchao 0.18's recipe (UE4M3 scales of 16 E2M1 elements, one FP32
scale per tensor), bit for bit, and the exact values of NVFP4 codes."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import formats
from ..formats import DEFAULT_SR_BITS, Format, Rounding
from . import _kernel
from .blocks import (
    FP32_INF,
    apply_scales,
    check_axis,
    check_block,
    check_codes,
    decode_fp32,
    draw_bits,
    fp32_bits,
    fp32_table,
    from_blocks,
    out_dtype,
    row_max,
    to_blocks,
)
from .elements import elements_exact, lut, lut_keys, torchao_nan_code
from .rules import NanBlocks, QuantizeError, rounding_mode

__all__ = ["nvfp4_tensor_scale", "to_nvfp4", "from_nvfp4"]

_E2M1 = "e2m1"
_UE4M3_MIN = np.float32(2.0 ** -6)     # torch.finfo(float8_e4m3fn).tiny: no subnormal scales
_UE4M3_MAX = np.float32(448.0)
_E4M3_NAN_AS_FP32 = 0x7FF00000  # torch's float8_e4m3fn 0x7F converted to float32
#: Elements from which the compiled loop (numba) encodes, chunks on every core; below, numpy.
KERNEL_MIN = 1 << 16


def nvfp4_tensor_scale(x: Any) -> np.float32:
    """The NVFP4 per-tensor scale of ``x``: ``fl32(amax / (448 * 6))``, as torchao computes it.

    An all-zero tensor gets 1.0 (Transformer Engine's rule; torchao would divide by 0).

    Raises
    ------
    QuantizeError
        When ``x`` holds NaN or Inf (its amax then gives no usable scale).
    """
    bits = fp32_bits(x)
    if bits.size == 0:
        return np.float32(1.0)
    return _tensor_scale_of((bits & np.uint32(0x7FFFFFFF)).max())


def _tensor_scale_of(amax: np.uint32) -> np.float32:
    """:func:`nvfp4_tensor_scale` of a tensor whose amax has the bit pattern ``amax``."""
    if amax >= FP32_INF:
        raise QuantizeError("The NVFP4 per-tensor scale needs a finite amax, but the input "
                            "holds NaN or Inf; pass per_tensor_scale explicitly")
    if amax == 0:
        return np.float32(1.0)
    with np.errstate(under="ignore"):
        return np.float32(np.uint32(amax).view(np.float32) / np.float32(448.0 * 6.0))


def _pts(per_tensor_scale: Any, block_amax: npt.NDArray[np.uint32]) -> np.float32:
    """The per-tensor scale given, checked; or, None, the tensor's own from its blocks' amax."""
    if per_tensor_scale is None:
        return (_tensor_scale_of(block_amax.max()) if block_amax.size
                else np.float32(1.0))
    p = np.asarray(per_tensor_scale)
    if p.size != 1 or p.dtype.kind not in "fiu":
        raise QuantizeError(f"per_tensor_scale must be one number, not {per_tensor_scale!r}")
    with np.errstate(over="ignore", under="ignore"):
        f = p.astype(np.float32).reshape(())    # nearest FP32, as torch.tensor(v) would give
    if not (np.isfinite(f) and f > 0):
        raise QuantizeError(f"per_tensor_scale must be positive and finite in FP32, not "
                            f"{per_tensor_scale!r}")
    return np.float32(f)


def to_nvfp4(x: Any, per_tensor_scale: Any = None, block: int = 16, two_d: bool = False,
             rounding: Rounding | str = "rne", axis: int = -1, seed: int | None = None, *,
             random_bits: Any = None, sr_bits: int = DEFAULT_SR_BITS,
             nan_blocks: NanBlocks | str = "error",
             ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8], np.float32]:
    """Quantise ``x`` to NVFP4 with torchao 0.18's recipe: UE4M3 scales, E2M1 elements.

    With ``p`` the per-tensor scale (given, rounded to the nearest FP32 value; or
    :func:`nvfp4_tensor_scale`), each block of
    ``block`` elements along ``axis`` computes, in FP32 as torchao does on the CPU (these FP32
    roundings are the recipe's own and are reproduced on purpose, so an element is rounded
    twice: once by the FP32 multiply, once to E2M1)::

        s  = fl8e4m3(clamp(fl32(fl32(amax / 6) / p), 2**-6, 448))      # round to nearest even
        r  = fl32(fl32(1 / p) / s)
        q  = e2m1(fl32(x * r))                                          # saturating

    ``per_tensor_scale=1.0`` reproduces torchao's single-level mode (``per_tensor_scale=None``
    there). ``two_d`` takes amax over ``block`` x ``block`` tiles of the last two axes
    (Transformer Engine's 2-D weight recipe) and repeats each tile's scale on its rows, so the
    scale codes keep the 1-D shape; the FP32 arithmetic stays as above.

    Special values: a block with a NaN gets scale 0x7F (NaN) and every element the code
    torchao's FP4 cast gives torch's NaN ``0x7FF00000`` (code 4); an Inf gives scale 448 and
    ±6 for the Inf; an all-zero block gets scale 2**-6 and ±0.

    Returns
    -------
    (scale_codes, elem_codes, per_tensor_scale)
        UE4M3 and E2M1 codes as ``np.uint8`` (shaped as :func:`to_mx` shapes them) and the
        per-tensor scale as ``np.float32``.
    """
    fmt = formats.get(_E2M1)
    mode = rounding_mode(rounding)
    policy = NanBlocks.of(nan_blocks)
    bits = fp32_bits(x)
    ax = check_axis(axis, bits.ndim)
    blk = check_block(block, bits.shape[ax], ax)
    if not isinstance(two_d, bool):
        raise QuantizeError(f"two_d must be True or False, not {two_d!r}")
    moved = np.ascontiguousarray(np.moveaxis(bits, ax, -1))
    blocks = moved.reshape(-1, blk)
    compiled = blocks.size >= KERNEL_MIN and _kernel.available()
    block_amax = (_kernel.block_amax(blocks) if compiled
                  else row_max(blocks & np.uint32(0x7FFFFFFF)))
    pts = _pts(per_tensor_scale, block_amax)
    amax = (_tile_amax(blocks & np.uint32(0x7FFFFFFF), moved, blk, bits.ndim, ax) if two_d
            else block_amax)
    special = amax > FP32_INF      # NaN; an Inf amax follows the FP32 arithmetic below
    if special.any() and policy is NanBlocks.ERROR:
        all_nan = ((blocks & np.uint32(0x7FFFFFFF)) > FP32_INF).all(axis=1)
        if all_nan.any():
            raise QuantizeError(f"Block {int(np.flatnonzero(all_nan)[0])} (in C order, blocks "
                                f"along axis {ax}) holds only NaN, so it has no scale; replace "
                                f"the NaNs, or pass nan_blocks='quantize'")
    finite = np.where(special, 0, amax).astype(np.uint32)
    if mode is Rounding.STOCHASTIC:
        scale, r = _scales(finite, pts)
        rb = to_blocks(draw_bits(bits.shape, seed, random_bits, sr_bits), ax, blk)
        elems = _elements_stochastic(_times(blocks, r).view(np.uint32), fmt, mode, rb, sr_bits)
    elif compiled:
        scale, elems = _compiled_codes(blocks, finite, pts, fmt, mode)
    else:
        scale, r = _scales(finite, pts)
        elems = lut(fmt.name, mode.value, "torchao").take(lut_keys(_times(blocks, r)))
    if special.any():
        # NaN amax: the scale is e4m3 NaN 0x7F; torch turns it into 0x7FF00000 in FP32, and
        # that NaN (the second operand) is what x * r gives for every element.
        scale[special] = 0x7F
        elems[special] = torchao_nan_code(_E4M3_NAN_AS_FP32, fmt)
    moved_shape = moved.shape
    return (from_blocks(scale, moved_shape[:-1] + (moved_shape[-1] // blk,), ax),
            from_blocks(elems, moved_shape, ax), pts)


def _compiled_codes(blocks: npt.NDArray[np.uint32], amax: npt.NDArray[np.uint32],
                    pts: np.float32, fmt: Format, mode: Rounding,
                    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
    """:func:`_scales` and the compiled element loop, chunk by chunk on every core, each
    chunk writing its rows of the result."""
    scale = np.empty(len(blocks), np.uint8)
    elems = np.empty(blocks.shape, np.uint8)

    table, values = lut("e4m3", "rne", "zero"), _e4m3_values()

    def chunk(sl: slice) -> None:        # _scales, compiled; then the elements
        scale[sl], r = _kernel.nvfp4_scales(amax[sl], pts, _UE4M3_MIN, _UE4M3_MAX, table,
                                            values)
        _kernel.multiply_encode(blocks[sl], r, fmt, mode.value, out=elems[sl])
    _kernel.in_chunks(len(blocks), _kernel.chunk_rows(*blocks.shape), chunk)
    return scale, elems


@functools.cache
def _e4m3_values() -> npt.NDArray[np.float32]:
    """Every E4M3 code's value in FP32 (exact; NaN for 0x7F and 0xFF)."""
    return formats.get("e4m3").decode(np.arange(256, dtype=np.uint8)).astype(np.float32)


def _tile_amax(mag: npt.NDArray[np.uint32], moved: npt.NDArray[np.uint32], blk: int,
               ndim: int, ax: int) -> npt.NDArray[np.uint32]:
    """Per 1-D block, the amax of its ``blk`` x ``blk`` tile of the last two axes (``moved``
    has the blocks' axis last; ``mag`` is its magnitudes in blocks)."""
    if ndim < 2 or ax < ndim - 2:
        raise QuantizeError("two_d needs at least 2 dimensions and axis -1 or -2")
    rows = moved.shape[-2] if moved.ndim >= 2 else 1
    if rows % blk:
        raise QuantizeError(f"two_d needs the other tile axis ({rows}) to be a multiple "
                            f"of the block ({blk})")
    t = mag.reshape(moved.shape[:-2] + (rows // blk, blk, moved.shape[-1] // blk, blk))
    tile = t.max(axis=(-3, -1), keepdims=True)
    return np.broadcast_to(tile, t.shape[:-1] + (1,)).reshape(-1)


def _scales(amax: npt.NDArray[np.uint32], pts: np.float32
            ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float32]]:
    """UE4M3 scale codes of finite ``amax`` and each block's FP32 multiplier ``r``, in the
    recipe's FP32 arithmetic (see :func:`to_nvfp4`)."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        bs = amax.view(np.float32) / np.float32(6.0)
        s = bs / pts
        s = np.minimum(np.maximum(s, _UE4M3_MIN), _UE4M3_MAX)
        # s is finite and within [2**-6, 448]: the table rounds it as encode would (the
        # table's key decides RNE exactly; tests/mxsim/test_quantize.py holds them equal).
        scale = lut("e4m3", "rne", "zero").take(lut_keys(s.astype(np.float32)))
        s8 = formats.get("e4m3").decode(scale).astype(np.float32)
        r = (np.float32(1.0) / pts) / s8
    return scale, r


def _times(blocks: npt.NDArray[np.uint32], r: npt.NDArray[np.float32]) -> npt.NDArray:
    """The FP32 products ``x * r`` of every element (r per block), one rounding each."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return blocks.view(np.float32) * r[:, None]


def _elements_stochastic(yb: npt.NDArray[np.uint32], fmt: Format, mode: Rounding,
                         rb: npt.NDArray[np.uint64], sr_bits: int) -> npt.NDArray[np.uint8]:
    """E2M1 codes of the FP32 values ``yb`` by stochastic rounding; NaN as torchao casts it."""
    elems = elements_exact(yb, np.zeros(len(yb), np.int64), fmt, mode, rb, sr_bits)
    nan = (yb & np.uint32(0x7FFFFFFF)) > FP32_INF
    elems[nan] = torchao_nan_code(yb[nan], fmt)
    return elems


def from_nvfp4(scale_codes: Any, elem_codes: Any, per_tensor_scale: Any = 1.0,
               block: int = 16, axis: int = -1, *, dtype: Any = np.float64) -> npt.NDArray:
    """Values of NVFP4 codes: ``e2m1 * ue4m3 * per_tensor_scale``, exact as float64.

    The product has at most 2 + 4 + 24 significant bits, so nothing rounds. A NaN scale (0x7F;
    the top bit of a UE4M3 byte is ignored) makes its block NaN.

    ``dtype=np.float32`` gives the same values rounded once to FP32 (round to nearest even,
    subnormals and overflow to ±Inf included), every NaN 0x7FC00000. ``e2m1 * ue4m3`` is exact
    in FP32, so the compiled loop (from 2**16 elements, with numba) rounds once, in the FP32
    multiply by the per-tensor scale. torchao's ``NVFP4Tensor.dequantize`` rounds
    ``per_tensor_scale * ue4m3`` to FP32 first, a second rounding (docs/quantize.md).
    """
    s, e, ax, blk = check_codes(scale_codes, elem_codes, block, axis)
    dt = out_dtype(dtype)
    if s.size and int(s.max()) > 0xFF:
        raise QuantizeError("Scale codes must be UE4M3 bytes (0..255)")
    pts = _pts(per_tensor_scale, np.zeros(0, np.uint32))
    if dt == np.float32 and e.size >= KERNEL_MIN and _kernel.available():
        return decode_fp32(s, e, ax, blk, formats.get(_E2M1), fp32_table("ue4m3", False), pts)
    scales = formats.get("ue4m3").decode(s.astype(np.uint8)) * np.float64(pts)
    values = apply_scales(formats.get(_E2M1).decode(e), scales, ax, blk)
    with np.errstate(over="ignore", under="ignore"):    # FP32: one rounding, to ±Inf or 0
        return values.astype(dt, copy=False)
