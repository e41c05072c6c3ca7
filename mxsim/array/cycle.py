"""The cycle model of an array of dot-product units: the array stepped one clock at a time.

:func:`simulate` runs an M x N x K GEMM on an :class:`~mxsim.array.spec.ArraySpec` and
returns an :class:`ArrayRun`: cycles, utilisation, stalls by cause, traffic per buffer and,
when operands are given, D's codes from the engine (:mod:`mxsim.array.values`).

Timing contract, output-stationary (``hdl.array.DotProductArray`` is the same machine for
register accumulators; docs/array.md shows it cycle by cycle). The waves of
:func:`mxsim.array.plan.os_waves` issue in order, one per cycle at most, all active units
taking their beat (``first`` = ``last`` = 1) in the same cycle; the units are
``mxsim.microarch.cycle.UnitModel``s (``hdl.unit.DotProductUnit``), and since they move in lockstep
one model stands for all. Wave ``w`` issues in cycle ``s`` when all of these hold:

1. the units take a beat (``i.ready``: a unit accepts a beat every ``P`` cycles);
2. *operands*: each operand buffer fetches ``bandwidth`` bytes per cycle for the pending
   wave (A: the active rows' blocks on a wave with ``new_a``, else nothing; B: the active
   columns' blocks; separate scales: their scale bytes from the scale buffer), starting in
   cycle 0 or in the cycle the previous wave issues, and the wave can issue in the cycle
   after its last byte was fetched (a wave that needs nothing can issue at once);
3. *chain*: a wave that is not ``first`` issues only when every earlier wave of its
   interleave slot has had its D written to the accumulators, and (tmem) its C has been
   read: ``read_ports`` values per cycle from the first cycle its slot is written, usable
   ``latency`` cycles after the cycle of the last read (0: that cycle).

A unit's D appears on its output ``L = P + stages + 1`` cycles after the wave's issue (the
units never stall: accumulators always take their results). The D values enter the
accumulators: ``write_ports`` values per cycle in order (tmem), all at once (registers); a
slot is written in the cycle after its wave's last value was written. Register accumulators
are the tmem rules with unlimited ports and latency 0. The run ends in the cycle the last D
appears (and the last write is done); ``cycles`` counts cycle 0 through that one.

Weight- and input-stationary arrays (:func:`simulate` with dataflow "ws"/"is") follow
:mod:`mxsim.array.stationary`.

Stalls are counted in *unit-cycles*: each cycle each unit is busy (one of the ``P`` cycles
of a beat) or idle for one cause, so ``busy + sum(stalls) == units * cycles`` and
``utilisation = busy / (units * cycles)`` (useful products over the array's capacity). An
idle issue slot (the units ready, no wave issued) is charged to the first unmet condition:
``chain dependency``, ``accumulator port``, ``operand bandwidth``, ``scale bandwidth``; after
the last wave, ``fill and drain``; units left out of a wave are ``ragged edges``.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..microarch.cycle import Beat, UnitModel
from . import plan, values
from .run import STALL_CAUSES, ArrayRun, OsTrace
from .spec import AccKind, ArraySpec, Dataflow, Scales
from .stationary import simulate_stationary

__all__ = ["ArrayRun", "OsTrace", "simulate", "STALL_CAUSES"]

class _Fetch:
    """A buffer's port: ``rate`` units per cycle fetched for the pending step."""

    def __init__(self, rate: int):
        self.rate, self.count = rate, 0

    def edge(self, need: int, issued: bool) -> None:
        if issued:
            self.count = self.rate          # this cycle's fetch went to the next step
        elif self.count < need:
            self.count += self.rate


def _needs(array: ArraySpec, w: plan.Wave) -> tuple[int, int, int]:
    """Bytes of wave ``w`` from the A, B and scale buffers."""
    rows = w.rows_on if w.new_a else 0
    need_a, need_b = rows * array.block_bytes("a"), w.cols_on * array.block_bytes("b")
    need_s = (rows + w.cols_on) * array.scales_per_block if array.scales is Scales.SEPARATE \
        else 0
    return need_a, need_b, need_s


class _Accumulators:
    """Reads and writes of the accumulators (tmem rules; registers: unlimited, latency 0)."""

    def __init__(self, array: ArraySpec):
        acc = array.accumulators
        tmem = acc.kind is AccKind.TMEM
        big = 1 << 62
        self.read_ports = acc.read_ports if tmem else big
        self.write_ports = acc.write_ports if tmem else big
        self.latency = acc.latency if tmem else 0
        self.pending: dict[int, int] = {}      # slot -> waves issued and not yet written
        self.writes: deque[list[int]] = deque()  # [slot, values left]
        self.read = 0                          # values read for the pending wave
        self.read_done: int | None = None      # cycle of its last read

    def advance(self, w: plan.Wave, cycle: int) -> None:
        """This cycle's reads of the pending wave ``w``'s C (from the cycle its slot is
        written)."""
        if w.first or self.pending.get(w.t, 0) or self.read_done is not None:
            return
        self.read = min(w.active, self.read + self.read_ports)
        if self.read >= w.active:
            self.read_done = cycle

    def can_issue(self, w: plan.Wave, cycle: int) -> str | None:
        """None when wave ``w``'s C is ready this cycle, else the stall cause (a read of
        latency 0 is used in its own cycle)."""
        if w.first:
            return None
        if self.pending.get(w.t, 0):
            return "chain dependency"
        if self.read_done is not None and cycle >= self.read_done + self.latency:
            return None
        return "accumulator port"

    def issued(self, w: plan.Wave) -> None:
        self.pending[w.t] = self.pending.get(w.t, 0) + 1
        self.read, self.read_done = 0, None

    def arrive(self, w: plan.Wave) -> None:
        self.writes.append([w.t, w.active])

    def write(self) -> list[int]:
        """This cycle's writes: the slots whose wave is now fully written (free from the
        next cycle: :meth:`free`)."""
        ports, freed = self.write_ports, []
        while self.writes and ports:
            entry = self.writes[0]
            done = min(ports, entry[1])
            entry[1] -= done
            ports -= done
            if entry[1]:
                break
            self.writes.popleft()
            freed.append(entry[0])
        return freed

    def free(self, slots: list[int]) -> None:
        for t in slots:
            self.pending[t] -= 1


def _run_os(array: ArraySpec, waves: list[plan.Wave], record: bool):
    """Step the output-stationary machine; (cycles, issue/out per cycle, stall cycles by
    cause, cycle each wave's D appeared)."""
    unit = UnitModel(array.unit, array.microarch)
    fetch = [_Fetch(array.a_buffer.bandwidth), _Fetch(array.b_buffer.bandwidth),
             _Fetch(array.scale_buffer.bandwidth if array.scale_buffer else 1)]
    acc = _Accumulators(array)
    needs = [_needs(array, w) for w in waves]
    inflight: deque[int] = deque()
    lost = dict.fromkeys(STALL_CAUSES, 0)
    issue_log, out_log = [], []
    appeared = np.full(len(waves), -1, np.int64)
    w, cycle, total = 0, 0, len(waves)
    limit = (total + 4) * (array.latency + 8) * 8 + 1000 + sum(map(sum, needs))
    while w < total or inflight or acc.writes:
        if cycle > limit:
            raise RuntimeError(f"array cycle model stuck at cycle {cycle} (wave {w})")
        in_ready, out_valid, value = unit.outputs(True)
        if out_valid:
            done = inflight.popleft()
            appeared[done] = cycle
            acc.arrive(waves[done])
        freed = acc.write()
        issue = False
        if w < total:
            acc.advance(waves[w], cycle)
            cause = None
            if in_ready:
                cause = acc.can_issue(waves[w], cycle)
                need = needs[w]
                if cause is None and not (fetch[0].count >= need[0]
                                          and fetch[1].count >= need[1]):
                    cause = "operand bandwidth"
                if cause is None and fetch[2].count < need[2]:
                    cause = "scale bandwidth"
                issue = cause is None
                if cause:
                    lost[cause] += 1
        elif in_ready:
            lost["fill and drain"] += 1
        beat = Beat(w, 0, True, True, w) if issue else None
        unit.step(issue, beat, True)
        acc.free(freed)
        if issue:
            acc.issued(waves[w])
            inflight.append(w)
        pending = needs[w + 1] if issue and w + 1 < total else needs[w] if w < total else None
        for port, need in zip(fetch, pending or (0, 0, 0), strict=True):
            port.edge(need, issue)
        if record:
            issue_log.append(w if issue else -1)
            out_log.append(int(value) if out_valid else -1)
        w += issue
        cycle += 1
    return cycle, issue_log, out_log, lost, appeared


def _traffic(array: ArraySpec, waves: list[plan.Wave], with_c: bool) -> dict[str, int]:
    a = b = s = reads = writes = c_in = d_out = 0
    for wave in waves:
        na, nb, ns = _needs(array, wave)
        a, b, s = a + na, b + nb, s + ns
        reads += 0 if wave.first else wave.active
        writes += wave.active
        c_in += wave.active if wave.first and with_c else 0
        d_out += wave.active if wave.last else 0
    out = {"A": a, "B": b}
    if array.scales is Scales.SEPARATE:
        out["scales"] = s
    out.update({"accumulator reads": 4 * reads, "accumulator writes": 4 * writes,
                "C in": 4 * c_in, "D out": 4 * d_out})
    return out


def _simulate_os(array: ArraySpec, m: int, n: int, k: int, with_c: bool,
                 record: bool) -> ArrayRun:
    waves = plan.os_waves(array, m, n, k)
    cycles, issue_log, out_log, lost, appeared = _run_os(array, waves, record)
    p, units = array.passes, array.units
    busy = p * sum(w.active for w in waves)
    stalls = {cause: units * lost[cause] for cause in STALL_CAUSES}
    stalls["ragged edges"] = p * sum(units - w.active for w in waves)
    # Cycles that are neither an issue nor a lost issue slot: the P - 1 pass cycles of each
    # beat (busy for active units), so busy + stalls covers units x cycles exactly.
    assert busy + sum(stalls.values()) == units * cycles, (busy, stalls, cycles)
    d_cycle = np.full((m, n), -1, np.int64)
    for i, wave in enumerate(waves):
        if wave.last:
            col = wave.n0 + array.cols * wave.t
            d_cycle[wave.m0:wave.m0 + wave.rows_on, col:col + wave.cols_on] = appeared[i]
    trace = None
    if record:
        trace = OsTrace(np.array(issue_log, np.int64), np.array(out_log, np.int64), waves)
    return ArrayRun(array, m, n, k, cycles, busy, stalls, _traffic(array, waves, with_c),
                    d_cycle=d_cycle, trace=trace, detail={"waves": len(waves)})


def simulate(array: ArraySpec, m: int, n: int, k: int, *, a=None, b=None, c=None,
             a_scale=None, b_scale=None, record: bool = False) -> ArrayRun:
    """Run an M x N x K GEMM on ``array`` a cycle at a time (see the module docstring).

    Parameters
    ----------
    a, b, c, a_scale, b_scale
        Optional operand codes in the unit's formats: A ``(M, K)``, B ``(K, N)``, C ``(M, N)``
        (codes of the unit's ``d_format``), scales ``(M, K/block)`` and ``(K/block, N)``.
        Given A and B, the run carries D's codes (``d``), from the engine in the array's
        order of K; with ``record`` (output-stationary) also every instruction's D
        (``chain``) and the per-cycle trace (``trace``).

    Raises
    ------
    ArrayError
        One line, for a GEMM the array cannot run (K not a multiple of the unit's k, too
        many steps for a Python model, operands of the wrong shape or format).
    """
    plan.check_gemm(array, m, n, k)
    vs = None
    if a is not None or b is not None:
        if a is None or b is None:
            raise plan.ArrayError("GEMM operands: give both A and B (or neither)")
        vs = values.operands(array, m, n, k, a, b, c, a_scale, b_scale)
    elif c is not None or a_scale is not None or b_scale is not None:
        raise plan.ArrayError("GEMM operands: C and scales need A and B")
    with_c = c is not None
    if array.dataflow is Dataflow.OS:
        run = _simulate_os(array, m, n, k, with_c, record)
    else:
        run = simulate_stationary(array, m, n, k, with_c)
    if vs is not None:
        run.d = values.final_codes(array, vs)
        if record and array.dataflow is Dataflow.OS:
            run.chain = values.chain_codes(array, vs)
    return run
