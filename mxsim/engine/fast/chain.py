"""The general unit's chain: fused steps per instruction, instructions chained along K.

:func:`chain_dot` computes a unit without an FP32-scale epilogue: each instruction's steps
accumulate (C first or after, as the spec says), D of one instruction is C of the next, with
promotion into a separate total every ``promote_every`` instructions where the spec says so.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ... import formats
from ...spec import CMode, Specials, UnitSpec, ZeroSign
from ...vectors import VectorSet
from ..exactsum import exact_sums
from .operands import Operand, Operands, special_codes
from .step import ZERO, by_rows, codes_of, step_all_rows

__all__ = ["add_round", "chain_dot", "convert"]


def add_round(out: formats.Format, x: npt.NDArray, fx: formats.Format, y: npt.NDArray,
              fy: formats.Format, rounding, overflow, zero_sign: ZeroSign) -> npt.NDArray:
    """``x + y`` (codes of two formats, or Operands already read) exact, rounded once to
    ``out``."""
    ox, oy = Operand.read(fx, x), Operand.read(fy, y)
    shape = ox.sig.shape
    n = ox.sig.size
    dots = np.concatenate([np.arange(n), np.arange(n)])
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


def chain_dot(spec: UnitSpec, vs: VectorSet, kernel: bool = True) -> npt.NDArray:
    """D = A·B + C of a unit without an FP32-scale epilogue; codes of ``spec.d_format``.

    ``vs`` must already fit ``spec``. ``kernel=False`` keeps every step in numpy.
    """
    ops = Operands.of(spec, vs)
    d_fmt = formats.get(spec.d_format)
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n = vs.m, vs.n
    out = np.empty((nb, m, n), d_fmt.code_dtype)
    for bi in range(nb):
        # ZERO stands for an accumulator known to be +0 everywhere (no C), which needs no
        # decoding.
        d = ZERO if vs.c is None else vs.c.reshape(nb, m, n)[bi]
        if spec.specials is Specials.NONE and d is not ZERO:
            d = Operand.of(d_fmt, d, finite=True)      # C's codes are numbers, Inf/NaN too
        d = codes_of(_chain_entry(spec, ops, bi, vs.k, d, kernel), d_fmt, m, n)
        out[bi] = by_rows(lambda x, d_fmt=d_fmt: np.where(
            d_fmt.classify(x) == formats.Class.NAN, spec.d_nan, x).astype(d_fmt.code_dtype), d)
    return out.reshape(vs.batch_shape + (m, n))


def _chain_entry(spec: UnitSpec, ops: Operands, bi: int, k: int, d, kernel: bool):
    """D of batch entry ``bi``: the whole (M, N) accumulator lives across the chain; each step
    prepares its B columns once and sweeps the rows in chunks that bound the temporaries."""
    d_fmt, acc_fmt = formats.get(spec.d_format), formats.get(spec.acc_format)
    m, n = ops.a.sig.shape[1], ops.b.sig.shape[2]
    steps = [np.asarray(s, np.int64) for s in spec.steps()]
    total = None
    if spec.promote_every is not None:
        total, d = codes_of(d, d_fmt, m, n), ZERO
    for inst in range(k // spec.k):
        if total is not None and inst and inst % spec.promote_every == 0:
            total = add_round(d_fmt, total, d_fmt, d, d_fmt, spec.promote_rounding,
                              spec.overflow, spec.zero_sign)
            d = ZERO
        acc, acc_in = (None if spec.c_mode is CMode.AFTER else d), d_fmt
        for step in steps:
            acc = step_all_rows(spec, ops, bi, inst * spec.k + step, acc, acc_in, kernel)
            acc_in = acc_fmt
        if spec.c_mode is CMode.AFTER:
            res = convert(d_fmt, acc, acc_fmt, spec.acc_rounding, spec.overflow)
            res = add_round(d_fmt, codes_of(d, d_fmt, m, n), d_fmt, res, d_fmt,
                            spec.c_rounding, spec.overflow, spec.zero_sign)
        else:
            res = by_rows(lambda x: convert(d_fmt, x, acc_fmt, spec.acc_rounding,
                                            spec.overflow), acc)
        d = res
    if total is not None:
        d = add_round(d_fmt, total, d_fmt, codes_of(d, d_fmt, m, n), d_fmt,
                      spec.promote_rounding, spec.overflow, spec.zero_sign)
    return d
