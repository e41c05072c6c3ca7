"""``matmul`` and ``linear`` on torch tensors, through a unit and an operand recipe.

The float operands are quantised by the recipe (:mod:`mxsim.quantize.recipes`), the unit
computes D in FP32 from the codes (exactly as its spec says), and the FP32 result goes back as
the real kernel returns it: in the inputs' dtype, rounded once to nearest even when that is
bfloat16 or float16, with a bias added in FP32 before that rounding (``bf16(fl32(D + bias))``,
what the H200 does with ``torch._scaled_mm``'s bias: docs/gpu.md).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import units
from ..errors import UnitError
from ..quantize.recipes import Quantised, recipe
from ..vectors import VectorSet
from . import fp32
from .tensors import to_torch, values

__all__ = ["matmul", "linear", "addmm", "gemm_bits", "compute", "pick_engine", "check_grad",
           "fp32_unit"]

#: Operand formats ``none`` prefers, in order, when the inputs' dtype is not one the unit takes.
_PLAIN = ("bf16", "fp16", "e4m3", "tf32")
#: The operand format a 16-bit torch dtype is.
_DTYPE_FORMAT = {"bfloat16": "bf16", "float16": "fp16"}


def pick_engine(engine: str | None, *tensors: Any) -> str:
    """``engine``, or (None) ``gpu`` for CUDA tensors where the GPU engine is available, else
    ``fast``."""
    if engine is not None:
        return engine
    if any(getattr(t, "is_cuda", False) for t in tensors):
        try:
            from ..engine import gpu
        except ImportError:
            return "fast"
        if gpu.available():
            return "gpu"
    return "fast"


def check_grad(*tensors: Any) -> None:
    """Refuse tensors that require grad while grad is enabled (forward only)."""
    import torch
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                       for t in tensors):
        raise UnitError("mxsim.torch is forward only: run under torch.no_grad() or "
                        "torch.inference_mode(), or detach the tensors")


def _plain_pair(unit: units.Unit, dtype_format: str | None) -> tuple[str, str]:
    """The operand pair recipe ``none`` casts to: the inputs' own 16-bit format where the
    unit takes it, else the first of bf16, fp16, e4m3, tf32 it takes, else its first pair."""
    pairs = unit.preset.pairs
    for f in ((dtype_format,) if dtype_format else ()) + _PLAIN:
        if (f, f) in pairs:
            return f, f
    return pairs[0]


def fp32_unit(unit: units.Unit, a_format: str, b_format: str, granularity: str) -> units.Unit:
    """The unit that applies FP32 scales of ``granularity`` (tensor, row, block) on ``unit``.

    A unit that takes FP32 scales (``exact``, ``hopper-cublas-rowwise``/``-blockwise``) is
    itself; any other gets its unscaled spec with cuBLASLt's epilogue for the granularity
    (``alpha``: fl(fl(sa*sb)*D); ``col-row``: fl(fl(D*sb)*sa); ``block-fma``: each promoted
    128-K partial P as total = fma(P, fl(sa*sb), total)), or a one-line UnitError where the
    spec cannot take it (block-wise scales need promotion every 128 of K)."""
    block = 128 if granularity == "block" else None
    if ("fp32", block) in unit.preset.scales_for(a_format, b_format):
        return unit
    base = unit.preset.spec(a_format, b_format, scale_format=None, block=None, c_format="fp32")
    epilogue = {"tensor": "alpha", "row": "col-row", "block": "block-fma"}[granularity]
    try:
        spec = base.replace(name=f"{base.name}+{epilogue}", scale_format="fp32", block=block,
                            epilogue=epilogue)
    except ValueError as exc:
        raise UnitError(f"Unit {unit.name} cannot apply {granularity}-wise FP32 scales: "
                        f"{exc}") from None
    return units.get(spec)


def compute(unit: units.Unit, qa: Quantised, qb: Quantised, engine: str
            ) -> npt.NDArray[np.uint32]:
    """FP32 bit patterns of ``A·B`` for two quantised operands, as ``unit`` computes them."""
    if qa.scale_format != qb.scale_format:
        raise UnitError("Both operands must come with the same kind of scales")
    vs = VectorSet(a=qa.codes, b=qb.codes, a_format=qa.format, b_format=qb.format,
                   a_scale=qa.scale, b_scale=qb.scale, scale_format=qa.scale_format,
                   block=qa.block)
    if qa.scale_format == "fp32":
        gran = "block" if qa.block == 128 else "tensor" if qa.scale.ndim == 0 else "row"
        return _d32(fp32_unit(unit, qa.format, qb.format, gran), vs, engine)
    if qa.tensor_scale is None:
        return _d32(unit, vs, engine)
    # NVFP4's per-tensor scales: alpha = fl32(ta * tb), as cuBLASLt's alpha; the exact unit
    # applies it exactly (one rounding of the whole), any other in the FP32 epilogue.
    alpha = fp32.times(qa.tensor_scale, qb.tensor_scale)
    spec = unit.spec_for(vs)
    if spec.exact:
        return _d32(unit, replace(vs, tensor_scale=np.asarray(alpha, np.float32)), engine)
    return fp32.alpha_times(alpha, _d32(unit, vs, engine), spec.d_nan)


def _d32(unit: units.Unit, vs: VectorSet, engine: str) -> npt.NDArray[np.uint32]:
    spec = unit.spec_for(vs)
    if spec.d_format != "fp32":
        raise UnitError(f"Unit {unit.name} gives {spec.d_format} results; mxsim.torch takes "
                        f"units with FP32 results")
    return np.asarray(unit.compute(vs, engine), np.uint32)


def gemm_bits(x: npt.NDArray, w: npt.NDArray, unit: Any, recipe_name: Any, engine: str,
              opts: dict[str, Any], dtype: Any = None) -> npt.NDArray[np.uint32]:
    """FP32 bits of ``x @ w`` (x (..., M, K), w (..., K, N), float values) under a recipe;
    ``dtype`` (the inputs' torch dtype) picks the operand format of ``none``."""
    u = units.get(unit)
    rec = recipe(recipe_name)
    opts = dict(opts)
    fa, fb = opts.pop("a_format", None), opts.pop("b_format", None)
    if rec.elements is None:
        pa, pb = _plain_pair(u, _DTYPE_FORMAT.get(str(dtype).removeprefix("torch.")))
        fa, fb = fa or pa, fb or fa or pb
    qa = rec.quantise(x, "a", fa, **opts)
    qb = rec.quantise(w, "b", fb or fa, **opts)
    return compute(u, qa, qb, engine)


def _operands(x: Any, w: Any) -> tuple[npt.NDArray, npt.NDArray, tuple[int, ...]]:
    """x and w as (..., M, K) and (..., K, N) values, and the shape of torch.matmul(x, w)."""
    xv, wv = values(x, "x"), values(w, "w")
    if xv.ndim == 0 or wv.ndim == 0:
        raise UnitError("matmul needs tensors of at least one dimension")
    k = xv.shape[-1]
    kw = wv.shape[0] if wv.ndim == 1 else wv.shape[-2]
    if k != kw:
        raise UnitError(f"matmul: x {tuple(xv.shape)} and w {tuple(wv.shape)} do not chain "
                        f"(K {k} against {kw})")
    if wv.ndim == 1:
        wv, drop_n = wv[:, None], True
    else:
        drop_n = False
    if xv.ndim == 1:
        xv, drop_m = xv[None, :], True
    else:
        drop_m = False
    if wv.ndim == 2:                      # one weight: every row of x is an M row
        shape = xv.shape[:-1] + wv.shape[-1:]
        xv = xv.reshape(-1, k)
    else:
        batch = np.broadcast_shapes(xv.shape[:-2], wv.shape[:-2])
        xv = np.broadcast_to(xv, batch + xv.shape[-2:])
        wv = np.broadcast_to(wv, batch + wv.shape[-2:])
        shape = batch + (xv.shape[-2], wv.shape[-1])
    shape = shape[:-1] if drop_n else shape
    if drop_m:
        shape = shape[:-2] + shape[-1:] if not drop_n else shape[:-1]
    return np.ascontiguousarray(xv), np.ascontiguousarray(wv), shape


def _finish(bits: npt.NDArray[np.uint32], bias: Any, dtype: Any, device: Any,
            shape: tuple[int, ...]) -> Any:
    """The FP32 result (plus a bias, in FP32) as the kernel returns it."""
    if bias is not None:
        bits = fp32.plus(bits, values(bias, "bias").astype(np.float32))
    return to_torch(bits, dtype, device).reshape(shape)


def _out_dtype(*tensors: Any) -> Any:
    import torch
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    return dtype


def matmul(x: Any, w: Any, *, unit: Any = "exact", recipe: Any = "none",
           engine: str | None = None, **opts: Any) -> Any:
    """``torch.matmul(x, w)`` as ``unit`` computes it on ``recipe``'s codes.

    ``x`` (..., M, K) or (K,), ``w`` (K, N), (..., K, N) or (K,), broadcast as torch does;
    float32, bfloat16, float16 or float64 tensors, CPU or CUDA. ``opts``: ``a_format`` /
    ``b_format`` (element formats instead of the recipe's, or, for ``none``, of the unit's),
    ``scale_rule`` (MX recipes), ``pow2_scales`` (fp8-tensor, fp8-row). The result has the
    promoted dtype of ``x`` and ``w`` on ``x``'s device: the unit's FP32 D, rounded once to
    nearest even for 16-bit dtypes (float64 holds it exactly). Raises a one-line
    :class:`~mxsim.MxsimError` for bad input.
    """
    check_grad(x, w)
    xv, wv, shape = _operands(x, w)
    dtype = _out_dtype(x, w)
    bits = gemm_bits(xv, wv, unit, recipe, pick_engine(engine, x, w), opts, dtype)
    return _finish(bits, None, dtype, x.device, shape)


def linear(x: Any, weight: Any, bias: Any = None, *, unit: Any = "exact", recipe: Any = "none",
           engine: str | None = None, **opts: Any) -> Any:
    """``F.linear(x, weight, bias)``: ``x @ weight.T`` through the unit, then the bias.

    ``weight`` is (N, K) as in F.linear; ``bias`` (N,) is added to the FP32 result in FP32
    (one rounding), before the conversion to the output dtype, as cuBLASLt's bias epilogue
    does (measured on the H200 for torch._scaled_mm; assumed for bf16/fp16 GEMMs). Options as
    :func:`matmul`.
    """
    check_grad(x, weight, bias)
    wt = values(weight, "weight")
    if wt.ndim != 2:
        raise UnitError(f"linear takes a 2-D weight (out, in), not {tuple(wt.shape)}")
    xv, wv, shape = _operands(x, weight.T)
    dtype = _out_dtype(x, weight)
    bits = gemm_bits(xv, wv, unit, recipe, pick_engine(engine, x, weight), opts, dtype)
    return _finish(bits.reshape(-1, wv.shape[-1]), bias, dtype, x.device, shape)


def addmm(c: Any, x: Any, w: Any, *, beta: Any = 1, alpha: Any = 1, unit: Any = "exact",
          recipe: Any = "none", engine: str | None = None, **opts: Any) -> Any:
    """``torch.addmm(c, x, w)``: ``fl32(x @ w + c)`` then the output dtype (beta = alpha = 1
    only)."""
    check_grad(c, x, w)
    if beta != 1 or alpha != 1:
        raise UnitError(f"addmm is emulated with beta = alpha = 1 only, not beta={beta!r}, "
                        f"alpha={alpha!r}")
    xv, wv, shape = _operands(x, w)
    if len(shape) != 2:
        raise UnitError(f"addmm takes 2-D matrices, not {tuple(x.shape)} and {tuple(w.shape)}")
    dtype = _out_dtype(c, x, w)
    bits = gemm_bits(xv, wv, unit, recipe, pick_engine(engine, x, w), opts, dtype)
    return _finish(bits, c, dtype, x.device, shape)
