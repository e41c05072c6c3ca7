"""The ``mxsim`` command line: one sub-command per verb, each a thin call into the library.

Exit codes: 0 success or agreement, 1 mismatches found, 2 bad input (one line, no traceback),
3 internal error (a bug in mxsim: one line, the traceback only under ``--debug``), 130
interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from . import __version__, formats, units, vectors
from .errors import MxsimError
from .output import check_output, write_text

__all__ = ["main", "build_parser"]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``mxsim VERB: error: ...`` and where to find help."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _int_range(lo: int, hi: int | None = None):
    """An argparse type: an integer from ``lo`` (to ``hi``)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, not {text!r}") from None
        if value < lo or (hi is not None and value > hi):
            rule = f"at least {lo}" if hi is None else f"from {lo} to {hi}"
            raise argparse.ArgumentTypeError(f"must be {rule}, not {value}")
        return value
    parse.__name__ = "integer"
    return parse


def _add_allow_large(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--allow-large", action="store_true",
                    help=f"accept vector sets over {vectors.LARGE_BYTES >> 20} MiB of arrays or "
                         f"2^{vectors.LARGE_PRODUCTS.bit_length() - 1} products (dots x K) "
                         f"(default: refuse them, see docs/vectors.md)")


def _out_dir(path: str | os.PathLike) -> Path:
    """An output folder, created if need be, or a one-line MxsimError."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MxsimError(f"{path}: cannot create the output folder ({exc.strerror or exc})") \
            from None
    return p


def _out(args: argparse.Namespace, text: str, data: Any) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2, default=str))
    else:
        print(text)


# -- formats --------------------------------------------------------------------------------

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
    _out(args, "\n".join(lines), rows)
    return 0


# -- units ----------------------------------------------------------------------------------

def _preset_spec(args: argparse.Namespace):
    """The spec of preset ``args.spec`` for the formats the options name (defaults: the
    preset's first operand pair and first scale pattern)."""
    from . import presets

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
    from . import presets

    if args.spec is not None:
        spec = _preset_spec(args)
        scales = (f", {spec.scale_format} scales in blocks of {spec.block}"
                  if spec.scale_format else ", no block scales")
        head = (f"# {args.spec} for {spec.a_format} x {spec.b_format}{scales}, C and D "
                f"{spec.d_format}.\n# Written by `mxsim units --spec`: edit it and run it with\n"
                f"# `mxsim run --unit FILE.toml IN.npz -o OUT.npz` (docs/units.md lists the "
                f"keys).\n")
        _out(args, head + spec.dumps("toml").rstrip("\n"), spec.to_dict())
        return 0
    for name in ("a_format", "b_format", "scale_format", "block", "c_format"):
        if getattr(args, name) is not None:
            raise MxsimError(f"--{name.replace('_', '-')} goes with --spec NAME")
    rows = []
    for p in presets.PRESETS.values():
        rows.append({"name": p.name, "summary": p.summary, "provenance": p.provenance,
                     "verified": p.verified, "pairs": [f"{a}x{b}" for a, b in p.pairs],
                     "scales": [f"{s}/{b}" if s else "none" for s, b in p.scales],
                     "c_d_formats": list(p.c_formats)})
    lines = []
    for r in rows:
        pairs = r["pairs"] if len(r["pairs"]) <= 6 else r["pairs"][:5] + [
            f"... ({len(r['pairs'])} pairs)"]
        lines += [r["name"], f"  {r['summary']}",
                  f"  operands:   {', '.join(pairs)}",
                  f"  scales:     {', '.join(r['scales'])}; C/D: {', '.join(r['c_d_formats'])}",
                  f"  provenance: {r['provenance']}", f"  verified:   {r['verified']}"]
    _out(args, "\n".join(lines), rows)
    return 0


# -- vectors --------------------------------------------------------------------------------

def _describe(vs: vectors.VectorSet) -> dict[str, Any]:
    return {"a_format": vs.a_format, "b_format": vs.b_format, "batch": list(vs.batch_shape),
            "m": vs.m, "n": vs.n, "k": vs.k, "dots": vs.num_dots,
            "scale_format": vs.scale_format, "block": vs.block,
            "c": vs.c is not None, "d": vs.d is not None, "d_format": vs.d_format,
            "producer": vs.producer, **{k: v for k, v in vs.extra.items() if k != "families"},
            **({"families": sorted(set(vs.extra["families"]))} if "families" in vs.extra
               else {})}


def cmd_vectors_gen(args: argparse.Namespace) -> int:
    fams = list(vectors.FAMILIES) if args.family == "all" else args.family.split(",")
    kwargs = dict(a_format=args.a_format, b_format=args.b_format, m=args.m, n=args.n, k=args.k,
                  scale_format=args.scale_format, block=args.block,
                  scale_granularity=args.scale_granularity, with_c=not args.no_c,
                  c_format=args.c_format, tensor_scale=args.tensor_scale, seed=args.seed)
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
    _out(args, f"wrote {args.output}: {info['dots']} dot products of K={vs.k} "
               f"({vs.a_format} x {vs.b_format}"
               f"{', ' + vs.scale_format + ' scales' if vs.scale_format else ''})", info)
    return 0


def cmd_vectors_info(args: argparse.Namespace) -> int:
    vs = vectors.load(args.input, allow_large=args.allow_large)
    info = _describe(vs)
    _out(args, "\n".join(f"{k:13} {v}" for k, v in info.items()), info)
    return 0


# -- run ------------------------------------------------------------------------------------

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
    _out(args, f"wrote {args.output}: {vs.num_dots} dot products through {unit.name} "
               f"({args.engine} engine: {path['note']}) in {dt:.3f} s", info)
    return 0


# -- compare --------------------------------------------------------------------------------

def cmd_compare(args: argparse.Namespace) -> int:
    from .compare import compare

    if args.plot is not None:
        check_output(args.plot)
    result = vectors.load(args.result, allow_large=args.allow_large)
    if (args.other is None) == (args.unit is None):
        raise MxsimError("compare needs either OTHER.npz or --unit NAME (not both)")
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
        expected = unit.compute(result, engine=args.engine)
        expected_format, name = unit.d_format(result), f"unit {unit.name}"
    report = compare(result, expected, expected_format=expected_format,
                     actual_name=str(args.result), expected_name=name, show=args.show)
    text = report.format()
    if args.plot is not None:
        from .plot import error_distribution
        error_distribution(result, args.plot)
        text += f"\n  plot       {args.plot}"
    _out(args, text, report.to_json())
    return 0 if report.agree else 1


# -- quantize (command and parser together) -------------------------------------------------

_IDENTITY_MAX_K = 8192     # the identity operand is K x K codes


def _quantize_input(path: str, allow_large: bool) -> np.ndarray:
    """The array of an .npy file, or a one-line MxsimError; its header is read first, so a
    small file cannot declare a huge array and have it allocated."""
    p = Path(path)
    if not p.is_file():
        raise MxsimError(f"{path}: no such file")
    try:
        with open(p, "rb") as fh:
            head = vectors.npy_header(fh)
            if head is None:
                raise ValueError("no .npy magic string at the start")
            shape, dtype = head
            if dtype.hasobject:
                raise ValueError("Object arrays cannot be loaded when allow_pickle=False")
            nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if nbytes > vectors.LARGE_BYTES and not allow_large:
                raise MxsimError(f"{path}: the array holds {nbytes:,} bytes, above the limit "
                                 f"of {vectors.LARGE_BYTES:,} (see 'Size limits' in "
                                 f"docs/vectors.md); pass --allow-large if you mean it")
            fh.seek(0)
            return np.load(fh, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise MxsimError(f"{path}: not a readable .npy array ({exc}); save one with "
                         f"numpy.save") from None


def _identity_codes(fmt_name: str, k: int, batch: tuple[int, ...]) -> np.ndarray:
    """K x K element codes of the identity matrix (1.0 on the diagonal), per batch entry."""
    fmt = formats.get(fmt_name)
    eye = np.where(np.eye(k, dtype=bool), fmt.encode(1.0), fmt.encode(0.0)).astype(np.uint8)
    return np.ascontiguousarray(np.broadcast_to(eye, batch + (k, k)))


def _vector_set_block(block: int) -> None:
    if block not in (16, 32):
        raise MxsimError(f"A vector set holds blocks of 16 or 32, not {block}; use --compare "
                         f"or the Python API (mxsim.quantize) for other blocks")


def cmd_quantize(args: argparse.Namespace) -> int:
    from . import quantize as q

    if args.output is not None:
        check_output(args.output)
    x = _quantize_input(args.input, args.allow_large)
    # `is None`, not `or`: --block 0 and --elem '' are errors, not the defaults.
    block_arg = args.block
    if args.compare:
        if args.output is not None:
            raise MxsimError("quantize takes either -o OUT.npz or --compare, not both")
        if args.nvfp4:
            raise MxsimError("--compare compares the E8M0 scale rules; leave out --nvfp4")
        elem = "e4m3" if args.elem is None else args.elem
        block = 32 if block_arg is None else block_arg
        rows = q.compare_rules(x, elem, block, args.axis)
        head = (f"{'rule':10} {'blocks':>8} {'scale≠' + rows[0]['baseline']:>12} "
                f"{'max|err|':>11} {'mean|err|':>11} {'max rel':>10} {'mean rel':>10}")
        lines = [f"{args.input}: {np.asarray(x).size} values, {elem} elements, blocks of "
                 f"{block} along axis {args.axis}", head, "-" * len(head)]
        for r in rows:
            lines.append(f"{r['rule']:10} {r['blocks']:>8} {r['scale_differs']:>12} "
                         f"{r['max_abs_err']:>11.4g} {r['mean_abs_err']:>11.4g} "
                         f"{r['max_rel_err']:>10.4g} {r['mean_rel_err']:>10.4g}")
        _out(args, "\n".join(lines), rows)
        return 0
    if args.output is None:
        raise MxsimError("quantize needs -o OUT.npz (or --compare)")
    x = np.asarray(x)
    if x.ndim == 1:
        x = x[None, :] if args.operand == "a" else x[:, None]
    if x.ndim < 2:
        raise MxsimError(f"{args.input}: quantize needs a vector or a matrix, not a scalar")
    k = x.shape[-1] if args.operand == "a" else x.shape[-2]
    if k > _IDENTITY_MAX_K:
        raise MxsimError(f"K = {k} is above {_IDENTITY_MAX_K}, too large for the identity "
                         f"operand of the vector set; quantise a slice of the input")
    # The set holds the codes and a K x K identity per batch entry; `mxsim run` computes
    # x.size * K products.
    entries = int(np.prod(x.shape[:-2], dtype=object))
    vectors.check_size(x.size + entries * k * k, x.size * k, args.allow_large, str(args.input))
    axis = -1 if args.operand == "a" else -2
    nan_blocks = "quantize" if args.allow_nan_blocks else "error"
    extra: dict[str, Any] = {"quantize": {"input": str(args.input), "operand": args.operand,
                                          "rounding": args.rounding, "seed": args.seed}}
    tensor_scale = None
    if args.nvfp4:
        if args.elem not in (None, "e2m1"):
            raise MxsimError(f"--nvfp4 quantises to e2m1; leave out --elem {args.elem}")
        elem, scale_format, one = "e2m1", "ue4m3", 0x38
        block = 16 if block_arg is None else block_arg
        _vector_set_block(block)
        scales, codes, pts = q.to_nvfp4(x, args.per_tensor_scale, block, args.two_d,
                                        args.rounding, axis, args.seed, nan_blocks=nan_blocks)
        tensor_scale = np.array(pts, np.float32)
        extra["quantize"].update(recipe="nvfp4", two_d=args.two_d)
    else:
        if args.per_tensor_scale is not None or args.two_d:
            raise MxsimError("--per-tensor-scale and --two-d belong to --nvfp4")
        elem = "e4m3" if args.elem is None else args.elem
        block = 32 if block_arg is None else block_arg
        scale_format, one = "e8m0", 127
        _vector_set_block(block)
        scales, codes = q.to_mx(x, elem, block, args.scale_rule, args.rounding, axis,
                                args.seed, nan_blocks=nan_blocks)
        extra["quantize"].update(recipe="mx", scale_rule=args.scale_rule)
    batch = x.shape[:-2]
    eye = _identity_codes(elem, k, batch)
    eye_scales = np.full(batch + ((k, k // block) if args.operand == "b" else (k // block, k)),
                         one, np.uint8)
    if args.operand == "a":
        ops = dict(a=codes, a_scale=scales, b=eye, b_scale=eye_scales)
    else:
        ops = dict(a=eye, a_scale=eye_scales, b=codes, b_scale=scales)
    vs = vectors.VectorSet(a_format=elem, b_format=elem, scale_format=scale_format, block=block,
                           tensor_scale=tensor_scale, producer="mxsim quantize", extra=extra,
                           **ops)
    vectors.save(vs, args.output)
    info = {"output": str(args.output), "operand": args.operand, "format": elem,
            "scale_format": scale_format, "block": block, "shape": list(x.shape),
            **({"per_tensor_scale": float(tensor_scale)} if tensor_scale is not None else {})}
    _out(args, f"wrote {args.output}: {x.shape} quantised to {elem} with {scale_format} scales "
               f"(blocks of {block}) as operand {args.operand}; the other operand is the "
               f"identity, so `mxsim run` gives the dequantised tensor", info)
    return 0


def _quantize_parser(sub: Any) -> None:
    rules = ("floor", "ceil", "even", "rceil", "ocp", "rceil-sat")
    desc = ("quantise a float .npy array to MX (E8M0 scales) or NVFP4 and write a vector set "
            "whose other operand is the identity; or, with --compare, report how the scale "
            "rules differ on it")
    qp = sub.add_parser("quantize", help="quantise a float array to MX or NVFP4 codes",
                        description=desc)
    qp.set_defaults(func=cmd_quantize)
    qp.add_argument("input", metavar="IN.npy", help="float32, bfloat16, float16 or float64 array")
    qp.add_argument("--elem", default=None, metavar="FMT",
                    help="element format: e4m3 e5m2 e3m2 e2m3 e2m1 int8 (default: e4m3, or "
                         "e2m1 with --nvfp4)")
    qp.add_argument("--block", type=_int_range(1), default=None, metavar="N",
                    help="elements per scale (default: 32, or 16 with --nvfp4)")
    qp.add_argument("--scale-rule", default="floor", choices=rules,
                    help="E8M0 scale rule, see docs/quantize.md (default: %(default)s)")
    qp.add_argument("--rounding", default="rne", choices=("rne", "rz", "stochastic"),
                    help="element rounding (default: %(default)s)")
    qp.add_argument("--seed", type=_int_range(0), default=None, metavar="N",
                    help="seed of stochastic rounding's random bits (default: fresh)")
    qp.add_argument("--as", dest="operand", default="a", choices=("a", "b"),
                    help="write the array as A (blocks along its last axis) or B (blocks along "
                         "axis -2) (default: %(default)s)")
    qp.add_argument("--nvfp4", action="store_true",
                    help="NVFP4: e2m1 elements, ue4m3 scales of 16, FP32 per-tensor scale")
    qp.add_argument("--per-tensor-scale", type=float, default=None, metavar="X",
                    help="NVFP4 per-tensor scale (default: amax / (448 * 6))")
    qp.add_argument("--two-d", action="store_true", help="NVFP4 16x16 tile scales")
    qp.add_argument("--allow-nan-blocks", action="store_true",
                    help="quantise blocks of nothing but NaN as the rule's peer does "
                         "(default: refuse them)")
    qp.add_argument("--compare", action="store_true",
                    help="print, per scale rule, the blocks whose scale differs and the error "
                         "against the input, instead of writing a file")
    qp.add_argument("--axis", type=int, default=-1,
                    help="axis of the blocks for --compare (default: %(default)s)")
    qp.add_argument("-o", "--output", default=None, metavar="OUT.npz", help="file to write")
    _add_allow_large(qp)
    qp.add_argument("--json", action="store_true", help="print JSON instead of text")


# -- gpu ------------------------------------------------------------------------------------

def cmd_gpu_info(args: argparse.Namespace) -> int:
    """The local GPU and, for every path, whether it runs here and why not."""
    from gpu import device_info
    from gpu.paths import PATHS

    info = device_info()
    rows = []
    for p in PATHS.values():
        reason = p.unavailable_reason()
        rows.append({"path": p.name, "available": reason is None, "reason": reason,
                     "summary": p.summary, "preset": p.preset})
    gpu = info.get("gpu")
    lines = [f"device: {gpu} (compute capability {info.get('capability')}, driver "
             f"{info.get('driver')}, CUDA {info.get('cuda')}, torch {info.get('torch')}, "
             f"cuBLAS {info.get('cublas')})" if gpu else f"device: none ({info.get('reason')})"]
    width = max(len(r["path"]) for r in rows)
    for r in rows:
        state = "available" if r["available"] else f"unavailable: {r['reason']}"
        lines.append(f"  {r['path']:{width}}  {state}")
    _out(args, "\n".join(lines), {"device": info, "paths": rows})
    return 0


def cmd_gpu_run(args: argparse.Namespace) -> int:
    from gpu.paths import get as get_path

    check_output(args.output)
    path = get_path(args.path)
    vs = vectors.load(args.input, allow_large=args.allow_large)
    t0 = time.perf_counter()
    res = path.run(vs)
    dt = time.perf_counter() - t0
    vectors.save(res, args.output)
    info = {"path": path.name, "dots": vs.num_dots, "seconds": dt, "output": str(args.output)}
    _out(args, f"wrote {args.output}: {vs.num_dots} dot products through GPU path {path.name} "
               f"in {dt:.3f} s", info)
    return 0


# -- probe and fit --------------------------------------------------------------------------

def cmd_probe(args: argparse.Namespace) -> int:
    from .probe import probe_suite

    check_output(args.output)
    vs = probe_suite(args.kind, k=args.k, seed=args.seed)
    vectors.save(vs, args.output)
    _out(args, f"wrote {args.output}: probe suite {args.kind}, {vs.num_dots} dot products "
               f"(families {', '.join(vs.extra['families'])})",
         {"output": str(args.output), "dots": vs.num_dots, "families": vs.extra["families"]})
    return 0


def cmd_fit(args: argparse.Namespace) -> int:
    from .fit import fit

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
    _out(args, text, {"exact": result.exact, "equal": result.equal, "total": result.total,
                      "spec": result.spec.to_dict(), "evidence": result.evidence,
                      "unexplained": result.unexplained, "unseparated": result.unseparated})
    return 0 if result.exact else 1


# -- rtl ------------------------------------------------------------------------------------

def _rtl_unit(args: argparse.Namespace):
    """The unit, spec and micro-architecture that ``rtl`` and ``verify`` name, checked
    before anything is elaborated."""
    from .design import resolve_design
    unit = units.get(args.unit)
    spec, ua = resolve_design(unit, args.a_format, args.b_format, lanes=args.lanes,
                              stages=args.stages)
    return unit, spec, ua


def _add_rtl_unit_args(sp: argparse.ArgumentParser, unit: str, note: str, stages: int) -> None:
    sp.add_argument("--unit", default=unit,
                    help=f"preset name or spec file (default: %(default)s{note})")
    sp.add_argument("--a-format", default="e4m3", help="A's element format (default: e4m3)")
    sp.add_argument("--b-format", default=None, help="B's element format (default: A's)")
    sp.add_argument("--lanes", type=int, default=None,
                    help="products per cycle (default: the unit's k)")
    sp.add_argument("--stages", type=int, default=stages,
                    help=f"register stages after the accumulator, 1-3 (default: {stages})")


def cmd_rtl(args: argparse.Namespace) -> int:
    """Verilog of a unit (and its lint and Yosys statistics)."""
    if args.output is None and not args.stats:
        raise MxsimError("rtl needs -o OUT.v (the Verilog) and/or --stats (Yosys statistics)")
    if args.output is not None and not Path(args.output).resolve().parent.is_dir():
        raise MxsimError(f"{Path(args.output).parent}: no such folder for -o; create it or "
                         f"write elsewhere")
    if args.output is not None:
        check_output(args.output)
    unit, spec, ua = _rtl_unit(args)
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
    _out(args, "\n".join(lines), info)
    return status


# -- verify ---------------------------------------------------------------------------------

def cmd_verify(args: argparse.Namespace) -> int:
    """RTL against the model through cocotb (or the bulk harness): exit 0 only on zero
    mismatches."""
    unit, spec, ua = _rtl_unit(args)
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
    path = _engine_path(spec)
    _out(args, rep.format() + f"\n  model       fast engine: {path['note']}",
         {**rep.to_dict(), "engine_path": path})
    return 0 if rep.passed else 1


def _engine_path(spec) -> dict:
    from .engine import fast
    return fast.path(spec)


# -- demo -----------------------------------------------------------------------------------

def cmd_demo(args: argparse.Namespace) -> int:
    """Generate an MXFP8 vector set of every family, run it through ``exact``, check, report."""
    from .compare import compare

    out_dir = _out_dir(args.out)
    unit = units.get("exact")
    kwargs = dict(a_format="e4m3", b_format="e4m3", m=16, n=16, k=args.k,
                  scale_format="e8m0", block=32, seed=args.seed)
    t0 = time.perf_counter()
    vs = vectors.generate_suite(vectors.FAMILIES, count=2, **kwargs)
    vectors.save(vs, out_dir / "demo_in.npz")
    t1 = time.perf_counter()
    res = unit.run(vs)
    t2 = time.perf_counter()
    vectors.save(res, out_dir / "demo_exact.npz")
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
        f"  vector set   {out_dir / 'demo_in.npz'}: {vs.num_dots} dot products, K={vs.k}, "
        f"{len(set(vs.extra['families']))} generator families ({t1 - t0:.2f} s)",
        f"  exact unit   {out_dir / 'demo_exact.npz'}: {vs.num_dots / (t2 - t1):,.0f} dots/s",
        "  result class " + ", ".join(f"{k} {v}" for k, v in counts.items()),
        f"  |d| range    {np.nanmin(np.abs(d[np.isfinite(d) & (d != 0)])):.3g} .. "
        f"{np.nanmax(np.abs(d[np.isfinite(d)])):.3g}",
        f"  check        fast engine vs fraction reference on {report.total} dots: "
        f"{report.equal} bit-equal ({t3 - t2:.2f} s)",
        "  next         mxsim compare " + str(out_dir / "demo_exact.npz") + " --unit exact",
    ]
    print("\n".join(lines))
    if not report.agree:
        print(report.format())
        return 1
    return 0


# -- explore --------------------------------------------------------------------------------

def cmd_explore(args: argparse.Namespace) -> int:
    from . import explore
    sweep = explore.load(args.sweep)                 # every point checked before any runs
    if args.fpga:
        sweep.fpga = args.fpga
    out = args.out or str(Path("results") / sweep.name)
    if not args.check:
        _out_dir(out)
    paths: dict[str, int] = {}             # the fast engine's path per design: how many
    for d in sweep.designs:
        note = _engine_path(d.spec)["note"]
        paths[note] = paths.get(note, 0) + 1
    engines = "accuracy by the fast engine: " + "; ".join(
        f"{note} for {n} design{'s' if n > 1 else ''}" for note, n in paths.items())
    if args.check:
        n_rtl = len({d.rtl_key for d in sweep.designs})
        _out(args, f"{args.sweep}: {len(sweep.points)} points ({len(sweep.designs)} designs, "
                   f"{n_rtl} RTL configurations, {len(sweep.workloads)} workloads), "
                   f"{len(sweep.references)} references: OK\n{engines}",
             {"points": len(sweep.points), "designs": len(sweep.designs),
              "rtl_configurations": n_rtl, "workloads": len(sweep.workloads),
              "engine_paths": paths})
        return 0
    try:
        res = explore.run(sweep, out, jobs=args.jobs, fresh=args.fresh,
                          progress=False if args.json or args.no_progress else None)
    except explore.Interrupted as e:
        print(f"mxsim: {e}", file=sys.stderr)
        return 130
    front = [r for r in res.rows if r["pareto"]]
    lines = [f"{len(res.rows)} points ({len(sweep.designs)} designs, "
             f"{len({r['rtl_hash'] for r in res.rows})} RTL configurations, "
             f"{len(sweep.workloads)} workloads) in {res.seconds:.0f} s: "
             f"{res.computed['area']} syntheses and {res.computed['accuracy']} accuracy runs, "
             f"{res.reused['area'] + res.reused['accuracy']} cached",
             f"Pareto front: {len(front)} points"]
    for r in sorted(front, key=lambda r: (r["workload"], r["error"])):
        lines.append(f"  {r['workload']:20} {r['label']:28} error {r['error']:.3g}  "
                     f"GE {r['gate_equivalents']:.0f}  {r['dots_per_cycle']:.3g} dots/cycle")
    lines.append(engines)
    lines.append(f"report: {Path(out) / 'report.md'}")
    _out(args, "\n".join(lines), {"out": out, "seconds": res.seconds, "computed": res.computed,
                                  "engine_paths": paths,
                                  "reused": res.reused, "files": res.files,
                                  "pareto": [{k: r[k] for k in ("label", "workload", "error",
                                                                "gate_equivalents",
                                                                "dots_per_cycle")}
                                             for r in front]})
    return 0


# -- parser ---------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="mxsim", description="Bit-exact models of block-scaled (MX, NVFP4) dot-product "
                                  "units: formats, vector sets, units, comparisons.")
    p.add_argument("--version", action="version", version=f"mxsim {__version__}")
    p.add_argument("--debug", action="store_true",
                   help="print the traceback of an internal error (also accepted after the "
                        "verb)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, func, help: str, json_flag: bool = True) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, description=help)
        sp.set_defaults(func=func)
        if json_flag:
            sp.add_argument("--json", action="store_true", help="print JSON instead of text")
        return sp

    add("formats", cmd_formats, "list the element, scale and output formats")
    up = add("units", cmd_units, "list the units with their provenance; with --spec, print "
                                 "a preset's spec as TOML to start a unit of your own")
    up.add_argument("--spec", default=None, metavar="NAME",
                    help="print this preset's spec as TOML (load it back with --unit FILE.toml)")
    up.add_argument("--a-format", default=None, metavar="FMT",
                    help="with --spec: A's element format (default: the preset's first pair)")
    up.add_argument("--b-format", default=None, metavar="FMT",
                    help="with --spec: B's element format (default: A's)")
    up.add_argument("--scale-format", default=None, metavar="FMT",
                    help="with --spec: block scale format, or none (default: the preset's "
                         "first)")
    up.add_argument("--block", type=int, default=None, metavar="N",
                    help="with --spec: scale block size (default: the preset's for the scale "
                         "format)")
    up.add_argument("--c-format", default=None, metavar="FMT",
                    help="with --spec: format of C and D (default: the preset's first)")

    rp = add("rtl", cmd_rtl, "Verilog of a unit's datapath, its lint and Yosys statistics")
    _add_rtl_unit_args(rp, "hopper-wgmma", "", stages=1)
    rp.add_argument("-o", "--output", default=None, metavar="OUT.v", help="write the Verilog")
    rp.add_argument("--lint", action="store_true",
                    help="lint the written Verilog with Verilator -Wall (exit 1 on warnings)")
    rp.add_argument("--stats", action="store_true", help="synthesise with Yosys and report")
    rp.add_argument("--fpga", choices=("lut4", "ice40", "none"), default="lut4",
                    help="with --stats: lut4 (abc -lut 4 estimate, little time beyond the "
                         "generic synthesis), ice40 (synth_ice40: 5 to 30 min at 32 lanes) or "
                         "none (default: %(default)s)")
    rp.add_argument("--no-ice40", action="store_true", help=argparse.SUPPRESS)  # = --fpga none

    ve = add("verify", cmd_verify, "simulate a unit's RTL and check it against the model "
                                   "bit and cycle exactly, with coverage")
    _add_rtl_unit_args(ve, "blackwell-mxf8f6f4", ", MXFP8", stages=2)
    ve.add_argument("--sim", choices=("verilator", "icarus"), default="verilator",
                    help="simulator (default: %(default)s)")
    ve.add_argument("--vectors", type=int, default=20000,
                    help="dot products to check (default: %(default)s)")
    ve.add_argument("--seed", type=_int_range(0), default=0,
                    help="stimulus seed (default: 0)")
    ve.add_argument("--chunk", type=_int_range(1, 1_000_000), default=4000,
                    help="dot products per simulator run, at most 1,000,000 (default: "
                         "%(default)s)")
    ve.add_argument("--bulk", action="store_true",
                    help="the C++ harness instead of cocotb (millions of vectors)")
    ve.add_argument("--out", default="mxsim-verify", metavar="DIR",
                    help="builds, reports and failing sets (default: %(default)s)")
    ve.add_argument("--replay", default=None, metavar="FAILING.npz",
                    help="run exactly this vector set (a failing set a run wrote)")
    ve.add_argument("--waves", action="store_true", help="write a waveform (FST/VCD)")
    _add_allow_large(ve)

    ex = add("explore", cmd_explore, "sweep unit designs over workloads: accuracy (engine), "
                                     "area (Yosys on the RTL) and throughput (cycle model)")
    ex.add_argument("sweep", metavar="SWEEP.toml", help="the sweep file (docs/explore.md)")
    ex.add_argument("-o", "--out", default=None, metavar="DIR",
                    help="results, plots, report and cache (default: results/NAME)")
    ex.add_argument("-j", "--jobs", type=_int_range(1), default=None, metavar="N",
                    help="points run in parallel (default: one per core)")
    ex.add_argument("--fresh", action="store_true", help="discard the cache and rerun all")
    ex.add_argument("--check", action="store_true",
                    help="only read and check the sweep file")
    ex.add_argument("--fpga", choices=("ice40", "lut4", "none"), default=None,
                    help="override the file's cost.fpga: ice40 (synth_ice40, minutes per "
                         "design), lut4 (abc -lut 4 estimate, seconds) or none")
    ex.add_argument("--no-progress", action="store_true", help="no progress bar")

    vp = sub.add_parser("vectors", help="generate or inspect vector sets",
                        description="generate or inspect vector sets (mxsim.vectors/1 .npz)")
    vsub = vp.add_subparsers(dest="vectors_command", metavar="ACTION", required=True)
    g = vsub.add_parser("gen", help="generate a seeded vector set",
                        description="generate a seeded vector set; families: "
                                    + ", ".join(vectors.FAMILIES))
    g.set_defaults(func=cmd_vectors_gen)
    g.add_argument("--family", default="all", metavar="NAME[,NAME]",
                   help="generator family, a comma list, or 'all' (default: %(default)s)")
    g.add_argument("--a-format", default="e4m3", metavar="FMT",
                   help="element format of A (default: %(default)s)")
    g.add_argument("--b-format", default=None, metavar="FMT",
                   help="element format of B (default: the A format)")
    g.add_argument("-m", type=_int_range(1), default=16,
                   help="rows of A (default: %(default)s)")
    g.add_argument("-n", type=_int_range(1), default=8,
                   help="columns of B (default: %(default)s)")
    g.add_argument("-k", type=_int_range(1), default=32,
                   help="reduction length (default: %(default)s)")
    g.add_argument("--count", type=_int_range(1), default=1, metavar="N",
                   help="batch entries per family (default: %(default)s)")
    g.add_argument("--scale-format", default=None, choices=vectors.SCALE_FORMATS,
                   help="block scale format (default: no scales)")
    g.add_argument("--block", type=int, default=None,
                   help="scale block size (default: 32 for e8m0, 16 for ue4m3)")
    g.add_argument("--scale-granularity", default="block", choices=("tensor", "row", "block"),
                   help="fp32 scale granularity (default: %(default)s)")
    g.add_argument("--tensor-scale", type=float, default=None, metavar="X",
                   help="NVFP4 per-tensor FP32 scale (ue4m3 scales only) (default: none)")
    g.add_argument("--no-c", action="store_true", help="leave out the accumulator C")
    g.add_argument("--c-format", default="fp32", choices=vectors.ACC_FORMATS,
                   help="format of C, e.g. fp16 for FP16-accumulate units (default: %(default)s)")
    g.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    g.add_argument("-o", "--output", required=True, metavar="OUT.npz", help="file to write")
    _add_allow_large(g)
    g.add_argument("--json", action="store_true", help="print JSON instead of text")
    i = vsub.add_parser("info", help="describe a vector-set file")
    i.set_defaults(func=cmd_vectors_info)
    i.add_argument("input", metavar="IN.npz")
    _add_allow_large(i)
    i.add_argument("--json", action="store_true", help="print JSON instead of text")

    r = add("run", cmd_run, "compute d for a vector set with a unit")
    r.add_argument("input", metavar="IN.npz")
    r.add_argument("--unit", default="exact", metavar="NAME|SPEC",
                   help="unit name (see `mxsim units`) or a spec file .toml/.json "
                        "(default: %(default)s)")
    r.add_argument("--engine", default="fast", choices=units.ENGINES,
                   help="engine (default: %(default)s)")
    r.add_argument("-o", "--output", required=True, metavar="OUT.npz", help="file to write")
    _add_allow_large(r)

    c = add("compare", cmd_compare, "compare a result with another result or with a unit, "
                                    "bit for bit")
    c.add_argument("result", metavar="RESULT.npz")
    c.add_argument("other", nargs="?", metavar="OTHER.npz", help="a result on the same inputs")
    c.add_argument("--unit", metavar="NAME|SPEC",
                   help="compare with this unit's output instead (a name or a spec file)")
    c.add_argument("--engine", default="fast", choices=units.ENGINES,
                   help="engine for --unit (default: %(default)s)")
    c.add_argument("--show", type=_int_range(0), default=5, metavar="N",
                   help="mismatches to print (default: %(default)s)")
    c.add_argument("--plot", metavar="FILE.png", default=None,
                   help="also draw the error distribution of RESULT and of every preset that "
                        "takes its formats, against exact (.png, .pdf or .svg)")
    _add_allow_large(c)

    _quantize_parser(sub)

    pr = add("probe", cmd_probe, "write a probe suite: vectors that separate a unit's "
                                 "hypotheses")
    pr.add_argument("--kind", default="fp8", help="probe kind (default: %(default)s)")
    pr.add_argument("-k", type=int, default=32,
                    help="reduction length, a multiple of 4 (default: %(default)s)")
    pr.add_argument("--seed", type=_int_range(0), default=0,
                    help="random seed (default: %(default)s)")
    pr.add_argument("-o", "--output", required=True, metavar="OUT.npz", help="file to write")
    fi = add("fit", cmd_fit, "find the simplest unit spec that reproduces observed outputs")
    fi.add_argument("inputs", metavar="IN.npz", help="the vectors that were run")
    fi.add_argument("observed", metavar="GPU_OUT.npz", help="their results (same inputs)")
    fi.add_argument("-k", type=_int_range(1), default=32,
                    help="instruction K (default: %(default)s)")
    fi.add_argument("-o", "--output", required=True, metavar="FITTED.toml",
                    help="where to write the spec (only when it explains every output)")
    _add_allow_large(fi)

    gp = sub.add_parser("gpu", help="run vector sets on the local NVIDIA GPU",
                        description="run vector sets on the local NVIDIA GPU, path by path")
    gsub = gp.add_subparsers(dest="gpu_command", metavar="ACTION", required=True)
    gi = gsub.add_parser("info", help="the device and which paths run here (and why not)")
    gi.set_defaults(func=cmd_gpu_info)
    gi.add_argument("--json", action="store_true", help="print JSON instead of text")
    gr = gsub.add_parser("run", help="run a vector set through one GPU path")
    gr.set_defaults(func=cmd_gpu_run)
    gr.add_argument("input", metavar="IN.npz")
    gr.add_argument("--path", required=True, metavar="PATH",
                    help="GPU path (see `mxsim gpu info`)")
    gr.add_argument("-o", "--output", required=True, metavar="OUT.npz", help="file to write")
    _add_allow_large(gr)
    gr.add_argument("--json", action="store_true", help="print JSON instead of text")

    d = add("demo", cmd_demo, "the main job: generate vectors, run them, check and report",
            json_flag=False)
    d.add_argument("--out", default="out/demo", metavar="DIR",
                   help="directory for the files (default: %(default)s)")
    d.add_argument("-k", type=_int_range(32, 8192), default=256,
                   help="reduction length, a multiple of 32 (default: %(default)s)")
    d.add_argument("--seed", type=_int_range(0), default=0,
                   help="random seed (default: %(default)s)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug anywhere on the line: "rerun with --debug" should work however it is added.
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:       # --help, --version, or a usage error (already printed)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return args.func(args)
    except MxsimError as exc:
        print(f"mxsim: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mxsim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``mxsim ... | head``): nothing more to say, and not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except MemoryError:
        print("mxsim: error: out of memory; use a smaller vector set or run on a machine with "
              "more memory", file=sys.stderr)
        return 2
    except Exception as exc:        # the last resort: a bug in mxsim, and never exit 1
        if debug:
            traceback.print_exc()
        lines = str(exc).strip().splitlines()
        what = lines[0][:200] if lines else ""
        print(f"mxsim: internal error: {type(exc).__name__}{': ' + what if what else ''} "
              f"(please report it; rerun with --debug for the traceback)", file=sys.stderr)
        return 3
