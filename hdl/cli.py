"""The ``rtl`` and ``explore`` verbs of ``mxsim``: a unit's Verilog, its lint and Yosys
statistics (``rtl observe``: your RTL's outputs on a vector set), and the design-space sweep
whose area is that Verilog through Yosys.

Registered with the command through the ``mxsim.verbs`` entry points (pyproject.toml), which
name :data:`RTL` and :data:`EXPLORE`. The module imports argparse and the mxsim core only;
Amaranth is imported inside the verbs, so their help builds where the ``rtl`` extra is missing.
What ``rtl`` shares with ``verify`` (the unit options, the resolved unit, ``--scale``) is here:
the testbenches build on hdl. ``rtl observe`` runs a design behind a port map, which the
testbenches own: it calls them through the ``foreign_map`` and ``observe`` entry points of
``mxsim.hooks``, as ``fit --rtl`` does.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from mxsim import units, vectors
from mxsim.cli.common import (
    add_allow_large,
    add_verb,
    emit,
    engine_path,
    int_range,
    out_dir,
    parse_scale,
    spec_settings,
)
from mxsim.cli.verbs import Verb, rtl_hooks
from mxsim.errors import MxsimError, exit_status
from mxsim.output import check_output, write_text

__all__ = ["RTL", "EXPLORE", "add_rtl_unit_args", "rtl_unit", "parse_scale", "cmd_rtl",
           "cmd_rtl_observe", "explore_verilog", "explore_synthesis", "cmd_explore"]


def add_rtl_unit_args(sp: argparse.ArgumentParser, unit: str, note: str, stages: int,
                      rtl_map: bool = False) -> None:
    """The options that name a unit, its formats and micro-architecture (``rtl``, ``verify``);
    with ``rtl_map``, ``--rtl MAP.toml`` first (your own RTL instead)."""
    if rtl_map:
        sp.add_argument("--rtl", default=None, metavar="MAP.toml",
                        help="verify your own RTL, described by a port map (docs/foreign-rtl.md)"
                             "; --unit then names the spec it must reproduce")
    sp.add_argument("--unit", default=None if rtl_map else unit,
                    help=f"preset name or spec file (default: {unit}{note}"
                         f"{'; required with --rtl' if rtl_map else ''})")
    sp.add_argument("--a-format", default=None,
                    help="A's element format (default: e4m3 where the unit takes it, else its "
                         "first pair's; or the port map's)")
    sp.add_argument("--b-format", default=None, help="B's element format (default: A's)")
    sp.add_argument("--scale", default=None, metavar="FMT/BLOCK",
                    help="the preset's scale configuration, e.g. ue4m3/16 for "
                         "blackwell-mxf4nvf4 (default: its first)")
    sp.add_argument("--lanes", type=int, default=None,
                    help="products per cycle (default: the unit's k)")
    sp.add_argument("--stages", type=int, default=stages,
                    help=f"register stages after the accumulator, 1-3 (default: {stages})")


def rtl_unit(args: argparse.Namespace):
    """The unit, spec and micro-architecture that ``rtl`` and ``verify`` name, checked
    before anything is elaborated."""
    from mxsim.design import resolve_design
    unit = units.get(args.unit or "blackwell-mxf8f6f4")      # verify's default unit
    spec, ua = resolve_design(unit, args.a_format, args.b_format, lanes=args.lanes,
                              stages=args.stages, scale=parse_scale(getattr(args, "scale", None)))
    return unit, spec, ua


# -- rtl ---------------------------------------------------------------------------------------

def _add_rtl(sub: Any) -> argparse.ArgumentParser:
    rp = add_verb(sub, "rtl", cmd_rtl, "Verilog of a unit's datapath, its lint and Yosys "
                                       "statistics; `rtl observe`: your own RTL's outputs on a "
                                       "vector set")
    add_rtl_unit_args(rp, "hopper-wgmma", "", stages=1)
    rp.add_argument("-o", "--output", default=None, metavar="OUT.v", help="write the Verilog")
    rp.add_argument("--lint", action="store_true",
                    help="lint the written Verilog with Verilator -Wall (exit 1 on warnings)")
    rp.add_argument("--stats", action="store_true", help="synthesise with Yosys and report")
    rp.add_argument("--fpga", choices=("lut4", "ice40", "none"), default="lut4",
                    help="with --stats: lut4 (abc -lut 4 estimate, little time beyond the "
                         "generic synthesis), ice40 (synth_ice40: 5 to 30 min at 32 lanes) or "
                         "none (default: %(default)s)")
    rp.add_argument("--no-ice40", action="store_true", help=argparse.SUPPRESS)  # = --fpga none
    # `mxsim rtl observe ...`: an action of its own; `mxsim rtl [options]` runs as before.
    mine = {a.dest: (max(a.option_strings, key=len), a.default) for a in rp._actions
            if a.option_strings and a.dest not in ("help", "json")}
    # argparse writes an optional action as if it were required ("ACTION ..."): say it is not
    usage = rp.format_usage().removeprefix("usage: ").rstrip("\n").replace("%", "%%")
    rp.usage = f"{usage} [observe ...]"
    actions = rp.add_subparsers(dest="rtl_action", metavar="ACTION", title="actions",
                                prog=rp.prog)
    ob = add_verb(actions, "observe", cmd_rtl_observe,
                  "run a vector set through your RTL, described by a port map "
                  "(docs/foreign-rtl.md), and write it with the design's outputs as d, for "
                  "mxsim fit IN OUT")
    ob.add_argument("map", metavar="MAP.toml", help="the port map of your design")
    ob.add_argument("inputs", metavar="IN.npz",
                    help="the vector set to run (in the design's formats, k and scales)")
    ob.add_argument("-o", "--output", required=True, metavar="OUT.npz", dest="observed",
                    help="where to write the set with d = the design's outputs")
    ob.add_argument("--sim", choices=("verilator", "icarus"), default="verilator",
                    help="simulator of the cocotb testbench (default: %(default)s)")
    ob.add_argument("--bulk", action="store_true",
                    help="the C++ harness on Verilator instead of cocotb (millions of vectors)")
    ob.add_argument("--unit", default=None, metavar="SPEC", dest="observe_unit",
                    help="a preset or spec file whose fields the map's [control] inputs and "
                         "d_format follow (default: one exact rounding; only the mode matters, "
                         "nothing is compared)")
    ob.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    dest="set_fields",
                    help="the mode to run, as unit-spec fields spelt as a spec file spells "
                         "them (--set acc_rounding=rd --set d_format=bf16); repeat for more")
    ob.add_argument("--seed", type=int_range(0), default=0,
                    help="seed of the registers' random initial values (default: 0)")
    ob.add_argument("--out", default="mxsim-observe", metavar="DIR",
                    help="builds, reused while the design is unchanged (default: %(default)s)")
    add_allow_large(ob)
    theirs = {a.dest for a in ob._actions}
    ob.set_defaults(rtl_options={d: v for d, v in mine.items() if d not in theirs})
    return rp


def cmd_rtl(args: argparse.Namespace) -> int:
    """Verilog of a unit (and its lint and Yosys statistics)."""
    if args.output is None and not args.stats:
        raise MxsimError("rtl needs -o OUT.v (the Verilog) and/or --stats (Yosys statistics)")
    if args.output is not None and not Path(args.output).resolve().parent.is_dir():
        raise MxsimError(f"{Path(args.output).parent}: no such folder for -o; create it or "
                         f"write elsewhere")
    if args.output is not None:
        check_output(args.output)
    unit, spec, ua = rtl_unit(args)
    from . import verilog
    info: dict[str, Any] = {"unit": unit.name, "a_format": spec.a_format,
                            "b_format": spec.b_format, "lanes": ua.lanes, "stages": ua.stages,
                            "latency": ua.latency(spec), "passes": ua.passes(spec),
                            "interval": ua.interval(spec, False),
                            "interval_chained": ua.interval(spec, True),
                            "digest": spec.digest()}
    lines = [f"{unit.name} {spec.a_format} x {spec.b_format}: lanes {ua.lanes}, stages "
             f"{ua.stages}; latency {info['latency']} cycles, a block every {info['interval']} "
             f"cycles ({info['interval_chained']} chained); spec digest {info['digest']}"]
    status = 0
    if args.output is not None:
        out = Path(args.output)
        text = verilog.generate(spec, ua)
        write_text(out, text)
        lines.append(f"wrote {out} ({len(text.splitlines())} lines)")
        info["output"] = str(out)
        if args.lint:
            warnings = verilog.lint(out)
            info["lint"] = warnings
            lines.append("verilator --lint-only -Wall: " + (
                "clean (accepted: " + ", ".join(verilog.ACCEPTED_WARNINGS) + ")"
                if not warnings else f"{len(warnings)} warnings\n  " + "\n  ".join(warnings)))
            status = 1 if warnings else 0
    if args.stats:
        fpga = "none" if args.no_ice40 else args.fpga
        st = verilog.stats(spec, ua, ice40=fpga == "ice40", lut4=fpga == "lut4",
                           progress=False if args.json else None)
        info.update(cells=st.cells, total_cells=st.total_cells, flip_flops=st.flip_flops,
                    depth=st.depth, gate_equivalents=st.gate_equivalents, fpga=fpga,
                    ice40=st.ice40, lut4=st.lut4)
        lines.append(f"yosys synth: {st.total_cells} cells ({st.flip_flops} flip-flops), "
                     f"longest path {st.depth} cells, ~{st.gate_equivalents:,.0f} gate "
                     f"equivalents")
        lines += [f"  {c:16} {n}" for c, n in sorted(st.cells.items())]
        if st.ice40:
            lines.append("yosys synth_ice40: " + ", ".join(f"{c} {n}"
                                                           for c, n in sorted(st.ice40.items())))
        if st.lut4 is not None:
            lines.append(f"yosys abc -lut 4: {st.lut4} LUT4 (an estimate without carry chains; "
                         f"--fpga ice40 for synth_ice40, {verilog.ICE40_TIME})")
    emit(args, "\n".join(lines), info)
    return status


def cmd_rtl_observe(args: argparse.Namespace) -> int:
    """``rtl observe``: a vector set through the design behind a port map, its outputs kept
    (testbenches.foreign.observing, named by the ``observe`` hook: hdl never imports the
    testbenches)."""
    given = [flag for dest, (flag, default) in args.rtl_options.items()
             if getattr(args, dest, default) != default]
    if given:
        raise MxsimError(f"{given[0]} is an option of `mxsim rtl` (a unit's Verilog), not of "
                         f"`mxsim rtl observe`; leave it out")
    if args.bulk and args.sim != "verilator":
        raise MxsimError(f"--bulk runs the C++ harness on Verilator, not --sim {args.sim}; "
                         f"leave one out")
    check_output(args.observed)
    foreign_map, observe_set = rtl_hooks("rtl observe", "foreign_map", "observe")
    fields = spec_settings(args.set_fields)               # a bad --set before anything runs
    vs = vectors.load(args.inputs, allow_large=args.allow_large)
    pm = foreign_map(args.map, Path(args.out) / "ports")  # written only for a bad design
    obs = observe_set(pm, vs, args.out, sim=args.sim, bulk=args.bulk, fields=fields,
                      unit=args.observe_unit, seed=args.seed)
    vectors.save(obs.observed, args.observed)
    info = obs.to_dict()
    per = vs.k // info["instruction_k"]
    refit = f"mxsim fit {shlex.quote(args.inputs)} {shlex.quote(args.observed)} -o FITTED.toml"
    mode = " in mode " + ", ".join(f"{n} = {v}" for n, v in obs.mode.items()) \
        if obs.mode else ""
    what = ("the FP32 codes of its fixed-point values (mxsim fit compares them as values)"
            if info["compare"] == "value" else f"{info['d_format']} codes")
    lines = [f"{pm.path}: {info['dots']:,} dot products ({per} instruction"
             f"{'s' if per > 1 else ''} each) through {pm.design.top} ({obs.backend}){mode}: "
             f"{obs.cycles:,} cycles, {obs.seconds:.2f} s ({obs.total_seconds:.1f} s "
             f"with the build)",
             f"wrote {args.observed}: d = the design's outputs, {what}"]
    if obs.timing_mismatches:
        lines.append(f"timing: the design broke the timing its map declares "
                     f"{obs.timing_mismatches} times (its results are kept); `mxsim verify "
                     f"--rtl {shlex.quote(args.map)} --unit SPEC --replay "
                     f"{shlex.quote(args.inputs)}` says where")
    lines.append(f"fit them: {refit}")
    emit(args, "\n".join(lines), {"map": str(pm.path), "top": pm.design.top,
                                  "input": str(args.inputs), "output": str(args.observed),
                                  **info, "fit": refit})
    return 0


# -- explore -----------------------------------------------------------------------------------

def _add_explore(sub: Any) -> argparse.ArgumentParser:
    ex = add_verb(sub, "explore", cmd_explore,
                  "sweep unit designs over workloads: accuracy (engine), area (Yosys on the RTL) "
                  "and throughput (cycle model)")
    ex.add_argument("sweep", metavar="SWEEP.toml", help="the sweep file (docs/explore.md)")
    ex.add_argument("-o", "--out", default=None, metavar="DIR",
                    help="results, plots, report and cache (default: results/NAME)")
    ex.add_argument("-j", "--jobs", type=int_range(1), default=None, metavar="N",
                    help="tasks run in parallel: N local workers (on Dask, or a process pool "
                         "without Dask), 1 in this process (default: one worker per core)")
    ex.add_argument("--workers", type=int_range(1), dest="jobs", metavar="N",
                    help="the same as -j")
    ex.add_argument("--scheduler", default=None, metavar="ADDR",
                    help="run the tasks on a running Dask scheduler (tcp://HOST:8786)")
    ex.add_argument("--cluster-spec", default=None, metavar="FILE",
                    help="run the tasks on a dask-jobqueue cluster (SLURM, LSF, ...) built "
                         "from FILE (docs/campaigns.md)")
    ex.add_argument("--fresh", action="store_true", help="discard the cache and rerun all")
    ex.add_argument("--check", action="store_true",
                    help="only read and check the sweep file")
    ex.add_argument("--fpga", choices=("ice40", "lut4", "none"), default=None,
                    help="override the file's cost.fpga: ice40 (synth_ice40, minutes per "
                         "design), lut4 (abc -lut 4 estimate, seconds) or none")
    ex.add_argument("--no-progress", action="store_true", help="no progress bar")
    return ex


def explore_verilog(spec, microarch) -> str:
    """The Verilog whose area explore reports: hdl's generator (imported when a design is
    sized: the explore package never imports hdl)."""
    from . import verilog
    return verilog.generate(spec, microarch)


def explore_synthesis(spec, microarch, text: str, fpga: str):
    """Yosys's figures for that Verilog, mapped to ``fpga`` (ice40, lut4 or none)."""
    from . import verilog
    return verilog.stats(spec, microarch, ice40=fpga == "ice40", lut4=fpga == "lut4", text=text)


def cmd_explore(args: argparse.Namespace) -> int:
    from mxsim import explore
    sweep = explore.load(args.sweep)                 # every point checked before any runs
    if args.fpga:
        sweep.fpga = args.fpga
    out = args.out or str(Path("results") / sweep.name)
    if not args.check:
        out_dir(out)
    paths: dict[str, int] = {}             # the fast engine's path per design: how many
    for d in sweep.designs:
        note = engine_path(d.spec)["note"]
        paths[note] = paths.get(note, 0) + 1
    engines = "accuracy by the fast engine: " + "; ".join(
        f"{note} for {n} design{'s' if n > 1 else ''}" for note, n in paths.items())
    if args.check:
        n_rtl = len({d.rtl_key for d in sweep.designs})
        emit(args, f"{args.sweep}: {len(sweep.points)} points ({len(sweep.designs)} designs, "
                   f"{n_rtl} RTL configurations, {len(sweep.workloads)} workloads), "
                   f"{len(sweep.references)} references: OK\n{engines}",
             {"points": len(sweep.points), "designs": len(sweep.designs),
              "rtl_configurations": n_rtl, "workloads": len(sweep.workloads),
              "engine_paths": paths})
        return 0
    try:
        res = explore.run(sweep, out, area=explore.AreaCost(explore_verilog, explore_synthesis),
                          jobs=args.jobs, fresh=args.fresh, scheduler=args.scheduler,
                          cluster_spec=args.cluster_spec,
                          progress=False if args.json or args.no_progress else None)
    except explore.Interrupted as e:
        print(f"mxsim: {e}", file=sys.stderr)
        return exit_status(e)
    front = [r for r in res.rows if r["pareto"]]
    where = (f" ({res.executor}, {res.workers} worker{'s' if res.workers > 1 else ''})"
             if any(res.computed.values()) else "")
    lines = [f"{len(res.rows)} points ({len(sweep.designs)} designs, "
             f"{len({r['rtl_hash'] for r in res.rows})} RTL configurations, "
             f"{len(sweep.workloads)} workloads) in {res.seconds:.0f} s{where}: "
             f"{res.computed['area']} syntheses and {res.computed['accuracy']} accuracy runs, "
             f"{res.reused['area'] + res.reused['accuracy']} cached",
             f"Pareto front: {len(front)} points"]
    for r in sorted(front, key=lambda r: (r["workload"], r["error"])):
        lines.append(f"  {r['workload']:20} {r['label']:28} error {r['error']:.3g}  "
                     f"GE {r['gate_equivalents']:.0f}  {r['dots_per_cycle']:.3g} dots/cycle")
    lines.append(engines)
    lines.append(f"report: {Path(out) / 'report.md'}")
    emit(args, "\n".join(lines), {"out": out, "seconds": res.seconds, "computed": res.computed,
                                  "executor": res.executor, "workers": res.workers,
                                  "engine_paths": paths,
                                  "reused": res.reused, "files": res.files,
                                  "pareto": [{k: r[k] for k in ("label", "workload", "error",
                                                                "gate_equivalents",
                                                                "dots_per_cycle")}
                                             for r in front]})
    return 0


#: The verbs this package registers (pyproject.toml's ``mxsim.verbs`` entry points): the rank
#: is the verb's place in ``mxsim --help``; each needs Amaranth from the ``rtl`` extra.
RTL = Verb(name="rtl", rank=30, add=_add_rtl, extra="rtl", modules=("amaranth",))
EXPLORE = Verb(name="explore", rank=50, add=_add_explore, extra="rtl", modules=("amaranth",))
