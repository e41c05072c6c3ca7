"""The ``quantize`` verb: a float array to MX or NVFP4 codes."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from .. import formats, vectors
from ..errors import MxsimError
from ..output import check_output
from .common import emit

__all__ = ["cmd_quantize"]


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
    if args.output is not None:
        check_output(args.output)
    x = _quantize_input(args.input, args.allow_large)
    if args.compare:
        return _compare_rules(args, x)
    if args.output is None:
        raise MxsimError("quantize needs -o OUT.npz (or --compare)")
    return _write_set(args, np.asarray(x))


def _compare_rules(args: argparse.Namespace, x: np.ndarray) -> int:
    """``--compare``: a row per E8M0 scale rule."""
    from .. import quantize as q

    if args.output is not None:
        raise MxsimError("quantize takes either -o OUT.npz or --compare, not both")
    if args.nvfp4:
        raise MxsimError("--compare compares the E8M0 scale rules; leave out --nvfp4")
    elem = "e4m3" if args.elem is None else args.elem
    block = 32 if args.block is None else args.block
    rows = q.compare_rules(x, elem, block, args.axis)
    head = (f"{'rule':10} {'blocks':>8} {'scale≠' + rows[0]['baseline']:>12} "
            f"{'max|err|':>11} {'mean|err|':>11} {'max rel':>10} {'mean rel':>10}")
    lines = [f"{args.input}: {np.asarray(x).size} values, {elem} elements, blocks of "
             f"{block} along axis {args.axis}", head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['rule']:10} {r['blocks']:>8} {r['scale_differs']:>12} "
                     f"{r['max_abs_err']:>11.4g} {r['mean_abs_err']:>11.4g} "
                     f"{r['max_rel_err']:>10.4g} {r['mean_rel_err']:>10.4g}")
    emit(args, "\n".join(lines), rows)
    return 0


def _write_set(args: argparse.Namespace, x: np.ndarray) -> int:
    """``-o OUT.npz``: the codes as one operand of a vector set, the identity as the other."""
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
    extra: dict[str, Any] = {"quantize": {"input": str(args.input), "operand": args.operand,
                                          "rounding": args.rounding, "seed": args.seed}}
    elem, scale_format, one, block, scales, codes, tensor_scale = _quantise(args, x, axis,
                                                                             extra)
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
    emit(args, f"wrote {args.output}: {x.shape} quantised to {elem} with {scale_format} scales "
               f"(blocks of {block}) as operand {args.operand}; the other operand is the "
               f"identity, so `mxsim run` gives the dequantised tensor", info)
    return 0


def _quantise(args: argparse.Namespace, x: np.ndarray, axis: int, extra: dict[str, Any]):
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
    return elem, scale_format, one, block, scales, codes, tensor_scale
