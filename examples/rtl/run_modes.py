"""A million dot products or more in every mode of the designs described in their own terms.

    python examples/rtl/run_modes.py --list
    python examples/rtl/run_modes.py run DIR [--vectors N] [--jobs J] [--only MODE ...]
        [--work WORK]
    python examples/rtl/run_modes.py checks DIR --vectors 20000 [--jobs J]
    python examples/rtl/run_modes.py record DIR -o docs/data/foreign_rtl_modes_DATE.json
    python examples/rtl/run_modes.py --table docs/data/foreign_rtl_modes_DATE.json

Examples 4 and 5 (``examples/rtl/nrm_tree``, ``examples/rtl/mx_fpu``) have modes that one build
runs through the map's ``[control]`` ports: mx_fpu has 40 (four element formats, an FP32 or
BF16 accumulator, five rounding modes), nrm_tree one. ``run`` runs, for every mode,

    mxsim verify --rtl MAP --unit SPEC ARGS --bulk --vectors N --chunk 200000 --seed S --json

``J`` at a time (each mode its own seed, 101 up, seeds no fit has used), each writing
``DIR/MODE.json`` (what the command printed, its command line and seconds) when it ends, so a
run cut short keeps the modes it finished. Each design is built once (``WORK/build``, WORK
DIR unless given) and every mode runs on a copy of that build. ``record`` gathers them into
the record docs/foreign-rtl.md shows, with ``checks``: each bug build failing in its mode
(mx_fpu's also passing in RNE: its bug is in RDN alone), and ``fit --rtl`` of each
design whose spec is then verified in every mode. ``--table`` prints its table
(tests/project/test_docs_foreign.py holds the two equal and re-checks the record: every mode,
at least a million dots, no mismatch).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path("examples") / "rtl"
NRM, FPU = HERE / "nrm_tree", HERE / "mx_fpu"

#: mx_fpu's element formats and the --set arguments each needs (E2M1: 64 lanes, one pair)
FORMATS = {"e4m3": [], "e5m2": [], "int8": [], "e2m1": ["--set", "k=64", "--set", "block=64"]}
#: its accumulators (the acc_fmt port, from d_format)
ACCUMULATORS = {"fp32": [], "bf16": ["--set", "d_format=bf16", "--set", "acc_format=bf16",
                                     "--set", "nan_code=0x7FC0"]}
#: its rounding modes (the rm port, from acc_rounding): RNE, RTZ, RDN, RUP, RMM
ROUNDINGS = ("rne", "rz", "rd", "ru", "rna")


def modes() -> dict[str, tuple[str, list[str]]]:
    """Every mode: its name, the map and the verify arguments that select it."""
    out = {"nrm_tree": (str(NRM / "nrm_tree.toml"), ["--unit", str(NRM / "nrm_tree_spec.toml")])}
    for fmt, fmt_args in FORMATS.items():
        for acc, acc_args in ACCUMULATORS.items():
            for rm in ROUNDINGS:
                out[f"mx_fpu {fmt} {acc} {rm}"] = (
                    str(FPU / "mx_fpu.toml"),
                    ["--unit", str(FPU / "mx_fpu_spec.toml"), "--set", f"a_format={fmt}",
                     "--set", f"b_format={fmt}", *fmt_args, *acc_args, "--set",
                     f"acc_rounding={rm}"])
    return out


def machine() -> str:
    """Where the runs ran: ``MXSIM_MACHINE``, or this machine's cores and architecture."""
    return os.environ.get("MXSIM_MACHINE", f"{os.cpu_count()}-core {os.uname().machine} Linux")


def _slug(mode: str) -> str:
    return mode.replace(" ", "-")


def _verify(rtl_map: str, args: list[str], out: Path, vectors: int, seed: int
            ) -> tuple[subprocess.CompletedProcess, list[str], float]:
    cmd = ["verify", "--rtl", rtl_map, *args, "--bulk", "--vectors", str(vectors), "--chunk",
           "200000", "--seed", str(seed), "--out", str(out)]
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "mxsim", *cmd, "--json"], cwd=ROOT,
                       capture_output=True, text=True, check=False)
    return p, ["mxsim", *cmd], time.perf_counter() - t0


def _build(rtl_map: str, args: list[str], where: Path) -> None:
    """One short run of the map's design: its bulk harness, built in ``where``."""
    p, cmd, _ = _verify(rtl_map, args, where, 100, 0)
    if p.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr[-2000:]}")


def run_mode(mode: str, seed: int, out: Path, vectors: int, scratch: Path) -> dict:
    """One mode's run, its JSON written to ``out/MODE.json`` when it ends."""
    rtl_map, args = modes()[mode]
    work = scratch / "work" / _slug(mode)
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(scratch / "build" / Path(rtl_map).stem, work)     # the design's built harness
    p, cmd, took = _verify(rtl_map, args, work, vectors, seed)
    try:
        rep = json.loads(p.stdout)
    except json.JSONDecodeError:
        rep = {"error": (p.stderr.strip().splitlines() or ["no output"])[-1]}
    rec = {"mode": mode, "exit": p.returncode, "command": " ".join(cmd),
           "seconds": round(took, 1), "machine": machine(), "report": rep}
    (out / f"{_slug(mode)}.json").write_text(json.dumps(rec, indent=1) + "\n")
    shutil.rmtree(work, ignore_errors=True)                      # stimulus files: gigabytes
    return rec


def run(out: Path, vectors: int, jobs: int, only: list[str] | None, scratch: Path) -> None:
    names = list(modes())
    todo = [m for m in names if not only or m in only]
    out.mkdir(parents=True, exist_ok=True)
    for rtl_map, args in {modes()[m][0]: modes()[m] for m in todo}.values():
        where = scratch / "build" / Path(rtl_map).stem
        if not where.exists():
            _build(rtl_map, args, where)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        for rec in pool.map(lambda m: run_mode(m, 101 + names.index(m), out, vectors, scratch),
                               todo):
            rep = rec["report"]
            print(f"{rec['mode']:<24} {rep.get('result', rep.get('error'))} "
                  f"{rep.get('dots', 0):,} dots {rec['seconds']} s "
                  f"(at {time.perf_counter() - t0:.0f} s)", flush=True)


#: The bug builds and the mode each must fail in (and one it must pass: mx_fpu's bug is RDN's)
BUGS = [("nrm_tree", str(NRM / "nrm_tree_bug.toml"), "nrm_tree", "FAIL"),
        ("mx_fpu rd", str(FPU / "mx_fpu_bug.toml"), "mx_fpu e4m3 fp32 rd", "FAIL"),
        ("mx_fpu rne", str(FPU / "mx_fpu_bug.toml"), "mx_fpu e4m3 fp32 rne", "PASS")]
#: What fit --rtl is run on: each design in one mode (its map's own)
FITS = {"nrm_tree": (str(NRM / "nrm_tree.toml"), []),
        "mx_fpu": (str(FPU / "mx_fpu.toml"), ["--a-format", "e4m3"])}


def _mxsim(args: list[str]) -> tuple[int, dict, float]:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "mxsim", *args, "--json"], cwd=ROOT,
                       capture_output=True, text=True, check=False)
    try:
        rep = json.loads(p.stdout)
    except json.JSONDecodeError:
        rep = {"error": (p.stderr.strip().splitlines() or ["no output"])[-1]}
    return p.returncode, rep, round(time.perf_counter() - t0, 1)


def _fit_verify(mode: str, spec: Path, out: Path, vectors: int, seed: int) -> dict:
    """The fitted ``spec`` verified in one mode, on a copy of the design's built harness."""
    rtl_map, m_args = modes()[mode]
    unit = m_args.index("--unit")
    v_args = [*m_args[:unit], "--unit", str(spec), *m_args[unit + 2:]]
    work = out / "fit-verify" / _slug(mode)
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(out / "build" / Path(rtl_map).stem, work)
    cmd = ["verify", "--rtl", rtl_map, *v_args, "--bulk", "--vectors", str(vectors),
           "--seed", str(seed), "--out", str(work)]
    rc, rep, took = _mxsim(cmd)
    shutil.rmtree(work, ignore_errors=True)
    return {"mode": mode, "exit": rc, "seconds": took, "command": " ".join(["mxsim", *cmd]),
            "result": rep.get("result", rep.get("error")), "dots": rep.get("dots"),
            "value_mismatches": rep.get("value_mismatches")}


def checks(out: Path, vectors: int, jobs: int = 1) -> dict:
    """Each bug build in its modes (``vectors`` dots), and ``fit --rtl`` of each design whose
    spec is then verified (``vectors`` dots) in every mode, ``jobs`` at a time, each on a copy
    of the design's one build: written to ``out/checks.json``."""
    out.mkdir(parents=True, exist_ok=True)
    names = list(modes())
    bugs = []
    for name, bug_map, mode, want in BUGS:
        _, args = modes()[mode]
        cmd = ["verify", "--rtl", bug_map, *args, "--bulk", "--vectors", str(vectors),
               "--seed", str(201 + names.index(mode)), "--out", str(out / "bugs" / _slug(name))]
        rc, rep, took = _mxsim(cmd)
        bugs.append({"bug": name, "mode": mode, "want": want, "exit": rc,
                     "command": " ".join(["mxsim", *cmd]),
                     "seconds": took, "result": rep.get("result", rep.get("error")),
                     "value_mismatches": rep.get("value_mismatches"),
                     "first": (rep.get("mismatches") or [None])[0]})
        print(f"bug {name}: {bugs[-1]['result']}", flush=True)
    fits = []
    for design, (rtl_map, args) in FITS.items():
        spec = out / f"fitted-{design}.toml"
        cmd = ["fit", "--rtl", rtl_map, *args, "-o", str(spec), "--out", str(out / "fit" / design)]
        rc, rep, took = _mxsim(cmd)
        fit = {"design": design, "command": " ".join(["mxsim", *cmd]), "exit": rc,
               "seconds": took, "exact": rep.get("exact"), "equal": rep.get("equal"),
               "total": rep.get("total"), "error": rep.get("error"),
               "spec": spec.read_text() if spec.exists() else None, "modes": []}
        print(f"fit {design}: exact={fit['exact']} {fit['equal']}/{fit['total']}", flush=True)
        todo = [m for m, (m_map, _) in modes().items() if m_map == rtl_map and spec.exists()]
        if todo:
            where = out / "build" / Path(rtl_map).stem
            if not where.exists():
                _build(rtl_map, modes()[todo[0]][1], where)
            with ThreadPoolExecutor(jobs) as pool:
                for res in pool.map(lambda m, s=spec: _fit_verify(m, s, out, vectors,
                                                               301 + names.index(m)), todo):
                    fit["modes"].append(res)
                    print(f"fit {design} -> {res['mode']}: {res['result']} "
                          f"{res['seconds']} s", flush=True)
        fits.append(fit)
    rec = {"bugs": bugs, "fits": fits, "machine": machine()}
    (out / "checks.json").write_text(json.dumps(rec, indent=1) + "\n")
    return rec


def record(out: Path) -> dict:
    """The record of a ``run`` folder: every mode's command, result and counts."""
    runs = []
    for mode in modes():
        path = out / f"{_slug(mode)}.json"
        if not path.exists():
            continue
        rec = json.loads(path.read_text())
        rep = rec["report"]
        runs.append({"mode": mode, "command": rec["command"], "exit": rec["exit"],
                     "seconds": rec["seconds"], "machine": rec.get("machine"),
                     **{k: rep.get(k) for k in ("result", "dots", "cycles", "value_mismatches",
                                                "cycle_mismatches", "holes", "numerics",
                                                "error")}})
    extra = out / "checks.json"
    return {"date": time.strftime("%Y-%m-%d"), "runs": runs,
            **(json.loads(extra.read_text()) if extra.exists() else {})}


def table(rec: dict) -> str:
    """The Markdown table docs/foreign-rtl.md shows."""
    lines = ["| mode | dots | mismatches (value + cycle) | coverage holes | result | "
             "seconds | machine |", "|---|---|---|---|---|---|---|"]
    for r in rec["runs"]:
        lines.append(f"| {r['mode']} | {r['dots']:,} | {r['value_mismatches']} + "
                     f"{r['cycle_mismatches']} | {r['holes']} | {r['result']} | "
                     f"{r['seconds']:,.0f} | {r['machine']} |")
    if rec.get("bugs"):
        lines += ["", "| bug build | in mode | result | value mismatches |", "|---|---|---|---|"]
        for b in rec["bugs"]:
            lines.append(f"| {b['bug']} | {b['mode']} | {b['result']} | "
                         f"{b['value_mismatches']} |")
    for f in rec.get("fits", ()):
        passed = sum(m["exit"] == 0 and m["value_mismatches"] == 0 for m in f["modes"])
        lines += ["", f"fit --rtl {f['design']}: {f['equal']:,} of {f['total']:,} probe outputs "
                      f"reproduced ({'exact' if f['exact'] else 'not exact'}); the fitted spec "
                      f"verified in {passed} of {len(f['modes'])} modes "
                      f"({f['modes'][0]['dots'] if f['modes'] else 0:,} dot products each)"]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("action", nargs="?", choices=("run", "checks", "record"))
    ap.add_argument("dir", nargs="?", type=Path, help="where the runs' JSON files go")
    ap.add_argument("--vectors", type=int, default=1_000_000)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--only", nargs="*", default=None, metavar="MODE")
    ap.add_argument("--work", type=Path, default=None, help="run: builds and runs (DIR)")
    ap.add_argument("-o", "--output", type=Path, help="record: the JSON record to write")
    ap.add_argument("--list", action="store_true", help="print every mode")
    ap.add_argument("--table", type=Path, default=None, metavar="RECORD.json")
    args = ap.parse_args()
    if args.list:
        print("\n".join(modes()))
    elif args.table:
        print(table(json.loads(args.table.read_text())))
    elif args.action is None or args.dir is None:
        ap.error("give run DIR, record DIR, --list or --table RECORD.json")
    elif unknown := sorted(set(args.only or ()) - set(modes())):
        ap.error(f"no such mode: {', '.join(unknown)} (--list prints them)")
    elif args.action == "run":
        run(args.dir, args.vectors, args.jobs, args.only, args.work or args.dir)
    elif args.action == "checks":
        checks(args.dir, args.vectors, args.jobs)
    else:
        rec = record(args.dir)
        text = json.dumps(rec, indent=1) + "\n"
        if args.output:
            args.output.write_text(text)
        print(table(rec))


if __name__ == "__main__":
    main()
