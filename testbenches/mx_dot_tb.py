"""cocotb test of the generated ``mx_dot`` Verilog (runs inside the simulator).

Everything is prepared before simulation by :mod:`testbenches.runner` and read from the file
named by ``MXSIM_TB``: each beat's packed ``i__payload``, the valid-gap and ready patterns, and
the cycle model's trace for them (``i.ready``, ``o.valid``, ``o.payload`` per cycle), whose
output values are the numerics engine's. Per cycle this test only assigns and reads DUT
handles: it drives the testbench driver's protocol (mxsim.cycle.Driver), samples the outputs
in ``ReadOnly`` and compares them with the model at once, so the first difference names its
cycle, beat and expected/actual values. A summary goes to ``MXSIM_TB_OUT`` (JSON).
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge


@cocotb.test()
async def mx_dot_matches_model(dut):
    data = np.load(os.environ["MXSIM_TB"], allow_pickle=False)
    payloads = [int(x, 16) for x in data["payloads"]]
    gaps, ready = data["gaps"], data["ready"]
    want_ir, want_ov, want_op = data["in_ready"], data["out_valid"], data["out_payload"]
    n_cycles = len(want_ir)
    dut._log.info("MXSIM_TB=%s: %d beats, %d cycles", os.environ["MXSIM_TB"], len(payloads),
                  n_cycles)

    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    dut.i__valid.value = 0
    dut.o__ready.value = 0
    dut.i__payload.value = 0
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0

    n, offering, mismatches, results = 0, False, [], []
    edge = RisingEdge(dut.clk)
    for c in range(n_cycles):
        await edge
        if not offering and n < len(payloads) and gaps[c % len(gaps)]:
            offering = True
        if offering:
            dut.i__payload.value = payloads[n]
        dut.i__valid.value = int(offering)
        o_ready = int(ready[c % len(ready)])
        dut.o__ready.value = o_ready
        await ReadOnly()
        i_ready, o_valid = int(dut.i__ready.value), int(dut.o__valid.value)
        o_payload = int(dut.o__payload.value) if o_valid else 0
        if (i_ready, o_valid, o_payload) != (int(want_ir[c]), int(want_ov[c]), int(want_op[c])):
            mismatches.append({"cycle": c, "beat": n, "rtl": [i_ready, o_valid, hex(o_payload)],
                               "model": [int(want_ir[c]), int(want_ov[c]), hex(int(want_op[c]))]})
            if len(mismatches) >= 10:
                break
        if offering and i_ready:
            n += 1
            offering = False
        if o_valid and o_ready:
            results.append(o_payload)
    summary = {"cycles": c + 1, "beats": n, "results": len(results),
               "mismatches": mismatches}
    if os.environ.get("MXSIM_TB_OUT"):
        with open(os.environ["MXSIM_TB_OUT"], "w") as f:
            json.dump(summary, f)
    assert not mismatches, f"RTL differs from the model: {mismatches[:3]}"
    assert n == len(payloads), f"only {n} of {len(payloads)} beats were taken"
