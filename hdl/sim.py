"""Run a ``DotProductUnit`` in Amaranth's simulator with the cycle model's driver.

:func:`simulate` offers a vector set's blocks under a valid-gap pattern and drives ``o.ready``
from a ready pattern through the :class:`mxsim.microarch.cycle.TraceRecorder` that
:func:`mxsim.microarch.cycle.run`
drives the model with, so the two :class:`mxsim.microarch.cycle.Trace` compare cycle for cycle.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
from amaranth.sim import Simulator

from mxsim.microarch.cycle import Trace, TraceRecorder
from mxsim.vectors import VectorSet

from .payload import payload_ints, payload_words
from .unit import DotProductUnit

__all__ = ["simulate"]


def simulate(dut: DotProductUnit, vs: VectorSet, gaps: npt.NDArray[np.bool_],
             ready: npt.NDArray[np.bool_], *, vcd: str | Path | None = None,
             max_cycles: int = 1_000_000) -> Trace:
    """Simulate ``dut`` on every dot product of ``vs``; the trace of every cycle."""
    rec = TraceRecorder(payload_ints(payload_words(dut.spec, vs)), gaps, ready)

    async def bench(ctx):
        while len(rec.results) < vs.num_dots and rec.cycle < max_cycles:
            payload, o_ready = rec.offer()
            if payload is not None:
                ctx.set(dut.i.payload.as_value(), payload)
            ctx.set(dut.i.valid, payload is not None)
            ctx.set(dut.o.ready, o_ready)
            rec.sample(ctx.get(dut.i.ready), ctx.get(dut.o.valid), ctx.get(dut.o.payload))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    if vcd is not None:
        with sim.write_vcd(str(vcd)):
            sim.run()
    else:
        sim.run()
    return rec.trace()
