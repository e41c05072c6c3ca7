"""The ``quantize`` verb: a float array to MX or NVFP4 codes."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from .. import formats, vectors
from ..errors import MxsimError
from ..output import check_output
from .common import emit, refuse_unread

__all__ = ["cmd_quantize"]


_IDENTITY_MAX_K = 8192     # the identity operand is K x K codes


def _quantize_input(path: str, allow_large: bool) -> np.ndarray:
    """The array of an .npy file, or a one-line MxsimError; its header is read first, so a
    small file cannot declare a huge array and have it allocated.

    A bfloat16 array comes back as ml_dtypes' bfloat16: ``numpy.save`` can only describe that
    dtype as two bytes of raw data (``<V2``), and no other 2-byte dtype is stored so.
    """
    with vectors.open_input(path, MxsimError) as fh:
        try:
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
            x = np.load(fh, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            if isinstance(exc, MxsimError):
                raise
            raise MxsimError(f"{path}: not a readable .npy array ({exc}); save one with "
                             f"numpy.save") from None
    if x.dtype.kind == "V" and x.dtype.itemsize == 2 and x.dtype.fields is None:
        import ml_dtypes
        x = x.view(ml_dtypes.bfloat16)
    return x


def _identity_codes(fmt_name: str, k: int, batch: tuple[int, ...]) -> np.ndarray:
    """K x K element codes of the identity matrix (1.0 on the diagonal), per batch entry."""
    fmt = formats.get(fmt_name)
    eye = np.where(np.eye(k, dtype=bool), fmt.encode(1.0), fmt.encode(0.0)).astype(np.uint8)
    return np.ascontiguousarray(np.broadcast_to(eye, batch + (k, k)))


def _vector_set_block(block: int) -> None:
    if block not in (16, 32):
        raise MxsimError(f"A vector set holds blocks of 16 or 32, not {block}; use --compare "
                         f"or the Python API (mxsim.quantize) for other blocks")


#: The options that only some modes read ("mx": -o, "nvfp4": -o with --nvfp4, "compare"), with
#: what each does: given in another mode, it is refused rather than ignored.
_READ_IN = {
    "scale_rule": ("--scale-rule", {"mx"}, "picks the E8M0 scale rule of -o's MX quantisation "
                                           "(--compare reports every rule)"),
    "rounding": ("--rounding", {"mx", "nvfp4"}, "picks how -o rounds the elements (--compare "
                                                "rounds to nearest even)"),
    "operand": ("--as", {"mx", "nvfp4"}, "picks the operand -o writes (--compare takes the "
                                         "blocks along --axis)"),
    "allow_nan_blocks": ("--allow-nan-blocks", {"mx", "nvfp4"},
                         "lets -o quantise blocks of nothing but NaN (--compare always does)"),
    "per_tensor_scale": ("--per-tensor-scale", {"nvfp4"}, "is the NVFP4 per-tensor scale"),
    "two_d": ("--two-d", {"nvfp4"}, "picks NVFP4's 16x16 tile scales"),
    "axis": ("--axis", {"compare"}, "picks the axis of --compare's blocks (-o takes the blocks "
                                    "of the operand --as names)"),
}


def _mode(args: argparse.Namespace) -> str:
    """``compare``, ``nvfp4`` or ``mx``; raises MxsimError for an option the mode does not
    read (see :data:`_READ_IN`)."""
    if args.compare and args.output is not None:
        raise MxsimError("quantize takes either -o OUT.npz or --compare, not both")
    if args.compare and args.nvfp4:
        raise MxsimError("--compare compares the E8M0 scale rules; leave out --nvfp4")
    mode = "compare" if args.compare else "nvfp4" if args.nvfp4 else "mx"
    rows = []
    for dest, (flag, modes, what) in _READ_IN.items():
        where = ("without --compare" if modes == {"compare"} else
                 "without --nvfp4" if modes == {"nvfp4"} else f"with --{mode}")
        rows.append((flag, getattr(args, dest), mode in modes,
                     f"does not apply {where}: it {what}"))
    rows.append(("--seed", args.seed, mode != "compare" and args.rounding == "stochastic",
                 "does not apply without --rounding stochastic: it seeds stochastic rounding's "
                 "random bits"))
    refuse_unread(*rows)
    return mode


def cmd_quantize(args: argparse.Namespace) -> int:
    mode = _mode(args)
    if args.output is not None:
        check_output(args.output)
    x = _quantize_input(args.input, args.allow_large)
    if mode == "compare":
        return _compare_rules(args, x)
    if args.output is None:
        raise MxsimError("quantize needs -o OUT.npz (or --compare)")
    return _write_set(args, np.asarray(x))


def _compare_rules(args: argparse.Namespace, x: np.ndarray) -> int:
    """``--compare``: a row per E8M0 scale rule."""
    from .. import quantize as q

    elem = "e4m3" if args.elem is None else args.elem
    axis = -1 if args.axis is None else args.axis
    block = 32 if args.block is None else args.block
    rows = q.compare_rules(x, elem, block, axis)
    head = (f"{'rule':10} {'blocks':>8} {'scale≠' + rows[0]['baseline']:>12} "
            f"{'max|err|':>11} {'mean|err|':>11} {'max rel':>10} {'mean rel':>10}")
    lines = [f"{args.input}: {np.asarray(x).size} values, {elem} elements, blocks of "
             f"{block} along axis {axis}", head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['rule']:10} {r['blocks']:>8} {r['scale_differs']:>12} "
                     f"{r['max_abs_err']:>11.4g} {r['mean_abs_err']:>11.4g} "
                     f"{r['max_rel_err']:>10.4g} {r['mean_rel_err']:>10.4g}")
    emit(args, "\n".join(lines), rows)
    return 0


def _write_set(args: argparse.Namespace, x: np.ndarray) -> int:
    """``-o OUT.npz``: the codes as one operand of a vector set, the identity as the other."""
    operand = "a" if args.operand is None else args.operand
    if x.ndim == 1:
        x = x[None, :] if operand == "a" else x[:, None]
    if x.ndim < 2:
        raise MxsimError(f"{args.input}: quantize needs a vector or a matrix, not a scalar")
    k = x.shape[-1] if operand == "a" else x.shape[-2]
    if k > _IDENTITY_MAX_K:
        raise MxsimError(f"K = {k} is above {_IDENTITY_MAX_K}, too large for the identity "
                         f"operand of the vector set; quantise a slice of the input")
    # The set holds the codes and a K x K identity per batch entry; `mxsim run` computes
    # x.size * K products.
    entries = int(np.prod(x.shape[:-2], dtype=object))
    vectors.check_size(x.size + entries * k * k, x.size * k, args.allow_large, str(args.input))
    axis = -1 if operand == "a" else -2
    rounding = "rne" if args.rounding is None else args.rounding
    extra: dict[str, Any] = {"quantize": {"input": str(args.input), "operand": operand,
                                          "rounding": rounding, "seed": args.seed}}
    elem, scale_format, one, block, scales, codes, tensor_scale = _quantise(args, x, axis,
                                                                             rounding, extra)
    batch = x.shape[:-2]
    eye = _identity_codes(elem, k, batch)
    eye_scales = np.full(batch + ((k, k // block) if operand == "b" else (k // block, k)),
                         one, np.uint8)
    if operand == "a":
        ops = dict(a=codes, a_scale=scales, b=eye, b_scale=eye_scales)
    else:
        ops = dict(a=eye, a_scale=eye_scales, b=codes, b_scale=scales)
    vs = vectors.VectorSet(a_format=elem, b_format=elem, scale_format=scale_format, block=block,
                           tensor_scale=tensor_scale, producer="mxsim quantize", extra=extra,
                           **ops)
    vectors.save(vs, args.output)
    info = {"output": str(args.output), "operand": operand, "format": elem,
            "scale_format": scale_format, "block": block, "shape": list(x.shape),
            **({"per_tensor_scale": float(tensor_scale)} if tensor_scale is not None else {})}
    emit(args, f"wrote {args.output}: {x.shape} quantised to {elem} with {scale_format} scales "
               f"(blocks of {block}) as operand {operand}; the other operand is the "
               f"identity, so `mxsim run` gives the dequantised tensor", info)
    return 0


def _quantise(args: argparse.Namespace, x: np.ndarray, axis: int, rounding: str,
              extra: dict[str, Any]):
    """Element format, scale format, the scale code of 1, block, scales, codes and the NVFP4
    tensor scale (None for MX) of ``x`` under the options' recipe."""
    from .. import quantize as q

    # `is None`, not `or`: --block 0 and --elem '' are errors, not the defaults.
    block_arg = args.block
    nan_blocks = "quantize" if args.allow_nan_blocks else "error"
    tensor_scale = None
    if args.nvfp4:
        if args.elem not in (None, "e2m1"):
            raise MxsimError(f"--nvfp4 quantises to e2m1; leave out --elem {args.elem}")
        elem, scale_format, one = "e2m1", "ue4m3", 0x38
        block = 16 if block_arg is None else block_arg
        _vector_set_block(block)
        scales, codes, pts = q.to_nvfp4(x, args.per_tensor_scale, block, args.two_d,
                                        rounding, axis, args.seed, nan_blocks=nan_blocks)
        tensor_scale = np.array(pts, np.float32)
        extra["quantize"].update(recipe="nvfp4", two_d=args.two_d)
    else:
        elem = "e4m3" if args.elem is None else args.elem
        block = 32 if block_arg is None else block_arg
        rule = "floor" if args.scale_rule is None else args.scale_rule
        scale_format, one = "e8m0", 127
        _vector_set_block(block)
        scales, codes = q.to_mx(x, elem, block, rule, rounding, axis, args.seed,
                                nan_blocks=nan_blocks)
        extra["quantize"].update(recipe="mx", scale_rule=rule)
    return elem, scale_format, one, block, scales, codes, tensor_scale
