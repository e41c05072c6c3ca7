"""cocotb test of the generated ``mx_array`` Verilog (runs inside the simulator).

Everything is prepared before simulation by :mod:`testbenches.array.runner` and read from the
file named by ``MXSIM_TB``: each wave's packed ``i__payload`` and, per cycle, what the array
cycle model says (a wave taken, results valid, the output word: every unit's D code, the
mask, the slot and ``last``), whose values are the numerics engine's.

The shape of :mod:`testbenches.unit.mx_dot_tb`: a driver offers the waves in order (``i__valid``
high while waves are left, each held until taken), a monitor samples the handshake and the
output in ``ReadOnly``, and an in-order scoreboard compares every cycle with the model, so
an output must carry the engine's codes on the very cycle the model predicts. A summary goes
to ``MXSIM_TB_OUT`` (JSON; each difference names its cycle and both values, in hex).
"""

from __future__ import annotations

import json
import os
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge


class Scoreboard:
    """Cycle by cycle: (taken, valid, word) of the RTL against the cycle model."""

    def __init__(self, take, out_valid, out_word, limit: int = 10):
        self.want = list(zip(take, out_valid, out_word, strict=True))
        self.mismatches: list[dict] = []
        self.limit = limit

    def check(self, c: int, wave: int, got: tuple[int, int, int]) -> bool:
        want = self.want[c]
        if got != want:
            kind = "value" if got[:2] == want[:2] else "cycle"
            self.mismatches.append({"kind": kind, "cycle": c, "wave": wave,
                                    "rtl": [got[0], got[1], f"{got[2]:#x}"],
                                    "model": [want[0], want[1], f"{want[2]:#x}"]})
        return len(self.mismatches) < self.limit


@cocotb.test()
async def mx_array_matches_model(dut):
    data = np.load(os.environ["MXSIM_TB"], allow_pickle=False)
    payloads = [int(x, 16) for x in data["payloads"]]
    board = Scoreboard(data["take"].astype(int).tolist(), data["out_valid"].astype(int).tolist(),
                       [int(x, 16) for x in data["out_word"]])
    n_cycles = len(board.want)
    dut._log.info("MXSIM_TB=%s: %d waves, %d cycles", os.environ["MXSIM_TB"], len(payloads),
                  n_cycles)
    i_valid, i_ready, i_payload = dut.i__valid, dut.i__ready, dut.i__payload
    o_valid, o_payload = dut.o__valid, dut.o__payload

    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    i_valid.value = 0
    i_payload.value = 0
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0

    edge, settled = RisingEdge(dut.clk), ReadOnly()
    n = outputs = 0
    c = -1
    t0 = time.perf_counter()
    offered = -1
    for c in range(n_cycles):
        await edge
        if n < len(payloads):
            if offered != n:
                i_payload.value = payloads[n]
                offered = n
            i_valid.value = 1
        else:
            i_valid.value = 0
        await settled
        take = int(n < len(payloads) and int(i_ready.value))
        ov = int(o_valid.value)
        got = (take, ov, int(o_payload.value) if ov else 0)
        if not board.check(c, n, got):
            break
        n += take
        outputs += ov
    summary = {"cycles": c + 1, "waves": n, "outputs": outputs,
               "mismatches": board.mismatches, "loop_seconds": time.perf_counter() - t0}
    with open(os.environ["MXSIM_TB_OUT"], "w") as f:
        json.dump(summary, f)
    assert not board.mismatches, f"RTL differs from the model: {board.mismatches[:3]}"
    assert n == len(payloads), f"only {n} of {len(payloads)} waves were taken"
