"""Verification throughput: dot products checked per second through cocotb + Verilator and
through the bulk C++ harness, against Amaranth's own Python simulator measured in the same run.

    python benchmarks/bench_verify.py [--dots N]

The unit is MXFP8 (blackwell-mxf8f6f4, e4m3, E8M0 blocks of 32) with 32 lanes and one stage:
one K=32 dot product per cycle when nothing stalls. Every path checks every output bit against
the engine and every cycle against the cycle model; the times below are the simulation alone
(stimulus, engine and model are prepared before and checked after).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from mxsim import presets, vectors, versions
from mxsim.microarch import MicroArch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dots", type=int, default=100_000)
    args = ap.parse_args()
    from hdl.sim import simulate
    from hdl.unit import DotProductUnit
    from testbenches.sim.backend import Stimulus
    from testbenches.unit import bulk, runner

    spec = presets.get("blackwell-mxf8f6f4").spec("e4m3", scale_format="e8m0", block=32)
    ua = MicroArch(lanes=32, stages=1)
    side = int(np.sqrt(args.dots))
    vs = vectors.generate("normal", m=side, n=side, k=32, scale_format="e8m0", block=32,
                          seed=1)
    ones = np.ones(64, bool)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        # Amaranth's Python simulator (the peer), on a slice.
        small = vs.subset(slice(0, 20), slice(0, 20))
        t0 = time.perf_counter()
        simulate(DotProductUnit(spec, ua), small, ones, ones)
        out["amaranth pysim"] = small.num_dots / (time.perf_counter() - t0)
        # cocotb + Verilator: the clocked loop, and the whole run with simulator start.
        b = runner.build(spec, ua, Path(tmp) / "cocotb")
        r = runner.test(b, vs, Stimulus(ones, ones, 1))
        assert r.passed, r.mismatches[:3]
        out["cocotb + verilator (loop)"] = vs.num_dots / r.loop_seconds
        out["cocotb + verilator (whole run)"] = vs.num_dots / r.seconds
        # The bulk harness.
        exe = bulk.build(spec, ua, Path(tmp) / "bulk")
        big = vectors.generate("normal", m=1000, n=1000, k=32, scale_format="e8m0", block=32,
                               seed=2)
        res = bulk.run(exe, spec, ua, big, Stimulus(ones, ones, 1))
        assert res.passed, res.mismatches[:3]
        out["bulk C++ harness"] = res.dots / res.loop_seconds
    base = out["amaranth pysim"]
    print(f"# {versions.describe()}")
    print(f"{'path':32} {'dots/s':>12} {'vs Amaranth pysim':>18}")
    for k, v in out.items():
        print(f"{k:32} {v:12,.0f} {v / base:17.1f}x")


if __name__ == "__main__":
    main()
