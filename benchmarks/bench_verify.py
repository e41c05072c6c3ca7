"""Verification throughput: dot products checked per second through cocotb + Verilator and
through the bulk C++ harness, against Amaranth's own Python simulator (the peer) and against
Verilator's own speed on the same design (the ceiling), all measured in the same run.

    python benchmarks/bench_verify.py [--dots N] [--bulk-dots N] [--json PATH] [--keep DIR]

The unit is MXFP8 (blackwell-mxf8f6f4, e4m3, E8M0 blocks of 32) with 32 lanes and one stage:
one K=32 dot product per cycle when nothing stalls. Every path checks every output bit against
the engine and every cycle against the cycle model; the times below are the simulation alone
(stimulus, engine and model are prepared before and checked after). The bulk harness is timed
as ``mxsim verify`` reports it (the harness's process: reading the stimulus, the clocked loop,
writing the trace) and by its own clock (the loop alone).

The ceiling is the bulk executable run with ``--ceiling`` (``testbenches/unit/harness.cpp``):
Verilator driving the same model with the stimulus in memory, two evals a cycle and nothing
recorded or checked. Its dots/s are its cycles/s times the dots per cycle of the checked bulk
run (1 at full throughput), so a path's fraction of the ceiling says how much of Verilator's
own speed it keeps. With ``--json`` the rows are written as a self-describing record.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _timing import versions_line  # noqa: E402

from mxsim import presets, vectors  # noqa: E402
from mxsim.microarch import MicroArch  # noqa: E402

SCHEMA = "mxsim.bench_verify/1"
REPEAT = 3


def _vectors(dots: int, seed: int):
    side = int(np.sqrt(dots))
    return vectors.generate("normal", m=side, n=side, k=32, scale_format="e8m0", block=32,
                            seed=seed)


def measure(dots: int, bulk_dots: int, tmp: Path) -> tuple[dict, dict]:
    """Rows (path -> dots/s, what it times) and the ceiling's and the bulk harness's timings."""
    from hdl.sim import simulate
    from hdl.unit import DotProductUnit
    from testbenches.sim.backend import Stimulus
    from testbenches.unit import bulk, runner

    spec = presets.get("blackwell-mxf8f6f4").spec("e4m3", scale_format="e8m0", block=32)
    ua = MicroArch(lanes=32, stages=1)
    vs, big = _vectors(dots, 1), _vectors(bulk_dots, 2)
    ones = np.ones(64, bool)
    rows: dict[str, tuple[float, str]] = {}
    # Amaranth's Python simulator (the peer), on a slice.
    small = vs.subset(slice(0, 20), slice(0, 20))
    t0 = time.perf_counter()
    simulate(DotProductUnit(spec, ua), small, ones, ones)
    rows["amaranth pysim"] = (small.num_dots / (time.perf_counter() - t0),
                              f"{small.num_dots} dots, the whole simulation")
    # cocotb + Verilator: the clocked loop, and the whole run with simulator start.
    r = runner.test(runner.build(spec, ua, tmp / "cocotb"), vs, Stimulus(ones, ones, 1))
    assert r.passed, r.mismatches[:3]
    rows["cocotb + verilator (loop)"] = (r.dots / r.loop_seconds,
                                         f"{r.dots} dots, the clocked loop")
    rows["cocotb + verilator (whole run)"] = (r.dots / r.seconds,
                                              f"{r.dots} dots, simulator start-up included")
    # The bulk harness, best of REPEAT runs, and the ceiling on the same executable.
    exe = bulk.build(spec, ua, tmp / "bulk")
    runs = []
    for _ in range(REPEAT):
        res = bulk.run(exe, spec, ua, big, Stimulus(ones, ones, 1))
        assert res.passed, res.mismatches[:3]
        runs.append(res)
    best = min(runs, key=lambda x: x.loop_seconds)
    loop = min(x.phases["loop_s"] for x in runs)
    rows["bulk C++ harness"] = (best.dots / best.loop_seconds,
                                f"{best.dots} dots, the harness's process (as mxsim verify "
                                f"reports it)")
    rows["bulk C++ harness (loop)"] = (best.dots / loop,
                                       f"{best.dots} dots, the harness's clocked loop alone")
    ceilings = [bulk.ceiling(exe, spec, big) for _ in range(REPEAT)]
    ceiling = max(ceilings, key=lambda x: x["cycles_per_s"])
    ceiling["dots_per_cycle"] = best.dots / best.cycles
    ceiling["dots_per_s"] = ceiling["cycles_per_s"] * ceiling["dots_per_cycle"]
    return rows, {"ceiling": ceiling, "bulk_phases": best.phases,
                  "bulk_process_seconds": best.loop_seconds}


def table(rows: dict, ceiling: float, peer: str = "amaranth pysim") -> list[dict]:
    """The printed and recorded rows: dots/s, the ratio to the peer and to the ceiling."""
    out = [{"path": k, "dots_per_s": round(v), "what": what, "peer": peer,
            "vs_peer": round(v / rows[peer][0], 2), "ceiling_dots_per_s": round(ceiling),
            "fraction_of_ceiling": round(v / ceiling, 4)} for k, (v, what) in rows.items()]
    out.append({"path": "ceiling: verilator alone", "dots_per_s": round(ceiling),
                "what": "the bulk executable's --ceiling: stimulus in memory, no checking",
                "peer": peer, "vs_peer": round(ceiling / rows[peer][0], 2),
                "ceiling_dots_per_s": round(ceiling), "fraction_of_ceiling": 1.0})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dots", type=int, default=100_000, help="cocotb (default: %(default)s)")
    ap.add_argument("--bulk-dots", type=int, default=1_000_000,
                    help="bulk and ceiling (default: %(default)s)")
    ap.add_argument("--json", metavar="PATH", help="also write the record here")
    ap.add_argument("--keep", metavar="DIR", help="build in DIR and keep it, e.g. to profile "
                    "DIR/bulk/obj/Vmx_dot on DIR/bulk/obj/stimulus.bin (default: a temporary "
                    "folder)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows, extra = measure(args.dots, args.bulk_dots, Path(args.keep or tmp))
    ceiling = extra["ceiling"]
    out = table(rows, ceiling["dots_per_s"])
    print(versions_line())
    print(f"# ceiling: {ceiling['cycles_per_s']:,.0f} cycles/s x "
          f"{ceiling['dots_per_cycle']:.5f} dots/cycle")
    print(f"{'path':32} {'dots/s':>12} {'vs Amaranth pysim':>18} {'of ceiling':>11}")
    for row in out:
        print(f"{row['path']:32} {row['dots_per_s']:12,} {row['vs_peer']:17.1f}x "
              f"{row['fraction_of_ceiling']:10.1%}")
    if args.json:
        record = {"schema": SCHEMA, "date": date.today().isoformat(),
                  "command": "python benchmarks/bench_verify.py " + " ".join(sys.argv[1:]),
                  "machine": f"{platform.machine()}, {_cores()} cores, {_cpu()}",
                  "versions": versions_line().lstrip("# "),
                  "unit": "blackwell-mxf8f6f4 e4m3, E8M0 blocks of 32, MicroArch(lanes=32, "
                          "stages=1): one K=32 dot per cycle",
                  "notes": __doc__.split("\n\n", 2)[2].strip(),
                  "rows": out, **extra}
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")


def _cores() -> int:
    import os
    return os.cpu_count() or 0


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


if __name__ == "__main__":
    main()
