"""``torch._scaled_mm`` as cuBLASLt computes it on Hopper (sm_90), on FP8 torch tensors.

The unit is picked from the scales and ``use_fast_accum`` as cuBLASLt picks its kernel:

================ ================ ===================================================
scales           use_fast_accum   unit
================ ================ ===================================================
per tensor       True             ``hopper-cublas-fast`` + the ``alpha`` epilogue
per tensor       False            ``hopper-cublas-rowwise`` (per-tensor: ``alpha``)
row-wise         False            ``hopper-cublas-rowwise`` (``col-row``)
row-wise         True             ``hopper-cublas-fast`` + the ``col-row`` epilogue
block-wise       False            ``hopper-cublas-blockwise``
block-wise       True             refused, as torch refuses it
================ ================ ===================================================

The FP32 result is converted to ``out_dtype`` (rounded once to nearest even for bfloat16 and
float16); a bias (bf16 or fp16, 16-bit outputs only, as torch allows) is added to the scaled
FP32 result in FP32 first: ``bf16(fl32(D32 + bias))``, what the H200 does (docs/gpu.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import units
from ..errors import UnitError
from ..quantize.recipes import Quantised
from . import fp32
from .functions import check_fits, check_grad, compute, pick_engine
from .tensors import check_tensor, float_dtype, fp8_codes, fp8_format, on_meta, to_torch, values

__all__ = ["scaled_mm", "scaled_unit", "granularity"]

_FAST_BLOCK = ("torch._scaled_mm refuses fast accumulation with block-wise scales (\"scaled_gemm "
               "doesn't support fast accum with 128x128 blockwise scaling\")")


def granularity(sa: tuple[int, ...], sb: tuple[int, ...], m: int, n: int, k: int) -> str:
    """``tensor``, ``row`` or ``block`` from the scale shapes, as torch._scaled_mm reads them
    (one-line UnitError for shapes it does not take)."""
    if int(np.prod(sa)) == 1 and int(np.prod(sb)) == 1:
        return "tensor"
    if tuple(sa) == (m, 1) and tuple(sb) == (1, n):
        return "row"
    if k % 128 == 0 and n % 128 == 0 and tuple(sa) == (m, k // 128) \
            and tuple(sb) == (k // 128, n // 128):
        return "block"
    raise UnitError(f"scale_a {tuple(sa)} and scale_b {tuple(sb)} are neither per-tensor (1 "
                    f"element each), row-wise ({m}, 1) and (1, {n}), nor block-wise ({m}, "
                    f"K/128) and (K/128, N/128) for M={m}, N={n}, K={k}")


def scaled_unit(gran: str, use_fast_accum: bool) -> str:
    """The preset cuBLASLt's kernel is modelled by, for a scale granularity and fast accum."""
    if gran == "block":
        if use_fast_accum:
            raise UnitError(_FAST_BLOCK)
        return "hopper-cublas-blockwise"
    return "hopper-cublas-fast" if use_fast_accum else "hopper-cublas-rowwise"


def _check_scales(scale_a: Any, scale_b: Any) -> None:
    import torch
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if not isinstance(s, torch.Tensor) or s.dtype != torch.float32:
            raise UnitError(f"{name} must be a float32 tensor, not "
                            f"{getattr(s, 'dtype', type(s).__name__)}")
        check_tensor(s, name)


def _out_name(out_dtype: Any, scale_result: Any) -> str:
    name = str(out_dtype).removeprefix("torch.")
    if scale_result is not None:
        raise UnitError("scale_result scales FP8 outputs, which mxsim.torch.scaled_mm does not "
                        "model; pass out_dtype=torch.bfloat16 or torch.float32")
    if name not in ("float32", "bfloat16", "float16"):
        raise UnitError(f"out_dtype must be torch.float32, torch.bfloat16 or torch.float16 (FP8 "
                        f"outputs are not modelled), not {out_dtype}")
    return name


def scaled_mm(a: Any, b: Any, scale_a: Any, scale_b: Any, bias: Any = None,
              scale_result: Any = None, out_dtype: Any = None, use_fast_accum: bool = False,
              *, unit: Any = None, engine: str | None = None) -> Any:
    """``torch._scaled_mm(a, b, scale_a, scale_b, ...)`` as the modelled cuBLASLt kernel.

    ``a`` (M, K) and ``b`` (K, N) are float8_e4m3fn / float8_e5m2 tensors (any layout; torch
    wants ``b`` column-major), scales float32: per tensor (one element each), row-wise
    ((M, 1), (1, N)) or block-wise ((M, K/128), (K/128, N/128)). ``unit`` None picks the
    Hopper preset from the scales and ``use_fast_accum`` (module docstring); another unit gets
    the matching FP32 epilogue (:func:`mxsim.torch.functions.fp32_unit`). Returns a tensor of
    ``out_dtype`` (M, N) on ``a``'s device.
    """
    import torch
    fa, fb = fp8_format(a, "a"), fp8_format(b, "b")
    _check_scales(scale_a, scale_b)
    if bias is not None and float_dtype(bias, "bias") not in ("bfloat16", "float16"):
        raise UnitError(f"Bias must be BFloat16 or Half, but got {bias.dtype} (torch)")
    check_grad(a, b, scale_a, scale_b, bias)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise UnitError(f"scaled_mm takes a (M, K) and b (K, N), not {tuple(a.shape)} and "
                        f"{tuple(b.shape)}")
    name = _out_name(out_dtype, scale_result)
    (m, k), n = a.shape, b.shape[1]
    gran = granularity(tuple(scale_a.shape), tuple(scale_b.shape), m, n, k)
    if gran == "block" and use_fast_accum:
        raise UnitError(_FAST_BLOCK)
    if bias is not None and name == "float32":
        raise UnitError("Bias is not supported when out_dtype is set to Float32 (torch)")
    check_fits(bias, "bias", (m, n))
    u = units.get(unit if unit is not None else scaled_unit(gran, use_fast_accum))
    meta = on_meta(a, b, scale_a, scale_b, bias)
    if meta:        # no values: the unit is checked on an empty product of the same K
        ca, cb = np.zeros((0, k), np.uint8), np.zeros((k, 0), np.uint8)
        sa = np.ones(tuple(scale_a.shape), np.float32)
        sb = np.ones(tuple(scale_b.shape), np.float32)
    else:
        (ca, _), (cb, _) = fp8_codes(a, "a"), fp8_codes(b, "b")
        sa, sb = values(scale_a, "scale_a"), values(scale_b, "scale_b")
    if gran == "tensor":
        sa, sb = sa.reshape(()), sb.reshape(())
    block = 128 if gran == "block" else None
    bits = compute(u, Quantised(ca, fa, sa, "fp32", block), Quantised(cb, fb, sb, "fp32", block),
                   pick_engine(engine, a, b))
    if meta:
        return torch.empty((m, n), dtype=out_dtype, device="meta")
    if bias is not None:
        bits = fp32.plus(bits, values(bias, "bias"))
    return to_torch(bits, out_dtype, a.device)
