"""Mutation testing: single-fault mutants of the RTL, each run through the testbench.

``hdl.unit.DotProductUnit(..., fault=NAME)`` elaborates the unit with one fault from
:data:`FAULTS` (each a one-line change at one place in the datapath or its control); the
testbench kills a mutant when any output bit or any cycle differs from the model. Survivors
are listed with the reason, in docs/verification.md.

    python -m testbenches.mutants [--unit NAME] [--lanes N --stages S] [--dots N] [--sim S]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from mxsim import units
from mxsim.microarch import MicroArch

__all__ = ["FAULTS", "run"]

#: fault -> where it is and what it breaks
FAULTS: dict[str, str] = {
    "decode-subnormal-exp": "decoder: subnormal exponent 0 - bias instead of 1 - bias",
    "decode-nan-missed": "decoder: the E4M3 NaN code (finite-and-NaN formats) read as a number",
    "decode-sign-dropped": "decoder: A's sign bit ignored",
    "mul-scale-bias": "multiplier: scale exponents biased by 253 instead of 254",
    "mul-scale-sig-dropped": "multiplier: a UE4M3 scale's significand left out of the product "
                             "(its exponent kept; UE4M3-scaled units only)",
    "mul-inf-zero-not-nan": "multiplier: Inf x 0 is not NaN",
    "mul-zero-exp": "multiplier: zero products keep e_a + e_b instead of e_zero",
    "max-tree-node": "max tree: one comparator (level 1, node 1) picks the smaller exponent",
    "max-tree-drops-c": "max tree: C's exponent left out of the maximum",
    "align-drops-lsb": "aligner: the last kept bit (2**(E-F)) truncated away too",
    "align-rounds": "aligner: rounds the cut bits (half up) instead of truncating",
    "align-c-sign": "C aligner: C's sign ignored",
    "adder-carry-dropped": "adder tree: the first level one bit too narrow (carry lost)",
    "acc-not-cleared": "accumulator: not cleared at a block's first pass",
    "c-every-pass": "accumulator: C added in every pass, not only the first",
    "norm-lead-off-by-one": "normaliser: leading-one detector one low at one bit position",
    "norm-sticky-dropped": "normaliser: sticky bit forced to 0",
    "norm-subnormal-shift": "normaliser: subnormal results shifted one place too far",
    "round-up-on-guard": "rounder: rounds up on the guard bit alone (ties away; RZ rounds)",
    "round-carry-lost": "rounder: a carry out of the significand does not bump the exponent",
    "pack-overflow-missed": "packer: overflow detected one binade late",
    "pack-nan-code": "packer: NaN as 0x7FC00000 instead of 0x7FFFFFFF",
    "pack-inf-sign": "packer: -Inf given as +Inf",
    "ready-ignores-stall": "handshake: i.ready high on a block's last pass even when stalled "
                           "(one cycle early under back-pressure)",
    "chain-no-wait": "handshake: a chained block does not wait for its C (stale feedback)",
    "stall-ignored": "handshake: the pipeline advances while o.valid waits for o.ready",
    "out-valid-stuck": "handshake: o.valid not cleared when the result is taken",
    "first-ignored": "control: C read from the feedback register even on first blocks",
    "last-ignored": "control: every block's result leaves on o, not only last blocks",
}


def run(unit: str = "blackwell-mxf8f6f4", a: str = "e4m3", b: str = "e4m3", *,
        lanes: int = 8, stages: int = 2, dots: int = 8000, sim: str = "verilator",
        faults: list[str] | None = None, out_dir: str | Path = "build/mutants",
        seed: int = 11, acc_rounding: str | None = None) -> list[dict]:
    """Every fault through ``mxsim verify``'s testbench; a row per mutant."""
    from .verify import verify
    spec = units.get(unit).spec_for_formats(a, b)
    if acc_rounding:
        spec = spec.replace(name=f"{spec.name}-{acc_rounding}", acc_rounding=acc_rounding)
    ua = MicroArch(lanes=lanes, stages=stages)
    rows = []
    # By default, only the faults that can act on this unit (the UE4M3 one needs its scales).
    default = [f for f in FAULTS if f != "mul-scale-sig-dropped" or spec.scale_format == "ue4m3"]
    for fault in faults or default:
        t0 = time.perf_counter()
        rep = verify(spec, ua, sim=sim, dots=dots, seed=seed, chunk=2000, out_dir=out_dir,
                     fault=fault, keep_failing=False, progress=False)
        first = rep.mismatches[0].to_dict() if rep.mismatches else None
        rows.append({"fault": fault, "where": FAULTS[fault], "killed": not rep.passed,
                     "dots_to_kill": rep.dots if not rep.passed else None,
                     "first": first, "seconds": round(time.perf_counter() - t0, 1)})
        print(f"{fault:26} {'KILLED' if not rep.passed else 'survived':9} "
              f"after {rep.dots:6} dots  {rows[-1]['seconds']:5.1f} s", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbenches.mutants",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--unit", default="blackwell-mxf8f6f4")
    ap.add_argument("--a-format", default="e4m3")
    ap.add_argument("--b-format", default=None)
    ap.add_argument("--lanes", type=int, default=8)
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--dots", type=int, default=8000)
    ap.add_argument("--sim", default="verilator")
    ap.add_argument("--acc-rounding", default=None, help="override the preset's (e.g. rne)")
    ap.add_argument("--faults", default=None, help="comma-separated (default: all)")
    ap.add_argument("--json", default=None, metavar="OUT.json")
    args = ap.parse_args(argv)
    rows = run(args.unit, args.a_format, args.b_format or args.a_format, lanes=args.lanes,
               stages=args.stages, dots=args.dots, sim=args.sim,
               acc_rounding=args.acc_rounding,
               faults=args.faults.split(",") if args.faults else None)
    killed = sum(r["killed"] for r in rows)
    print(f"killed {killed} of {len(rows)} mutants ({killed / len(rows):.0%})")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
