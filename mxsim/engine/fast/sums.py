"""Exact sums of one instruction's terms per dot, with the terms' special-value flags.

:func:`term_sums` adds an instruction's product (or GST group) terms of every dot of a batch
entry exactly, without alignment, with an accumulator term where one is given, and says which
dots hold a NaN, +Inf or -Inf term. ``zero_sign = "c"`` reads it to find the dots whose
products sum to exactly zero (:func:`products_cancel`); the status flags read the sum to round
it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ...spec import UnitSpec
from ..exactsum import ExactSums, exact_sums
from ..xp import of as xp_of
from .alignment import step_terms
from .operands import Operand, Operands, index_count

__all__ = ["TermSums", "term_sums", "products_cancel"]

_CHUNK_TERMS = 1 << 21          # terms materialised at once (bounds memory to ~100 MB)


class TermSums(NamedTuple):
    """Per dot, (M, N) arrays: the exact sum of the terms (and accumulator), and whether a
    term (never the accumulator) is NaN, +Inf or -Inf (a NaN term's value is not in the sum;
    neither is an Inf's)."""
    sums: ExactSums
    nan: npt.NDArray[np.bool_]
    pinf: npt.NDArray[np.bool_]
    ninf: npt.NDArray[np.bool_]


def term_sums(spec: UnitSpec, ops: Operands, bi: int, idx: npt.NDArray,
              acc: Operand | None = None) -> TermSums:
    """The exact sums of the terms of K indices ``idx`` (one instruction's, or one step's) for
    every dot of batch entry ``bi``, plus ``acc`` (an (M, N) Operand) where given. Exact:
    nothing is aligned or rounded."""
    m, n = ops.a.sig.shape[1], ops.b.sig.shape[2]
    xp = xp_of(ops.a.sig)
    b = ops.b.take(bi).take((idx, slice(None)))
    sb = None if ops.sb is None else ops.sb.take(bi).take((idx, slice(None)))
    rows_per = max(1, _CHUNK_TERMS // max(1, n * index_count(idx)))
    parts = []
    for r0 in range(0, m, rows_per):
        rows = slice(r0, min(m, r0 + rows_per))
        a = ops.a.take(bi).take((rows, idx))
        sa = None if ops.sa is None else ops.sa.take(bi).take((rows, idx))
        sign, sig, lsb, _, nan, pinf, ninf = step_terms(spec, ops, a, b, sa, sb)
        r = sig.shape[0]
        dots = xp.broadcast_to(xp.arange(r * n).reshape(r, 1, n), sig.shape).reshape(-1)
        terms = [(dots, sign.reshape(-1), sig.reshape(-1), lsb.reshape(-1))]
        if acc is not None:
            c = acc.take(rows)
            terms.append((xp.arange(r * n), c.sign.reshape(-1), c.sig.reshape(-1),
                          c.lsb.reshape(-1)))
        cat = [xp.concatenate(x) for x in zip(*terms, strict=True)]
        s = exact_sums(cat[0], cat[1].astype(np.uint8), cat[2].astype(np.uint64), cat[3], r * n)
        parts.append([x.reshape(r, n) for x in s] + [nan.any(axis=1), pinf.any(axis=1),
                                                      ninf.any(axis=1)])
    cols = [xp.concatenate(x) for x in zip(*parts, strict=True)]
    return TermSums(ExactSums(*cols[:5]), *cols[5:])


def products_cancel(spec: UnitSpec, ops: Operands, bi: int, idx: npt.NDArray) -> npt.NDArray:
    """(M, N): where the terms of ``idx`` are all finite and sum to exactly zero (every
    product zero, or cancelling), the dots whose C passes through under ``zero_sign = "c"``."""
    t = term_sums(spec, ops, bi, idx)
    return t.sums.zero & ~(t.nan | t.pinf | t.ninf)
