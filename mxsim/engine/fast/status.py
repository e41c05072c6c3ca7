"""IEEE 754 exception flags of a unit that rounds once per instruction, for whole batches.

:func:`exception_flags` runs the unit's chain (:func:`.chain.chain_dot`) and, at each
instruction, adds its terms and C exactly (:func:`.sums.term_sums`, :func:`.adders.exact_sum2`)
and asks :func:`mxsim.formats.round_flags` what rounding that sum raises. Its twin,
:func:`mxsim.engine.reference.exception_flags`, computes the same with Python fractions.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ... import formats
from ...spec import CMode, Specials, UnitSpec
from ...vectors import VectorSet
from .adders import exact_sum2
from .chain import chain_dot
from .operands import Operand
from .step import codes_of
from .sums import term_sums

__all__ = ["exception_flags", "signaling"]


def signaling(fmt: formats.Format, codes: npt.NDArray) -> npt.NDArray[np.bool_]:
    """Which ``codes`` of an IEEE-style ``fmt`` are signaling NaNs: exponent all ones, a
    fraction that is not zero, its top bit clear."""
    top = (1 << fmt.exp_bits) - 1
    man = codes & fmt.code_dtype.type((1 << fmt.man_bits) - 1)
    quiet = fmt.code_dtype.type(1 << (fmt.man_bits - 1))
    return ((codes >> fmt.man_bits) & top == top) & (man != 0) & ((man & quiet) == 0)


def _flags(fmt: formats.Format, rounding, neg, sig, lsb_exp, sticky, live, nv) -> npt.NDArray:
    """(4, M, N) flags nv, of, uf, nx of rounding the exact sums to ``fmt``, where ``live``
    (a finite, non-zero sum of finite values); ``nv`` as the caller found it."""
    overflow, tiny, inexact = formats.round_flags(fmt, neg, lsb_exp, sig, sticky, rounding)
    inexact &= live
    return np.stack([nv, overflow & live, tiny & inexact, inexact])


def _instruction(spec: UnitSpec, ops, bi: int, idx, c: Operand, acc, snan) -> npt.NDArray:
    """(4, M, N) flags of one instruction with C ``c`` and its sum ``acc`` (codes of
    acc_format): one rounding (C in the step), or two ORed (the step, then C + it)."""
    acc_fmt, d_fmt = formats.get(spec.acc_format), formats.get(spec.d_format)
    step_c = c if spec.c_mode is CMode.STEP else None
    t = term_sums(spec, ops, bi, idx, step_c)
    s = t.sums
    pinf, ninf, special = t.pinf, t.ninf, t.nan | t.pinf | t.ninf
    if step_c is not None:
        pinf, ninf = pinf | c.inf & (c.sign == 0), ninf | c.inf & (c.sign == 1)
        special = special | c.nan | c.inf
    # A NaN term is invalid (a NaN code or scale, Inf x 0); so is +Inf with -Inf.
    nv = t.nan | (pinf & ninf) | (snan if step_c is not None else False)
    out = _flags(acc_fmt, spec.acc_rounding, s.neg, s.sig, s.lsb_exp, s.sticky,
                 ~special & ~s.zero, nv)
    if step_c is not None:
        return out
    r = Operand.of(acc_fmt, acc)
    neg, mag, lsb_exp, sticky, zero = exact_sum2(c.sign, c.sig, c.lsb, r.sign, r.sig, r.lsb)
    nv = snan | (c.inf & r.inf & (c.sign != r.sign))
    live = ~(c.nan | c.inf | r.nan | r.inf | zero)
    return out | _flags(d_fmt, spec.c_rounding, neg, mag, lsb_exp, sticky, live, nv)


def exception_flags(spec: UnitSpec, vs: VectorSet) -> tuple[npt.NDArray[np.bool_], ...]:
    """``(nv, of, uf, nx)``: the IEEE 754 exceptions each dot of ``vs`` raises on ``spec``,
    boolean arrays of ``vs.out_shape``, accrued over a chain's instructions.

    ``spec`` must round once per instruction: one exact fused step, ``d_format`` =
    ``acc_format``, no fold_scales, promotion or epilogue (:func:`mxsim.engine.flags.status_flags`
    checks it). With C in the step the flags are its rounding's; with C after, those of the
    step's rounding ORed with those of ``C + step``. ``of``: the sum rounded with an unbounded
    exponent exceeds the format's largest finite value; ``uf``: it is non-zero and below the
    smallest normal (tininess after rounding) and the result is inexact; ``nx``: the result
    differs from the exact sum. ``nv``: a NaN product or group (a NaN element or scale code,
    Inf x 0), +Inf with -Inf among the terms and C, or a C that is a signaling NaN (the first
    instruction's; later ones take the unit's own results). A NaN or Inf result from NaN or
    Inf inputs raises no other flag.
    """
    spec.check_vectors(vs)
    d_fmt = formats.get(spec.d_format)
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n = vs.m, vs.n
    flags = np.zeros((4, nb, m, n), bool)
    snan = np.zeros((nb, m, n), bool)
    if vs.c is not None and spec.specials is Specials.IEEE:
        snan = signaling(d_fmt, vs.c.reshape(nb, m, n))

    def trace(ops, bi, inst, idx, c, acc, d) -> None:
        c = Operand.read(d_fmt, codes_of(c, d_fmt, m, n))
        flags[:, bi] |= _instruction(spec, ops, bi, idx, c, acc, snan[bi] & (inst == 0))

    chain_dot(spec, vs, trace=trace)
    return tuple(flags.reshape((4,) + vs.out_shape))
