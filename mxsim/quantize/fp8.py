"""FP8 quantisation with FP32 scales: per tensor, per row and per 128-block, as the peers do.

Three recipes of the frameworks that feed ``torch._scaled_mm``, each reproduced with its own FP32
arithmetic (those roundings are the recipe's, made on purpose and named here):

``to_fp8_amax`` (torchao ``Float8Linear``, tensor-wise and row-wise)
    ``scale = fl32(max / max(amax, 1e-12))`` (the division in float64, as torchao does),
    optionally rounded down to a power of two (torchao's row-wise recipe), elements
    ``fmt(clamp(fl32(x * scale), -max, max))`` rounded to nearest even; the factor the GEMM
    multiplies by is ``fl32(1 / scale)`` (torchao passes ``scale.reciprocal()`` to
    ``_scaled_mm``).
``to_fp8_blocks`` (DeepSeek-V3's ``act_quant`` / ``weight_quant``)
    ``s = fl32(amax / max)`` per block of 1 x 128 (activations) or 128 x 128 (weights),
    elements ``fmt(fl32(x / s))`` rounded to nearest even (saturating); the GEMM multiplies by
    ``s``. An all-zero block gets ``s = 1`` (DeepSeek's kernel would divide by zero).

Inputs must be finite (an amax of Inf or NaN has no scale): anything else raises
:class:`QuantizeError` in one line. The element rounding indexes the table of
:func:`mxsim.quantize.elements.lut` (``fast=True``, the default) or calls
:meth:`~mxsim.formats.Format.encode` on each value (``fast=False``); the tests hold the two
equal.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .. import formats
from .blocks import fp32_bits
from .elements import lut, lut_keys
from .rules import QuantizeError

__all__ = ["to_fp8_amax", "to_fp8_blocks", "FP8_FORMATS"]

FP8_FORMATS = ("e4m3", "e5m2")
_EPS = 1e-12                  # torchao's float8_utils.EPS


def _fp8(fmt: str) -> formats.Format:
    if fmt not in FP8_FORMATS:
        raise QuantizeError(f"FP8 recipes take {' or '.join(FP8_FORMATS)} elements, not {fmt!r}")
    return formats.get(fmt)


def _finite(x: Any, what: str) -> npt.NDArray[np.float32]:
    """``x`` as float32 values (exactly: see :func:`~mxsim.quantize.blocks.fp32_bits`),
    refusing Inf and NaN."""
    f = fp32_bits(x).view(np.float32)
    if f.size and not np.isfinite(f).all():
        raise QuantizeError(f"The {what} recipe needs finite inputs (an Inf or NaN has no "
                            f"amax scale)")
    return f


def _encode(y: npt.NDArray[np.float32], f: formats.Format, fast: bool) -> npt.NDArray[np.uint8]:
    """Codes of finite FP32 values, rounded once to nearest even, saturating."""
    y = np.ascontiguousarray(y, np.float32)
    if fast:
        return lut(f.name, "rne", "zero").take(lut_keys(y))
    return f.encode(y, "rne", saturate=True).astype(np.uint8)


def _pow2_floor(s: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Each positive normal FP32 value rounded down to a power of two (its fraction bits
    cleared): torchao's ``exp2(floor(log2(s)))`` without its log2's rounding."""
    bits = s.view(np.uint32) & np.uint32(0xFF800000)
    return bits.view(np.float32)


def to_fp8_amax(x: Any, fmt: str = "e4m3", *, axis: int | None = None, pow2: bool = False,
                fast: bool = True, amax: float | None = None
                ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float32]]:
    """Codes of ``x`` and the FP32 factors that undo the scale, torchao's tensor/row-wise cast.

    ``axis=None`` scales the whole tensor (the factor has shape ``()``); an axis scales each
    slice along it (the factor keeps that axis with length 1, as ``_scaled_mm``'s row-wise
    scales are shaped: ``(M, 1)`` for A with ``axis=-1``, ``(1, N)`` for B with ``axis=-2``).
    ``amax`` (tensor-wise only) replaces the tensor's own: delayed scaling's, from earlier
    steps; elements beyond it saturate.
    """
    f = _fp8(fmt)
    v = _finite(x, "fp8 amax")
    if amax is not None:
        if axis is not None or not np.isfinite(amax) or amax < 0:
            raise QuantizeError(f"amax must be a finite non-negative number for a "
                                f"tensor-wise scale, not {amax!r} (axis {axis})")
        amax = np.float32(amax)
    elif v.size:
        amax = np.abs(v).max(axis=axis, keepdims=axis is not None)
    else:
        amax = np.float32(0)
    scale = (f.max / np.maximum(np.asarray(amax, np.float64), _EPS)).astype(np.float32)
    if pow2:
        scale = _pow2_floor(np.asarray(scale, np.float32))
    with np.errstate(over="ignore"):         # clamped on the next line, as torchao does
        y = v * scale
    y = np.clip(y, np.float32(-f.max), np.float32(f.max))
    factor = np.float32(1.0) / np.asarray(scale, np.float32)
    return _encode(y, f, fast), np.asarray(factor, np.float32)


def to_fp8_blocks(x: Any, fmt: str = "e4m3", *, tile: tuple[int, int] = (1, 128),
                  fast: bool = True) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float32]]:
    """Codes of ``x`` (..., R, C) and one FP32 factor per ``tile`` of its last two axes,
    DeepSeek-V3's block cast: ``(1, 128)`` for activations (A, blocks along K) and
    ``(128, 128)`` for weights (B as (K, N)). The factors have shape
    ``(..., R / tile[0], C / tile[1])``."""
    f = _fp8(fmt)
    v = _finite(x, "fp8-block")
    if v.ndim < 2:
        raise QuantizeError(f"The fp8-block recipe takes at least 2 dimensions, not {v.ndim}")
    tr, tc = tile
    r, c = v.shape[-2:]
    if r % tr or c % tc:
        raise QuantizeError(f"The fp8-block recipe needs ({r}, {c}) to be multiples of the "
                            f"{tr} x {tc} tile")
    t = v.reshape(v.shape[:-2] + (r // tr, tr, c // tc, tc))
    amax = np.abs(t).max(axis=(-3, -1))
    s = (amax / np.float32(f.max)).astype(np.float32)
    s = np.where(s == 0, np.float32(1.0), s).astype(np.float32)
    with np.errstate(over="ignore", under="ignore"):
        y = t / s[..., :, None, :, None]
    return _encode(y.reshape(v.shape), f, fast), s
