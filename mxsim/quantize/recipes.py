"""GEMM operands quantised by a named recipe: float matrices to codes, scales and factors.

A recipe is how a framework turns the two float operands of ``x @ w`` into what a block-scaled
unit takes: ``mx`` (E8M0 scales on blocks along K), ``nvfp4`` (UE4M3 scales and a per-tensor
FP32 scale) or ``fp8-tensor`` (one power-of-two scale per tensor). :func:`quantise_operands`
returns the vector set and the per-tensor factors the unit's output is multiplied by.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .. import formats
from ..errors import VectorFileError
from ..vectors import VectorSet
from .mx import to_mx
from .nvfp4 import to_nvfp4

__all__ = ["quantise_operands", "RECIPES", "RECIPE_SCALES"]

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
