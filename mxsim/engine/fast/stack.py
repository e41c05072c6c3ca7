"""Batches of many small dot products, computed as fewer, larger batch entries.

The chain (:mod:`.chain`) works one batch entry at a time over its (M, N) grid, so a set of
thousands of tiny entries (imported one-dot rows, ``VectorSet.take_dots`` samples) would pay
the per-entry cost thousands of times. :func:`stacked` joins ``g`` consecutive entries into one
whose A stacks their rows and whose B stacks their columns, with each entry's C on the
diagonal blocks (+0 elsewhere). Every output (i, j) of a unit depends only on row i of A,
column j of B (with their block scales) and C[i, j], so the diagonal blocks of the stacked D
are the entries' D, bit for bit; :func:`unstacked` takes them back out and drops the
off-diagonal dots.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ...vectors import VectorSet
from ..xp import of as xp_of

__all__ = ["stack_factor", "stacked", "unstacked"]

#: Rows (and columns) a stacked entry aims for: past this the wasted off-diagonal dots cost
#: more than the per-entry overhead they save.
TARGET = 64


def stack_factor(vs: VectorSet) -> int:
    """How many batch entries of ``vs`` to join into one (1: compute it as it is).

    Sets with FP32 scales (whose granularity is tied to the set's shape) or a tensor scale are
    left alone.
    """
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    if nb < 2 or vs.scale_format == "fp32" or vs.tensor_scale is not None:
        return 1
    g = min(TARGET // max(vs.m, vs.n), nb)
    return g if g >= 2 else 1


def _padded(x: npt.NDArray, pad: int) -> npt.NDArray:
    """``x`` with its last batch entry repeated ``pad`` more times."""
    return x if pad == 0 else xp_of(x).concatenate([x, xp_of(x).repeat(x[-1:], pad, axis=0)])


def _rows(x: npt.NDArray, g: int, pad: int) -> npt.NDArray:
    """(nb, R, X) -> (nb / g, g * R, X): the entries' rows one after another."""
    x = _padded(x, pad)
    return x.reshape(x.shape[0] // g, g * x.shape[1], x.shape[2])


def _columns(x: npt.NDArray, g: int, pad: int) -> npt.NDArray:
    """(nb, X, C) -> (nb / g, X, g * C): the entries' columns side by side."""
    x = _padded(x, pad)
    q, rows, cols = x.shape[0] // g, x.shape[1], x.shape[2]
    return x.reshape(q, g, rows, cols).transpose(0, 2, 1, 3).reshape(q, rows, g * cols)


def stacked(vs: VectorSet, g: int) -> VectorSet:
    """``vs`` (without its results) with every ``g`` consecutive batch entries joined into one
    block-diagonal entry; the last entry is repeated to fill the last group."""
    f = vs.flat()
    xp = xp_of(f.a)
    nb, m, n = f.a.shape[0], vs.m, vs.n
    pad = (-nb) % g
    q = (nb + pad) // g
    c = None
    if f.c is not None:
        blocks = _padded(f.c, pad).reshape(q, g, m, n)
        c = xp.zeros((q, g, m, g, n), f.c.dtype)        # code 0: +0 in FP32/FP16/BF16
        idx = xp.arange(g)
        c[:, idx, :, idx, :] = blocks.transpose(1, 0, 2, 3)
        c = c.reshape(q, g * m, g * n)
    scales = {}
    if f.a_scale is not None:
        scales = {"a_scale": _rows(f.a_scale, g, pad), "b_scale": _columns(f.b_scale, g, pad)}
    fields = dict(a=_rows(f.a, g, pad), b=_columns(f.b, g, pad), c=c, **scales)
    if xp is not np:
        # Arrays on a GPU: the set was checked on the host; the stacked one is valid as it.
        return vs._derived(d=None, extra={}, **fields)
    return VectorSet(**fields, a_format=vs.a_format, b_format=vs.b_format,
                     scale_format=vs.scale_format, block=vs.block, c_format=vs.c_format,
                     d_format=vs.d_format, producer=vs.producer)


def unstacked(d: npt.NDArray, vs: VectorSet, g: int) -> npt.NDArray:
    """The entries' results (``vs.out_shape``) from the stacked D of :func:`stacked`."""
    m, n = vs.m, vs.n
    q = d.shape[0]
    xp = xp_of(d)
    idx = xp.arange(g)
    diagonal = d.reshape(q, g, m, g, n)[:, idx, :, idx, :]       # (g, q, m, n)
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    out = diagonal.transpose(1, 0, 2, 3).reshape(q * g, m, n)[:nb]
    return xp.ascontiguousarray(out).reshape(vs.out_shape)
