"""The ``probe`` and ``fit`` verbs: a unit's numerics from its outputs."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import vectors
from ..errors import MxsimError
from ..output import check_output, write_text
from .common import emit, out_dir

__all__ = ["cmd_probe", "cmd_fit"]


def cmd_probe(args: argparse.Namespace) -> int:
    from ..probe import probe_suite

    check_output(args.output)
    vs = probe_suite(args.kind, k=args.k, seed=args.seed, block=args.block,
                     scale_format=args.scale_format)
    vectors.save(vs, args.output)
    emit(args, f"wrote {args.output}: probe suite {args.kind}, {vs.num_dots} dot products "
               f"(families {', '.join(vs.extra['families'])})",
         {"output": str(args.output), "dots": vs.num_dots, "families": vs.extra["families"]})
    return 0


def _fit_rtl(args: argparse.Namespace):
    """The probe suite through the design behind ``--rtl`` and the fit of its outputs (the
    observed set is written to ``--out``)."""
    from testbenches.characterise import characterise

    from .rtl import foreign_map, map_formats

    if args.inputs is not None:
        raise MxsimError("fit --rtl runs its own probe suite through the design: give no "
                         "IN.npz / GPU_OUT.npz with it")
    pm = foreign_map(args.rtl, Path(args.out) / "ports")     # written only for a bad design
    if args.k is not None and args.k != pm.k:
        raise MxsimError(f"-k {args.k} differs from the port map's k = {pm.k}; leave -k out")
    a, b = map_formats(pm, args.a_format, args.b_format)
    work = out_dir(args.out)
    observed, result = characterise(pm, a, b, work, seed=args.seed, bulk=not args.cocotb)
    vectors.save(observed, work / "observed.npz")
    return result, f"{pm.path}: {observed.num_dots} probe dot products through the design " \
                   f"(observed outputs in {work / 'observed.npz'})\n"


def cmd_fit(args: argparse.Namespace) -> int:
    from ..fit import fit

    check_output(args.output)
    if args.rtl is not None:
        result, head = _fit_rtl(args)
    else:
        if args.inputs is None or args.observed is None:
            raise MxsimError("fit needs IN.npz and GPU_OUT.npz (the vectors and their "
                             "results), or --rtl MAP.toml to probe your RTL")
        inputs = vectors.load(args.inputs, allow_large=args.allow_large)
        observed = vectors.load(args.observed, allow_large=args.allow_large)
        if not inputs.inputs_equal(observed):
            raise MxsimError(f"{args.observed} holds results of other inputs than "
                             f"{args.inputs}")
        result, head = fit(observed, k=args.k or 32), ""
    text = head + result.report()
    if result.exact:
        write_text(args.output, result.spec.dumps("toml"))
        text += f"\nwrote {args.output}"
    else:
        text += "\nno spec in the search space reproduces every output; nothing written"
    emit(args, text, {"exact": result.exact, "equal": result.equal, "total": result.total,
                      "spec": result.spec.to_dict(), "evidence": result.evidence,
                      "unexplained": result.unexplained, "unseparated": result.unseparated})
    return 0 if result.exact else 1
