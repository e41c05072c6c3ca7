"""Mutation testing: single-fault mutants of the RTL, each run through the testbench.

Each mutant of :data:`FAULTS` is a subclass of ``hdl.unit.DotProductUnit`` that overrides one
small, named method of one stage or block (:mod:`testbenches.unit.faults`; the production RTL has no
hooks for them); the testbench kills a mutant when any output bit or any cycle differs from
the model. Survivors are listed with the reason, in docs/verification.md.

    python -m testbenches.unit.mutants [--unit NAME] [--lanes N --stages S] [--dots N] [--sim S]
                                  [--scale FMT/BLOCK] [--bulk]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from hdl.cli import parse_scale
from mxsim.design import resolve_design

from .faults import FAULTS, unit, unit_class
from .group_faults import GROUP_FAULTS

__all__ = ["FAULTS", "GROUP_FAULTS", "unit", "unit_class", "run"]


def run(unit: str = "blackwell-mxf8f6f4", a: str = "e4m3", b: str = "e4m3", *,
        lanes: int = 8, stages: int = 2, dots: int = 8000, sim: str = "verilator",
        faults: list[str] | None = None, out_dir: str | Path = "build/mutants",
        seed: int = 11, acc_rounding: str | None = None,
        scale: tuple[str, int] | None = None, bulk: bool = False) -> list[dict]:
    """Every fault through ``mxsim verify``'s testbench; a row per mutant. ``scale`` picks
    one of the preset's scale configurations (``("ue4m3", 16)``); ``bulk``: the C++ harness
    instead of cocotb (a build of a few seconds to a minute instead of minutes)."""
    from .verify import verify
    spec, ua = resolve_design(unit, a, b, {"acc_rounding": acc_rounding} if acc_rounding else None,
                              lanes, stages, scale=scale)
    rows = []
    # By default, only the faults that can act on this unit (the UE4M3 ones need its scales;
    # a grouped unit is built from the grouped stages, which the group faults mutate).
    ue4m3 = ("mul-scale-sig-dropped", "group-scale-sig-dropped")
    pool = list(GROUP_FAULTS) if spec.group is not None else list(FAULTS)
    default = [f for f in pool if f not in ue4m3 or spec.scale_format == "ue4m3"]
    for fault in faults or default:
        t0 = time.perf_counter()
        rep = verify(spec, ua, sim=sim, dots=dots, seed=seed, chunk=2000, out_dir=out_dir,
                     fault=fault, keep_failing=False, progress=False, bulk=bulk,
                     stop_at_first=True)                    # dots_to_kill: where it first fails
        first = rep.mismatches[0].to_dict() if rep.mismatches else None
        where = FAULTS.get(fault) or GROUP_FAULTS[fault]
        rows.append({"fault": fault, "where": where, "killed": not rep.passed,
                     "dots_to_kill": rep.dots if not rep.passed else None,
                     "first": first, "seconds": round(time.perf_counter() - t0, 1)})
        print(f"{fault:26} {'KILLED' if not rep.passed else 'survived':9} "
              f"after {rep.dots:6} dots  {rows[-1]['seconds']:5.1f} s", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbenches.unit.mutants",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--unit", default="blackwell-mxf8f6f4")
    ap.add_argument("--a-format", default="e4m3")
    ap.add_argument("--b-format", default=None)
    ap.add_argument("--lanes", type=int, default=8)
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--dots", type=int, default=8000)
    ap.add_argument("--sim", default="verilator")
    ap.add_argument("--acc-rounding", default=None, help="override the preset's (e.g. rne)")
    ap.add_argument("--scale", default=None, metavar="FMT/BLOCK",
                    help="the preset's scale configuration (e.g. ue4m3/16)")
    ap.add_argument("--faults", default=None, help="comma-separated (default: all)")
    ap.add_argument("--bulk", action="store_true", help="the C++ harness instead of cocotb")
    ap.add_argument("--json", default=None, metavar="OUT.json")
    args = ap.parse_args(argv)
    rows = run(args.unit, args.a_format, args.b_format or args.a_format, lanes=args.lanes,
               stages=args.stages, dots=args.dots, sim=args.sim,
               acc_rounding=args.acc_rounding, scale=parse_scale(args.scale), bulk=args.bulk,
               faults=args.faults.split(",") if args.faults else None)
    killed = sum(r["killed"] for r in rows)
    print(f"killed {killed} of {len(rows)} mutants ({killed / len(rows):.0%})")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
