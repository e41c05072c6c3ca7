"""The Python front door: ``mxsim.matmul`` on code arrays."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from . import units
from .errors import VectorFileError
from .quantize import RECIPES, quantise_operands
from .vectors import VectorSet

__all__ = ["matmul", "gemm"]


def matmul(a: Any, b: Any, c: Any = None, *, unit: str = "exact", a_format: str = "e4m3",
           b_format: str | None = None, a_scale: Any = None, b_scale: Any = None,
           scale_format: str | None = None, block: int | None = None,
           tensor_scale: Any = None, engine: str = "fast") -> npt.NDArray[np.uint32]:
    """D = A·B + C on codes, as ``unit`` computes it; returns the output bit patterns.

    ``a`` is ``(..., M, K)`` and ``b`` ``(..., K, N)`` element codes; ``c`` is ``(..., M, N)``
    FP32 bit patterns (``np.uint32``) or float32 values. Scales follow the vector-set schema
    (``docs/vectors.md``); ``scale_format`` defaults to ``e8m0`` for uint8 scales and ``fp32``
    for float32 ones, and ``block`` to ``K / a_scale.shape[-1]`` for code scales.

    Codes must be integer arrays whose every value is a code of the format (0 to 2**bits - 1):
    a float array or a code out of range raises :class:`~mxsim.VectorFileError` rather than
    being cast (float values go through :func:`gemm`, which quantises them). ``engine`` is
    ``fast``, ``reference`` or ``gpu`` (:data:`mxsim.units.ENGINES`; the same bits).
    """
    from . import formats

    b_format = b_format or a_format
    fa, fb = formats.get(a_format), formats.get(b_format)
    a = _codes("a", a, fa.bits, "element codes", fa.code_dtype)
    b = _codes("b", b, fb.bits, "element codes", fb.code_dtype)
    if c is not None:
        c = np.asarray(c)
        c = (c.astype(np.float32).view(np.uint32) if c.dtype.kind == "f"
             else _codes("c", c, 32, "FP32 bit patterns", np.uint32))
    if a_scale is not None or b_scale is not None:
        if a_scale is None or b_scale is None:
            raise VectorFileError("Pass both a_scale and b_scale, or neither")
        a_scale, b_scale = np.asarray(a_scale), np.asarray(b_scale)
        if scale_format is None:
            scale_format = "fp32" if a_scale.dtype.kind == "f" else "e8m0"
        if scale_format == "fp32":
            a_scale, b_scale = a_scale.astype(np.float32), b_scale.astype(np.float32)
            if block is None and a_scale.ndim and a_scale.shape[-1] not in (1,):
                block = 128
        else:
            a_scale = _codes("a_scale", a_scale, 8, f"{scale_format} scale codes")
            b_scale = _codes("b_scale", b_scale, 8, f"{scale_format} scale codes")
            if block is None and a_scale.ndim and a_scale.shape[-1]:
                block = a.shape[-1] // a_scale.shape[-1]
    if tensor_scale is not None:
        tensor_scale = np.asarray(tensor_scale, np.float32).reshape(())
    vs = VectorSet(a=a, b=b, a_format=a_format, b_format=b_format, c=c,
                   a_scale=a_scale, b_scale=b_scale, tensor_scale=tensor_scale,
                   scale_format=scale_format, block=block)
    return units.get(unit).compute(vs, engine)


def _codes(name: str, x: Any, bits: int, what: str, dtype: Any = np.uint8) -> npt.NDArray:
    """``x`` as an array of ``dtype`` codes, refusing floats and values outside ``bits``."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "ui":
        hint = "; pass float values to mxsim.gemm" if arr.dtype.kind == "f" else ""
        raise VectorFileError(f"{name} must be an integer array of {what}, not "
                              f"{arr.dtype}{hint}")
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= 1 << bits):
        bad = int(arr.min()) if int(arr.min()) < 0 else int(arr.max())
        raise VectorFileError(f"{name} must hold {what} from 0 to {(1 << bits) - 1}, not {bad}")
    return arr.astype(dtype)


def gemm(x: Any, w: Any, c: Any = None, *, unit: str = "exact", recipe: str | None = None,
         x_format: str | None = None, w_format: str | None = None,
         scale_rule: str = "rceil", engine: str = "fast") -> npt.NDArray[np.float32]:
    """``x @ w (+ c)`` on float arrays, quantised by a recipe and computed as ``unit`` does.

    The float front door: ``gemm(x, w, unit="hopper-cublas")`` quantises with mxsim's recipe
    and then computes as cuBLASLt's FP8 GEMM does on the H200 without fast accumulation
    (torch's default); the recipe is mxsim's, not one a framework is known to use.
    ``x`` is (M, K), ``w`` is (K, N), ``c`` (M, N);
    the result is float32 (M, N). Element formats default to the unit's first operand pair
    (e4m3 where it takes e4m3).

    Recipes (``recipe=None`` picks the one the unit's scales call for):

    ``mx``
        E8M0 scales on blocks of 32 along K (:func:`mxsim.quantize.to_mx` with
        ``scale_rule``, RCEIL by default as cuBLAS and Transformer Engine do); C enters the
        unit as its accumulator.
    ``nvfp4``
        :func:`mxsim.quantize.to_nvfp4` (E2M1, UE4M3 scales on blocks of 16 along K, one FP32
        scale per tensor). The unit computes ``A·B`` on the codes; the epilogue
        ``alpha · acc + C``, ``alpha = fl32(ta · tb)``, is rounded once to FP32 (a model of
        cuBLAS's epilogue, not verified on hardware).
    ``fp8-tensor``
        One power-of-two scale per tensor, ``2**floor(log2(max / amax))``, elements rounded
        once (RNE, saturating); the unit computes ``A·B`` and the scales are divided out
        exactly (rounded once only if the result leaves FP32's range). No C
        (``torch._scaled_mm`` has none).
    """
    from . import formats

    x = np.asarray(x)
    w = np.asarray(w)
    if x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[0]:
        raise VectorFileError(f"gemm takes x (M, K) and w (K, N), not {x.shape} and {w.shape}")
    u = units.get(unit)
    kinds = [s for s, _ in u.preset.scales]
    pairs = u.preset.pairs
    if recipe is None:
        recipe = "mx" if "e8m0" in kinds else "nvfp4" if "ue4m3" in kinds else "fp8-tensor"
    if recipe not in RECIPES:
        raise VectorFileError(f"Recipe must be one of {', '.join(RECIPES)}, not {recipe!r}")
    default = ("e4m3", "e4m3") if ("e4m3", "e4m3") in pairs else pairs[0]
    fa, fb = x_format or default[0], w_format or x_format or default[1]
    fp32 = formats.get("fp32")
    c_bits = None if c is None else np.asarray(c, np.float32).reshape(
        x.shape[0], w.shape[1]).view(np.uint32)
    if recipe == "fp8-tensor" and c is not None:
        raise VectorFileError("The fp8-tensor recipe takes no C (torch._scaled_mm has none)")
    # C enters an MX unit as its accumulator; NVFP4 adds it in the epilogue.
    vs, (fx, fw) = quantise_operands(x, w, recipe, fa, fb, scale_rule=scale_rule,
                                     c_bits=c_bits if recipe == "mx" else None)
    if recipe == "mx":
        return u.compute(vs, engine).view(np.float32)
    acc = fp32.decode(u.compute(vs, engine))
    if recipe == "nvfp4":
        scaled = acc * float(np.float32(fx) * np.float32(fw))    # exact: 24 x 24 bits
        return _round_once(scaled, None if c_bits is None else fp32.decode(c_bits))
    return _round_once(acc * (fx * fw), None)      # powers of two: exact in float64


def _round_once(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64] | None
                ) -> npt.NDArray[np.float32]:
    """FP32 of ``x + y`` (exact float64 arrays; y may be None), rounded once (RNE, IEEE)."""
    from . import formats
    from .engine.exactsum import exact_sums, float_terms

    fp32 = formats.get("fp32")
    if y is None:
        return fp32.encode(x, "rne", saturate=False).view(np.float32)
    with np.errstate(invalid="ignore"):          # Inf + -Inf is NaN, as IEEE says
        special = ~np.isfinite(x + y)
    n = x.size
    sx, gx, ex = float_terms(x.ravel())
    sy, gy, ey = float_terms(y.ravel())
    neg, mag, lsb, sticky, zero = exact_sums(
        np.concatenate([np.arange(n), np.arange(n)]), np.concatenate([sx, sy]),
        np.concatenate([gx, gy]), np.concatenate([ex, ey]), n)
    out = fp32.encode(np.zeros(n), "rne")                       # +0 for exact zeros
    live = ~zero
    out[live] = formats.round_to(fp32, neg[live], lsb[live], mag[live], sticky[live], "rne",
                                 formats.Overflow.IEEE)
    out = out.reshape(x.shape)
    out[special] = fp32.encode((x + y)[special], "rne", saturate=False)
    return out.view(np.float32)
