"""cocotb test of the generated ``mx_dot`` Verilog (runs inside the simulator).

Everything is prepared before simulation by :mod:`testbenches.unit.runner` and read from the file
named by ``MXSIM_TB``: each beat's packed ``i__payload``, the valid-gap and ready patterns, and
the cycle model's trace for them (``i.ready``, ``o.valid``, ``o.payload`` per cycle), whose
output values are the numerics engine's.

The shape is cocotb's matrix-multiplier example: a :class:`Driver` (through
``mxsim.microarch.cycle.TraceRecorder``, the stimulus protocol and trace record of the cycle model:
a beat is offered from the first cycle whose gap bit is 1 and held until taken), a :class:`Monitor`
(samples the handshakes in ``ReadOnly``) and an in-order :class:`Scoreboard` (every cycle's
``i.ready``/``o.valid``/``o.payload`` against the model, so an output must carry the engine's
value on the very cycle the model predicts; it stops the run at its tenth cycle mismatch, never
for a value). One clocked loop calls them, which keeps Python per
cycle to a few handle reads and writes. A summary goes to ``MXSIM_TB_OUT`` (JSON; the first
difference names its cycle, beat and both values), and the RTL's trace (every cycle before the
scoreboard stopped the run) to ``MXSIM_TB_TRACE`` as a :meth:`mxsim.microarch.cycle.Trace.to_bytes`
record.
"""

from __future__ import annotations

import json
import os
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from mxsim.microarch import cycle

from ..sim.backend import Mismatch, MismatchKind, not_listed


class Driver:
    """Drives ``i__valid``/``i__payload`` and ``o__ready`` as a
    :class:`mxsim.microarch.cycle.TraceRecorder` says (the protocol and record the cycle model and
    the Amaranth runs use), and records what the :class:`Monitor` samples."""

    def __init__(self, dut, payloads: list[int], gaps: list[int], ready: list[int]):
        self.valid, self.payload, self.o_ready = dut.i__valid, dut.i__payload, dut.o__ready
        self.recorder = cycle.TraceRecorder(payloads, gaps, ready)
        self._valid = self._ready = None

    @property
    def n(self) -> int:
        """Beats taken so far."""
        return self.recorder.driver.n

    def drive(self) -> None:
        was = self.recorder.driver.offering
        word, r = self.recorder.offer()
        if word is not None and not was:
            self.payload.value = word
        if (word is not None) != self._valid:
            self.valid.value = self._valid = word is not None
        if r != self._ready:
            self.o_ready.value = self._ready = r

    def record(self, got: tuple[int, int, int]) -> None:
        self.recorder.sample(*got)


class Monitor:
    """Samples ``i__ready``, ``o__valid`` and ``o__payload`` once settled."""

    def __init__(self, dut):
        self.i_ready, self.o_valid, self.o_payload = dut.i__ready, dut.o__valid, dut.o__payload

    def sample(self) -> tuple[int, int, int]:
        ov = int(self.o_valid.value)
        return int(self.i_ready.value), ov, int(self.o_payload.value) if ov else 0


class Scoreboard:
    """In order, cycle by cycle: what the RTL did against what the cycle model says. The run
    stops at the ``limit``-th cycle mismatch (the traces then part ways); value mismatches
    never stop it: the first ``limit`` are listed and the rest counted (:meth:`listed`), so
    verify's census sees every result."""

    def __init__(self, in_ready, out_valid, out_payload, limit: int = 10):
        self.want = list(zip(in_ready, out_valid, out_payload, strict=True))
        self.mismatches: list[Mismatch] = []
        self.limit = limit
        self.counts = {MismatchKind.VALUE: 0, MismatchKind.CYCLE: 0}

    def check(self, c: int, beat: int, got: tuple[int, int, int]) -> bool:
        """Compare cycle ``c`` (``beat`` beats taken before it); False at the limit of cycle
        mismatches. A difference of only the payload is a value mismatch, of a handshake bit
        a cycle one."""
        want = self.want[c]
        if got != want:
            kind = MismatchKind.VALUE if got[:2] == want[:2] else MismatchKind.CYCLE
            self.counts[kind] += 1
            if self.counts[kind] <= self.limit:
                self.mismatches.append(Mismatch(kind, cycle=c, beat=beat,
                                                rtl=[got[0], got[1], f"{got[2]:#010x}"],
                                                model=[want[0], want[1], f"{want[2]:#010x}"]))
        return self.counts[MismatchKind.CYCLE] < self.limit

    def listed(self) -> list[Mismatch]:
        """The mismatches listed, with one entry for the value mismatches not listed."""
        n = self.counts[MismatchKind.VALUE]
        return self.mismatches + ([not_listed(MismatchKind.VALUE, n, self.limit)]
                                  if n > self.limit else [])


@cocotb.test()
async def mx_dot_matches_model(dut):
    data = np.load(os.environ["MXSIM_TB"], allow_pickle=False)
    payloads = [int(x, 16) for x in data["payloads"]]
    driver = Driver(dut, payloads, data["gaps"].astype(int).tolist(),
                    data["ready"].astype(int).tolist())
    monitor = Monitor(dut)
    board = Scoreboard(data["in_ready"].astype(int).tolist(),
                       data["out_valid"].astype(int).tolist(),
                       data["out_payload"].astype(int).tolist())
    n_cycles = len(board.want)
    dut._log.info("MXSIM_TB=%s: %d beats, %d cycles", os.environ["MXSIM_TB"], len(payloads),
                  n_cycles)

    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    dut.i__valid.value = 0
    dut.o__ready.value = 0
    dut.i__payload.value = 0
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0

    edge, settled = RisingEdge(dut.clk), ReadOnly()
    c = 0
    t0 = time.perf_counter()
    for c in range(n_cycles):
        await edge
        driver.drive()
        await settled
        got = monitor.sample()
        if not board.check(c, driver.n, got):
            break
        driver.record(got)
    summary = {"cycles": c + 1, "beats": driver.n, "results": len(driver.recorder.results),
               "mismatches": [m.to_dict() for m in board.listed()],
               "loop_seconds": time.perf_counter() - t0}
    if os.environ.get("MXSIM_TB_TRACE"):
        with open(os.environ["MXSIM_TB_TRACE"], "wb") as f:
            f.write(driver.recorder.trace().to_bytes())
    if os.environ.get("MXSIM_TB_OUT"):
        with open(os.environ["MXSIM_TB_OUT"], "w") as f:
            json.dump(summary, f)
    assert not board.mismatches, f"RTL differs from the model: {summary['mismatches'][:3]}"
    assert driver.n == len(payloads), f"only {driver.n} of {len(payloads)} beats were taken"
