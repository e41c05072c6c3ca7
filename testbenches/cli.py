"""The ``verify`` and ``demo`` verbs of ``mxsim``: a unit's RTL (or yours, behind a port map)
simulated and checked against the model; and the model's quick tour.

Registered with the command through the ``mxsim.verbs`` entry points (pyproject.toml), which
name :data:`VERIFY` and :data:`DEMO`; ``mxsim.hooks`` names :func:`foreign_map` for ``fit
--rtl``. The module imports argparse, the mxsim core and :mod:`hdl.cli` (the unit options it
shares with ``rtl``) only; Amaranth and cocotb are imported inside the verb, so its help builds
where the ``rtl`` extra is missing.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from hdl.cli import add_rtl_unit_args, rtl_unit
from mxsim import formats, units, vectors
from mxsim.campaign import scheduler_address
from mxsim.cli.common import (
    add_allow_large,
    add_campaign_executor,
    add_verb,
    emit,
    engine_path,
    int_range,
    map_formats,
    out_dir,
    spec_settings,
)
from mxsim.cli.verbs import Verb
from mxsim.engine.conformance import ENVELOPES
from mxsim.errors import MxsimError
from mxsim.output import write_text

__all__ = ["VERIFY", "DEMO", "foreign_map", "numerics_line", "settings", "with_fields",
           "waivers", "cmd_verify", "cmd_demo"]


def foreign_map(path: str, work: str | Path):
    """The port map at ``path``, checked key by key and against the design's own ports (read
    by Verilator into ``work``) before anything is simulated."""
    from .foreign import portmap
    from .foreign.portmap import ports

    pm = portmap.load(path)
    pm.check_ports(ports.design_ports(pm, Path(work)))
    return pm


def settings(texts: list[str]) -> dict[str, object]:
    """``--set FIELD=VALUE`` arguments as {field: value}
    (:func:`mxsim.cli.common.spec_settings`, which ``fit --rtl --set`` reads them with too)."""
    return spec_settings(texts)


def with_fields(spec, texts: list[str]):
    """``spec`` with each ``FIELD=VALUE`` of ``texts`` (``--set``) changed (see
    :func:`settings`); the result checked as a spec is."""
    from mxsim.spec import SpecError, from_dict
    if not texts:
        return spec
    data = {**spec.to_dict(), **settings(texts)}
    data["name"] = f"{spec.name} ({', '.join(texts)})"
    try:
        return from_dict(data, source="--set")
    except SpecError as exc:
        raise MxsimError(f"--set: {exc}") from None


def numerics_line(spec) -> str:
    """The arithmetic of ``spec`` in one line, as a foreign design's verify report states
    what it was held to (special values and overflow included)."""
    from mxsim.spec import Reduce, Specials
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


def waivers(texts: list[str]) -> list:
    """``--waive [NAME:]WHEN`` arguments as waivers (:mod:`testbenches.sim.waive`), each
    checked: a malformed one is one line naming the option (exit 2, nothing simulated)."""
    from .sim.waive import parse_option
    return [parse_option(text, i) for i, text in enumerate(texts, 1)]


def _given_waivers(args: argparse.Namespace) -> list:
    """The ``--waive`` options, read (a malformed one is one line), never with a conformance
    check (its envelope judges the values; waivers waive mismatches against the spec)."""
    if args.waive and args.conformance:
        raise MxsimError("--waive and --conformance do not go together: the envelope judges the "
                         "values, a waiver waives mismatches against the spec; leave one out")
    return waivers(args.waive)


def _verify_foreign(args: argparse.Namespace) -> int:
    """``verify --rtl``: a design behind a port map, against the unit spec ``--unit`` names."""
    from mxsim.microarch import MicroArch
    if args.unit is None:
        raise MxsimError("verify --rtl needs --unit NAME or --unit SPEC.toml: the unit spec the "
                         "design must reproduce (mxsim units lists the presets)")
    if args.vectors < 1:
        raise MxsimError(f"--vectors must be at least 1, not {args.vectors}")
    settings(args.set_fields)                                # a bad --set before anything runs
    given = _given_waivers(args)                             # a bad --waive too
    pm = foreign_map(args.rtl, Path(args.out) / "ports")     # written only for a bad design
    if args.outside_domain and pm.domain is None:
        raise MxsimError(f"{pm.path}: --outside-domain needs a [domain] in the map (without "
                         f"one every input is inside)")
    unit_name = args.unit
    fields = settings(args.set_fields)
    if "a_format" in fields or "b_format" in fields:
        # --set gives the formats: the unit's own spec with them (--a-format must agree)
        spec = with_fields(units.get(unit_name).spec_for_formats(), args.set_fields)
        a, b = map_formats(pm, args.a_format or spec.a_format, args.b_format or spec.b_format)
        if (a, b) != (spec.a_format, spec.b_format):
            raise MxsimError(f"--a-format/--b-format ({a} x {b}) and --set ({spec.a_format} x "
                             f"{spec.b_format}) disagree; give the formats once")
    else:
        a, b = map_formats(pm, args.a_format, args.b_format)
        spec = with_fields(units.get(unit_name).spec_for_formats(a, b), args.set_fields)
    pm.check_spec(spec)
    out = out_dir(args.out)
    replay = vectors.load(args.replay, allow_large=args.allow_large) if args.replay else None
    if replay is not None:
        spec.check_vectors(replay)
        pm.check_domain(replay)
    from .foreign.backend import ForeignBackend
    from .foreign.bulk import ForeignBulkBackend
    from .unit.verify import verify
    probes = not args.no_probes
    backend = ForeignBulkBackend(pm, probes=probes) if args.bulk else ForeignBackend(
        pm, sim=args.sim, waves=args.waves, probes=probes)
    # A line to paste into a shell: paths with spaces or quotes are quoted.
    command = (f"mxsim verify --rtl {shlex.quote(args.rtl)} --unit {shlex.quote(unit_name)} "
               f"--a-format {spec.a_format} --b-format {spec.b_format} --sim {args.sim}"
               + "".join(f" --set {shlex.quote(x)}" for x in args.set_fields)
               + (f" --conformance {args.conformance}" if args.conformance else ""))
    rep = verify(spec, MicroArch(lanes=spec.k, stages=1), unit_name=unit_name, sim=args.sim,
                 dots=args.vectors, seed=args.seed, chunk=args.chunk, out_dir=out,
                 replay=replay, progress=None if not args.json else False, backend=backend,
                 replay_command=command, conformance=args.conformance,
                 waivers=[*pm.waivers, *given], stop_at_first=args.stop_at_first)
    path = engine_path(spec)
    lines = [rep.format(), f"  design      {pm.path} (top {pm.design.top})",
             f"  numerics    {numerics_line(spec)}",
             f"  model       fast engine: {path['note']}"]
    if pm.domain is not None:
        lines.insert(2, f"  domain      {pm.domain.describe()} (stimulus and coverage inside it)")
    extra = {}
    if args.outside_domain:
        from .foreign.outside import check_outside
        outside = check_outside(pm, backend, spec, args.outside_domain, args.seed, out)
        lines.insert(3, f"  outside     {outside.line()}")
        extra["outside_domain"] = outside.to_dict()
    emit(args, "\n".join(lines),
         {**rep.to_dict(), "engine_path": path, "map": str(pm.path),
          "numerics": numerics_line(spec), **extra})
    return 0 if rep.passed else 1


def _verify_campaign(args: argparse.Namespace) -> int:
    """``verify --campaign``: every pair's run as tasks of mxsim.campaign
    (testbenches.campaigns.pairs)."""
    given = [f"--{n.replace('_', '-')}" for n in ("unit", "a_format", "b_format", "rtl", "replay",
                                                  "conformance")
             if getattr(args, n) is not None] + [f"--{n.replace('_', '-')}" for n in (
                 "waves", "waive", "stop_at_first", "no_probes") if getattr(args, n)]
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
    from .campaigns import pairs as campaign
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


def _add_verify(sub: Any) -> argparse.ArgumentParser:
    ve = add_verb(sub, "verify", cmd_verify, "simulate a unit's RTL and check it against the "
                                              "model bit and cycle exactly, with coverage")
    add_rtl_unit_args(ve, "blackwell-mxf8f6f4", ", MXFP8", stages=2, rtl_map=True)
    ve.add_argument("--sim", choices=("verilator", "icarus"), default="verilator",
                    help="simulator (default: %(default)s)")
    ve.add_argument("--vectors", type=int, default=20000,
                    help="dot products to check (default: %(default)s)")
    ve.add_argument("--seed", type=int_range(0), default=0,
                    help="stimulus seed (default: 0)")
    ve.add_argument("--chunk", type=int_range(1, 1_000_000), default=4000,
                    help="dot products per simulator run, at most 1,000,000 (default: "
                         "%(default)s)")
    ve.add_argument("--bulk", action="store_true",
                    help="the C++ harness instead of cocotb (millions of vectors)")
    ve.add_argument("--out", default="mxsim-verify", metavar="DIR",
                    help="builds, reports and failing sets (default: %(default)s)")
    ve.add_argument("--replay", default=None, metavar="FAILING.npz",
                    help="run exactly this vector set (a failing set a run wrote)")
    ve.add_argument("--waves", action="store_true", help="write a waveform (FST/VCD)")
    ve.add_argument("--waive", action="append", default=[], metavar="[NAME:]WHEN",
                    help="a known deviation, counted apart and never failing the run: the "
                         "mismatches the predicate WHEN matches, e.g. 'exact zero, C = -0: "
                         "want.zero and got.zero and c.neg_zero' (the language: 'Census and "
                         "waivers' in docs/foreign-rtl.md; a port map's [[waive]] tables add "
                         "theirs); repeat for more")
    ve.add_argument("--no-probes", action="store_true",
                    help="with --rtl: leave the map's [probes] unread (builds and runs as a map "
                         "without them; failing dots are then localised by what their results "
                         "are consistent with)")
    ve.add_argument("--stop-at-first", action="store_true",
                    help="stop after the first chunk with a mismatch (default: every chunk "
                         "of --vectors runs, and the report's census counts every mismatch "
                         "by class)")
    ve.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    dest="set_fields",
                    help="with --rtl: change one field of the unit spec for this run, as a "
                         "spec file spells it (--set acc_rounding=rd --set d_format=bf16); "
                         "repeat for more")
    ve.add_argument("--outside-domain", type=int_range(1, 10_000_000), default=None,
                    metavar="N", help="with --rtl and a map with a [domain]: after the "
                    "verdict, also run N dot products that break the domain and report how "
                    "they compare to the spec apart (never part of the verdict)")
    ve.add_argument("--conformance", choices=ENVELOPES, default=None,
                    help="also judge every result against what a spec allows beside the exact "
                         "check: ocp, the OCP MX v1.0 dot-product envelope (docs/foreign-rtl.md "
                         "section 7); the envelope then decides the values' verdict, so a "
                         "design more accurate than --unit reports CONFORMANT and exits 0 "
                         "(default: none, the exact check alone)")
    add_allow_large(ve)
    ve.add_argument("--campaign", nargs="?", const="all", default=None, metavar="PAIRS",
                    help="every supported format pair (or a list: e4m3xe5m2,int8xint8) "
                         "through the bulk harness as campaign tasks on a Dask cluster "
                         "(docs/verification.md); --vectors per pair")
    add_campaign_executor(ve)
    ve.add_argument("--build-cache", default=None, metavar="DIR",
                    help="with --campaign: the Verilator build cache, shared by the workers "
                         "(default: ~/.cache/mxsim/builds on each machine)")
    return ve


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
    if args.set_fields:
        raise MxsimError("--set changes the unit spec a design behind --rtl is held to; give "
                         "--rtl MAP.toml, or write a spec file for --unit")
    if args.outside_domain:
        raise MxsimError("--outside-domain checks inputs outside a port map's [domain]; give "
                         "--rtl MAP.toml")
    if args.no_probes:
        raise MxsimError("--no-probes leaves a port map's [probes] unread; give --rtl MAP.toml "
                         "(the RTL mxsim generates has none)")
    unit, spec, ua = rtl_unit(args)
    if args.vectors < 1:
        raise MxsimError(f"--vectors must be at least 1, not {args.vectors}")
    given = _given_waivers(args)
    replay = vectors.load(args.replay, allow_large=args.allow_large) if args.replay else None
    try:
        Path(args.out).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MxsimError(f"{args.out}: cannot create the output folder ({exc.strerror})") \
            from None
    if replay is not None:
        spec.check_vectors(replay)
    from .unit.verify import verify
    rep = verify(spec, ua, unit_name=unit.name, sim=args.sim, dots=args.vectors,
                 seed=args.seed, chunk=args.chunk, out_dir=args.out, bulk=args.bulk,
                 replay=replay, waves=args.waves, progress=None if not args.json else False,
                 conformance=args.conformance, waivers=given, stop_at_first=args.stop_at_first)
    # The expected values come from the fast engine: say which of its paths computed them.
    path = engine_path(spec)
    emit(args, rep.format() + f"\n  model       fast engine: {path['note']}",
         {**rep.to_dict(), "engine_path": path})
    return 0 if rep.passed else 1


def _add_demo(sub: Any) -> argparse.ArgumentParser:
    d = add_verb(sub, "demo", cmd_demo,
                 "the main job: generate vectors, run them, check and report", json_flag=False)
    d.add_argument("--out", default="out/demo", metavar="DIR",
                   help="directory for the files (default: %(default)s)")
    d.add_argument("-k", type=int_range(32, 8192), default=256,
                   help="reduction length, a multiple of 32 (default: %(default)s)")
    d.add_argument("--seed", type=int_range(0), default=0,
                   help="random seed (default: %(default)s)")
    return d


def cmd_demo(args: argparse.Namespace) -> int:
    """Generate an MXFP8 vector set of every family, run it through ``exact``, check, report."""
    from mxsim.compare import compare

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


#: The verbs this package registers (pyproject.toml's ``mxsim.verbs`` entry points): the rank
#: is the verb's place in ``mxsim --help``. verify needs Amaranth (the unit's RTL) and cocotb
#: (its default simulation) from the ``rtl`` extra; demo runs the model only.
VERIFY = Verb(name="verify", rank=40, add=_add_verify, extra="rtl",
              modules=("amaranth", "cocotb", "cocotb_tools"))
DEMO = Verb(name="demo", rank=150, add=_add_demo)
