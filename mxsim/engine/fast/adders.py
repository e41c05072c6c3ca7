"""Exact sums of two code arrays rounded once, and conversions between formats.

:func:`add_round` is ``x + y`` exact, rounded once (the superaccumulator, then ``round_to``),
with the spec's zero signs and IEEE NaN/Inf; :func:`convert` re-rounds codes into another
format. The chain adds C after a step, promotes and converts with them; the reduction tree
adds its nodes with :func:`add_round`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ... import formats
from ...spec import ZeroSign
from ..exactsum import exact_sums
from ..xp import of as xp_of
from .operands import Operand, special_codes

__all__ = ["add_round", "convert"]


def add_round(out: formats.Format, x: npt.NDArray, fx: formats.Format, y: npt.NDArray,
              fy: formats.Format, rounding, overflow, zero_sign: ZeroSign) -> npt.NDArray:
    """``x + y`` (codes of two formats, or Operands already read) exact, rounded once to
    ``out``."""
    ox, oy = Operand.read(fx, x), Operand.read(fy, y)
    shape = ox.sig.shape
    n = ox.sig.size
    xp = xp_of(ox.sig)
    dots = xp.concatenate([xp.arange(n), xp.arange(n)])
    neg, mag, lsb_exp, sticky, zero = exact_sums(
        dots, np.concatenate([ox.sign.ravel(), oy.sign.ravel()]).astype(np.uint8),
        np.concatenate([ox.sig.ravel(), oy.sig.ravel()]).astype(np.uint64),
        np.concatenate([ox.lsb.ravel(), oy.lsb.ravel()]), n)
    codes = formats.round_to(out, neg, lsb_exp, mag, sticky, rounding, overflow).reshape(shape)
    zero = zero.reshape(shape)
    mask = (1 << out.sign_shift) - 1
    if zero_sign is ZeroSign.POSITIVE:
        codes = np.where((codes & mask) == 0, codes & mask, codes)
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
