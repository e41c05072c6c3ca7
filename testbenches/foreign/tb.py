"""cocotb test of a foreign design through its port map (runs inside the simulator).

:class:`testbenches.foreign.backend.ForeignBackend` prepares everything before the simulator starts
and names it in ``MXSIM_FTB`` (an .npz): the :class:`~testbenches.foreign.backend.Plan` (ports,
handshake, latency), every driven port's words per instruction (``in:PORT``; array ports one
more axis, their elements, and their lowest index ``low:PORT``), the valid-gap and ready
patterns and the instructions per dot product. The test resets the design, drives the map's
handshake with the protocol of :class:`mxsim.microarch.cycle.TraceRecorder` (instruction n is
offered
from the first cycle at or after the previous input handshake whose gap bit is 1, and held
until taken; ``out_ready`` from the ready pattern; from the start, reset included, every driven
port holds instruction 0's value, so a port the map ties holds its constant):

valid-ready
    offer, take on ``in_valid & in_ready``; a result is read on ``out_valid & out_ready``.
pipeline
    the offer is issued (``in_valid``, if any, high for that cycle) once ``interval`` cycles
    have passed since the last issue; its result is read ``latency`` cycles later.
start-done
    while idle the offer is issued with a one-cycle ``start`` and its operands held; the
    result is read on ``done``, after which the unit is idle again.
combinational
    no clock: inputs set, a 1 ns settle, results read; one "cycle" per instruction.

With the map's ``[probes]`` (``plan["probes"]``: (signal, strobe) paths), each probed signal
is read in every cycle its strobe is 1, after the inputs settle
(:class:`testbenches.foreign.probing.Sampler`), and written to ``MXSIM_FTB_PROBES``.
Only instructions that end a dot product give results. It writes the trace
(``MXSIM_FTB_TRACE``, :meth:`mxsim.microarch.cycle.Trace.to_bytes`; ``out_payload`` the low 32 bits
of
the first result port), the results file (``MXSIM_FTB_RESULTS``, see
:mod:`testbenches.foreign.backend`) and a JSON summary (``MXSIM_FTB_OUT``). Python per cycle is a
few handle reads and list appends; an instruction's ports are written once, whole words at a time,
and ports whose value never changes are written once before the clock starts. Checking is done
afterwards, outside the simulator.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, Timer

from mxsim.microarch import cycle

from .backend import write_results
from .probing import Sampler

M32 = 0xFFFFFFFF


def ints(words: np.ndarray) -> list[int]:
    """Each row of ``(n, words)`` 32-bit words (least significant first) as one integer."""
    if words.shape[1] == 1:
        return words[:, 0].tolist()
    if words.shape[1] == 2:
        return (words[:, 0].astype(np.uint64) | words[:, 1].astype(np.uint64) << np.uint64(32)
                ).tolist()
    raw = np.ascontiguousarray(words, "<u4")
    return [int.from_bytes(row.tobytes(), "little") for row in raw]


def columns(dut, data) -> tuple[list, list]:
    """``(handle, values)`` of every driven port (or array element) whose value changes, and
    of those whose value is the same for every instruction."""
    moving, fixed = [], []
    for key in data.files:
        if not key.startswith("in:"):
            continue
        words = data[key]
        handle = getattr(dut, key[3:])
        low = int(data[f"low:{key[3:]}"]) if f"low:{key[3:]}" in data.files else 0
        parts = ([(handle, words)] if words.ndim == 2 else
                 [(handle[low + e], words[:, e]) for e in range(words.shape[1])])
        for h, w in parts:
            same = len(w) == 0 or bool((w == w[0]).all())
            (fixed if same else moving).append((h, ints(w[:1] if same else w)))
    return moving, fixed


class Results:
    """The result ports, read whole when a result is taken."""

    def __init__(self, dut, names: list[str]):
        self.names = names
        self.handles = [getattr(dut, n) for n in names]
        self.first = self.handles[0]
        self.cycles: list[int] = []
        self.values: list[list[int]] = [[] for _ in names]
        self._first_values = self.values[0]
        self._rest = list(zip(self.handles[1:], self.values[1:], strict=True))

    def take(self, c: int, first: int) -> None:
        """Keep the result of cycle ``c``; ``first``: the first port's value, read already."""
        self.cycles.append(c)
        self._first_values.append(first)
        for h, vals in self._rest:
            vals.append(int(h.value))

    def write(self, path: str) -> None:
        raw = {}
        for name, h, vals in zip(self.names, self.handles, self.values, strict=True):
            w = (len(h) + 31) // 32
            raw[name] = np.array([[(v >> (32 * i)) & M32 for i in range(w)] for v in vals],
                                 np.uint32).reshape(len(vals), w)
        write_results(path, self.cycles, raw)


class Record:
    """Per cycle: the trace's flag bits and low 32 bits of the result."""

    def __init__(self) -> None:
        self.flags: list[int] = []
        self.payload: list[int] = []

    def trace(self) -> cycle.Trace:
        f = np.array(self.flags, np.uint8)
        return cycle.Trace((f & cycle.IN_VALID) != 0, (f & cycle.IN_READY) != 0,
                           (f & cycle.OUT_VALID) != 0, (f & cycle.OUT_READY) != 0,
                           np.array(self.payload, np.uint32))


def drive(cols: list, n: int) -> None:
    for h, vals in cols:
        h.value = vals[n]


async def valid_ready(dut, plan, cols, gaps, ready, ends, res: Results, rec: Record,
                      probe: Sampler | None = None) -> int:
    """The valid-ready loop; the instructions taken."""
    iv = getattr(dut, plan["in_valid"])
    ir = getattr(dut, plan["in_ready"])
    ov = getattr(dut, plan["out_valid"])
    ordy = getattr(dut, plan["out_ready"]) if plan["out_ready"] else None
    first = res.first
    flags, payload = rec.flags, rec.payload
    edge, settled = RisingEdge(getattr(dut, plan["clock"])), ReadOnly()
    n_in, n_res, want = len(ends), 0, sum(ends)
    plen, rlen, idle = len(gaps), len(ready), plan["idle"]
    n, offering, valid, r_was, c, last = 0, False, False, None, 0, 0
    while n < n_in or n_res < want:
        if not offering and n < n_in and gaps[c % plen]:
            offering = True
            for h, vals in cols:
                h.value = vals[n]
        if offering != valid:
            iv.value = valid = offering
        r = ready[c % rlen]
        if r != r_was and ordy is not None:
            ordy.value = r_was = r
        await settled
        if probe is not None:
            probe.sample()
        i_r, o_v = int(ir.value), int(ov.value)
        v = int(first.value) if o_v else 0
        flags.append(offering | (i_r << 1) | (o_v << 2) | (r << 3))
        payload.append(v & M32)
        if offering and i_r:
            n += 1
            offering = False
            last = c
        if o_v and r:
            res.take(c, v)
            n_res += 1
            last = c
        c += 1
        if c - last > idle:
            break
        await edge
    return n


async def pipeline(dut, plan, cols, gaps, ends, res: Results, rec: Record,
                   probe: Sampler | None = None) -> int:
    """The fixed-latency loop; the instructions issued."""
    iv = getattr(dut, plan["in_valid"]) if plan["in_valid"] else None
    ov = getattr(dut, plan["out_valid"]) if plan["out_valid"] else None
    first = res.first
    edge, settled = RisingEdge(getattr(dut, plan["clock"])), ReadOnly()
    latency, interval, plen = plan["latency"], plan["interval"], len(gaps)
    n_in, due = len(ends), deque()
    n, offering, valid, c, ok = 0, False, False, 0, 0
    while n < n_in or due:
        if not offering and n < n_in and gaps[c % plen]:
            offering = True
        issue = offering and c >= ok
        if issue:
            for h, vals in cols:
                h.value = vals[n]
            due.append((c + latency, ends[n]))
        if iv is not None and issue != valid:
            iv.value = valid = issue
        await settled
        if probe is not None:
            probe.sample()
        read = bool(due) and due[0][0] == c
        end = read and due[0][1]
        o_v = int(ov.value) if ov is not None else int(end)
        v = int(first.value) if o_v or end else 0
        if end:
            res.take(c, v)
        if read:
            due.popleft()
        rec.flags.append(offering | ((c >= ok) << 1) | (o_v << 2) | cycle.OUT_READY)
        rec.payload.append(v & M32 if o_v else 0)
        if issue:
            n, offering, ok = n + 1, False, c + interval
        c += 1
        await edge
    return n


async def start_done(dut, plan, cols, gaps, ends, res: Results, rec: Record,
                     probe: Sampler | None = None) -> int:
    """The start-done loop; the instructions started."""
    start = getattr(dut, plan["in_valid"])
    done = getattr(dut, plan["out_valid"])
    first = res.first
    edge, settled = RisingEdge(getattr(dut, plan["clock"])), ReadOnly()
    plen, n_in, idle = len(gaps), len(ends), plan["idle"]
    n, offering, busy, pulse, c, began = 0, False, False, False, 0, 0
    while n < n_in or busy:
        if not offering and n < n_in and gaps[c % plen]:
            offering = True
        issue = offering and not busy
        ready = not busy
        if issue:
            for h, vals in cols:
                h.value = vals[n]
            busy, began = True, c
        if issue != pulse:
            start.value = pulse = issue
        await settled
        if probe is not None:
            probe.sample()
        d = int(done.value)
        v = int(first.value) if d else 0
        if d and busy:
            if ends[n - (0 if issue else 1)]:
                res.take(c, v)
            busy = False
        rec.flags.append(offering | (ready << 1) | (d << 2) | cycle.OUT_READY)
        rec.payload.append(v & M32)
        if issue:
            n, offering = n + 1, False
        c += 1
        if busy and c - began > idle:
            break
        await edge
    return n


async def combinational(dut, cols, ends, res: Results, rec: Record,
                        probe: Sampler | None = None) -> int:
    """One instruction at a time: inputs set, settle, results read."""
    first = res.first
    settle = Timer(1, "ns")
    for n, end in enumerate(ends):
        for h, vals in cols:
            h.value = vals[n]
        await settle
        if probe is not None:
            probe.sample()
        v = int(first.value)
        if end:
            res.take(n, v)
        rec.flags.append(cycle.IN_VALID | cycle.IN_READY | cycle.OUT_VALID | cycle.OUT_READY)
        rec.payload.append(v & M32)
    return len(ends)


async def reset(dut, plan) -> None:
    """Clock started, reset held active for its cycles, every handshake input low."""
    for name in ("in_valid", "out_ready"):
        if plan[name]:
            getattr(dut, plan[name]).value = 0
    if plan["reset"]:
        getattr(dut, plan["reset"]).value = plan["reset_level"]
    clk = getattr(dut, plan["clock"])
    clk.value = 0
    cocotb.start_soon(Clock(clk, 10, unit="ns").start(start_high=False))
    if plan["reset"]:
        await ClockCycles(clk, plan["reset_cycles"])
        getattr(dut, plan["reset"]).value = 1 - plan["reset_level"]


@cocotb.test()
async def foreign_design_runs(dut):
    data = np.load(os.environ["MXSIM_FTB"], allow_pickle=False)
    plan = json.loads(str(data["plan"]))
    moving, fixed = columns(dut, data)
    per_dot = int(data["per_dot"])
    n_in = _instructions(data)
    ends = [(i % per_dot) == per_dot - 1 for i in range(n_in)]
    gaps, ready = data["gaps"].astype(int).tolist(), data["ready"].astype(int).tolist()
    res, rec = Results(dut, plan["results"]), Record()
    probe = Sampler(dut, plan["probes"]) if plan.get("probes") else None
    for h, vals in fixed + (moving if n_in else []):
        h.value = vals[0]
    dut._log.info("MXSIM_FTB=%s: %s, %d instructions", os.environ["MXSIM_FTB"], plan["kind"],
                  n_in)
    kind = plan["kind"]
    if kind != "combinational":
        await reset(dut, plan)
    t0 = time.perf_counter()
    if kind == "valid-ready":
        taken = await valid_ready(dut, plan, moving, gaps, ready, ends, res, rec, probe)
    elif kind == "pipeline":
        taken = await pipeline(dut, plan, moving, gaps, ends, res, rec, probe)
    elif kind == "start-done":
        taken = await start_done(dut, plan, moving, gaps, ends, res, rec, probe)
    else:
        taken = await combinational(dut, moving, ends, res, rec, probe)
    loop = time.perf_counter() - t0
    with open(os.environ["MXSIM_FTB_TRACE"], "wb") as f:
        f.write(rec.trace().to_bytes())
    res.write(os.environ["MXSIM_FTB_RESULTS"])
    if probe is not None:
        probe.write(os.environ["MXSIM_FTB_PROBES"])
    with open(os.environ["MXSIM_FTB_OUT"], "w") as f:
        json.dump({"cycles": len(rec.flags), "instructions": taken,
                   "results": len(res.cycles), "loop_seconds": loop}, f)


def _instructions(data) -> int:
    """Instructions in the run (from the first driven port)."""
    for key in data.files:
        if key.startswith("in:"):
            return len(data[key])
    return 0
