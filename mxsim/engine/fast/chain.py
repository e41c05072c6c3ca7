"""The general unit's chain: fused steps per instruction, instructions chained along K.

:func:`chain_dot` computes a unit without an FP32-scale epilogue: each instruction's steps
accumulate (C first or after, as the spec says; a ``reduce = "tree"`` unit's instruction is
its reduction tree, C after), D of one instruction is C of the next, with
promotion into a separate total every ``promote_every`` instructions where the spec says so.
With ``zero_sign = "c"``, an instruction whose products sum to exactly zero passes its C on.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from ... import formats
from ...spec import CMode, Reduce, Specials, UnitSpec, ZeroSign
from ...vectors import VectorSet
from ..xp import of as xp_of
from . import fused
from .adders import add_round, convert
from .operands import Operand, Operands, is_nan
from .step import ZERO, by_rows, codes_of, step_all_rows
from .sums import products_cancel
from .tree import tree_all_rows

__all__ = ["chain_dot", "Trace"]

#: Called after each instruction of each batch entry as ``trace(ops, bi, inst, idx, c, acc,
#: d)``: the Operands, the entry, the instruction, its K positions (its first step's), its C
#: (codes of d_format, ``ZERO``, or an Operand), its sum before d_format (codes of
#: ``spec.sum_format``) and its D (codes of d_format).
Trace = Callable[..., None]


def chain_dot(spec: UnitSpec, vs: VectorSet, kernel: bool = True,
              trace: Trace | None = None, whole: bool = True) -> npt.NDArray:
    """D = A·B + C of a unit without an FP32-scale epilogue; codes of ``spec.d_format``.

    ``vs`` must already fit ``spec``. ``kernel=False`` keeps every step in numpy. ``trace``
    (see :data:`Trace`) watches each instruction, as the status flags do. Where the
    whole-dot kernel applies (:mod:`.fused`) and ``whole``, each dot is computed in it; else
    each step is a pass over the whole block.
    """
    if trace is None and whole:
        d = fused.dot(spec, vs, kernel)
        if d is not None:
            return d
    ops = Operands.of(spec, vs)
    d_fmt = formats.get(spec.d_format)
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n = vs.m, vs.n
    out = xp_of(vs.a).empty((nb, m, n), d_fmt.code_dtype)
    for bi in range(nb):
        # ZERO stands for an accumulator known to be +0 everywhere (no C), which needs no
        # decoding.
        d = ZERO if vs.c is None else vs.c.reshape(nb, m, n)[bi]
        if spec.specials is Specials.NONE and d is not ZERO:
            d = Operand.of(d_fmt, d, finite=True)      # C's codes are numbers, Inf/NaN too
        d = codes_of(_chain_entry(spec, ops, bi, vs.k, d, kernel, trace), d_fmt, m, n,
                     xp_of(vs.a))
        out[bi] = by_rows(lambda x, d_fmt=d_fmt: np.where(
            is_nan(d_fmt, x), spec.d_nan, x).astype(d_fmt.code_dtype), d)
    return out.reshape(vs.batch_shape + (m, n))


def _chain_entry(spec: UnitSpec, ops: Operands, bi: int, k: int, d, kernel: bool,
                 trace: Trace | None):
    """D of batch entry ``bi``: the whole (M, N) accumulator lives across the chain; each step
    prepares its B columns once and sweeps the rows in chunks that bound the temporaries."""
    d_fmt, acc_fmt = formats.get(spec.d_format), formats.get(spec.acc_format)
    sum_fmt = formats.get(spec.sum_format)
    m, n = ops.a.sig.shape[1], ops.b.sig.shape[2]
    xp = xp_of(ops.a.sig)
    steps = spec.steps()
    total = None
    if spec.promote_every is not None:
        total, d = codes_of(d, d_fmt, m, n, xp), ZERO
    for inst in range(k // spec.k):
        if total is not None and inst and inst % spec.promote_every == 0:
            total = add_round(d_fmt, total, d_fmt, d, d_fmt, spec.promote_rounding,
                              spec.overflow, spec.zero_sign)
            d = ZERO
        acc, acc_in = (None if spec.c_mode is CMode.AFTER else d), d_fmt
        first = _positions(steps[0], inst * spec.k, xp)
        if spec.reduce is Reduce.TREE:
            acc = tree_all_rows(spec, ops, bi, first)
        for step in steps if spec.reduce is Reduce.CHAIN else ():
            acc = step_all_rows(spec, ops, bi, _positions(step, inst * spec.k, xp), acc, acc_in,
                                kernel)
            acc_in = acc_fmt
        if spec.c_mode is CMode.AFTER:
            res = convert(d_fmt, acc, sum_fmt, spec.acc_rounding, spec.overflow)
            res = add_round(d_fmt, codes_of(d, d_fmt, m, n, xp), d_fmt, res, d_fmt,
                            spec.c_rounding, spec.overflow, spec.zero_sign)
        else:
            res = by_rows(lambda x: convert(d_fmt, x, acc_fmt, spec.acc_rounding,
                                            spec.overflow), acc)
        if spec.zero_sign is ZeroSign.C:
            # C passes through where the products sum to exactly zero (one step or a tree:
            # the first step's positions are the instruction's).
            res = xp.where(products_cancel(spec, ops, bi, first), codes_of(d, d_fmt, m, n, xp),
                           res)
        if trace is not None:
            trace(ops, bi, inst, first, d, acc, res)
        d = res
    if total is not None:
        d = add_round(d_fmt, total, d_fmt, codes_of(d, d_fmt, m, n, xp), d_fmt,
                      spec.promote_rounding, spec.overflow, spec.zero_sign)
    return d


def _positions(step: tuple[int, ...], offset: int, xp):
    """K positions of a step's products in an instruction starting at ``offset``: an index
    array of module ``xp`` (numpy: as the step lists them; a GPU: a slice where they are
    consecutive, which indexes without a gather)."""
    if xp is not np and list(step) == list(range(step[0], step[0] + len(step))):
        return slice(offset + step[0], offset + step[0] + len(step))
    return xp.asarray(np.asarray(step, np.int64) + offset)
