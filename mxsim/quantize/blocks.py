"""The input side of block quantisation: FP32 bit patterns of the input, laid out in blocks.

Inputs are float32, bfloat16, float16, or float64 holding FP32 values exactly
(:func:`fp32_bits`); blocks run along one axis (:func:`to_blocks` / :func:`from_blocks`).
Also the checks of axes, block sizes, code arrays and random bits that every quantiser shares.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import formats
from ..formats import Format
from . import _kernel
from .rules import QuantizeError

__all__ = ["FP32_INF", "FP32_QNAN", "fp32_bits", "check_axis", "check_block", "to_blocks",
           "from_blocks", "draw_bits", "row_max", "check_codes", "apply_scales", "out_dtype",
           "fp32_table", "decode_fp32"]

FP32_INF = 0x7F800000      # FP32 +Inf bits; magnitudes above it are NaN
FP32_QNAN = 0x7FC00000     # the NaN of a float64 NaN cast to FP32 (every NaN dequantises to it)


def fp32_bits(x: Any) -> npt.NDArray[np.uint32]:
    """FP32 bit patterns of a float array, without rounding anything."""
    a = np.asarray(x)
    if a.dtype == np.float32:
        return a.view(np.uint32) if a.flags.c_contiguous else a.copy().view(np.uint32)
    if a.dtype == np.float16:
        return a.astype(np.float32).view(np.uint32)
    if a.dtype.name == "bfloat16":
        return np.ascontiguousarray(a).view(np.uint16).astype(np.uint32) << np.uint32(16)
    if a.dtype == np.float64:
        # Out-of-range values overflow and signalling NaNs raise FE_INVALID in these casts;
        # both are caught by the exactness test that follows.
        with np.errstate(over="ignore", invalid="ignore"):
            f = a.astype(np.float32)
            exact = (f.astype(np.float64) == a) | (np.isnan(a) & np.isnan(f))
        if not exact.all():
            bad = a[~exact].flat[0]
            raise QuantizeError(f"float64 input must hold FP32 values exactly (the scale rules "
                                f"are defined on FP32), but {bad!r} is not one; cast it to "
                                f"float32 first if rounding it is intended")
        return f.view(np.uint32)
    raise QuantizeError(f"Input must be a float array (float32, bfloat16, float16 or float64), "
                        f"not {a.dtype}")


def check_axis(axis: Any, ndim: int) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise QuantizeError(f"Axis must be an integer, not {axis!r}")
    if ndim == 0:
        raise QuantizeError("Input must have at least one dimension, not a scalar")
    if not -ndim <= axis < ndim:
        raise QuantizeError(f"Axis must be in [{-ndim}, {ndim - 1}] for a {ndim}-d input, "
                            f"not {axis}")
    return int(axis) % ndim


def check_block(block: Any, length: int, axis: int) -> int:
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise QuantizeError(f"Block must be a positive integer, not {block!r}")
    if length % block:
        raise QuantizeError(f"Block ({block}) must divide the length of axis {axis} "
                            f"({length})")
    return int(block)


def to_blocks(bits: npt.NDArray[np.uint32], axis: int, block: int) -> npt.NDArray[np.uint32]:
    """(n_blocks, block) view or copy of the input with ``axis`` last, blocks in C order."""
    moved = np.moveaxis(bits, axis, -1)
    return np.ascontiguousarray(moved).reshape(-1, block)


def from_blocks(arr: npt.NDArray, shape: tuple[int, ...], axis: int) -> npt.NDArray:
    """Inverse of :func:`to_blocks` for an array whose moved layout has shape ``shape``."""
    return np.ascontiguousarray(np.moveaxis(arr.reshape(shape), -1, axis))



def draw_bits(shape: tuple[int, ...], seed: int | None, random_bits: Any,
              sr_bits: int) -> npt.NDArray[np.uint64]:
    """Random integers in [0, 2**sr_bits) per element, as :meth:`Format.encode` draws them
    (:func:`mxsim.formats.draw_random_bits`); bad arguments raise QuantizeError."""
    return formats.draw_random_bits(shape, seed, random_bits, sr_bits, QuantizeError)


def row_max(a: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    """Maximum of each row; ``reduceat`` is several times faster than ``max(axis=1)`` on the
    short rows of a block."""
    n, blk = a.shape
    if n == 0:
        return np.zeros(0, a.dtype)
    return np.maximum.reduceat(a.reshape(-1), np.arange(0, n * blk, blk))


def check_codes(scale_codes: Any, elem_codes: Any, block: int, axis: int,
                 ) -> tuple[npt.NDArray, npt.NDArray, int, int]:
    s = np.asarray(scale_codes)
    e = np.asarray(elem_codes)
    for name, arr in (("Scale codes", s), ("Element codes", e)):
        if arr.dtype.kind not in "ui":
            raise QuantizeError(f"{name} must be an integer array, not {arr.dtype}")
    ax = check_axis(axis, e.ndim)
    blk = check_block(block, e.shape[ax], ax)
    want = e.shape[:ax] + (e.shape[ax] // blk,) + e.shape[ax + 1:]
    if s.shape != want:
        raise QuantizeError(f"Scale codes must have shape {want} for elements of shape "
                            f"{e.shape} in blocks of {blk} along axis {ax}, not {s.shape}")
    return s, e, ax, blk


def apply_scales(values: npt.NDArray[np.float64], scales: npt.NDArray[np.float64], ax: int,
                  blk: int) -> npt.NDArray[np.float64]:
    return values * np.repeat(scales, blk, axis=ax)


def out_dtype(dtype: Any) -> np.dtype:
    """``float64`` (exact values) or ``float32`` (rounded once), as a numpy dtype."""
    try:
        d = np.dtype(dtype)
    except TypeError:
        d = np.dtype(np.int8)       # refused below (None == np.dtype(np.float64) in numpy)
    if d not in (np.dtype(np.float64), np.dtype(np.float32)):
        raise QuantizeError(f"dtype must be float64 or float32, not {dtype!r}")
    return d


@cache
def fp32_table(fmt_name: str, top_bit: bool = True) -> npt.NDArray[np.float32]:
    """FP32 value of every byte as a code of ``fmt_name`` (exact: every element and scale
    format fits FP32; NaN codes give 0x7FC00000). Bytes beyond the format's codes give 0 (the
    caller checks the range); ``top_bit=False`` reads ``byte & 0x7F`` (UE4M3's ignored top
    bit)."""
    fmt = formats.get(fmt_name)
    byte = np.arange(256)
    code = byte if top_bit else byte & 0x7F
    ok = code < (1 << fmt.bits)
    table = np.zeros(256, np.float32)
    table[ok] = fmt.decode(code[ok].astype(np.uint8)).astype(np.float32)
    table.flags.writeable = False
    return table


def decode_fp32(s: npt.NDArray, e: npt.NDArray, ax: int, blk: int, fmt: Format,
                stab: npt.NDArray[np.float32], pts: np.float32) -> npt.NDArray[np.float32]:
    """``fl32(fl32(decode(e) * stab[s]) * pts)`` through the compiled loop, NaN 0x7FC00000.

    ``s``/``e`` are checked by :func:`check_codes`; scale codes are bytes. An element code out
    of the format's range raises what :meth:`Format.decode` raises.
    """
    if e.dtype != np.uint8:
        e = fmt.checked_codes(e).astype(np.uint8)
    codes = to_blocks(e, ax, blk)
    scales = np.ascontiguousarray(np.moveaxis(s.astype(np.uint8, copy=False), ax, -1))
    bits, seen = _kernel.decode(scales.reshape(-1), codes, fp32_table(fmt.name), stab, pts)
    if seen >> fmt.bits:
        fmt.checked_codes(e)                # raises FormatError, as decode does
    moved = np.moveaxis(e, ax, -1).shape
    return from_blocks(bits.view(np.float32), moved, ax)
