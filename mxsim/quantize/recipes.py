"""GEMM operands quantised by a named recipe: float matrices to codes, scales and factors.

A recipe is how a framework turns the two float operands of ``x @ w`` into what a block-scaled
unit takes: ``mx`` (E8M0 scales on blocks along K), ``nvfp4`` (UE4M3 scales and a per-tensor
FP32 scale) or ``fp8-tensor`` (one power-of-two scale per tensor). :func:`quantise_operands`
returns the vector set and the per-tensor factors the unit's output is multiplied by.

:class:`Recipe` (the registry :data:`OPERAND_RECIPES`, :func:`recipe`) quantises one operand at
a time, for :mod:`mxsim.torch`: ``none``, ``mxfp8``, ``mxfp8-e5m2``, ``mxfp6-e2m3``,
``mxfp6-e3m2``, ``mxfp4``, ``nvfp4``, ``fp8-tensor``, ``fp8-row``, ``fp8-block``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import formats
from ..errors import VectorFileError
from ..vectors import VectorSet
from .fp8 import to_fp8_amax, to_fp8_blocks
from .mx import to_mx
from .nvfp4 import to_nvfp4
from .rules import QuantizeError

__all__ = ["quantise_operands", "RECIPES", "RECIPE_SCALES", "Quantised", "Recipe",
           "OPERAND_RECIPES", "recipe"]

#: The block scales each recipe gives the unit.
RECIPE_SCALES = {"mx": "e8m0", "nvfp4": "ue4m3", "fp8-tensor": None}
RECIPES = tuple(RECIPE_SCALES)


def quantise_operands(x: npt.NDArray, w: npt.NDArray, recipe: str, a_format: str,
                      b_format: str, *, block: int | None = None, scale_rule: str = "rceil",
                      c_bits: npt.NDArray[np.uint32] | None = None
                      ) -> tuple[VectorSet, tuple[float, float]]:
    """The codes of ``x`` (M, K) and ``w`` (K, N) under ``recipe``, as a vector set, and the
    per-tensor factors ``(fx, fw)`` the unit's output is multiplied by to give the GEMM: 1
    and 1 for ``mx``, the FP32 tensor scales for ``nvfp4`` (E2M1 elements), ``2**-e`` for
    ``fp8-tensor``. ``block`` defaults to 32 (mx) and 16 (nvfp4); ``c_bits`` (FP32 bit
    patterns) enter the unit as C."""
    if recipe == "mx":
        block = block or 32
        sa, a = to_mx(x, a_format, block, scale_rule, axis=-1)
        sb, b = to_mx(w, b_format, block, scale_rule, axis=0)
        vs = VectorSet(a=a, b=b, a_format=a_format, b_format=b_format, c=c_bits, a_scale=sa,
                       b_scale=sb, scale_format="e8m0", block=block)
        return vs, (1.0, 1.0)
    if recipe == "nvfp4":
        block = block or 16
        sa, a, ta = to_nvfp4(x, block=block, axis=-1)
        sb, b, tb = to_nvfp4(w, block=block, axis=0)
        vs = VectorSet(a=a, b=b, a_format="e2m1", b_format="e2m1", c=c_bits, a_scale=sa,
                       b_scale=sb, scale_format="ue4m3", block=block)
        return vs, (ta, tb)
    ex, a = _pow2_quantize(x, formats.get(a_format))
    ew, b = _pow2_quantize(w, formats.get(b_format))
    vs = VectorSet(a=a, b=b, a_format=a_format, b_format=b_format, c=c_bits)
    return vs, (2.0 ** -ex, 2.0 ** -ew)


def _pow2_quantize(x: npt.NDArray, fmt: formats.Format) -> tuple[int, npt.NDArray[np.uint8]]:
    """Per-tensor power-of-two scale exponent ``e`` and the codes of ``x * 2**e`` (RNE)."""
    xf = np.asarray(x, np.float64)
    if not np.isfinite(xf).all():
        raise VectorFileError("The fp8-tensor recipe needs finite inputs")
    amax = float(np.abs(xf).max()) if xf.size else 0.0
    e = 0 if amax == 0 else int(np.floor(np.log2(fmt.max / amax)))
    while amax * 2.0 ** e > fmt.max:         # log2 in float can be one off at a power of two
        e -= 1
    return e, fmt.encode(np.ldexp(xf, e), "rne", saturate=True).astype(np.uint8)


# -- operand recipes: one operand of a GEMM at a time (mxsim.torch) ------------------------------

@dataclass(frozen=True)
class Quantised:
    """One GEMM operand quantised by a recipe: codes, their format and their scales.

    ``scale_format`` None (no scales), ``e8m0``/``ue4m3`` (block scale codes, ``block``
    elements along K) or ``fp32`` (factors whose shape gives the granularity, as the vector
    schema has them); ``tensor_scale`` is NVFP4's FP32 per-tensor scale, or None.
    """
    codes: npt.NDArray
    format: str
    scale: npt.NDArray | None = None
    scale_format: str | None = None
    block: int | None = None
    tensor_scale: np.float32 | None = None


@dataclass(frozen=True)
class Recipe:
    """A named way to quantise a GEMM's operands: A is (..., M, K), B is (..., K, N).

    ``elements``: the element format the recipe gives (None: the unit's, for ``none``);
    ``scales``: ``None``, ``e8m0``, ``ue4m3`` or ``fp32``; ``granularity``: for FP32 scales,
    ``tensor``, ``row`` or ``block``.
    """
    name: str
    summary: str
    elements: str | None
    scales: str | None
    block: int | None = None
    granularity: str | None = None
    options: tuple[str, ...] = ()

    def quantise(self, x: Any, role: str, fmt: str | None = None, **opts: Any) -> Quantised:
        """Operand ``x`` as this recipe quantises it: ``role`` ``"a"`` (blocks along its last
        axis) or ``"b"`` (along its second-to-last); ``fmt`` overrides the element format."""
        if role not in ("a", "b"):
            raise ValueError(f"Role must be 'a' or 'b', not {role!r}")
        bad = sorted(set(opts) - set(self.options))
        if bad:
            allowed = ", ".join(self.options) or "none"
            raise QuantizeError(f"Recipe {self.name} takes no option {bad[0]!r} (options: "
                                f"{allowed})")
        fmt = fmt or self.elements
        if fmt is None:
            raise QuantizeError(f"Recipe {self.name} needs an element format")
        if not isinstance(fmt, str):
            raise QuantizeError(f"Element format must be a format name such as 'e4m3', not "
                                f"{fmt!r}")
        return _QUANTISERS[self.scales or self.name](self, np.asarray(x), role, fmt, opts)


def _cast(r: Recipe, x: npt.NDArray, role: str, fmt: str, opts: dict) -> Quantised:
    """``none``: each value rounded once to nearest even (FP8: saturating, as torch >= 2.12
    casts; 16-bit formats: IEEE, overflow to Inf)."""
    f = formats.get(fmt)
    sat = f.bits <= 8
    return Quantised(f.encode(np.asarray(x, np.float64), "rne", saturate=sat), fmt)


def _mx(r: Recipe, x: npt.NDArray, role: str, fmt: str, opts: dict) -> Quantised:
    """MX: NaN and Inf are quantised as the rule's peer does (a NaN gives its block the NaN
    scale 0xFF, so the block's products are NaN, as torch's would be), a block of nothing but
    NaN too: a model whose activations hold a NaN runs as it runs in torch and on the GPU."""
    axis = -1 if role == "a" else -2
    scale, codes = to_mx(x, fmt, r.block, opts.get("scale_rule", "floor"), axis=axis,
                         nan_blocks="quantize")
    return Quantised(codes, fmt, scale, "e8m0", r.block)


def _nvfp4(r: Recipe, x: npt.NDArray, role: str, fmt: str, opts: dict) -> Quantised:
    # to_nvfp4 would suggest an explicit per-tensor scale, which this recipe does not take
    if not np.isfinite(x).all():
        raise QuantizeError("The nvfp4 recipe needs finite inputs (an Inf or NaN has no "
                            "per-tensor amax scale)")
    axis = -1 if role == "a" else -2
    scale, codes, ts = to_nvfp4(x, block=r.block, axis=axis)
    return Quantised(codes, fmt, scale, "ue4m3", r.block, np.float32(ts))


def _fp32(r: Recipe, x: npt.NDArray, role: str, fmt: str, opts: dict) -> Quantised:
    if r.granularity == "block":
        codes, s = to_fp8_blocks(x, fmt, tile=(1, 128) if role == "a" else (128, 128))
        return Quantised(codes, fmt, s, "fp32", 128)
    axis = None if r.granularity == "tensor" else -1 if role == "a" else -2
    pow2 = opts.get("pow2_scales", r.granularity == "row")
    if not isinstance(pow2, bool | np.bool_):
        raise QuantizeError(f"pow2_scales must be True or False, not {pow2!r}")
    codes, s = to_fp8_amax(x, fmt, axis=axis, pow2=bool(pow2))
    return Quantised(codes, fmt, s, "fp32", None)


_QUANTISERS = {"none": _cast, "e8m0": _mx, "ue4m3": _nvfp4, "fp32": _fp32}

_MX_SUMMARY = ("OCP MX: E8M0 scales on blocks of 32 along K (scale_rule: torchao's FLOOR by "
               "default; rceil, ceil, even, ocp, rceil-sat)")

#: The operand recipes by name (docs/torch.md has the table).
OPERAND_RECIPES = {r.name: r for r in (
    Recipe("none", "operands rounded once (RNE) to the unit's operand format, no scales",
           None, None),
    Recipe("mxfp8", f"{_MX_SUMMARY}; E4M3 elements", "e4m3", "e8m0", 32,
           options=("scale_rule",)),
    Recipe("mxfp8-e5m2", f"{_MX_SUMMARY}; E5M2 elements", "e5m2", "e8m0", 32,
           options=("scale_rule",)),
    Recipe("mxfp6-e2m3", f"{_MX_SUMMARY}; E2M3 elements", "e2m3", "e8m0", 32,
           options=("scale_rule",)),
    Recipe("mxfp6-e3m2", f"{_MX_SUMMARY}; E3M2 elements", "e3m2", "e8m0", 32,
           options=("scale_rule",)),
    Recipe("mxfp4", f"{_MX_SUMMARY}; E2M1 elements", "e2m1", "e8m0", 32,
           options=("scale_rule",)),
    Recipe("nvfp4", "NVFP4 (torchao 0.18): E2M1, UE4M3 scales on blocks of 16 along K, one "
                    "FP32 scale per tensor (two-level)", "e2m1", "ue4m3", 16),
    Recipe("fp8-tensor", "torchao Float8 tensor-wise: one FP32 scale max/amax per tensor, "
                         "E4M3 (saturating)", "e4m3", "fp32", None, "tensor",
           options=("pow2_scales",)),
    Recipe("fp8-row", "torchao Float8 row-wise: one FP32 scale per row of A and column of B "
                      "(powers of two by default, as torchao's rowwise recipe)", "e4m3", "fp32",
           None, "row", options=("pow2_scales",)),
    Recipe("fp8-block", "DeepSeek-V3 block-wise: FP32 scales amax/max per 1x128 block of A "
                        "and 128x128 block of B", "e4m3", "fp32", 128, "block"),
)}


def recipe(name: str | Recipe) -> Recipe:
    """The operand recipe of that name (raises QuantizeError in one line for another)."""
    if isinstance(name, Recipe):
        return name
    if name not in OPERAND_RECIPES:
        raise QuantizeError(f"Recipe must be one of {', '.join(OPERAND_RECIPES)}, not {name!r}")
    return OPERAND_RECIPES[name]
