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

from .unit import DotProductUnit

__all__ = ["block_payloads", "simulate"]


def block_payloads(dut: DotProductUnit, vs: VectorSet) -> list[dict]:
    """The input payload of every beat of ``vs`` (the order of :func:`mxsim.cycle.beats_of`)."""
    spec = dut.spec
    k, nblk = spec.k, vs.k // spec.k
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    a = vs.a.reshape(nb, vs.m, vs.k)
    b = vs.b.reshape(nb, vs.k, vs.n)
    c = (vs.c.reshape(nb, vs.m, vs.n) if vs.c is not None
         else np.zeros((nb, vs.m, vs.n), np.uint32))
    scaled = spec.scale_format is not None
    if scaled:
        sa = vs.a_scale.reshape(nb, vs.m, -1)
        sb = vs.b_scale.reshape(nb, -1, vs.n)
    out = []
    for t in range(nb):
        for i in range(vs.m):
            for j in range(vs.n):
                for blk in range(nblk):
                    cut = slice(blk * k, blk * k + k)
                    p = {"a": [int(x) for x in a[t, i, cut]], "b": [int(x) for x in b[t, cut, j]],
                         "c": int(c[t, i, j]), "first": blk == 0, "last": blk == nblk - 1}
                    if scaled:
                        p["a_scale"] = int(sa[t, i, blk])
                        p["b_scale"] = int(sb[t, blk, j])
                    out.append(p)
    return out


def simulate(dut: DotProductUnit, vs: VectorSet, gaps: npt.NDArray[np.bool_],
             ready: npt.NDArray[np.bool_], *, vcd: str | Path | None = None,
             max_cycles: int = 1_000_000) -> Trace:
    """Simulate ``dut`` on every dot product of ``vs``; the trace of every cycle."""
    payloads = block_payloads(dut, vs)
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
                n = drv.n
                for name, value in payloads[n].items():
                    ctx.set(getattr(dut.i.payload, name), value)
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
