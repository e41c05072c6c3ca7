"""The timing a port map declares, checked on a foreign design's recorded trace.

A foreign design's run (:mod:`testbenches.foreign.backend`, :mod:`testbenches.foreign.bulk`) records
an :class:`mxsim.microarch.cycle.Trace` (per cycle: input offered, input taken or allowed, output
valid,
output taken, the low 32 bits of the result) and the cycle each result was read. :func:`check`
holds them to the rules of the map's handshake (docs/foreign-rtl.md, "Timing"):

valid-ready
    (1) every accepted instruction that ends a dot product gives exactly one result, in
    order, and no result comes without one; (2) while ``out_valid`` and not ``out_ready``,
    ``out_valid`` and the result stay as they are on the next cycle; (3) a result is valid no
    earlier than ``latency`` cycles after its (last) instruction's input handshake, and exactly
    then when ``out_ready`` was high on every cycle from that handshake on; (4) two input
    handshakes are at least ``interval`` cycles apart, and with ``out_ready`` high from a
    handshake on and an input offered ``interval`` cycles later, ``in_ready`` is high then.
    With an internal accumulator (several instructions per dot product) an instruction that
    continues a dot product may wait inside the design for the one before it (mxsim's own
    unit waits for its previous result, its C): "exactly then" applies only to results of
    one-instruction dot products, and ``in_ready`` must be high again only after the
    handshake of a dot product's first instruction.
pipeline
    an issue at least every ``interval`` cycles; the result of an issue at cycle t is read at
    t + ``latency`` (the testbench does so); a given ``out_valid`` is 1 then and only then.
start-done
    ``done`` comes exactly ``latency`` cycles after ``start`` (at most that many with
    ``latency_is = "max"``), once per start; no ``done`` without a start.
combinational
    none.

Each violation is one :class:`~testbenches.sim.backend.Mismatch` of kind ``CYCLE`` whose note
names the rule, with the cycle and the instruction (``beat``: its index in the run); at most
:data:`~testbenches.sim.backend.HANDSHAKE_LIMIT` are listed per rule, then one that stands for the
rest (:func:`~testbenches.sim.backend.not_listed`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from mxsim.microarch import cycle

from ..sim.backend import HANDSHAKE_LIMIT, Mismatch, MismatchKind, not_listed

__all__ = ["Declared", "check", "KINDS"]

KINDS = ("valid-ready", "start-done", "pipeline", "combinational")


@dataclass(frozen=True)
class Declared:
    """The timing a map declares for a run: the handshake kind, ``latency`` and ``interval``
    in cycles, whether the latency is exact (or a maximum, start-done), whether the design has
    an ``out_valid`` (pipeline) and an ``out_ready`` (valid-ready) port, and how many
    instructions make one dot product (only the last gives a result)."""
    kind: str
    latency: int
    interval: int = 1
    latency_exact: bool = True
    out_valid: bool = True
    out_ready: bool = True
    per_dot: int = 1


class _Found:
    """Violations per rule, capped at HANDSHAKE_LIMIT listed each."""

    def __init__(self) -> None:
        self.listed: list[Mismatch] = []
        self.counts: dict[str, int] = {}

    def add(self, rule: str, c: int | None, instr: int | None, what: str) -> None:
        n = self.counts[rule] = self.counts.get(rule, 0) + 1
        if n <= HANDSHAKE_LIMIT:
            self.listed.append(Mismatch(MismatchKind.CYCLE, cycle=c, beat=instr,
                                        note=f"{rule}: {what}"))

    def result(self) -> list[Mismatch]:
        more = [not_listed(MismatchKind.CYCLE, n, HANDSHAKE_LIMIT, f"{rule}: ")
                for rule, n in self.counts.items() if n > HANDSHAKE_LIMIT]
        return self.listed + more


def check(declared: Declared, trace: cycle.Trace,
          result_cycles: npt.NDArray[np.integer]) -> list[Mismatch]:
    """Every violation of ``declared`` in ``trace``, whose results were read on the cycles
    ``result_cycles`` (in order); empty when the design keeps the timing its map declares."""
    found = _Found()
    if declared.kind == "valid-ready":
        _valid_ready(declared, trace, found)
    elif declared.kind == "pipeline":
        _pipeline(declared, trace, np.asarray(result_cycles, np.int64), found)
    elif declared.kind == "start-done":
        _start_done(declared, trace, found)
    elif declared.kind != "combinational":
        raise ValueError(f"Handshake kind must be one of {', '.join(KINDS)}, not "
                         f"{declared.kind!r}")
    return found.result()


def _ends(declared: Declared, taken: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Indices (in the run) of the taken instructions that end a dot product."""
    return np.arange(declared.per_dot - 1, len(taken), declared.per_dot)


def _valid_ready(d: Declared, trace: cycle.Trace, found: _Found) -> None:
    ins = np.nonzero(trace.in_valid & trace.in_ready)[0]
    outs = np.nonzero(trace.out_valid & trace.out_ready)[0]
    ends = _ends(d, ins)
    rule1 = "valid-ready rule 1 (one result per instruction, in order)"
    for j in range(len(ends), len(outs)):
        found.add(rule1, int(outs[j]), None, f"a result left at cycle {int(outs[j])} with no "
                                             f"instruction left to answer")
    for j in range(len(outs), len(ends)):
        i = int(ends[j])
        found.add(rule1, int(ins[i]), i, f"instruction {i} (input handshake at cycle "
                                         f"{int(ins[i])}) has no result: {len(outs)} results "
                                         f"left for {len(ends)} in the {trace.cycles} cycles "
                                         f"run (matched in order)")
    _hold(trace, ends, outs, found)
    _latency(d, trace, ins, ends, outs, found)
    _interval(d, trace, ins, found)


def _hold(trace: cycle.Trace, ends, outs, found: _Found) -> None:
    """Rule 2: a stalled result stays valid and unchanged on the next cycle."""
    stall = np.nonzero(trace.out_valid[:-1] & ~trace.out_ready[:-1])[0]
    nxt = stall + 1
    bad = stall[~trace.out_valid[nxt] | (trace.out_payload[nxt] != trace.out_payload[stall])]
    for c in bad.tolist():
        j = int(np.searchsorted(outs, c))            # results taken before cycle c
        i = int(ends[j]) if j < len(ends) else None
        what = ("dropped out_valid" if not trace.out_valid[c + 1] else
                f"changed the result from {int(trace.out_payload[c]):#010x} to "
                f"{int(trace.out_payload[c + 1]):#010x}")
        found.add("valid-ready rule 2 (hold under back-pressure)", c + 1, i,
                  f"out_valid high and out_ready low at cycle {c}, then the design {what} at "
                  f"cycle {c + 1}")


def _latency(d: Declared, trace: cycle.Trace, ins, ends, outs, found: _Found) -> None:
    """Rule 3: each result valid no earlier than its handshake + latency, and exactly then
    when out_ready stayed high from the handshake on."""
    valid = np.nonzero(trace.out_valid)[0]
    ready = trace.out_ready
    rule = "valid-ready rule 3 (latency)"
    for j in range(min(len(outs), len(ends))):
        i = int(ends[j])
        h = int(ins[i])
        after = int(outs[j - 1]) + 1 if j else 0
        v = int(valid[np.searchsorted(valid, after)])       # first valid cycle of result j
        want = h + d.latency
        if v < want:
            found.add(rule, v, i, f"result of instruction {i} valid at cycle {v}, "
                                  f"{v - h} cycles after its input handshake at cycle {h}; "
                                  f"declared latency {d.latency}")
        elif d.per_dot == 1 and v > want and want <= trace.cycles and ready[h:want].all():
            found.add(rule, v, i, f"result of instruction {i} valid at cycle {v}, "
                                  f"{v - h} cycles after its input handshake at cycle {h} "
                                  f"with out_ready high throughout; declared latency "
                                  f"{d.latency}")


def _interval(d: Declared, trace: cycle.Trace, ins, found: _Found) -> None:
    """Rule 4: handshakes at least ``interval`` apart; in_ready high again ``interval``
    cycles after one, when out_ready stayed high and an input is offered."""
    rule = "valid-ready rule 4 (interval)"
    gaps = np.diff(ins)
    for i in np.nonzero(gaps < d.interval)[0].tolist():
        found.add(rule, int(ins[i + 1]), i + 1,
                  f"input handshakes at cycles {int(ins[i])} and {int(ins[i + 1])}, "
                  f"{int(gaps[i])} apart; declared interval {d.interval}")
    t = ins + d.interval
    free = (t < trace.cycles) & (np.arange(len(ins)) % d.per_dot == 0)   # starts a dot
    for i in np.nonzero(free)[0].tolist():
        h, c = int(ins[i]), int(t[i])
        if trace.in_valid[c] and not trace.in_ready[c] and trace.out_ready[h:c + 1].all():
            found.add(rule, c, i + 1, f"in_ready low at cycle {c} with an input offered, "
                                      f"{d.interval} cycles after the input handshake at "
                                      f"cycle {h} and out_ready high throughout")


def _pipeline(d: Declared, trace: cycle.Trace, result_cycles, found: _Found) -> None:
    issues = np.nonzero(trace.in_valid & trace.in_ready)[0]
    gaps = np.diff(issues)
    for i in np.nonzero(gaps < d.interval)[0].tolist():
        found.add("pipeline (interval)", int(issues[i + 1]), i + 1,
                  f"issues at cycles {int(issues[i])} and {int(issues[i + 1])}; declared "
                  f"interval {d.interval}")
    ends = _ends(d, issues)
    due = issues[ends] + d.latency
    if not d.out_valid:
        return
    rule = "pipeline (out_valid)"
    expected = np.zeros(trace.cycles, bool)
    expected[due[due < trace.cycles]] = True
    for c in np.nonzero(expected & ~trace.out_valid)[0].tolist():
        j = int(np.searchsorted(due, c))
        i = int(ends[j])
        found.add(rule, c, i, f"out_valid low at cycle {c}, when the result of instruction "
                              f"{i} (issued at cycle {int(issues[i])}) is due; declared "
                              f"latency {d.latency}")
    for c in np.nonzero(~expected & trace.out_valid)[0].tolist():
        found.add(rule, c, None, f"out_valid high at cycle {c}, when no result is due "
                                 f"(declared latency {d.latency})")


def _start_done(d: Declared, trace: cycle.Trace, found: _Found) -> None:
    starts = np.nonzero(trace.in_valid & trace.in_ready)[0]
    dones = np.nonzero(trace.out_valid)[0]
    rule = "start-done (latency)"
    bounds = np.append(starts, trace.cycles)
    matched = np.zeros(len(dones), bool)
    for i, s in enumerate(starts.tolist()):
        lo, hi = np.searchsorted(dones, [s, int(bounds[i + 1])])
        if lo == hi:
            found.add(rule, s, i, f"no done for instruction {i} (start at cycle {s}) in "
                                  f"{int(bounds[i + 1]) - s} cycles; declared latency "
                                  f"{d.latency}")
            continue
        matched[lo] = True
        took = int(dones[lo]) - s
        if took > d.latency or (d.latency_exact and took != d.latency):
            found.add(rule, int(dones[lo]), i,
                      f"done for instruction {i} at cycle {int(dones[lo])}, {took} cycles after "
                      f"its start at cycle {s}; declared latency "
                      f"{'' if d.latency_exact else 'at most '}{d.latency}")
    for c in dones[~matched].tolist():
        found.add("start-done (one done per start)", c, None,
                  f"done at cycle {c} with no start waiting for it")
