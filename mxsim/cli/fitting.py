"""The ``probe`` and ``fit`` verbs: a unit's numerics from its outputs."""

from __future__ import annotations

import argparse

from .. import vectors
from ..errors import MxsimError
from ..output import check_output, write_text
from .common import emit

__all__ = ["cmd_probe", "cmd_fit"]


def cmd_probe(args: argparse.Namespace) -> int:
    from ..probe import probe_suite

    check_output(args.output)
    vs = probe_suite(args.kind, k=args.k, seed=args.seed)
    vectors.save(vs, args.output)
    emit(args, f"wrote {args.output}: probe suite {args.kind}, {vs.num_dots} dot products "
               f"(families {', '.join(vs.extra['families'])})",
         {"output": str(args.output), "dots": vs.num_dots, "families": vs.extra["families"]})
    return 0


def cmd_fit(args: argparse.Namespace) -> int:
    from ..fit import fit

    check_output(args.output)
    inputs = vectors.load(args.inputs, allow_large=args.allow_large)
    observed = vectors.load(args.observed, allow_large=args.allow_large)
    if not inputs.inputs_equal(observed):
        raise MxsimError(f"{args.observed} holds results of other inputs than {args.inputs}")
    result = fit(observed, k=args.k)
    text = result.report()
    if result.exact:
        write_text(args.output, result.spec.dumps("toml"))
        text += f"\nwrote {args.output}"
    else:
        text += "\nno spec in the search space reproduces every output; nothing written"
    emit(args, text, {"exact": result.exact, "equal": result.equal, "total": result.total,
                      "spec": result.spec.to_dict(), "evidence": result.evidence,
                      "unexplained": result.unexplained, "unseparated": result.unseparated})
    return 0 if result.exact else 1
