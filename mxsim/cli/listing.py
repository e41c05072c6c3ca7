"""The ``formats`` and ``units`` verbs: what mxsim knows."""

from __future__ import annotations

import argparse

from .. import formats
from ..errors import MxsimError
from .common import emit

__all__ = ["cmd_formats", "cmd_units"]


def cmd_formats(args: argparse.Namespace) -> int:
    rows = []
    for f in formats.FORMATS.values():
        row = {
            "name": f.name, "bits": f.bits, "kind": f.kind,
            "layout": (f"{int(f.signed)}.{f.exp_bits}.{f.man_bits}" if f.kind == "float"
                       else "int8/64"),
            "bias": f.bias, "max": f.max,
            "min_subnormal": f.min_subnormal,
            "inf": f"{f.code_of_inf:#x}" if f.has_inf else None,
            "nan": f"{f.code_of_nan:#x}" if f.has_nan else None,
            "ml_dtypes": f.ml_dtypes_name, "description": f.description,
        }
        rows.append(row)
    head = f"{'name':6} {'bits':>4} {'layout':8} {'bias':>4} {'max':>12} {'min>0':>12} " \
           f"{'Inf':>10} {'NaN':>10}  description"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['name']:6} {r['bits']:>4} {r['layout']:8} {r['bias']:>4} "
                     f"{r['max']:>12.6g} {r['min_subnormal']:>12.6g} {r['inf'] or '-':>10} "
                     f"{r['nan'] or '-':>10}  {r['description']}")
    emit(args, "\n".join(lines), rows)
    return 0


def _preset_spec(args: argparse.Namespace):
    """The spec of preset ``args.spec`` for the formats the options name (defaults: the
    preset's first operand pair and first scale pattern)."""
    from .. import presets

    p = presets.get(args.spec)
    a = args.a_format or p.pairs[0][0]
    b = args.b_format or (a if args.a_format else p.pairs[0][1])
    if args.scale_format is None and args.block is None:
        scale, block = p.scales[0]
    else:
        scale = None if args.scale_format in (None, "none") else args.scale_format
        blocks = [blk for s, blk in p.scales if s == scale]
        block = args.block if args.block is not None else (blocks[0] if blocks else None)
    return p.spec(a, b, scale_format=scale, block=block, c_format=args.c_format or
                  p.c_formats[0])


def cmd_units(args: argparse.Namespace) -> int:
    from .. import presets

    if args.spec is not None:
        spec = _preset_spec(args)
        scales = (f", {spec.scale_format} scales in blocks of {spec.block}"
                  if spec.scale_format else ", no block scales")
        head = (f"# {args.spec} for {spec.a_format} x {spec.b_format}{scales}, C and D "
                f"{spec.d_format}.\n# Written by `mxsim units --spec`: edit it and run it with\n"
                f"# `mxsim run --unit FILE.toml IN.npz -o OUT.npz` (docs/units.md lists the "
                f"keys).\n")
        emit(args, head + spec.dumps("toml").rstrip("\n"), spec.to_dict())
        return 0
    for name in ("b_format", "scale_format", "block", "c_format"):
        if getattr(args, name) is not None:
            raise MxsimError(f"--{name.replace('_', '-')} goes with --spec NAME")
    chosen = list(presets.PRESETS.values())
    if args.a_format is not None:
        a = formats.get(args.a_format).name
        chosen = [p for p in chosen if any(pa == a for pa, _ in p.pairs)]
        if not chosen:
            raise MxsimError(f"No unit takes {a} for A; `mxsim units` lists them all")
    rows = []
    for p in chosen:
        rows.append({"name": p.name, "summary": p.summary, "provenance": p.provenance,
                     "verified": p.verified, "pairs": [f"{a}x{b}" for a, b in p.pairs],
                     "scales": [f"{s}/{b}" if s else "none" for s, b in p.scales],
                     "c_d_formats": list(p.c_formats)})
    if args.brief:
        width = max(len(r["name"]) for r in rows)
        emit(args, "\n".join(f"{r['name']:{width}}  {r['summary']}" for r in rows), rows)
        return 0
    lines = []
    for r in rows:
        pairs = r["pairs"] if len(r["pairs"]) <= 6 else r["pairs"][:5] + [
            f"... ({len(r['pairs'])} pairs)"]
        lines += [r["name"], f"  {r['summary']}",
                  f"  operands:   {', '.join(pairs)}",
                  f"  scales:     {', '.join(r['scales'])}; C/D: {', '.join(r['c_d_formats'])}",
                  f"  provenance: {r['provenance']}", f"  verified:   {r['verified']}"]
    emit(args, "\n".join(lines), rows)
    return 0
