"""``matmul``, ``linear``, ``mm``, ``bmm`` and ``addmm`` on torch tensors, through a unit and an
operand recipe.

The float operands are quantised by the recipe (:mod:`mxsim.quantize.recipes`), the unit
computes D in FP32 from the codes (exactly as its spec says), and the FP32 result goes back as
the real kernel returns it: in the inputs' dtype, rounded once to nearest even when that is
bfloat16 or float16, with a bias added in FP32 before that rounding (``bf16(fl32(D + bias))``,
what the H200 does with ``torch._scaled_mm``'s bias: docs/gpu.md).

Shapes are torch's: a product with a zero dimension is torch's empty result and one with K = 0
its zeros (plus the bias), meta tensors give a meta result of torch's shape and dtype, and
shapes torch refuses (``bmm`` does not broadcast) raise a one-line UnitError naming them.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import units
from ..errors import UnitError
from ..quantize.recipes import Quantised, recipe
from ..spec import UnitSpec
from ..vectors import VectorSet
from . import fp32
from .tensors import float_dtype, on_meta, to_torch, values

__all__ = ["matmul", "linear", "mm", "bmm", "addmm", "gemm_bits", "compute", "pick_engine",
           "check_grad", "check_fits", "fp32_unit", "library_plan", "library_paths",
           "ASSUMED_FLAGS"]

#: Operand formats ``none`` prefers, in order, when the inputs' dtype is not one the unit takes.
_PLAIN = ("bf16", "fp16", "e4m3", "tf32")
#: The operand format a 16-bit torch dtype is.
_DTYPE_FORMAT = {"bfloat16": "bf16", "float16": "fp16"}


def pick_engine(engine: str | None, *tensors: Any) -> str:
    """``engine`` (checked, even where a product has nothing to compute), or (None) ``gpu`` for
    CUDA tensors where the GPU engine is available, else ``fast``."""
    if engine is not None:
        units.check_engine(engine)
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
    """FP32 bit patterns of ``A·B`` (..., M, N) for two quantised operands, as ``unit``
    computes them.

    A product of no dot products (M, N or a batch dimension 0) is empty and one of dot
    products of no terms (K = 0) is +0 throughout (the empty sum), as torch returns them;
    both are held to the unit as a product with terms is (formats, scales, K), so that what
    a unit refuses does not depend on the size of the data.
    """
    if qa.scale_format != qb.scale_format:
        raise UnitError("Both operands must come with the same kind of scales")
    if qa.scale_format == "fp32":
        gran = "block" if qa.block == 128 else "tensor" if qa.scale.ndim == 0 else "row"
        unit = fp32_unit(unit, qa.format, qb.format, gran)
    if qa.codes.size == 0 or qb.codes.size == 0:
        return _no_terms(unit, qa, qb)
    vs = VectorSet(a=qa.codes, b=qb.codes, a_format=qa.format, b_format=qb.format,
                   a_scale=qa.scale, b_scale=qb.scale, scale_format=qa.scale_format,
                   block=qa.block)
    if qa.tensor_scale is None:
        return _d32(unit, vs, engine)
    # NVFP4's per-tensor scales: alpha = fl32(ta * tb), as cuBLASLt's alpha; the exact unit
    # applies it exactly (one rounding of the whole), any other in the FP32 epilogue.
    alpha = fp32.times(qa.tensor_scale, qb.tensor_scale)
    spec = unit.spec_for(vs)
    if spec.exact:
        return _d32(unit, replace(vs, tensor_scale=np.asarray(alpha, np.float32)), engine)
    return fp32.alpha_times(alpha, _d32(unit, vs, engine), spec.d_nan)


def _no_terms(unit: units.Unit, qa: Quantised, qb: Quantised) -> npt.NDArray[np.uint32]:
    """+0 (FP32) of the shape of ``A·B`` when it has no dot products or K = 0, after the
    checks a vector set of these operands would meet (a vector set holds at least one term,
    so the spec is looked up from the formats as :meth:`~mxsim.presets.Preset.spec_for`
    does)."""
    granularity = None
    if qa.scale_format == "fp32":
        granularity = "tensor" if qa.scale.ndim == 0 else "row"
    spec = unit.preset.spec(qa.format, qb.format, scale_format=qa.scale_format,
                            block=qa.block, granularity=granularity)
    _check_fp32(unit, spec)
    k = qa.codes.shape[-1]
    spec.check_k(k)
    batch = np.broadcast_shapes(qa.codes.shape[:-2], qb.codes.shape[:-2])
    return np.zeros(batch + (qa.codes.shape[-2], qb.codes.shape[-1]), np.uint32)


def _check_fp32(unit: units.Unit, spec: UnitSpec) -> None:
    if spec.d_format != "fp32":
        raise UnitError(f"Unit {unit.name} gives {spec.d_format} results; mxsim.torch takes "
                        f"units with FP32 results")


def _d32(unit: units.Unit, vs: VectorSet, engine: str) -> npt.NDArray[np.uint32]:
    _check_fp32(unit, unit.spec_for(vs))
    return np.asarray(unit.compute(vs, engine), np.uint32)


def gemm_bits(x: npt.NDArray, w: npt.NDArray, unit: Any, recipe_name: Any, engine: str,
              opts: dict[str, Any], dtype: Any = None) -> npt.NDArray[np.uint32]:
    """FP32 bits of ``x @ w`` (x (..., M, K), w (..., K, N), float values) under a recipe;
    ``dtype`` (the inputs' torch dtype) picks the operand format of ``none``."""
    if isinstance(unit, str) and unit in library_paths():
        return _plan_bits(x, w, unit, recipe(recipe_name), engine, opts)
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


def library_paths() -> list[str]:
    """The library paths (``cublas-bf16``, ...) that name a GEMM plan by shape
    (:mod:`mxsim.plans.table`)."""
    from ..plans import table
    return table.paths()


#: The torch switches a library path's plans were recorded under (the H200 table: torch's
#: defaults there); mxsim.torch assumes them, and :func:`library_plan` says so.
ASSUMED_FLAGS = {"allow_tf32": "True for cublas-tf32 (FP32 operands as TF32), else unused",
                 "allow_bf16_reduced_precision_reduction": True,
                 "allow_fp16_reduced_precision_reduction": True,
                 "deterministic_algorithms": False, "CUBLAS_WORKSPACE_CONFIG": None}


def library_plan(unit: str, m: int, n: int, k: int) -> tuple[Any, str]:
    """(plan, note) that library path ``unit`` runs at M x N x K, and the torch flags assumed,
    in the note."""
    from ..plans import table
    found = table.lookup(unit, m, n, k)
    flags = ", ".join(f"{k}={v}" for k, v in ASSUMED_FLAGS.items())
    return found.plan, f"{found.note}; torch flags assumed: {flags}"


def _plan_bits(x: npt.NDArray, w: npt.NDArray, path: str, rec: Any, engine: str,
               opts: dict[str, Any]) -> npt.NDArray[np.uint32]:
    """FP32 bits of ``x @ w`` as library path ``path`` computes it at this shape: the
    operands rounded to the path's format (recipe ``none`` only), then the plan the table
    gives for (M, N, K) (M counts every row of a batched x times a matrix w, as torch
    flattens them)."""
    from ..plans.invariance import OPERAND_FORMAT
    from ..plans.run import run as run_plan

    if rec.elements is not None or rec.scales is not None:
        raise UnitError(f"unit {path!r} is a library call on {OPERAND_FORMAT[path]} operands; "
                        f"use recipe 'none' (the library takes the tensors as they are)")
    if opts:
        raise UnitError(f"unit {path!r} takes no options ({', '.join(sorted(opts))})")
    fmt = OPERAND_FORMAT[path]
    qa = rec.quantise(x, "a", fmt)
    qb = rec.quantise(w, "b", fmt)
    m = int(np.prod(x.shape[:-1])) if w.ndim == 2 else x.shape[-2]
    k, n = w.shape[-2], w.shape[-1]
    if qa.codes.size == 0 or qb.codes.size == 0:
        return np.zeros(np.broadcast_shapes(x.shape[:-1] + (1,), w.shape[:-2] + (1, n))[:-1]
                        + (n,), np.uint32)
    plan, _ = library_plan(path, m, n, k)
    if plan.out_format != "fp32":
        raise UnitError(f"the {path} plan writes {plan.out_format}; mxsim.torch takes FP32 "
                        f"results")
    vs = VectorSet(a=qa.codes, b=qb.codes, a_format=fmt, b_format=fmt)
    return np.asarray(run_plan(plan, vs, engine), np.uint32)


def _product_shape(op: str, xs: tuple[int, ...], ws: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of ``torch.matmul`` of tensors shaped ``xs`` and ``ws``: a vector x is one row
    and a vector w one column (each dropped from the result), and batch dimensions broadcast;
    a one-line UnitError naming both shapes where torch.matmul refuses them."""
    xs, ws = tuple(xs), tuple(ws)
    if not xs or not ws:
        raise UnitError(f"{op} needs tensors of at least one dimension, not x {xs} and w {ws}")
    kw = ws[0] if len(ws) == 1 else ws[-2]
    if xs[-1] != kw:
        raise UnitError(f"{op}: x {xs} and w {ws} do not chain (K {xs[-1]} against {kw})")
    n = ws[-1:] if len(ws) > 1 else ()
    if len(ws) <= 2:
        return xs[:-1] + n
    try:
        batch = np.broadcast_shapes(xs[:-2], ws[:-2])
    except ValueError:
        raise UnitError(f"{op}: the batch dimensions of x {xs} and w {ws} do not "
                        f"broadcast") from None
    return batch + xs[-2:-1] + n


def check_fits(c: Any, what: str, shape: tuple[int, ...]) -> None:
    """Refuse a bias or C that does not broadcast to the output's ``shape`` (torch's rule for
    addmm's input and F.linear's bias), in one line."""
    if c is None:
        return
    cs = tuple(c.shape)
    try:
        fits = np.broadcast_shapes(cs, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise UnitError(f"{what} {cs} does not fit the output {shape} (it must broadcast to "
                        f"that shape)")


def _stack(xv: npt.NDArray, wv: npt.NDArray) -> tuple[npt.NDArray, npt.NDArray]:
    """x and w values (shapes as :func:`_product_shape` took them) as (..., M, K) and
    (..., K, N): with a 2-D w every row of x is an M row (batched activations flattened),
    with a batched w the batch dimensions broadcast."""
    wv = wv[:, None] if wv.ndim == 1 else wv
    xv = xv[None, :] if xv.ndim == 1 else xv
    if wv.ndim == 2:                    # one weight: every row of x is an M row
        xv = xv.reshape(math.prod(xv.shape[:-1]), xv.shape[-1])
    else:
        batch = np.broadcast_shapes(xv.shape[:-2], wv.shape[:-2])
        xv = np.broadcast_to(xv, batch + xv.shape[-2:])
        wv = np.broadcast_to(wv, batch + wv.shape[-2:])
    return np.ascontiguousarray(xv), np.ascontiguousarray(wv)


def _out_dtype(*tensors: Any) -> Any:
    import torch
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    return dtype


def _gemm(x: Any, w: Any, c: Any, what: str, shape: tuple[int, ...], dtype: Any, unit: Any,
          recipe_name: Any, engine: str | None, opts: dict[str, Any]) -> Any:
    """``x @ w`` (plus ``c``, named ``what``, in FP32) of ``shape`` and ``dtype``, as the kernel
    returns it; shapes are checked already. On the meta device (no values) the unit, recipe
    and options are checked on an empty product of the same K, and the result is a meta
    tensor, as torch gives."""
    import torch
    engine = pick_engine(engine, x, w)
    if on_meta(x, w, c):
        k = x.shape[-1]
        gemm_bits(np.zeros((0, k), np.float32), np.zeros((k, 0), np.float32), unit,
                  recipe_name, engine, opts, dtype)
        return torch.empty(shape, dtype=dtype, device="meta")
    xv, wv = _stack(values(x, "x"), values(w, "w"))
    bits = gemm_bits(xv, wv, unit, recipe_name, engine, opts, dtype)
    bits = bits.reshape(shape)
    if c is not None:
        bits = fp32.plus(bits, values(c, what).astype(np.float32))
    return to_torch(bits, dtype, x.device)


def matmul(x: Any, w: Any, *, unit: Any = "exact", recipe: Any = "none",
           engine: str | None = None, **opts: Any) -> Any:
    """``torch.matmul(x, w)`` as ``unit`` computes it on ``recipe``'s codes.

    ``x`` (..., M, K) or (K,), ``w`` (K, N), (..., K, N) or (K,), broadcast as torch does;
    float32, bfloat16, float16 or float64 tensors, CPU or CUDA. ``opts``: ``a_format`` /
    ``b_format`` (element formats instead of the recipe's, or, for ``none``, of the unit's),
    ``scale_rule`` (MX recipes), ``pow2_scales`` (fp8-tensor, fp8-row). The result has the
    promoted dtype of ``x`` and ``w`` on ``x``'s device: the unit's FP32 D, rounded once to
    nearest even for 16-bit dtypes (float64 holds it exactly). Shapes with a zero dimension
    give torch's empty result, and K = 0 its zeros. Raises a one-line
    :class:`~mxsim.MxsimError` for bad input.
    """
    return _matmul("matmul", x, w, unit, recipe, engine, opts)


def mm(x: Any, w: Any, *, unit: Any = "exact", recipe: Any = "none", engine: str | None = None,
       **opts: Any) -> Any:
    """``torch.mm(x, w)``: :func:`matmul` of two matrices (M, K) and (K, N) only."""
    return _matmul("mm", x, w, unit, recipe, engine, opts)


def bmm(x: Any, w: Any, *, unit: Any = "exact", recipe: Any = "none", engine: str | None = None,
        **opts: Any) -> Any:
    """``torch.bmm(x, w)``: :func:`matmul` of (B, M, K) and (B, K, N) with the same B (bmm
    does not broadcast)."""
    return _matmul("bmm", x, w, unit, recipe, engine, opts)


def _matmul(op: str, x: Any, w: Any, unit: Any, recipe_name: Any, engine: str | None,
            opts: dict[str, Any]) -> Any:
    """:func:`matmul`, :func:`mm` or :func:`bmm` (``op``), each with torch's rule for shapes."""
    float_dtype(x, "x")
    float_dtype(w, "w")
    check_grad(x, w)
    xs, ws = tuple(x.shape), tuple(w.shape)
    if op == "mm" and (len(xs), len(ws)) != (2, 2):
        raise UnitError(f"mm takes matrices (M, K) and (K, N), not {xs} and {ws}")
    if op == "bmm" and ((len(xs), len(ws)) != (3, 3) or xs[0] != ws[0]):
        raise UnitError(f"bmm takes (B, M, K) and (B, K, N) with the same B (it does not "
                        f"broadcast), not {xs} and {ws}")
    shape = _product_shape(op, xs, ws)
    return _gemm(x, w, None, "", shape, _out_dtype(x, w), unit, recipe_name, engine, opts)


def linear(x: Any, weight: Any, bias: Any = None, *, unit: Any = "exact", recipe: Any = "none",
           engine: str | None = None, **opts: Any) -> Any:
    """``F.linear(x, weight, bias)``: ``x @ weight.T`` through the unit, then the bias.

    ``weight`` is (N, K) as in F.linear, or (K,) (the result then has no N dimension);
    ``bias`` broadcasts to the result ((N,) or ()) and is added to the FP32 result in FP32
    (one rounding), before the conversion to the output dtype, as cuBLASLt's bias epilogue
    does (measured on the H200 for torch._scaled_mm; assumed for bf16/fp16 GEMMs). Options
    as :func:`matmul`.
    """
    float_dtype(x, "x")
    float_dtype(weight, "weight")
    if bias is not None:
        float_dtype(bias, "bias")
    check_grad(x, weight, bias)
    xs, ws = tuple(x.shape), tuple(weight.shape)
    if len(ws) not in (1, 2):
        raise UnitError(f"linear takes a weight (out, in) or (in,), not {ws}")
    if not xs:
        raise UnitError(f"linear needs an x of at least one dimension, not {xs}")
    if xs[-1] != ws[-1]:
        raise UnitError(f"linear: x {xs} and weight {ws} do not chain (in features "
                        f"{xs[-1]} against {ws[-1]})")
    w = weight.t() if weight.ndim == 2 else weight
    shape = _product_shape("linear", xs, tuple(w.shape))
    check_fits(bias, "bias", shape)
    return _gemm(x, w, bias, "bias", shape, _out_dtype(x, weight), unit, recipe, engine, opts)


def addmm(c: Any, x: Any, w: Any, *, beta: Any = 1, alpha: Any = 1, unit: Any = "exact",
          recipe: Any = "none", engine: str | None = None, **opts: Any) -> Any:
    """``torch.addmm(c, x, w)``: ``fl32(x @ w + c)`` then the output dtype (beta = alpha = 1
    only); ``c`` broadcasts to (M, N)."""
    for t, what in ((c, "c"), (x, "x"), (w, "w")):
        float_dtype(t, what)
    check_grad(c, x, w)
    if beta != 1 or alpha != 1:
        raise UnitError(f"addmm is emulated with beta = alpha = 1 only, not beta={beta!r}, "
                        f"alpha={alpha!r}")
    if x.ndim != 2 or w.ndim != 2:
        raise UnitError(f"addmm takes matrices (M, K) and (K, N), not {tuple(x.shape)} and "
                        f"{tuple(w.shape)}")
    shape = _product_shape("addmm", x.shape, w.shape)
    check_fits(c, "c", shape)
    return _gemm(x, w, c, "c", shape, _out_dtype(c, x, w), unit, recipe, engine, opts)
