"""How a GEMM maps onto an array: the ordered steps each dataflow issues.

:func:`os_waves` lists the *waves* of an output-stationary GEMM (one beat per active unit,
issued together); :func:`stationary_tiles` the stationary tiles of a weight- or
input-stationary one. The cycle model, the RTL testbench and the analytic view read the same
lists, so they agree on which unit computes which output and in which order K is added (see
:mod:`mxsim.array.spec` for the mapping in words).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .spec import ArrayError, ArraySpec, Dataflow

__all__ = ["Wave", "os_waves", "StationaryTile", "stationary_tiles", "check_gemm",
           "MAX_STEPS"]

#: The most waves (or streamed beats) one simulation steps: a cycle model runs in Python.
MAX_STEPS = 1 << 22


def check_gemm(array: ArraySpec, m: int, n: int, k: int) -> int:
    """The number of K-blocks ``K / k``, or ArrayError when M, N, K do not fit the array."""
    for name, value in (("M", m), ("N", n), ("K", k)):
        if isinstance(value, bool) or not hasattr(value, "__index__") or value < 1:
            raise ArrayError(f"GEMM {name} must be a positive integer, not {value!r}")
    if k % array.unit.k:
        raise ArrayError(f"GEMM K ({k}) must be a multiple of unit {array.unit.name!r}'s "
                         f"instruction k ({array.unit.k})")
    return k // array.unit.k


@dataclass(frozen=True)
class Wave:
    """One output-stationary step: K-block ``kb`` of interleave slot ``t`` of the tile at
    ``(m0, n0)``, on units ``(r, c)`` with ``r < rows_on`` and ``c < cols_on``.

    Unit ``(r, c)`` computes output ``(m0 + r, n0 + cols * t + c)``. ``first``: C comes from
    the GEMM (kb = 0); ``last``: D is the output's final value (kb = KB - 1); ``new_a``: the
    row blocks change (t = 0: the slots of one K-block share A's blocks).
    """
    tile: int
    m0: int
    n0: int
    kb: int
    t: int
    rows_on: int
    cols_on: int
    first: bool
    last: bool
    new_a: bool

    @property
    def active(self) -> int:
        return self.rows_on * self.cols_on


def os_waves(array: ArraySpec, m: int, n: int, k: int) -> list[Wave]:
    """The waves of an M x N x K GEMM on an output-stationary array, in issue order: tiles
    (M outer, N inner), then K-blocks, then interleave slots; a slot with no column inside N
    is skipped."""
    blocks = check_gemm(array, m, n, k)
    rows, cols, inter = array.rows, array.cols, array.interleave
    span = cols * inter
    tiles = math.ceil(m / rows) * math.ceil(n / span)
    if tiles * blocks * inter > MAX_STEPS:
        raise ArrayError(f"GEMM {m} x {n} x {k} needs {tiles * blocks * inter:,} waves on this "
                         f"array, more than the cycle model steps ({MAX_STEPS:,}); use the "
                         f"analytic view (mxsim.array.analytic) for it")
    out = []
    tile = 0
    for m0 in range(0, m, rows):
        rows_on = min(rows, m - m0)
        for n0 in range(0, n, span):
            slots = [(t, min(cols, n - n0 - cols * t)) for t in range(inter)
                     if n0 + cols * t < n]
            for kb in range(blocks):
                for t, cols_on in slots:
                    out.append(Wave(tile, m0, n0, kb, t, rows_on, cols_on, kb == 0,
                                    kb == blocks - 1, t == 0))
            tile += 1
    return out


@dataclass(frozen=True)
class StationaryTile:
    """One stationary tile of a weight- or input-stationary GEMM: K-tile ``kt`` (K-blocks
    ``kt * rows ... kt * rows + rows_on - 1``) of the outer tile at ``o0`` (N for "ws", M for
    "is"), held by units ``(r, c)`` with ``r < rows_on`` and ``c < cols_on``, while ``stream``
    vectors (M rows of A for "ws", N columns of B for "is") pass through."""
    outer: int
    o0: int
    kt: int
    rows_on: int
    cols_on: int
    stream: int
    first: bool          # the first K-tile of its outer tile
    last: bool           # the last K-tile of its outer tile


def stationary_tiles(array: ArraySpec, m: int, n: int, k: int) -> list[StationaryTile]:
    """The stationary tiles of an M x N x K GEMM on a "ws" or "is" array, in order: outer
    tiles (N for "ws", M for "is"), then K-tiles."""
    if array.dataflow is Dataflow.OS:
        raise ArrayError("stationary tiles are for dataflow ws or is, not os")
    blocks = check_gemm(array, m, n, k)
    outer, stream = (n, m) if array.dataflow is Dataflow.WS else (m, n)
    rows, cols = array.rows, array.cols
    ktiles = math.ceil(blocks / rows)
    if math.ceil(outer / cols) * ktiles * stream * rows > MAX_STEPS:
        raise ArrayError(f"GEMM {m} x {n} x {k} needs more than {MAX_STEPS:,} beats per unit "
                         f"row on this array; use the analytic view (mxsim.array.analytic)")
    out = []
    for i, o0 in enumerate(range(0, outer, cols)):
        for kt in range(ktiles):
            out.append(StationaryTile(i, o0, kt, min(rows, blocks - kt * rows),
                                      min(cols, outer - o0), stream, kt == 0,
                                      kt == ktiles - 1))
    return out
