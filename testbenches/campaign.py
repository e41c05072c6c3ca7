"""The documented verification run: every supported format pair through the bulk harness.

    python -m testbenches.campaign [--dots 1000000] [--lanes 32 --stages 1] [--json OUT]
    python -m testbenches.campaign --markdown docs/data/campaign.json   # the docs' section

For each of the 36 pairs of E4M3/E5M2/E3M2/E2M3/E2M1/INT8 (A and B independent): the unit is
``blackwell-mxf8f6f4`` (F = 25, RZ FP32, E8M0 blocks of 32) where the preset has the pair, and
the same arithmetic with INT8 operands (MXINT8) otherwise. ``mxsim verify --bulk`` stimulus,
every output checked bit for bit against the engine and every cycle of the RTL's trace against
the cycle model; coverage (the handshake coverpoint from the RTL's trace) merged per pair.
The JSON records the run (command, date, commit, tool versions) and per pair the counts, the
value and cycle mismatches, every coverpoint's hits and the holes; :func:`markdown` renders
docs/verification.md's results section from it, so no figure there is typed by hand.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

from mxsim import presets
from mxsim.design import resolve_design
from mxsim.microarch import RTL_FORMATS
from mxsim.spec import UnitSpec
from mxsim.versions import installed

from .verify import verify

__all__ = ["spec_for_pair", "main", "markdown", "SEED"]

SEED = 7                     #: the campaign's stimulus seed (every pair, every chunk from it)


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
    ap.add_argument("--markdown", default=None, metavar="JSON",
                    help="print docs/verification.md's results section from a campaign JSON")
    args = ap.parse_args(argv)
    pairs = list(itertools.product(RTL_FORMATS, repeat=2))
    if args.pairs:
        pairs = [tuple(p.split("x")) for p in args.pairs.split(",")]
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())), end="")
        return 0
    chunk = 100_000 if args.bulk else 20_000
    run = {"command": "python -m testbenches.campaign " + " ".join(argv if argv is not None
                                                                  else sys.argv[1:]),
           "date": datetime.date.today().isoformat(), "commit": _commit(),
           "dots_asked": args.dots, "seed": SEED, "chunk": chunk, "lanes": args.lanes,
           "stages": args.stages, "sim": args.sim, "bulk": args.bulk,
           "versions": {name: v or "not installed" for name, v in
                        installed(("verilator", "amaranth", "numpy")).items()},
           "python": platform.python_version(), "pairs": []}
    rows, t_all = run["pairs"], time.perf_counter()
    for a, b in pairs:
        spec, ua = resolve_design(spec_for_pair(a, b), lanes=args.lanes, stages=args.stages)
        rep = verify(spec, ua, sim=args.sim,
                     dots=args.dots, seed=SEED, chunk=chunk, out_dir=args.out, bulk=args.bulk,
                     progress=False)
        holes = rep.coverage.holes()
        rows.append({"pair": f"{a}x{b}", "unit": spec.name, "spec_digest": spec.digest(),
                     "dots": rep.dots, "blocks": rep.beats, "cycles": rep.cycles,
                     "result": rep.result, "value_mismatches": rep.value_mismatches,
                     "cycle_mismatches": rep.cycle_mismatches,
                     "mismatches": [m.to_dict() for m in rep.mismatches[:20]], "holes": holes,
                     "coverage": rep.coverage.hits, "unmeasured": rep.coverage.unmeasured(),
                     "sim_seconds": round(rep.sim_seconds, 2),
                     "seconds": round(rep.seconds, 1)})
        print(f"{a}x{b:5} {spec.name:20} {rep.dots:>9,} dots {rep.cycles:>10,} cycles "
              f"mismatches {rep.value_mismatches} value {rep.cycle_mismatches} cycle  "
              f"holes {len(holes)}  sim {rep.sim_seconds:6.1f} s  all {rep.seconds:6.1f} s",
              flush=True)
        run["seconds"] = round(time.perf_counter() - t_all, 1)
        if args.json:
            tmp = Path(args.json + ".part")
            tmp.write_text(json.dumps(run, indent=1))
            tmp.replace(args.json)
    bad = sum(len(r["mismatches"]) for r in rows)
    print(f"{len(rows)} pairs, {sum(r['dots'] for r in rows):,} dot products, {bad} "
          f"mismatches, {time.perf_counter() - t_all:.0f} s")
    return 1 if bad else 0


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True, cwd=Path(__file__).parent).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True,
                               cwd=Path(__file__).parent).stdout.strip()
        return out + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def markdown(run: dict) -> str:
    """docs/verification.md's section on the campaign, every figure from ``run`` (the JSON
    that :func:`main` writes)."""
    rows = run["pairs"]
    dots = sum(r["dots"] for r in rows)
    cycles = sum(r["cycles"] for r in rows)
    value = sum(r["value_mismatches"] for r in rows)
    cyc = sum(r["cycle_mismatches"] for r in rows)
    holed = [r for r in rows if r["holes"]]
    unmeasured = sorted({p for r in rows for p in r["unmeasured"]})
    sim = sum(r["sim_seconds"] for r in rows)
    per = sorted({r["dots"] for r in rows})
    out = [f"**Result: {len(rows)} format pairs, {dots:,} dot products ({cycles:,} cycles), "
           f"{value} value and {cyc} cycle mismatches; "
           + (f"{len(holed)} pair{'s' if len(holed) != 1 else ''} with coverage holes.**"
              if holed else "every coverpoint hit in every pair (0 holes).**"), "",
           "| | |", "|---|---|",
           f"| run | {run['date']}, `{run['command'].strip()}`, commit `{run['commit'][:12]}`; "
           f"{', '.join(f'{k} {v}' for k, v in run['versions'].items())}; "
           f"{run['seconds'] / 60:.0f} min in all, {sim:.0f} s of it in the harness |",
           f"| stimulus | `mxsim verify --bulk` chunks of {run['chunk']:,} from seed "
           f"{run['seed']}, {' / '.join(f'{d:,}' for d in per)} dot products per pair; "
           f"{run['lanes']} lanes, {run['stages']} stage{'s' if run['stages'] != 1 else ''} |",
           "| coverage | `backpressure` from the harness's trace; "
           + (f"not measured: {', '.join(unmeasured)}" if unmeasured
              else "every coverpoint measured in every pair")
           + ("; holes: " + "; ".join(f"{r['pair']}: {', '.join(r['holes'])}" for r in holed)
              if holed else "; 0 holes") + " |", "",
           "| pair | unit | dot products | cycles | value / cycle mismatches | coverage holes "
           "| harness (s) | whole (s) |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['pair']} | {r['unit']} | {r['dots']:,} | {r['cycles']:,} | "
                   f"{r['value_mismatches']} / {r['cycle_mismatches']} | {len(r['holes'])} | "
                   f"{r['sim_seconds']} | {r['seconds']} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
