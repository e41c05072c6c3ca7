"""The FP32 arithmetic of the kernels' epilogues, on bit patterns (each op rounded once, RNE).

cuBLASLt's epilogue scales the accumulator by ``alpha`` and adds a bias in FP32 before it
converts the result to the output dtype; these are those two operations, built on the fast
engine's IEEE FP32 multiply and fused multiply-add.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .. import formats
from ..engine.fast.scales import fma_fp32, mul_fp32

__all__ = ["alpha_times", "plus", "times"]

_ONE = np.uint32(0x3F800000)


def times(x: np.float32, y: np.float32) -> np.float32:
    """``fl32(x * y)`` of two FP32 scalars (one IEEE multiply, RNE)."""
    bits = mul_fp32(np.asarray(x, np.float32).reshape(1).view(np.uint32),
                    np.asarray(y, np.float32).reshape(1).view(np.uint32))
    return np.asarray(bits, np.uint32).view(np.float32)[0]


def alpha_times(alpha: np.float32, d: npt.NDArray[np.uint32], nan_code: int
                ) -> npt.NDArray[np.uint32]:
    """``fl32(alpha * D) + 0`` (cuBLASLt's ``alpha * D + beta * C`` with ``beta = 0``: a -0
    product becomes +0, as the H200's per-tensor epilogue gives); NaN is ``nan_code``."""
    a = np.broadcast_to(np.asarray(alpha, np.float32).view(np.uint32), d.shape)
    out = mul_fp32(a, d)
    out = np.where(out == np.uint32(0x80000000), np.uint32(0), out)
    nan = formats.get("fp32").classify(out) == formats.Class.NAN
    return np.where(nan, np.uint32(nan_code), out).astype(np.uint32)


def plus(d: npt.NDArray[np.uint32], bias: npt.NDArray[np.float32]) -> npt.NDArray[np.uint32]:
    """``fl32(D + bias)`` (bias broadcast to D's shape): one IEEE FP32 add, RNE."""
    b = np.broadcast_to(np.asarray(bias, np.float32), d.shape).view(np.uint32)
    one = np.broadcast_to(_ONE, d.shape)
    return np.asarray(fma_fp32(d, one, b), np.uint32)
