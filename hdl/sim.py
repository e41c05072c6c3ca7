"""Run a ``DotProductUnit`` in Amaranth's simulator with the cycle model's driver.

:func:`simulate` offers a vector set's blocks under a valid-gap pattern and drives ``o.ready``
from a ready pattern, exactly as :func:`mxsim.cycle.run` drives the model, and records the
same per-cycle :class:`mxsim.cycle.Trace`, so the two compare cycle for cycle.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
from amaranth.sim import Simulator

from mxsim.cycle import Beat, Driver, Trace, beats_of
from mxsim.vectors import VectorSet

from .payload import payload_ints, payload_words
from .unit import DotProductUnit

__all__ = ["simulate"]


def simulate(dut: DotProductUnit, vs: VectorSet, gaps: npt.NDArray[np.bool_],
             ready: npt.NDArray[np.bool_], *, vcd: str | Path | None = None,
             max_cycles: int = 1_000_000) -> Trace:
    """Simulate ``dut`` on every dot product of ``vs``; the trace of every cycle."""
    payloads = payload_ints(payload_words(dut.spec, vs))
    beats: list[Beat] = beats_of(dut.spec, vs, np.zeros(vs.batch_shape + (vs.m, vs.n)))
    want = sum(b.last for b in beats)
    drv = Driver(beats, gaps)
    cols: dict[str, list] = {k: [] for k in ("iv", "ir", "ov", "or", "op")}
    results: list[int] = []

    async def bench(ctx):
        c = 0
        while len(results) < want and c < max_cycles:
            beat = drv.offer(c)
            if beat is not None:
                ctx.set(dut.i.payload.as_value(), payloads[drv.n])
            ctx.set(dut.i.valid, beat is not None)
            o_ready = bool(ready[c % len(ready)])
            ctx.set(dut.o.ready, o_ready)
            i_ready, o_valid, value = (ctx.get(dut.i.ready), ctx.get(dut.o.valid),
                                       ctx.get(dut.o.payload))
            if beat is not None and i_ready:
                drv.taken()
            if o_valid and o_ready:
                results.append(value)
            cols["iv"].append(beat is not None)
            cols["ir"].append(bool(i_ready))
            cols["ov"].append(bool(o_valid))
            cols["or"].append(o_ready)
            cols["op"].append(value if o_valid else 0)
            await ctx.tick()
            c += 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    if vcd is not None:
        with sim.write_vcd(str(vcd)):
            sim.run()
    else:
        sim.run()
    return Trace(np.array(cols["iv"]), np.array(cols["ir"]), np.array(cols["ov"]),
                 np.array(cols["or"]), np.array(cols["op"], np.uint32), results)
