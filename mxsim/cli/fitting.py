"""The ``probe`` and ``fit`` verbs: a unit's numerics from its outputs."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from .. import vectors
from ..errors import MxsimError
from ..output import check_output, write_text
from .common import emit, map_formats, out_dir, refuse_unread, spec_settings
from .verbs import rtl_hooks

__all__ = ["cmd_probe", "cmd_fit"]


def _probe_blackwell(args: argparse.Namespace) -> int:
    """One probe set per Blackwell instruction, written to the folder ``-o``."""
    from ..probe.blackwell import blackwell_suites

    if args.block is not None or args.scale_format is not None or args.k != 32:
        raise MxsimError("probe --kind blackwell fixes k, block and scales per instruction; "
                         "choose instructions with --instruction")
    suites = blackwell_suites(args.instruction, seed=args.seed)
    folder = out_dir(args.output)
    rows = []
    for name, vs in suites.items():
        vectors.save(vs, folder / f"{name}.npz")
        rows.append({"instruction": name, "file": str(folder / f"{name}.npz"),
                     "dots": vs.num_dots, "gpu_path": vs.extra["gpu_path"],
                     "hypotheses": len(vs.extra["hypotheses"])})
    emit(args, "\n".join(f"wrote {r['file']}: {r['dots']} dot products, {r['hypotheses']} "
                         f"hypotheses; run it with `mxsim gpu run {r['file']}` on "
                         f"{suites[r['instruction']].extra['arch']}" for r in rows), rows)
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    from ..probe import probe_suite

    if args.kind == "blackwell":
        return _probe_blackwell(args)
    if args.kind == "plan":
        return _probe_plan(args)
    if args.format is not None:
        raise MxsimError("--format is for --kind plan")
    if args.instruction:
        raise MxsimError("--instruction is for --kind blackwell")
    check_output(args.output)
    vs = probe_suite(args.kind, k=args.k, seed=args.seed, block=args.block,
                     scale_format=args.scale_format)
    vectors.save(vs, args.output)
    emit(args, f"wrote {args.output}: probe suite {args.kind}, {vs.num_dots} dot products "
               f"(families {', '.join(vs.extra['families'])})",
         {"output": str(args.output), "dots": vs.num_dots, "families": vs.extra["families"]})
    return 0


def _probe_plan(args: argparse.Namespace) -> int:
    """The order probe of a library GEMM (mxsim.probe.planfit.order_probe)."""
    from ..probe.planfit import order_probe

    if args.format is None:
        raise MxsimError("probe --kind plan needs --format (the operands' format, e.g. bf16)")
    if args.block is not None or args.scale_format is not None or args.instruction:
        raise MxsimError("probe --kind plan takes --format, -k and --seed only")
    check_output(args.output)
    vs = order_probe(args.format, k=args.k, seed=args.seed)
    vectors.save(vs, args.output)
    emit(args, f"wrote {args.output}: plan order probe, {vs.m} x {vs.n} outputs of K = {vs.k} "
               f"({args.format}); run it with `mxsim gpu run {args.output} --path P`, then "
               f"`mxsim fit --plan RESULT.npz -o plan.toml`",
         {"output": str(args.output), "m": vs.m, "n": vs.n, "k": vs.k})
    return 0


def _fit_plan(args: argparse.Namespace) -> int:
    """``fit --plan RESULT.npz``: the GEMM plan behind a library call's outputs."""
    from ..probe.planfit import fit_plan

    if args.rtl is not None or args.campaign is not None or args.observed is not None:
        raise MxsimError("fit --plan takes one result file (inputs and the library's outputs "
                         "together, as `mxsim gpu run` writes it)")
    if args.inputs is None:
        raise MxsimError("fit --plan needs RESULT.npz, the file `mxsim gpu run` wrote")
    check_output(args.output)
    observed = vectors.load(args.inputs, allow_large=args.allow_large)
    result = fit_plan(observed, units=args.plan_unit, max_split=args.max_split,
                      exhaustive=args.exhaustive)
    text = result.report()
    if result.exact:
        plan = result.plan.replace(
            name=Path(args.inputs).name.removesuffix(".npz").removesuffix(".out"),
            provenance=f"fitted by `mxsim fit --plan` to {Path(args.inputs).name} alone "
                       f"({_device(observed)})",
            verified=f"{result.equal:,} of {result.total:,} outputs of "
                     f"{Path(args.inputs).name} ({observed.m}x{observed.n}x{observed.k})")
        write_text(args.output, plan.dumps("toml"))
        text += f"\nwrote {args.output}"
    else:
        text += "\nnothing written"
    emit(args, text, result.to_dict())
    return 0 if result.exact else 1


def _device(vs) -> str:
    dev = vs.extra.get("device")
    if not isinstance(dev, dict):
        return "no device recorded"
    return ", ".join(str(dev[k]) for k in ("gpu", "torch", "cublas") if k in dev)


def _fit_rtl(args: argparse.Namespace):
    """The probe suite through the design behind ``--rtl``, in the mode ``--set`` gives, and
    the fit of its outputs: ``(fit, report head, files)``. The probes and the observed set
    are written to ``--out`` (``probes.npz``, ``observed.npz``) before the fit starts."""
    if args.inputs is not None:
        raise MxsimError("fit --rtl runs its own probe suite through the design: give no "
                         "IN.npz / GPU_OUT.npz with it")
    # The testbenches own the port maps and the simulations: named by the mxsim.hooks entry
    # points, never imported by the core.
    foreign_map, characterise = rtl_hooks("fit --rtl", "foreign_map", "characterise")
    fields = spec_settings(args.set_fields)                  # a bad --set before anything runs
    pm = foreign_map(args.rtl, Path(args.out) / "ports")     # written only for a bad design
    a, b = map_formats(pm, args.a_format, args.b_format)
    k = pm.k_by_format.get(a, pm.k) if pm.k_by_format else pm.k
    if args.k is not None and args.k != k:
        per = f" for {a}" if pm.k_by_format else ""
        raise MxsimError(f"-k {args.k} differs from the port map's k = {k}{per}; leave -k out")
    work = out_dir(args.out)
    files = {"probes": str(work / "probes.npz"), "observed": str(work / "observed.npz")}
    observed, result = characterise(pm, a, b, work, seed=args.seed, bulk=not args.cocotb,
                                    keep=files["observed"], keep_inputs=files["probes"],
                                    fields=fields, other_modes=not args.one_mode)
    head = f"{pm.path}: {observed.num_dots} probe dot products through the design"
    mode = observed.extra.get("mode") or {}
    if mode:
        head += " in mode " + ", ".join(f"{n} = {v}" for n, v in mode.items())
    moved, _ = observed.extra.get("domain_redrawn") or (0, 0)
    if moved:
        head += f" ({moved} redrawn inside the map's [domain])"
    files["refit"] = f"mxsim fit {shlex.quote(files['probes'])} " \
                     f"{shlex.quote(files['observed'])} -o FITTED.toml"
    return result, (f"{head}\n(probes in {files['probes']}, the design's outputs in "
                    f"{files['observed']}; `{files['refit']}` fits them again)\n"), files


def _fit_campaign(args: argparse.Namespace) -> int:
    """``fit --campaign OBS.npz ...``: each observed set fitted as a task of mxsim.campaign;
    every exact fit written to ``-o``'s folder as ``<file stem>.toml``."""
    from .. import campaign
    from ..probe.sweep import fit_tasks, spec_of

    if args.inputs is not None or args.rtl is not None:
        raise MxsimError("fit --campaign takes the observed sets after --campaign; give no "
                         "IN.npz, GPU_OUT.npz or --rtl with it")
    stems = [Path(p).stem for p in args.campaign]
    if len(set(stems)) != len(stems):
        twice = sorted({s for s in stems if stems.count(s) > 1})
        raise MxsimError(f"two observed sets are named {twice[0]!r}; each fitted spec is "
                         f"written as <name>.toml, so give files with different names")
    tasks = fit_tasks(args.campaign, k=args.k, allow_large=args.allow_large)
    folder = out_dir(args.output)
    store = folder / "store" if args.store is None else args.store
    rep = campaign.run(tasks, store, workers=args.workers,
                       scheduler=args.scheduler, cluster_spec=args.cluster_spec,
                       progress=False if args.json else None)
    lines, rows = [], []
    for task in tasks:
        r = rep.results.get(task.key)
        if r is None:
            continue
        written = folder / f"{task.label}.toml" if r["exact"] else None
        if written is not None:
            write_text(written, spec_of(r).dumps("toml"))
        lines.append(f"{task.label}: {r['equal']}/{r['total']} outputs reproduced"
                     + (f", wrote {written}" if written else ", no spec explains them all"))
        rows.append({k: v for k, v in r.items() if k != "report"} | {"written": str(written)
                                                                       if written else None})
    lines += [f"failed {f.label}: {f.error}\n  replay: {f.replay}" for f in rep.failed]
    emit(args, "\n".join(lines + ["", rep.markdown()]), {"fits": rows,
                                                          "campaign": rep.to_dict()})
    return 0 if not rep.failed and all(r["exact"] for r in rows) else 1


def cmd_fit(args: argparse.Namespace) -> int:
    from ..probe.fit import default_k, fit

    if (args.set_fields or args.one_mode) and args.rtl is None:
        raise MxsimError(f"{'--set' if args.set_fields else '--one-mode'} picks the mode a "
                         f"design behind --rtl runs in; give --rtl MAP.toml")
    if args.plan:
        return _fit_plan(args)
    refuse_unread(("--plan-unit", args.plan_unit, False, "is for --plan"),
                  ("--exhaustive", args.exhaustive, False, "is for --plan"))
    if args.campaign is not None:
        return _fit_campaign(args)
    check_output(args.output)
    files: dict[str, str] = {}
    if args.rtl is not None:
        result, head, files = _fit_rtl(args)
    else:
        if args.inputs is None:
            raise MxsimError("fit needs IN.npz and GPU_OUT.npz (the vectors and their "
                             "results), GPU_OUT.npz alone, or --rtl MAP.toml to probe your "
                             "RTL")
        inputs = vectors.load(args.inputs, allow_large=args.allow_large)
        observed = inputs if args.observed is None else \
            vectors.load(args.observed, allow_large=args.allow_large)
        if not inputs.inputs_equal(observed):
            raise MxsimError(f"{args.observed} holds results of other inputs than "
                             f"{args.inputs}")
        result, head = fit(observed, k=args.k or default_k(observed)), ""
    text = head + result.report()
    if result.exact:
        write_text(args.output, result.spec.dumps("toml"))
        text += f"\nwrote {args.output}"
    else:
        text += "\nno spec in the search space reproduces every output; nothing written"
    emit(args, text, {"exact": result.exact, "equal": result.equal, "total": result.total,
                      "spec": result.spec.to_dict(), "evidence": result.evidence,
                      "unexplained": result.unexplained, "unseparated": result.unseparated,
                      "hypotheses": result.hypotheses, "picked": result.picked,
                      "notes": result.notes, **files})
    return 0 if result.exact else 1
