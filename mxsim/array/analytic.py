"""The analytic view of an array: a GEMM's cycles, utilisation, stalls and traffic in closed form.

The same :class:`~mxsim.array.ArraySpec` as the cycle model, timed without stepping it: the
GEMM's steps (waves of beats for "os", stationary tiles and streamed vectors for "ws"/"is", in
the order of :mod:`mxsim.array.spec`) fall into at most four classes (full or ragged in each
outer dimension), and each class is timed once by the same issue rules as the cycle model:

- a step issues when the units are free again (``P`` cycles per beat), when its blocks have
  arrived from the buffers (``ceil(bytes / bandwidth)`` cycles per buffer, the buffers in
  parallel) and, for a K-block of an output already started, when that output's previous D is
  back (``L`` cycles after its beat, plus the tensor memory's read latency);
- a K-block of ``s`` waves therefore takes ``max(sum of the waves' gaps, L + lat)`` cycles, and
  the GEMM ends ``L`` cycles after its last beat.

The stall split names the cycles each cause adds over the units' own ``P`` cycles per beat.
:func:`estimate` is exact (``exact`` True) where those rules are the cycle model's, which
tests/test_array_analytic.py checks against :func:`mxsim.array.cycle.simulate`; elsewhere
(``exact`` False) its cycles are a lower bound.
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


def _os_tile(array: ArraySpec, acc: _Acc, blocks: int, rows_on: int,
             slots: list[int]) -> tuple[int, dict[str, int], int, bool]:
    """One output-stationary tile timed by the cycle model's rules from its first wave's
    issue (cycle 0): (its last wave's issue, idle cycles by cause after the first wave, the
    last wave's write cycles, whether no write waited for the port)."""
    lost = dict.fromkeys(_OS_CAUSES, 0)
    feeds = [_feeds(array, rows_on if t == 0 else 0, c)[:2] for t, c in enumerate(slots)]
    wr = [acc.cycles(rows_on * c, acc.write_ports) for c in slots]
    rd = [acc.cycles(rows_on * c, acc.read_ports) for c in slots]
    p, lat = array.passes, array.latency
    prev = [0] * len(slots)               # issue cycle of each slot's previous wave
    last, last_wr, free_port = 0, wr[0], True
    for kb in range(blocks):
        for t in range(len(slots)):
            if kb == 0 and t == 0:
                continue
            ready = last + p
            marks: list[tuple[int, str]] = []
            if kb:
                free = prev[t] + lat + wr[t]            # the cycle after the slot's D is written
                done = max(last + 1, free) + rd[t] - 1 + acc.latency
                marks = [(free, "chain dependency"), (done, "accumulator port")]
            marks += [(last + max(1, feeds[t][0]), "operand bandwidth"),
                      (last + max(1, feeds[t][1]), "scale bandwidth")]
            s = max([ready] + [until for until, _ in marks])
            _idle(lost, ready, s, marks)
            free_port &= s - last >= last_wr
            prev[t], last, last_wr = s, s, wr[t]
    return last, lost, last_wr, free_port


def _os(array: ArraySpec, m: int, n: int, blocks: int, with_c: bool) -> tuple:
    """The output-stationary GEMM: (cycles, busy unit-cycles, idle unit-cycles by cause,
    traffic, exact). Tiles of one class (full or ragged in M and in N) take the same time; a
    tile's first wave needs no C and follows the previous tile's last wave by its own gap."""
    rows, cols, inter, p = array.rows, array.cols, array.interleave, array.passes
    span = cols * inter
    acc = _Acc(array)
    lost = dict.fromkeys(_OS_CAUSES, 0)
    traffic = {"A": 0, "B": 0, **({"scales": 0} if array.scales is Scales.SEPARATE else {})}
    values = {"reads": 0, "writes": 0, "c": 0, "d": 0}
    m_tiles = [(m // rows, rows)] + ([(1, m % rows)] if m % rows else [])
    n_tiles = [(n // span, span)] + ([(1, n % span)] if n % span else [])
    issue, busy, ragged, exact, tail = None, 0, 0, True, 1
    for mt, rows_on in m_tiles:
        for nt, width in n_tiles:
            count = mt * nt
            if not count:
                continue
            slots = [min(cols, width - cols * t) for t in range(inter) if cols * t < width]
            span_t, tlost, tail, free_port = _os_tile(array, acc, blocks, rows_on, slots)
            exact &= free_port and tail <= p     # no write waits for a port across tiles
            ab0, sc0 = _feeds(array, rows_on, slots[0])[:2]
            first = [(ab0, "operand bandwidth"), (sc0, "scale bandwidth")]
            gap = max(p, ab0, sc0)
            after = count
            if issue is None:                # the GEMM's first wave, fetched from cycle 0
                _idle(lost, 0, max(ab0, sc0), first)
                issue, after = max(ab0, sc0) - gap, count - 1
            for cause, c in _first_idle(p, gap, first).items():
                lost[cause] += after * c
            for cause, c in tlost.items():
                lost[cause] += count * c
            issue += count * (span_t + gap)
            for t, cols_on in enumerate(slots):
                active = rows_on * cols_on
                busy += count * blocks * p * active
                ragged += count * blocks * p * (array.units - active)
                _add(traffic, _feeds(array, rows_on if t == 0 else 0, cols_on)[2],
                     count * blocks)
                values["writes"] += count * blocks * active
                values["reads"] += count * (blocks - 1) * active
                values["c"] += count * active
                values["d"] += count * active
    end = issue + array.latency + tail
    lost["fill and drain"] = end - issue - p
    stalls = {cause: array.units * c for cause, c in lost.items()}
    stalls["ragged edges"] = ragged
    traffic.update({"accumulator reads": 4 * values["reads"],
                    "accumulator writes": 4 * values["writes"],
                    "C in": 4 * values["c"] if with_c else 0, "D out": 4 * values["d"]})
    return end, busy, stalls, traffic, exact


def _first_idle(p: int, gap: int, marks: list[tuple[int, str]]) -> dict[str, int]:
    lost = {cause: 0 for _, cause in marks}
    _idle(lost, p, gap, marks)
    return lost


def _stationary(array: ArraySpec, m: int, n: int, blocks: int) -> tuple:
    """A weight- or input-stationary GEMM, as a lower bound: per stationary tile its blocks
    loaded, then the streamed vectors one per gap, a column's partial passing down the rows
    (``L`` cycles per row). (cycles, busy, stalls, traffic, exact=False)."""
    ws = array.dataflow is Dataflow.WS
    outer, stream = (n, m) if ws else (m, n)
    held, streamed = ("b", "a") if ws else ("a", "b")
    rows, cols, p = array.rows, array.cols, array.passes
    ktiles = [(blocks // rows, rows)] + ([(1, blocks % rows)] if blocks % rows else [])
    otiles = [(outer // cols, cols)] + ([(1, outer % cols)] if outer % cols else [])
    bw = {"a": array.a_buffer.bandwidth, "b": array.b_buffer.bandwidth}
    issue = busy = 0
    lost = {"stationary load": 0, "operand bandwidth": 0, "accumulator port": 0,
            "fill and drain": 0}
    traffic: dict[str, int] = {"A": 0, "B": 0}
    ports = array.accumulators.write_ports if array.accumulators.kind is AccKind.TMEM else None
    for ot, cols_on in otiles:
        for kt, rows_on in ktiles:
            count = ot * kt
            if not count:
                continue
            load = _feed(rows_on * cols_on * array.block_bytes(held), bw[held])
            g = max(p, _feed(rows_on * array.block_bytes(streamed), bw[streamed]))
            gap = max(g, _feed(cols_on, ports) if ports else 0)
            issue += count * (load + stream * gap + (rows_on - 1) * array.latency)
            busy += count * stream * p * rows_on * cols_on
            lost["stationary load"] += count * load
            lost["operand bandwidth"] += count * stream * (g - p)
            lost["accumulator port"] += count * stream * (gap - g)
            lost["fill and drain"] += count * (rows_on - 1) * array.latency
            _add(traffic, {held.upper(): rows_on * cols_on * array.block_bytes(held)}, count)
            _add(traffic, {streamed.upper(): stream * rows_on * array.block_bytes(streamed)},
                 count)
    end = issue + array.latency
    lost["fill and drain"] += array.latency
    stalls = {cause: array.units * c for cause, c in lost.items()}
    return end, busy, stalls, traffic, False


def estimate(array: ArraySpec, m: int, n: int, k: int, *, with_c: bool = False) -> Estimate:
    """The cycles, utilisation, stalls (idle unit-cycles by cause, as the cycle model counts
    them) and buffer traffic (bytes) of ``m x n x k`` on ``array``; ``with_c``: the GEMM
    has a C to read."""
    blocks = check(array, m, n, k)
    if array.dataflow is Dataflow.OS:
        cycles, busy, stalls, traffic, exact = _os(array, m, n, blocks, with_c)
    else:
        cycles, busy, stalls, traffic, exact = _stationary(array, m, n, blocks)
    stalls = {cause: stalls.get(cause, 0) for cause in STALL_CAUSES}
    return Estimate(cycles, busy / (array.units * cycles), stalls, traffic, exact,
                    detail={"k_blocks": blocks, "passes": array.passes,
                            "latency": array.latency, "busy": busy})
