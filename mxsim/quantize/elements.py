"""The element encoder of block quantisation: codes of ``x * 2**-k``, rounded once.

:func:`elements_fast` indexes a table that :func:`mxsim.formats.round_to` filled, keyed by the
scaled FP32 value's sign, exponent, top 8 mantissa bits and a sticky bit (enough for every
element format, whose guard bit lies at most 7 bits below the leading one);
:func:`elements_exact` calls :meth:`~mxsim.formats.Format.encode` on exact float64 values.
The tests hold the two equal.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import formats
from ..formats import Format, Overflow, Rounding
from .blocks import FP32_INF

__all__ = ["torchao_nan_code", "lut", "lut_keys", "elements_fast", "elements_exact"]

_CHUNK = 1 << 20           # elements per chunk on the exact path (bounds its memory)


def torchao_nan_code(nan_bits: Any, fmt: Format) -> npt.NDArray[np.uint8]:
    """The element code torchao's cast gives an FP32 NaN with these bits.

    FP8: torch's cast gives 0x7F with the NaN's sign. FP6/FP4: torchao's bit-trick cast has
    no NaN branch, so the NaN takes its "normal" path: exponent rebiased and mantissa rounded
    to nearest even in int32, truncated to 8 bits, sign ORed in.
    """
    b = np.asarray(nan_bits, np.uint32).astype(np.int64)
    sign = (b >> 31) & 1
    if fmt.name in ("e4m3", "e5m2"):
        return (0x7F | (sign << 7)).astype(np.uint8)
    m, shift = fmt.man_bits, 23 - fmt.man_bits
    mag = b & 0x7FFFFFFF
    v = mag + ((fmt.bias - 127) << 23) + ((1 << (shift - 1)) - 1) + ((mag >> shift) & 1)
    return (((v >> shift) & 0xFF) | (sign << (fmt.exp_bits + m))).astype(np.uint8)


@cache
def lut(fmt_name: str, rounding: str, specials: str) -> npt.NDArray[np.uint8]:
    """Element code of every 17-bit key ``sign | FP32 exponent | top 8 mantissa bits``.

    The lowest key bit is the 8th mantissa bit ORed with every bit below it (a sticky bit).
    Every element format keeps at most 6 bits below the leading one and rounds on the 7th, so
    the key decides the rounding exactly; :func:`mxsim.formats.round_to` fills the table.
    Keys of Inf and NaN follow ``specials``: ``"zero"`` (decided elsewhere) or ``"torchao"``
    (its saturating casts: Inf to ±max, NaN as :func:`torchao_nan_code`).
    """
    fmt = formats.get(fmt_name)
    key = np.arange(1 << 17, dtype=np.int64)
    sign = (key >> 16).astype(np.uint8)
    field = (key >> 8) & 0xFF
    man = key & 0xFF
    sig = np.where(field > 0, man | 0x100, man).astype(np.uint64)
    lsb_exp = np.maximum(field, 1) - 127 - 8
    finite = field != 0xFF
    codes = formats.round_to(fmt, sign, np.where(finite, lsb_exp, 0),
                             np.where(finite, sig, 0), False, rounding, Overflow.SATURATE)
    codes = codes.astype(np.uint8)
    if specials == "torchao":
        inf = field == 0xFF
        maxc = formats.round_to(fmt, sign, 1000, 1, False, "rne",
                                Overflow.SATURATE).astype(np.uint8)
        nan = torchao_nan_code((key << 15).astype(np.uint32), fmt)
        codes = np.where(inf & (man == 0), maxc, np.where(inf, nan, codes))
    else:
        codes = np.where(finite, codes, 0)
    codes = codes.astype(np.uint8)
    codes.flags.writeable = False
    return codes


def lut_keys(y: npt.NDArray[np.float32]) -> npt.NDArray[np.uint32]:
    """17-bit table keys of FP32 values: bits 31..15 with bits 14..0 ORed into bit 15."""
    yb = y.view(np.uint32)
    t = yb & np.uint32(0x7FFF)
    t += np.uint32(0x7FFF)       # bit 15 set iff any of bits 14..0 is set
    t |= yb
    t >>= np.uint32(15)
    return t


def elements_fast(bits: npt.NDArray[np.uint32], k: npt.NDArray[np.int64], fmt: Format,
                   rounding: Rounding) -> npt.NDArray[np.uint8]:
    """Codes of ``x * 2**-k`` for finite blocks, rounded by table lookup.

    ``x * 2**-k`` is formed in FP32: it is exact unless the product is below 2**-126, and every
    such product rounds to ±0 in every element format however the FP32 multiply rounds it.
    """
    mult = np.ldexp(np.float32(1), (-k).astype(np.int32)).astype(np.float32)
    with np.errstate(under="ignore", over="ignore", invalid="ignore"):
        y = bits.view(np.float32) * mult[:, None]
    return lut(fmt.name, rounding.value, "zero").take(lut_keys(y))


def elements_exact(bits: npt.NDArray[np.uint32], k: npt.NDArray[np.int64], fmt: Format,
                    rounding: Rounding, rb: npt.NDArray[np.uint64] | None,
                    sr_bits: int) -> npt.NDArray[np.uint8]:
    """Codes of ``x * 2**-k`` through :meth:`Format.encode` (exact float64, saturating).

    Infinities saturate to ±max; NaN elements get code 0 here and are decided by the caller.
    """
    out = np.empty(bits.shape, np.uint8)
    rows = max(1, _CHUNK // max(1, bits.shape[1]))
    for start in range(0, bits.shape[0], rows):
        sl = slice(start, start + rows)
        b = bits[sl]
        # NaN elements are decided by the caller; zeroing them first also keeps signalling
        # NaNs out of the float64 conversion (which would raise FE_INVALID).
        b = np.where((b & np.uint32(0x7FFFFFFF)) > FP32_INF, np.uint32(0), b)
        x = b.view(np.float32).astype(np.float64)
        v = x * np.ldexp(1.0, -k[sl]).astype(np.float64)[:, None]
        out[sl] = fmt.encode(v, rounding, True,
                             random_bits=None if rb is None else rb[sl], sr_bits=sr_bits)
    return out
