"""Exact sums of two code arrays rounded once, and conversions between formats.

:func:`add_round` is ``x + y`` exact, rounded once (:func:`exact_sum2`, then ``round_to``),
with the spec's zero signs and IEEE NaN/Inf; :func:`convert` re-rounds codes into another
format. The chain adds C after a step, promotes and converts with them; the reduction tree
adds its nodes with :func:`add_round`; the FP32 FMA of the block-wise epilogue sums its
product and addend with :func:`exact_sum2`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ... import formats
from ...formats import Rounding, bit_length
from ...spec import ZeroSign
from ..xp import of as xp_of
from .operands import Operand, special_codes

__all__ = ["add_round", "convert", "exact_sum2"]


def exact_sum2(sx, gx, lx, sy, gy, ly) -> tuple:
    """``(-1)**sx * gx * 2**lx + (-1)**sy * gy * 2**ly`` exactly, for round_to: (negative,
    magnitude as uint64, its LSB exponent, sticky, exactly zero). Significands below 2**62.

    Both magnitudes go into a 63-bit window (uint64) whose top is the larger term's leading
    bit: that term fits whole. Only a term whose leading bit is lower can lose bits there,
    and then it lies below a quarter of the other, so the sum keeps at least 61 bits, more
    than any format rounds to: a sticky bit stands for the lost bits, and subtracting them
    borrows one unit of the window. Rounding the window's value with that sticky bit is
    rounding the exact sum: no rounding boundary lies strictly between two units of the
    window."""
    xp = xp_of(gx, gy)
    none = -(1 << 20)
    gx, gy = gx.astype(np.uint64), gy.astype(np.uint64)
    mx = xp.where(gx == 0, none, lx + bit_length(gx) - 1)
    my = xp.where(gy == 0, none, ly + bit_length(gy) - 1)
    base = xp.maximum(mx, my) - 62                              # the window's LSB exponent
    tx, stx = _window(gx, base - lx)
    ty, sty = _window(gy, base - ly)
    sticky = stx | sty
    differ = sx != sy
    x_big = tx >= ty
    big, small = xp.where(x_big, tx, ty), xp.where(x_big, ty, tx)
    mag = xp.where(differ, big - small - sticky.astype(np.uint64), big + small)   # borrow
    zero = (mag == 0) & ~sticky
    neg = xp.where(differ, xp.where(x_big, sx, sy), sx) == 1
    return neg & ~zero, mag, base, sticky, zero


def _window(sig: npt.NDArray, shift: npt.NDArray) -> tuple[npt.NDArray, npt.NDArray]:
    """``sig`` (uint64, below 2**62) moved ``shift`` bits right (left where negative, at
    most 63): the kept integer and whether non-zero bits fell off."""
    xp = xp_of(sig)
    right = xp.clip(shift, 0, 63).astype(np.uint64)
    kept = xp.where(shift > 0, sig >> right, sig << xp.clip(-shift, 0, 63).astype(np.uint64))
    lost = (shift > 0) & ((sig & ((np.uint64(1) << right) - np.uint64(1))) != 0)
    return kept, lost


def add_round(out: formats.Format, x: npt.NDArray, fx: formats.Format, y: npt.NDArray,
              fy: formats.Format, rounding, overflow, zero_sign: ZeroSign) -> npt.NDArray:
    """``x + y`` (codes of two formats, or Operands already read) exact, rounded once to
    ``out``; an exact zero is +0 (``ZeroSign.POSITIVE``), -0 where both are -0 (``IEEE``), or
    -0 where ``rounding`` is toward -Inf (``C``: IEEE 754 6.3)."""
    ox, oy = Operand.read(fx, x), Operand.read(fy, y)
    neg, mag, lsb_exp, sticky, zero = exact_sum2(ox.sign, ox.sig, ox.lsb, oy.sign, oy.sig,
                                                 oy.lsb)
    codes = formats.round_to(out, neg, lsb_exp, mag, sticky, rounding, overflow)
    mask = (1 << out.sign_shift) - 1
    if zero_sign is ZeroSign.POSITIVE:
        codes = np.where((codes & mask) == 0, codes & mask, codes)
    elif zero_sign is ZeroSign.C:
        neg_zero = (1 << out.sign_shift) if Rounding.of(rounding) is Rounding.RD else 0
        codes = np.where(zero, neg_zero, codes)
    else:
        both_neg = ox.zero & oy.zero & (ox.sign == 1) & (oy.sign == 1)
        codes = np.where(zero, np.where(both_neg, 1 << out.sign_shift, 0), codes)
    nan = ox.nan | oy.nan
    pinf = ox.inf & (ox.sign == 0) | oy.inf & (oy.sign == 0)
    ninf = ox.inf & (ox.sign == 1) | oy.inf & (oy.sign == 1)
    return special_codes(out, nan, pinf, ninf, codes)


def convert(out: formats.Format, codes: npt.NDArray, fmt: formats.Format, rounding,
            overflow) -> npt.NDArray:
    """Codes of ``fmt`` rounded to ``out`` (exact when ``out`` holds every value of ``fmt``)."""
    if out.name == fmt.name:
        return codes
    if (out.exp_bits, out.bias, out.specials) == (fmt.exp_bits, fmt.bias, fmt.specials) \
            and out.man_bits >= fmt.man_bits and fmt.kind == out.kind == "float":
        # A narrower mantissa in the same exponent range (E8M13 in FP32): every value, Inf and
        # NaN maps over exactly by moving the fields.
        dt = out.code_dtype.type
        c = codes.astype(out.code_dtype, copy=False)
        sign = c >> dt(fmt.sign_shift)
        mag = c & dt((1 << fmt.sign_shift) - 1)
        return (sign << dt(out.sign_shift)) | (mag << dt(out.man_bits - fmt.man_bits))
    op = Operand.of(fmt, codes)
    res = formats.round_to(out, op.sign, op.lsb, op.sig.astype(np.uint64), False, rounding,
                           overflow)
    return special_codes(out, op.nan, op.inf & (op.sign == 0), op.inf & (op.sign == 1), res)
