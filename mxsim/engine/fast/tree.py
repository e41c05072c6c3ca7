"""The reduction tree of a ``reduce = "tree"`` unit: group terms added pairwise, each node
rounded once.

:func:`tree_all_rows` computes one instruction's tree for every dot of a batch entry: the
exact GST-FDPA group terms (``alignment.step_terms``) are added in a balanced binary tree in
index order, ``((t0 + t1) + (t2 + t3)) + ...``, each node ``x + y`` exact and rounded once
to its level's format, ``tree_formats`` or ``acc_format`` (:func:`adders.add_round`: an exact
sum, then ``round_to``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ... import formats
from ...spec import UnitSpec
from ..xp import of as xp_of
from .adders import add_round
from .alignment import step_terms
from .operands import Operand, Operands, index_count

__all__ = ["tree_all_rows"]

_CHUNK_TERMS = 1 << 21          # products materialised at once (bounds memory to ~100 MB)
_GPU_CHUNK_TERMS = 1 << 26      # the same on a GPU (~0.5 GB per int64 temporary)


def tree_all_rows(spec: UnitSpec, ops: Operands, bi: int, idx: npt.NDArray) -> npt.NDArray:
    """The tree's result for every (row, column) of batch entry ``bi`` over the instruction's
    indices ``idx``: (M, N) codes of ``spec.sum_format`` (the last level's format).

    A node's sum is exact and rounded once to its level's format with ``acc_rounding`` and
    ``overflow``; an exactly zero node's sign follows ``zero_sign`` (:func:`.add_round`); NaN
    and Inf follow IEEE 754 (a NaN term, Inf - Inf, an Inf from overflow). A lone term
    (k = group) is rounded once to ``acc_format``, as ``t0 + 0``.
    """
    levels = [formats.get(name) for name in spec.tree_level_formats() or (spec.acc_format,)]
    m, n = ops.a.sig.shape[1], ops.b.sig.shape[2]
    b = ops.b.take(bi).take((idx, slice(None)))
    sb = ops.sb.take(bi).take((idx, slice(None)))
    xp = xp_of(ops.a.sig)
    chunk_terms = _CHUNK_TERMS if xp is np else _GPU_CHUNK_TERMS
    rows_per = max(1, chunk_terms // max(1, n * index_count(idx)))
    out = xp.empty((m, n), levels[-1].code_dtype)
    for r0 in range(0, m, rows_per):
        rows = slice(r0, min(m, r0 + rows_per))
        a = ops.a.take(bi).take((rows, idx))
        sa = ops.sa.take(bi).take((rows, idx))
        nodes = _leaves(*step_terms(spec, ops, a, b, sa, sb))
        if len(nodes) == 1:
            nodes.append(_zero_like(nodes[0]))
        below = levels[0]                     # (the leaves are Operands: read as they are)
        for level in levels:
            nodes = [add_round(level, x, below, y, below, spec.acc_rounding, spec.overflow,
                               spec.zero_sign)
                     for x, y in zip(nodes[::2], nodes[1::2], strict=True)]
            below = level
        out[rows] = nodes[0]
    return out


def _leaves(sign, sig, lsb, _align_e, nan, pinf, ninf) -> list[Operand]:
    """The group terms, (r, t, N) arrays, as t Operands of (r, N): a group holding +Inf and
    -Inf products is NaN; an Inf term carries its sign."""
    nan = nan | (pinf & ninf)
    inf = (pinf | ninf) & ~nan
    sign = np.where(inf, ninf.astype(np.int64), sign)
    sig = np.where(nan | inf, 0, sig)
    zero = (sig == 0) & ~nan & ~inf
    return [Operand(sign[:, t], sig[:, t], lsb[:, t], lsb[:, t], zero[:, t], nan[:, t],
                    inf[:, t]) for t in range(sig.shape[1])]


def _zero_like(x: Operand) -> Operand:
    """+0 in the shape of ``x``."""
    z = np.zeros_like(x.sig)
    return Operand(z, z, z, z, xp_of(z).ones(z.shape, bool), z.astype(bool), z.astype(bool))
