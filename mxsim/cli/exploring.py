"""The ``explore`` verb: design-space sweeps (the area cost comes from hdl, imported here,
lazily, and handed to mxsim.explore)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import exit_status
from .common import emit, engine_path, out_dir

__all__ = ["explore_verilog", "explore_synthesis", "cmd_explore"]


def explore_verilog(spec, microarch) -> str:
    """The Verilog whose area explore reports: hdl's generator (imported when a design is
    sized: the explore package never imports hdl)."""
    from hdl import verilog
    return verilog.generate(spec, microarch)


def explore_synthesis(spec, microarch, text: str, fpga: str):
    """Yosys's figures for that Verilog, mapped to ``fpga`` (ice40, lut4 or none)."""
    from hdl import verilog
    return verilog.stats(spec, microarch, ice40=fpga == "ice40", lut4=fpga == "lut4", text=text)


def cmd_explore(args: argparse.Namespace) -> int:
    from .. import explore
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
