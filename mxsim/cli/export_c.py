"""The ``export-c`` verb: a unit as a C99 library and a SystemVerilog DPI-C package
(docs/dpi.md)."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from .. import units
from ..errors import MxsimError
from .common import int_range, parse_scale

__all__ = ["add_parser", "main"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """``mxsim export-c``: its options, on the verbs' subparsers."""
    desc = ("write a unit's arithmetic as a dependency-free C99 library (mxsim_dot.[ch], the "
            "engine every unit shares, and PREFIX.[ch], the spec as data with one function per "
            "instruction, a whole dot, a batch and an instruction with its intermediates) and "
            "a SystemVerilog package of DPI-C imports with a scoreboard class (PREFIX_pkg.sv, "
            "PREFIX_dpi.c)")
    sp = sub.add_parser("export-c", help="a unit as a C library and an SV DPI-C package",
                        description=desc)
    sp.set_defaults(func=main)
    sp.add_argument("--unit", required=True, metavar="NAME|SPEC",
                    help="a preset (`mxsim units`) or a spec file (.toml/.json)")
    sp.add_argument("-o", "--output", required=True, metavar="DIR",
                    help="the folder to write (created if need be)")
    sp.add_argument("--a-format", default=None,
                    help="A's element format (default: e4m3 where the preset takes it, else "
                         "its first pair; a spec file's own)")
    sp.add_argument("--b-format", default=None, help="B's element format (default: A's)")
    sp.add_argument("--scale", default=None, metavar="FMT/BLOCK|none",
                    help="one of the preset's scale configurations, e.g. ue4m3/16 (default: "
                         "its first)")
    sp.add_argument("--c-format", default=None, metavar="FMT",
                    help="C and D's format, where the preset takes several (fp32, fp16)")
    sp.add_argument("--granularity", default=None, choices=("row", "tensor"),
                    help="FP32 scales' granularity, for a preset whose epilogue depends on it")
    sp.add_argument("--prefix", default=None,
                    help="the C identifier that names the unit's files and functions "
                         "(default: from the unit and its formats)")
    sp.add_argument("--k", type=int_range(1), default=None, metavar="N",
                    help="the exact unit's instruction K in the API and the DPI package (its "
                         "own K is free; default: 32, or its block if larger)")
    sp.add_argument("--check", type=int_range(0), default=0, metavar="DOTS",
                    help="compile the export with -std=c99 -Wall -Wextra -Werror -pedantic "
                         "(gcc, and clang where present: on PATH or the ziglang wheel's) and "
                         "hold each build equal to the fast engine "
                         "on DOTS dots of every generator family; exit 1 on a mismatch")
    sp.add_argument("--seed", type=int_range(0), default=0, help="--check's seed (default 0)")
    sp.add_argument("--json", action="store_true", help="print JSON instead of text")
    return sp


def resolve(args: argparse.Namespace):
    """(unit, spec) that the options name; MxsimError (one line) for one the unit lacks."""
    found = units.get(args.unit)
    spec = found.spec_for_formats(args.a_format, args.b_format)
    scale = parse_scale(args.scale)
    if scale is None and args.c_format is None and args.granularity is None:
        return found, spec
    preset = found.preset              # a spec file's preset refuses what its spec is not
    fmt, block = scale if scale is not None else (spec.scale_format, spec.block)
    return found, preset.spec(spec.a_format, spec.b_format, scale_format=fmt, block=block,
                              c_format=args.c_format or spec.d_format,
                              granularity=args.granularity)


def _checked(spec, prefix: str, folder: Path, dots: int, seed: int) -> list[dict]:
    """Compile with every compiler found and compare with the fast engine."""
    from ..export.build import Library, compile_library, compilers
    from ..export.check import check
    rows = []
    found = compilers()
    if not found:
        raise MxsimError("--check needs a C compiler (gcc or clang) on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        for n, (name, cmd) in enumerate(found.items()):
            lib = Library(compile_library(folder, Path(tmp) / f"cc{n}.so", cc=cmd), prefix,
                          spec)
            r = check(spec, lib, dots, seed)
            rows.append({"compiler": name, "dots": r.dots, "mismatches": r.mismatches,
                         "families": r.per_family, "first_mismatch": r.first})
    return rows


def main(args: argparse.Namespace) -> int:
    """Write the export; with --check, compile it and compare it with the engine."""
    from ..export import default_prefix, export
    found, spec = resolve(args)
    prefix = args.prefix or default_prefix(spec)
    source = (f"preset {found.name}" if found.name in units.names()
              else f"spec file {args.unit}")
    paths = export(spec, args.output, prefix, source=source, k_exact=args.k)
    checks = _checked(spec, prefix, Path(args.output), args.check, args.seed) \
        if args.check else []
    if args.json:
        print(json.dumps({"unit": found.name, "spec": spec.name, "digest": spec.digest(),
                          "prefix": prefix, "files": [str(p) for p in paths],
                          "checks": checks}, indent=2))
    else:
        print(f"{found.name} ({spec.a_format} x {spec.b_format}, digest {spec.digest()}) as "
              f"{prefix}: {len(paths)} files in {args.output}")
        for p in paths:
            print(f"  {p}")
        for c in checks:
            print(f"{c['compiler']}: compiled with -Werror; {c['dots']} dots over "
                  f"{len(c['families'])} families, {c['mismatches']} mismatches with the "
                  f"fast engine" + (f" (first: {c['first_mismatch']})" if c["mismatches"]
                                    else ""))
    return 1 if any(c["mismatches"] for c in checks) else 0
