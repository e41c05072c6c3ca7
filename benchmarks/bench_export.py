"""The C export (``mxsim export-c``): its equality with the engine on every preset, and its speed
beside the numba engine's, in one run.

    python benchmarks/bench_export.py record -o docs/data/export_c_2026-12-06.json [--dots N]
    python benchmarks/bench_export.py speed -o docs/data/export_speed_2026-12-06.json
    python benchmarks/bench_export.py table [--check]

``record``: every spec of every preset (each operand pair, scale pattern, C format and FP32
granularity) exported, each preset's specs compiled together into one library with
``-std=c99 -Wall -Wextra -Werror -pedantic -O2`` by every compiler found (gcc; clang where
present), and held equal, code for code, to the fast engine on at least ``--dots`` (100,000)
dots per preset spread over its specs: seeded sets of every generator family that applies,
seeds no other run uses (``--seed``, default 20261206); and each preset's first spec to the
reference engine (Python fractions) on one set of every family. The record is written after each
preset, so a stopped run keeps what it finished (``complete`` says whether it did).

``speed``: for four units, one vector set each (65,536 dots), the fast engine (numba kernel,
its threads) and the C library (``PREFIX_dot_batch``, one thread, -O2) on the same operands,
outputs compared bit for bit; dots/s of each and the ratio C / engine, best of three. The C
library's time is the batch call on operands already laid out; ``with layout`` adds the numpy
copies that lay a vector set out as the C API takes it.

``table``: fills docs/dpi.md's tables and quoted figures from the two records (``--check``:
only compares; tests/project/test_export_records.py runs it).
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _timing import best_of, versions_line  # benchmarks/ is on sys.path when run as a script

from mxsim import presets, units, vectors
from mxsim.engine import fast
from mxsim.export import default_prefix, files_of
from mxsim.export.build import STRICT, Library, batch_layout, compile_library, compilers
from mxsim.export.check import check, families_for, shape_for

SCHEMA = "mxsim.export_record/1"


def preset_specs(name: str) -> list:
    """Every spec of preset ``name`` (:meth:`mxsim.presets.Preset.all_specs`)."""
    return presets.get(name).all_specs()


def _compiler_version(cmd: list[str]) -> str:
    proc = subprocess.run([*cmd, "--version"], capture_output=True, text=True, check=False)
    return proc.stdout.splitlines()[0] if proc.stdout else " ".join(cmd)


def _per_spec_dots(spec, total: int, n_specs: int) -> int:
    """Dots for one spec: its share of the preset's total, at least one set of every family."""
    m, n, _ = shape_for(spec, 0, -(-total // n_specs))
    least = m * n * len(families_for(spec))
    return max(-(-total // n_specs), least)


def record_preset(name: str, folder: Path, dots: int, seed: int,
                  ccs: dict[str, list[str]]) -> dict:
    """One preset: its specs exported, compiled by each compiler, checked; a record row."""
    specs = preset_specs(name)
    for spec in specs:
        for fname, text in files_of(spec, source=f"preset {name}").items():
            (folder / fname).write_text(text)
    row = {"preset": name, "specs": len(specs), "compilers": {}, "dots": 0, "mismatches": 0,
           "families": set(), "per_spec": []}
    libs = {}
    for n, (cc, cmd) in enumerate(ccs.items()):
        t0 = time.monotonic()
        libs[cc] = compile_library(folder, folder / f"cc{n}.so", cc=cmd, opt="-O2")
        row["compilers"][cc] = {"warnings": 0, "compile_s": round(time.monotonic() - t0, 2)}
    first = next(iter(ccs))
    for n, spec in enumerate(specs):
        prefix = default_prefix(spec)
        want = _per_spec_dots(spec, dots, len(specs))
        for cc in ccs:
            r = check(spec, Library(libs[cc], prefix, spec), want, seed=seed + n)
            row["dots"] += r.dots if cc == first else 0
            row["mismatches"] += r.mismatches
            row["families"] |= set(r.per_family)
            if cc == first:
                row["per_spec"].append({"prefix": prefix, "digest": spec.digest(),
                                        "dots": r.dots, "mismatches": r.mismatches,
                                        "first_mismatch": r.first})
    row["families"] = sorted(row["families"])
    # The reference engine (Python fractions) on the preset's first spec: one set of every
    # family, gcc's build.
    spec = specs[0]
    m, n, _ = shape_for(spec, 0, 1)
    r = check(spec, Library(libs[first], default_prefix(spec), spec),
              m * n * len(families_for(spec)), seed=seed + 99_991, engine="reference")
    row["reference"] = {"prefix": default_prefix(spec), "dots": r.dots,
                        "mismatches": r.mismatches, "families": sorted(r.per_family),
                        "first_mismatch": r.first}
    return row


def cmd_record(args) -> int:
    ccs = compilers()
    if not ccs:
        print("bench_export: no C compiler (gcc or clang) on PATH", file=sys.stderr)
        return 2
    rec = {"schema": SCHEMA, "date": datetime.date.today().isoformat(),
           "command": f"python benchmarks/bench_export.py record -o {args.output} --dots "
                      f"{args.dots} --seed {args.seed}",
           "machine": f"{platform.machine()}, {os.cpu_count()} cores",
           "versions": versions_line().lstrip("# "),
           "compilers": {cc: _compiler_version(cmd) for cc, cmd in ccs.items()},
           "flags": list(STRICT) + ["-O2"],
           "engine": "fast", "dots_per_preset": args.dots, "seed": args.seed,
           "presets": [], "complete": False}
    t0 = time.monotonic()
    for name in presets.names():
        with tempfile.TemporaryDirectory() as tmp:
            row = record_preset(name, Path(tmp), args.dots, args.seed, ccs)
        rec["presets"].append(row)
        print(f"{name}: {row['specs']} specs, {row['dots']} dots, {row['mismatches']} "
              f"mismatches", flush=True)
        Path(args.output).write_text(json.dumps(rec, indent=1) + "\n")
    rec["complete"] = True
    rec["wall_s"] = round(time.monotonic() - t0, 1)
    Path(args.output).write_text(json.dumps(rec, indent=1) + "\n")
    return 1 if any(r["mismatches"] for r in rec["presets"]) else 0


#: (unit, a, b, scale, block, K) timed by ``speed``
SPEED_UNITS = [("hopper-wgmma", "e4m3", "e4m3", None, None, 128),
               ("blackwell-mxf8f6f4", "e4m3", "e4m3", "e8m0", 32, 128),
               ("blackwell-mxf4nvf4", "e2m1", "e2m1", "ue4m3", 16, 128),
               ("exact", "e4m3", "e4m3", "e8m0", 32, 128)]


def speed_row(unit: str, a: str, b: str, scale, block, k: int, side: int, folder: Path) -> dict:
    vs = vectors.generate("normal", a_format=a, b_format=b, m=side, n=side, k=k,
                          scale_format=scale, block=block, seed=5)
    spec = units.get(unit).spec_for(vs)
    prefix = default_prefix(spec)
    for fname, text in files_of(spec, source=f"preset {unit}").items():
        (folder / fname).write_text(text)
    lib = Library(compile_library(folder, folder / f"{prefix}.so", opt="-O2"), prefix, spec)
    fast.dot(spec, vs)                                        # compile numba's kernel first
    t_engine, want = best_of(3, lambda: fast.dot(spec, vs))
    lay = batch_layout(spec, vs)
    n = lay["a"].shape[0]
    d = np.zeros(n, np.uint32)
    f = getattr(lib._lib, f"{prefix}_dot_batch")

    def ptr(x):
        return None if x is None else x.ctypes.data_as(ctypes.c_void_p)

    def call():
        f(n, k, ptr(lay["a"]), ptr(lay["b"]), ptr(lay["a_scale"]), ptr(lay["b_scale"]),
          ptr(lay["c"]), ptr(d))
        return d
    t_c, _ = best_of(3, call)
    t_layout, got = best_of(3, lambda: lib.dot(vs))
    equal = bool(np.array_equal(np.asarray(want), got))
    return {"unit": unit, "formats": f"{a} x {b}" + (f", {scale}/{block}" if scale else ""),
            "k": k, "dots": n, "engine_dots_s": n / t_engine, "c_dots_s": n / t_c,
            "c_with_layout_dots_s": n / t_layout, "ratio_c_over_engine": t_engine / t_c,
            "bit_equal": equal, "engine_path": fast.path(spec)["path"]}


def _engine_threads() -> int | None:
    """The threads numba runs the engine's kernel on (None without numba)."""
    try:
        import numba
    except ImportError:
        return None
    return int(numba.get_num_threads())


def cmd_speed(args) -> int:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for u in SPEED_UNITS:
            rows.append(speed_row(*u, side=args.side, folder=Path(tmp)))
            r = rows[-1]
            print(f"{r['unit']:22} {r['formats']:22} K={r['k']}: engine "
                  f"{r['engine_dots_s']:.3g} dots/s, C {r['c_dots_s']:.3g} dots/s "
                  f"(with layout {r['c_with_layout_dots_s']:.3g}), C/engine "
                  f"{r['ratio_c_over_engine']:.2f}, bit-equal {r['bit_equal']}", flush=True)
    rec = {"schema": "mxsim.export_speed/1", "date": datetime.date.today().isoformat(),
           "command": f"python benchmarks/bench_export.py speed -o {args.output} --side "
                      f"{args.side}",
           "machine": f"{platform.machine()}, {os.cpu_count()} cores",
           "versions": versions_line().lstrip("# "),
           "compiler": _compiler_version(["gcc"]), "flags": list(STRICT) + ["-O2"],
           "engine_threads": _engine_threads(), "c_threads": 1, "rows": rows}
    if args.output:
        Path(args.output).write_text(json.dumps(rec, indent=1) + "\n")
    return 0 if all(r["bit_equal"] for r in rows) else 1


RECORD = Path(__file__).resolve().parents[1] / "docs" / "data" / "export_c_2026-12-06.json"
SPEED = Path(__file__).resolve().parents[1] / "docs" / "data" / "export_speed_2026-12-06.json"
DOC = Path(__file__).resolve().parents[1] / "docs" / "dpi.md"


def figures(record: dict, speed: dict) -> dict[str, str]:
    """docs/dpi.md's marked figures: the two tables and the numbers its prose quotes."""
    rows = record["presets"]
    by = {r["unit"]: r for r in speed["rows"]}
    least = min(rows, key=lambda r: r["dots"])
    return {
        "export-presets": "\n" + presets_table(record) + "\n",
        "export-speed": "\n" + speed_table(speed) + "\n",
        "export-n-presets": str(len(rows)),
        "export-n-specs": str(sum(r["specs"] for r in rows)),
        "export-dots": f"{sum(r['dots'] for r in rows):,}",
        "export-least": f"{least['dots']:,} ({least['preset']})",
        "export-mismatches": str(sum(r["mismatches"] for r in rows)),
        "export-ref-dots": f"{sum(r['reference']['dots'] for r in rows):,}",
        "export-ref-mismatches": str(sum(r["reference"]["mismatches"] for r in rows)),
        "export-compilers": ", ".join(record["compilers"].values()),
        "export-wgmma-ratio": f"{by['hopper-wgmma']['ratio_c_over_engine']:.2f}",
        "export-exact-ratio": f"{by['exact']['ratio_c_over_engine']:.2f}",
        "export-engine-threads": str(speed["engine_threads"]),
    }


def presets_table(record: dict) -> str:
    """The per-preset table of the record."""
    lines = ["| preset | specs | dots (fast engine) | mismatches | families | "
             "dots (reference engine) | mismatches |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in record["presets"]:
        ref = r["reference"]
        lines.append(f"| {r['preset']} | {r['specs']} | {r['dots']:,} | {r['mismatches']} | "
                     f"{len(r['families'])} | {ref['dots']:,} | {ref['mismatches']} |")
    rows = record["presets"]
    total = sum(r["dots"] for r in rows)
    specs = sum(r["specs"] for r in rows)
    bad = sum(r["mismatches"] for r in rows)
    ref_total = sum(r["reference"]["dots"] for r in rows)
    ref_bad = sum(r["reference"]["mismatches"] for r in rows)
    lines.append(f"| **all {len(rows)} presets** | **{specs}** | **{total:,}** | **{bad}** | | "
                 f"**{ref_total:,}** | **{ref_bad}** |")
    return "\n".join(lines)


def speed_table(speed: dict) -> str:
    """The speed table of the speed record."""
    lines = ["| unit | formats | K | dots | engine (dots/s) | C library (dots/s) | "
             "C with layout | C / engine | bit-equal |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in speed["rows"]:
        lines.append(f"| {r['unit']} | {r['formats']} | {r['k']} | {r['dots']:,} | "
                     f"{r['engine_dots_s']:,.0f} | {r['c_dots_s']:,.0f} | "
                     f"{r['c_with_layout_dots_s']:,.0f} | {r['ratio_c_over_engine']:.2f} | "
                     f"{'yes' if r['bit_equal'] else 'NO'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    rp = sub.add_parser("record", help="every preset through the export and the engine")
    rp.add_argument("-o", "--output", required=True)
    rp.add_argument("--dots", type=int, default=100_000, help="dots per preset")
    rp.add_argument("--seed", type=int, default=20261206)
    sp = sub.add_parser("speed", help="the C library's dots/s beside the numba engine's")
    sp.add_argument("-o", "--output", default=None)
    sp.add_argument("--side", type=int, default=256, help="M = N of each set (default 256)")
    tp = sub.add_parser("table", help="fill docs/dpi.md's tables and figures from the records")
    tp.add_argument("--check", action="store_true",
                    help="leave the doc alone; exit 1 where it differs from the records")
    args = ap.parse_args(argv)
    if args.cmd == "record":
        return cmd_record(args)
    if args.cmd == "speed":
        return cmd_speed(args)
    from mxsim.output import update_marked
    figs = figures(json.loads(RECORD.read_text()), json.loads(SPEED.read_text()))
    return update_marked(DOC, figs, check=args.check, source=f"{RECORD.name}, {SPEED.name}",
                         command="python benchmarks/bench_export.py table")


if __name__ == "__main__":
    sys.exit(main())
