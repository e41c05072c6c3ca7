"""The cycle model of weight- and input-stationary arrays (dataflow "ws" and "is").

The tiles of :func:`mxsim.array.plan.stationary_tiles` run in order. Each array row is a
``mxsim.microarch.cycle.UnitModel`` (the row's units move in lockstep) that issues its beats in
order: for each tile where the row holds a K-block (``r < rows_on``), one beat per streamed vector
``s`` (``s = 0 .. S-1``: A's rows for "ws", B's columns for "is"). Row ``r``'s beat
``(tile j, s)`` issues in cycle ``x`` when all of these hold (the first unmet one is the
stall's cause, in this order):

1. *fill and drain*: for ``r > 0``, row ``r - 1``'s D for ``(j, s)`` appeared before ``x``
   (it is this beat's C: partial sums run down the columns);
2. *chain dependency*: for ``r = 0`` with register accumulators on a K-tile after the first,
   the previous K-tile's partial for ``s`` left the bottom row before ``x`` (it is C); with
   tmem accumulators the top row's C is +0 and there is no such wait;
3. *stationary load*: tile ``j`` is loaded. The stationary buffer (B for "ws", A for "is")
   fetches ``bandwidth`` bytes per cycle of a tile's ``rows_on * cols_on`` blocks (with their
   scales, whatever ``scales`` says: a tile load is rare), tile 0 from cycle 0 and tile
   ``j`` from the cycle after tile ``j - 1`` is loaded and every row that holds part of it
   has issued its first beat of it (the units hold one tile in use and one loading); a tile
   is usable from the cycle after its last byte;
4. *operand bandwidth* (top row only): the streamed vector's blocks (``rows_on`` blocks, one
   per row, passed down with the partial sums) are fetched, at the streamed buffer's
   bandwidth, from cycle 0 or the cycle the top row issued the previous vector, usable the
   cycle after the last byte (as the output-stationary fetch); *scale bandwidth*: the same
   for their scale codes from the scale buffer, when scales travel apart;
5. *accumulator port* (the row holding the tile's last K-block, tmem): the memory's adder has
   at most ``cols`` values queued (each partial is read, added with one RNE rounding and
   written back: ``min(read_ports, write_ports)`` values per cycle; a total is final
   ``latency`` cycles after its last write).

A beat's D appears ``L`` cycles after its issue (the units never stall). Stalls are
unit-cycles as in :mod:`mxsim.array.cycle`; columns left out of a tile are ``ragged edges``.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..microarch.cycle import Beat, UnitModel
from . import plan
from .run import STALL_CAUSES, ArrayRun
from .spec import AccKind, ArraySpec, Dataflow, Scales

__all__ = ["simulate_stationary"]


class _Row:
    """One array row: its unit model, its beats in order and when each D appeared."""

    def __init__(self, array: ArraySpec, r: int, tiles: list[plan.StationaryTile]):
        self.unit = UnitModel(array.unit, array.microarch)
        self.beats = [(j, s) for j, tile in enumerate(tiles) if r < tile.rows_on
                      for s in range(tile.stream)]
        self.next = 0
        self.inflight: deque[tuple[int, int]] = deque()
        self.done: dict[tuple[int, int], int] = {}     # (tile, s) -> cycle its D appeared
        self.first_issue: dict[int, int] = {}          # tile -> cycle of its first beat


class _Machine:
    """The stationary array's state and its per-cycle rules (module docstring)."""

    def __init__(self, array: ArraySpec, tiles: list[plan.StationaryTile]):
        self.array, self.tiles = array, tiles
        ws = array.dataflow is Dataflow.WS
        stat_op, self.stream_op = ("b", "a") if ws else ("a", "b")
        self.stat_bw = (array.b_buffer if ws else array.a_buffer).bandwidth
        self.stream_bw = (array.a_buffer if ws else array.b_buffer).bandwidth
        sep = array.scales is Scales.SEPARATE
        self.scale_bw = array.scale_buffer.bandwidth if sep else 1
        spb = array.scales_per_block
        self.stat_need = [t.rows_on * t.cols_on * (array.element_bytes(stat_op) + spb)
                          for t in tiles]
        self.stream_need = [t.rows_on * array.block_bytes(self.stream_op) for t in tiles]
        self.scale_need = [t.rows_on * spb if sep else 0 for t in tiles]
        self.rows = [_Row(array, r, tiles) for r in range(array.rows)]
        self.tmem = array.accumulators.kind is AccKind.TMEM
        acc = array.accumulators
        self.tmem_rate = min(acc.read_ports, acc.write_ports)
        self.queue: deque[list] = deque()       # tmem adder: [(tile, s), values left]
        self.final: dict[tuple[int, int], int] = {}   # (tile, s) -> cycle D is final
        # Stationary loads: tile being loaded, bytes so far, cycle each tile became usable.
        self.loading, self.loaded_bytes, self.usable = 0, 0, {}
        # Streamed vectors: index into the top row's beats being fetched, bytes so far.
        self.fetch_a = self.fetch_s = 0

    def _stream_cause(self, row: _Row, r: int, j: int, s: int, x: int) -> str | None:
        tile = self.tiles[j]
        if r > 0:
            got = self.rows[r - 1].done.get((j, s))
            if got is None or got >= x:
                return "fill and drain"
        elif not tile.first and not self.tmem:
            bottom = self.rows[self.tiles[j - 1].rows_on - 1]
            got = bottom.done.get((j - 1, s))
            if got is None or got >= x:
                return "chain dependency"
        if self.usable.get(j, x) >= x:
            return "stationary load"
        if r == 0:
            if self.fetch_a < self.stream_need[j]:
                return "operand bandwidth"
            if self.fetch_s < self.scale_need[j]:
                return "scale bandwidth"
        if self.tmem and r == tile.rows_on - 1 and \
                sum(e[1] for e in self.queue) > self.array.cols:
            return "accumulator port"
        return None

    def step(self, x: int, lost: dict[str, int]) -> None:
        """Cycle ``x``: results, issues, tmem adds, then the fetches at the edge."""
        array, tiles = self.array, self.tiles
        top_issued = False
        for r, row in enumerate(self.rows):
            in_ready, out_valid, _ = row.unit.outputs(True)
            if out_valid:
                j, s = row.inflight.popleft()
                row.done[(j, s)] = x
                if r == tiles[j].rows_on - 1:
                    self._partial(j, s, x)
            issue = False
            if in_ready:
                if row.next < len(row.beats):
                    j, s = row.beats[row.next]
                    cause = self._stream_cause(row, r, j, s, x)
                    issue = cause is None
                    if cause:
                        lost[cause] += array.cols
                else:
                    lost["fill and drain"] += array.cols
            beat = None
            if issue:
                j, s = row.beats[row.next]
                beat = Beat(s, 0, True, True, None)
                row.inflight.append((j, s))
                row.first_issue.setdefault(j, x)
                row.next += 1
                lost["ragged edges"] += array.passes * (array.cols - tiles[j].cols_on)
                top_issued |= r == 0
            row.unit.step(issue, beat, True)
        self._tmem_adds(x)
        self._fetch(top_issued)
        self._load(x)

    def _partial(self, j: int, s: int, x: int) -> None:
        if self.tmem:
            self.queue.append([(j, s), self.tiles[j].cols_on])
        elif self.tiles[j].last:
            self.final[(j, s)] = x

    def _tmem_adds(self, x: int) -> None:
        rate = self.tmem_rate
        while self.queue and rate:
            entry = self.queue[0]
            n = min(rate, entry[1])
            entry[1] -= n
            rate -= n
            if entry[1]:
                break
            self.queue.popleft()
            j, s = entry[0]
            if self.tiles[j].last:
                self.final[(j, s)] = x + self.array.accumulators.latency

    def _fetch(self, top_issued: bool) -> None:
        """The streamed vector's fetch for the top row's pending beat (after this cycle's
        issue, when there was one)."""
        top = self.rows[0]
        if top.next >= len(top.beats):
            return
        j = top.beats[top.next][0]
        if top_issued:
            self.fetch_a, self.fetch_s = self.stream_bw, self.scale_bw
            return
        if self.fetch_a < self.stream_need[j]:
            self.fetch_a += self.stream_bw
        if self.fetch_s < self.scale_need[j]:
            self.fetch_s += self.scale_bw

    def _load(self, x: int) -> None:
        """This cycle's fetch of the stationary tile being loaded."""
        j = self.loading
        if j >= len(self.tiles):
            return
        if j > 0:
            prev = self.tiles[j - 1]
            if j - 1 not in self.usable or any(
                    j - 1 not in self.rows[r].first_issue for r in range(prev.rows_on)):
                return
        self.loaded_bytes += self.stat_bw
        if self.loaded_bytes >= self.stat_need[j]:
            self.usable[j] = x
            self.loading, self.loaded_bytes = j + 1, 0

    @property
    def finished(self) -> bool:
        return all(row.next == len(row.beats) and not row.inflight for row in self.rows) \
            and not self.queue


def simulate_stationary(array: ArraySpec, m: int, n: int, k: int, with_c: bool):
    """Run the GEMM on a "ws" or "is" array (module docstring); an ArrayRun without D."""
    tiles = plan.stationary_tiles(array, m, n, k)
    mach = _Machine(array, tiles)
    lost = dict.fromkeys(STALL_CAUSES, 0)
    x = 0
    limit = 1000 + 8 * sum(t.stream * t.rows_on for t in tiles) * (array.latency + 8) \
        + sum(mach.stat_need) + sum(t.stream * s for t, s in zip(tiles, mach.stream_need,
                                                                  strict=True))
    while not mach.finished:
        if x > limit:
            raise RuntimeError(f"stationary array model stuck at cycle {x}")
        mach.step(x, lost)
        x += 1
    cycles = max([x] + [c + 1 for c in mach.final.values()])
    # A tmem total final after the units went idle: the array waits for it (drain).
    lost["fill and drain"] += (cycles - x) * array.units
    busy = array.passes * sum(t.stream * t.rows_on * t.cols_on for t in tiles)
    assert busy + sum(lost.values()) == array.units * cycles, (busy, lost, cycles)
    d_cycle = np.full((m, n), -1, np.int64)
    ws = array.dataflow is Dataflow.WS
    for (j, s), c in mach.final.items():
        t = tiles[j]
        if ws:
            d_cycle[s, t.o0:t.o0 + t.cols_on] = c
        else:
            d_cycle[t.o0:t.o0 + t.cols_on, s] = c
    return ArrayRun(array, m, n, k, cycles, busy, lost,
                    _traffic(array, tiles, mach, with_c), d_cycle=d_cycle,
                    detail={"tiles": len(tiles)})


def _traffic(array: ArraySpec, tiles: list[plan.StationaryTile], mach: _Machine,
             with_c: bool) -> dict[str, int]:
    stat, stream = ("B", "A") if array.dataflow is Dataflow.WS else ("A", "B")
    out = {"A": 0, "B": 0}
    out[stat] = sum(mach.stat_need)
    out[stream] = sum(t.stream * need for t, need in zip(tiles, mach.stream_need, strict=True))
    if array.scales is Scales.SEPARATE:
        out["scales"] = sum(t.stream * need for t, need in zip(tiles, mach.scale_need,
                                                                strict=True))
    parts = [t.stream * t.cols_on for t in tiles]
    reads = sum(p for t, p in zip(tiles, parts, strict=True) if not t.first)
    outs = sum(p for t, p in zip(tiles, parts, strict=True) if t.last)
    firsts = sum(p for t, p in zip(tiles, parts, strict=True) if t.first)
    out.update({"accumulator reads": 4 * reads, "accumulator writes": 4 * sum(parts),
                "C in": 4 * firsts if with_c else 0, "D out": 4 * outs})
    return out
