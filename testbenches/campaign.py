"""The documented verification run: every supported format pair through the bulk harness.

    python -m testbenches.campaign [--dots 1000000] [--lanes 32 --stages 1] [--json OUT]

For each of the 36 pairs of E4M3/E5M2/E3M2/E2M3/E2M1/INT8 (A and B independent): the unit is
``blackwell-mxf8f6f4`` (F = 25, RZ FP32, E8M0 blocks of 32) where the preset has the pair, and
the same arithmetic with INT8 operands (MXINT8) otherwise. ``mxsim verify --bulk`` stimulus,
every output checked bit for bit against the engine and every handshake cycle against the cycle
model; coverage merged per pair.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

from mxsim import presets
from mxsim.microarch import RTL_FORMATS, MicroArch
from mxsim.spec import UnitSpec

from .verify import verify

__all__ = ["spec_for_pair", "main"]


def spec_for_pair(a: str, b: str) -> UnitSpec:
    p = presets.get("blackwell-mxf8f6f4")
    if (a, b) in p.pairs:
        return p.spec(a, b, scale_format="e8m0", block=32)
    base = p.spec("e4m3", "e4m3", scale_format="e8m0", block=32)
    return base.replace(name="mxint8-f25", a_format=a, b_format=b,
                        instruction=f"{base.instruction} with {a} x {b} operands",
                        provenance="blackwell-mxf8f6f4's arithmetic with INT8 operands "
                                   "(MXINT8); not a hardware preset")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbenches.campaign",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--dots", type=int, default=1_000_000)
    ap.add_argument("--lanes", type=int, default=32)
    ap.add_argument("--stages", type=int, default=1)
    ap.add_argument("--sim", default="verilator")
    ap.add_argument("--bulk", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--pairs", default=None, help="e.g. e4m3xe5m2,int8xint8 (default: all)")
    ap.add_argument("--out", default="build/campaign")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    pairs = list(itertools.product(RTL_FORMATS, repeat=2))
    if args.pairs:
        pairs = [tuple(p.split("x")) for p in args.pairs.split(",")]
    rows, t_all = [], time.perf_counter()
    for a, b in pairs:
        spec = spec_for_pair(a, b)
        rep = verify(spec, MicroArch(lanes=args.lanes, stages=args.stages), sim=args.sim,
                     dots=args.dots, seed=7, chunk=100_000 if args.bulk else 20_000,
                     out_dir=args.out, bulk=args.bulk, progress=False)
        holes = rep.coverage.holes()
        rows.append({"pair": f"{a}x{b}", "unit": spec.name, "dots": rep.dots,
                     "blocks": rep.beats, "cycles": rep.cycles,
                     "mismatches": len(rep.mismatches), "holes": holes,
                     "sim_seconds": round(rep.sim_seconds, 2),
                     "seconds": round(rep.seconds, 1)})
        print(f"{a}x{b:5} {spec.name:20} {rep.dots:>9,} dots {rep.cycles:>10,} cycles "
              f"mismatches {len(rep.mismatches)}  holes {len(holes)}  "
              f"sim {rep.sim_seconds:6.1f} s  all {rep.seconds:6.1f} s", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
    bad = sum(r["mismatches"] for r in rows)
    print(f"{len(rows)} pairs, {sum(r['dots'] for r in rows):,} dot products, {bad} "
          f"mismatches, {time.perf_counter() - t_all:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
