"""The documented runs of the foreign-RTL examples (docs/foreign-rtl.md, "Measured").

    python examples/rtl/run_all.py -o docs/data/foreign_rtl_2026-12-01.json [--vectors N]
        [--only NAME ...] [--work DIR]
    python examples/rtl/run_all.py --table docs/data/foreign_rtl_2026-12-01.json

For every example (and every element format of one that selects formats) it runs the same
commands a user runs, with ``--json``, and keeps what they printed:

1. ``mxsim verify --rtl MAP --bulk``: N constrained-random dot products through the generated
   C++ harness, every output and declared timing rule checked against the unit spec;
2. ``mxsim verify --rtl MAP`` through cocotb (20,000 to 60,000 dot products, as
   :data:`EXAMPLES` says): coverage holes;
3. ``mxsim verify --rtl BUG_MAP --bulk``: the injected-bug variant must fail; its failing set
   is replayed alone and must fail again;
4. ``mxsim fit --rtl MAP``: the spec the design's outputs on the probe suite give.

``--table`` prints the Markdown table docs/foreign-rtl.md shows (tests/project/test_docs_foreign.py
holds the two equal).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "examples" / "rtl"

#: name, map, bug map, unit (spec), element format (None: the map's own), cocotb dot products
#: (each lane's NaN bin wants 4 NaN codes: block_dot has 128 lanes, mxsim_unit 32)
EXAMPLES = [
    ("mxfp8_coproc", "mxfp8_coproc/mxfp8_coproc.toml", "mxfp8_coproc/mxfp8_coproc_bug.toml",
     "mxfp8_coproc/mxfp8_coproc_spec.toml", None, 20_000),
    ("block_dot e4m3", "block_dot/block_dot.toml", "block_dot/block_dot_bug.toml",
     "block_dot/block_dot_spec_e4m3.toml", "e4m3", 60_000),
    ("block_dot int8", "block_dot/block_dot.toml", "block_dot/block_dot_bug.toml",
     "block_dot/block_dot_spec_int8.toml", "int8", 20_000),
    ("mxsim_unit", "mxsim_unit/mxsim_unit.toml", "mxsim_unit/mxsim_unit_bug.toml",
     "blackwell-mxf8f6f4", "e4m3", 40_000),
]
#: The fit fields a table row shows.
FIT_FIELDS = ("frac_bits", "acc_format", "acc_rounding", "specials", "overflow", "group",
              "reduce")


def _mxsim(args: list[str], want_rc: tuple[int, ...]) -> tuple[dict, list[str], float]:
    """Run ``mxsim ARGS --json``; its JSON, the command line and the seconds it took."""
    cmd = [sys.executable, "-m", "mxsim", *args, "--json"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if p.returncode not in want_rc:
        raise SystemExit(f"{' '.join(args)}: exit {p.returncode}\n{p.stderr[-2000:]}")
    return json.loads(p.stdout), ["mxsim", *args], took


def _unit(unit: str) -> str:
    return unit if "/" not in unit else f"examples/rtl/{unit}"


def run_example(name: str, rtl_map: str, bug: str, unit: str, fmt: str | None,
                cocotb_dots: int, *, vectors: int, work: Path) -> dict:
    base = ["--unit", _unit(unit)] + (["--a-format", fmt] if fmt else [])
    out = work / name.replace(" ", "-")
    rec: dict = {"name": name, "map": f"examples/rtl/{rtl_map}", "unit": _unit(unit)}
    bulk, cmd, took = _mxsim(["verify", "--rtl", f"examples/rtl/{rtl_map}", *base, "--bulk",
                              "--vectors", str(vectors), "--chunk", "200000", "--seed", "1",
                              "--out", str(out / "bulk")], (0, 1))
    rec["bulk"] = {k: bulk[k] for k in ("dots", "cycles", "result", "value_mismatches",
                                        "cycle_mismatches", "holes", "loop_seconds")}
    rec["bulk"].update(command=" ".join(cmd), seconds=round(took, 1),
                       numerics=bulk.get("numerics"))
    cov, cmd, took = _mxsim(["verify", "--rtl", f"examples/rtl/{rtl_map}", *base,
                             "--vectors", str(cocotb_dots), "--seed", "2", "--out",
                             str(out / "cocotb")],
                            (0, 1))
    rec["cocotb"] = {k: cov[k] for k in ("dots", "cycles", "result", "value_mismatches",
                                         "cycle_mismatches", "holes", "loop_seconds")}
    rec["cocotb"].update(command=" ".join(cmd), seconds=round(took, 1))
    # --stop-at-first: the table reports the mismatches of the first failing chunk
    caught, cmd, _ = _mxsim(["verify", "--rtl", f"examples/rtl/{bug}", *base, "--bulk",
                             "--vectors", "20000", "--seed", "3", "--stop-at-first", "--out",
                             str(out / "bug")], (1,))
    again, _, _ = _mxsim(["verify", "--rtl", f"examples/rtl/{bug}", *base, "--bulk", "--replay",
                          caught["failing"], "--out", str(out / "bug-replay")], (1,))
    rec["bug"] = {"command": " ".join(cmd), "result": caught["result"],
                  "value_mismatches": caught["value_mismatches"],
                  "cycle_mismatches": caught["cycle_mismatches"],
                  "failing_dots": again["dots"], "replay_result": again["result"],
                  "first": caught["mismatches"][0] if caught["mismatches"] else None}
    fitted, cmd, took = _mxsim(["fit", "--rtl", f"examples/rtl/{rtl_map}"]
                               + (["--a-format", fmt] if fmt else [])
                               + ["-o", str(out / "fitted.toml"), "--out", str(out / "fit")],
                               (0, 1))
    rec["fit"] = {"command": " ".join(cmd), "exact": fitted["exact"], "equal": fitted["equal"],
                  "total": fitted["total"], "seconds": round(took, 1),
                  "spec": {k: fitted["spec"].get(k) for k in FIT_FIELDS}}
    return rec


def table(record: dict) -> str:
    """The Markdown table of a record (what docs/foreign-rtl.md shows)."""
    lines = ["| example | bulk: dots, mismatches | cocotb: dots, holes | injected bug: "
             "mismatches, failing set | fit --rtl: outputs reproduced, spec |",
             "|---|---|---|---|---|"]
    for r in record["runs"]:
        b, c, g, f = r["bulk"], r["cocotb"], r["bug"], r["fit"]
        spec = ", ".join(f"{k} {'none' if v is None else v}" for k, v in f["spec"].items()
                         if v is not None or k == "frac_bits")
        lines.append(
            f"| {r['name']} | {b['dots']:,}, {b['value_mismatches']} value + "
            f"{b['cycle_mismatches']} cycle ({b['result']}) | {c['dots']:,}, {c['holes']} "
            f"holes ({c['result']}) | {g['result']}: {g['value_mismatches']} value + "
            f"{g['cycle_mismatches']} cycle in the first failing chunk; {g['failing_dots']} "
            f"dots, replay "
            f"{g['replay_result']} | {f['equal']:,} of {f['total']:,}"
            f"{' (exact)' if f['exact'] else ''}: {spec} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", help="the JSON record to write")
    ap.add_argument("--vectors", type=int, default=1_000_000)
    ap.add_argument("--only", nargs="*", default=None, help="example names")
    ap.add_argument("--work", default="build/foreign-runs", help="builds and reports")
    ap.add_argument("--table", default=None, metavar="RECORD.json", help="print its table")
    args = ap.parse_args()
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return
    if not (HERE / "mxsim_unit" / "mx_dot.v").exists():
        subprocess.run([sys.executable, "-m", "mxsim", "rtl", "--unit", "blackwell-mxf8f6f4",
                        "--a-format", "e4m3", "--lanes", "32", "--stages", "1", "-o",
                        str(HERE / "mxsim_unit" / "mx_dot.v")], cwd=ROOT, check=True)
    from mxsim import versions
    old = (json.loads(Path(args.output).read_text())
           if args.output and Path(args.output).exists() else {"runs": []})
    runs = {r["name"]: r for r in old["runs"]}           # --only reruns some, keeps the rest
    record = {"date": time.strftime("%Y-%m-%d"), "versions": versions.describe(),
              "machine": "2-core x86_64 Linux (shared)", "runs": []}
    for name, *example in EXAMPLES:
        if args.only and name not in args.only:
            continue
        print(f"{name} ...", flush=True)
        runs[name] = run_example(name, *example, vectors=args.vectors, work=ROOT / args.work)
        record["runs"] = [runs[n] for n, *_ in EXAMPLES if n in runs]
        if args.output:                                  # after each example
            Path(args.output).write_text(json.dumps(record, indent=1) + "\n")
    print(table(record))


if __name__ == "__main__":
    main()
