"""The ``explain`` verb: a dot product's intermediates, and what an observed result that differs
from the model is consistent with."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_allow_large, add_verb, emit, int_range
from .verbs import Verb

__all__ = ["cmd_explain", "VERBS"]

#: Dots explained by default where the result differs from the unit's in more than this many.
DEFAULT_SHOWN = 3


def _observed(text: str | None, vs: Any, d_format: str) -> tuple[Any, str | None]:
    """The observed result codes (an array of the set's output shape, or None) and where they
    come from: ``--observed`` (a hex or decimal code, or a result file), else the set's own
    ``d``."""
    import numpy as np

    from .. import formats, vectors
    from ..errors import MxsimError

    if text is None:
        if vs.d is None:
            return None, None
        if vs.d_format != d_format:
            raise MxsimError(f"the file holds results in {vs.d_format}, the unit gives "
                             f"{d_format}: explain a result of the same format")
        return vs.d, f"the result the file holds ({vs.producer or 'no producer named'})"
    try:
        code = int(text, 0)
    except ValueError:
        other = vectors.load(text)
        if not vs.inputs_equal(other):
            raise MxsimError(f"{text} holds other inputs than the vector set; give the "
                             f"result of the same vector set") from None
        if other.d is None:
            raise MxsimError(f"{text} has no result 'd': give a result file (mxsim run, "
                             f"mxsim gpu run, mxsim rtl observe) or a code") from None
        if other.d_format != d_format:
            raise MxsimError(f"{text} holds results in {other.d_format}, the unit gives "
                             f"{d_format}: explain a result of the same format") from None
        return other.d, f"{text} ({other.producer or 'no producer named'})"
    bits = formats.get(d_format).bits
    if code < 0 or code >= 1 << bits:
        raise MxsimError(f"--observed {text}: {d_format} result codes are 0 to "
                         f"{(1 << bits) - 1:#x}")
    return np.full(vs.out_shape, code, formats.get(d_format).code_dtype), "--observed"


def cmd_explain(args: argparse.Namespace) -> int:
    import numpy as np

    from .. import formats, units, vectors
    from ..engine.explain import explain
    from ..errors import MxsimError

    unit = units.get(args.unit)
    vs = vectors.load(args.input, allow_large=args.allow_large)
    spec = unit.spec_for(vs)
    observed, source = _observed(args.observed, vs, spec.d_format)
    differ: list[int] = []
    if observed is not None:
        model = np.asarray(unit.compute(vs)).reshape(-1)
        differ = np.flatnonzero(model != np.asarray(observed).reshape(-1)).tolist()
    if args.dot:
        bad = [d for d in args.dot if d >= vs.num_dots]
        if bad:
            raise MxsimError(f"--dot {bad[0]}: {args.input} has {vs.num_dots} dot product"
                             f"{'s' if vs.num_dots != 1 else ''} (0 to {vs.num_dots - 1})")
        dots = args.dot
    else:
        dots = differ[:DEFAULT_SHOWN] or [0]
    flat = None if observed is None else np.asarray(observed).reshape(-1)
    exps = [explain(spec, vs, d, None if flat is None else int(flat[d])) for d in dots]
    head = []
    if observed is not None:
        head.append(f"observed: {source}; {len(differ):,} of {vs.num_dots:,} result"
                    f"{'s' if vs.num_dots != 1 else ''} differ from {unit.name}'s"
                    + (f" (showing {len(dots)})" if not args.dot and differ else ""))
    fmt = formats.get(spec.d_format).name
    text = "\n\n".join(head + [e.format() for e in exps])
    emit(args, text, {"unit": unit.name, "input": str(args.input), "d_format": fmt,
                      "observed_from": source, "differ": len(differ) if observed is not None
                      else None, "dots": [e.to_dict() for e in exps]})
    return 0


def _add(sub: Any) -> argparse.ArgumentParser:
    p = add_verb(sub, "explain", cmd_explain,
                 "a dot product's intermediates through a unit (products, scales, aligned "
                 "terms, steps, tree nodes, roundings), and what an observed result that "
                 "differs is consistent with")
    p.add_argument("input", metavar="IN.npz",
                   help="a vector set (a failing set of mxsim verify, or a result file: its "
                        "'d' is taken as the observed result)")
    p.add_argument("--unit", required=True, metavar="NAME|SPEC",
                   help="unit name (see `mxsim units`) or a spec file .toml/.json")
    p.add_argument("--dot", type=int_range(0), nargs="+", default=None, metavar="N",
                   help="dot products to explain, by flat index (batch, row, column) "
                        f"(default: the first {DEFAULT_SHOWN} whose observed result differs, "
                        "else dot 0)")
    p.add_argument("--observed", default=None, metavar="CODE|RESULT.npz",
                   help="the result observed elsewhere: one code (0x...) for every dot asked, "
                        "or a result file of the same inputs (default: IN.npz's own 'd', if "
                        "it holds one)")
    add_allow_large(p)
    return p


VERBS = (Verb(name="explain", rank=82, add=_add),)
