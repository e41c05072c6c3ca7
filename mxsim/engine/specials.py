"""FP32 special-value codes that the engines produce."""

import numpy as np

__all__ = ["FP32_NAN", "FP32_POS_INF", "FP32_NEG_INF"]

#: Canonical NaN of every mxsim FP32 result (what NVIDIA tensor cores return).
FP32_NAN = np.uint32(0x7FFFFFFF)
FP32_POS_INF = np.uint32(0x7F800000)
FP32_NEG_INF = np.uint32(0xFF800000)
