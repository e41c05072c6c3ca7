"""The ``rtl``, ``verify`` and ``demo`` verbs: RTL from a unit spec, checked against the
model."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from .. import formats, units, vectors
from ..campaign import scheduler_address
from ..errors import MxsimError
from ..output import check_output, write_text
from .common import emit, engine_path, out_dir

__all__ = ["rtl_unit", "foreign_map", "map_formats", "cmd_rtl", "cmd_verify", "cmd_demo"]


def rtl_unit(args: argparse.Namespace):
    """The unit, spec and micro-architecture that ``rtl`` and ``verify`` name, checked
    before anything is elaborated."""
    from ..design import resolve_design
    unit = units.get(args.unit or "blackwell-mxf8f6f4")      # verify's default unit
    spec, ua = resolve_design(unit, args.a_format, args.b_format, lanes=args.lanes,
                              stages=args.stages, scale=parse_scale(getattr(args, "scale", None)))
    return unit, spec, ua


def parse_scale(text: str | None) -> tuple[str | None, int | None] | None:
    """``--scale``'s ``FMT/BLOCK`` (``none``: no scales) as ``(scale_format, block)``;
    MxsimError (one line) for anything else."""
    if text is None:
        return None
    if text.strip().lower() == "none":
        return (None, None)
    fmt, _, block = text.strip().lower().partition("/")
    if not block.isdigit():
        raise MxsimError(f"--scale must be FMT/BLOCK (e.g. ue4m3/16) or none, not {text!r}")
    return fmt, int(block)


def foreign_map(path: str, work: str | Path):
    """The port map at ``path``, checked key by key and against the design's own ports (read
    by Verilator into ``work``) before anything is simulated."""
    try:
        from testbenches import portmap, ports
    except ImportError:
        raise MxsimError("foreign RTL needs the rtl extra (pip install -e '.[rtl]', or run "
                         "`make demo`)") from None
    pm = portmap.load(path)
    pm.check_ports(ports.design_ports(pm, Path(work)))
    return pm


def map_formats(pm, a_format: str | None, b_format: str | None) -> tuple[str, str]:
    """The element formats a run of the design ``pm`` uses: the map's fixed ones, or the
    ones ``--a-format``/``--b-format`` choose among the values of its format select."""
    a = a_format or pm.a_format
    if a is None:
        raise MxsimError(f"{pm.path}: the design's element format is selected by "
                         f"{pm.format_select.by} {pm.format_select.name!r}; choose one with "
                         f"--a-format ({', '.join(pm.format_select.values)})")
    return a, b_format or (pm.b_format if a_format is None and pm.b_format else a)


def numerics_line(spec) -> str:
    """The arithmetic of ``spec`` in one line, as a foreign design's verify report states
    what it was held to (special values and overflow included)."""
    from ..spec import Reduce, Specials
    steps = "one step" if spec.schedule is None else f"{len(spec.schedule)} steps"
    terms = ("exact terms" if spec.frac_bits is None
             else f"terms aligned to {spec.frac_bits} fraction bits ({spec.align.value})")
    if spec.group is not None:
        terms += f", groups of {spec.group}" + (" added in a tree of rounding adders"
                                                if spec.reduce is Reduce.TREE else "")
    specials = ("no NaN/Inf (every code reads as the number its bits spell)"
                if spec.specials is Specials.NONE else "IEEE NaN/Inf")
    return (f"{steps}, {terms}, rounded to {spec.acc_format} {spec.acc_rounding.value}; "
            f"{specials}; overflow {spec.overflow.value}")


def _verify_foreign(args: argparse.Namespace) -> int:
    """``verify --rtl``: a design behind a port map, against the unit spec ``--unit`` names."""
    from ..microarch import MicroArch
    if args.unit is None:
        raise MxsimError("verify --rtl needs --unit NAME or --unit SPEC.toml: the unit spec the "
                         "design must reproduce (mxsim units lists the presets)")
    if args.vectors < 1:
        raise MxsimError(f"--vectors must be at least 1, not {args.vectors}")
    pm = foreign_map(args.rtl, Path(args.out) / "ports")     # written only for a bad design
    a, b = map_formats(pm, args.a_format, args.b_format)
    unit_name = args.unit
    spec = units.get(unit_name).spec_for_formats(a, b)
    pm.check_spec(spec)
    out = out_dir(args.out)
    replay = vectors.load(args.replay, allow_large=args.allow_large) if args.replay else None
    if replay is not None:
        spec.check_vectors(replay)
    from testbenches.foreign import ForeignBackend
    from testbenches.foreign_bulk import ForeignBulkBackend
    from testbenches.verify import verify
    backend = ForeignBulkBackend(pm) if args.bulk else ForeignBackend(pm, sim=args.sim,
                                                                      waves=args.waves)
    # A line to paste into a shell: paths with spaces or quotes are quoted.
    command = (f"mxsim verify --rtl {shlex.quote(args.rtl)} --unit {shlex.quote(unit_name)} "
               f"--a-format {spec.a_format} --b-format {spec.b_format} --sim {args.sim}")
    rep = verify(spec, MicroArch(lanes=spec.k, stages=1), unit_name=unit_name, sim=args.sim,
                 dots=args.vectors, seed=args.seed, chunk=args.chunk, out_dir=out,
                 replay=replay, progress=None if not args.json else False, backend=backend,
                 replay_command=command)
    path = engine_path(spec)
    lines = [rep.format(), f"  design      {pm.path} (top {pm.design.top})",
             f"  numerics    {numerics_line(spec)}",
             f"  model       fast engine: {path['note']}"]
    emit(args, "\n".join(lines),
         {**rep.to_dict(), "engine_path": path, "map": str(pm.path),
          "numerics": numerics_line(spec)})
    return 0 if rep.passed else 1


def _verify_campaign(args: argparse.Namespace) -> int:
    """``verify --campaign``: every pair's run as tasks of mxsim.campaign (testbenches.campaign)."""
    given = [f"--{n.replace('_', '-')}" for n in ("unit", "a_format", "b_format", "rtl", "replay")
             if getattr(args, n) is not None] + (["--waves"] if args.waves else [])
    if given:
        raise MxsimError(f"--campaign runs the documented unit of every pair; it takes no "
                         f"{', '.join(given)}")
    if args.sim != "verilator":
        raise MxsimError(f"--campaign runs the bulk C++ harness on Verilator, not --sim "
                         f"{args.sim}")
    if args.scheduler is not None:
        scheduler_address(args.scheduler)        # one line now, before the tasks are made
    if args.vectors < 1:
        raise MxsimError(f"--vectors must be at least 1, not {args.vectors}")
    try:
        from testbenches import campaign
    except ImportError:
        raise MxsimError("verification needs the rtl extra (pip install -e '.[rtl]', or run "
                         "`make demo`)") from None
    pairs = campaign.parse_pairs(args.campaign)
    out = out_dir(args.out)
    record, rep = campaign.run_campaign(
        pairs, dots=args.vectors, chunk=args.chunk, lanes=args.lanes, stages=args.stages,
        sim="verilator", bulk=True, seed=args.seed,
        store=out / "store" if args.store is None else args.store,
        workers=args.workers, scheduler=args.scheduler, cluster_spec=args.cluster_spec,
        cache=args.build_cache, out=str(out), progress=None if not args.json else False,
        command="mxsim " + " ".join(sys.argv[1:]))
    write_text(out / "campaign.json", json.dumps(record, indent=1))
    emit(args, campaign.summary(record, rep) + f"\n  record      {out / 'campaign.json'}",
         record)
    bad = sum(r["value_mismatches"] + r["cycle_mismatches"] for r in record["pairs"])
    return 1 if bad or rep.failed else 0


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
    try:
        from hdl import verilog
    except ImportError:
        raise MxsimError("the RTL generator needs the rtl extra (pip install -e '.[rtl]', or "
                         "run `make demo`)") from None
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


def cmd_verify(args: argparse.Namespace) -> int:
    """RTL against the model through cocotb (or the bulk harness): exit 0 only on zero
    mismatches."""
    if args.campaign is not None:
        return _verify_campaign(args)
    if any(getattr(args, n) is not None
           for n in ("workers", "scheduler", "cluster_spec", "store", "build_cache")):
        raise MxsimError("--workers, --scheduler, --cluster-spec, --store and --build-cache "
                         "go with --campaign")
    if args.rtl is not None:
        return _verify_foreign(args)
    unit, spec, ua = rtl_unit(args)
    if args.vectors < 1:
        raise MxsimError(f"--vectors must be at least 1, not {args.vectors}")
    replay = vectors.load(args.replay, allow_large=args.allow_large) if args.replay else None
    try:
        Path(args.out).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MxsimError(f"{args.out}: cannot create the output folder ({exc.strerror})") \
            from None
    if replay is not None:
        spec.check_vectors(replay)
    try:
        from testbenches.verify import verify
    except ImportError:
        raise MxsimError("verification needs the rtl extra (pip install -e '.[rtl]', or run "
                         "`make demo`)") from None
    rep = verify(spec, ua, unit_name=unit.name, sim=args.sim, dots=args.vectors,
                 seed=args.seed, chunk=args.chunk, out_dir=args.out, bulk=args.bulk,
                 replay=replay, waves=args.waves, progress=None if not args.json else False)
    # The expected values come from the fast engine: say which of its paths computed them.
    path = engine_path(spec)
    emit(args, rep.format() + f"\n  model       fast engine: {path['note']}",
         {**rep.to_dict(), "engine_path": path})
    return 0 if rep.passed else 1


def cmd_demo(args: argparse.Namespace) -> int:
    """Generate an MXFP8 vector set of every family, run it through ``exact``, check, report."""
    from ..compare import compare

    folder = out_dir(args.out)
    unit = units.get("exact")
    kwargs = dict(a_format="e4m3", b_format="e4m3", m=16, n=16, k=args.k,
                  scale_format="e8m0", block=32, seed=args.seed)
    t0 = time.perf_counter()
    vs = vectors.generate_suite(vectors.FAMILIES, count=2, **kwargs)
    vectors.save(vs, folder / "demo_in.npz")
    t1 = time.perf_counter()
    res = unit.run(vs)
    t2 = time.perf_counter()
    vectors.save(res, folder / "demo_exact.npz")
    # Cross-check the fast engine against the fraction reference on a slice of every family.
    sub = res.subset(slice(0, 2), slice(0, 2))
    report = compare(sub, unit.compute(sub, engine="reference"), actual_name="fast engine",
                     expected_name="fraction reference")
    t3 = time.perf_counter()
    d = res.d.view(np.float32)
    cls = formats.get("fp32").classify(res.d)
    counts = {c.name.lower(): int((cls == c).sum()) for c in formats.Class}
    lines = [
        "mxsim demo: MXFP8 (e4m3 x e4m3, E8M0 scales, block 32) through the `exact` unit",
        f"  vector set   {folder / 'demo_in.npz'}: {vs.num_dots} dot products, K={vs.k}, "
        f"{len(set(vs.extra['families']))} generator families ({t1 - t0:.2f} s)",
        f"  exact unit   {folder / 'demo_exact.npz'}: {vs.num_dots / (t2 - t1):,.0f} dots/s",
        "  result class " + ", ".join(f"{k} {v}" for k, v in counts.items()),
        f"  |d| range    {np.nanmin(np.abs(d[np.isfinite(d) & (d != 0)])):.3g} .. "
        f"{np.nanmax(np.abs(d[np.isfinite(d)])):.3g}",
        f"  check        fast engine vs fraction reference on {report.total} dots: "
        f"{report.equal} bit-equal ({t3 - t2:.2f} s)",
        "  next         mxsim compare " + shlex.quote(str(folder / "demo_exact.npz"))
        + " --unit exact",
    ]
    print("\n".join(lines))
    if not report.agree:
        print(report.format())
        return 1
    return 0
