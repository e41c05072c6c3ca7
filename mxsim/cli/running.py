"""The ``vectors``, ``run`` and ``compare`` verbs: vector sets through units."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from .. import units, vectors
from ..errors import MxsimError, printable
from ..output import check_output
from .common import emit, refuse_unread

__all__ = ["cmd_vectors_gen", "cmd_vectors_info", "cmd_vectors_import", "cmd_run",
           "cmd_compare"]


def _describe(vs: vectors.VectorSet) -> dict[str, Any]:
    """What ``vectors info`` shows: the shape and formats, then the provenance as it is (free
    JSON data), except that a list of family names is shown once each, sorted. A provenance
    entry named as one of the first (``m``, ``dots``) is shown as ``meta.NAME``: the file
    cannot restate the set's shape."""
    info: dict[str, Any] = {
        "a_format": vs.a_format, "b_format": vs.b_format, "batch": list(vs.batch_shape),
        "m": vs.m, "n": vs.n, "k": vs.k, "dots": vs.num_dots, "scale_format": vs.scale_format,
        "block": vs.block, "c": vs.c is not None, "d": vs.d is not None,
        "d_format": vs.d_format, "producer": vs.producer}
    extra = dict(vs.extra)
    families = extra.pop("families", None)
    if isinstance(families, list) and all(isinstance(f, str) for f in families):
        families = sorted(set(families))
    if "families" in vs.extra:
        extra["families"] = families
    info.update({f"meta.{k}" if k in info else k: v for k, v in extra.items()})
    return info


def cmd_vectors_gen(args: argparse.Namespace) -> int:
    refuse_unread(
        ("--scale-granularity", args.scale_granularity, args.scale_format == "fp32",
         "does not apply without --scale-format fp32: it picks the shape of FP32 scales"),
        ("--c-format", args.c_format, not args.no_c,
         "does not apply with --no-c: it is the format of C"))
    fams = list(vectors.FAMILIES) if args.family == "all" else args.family.split(",")
    kwargs = dict(a_format=args.a_format, b_format=args.b_format, m=args.m, n=args.n, k=args.k,
                  scale_format=args.scale_format, block=args.block,
                  scale_granularity=args.scale_granularity or "block", with_c=not args.no_c,
                  c_format=args.c_format or "fp32", tensor_scale=args.tensor_scale,
                  seed=args.seed)
    check_output(args.output)
    if len(fams) == 1:
        vs = vectors.generate(fams[0], batch=(args.count,) if args.count > 1 else (),
                              allow_large=args.allow_large, **kwargs)
    else:
        # 'all' leaves out what cannot apply; a family the user named must apply.
        vs = vectors.generate_suite(fams, count=args.count, allow_large=args.allow_large,
                                    skip_inapplicable=args.family == "all", **kwargs)
    vectors.save(vs, args.output)
    info = _describe(vs)
    emit(args, f"wrote {args.output}: {info['dots']} dot products of K={vs.k} "
               f"({vs.a_format} x {vs.b_format}"
               f"{', ' + vs.scale_format + ' scales' if vs.scale_format else ''})", info)
    return 0


def cmd_vectors_import(args: argparse.Namespace) -> int:
    from ..vectors import importers

    check_output(args.output)
    vs = importers.read(args.layout, args.folder, d_format=args.d_format, gpu=args.gpu,
                        repository=args.repository, commit=args.commit)
    vectors.save(vs, args.output)
    info = _describe(vs)
    emit(args, f"wrote {args.output}: {vs.num_dots} dot products of K={vs.k} "
               f"({vs.a_format} x {vs.b_format}, {vs.extra['gpu']}, d {vs.d_format}; "
               f"{vs.extra['converted_inexact']} elements converted inexactly)", info)
    return 0


def cmd_vectors_info(args: argparse.Namespace) -> int:
    vs = vectors.load(args.input, allow_large=args.allow_large)
    info = _describe(vs)
    # A value (or a name) from the file may hold a line break: escaped here, where it is one.
    emit(args, "\n".join(f"{printable(k):13} {printable(str(v))}" for k, v in info.items()),
         info)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    check_output(args.output)
    unit = units.get(args.unit)
    vs = vectors.load(args.input, allow_large=args.allow_large)
    t0 = time.perf_counter()
    out = unit.run(vs, engine=args.engine, progress=False if args.json else None)
    dt = time.perf_counter() - t0
    vectors.save(out, args.output)
    path = units.path(unit, vs, args.engine)
    info = {"unit": unit.name, "engine": args.engine, "engine_path": path,
            "dots": vs.num_dots, "seconds": dt,
            "dots_per_second": vs.num_dots / dt if dt else None, "output": str(args.output)}
    emit(args, f"wrote {args.output}: {vs.num_dots} dot products through {unit.name} "
               f"({args.engine} engine: {path['note']}) in {dt:.3f} s", info)
    return 0


def _plan_for(name: str | None, vs: vectors.VectorSet):
    """(plan, note) when ``name`` is a GPU library path of the plan table, a plan file, or
    (None) the path ``vs`` records; (None, None) for a unit name or spec file."""
    from .. import plans
    from ..plans import table

    if name is None:
        path = vs.extra.get("path")
        if not isinstance(path, str):
            raise MxsimError("compare needs either OTHER.npz or --unit NAME; this result "
                             "records no GPU path to model (mxsim gpu run writes one)")
        name = path
        if name not in table.paths():
            raise MxsimError(f"the result records GPU path {name!r}, which no plan models; "
                             f"{table.covered()}; give --unit NAME for an instruction path")
    if name in table.paths():
        found = table.lookup(name, vs.m, vs.n, vs.k)
        return found.plan, found.note
    if str(name).endswith((".toml", ".json")) and Path(name).is_file():
        import json
        import tomllib
        try:
            text = Path(name).read_text(encoding="utf-8")
            data = tomllib.loads(text) if name.endswith(".toml") else json.loads(text)
        except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError, OSError):
            data = None                       # the unit loader says what is wrong with it
        if isinstance(data, dict) and "unit" in data:
            plan = plans.load(name)
            return plan, f"plan file {name}"
    return None, None


def cmd_compare(args: argparse.Namespace) -> int:
    from ..compare import compare

    refuse_unread(("--engine", args.engine, args.unit is not None or args.other is None,
                   "does not apply with OTHER.npz: it picks the engine that computes a unit's or "
                   "a plan's output (OTHER.npz holds its results)"))
    if args.plot is not None:
        check_output(args.plot)
    result = vectors.load(args.result, allow_large=args.allow_large)
    if args.other is not None and args.unit is not None:
        raise MxsimError("compare needs either OTHER.npz or --unit NAME (not both)")
    note = None
    if args.other is None:
        plan, note = _plan_for(args.unit, result)
        if plan is not None:
            from ..plans.run import run as run_plan
            d = run_plan(plan, result, engine=args.engine or "fast")
            report = compare(result, d, expected_format=plan.out_format,
                             actual_name=str(args.result),
                             expected_name=f"plan {plan.name} ({plan.describe()})",
                             show=args.show)
            text = report.format() + f"\n  plan       {note}"
            if args.plot is not None:
                from ..plot import error_distribution
                error_distribution(result, args.plot)
                text += f"\n  plot       {args.plot}"
            emit(args, text, report.to_json() | {"plan": plan.to_dict(), "plan_note": note})
            return 0 if report.agree else 1
    if args.other is not None:
        other = vectors.load(args.other, allow_large=args.allow_large)
        if not result.inputs_equal(other):
            raise MxsimError(f"{args.result} and {args.other} hold different inputs; compare "
                             f"results of the same vector set")
        if other.d is None:
            raise MxsimError(f"{args.other} has no result 'd'; produce one with `mxsim run`")
        expected, expected_format, name = other.d, other.d_format, str(args.other)
    else:
        unit = units.get(args.unit)
        expected = unit.compute(result, engine=args.engine or "fast")
        expected_format, name = unit.d_format(result), f"unit {unit.name}"
    report = compare(result, expected, expected_format=expected_format,
                     actual_name=str(args.result), expected_name=name, show=args.show)
    text = report.format()
    if args.plot is not None:
        from ..plot import error_distribution
        error_distribution(result, args.plot)
        text += f"\n  plot       {args.plot}"
    emit(args, text, report.to_json())
    return 0 if report.agree else 1
