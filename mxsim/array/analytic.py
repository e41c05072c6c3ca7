"""The analytic view of an array: a GEMM's cycles, utilisation, stalls and traffic in closed form.

The same :class:`~mxsim.array.ArraySpec` as the cycle model (:mod:`mxsim.array.cycle`,
:mod:`mxsim.array.stationary`), timed without stepping it, so that explore can size arrays for
whole LLM layers.

Output-stationary: the GEMM's waves (in :func:`mxsim.array.plan.os_waves`' order) fall into
at most four tile classes (full or ragged in M and in N); each class is timed once, wave by
wave over one tile, by the cycle model's own rules (a wave issues when the units are free
again, ``P`` cycles after the last; when its blocks are fetched, ``ceil(bytes / bandwidth)``
cycles per buffer from the previous issue; for a K-block after the first, when its slot's
previous D is written to the accumulators and read back as C), and a tile's first wave
follows the previous tile's last by its own fetch gap. A tensor memory's write queue (its
``write_ports`` values a cycle) is followed too, from tile to tile: a run of tiles (or of rows
of tiles) that leaves the queue as it found it repeats, and so do a tile's K-blocks once they
leave the slots and the queue as the K-block before did; each repeat is added at once.
Cycles, busy and idle unit-cycles by cause and traffic equal the cycle model's (``exact``).

Weight- and input-stationary: every row issues ``L + 1`` cycles after the row above (its
partial sum), so the top row's beats decide the run; they are followed tile by tile (each
tile's load, fetch, the register chain's round trip from the tile before, its beats one gap
apart or behind a slower tile's partials), each distinct tile's beats timed once. Cycles,
idle unit-cycles by cause and traffic equal the cycle model's (``exact``) with register
accumulators, and with a tensor memory whose adder takes at least ``cols`` values a cycle
when every K-tile has the same rows; elsewhere (a bottom row may wait for the adder) the
cycles are a lower bound, busy unit-cycles and traffic still exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .cycle import STALL_CAUSES
from .spec import AccKind, ArrayError, ArraySpec, Dataflow, Scales

__all__ = ["Estimate", "estimate", "check", "MAX_DIM"]

#: The largest M, N or K the closed form takes (it is exact integer arithmetic, but a GEMM
#: beyond 2^31 per side is a typo).
MAX_DIM = 1 << 31


@dataclass
class Estimate:
    """A GEMM's timing on an array, from the closed form."""
    cycles: int
    utilisation: float               #: products done / (units x lanes x cycles)
    stalls: dict[str, int]           #: cycles added over the units' own passes, by cause
    traffic: dict[str, int]          #: bytes read from each buffer
    exact: bool                      #: equal to the cycle model (else a lower bound)
    detail: dict[str, Any] = field(default_factory=dict)


def check(array: ArraySpec, m: int, n: int, k: int) -> int:
    """K / k, or ArrayError (one line) when the GEMM does not fit the array's unit."""
    for name, value in (("M", m), ("N", n), ("K", k)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DIM:
            raise ArrayError(f"GEMM {name} must be an integer from 1 to {MAX_DIM}, not "
                             f"{value!r}")
    if k % array.unit.k:
        raise ArrayError(f"GEMM K ({k}) must be a multiple of unit {array.unit.name!r}'s "
                         f"instruction k ({array.unit.k})")
    return k // array.unit.k


def _feed(nbytes: int, bandwidth: int) -> int:
    return -(-nbytes // bandwidth)


def _scale_bytes(array: ArraySpec, blocks: int) -> int:
    return blocks * array.scales_per_block if array.scales is Scales.SEPARATE else 0


def _feeds(array: ArraySpec, a_blocks: int, b_blocks: int) -> tuple[int, int, dict[str, int]]:
    """Cycles to fetch a wave's A and B blocks (the slower buffer), its scales, and the
    bytes it reads by buffer (the cycle model's names)."""
    ta = {"A": a_blocks * array.block_bytes("a"), "B": b_blocks * array.block_bytes("b")}
    ab = max(_feed(ta["A"], array.a_buffer.bandwidth), _feed(ta["B"], array.b_buffer.bandwidth))
    sc = 0
    if array.scales is Scales.SEPARATE:
        ta["scales"] = (a_blocks + b_blocks) * array.scales_per_block
        sc = _feed(ta["scales"], array.scale_buffer.bandwidth)
    return ab, sc, ta


def _add(total: dict[str, int], part: dict[str, int], times: int) -> None:
    for key, value in part.items():
        total[key] = total.get(key, 0) + value * times


class _Acc:
    """The accumulators' constants: ports, read latency (registers: unlimited, 0)."""

    def __init__(self, array: ArraySpec):
        acc = array.accumulators
        tmem = acc.kind is AccKind.TMEM
        self.read_ports = acc.read_ports if tmem else None
        self.write_ports = acc.write_ports if tmem else None
        self.latency = acc.latency if tmem else 0

    def cycles(self, values: int, ports: int | None) -> int:
        return 1 if ports is None else _feed(values, ports)


def _idle(lost: dict[str, int], ready: int, issue: int, marks: list[tuple[int, str]]) -> None:
    """Charge the idle cycles ``ready .. issue - 1`` to the first unmet condition: each
    ``(until, cause)`` of ``marks`` is unmet before cycle ``until`` (in priority order)."""
    at = ready
    for until, cause in marks:
        take = min(until, issue) - at
        if take > 0:
            lost[cause] += take
            at += take


_OS_CAUSES = ("chain dependency", "accumulator port", "operand bandwidth", "scale bandwidth")


def _os_tile(array: ArraySpec, acc: _Acc, blocks: int, rows_on: int, slots: list[int],
             queue: tuple[int, int]) -> tuple[int, dict[str, int], tuple[int, int]]:
    """One output-stationary tile timed by the cycle model's rules from its first wave's
    issue (cycle 0), the write queue holding what earlier tiles left (``queue``: its last
    cycle and the ports used in it, relative to that issue): (its last wave's issue, idle
    cycles by cause after the first wave, and the queue it leaves, relative to its last
    issue).

    K-block after K-block, wave by wave; once a K-block leaves the slots and the write queue
    in the state the one before it did (relative to the last issue), the rest repeat it
    exactly and are added at once."""
    lost = dict.fromkeys(_OS_CAUSES, 0)
    tile = _OsTile(array, acc, rows_on, slots, queue)
    before = None
    for kb in range(blocks):
        step = dict.fromkeys(_OS_CAUSES, 0)
        start = tile.last
        tile.block(kb, step)
        for cause, c in step.items():
            lost[cause] += c
        state = tile.state()
        if kb >= 2 and state == before:
            rest = blocks - 1 - kb                     # periodic from here on
            delta = tile.last - start
            tile.last += rest * delta
            tile.written += rest * delta
            for cause, c in step.items():
                lost[cause] += rest * c
            break
        before = state
    return tile.last, lost, (tile.written - tile.last, tile.used)


class _OsTile:
    """The wave-by-wave state of one output-stationary tile (see :func:`_os_tile`): each
    slot's cycle from which its accumulators hold its last D, and the accumulators' write
    queue (``write_ports`` values a cycle, in order; registers take a wave at once)."""

    def __init__(self, array: ArraySpec, acc: _Acc, rows_on: int, slots: list[int],
                 queue: tuple[int, int]):
        self.array, self.acc = array, acc
        self.feeds = [_feeds(array, rows_on if t == 0 else 0, c)[:2]
                      for t, c in enumerate(slots)]
        self.values = [rows_on * c for c in slots]
        self.rd = [acc.cycles(v, acc.read_ports) for v in self.values]
        self.free = [0] * len(slots)          # first cycle each slot's last D is written
        self.last = 0
        self.written, self.used = queue       # the write queue's last cycle, ports used in it
        self._write(0, self.values[0])

    def _write(self, issue: int, values: int) -> None:
        """Queue a wave's D values, arriving ``L`` cycles after ``issue``."""
        ports = self.acc.write_ports or values
        arrive = issue + self.array.latency
        if arrive > self.written:
            n = -(-values // ports)
            self.written, self.used = arrive + n - 1, values - (n - 1) * ports
        elif values <= ports - self.used:
            self.used += values
        else:
            left = values - (ports - self.used)
            n = -(-left // ports)
            self.written, self.used = self.written + n, left - (n - 1) * ports

    def state(self) -> tuple:
        return (*(f - self.last for f in self.free), self.written - self.last, self.used)

    def block(self, kb: int, lost: dict[str, int]) -> None:
        """Issue the waves of K-block ``kb``, charging idle cycles to ``lost``."""
        p, acc = self.array.passes, self.acc
        for t in range(len(self.free)):
            if kb == 0 and t == 0:
                self.free[0] = self.written + 1
                continue
            last = self.last
            ready = last + p
            marks: list[tuple[int, str]] = []
            if kb:
                free = self.free[t]
                done = max(last + 1, free) + self.rd[t] - 1 + acc.latency
                marks = [(free, "chain dependency"), (done, "accumulator port")]
            marks += [(last + max(1, self.feeds[t][0]), "operand bandwidth"),
                      (last + max(1, self.feeds[t][1]), "scale bandwidth")]
            s = max([ready] + [until for until, _ in marks])
            _idle(lost, ready, s, marks)
            self._write(s, self.values[t])
            self.free[t], self.last = self.written + 1, s


#: An empty write queue, relative to any issue cycle.
_EMPTY = (-(1 << 40), 0)


class _OsTiming:
    """The issue timeline of an output-stationary GEMM, tile after tile in the plan's order
    (M-tiles outer, N-tiles inner); runs of tiles (or of M-rows of tiles) that leave the
    write queue as they found it repeat exactly and are added at once."""

    def __init__(self, array: ArraySpec, blocks: int):
        self.array, self.blocks, self.acc = array, blocks, _Acc(array)
        self.lost = dict.fromkeys(_OS_CAUSES, 0)
        self.issue: int | None = None         # the last wave's issue cycle
        self.queue = _EMPTY                   # the write queue, relative to that cycle
        self.cache: dict[tuple, tuple] = {}

    def tile(self, rows_on: int, width: int) -> None:
        array, p = self.array, self.array.passes
        cols, inter = array.cols, array.interleave
        slots = [min(cols, width - cols * t) for t in range(inter) if cols * t < width]
        ab0, sc0 = _feeds(array, rows_on, slots[0])[:2]
        first = [(ab0, "operand bandwidth"), (sc0, "scale bandwidth")]
        gap = max(p, ab0, sc0)
        if self.issue is None:                # the GEMM's first wave, fetched from cycle 0
            _idle(self.lost, 0, max(ab0, sc0), first)
            start, queue = max(ab0, sc0), _EMPTY
        else:
            _idle(self.lost, p, gap, first)
            start = self.issue + gap
            queue = (self.queue[0] - gap, self.queue[1])
            if queue[0] < array.latency:      # written before the first D arrives: empty
                queue = _EMPTY
        key = (rows_on, tuple(slots), queue)
        if key not in self.cache:
            self.cache[key] = _os_tile(array, self.acc, self.blocks, rows_on, slots, queue)
        span_t, tlost, self.queue = self.cache[key]
        for cause, c in tlost.items():
            self.lost[cause] += c
        self.issue = start + span_t

    def repeat(self, count: int, run) -> None:
        """``run()`` ``count`` times; once a run leaves the queue as it found it, the rest
        add what it added."""
        for i in range(count):
            before, issue, lost = self.queue, self.issue, dict(self.lost)
            run()
            if issue is not None and self.queue == before and i < count - 1:
                rest = count - 1 - i
                self.issue += rest * (self.issue - issue)
                for cause in self.lost:
                    self.lost[cause] += rest * (self.lost[cause] - lost[cause])
                return


def _os(array: ArraySpec, m: int, n: int, blocks: int, with_c: bool) -> tuple:
    """The output-stationary GEMM: (cycles, busy unit-cycles, idle unit-cycles by cause,
    traffic, exact). Tiles of one class (full or ragged in M and in N) with the same write
    queue left by the tile before take the same time; a tile's first wave needs no C and
    follows the previous tile's last wave by its own fetch gap."""
    rows, cols, inter, p = array.rows, array.cols, array.interleave, array.passes
    span = cols * inter
    timing = _OsTiming(array, blocks)
    traffic = {"A": 0, "B": 0, **({"scales": 0} if array.scales is Scales.SEPARATE else {})}
    values = {"reads": 0, "writes": 0, "c": 0, "d": 0}
    m_tiles = [(m // rows, rows)] + ([(1, m % rows)] if m % rows else [])
    n_tiles = [(nt, w) for nt, w in [(n // span, span)] + ([(1, n % span)] if n % span else [])
               if nt]
    busy = ragged = 0
    for mt, rows_on in m_tiles:
        if not mt:
            continue
        timing.repeat(mt, lambda r=rows_on: [timing.repeat(nt, lambda w=w: timing.tile(r, w))
                                             for nt, w in n_tiles])
        for nt, width in n_tiles:
            count = mt * nt
            for t in range(inter):
                cols_on = min(cols, width - cols * t)
                if cols_on <= 0:
                    break
                active = rows_on * cols_on
                busy += count * blocks * p * active
                ragged += count * blocks * p * (array.units - active)
                _add(traffic, _feeds(array, rows_on if t == 0 else 0, cols_on)[2],
                     count * blocks)
                values["writes"] += count * blocks * active
                values["reads"] += count * (blocks - 1) * active
                values["c"] += count * active
                values["d"] += count * active
    end = timing.issue + timing.queue[0] + 1      # the cycle after the last D is written
    lost = timing.lost
    lost["fill and drain"] = end - timing.issue - p
    stalls = {cause: array.units * c for cause, c in lost.items()}
    stalls["ragged edges"] = ragged
    traffic.update({"accumulator reads": 4 * values["reads"],
                    "accumulator writes": 4 * values["writes"],
                    "C in": 4 * values["c"] if with_c else 0, "D out": 4 * values["d"]})
    return end, busy, stalls, traffic, True


def _stationary(array: ArraySpec, m: int, n: int, blocks: int, with_c: bool) -> tuple:
    """A weight- or input-stationary GEMM (:mod:`mxsim.array.stationary`'s rules): the top
    row's timeline (:func:`_stationary_timeline`), and where a tensor memory's adder may
    hold a bottom row back (which only delays), the larger of it and the adder's rate: a
    lower bound. Busy unit-cycles and traffic are exact.
    (cycles, busy, stalls, traffic, exact)."""
    ws = array.dataflow is Dataflow.WS
    outer, stream = (n, m) if ws else (m, n)
    held, streamed = ("b", "a") if ws else ("a", "b")
    rows, cols, p, lat = array.rows, array.cols, array.passes, array.latency
    spb = array.scales_per_block
    sep = array.scales is Scales.SEPARATE
    otiles = [(outer // cols, cols)] + ([(1, outer % cols)] if outer % cols else [])
    bw = {"a": array.a_buffer.bandwidth, "b": array.b_buffer.bandwidth}
    tmem = array.accumulators.kind is AccKind.TMEM
    rate = min(array.accumulators.read_ports, array.accumulators.write_ports)
    busy = ragged = 0
    lost = dict.fromkeys(("operand bandwidth", "scale bandwidth"), 0)
    traffic = {"A": 0, "B": 0, **({"scales": 0} if sep else {})}
    n_k = -(-blocks // rows)
    last_rows = blocks - (n_k - 1) * rows
    held_block = array.element_bytes(held) + spb

    def gap(rows_on: int) -> tuple[int, int, int]:
        fa = _feed(rows_on * array.block_bytes(streamed), bw[streamed])
        fs = _feed(rows_on * spb, array.scale_buffer.bandwidth) if sep else 0
        return max(p, fa, fs), fa, fs

    parts = 0
    for ot, cols_on in otiles:
        if not ot:
            continue
        seq = [rows] * (n_k - 1) + [last_rows]
        for r in seq:
            g, fa, fs = gap(r)
            lost["operand bandwidth"] += ot * stream * max(0, fa - p)
            lost["scale bandwidth"] += ot * stream * max(0, fs - max(p, fa))
            busy += ot * stream * p * r * cols_on
            ragged += ot * stream * p * r * (cols - cols_on)
            traffic[held.upper()] += ot * r * cols_on * held_block
            traffic[streamed.upper()] += ot * stream * r * array.block_bytes(streamed)
            if sep:
                traffic["scales"] += ot * stream * r * spb
            parts += ot * stream * cols_on
    first_load = _feed(min(rows, blocks) * min(cols, outer) * held_block, bw[held])
    cycles, top_lost = _stationary_timeline(array, stream, otiles, n_k, last_rows, gap,
                                            held_block, bw[held])
    if tmem:                 # the adder's rate (the timeline assumes it keeps up)
        cycles = max(cycles, first_load + lat + -(-parts // rate)
                     + array.accumulators.latency)
    values = {"parts": parts, "firsts": stream * outer, "outs": stream * outer}
    values["reads"] = parts - values["firsts"]
    # The timeline is the cycle model's unless a tensor memory's adder makes a bottom row
    # wait: it takes each D's values in their own cycle when it adds at least ``cols`` a
    # cycle and only one row is ever a bottom row (every K-tile of the same rows).
    exact = not tmem or (rate >= cols and (n_k == 1 or last_rows == rows))
    if exact:        # the top row's own idle cycles; the rows below wait for its partials
        stalls = {"ragged edges": ragged, **{c: cols * v for c, v in top_lost.items()}}
        stalls["fill and drain"] = array.units * cycles - busy - sum(stalls.values())
    else:
        stalls = _stationary_stalls(array, cycles, busy, ragged, first_load, lost)
    traffic.update({"accumulator reads": 4 * values["reads"],
                    "accumulator writes": 4 * values["parts"],
                    "C in": 4 * values["firsts"] if with_c else 0, "D out": 4 * values["outs"]})
    return cycles, busy, stalls, traffic, exact


_ST_CAUSES = ("chain dependency", "stationary load", "operand bandwidth", "scale bandwidth")


def _stationary_timeline(array: ArraySpec, stream: int, otiles: list[tuple[int, int]],
                         n_k: int, last_rows: int, gap, held_block: int,
                         bw: int) -> tuple[int, dict[str, int]]:
    """The stationary cycle model's end and the top row's idle cycles by cause, tile by tile
    on the top row's timeline: each row issues ``L + 1`` cycles after the row above (its
    partial sum), so the top row's beats decide everything. Tile ``i``: its load starts when
    tile ``i - 1`` is usable and its last row issued its first beat; its first beat waits
    for the load, the fetch (``gap`` after the previous beat) and, with register
    accumulators after the first K-tile, the partial of the tile before back from its bottom
    row (``R (L + 1)``); its beats then follow one ``gap`` apart or, behind a slower tile's
    partials, as those arrive. Exact while no row waits for anything but the row above (a
    tensor memory's adder keeps up)."""
    lat, rows, p = array.latency, array.rows, array.passes
    chained = array.accumulators.kind is AccKind.REGISTERS
    a_prev = last_prev = u_prev = None
    r_prev = g_prev = end = 0
    tmem_lat = 0 if chained else array.accumulators.latency
    lost = dict.fromkeys(_ST_CAUSES, 0)
    beats: dict[tuple, dict[str, int]] = {}
    for ot, cols_on in otiles:
        for _ in range(ot):
            for i in range(n_k):
                r = last_rows if i == n_k - 1 else rows
                g, fa, fs = gap(r)
                need = _feed(r * cols_on * held_block, bw)
                if a_prev is None:              # the GEMM's first tile, from cycle 0
                    u, ready, base = need - 1, 0, 0
                else:
                    start = max(u_prev + 1, a_prev + (r_prev - 1) * (lat + 1))
                    u, ready, base = start + need - 1, last_prev + p, last_prev
                marks = [(u + 1, "stationary load"), (base + max(1, fa) if base else fa,
                                                      "operand bandwidth"),
                         (base + max(1, fs) if base else fs, "scale bandwidth")]
                c0 = a_prev + r_prev * (lat + 1) if chained and i and a_prev is not None \
                    else None
                if c0 is not None:
                    marks.insert(0, (c0, "chain dependency"))
                a = max([ready] + [until for until, _ in marks])
                _idle(lost, ready, a, marks)
                last = a + (stream - 1) * g
                if c0 is not None:
                    last = max(last, c0 + (stream - 1) * g_prev)
                key = (g, fa, fs, None if c0 is None else (c0 - a, g_prev))
                if key not in beats:
                    beats[key] = _stationary_beats(p, stream, g, fa, fs, c0 and c0 - a,
                                                   g_prev)
                for cause, c in beats[key].items():
                    lost[cause] += c
                a_prev, last_prev, u_prev, r_prev, g_prev = a, last, u, r, g
                # the cycle after its bottom row's last D (a tile of fewer rows may end first)
                end = max(end, last + (r - 1) * (lat + 1) + lat + 1
                          + (tmem_lat if i == n_k - 1 else 0))
    return end, lost


def _stationary_beats(p: int, stream: int, g: int, fa: int, fs: int, c0: int | None,
                      g_prev: int) -> dict[str, int]:
    """The top row's idle cycles by cause over a tile's beats after its first (issued at 0):
    beat ``s`` waits for the fetch (from beat ``s - 1``) and, behind a chain (``c0``: when
    the first partial of the tile before is back, relative), for partial ``s`` at
    ``c0 + s g_prev``."""
    lost = dict.fromkeys(_ST_CAUSES, 0)
    t = 0
    for s in range(1, stream):
        marks = [(t + max(1, fa), "operand bandwidth"), (t + max(1, fs), "scale bandwidth")]
        if c0 is not None:
            marks.insert(0, (c0 + s * g_prev, "chain dependency"))
        nxt = max([t + p] + [until for until, _ in marks])
        _idle(lost, t + p, nxt, marks)
        t = nxt
    return lost


def _stationary_stalls(array: ArraySpec, cycles: int, busy: int, ragged: int,
                       first_load: int, lost: dict[str, int]) -> dict[str, int]:
    """The bound's idle unit-cycles: the top row waits for loads and fetches (its ``cols``
    units), the rows below for its partial sums (fill and drain, the rest)."""
    cols = array.cols
    stalls = {"stationary load": cols * min(first_load, cycles), "ragged edges": ragged,
              **{c: cols * v for c, v in lost.items()}}
    rest = array.units * cycles - busy - sum(stalls.values())
    for cause in ("operand bandwidth", "scale bandwidth", "stationary load"):
        take = min(stalls[cause], max(0, -rest))    # the bound counts a first fetch twice
        stalls[cause] -= take
        rest += take
    stalls["fill and drain"] = rest
    return stalls


def estimate(array: ArraySpec, m: int, n: int, k: int, *, with_c: bool = False) -> Estimate:
    """The cycles, utilisation, stalls (idle unit-cycles by cause, as the cycle model counts
    them) and buffer traffic (bytes) of ``m x n x k`` on ``array``; ``with_c``: the GEMM
    has a C to read."""
    blocks = check(array, m, n, k)
    if array.dataflow is Dataflow.OS:
        cycles, busy, stalls, traffic, exact = _os(array, m, n, blocks, with_c)
    else:
        cycles, busy, stalls, traffic, exact = _stationary(array, m, n, blocks, with_c)
    stalls = {cause: stalls.get(cause, 0) for cause in STALL_CAUSES}
    return Estimate(cycles, busy / (array.units * cycles), stalls, traffic, exact,
                    detail={"k_blocks": blocks, "passes": array.passes,
                            "latency": array.latency, "busy": busy})
