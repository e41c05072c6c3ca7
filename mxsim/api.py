"""The Python front door: ``mxsim.matmul`` on code arrays."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from . import units
from .errors import VectorFileError
from .vectors import VectorSet

__all__ = ["matmul"]


def matmul(a: Any, b: Any, c: Any = None, *, unit: str = "exact", a_format: str = "e4m3",
           b_format: str | None = None, a_scale: Any = None, b_scale: Any = None,
           scale_format: str | None = None, block: int | None = None,
           tensor_scale: Any = None, engine: str = "fast") -> npt.NDArray[np.uint32]:
    """D = A·B + C on codes, as ``unit`` computes it; returns the output bit patterns.

    ``a`` is ``(..., M, K)`` and ``b`` ``(..., K, N)`` element codes; ``c`` is ``(..., M, N)``
    FP32 bit patterns (``np.uint32``) or float32 values. Scales follow the vector-set schema
    (``docs/vectors.md``); ``scale_format`` defaults to ``e8m0`` for uint8 scales and ``fp32``
    for float32 ones, and ``block`` to ``K / a_scale.shape[-1]`` for code scales.
    """
    a = np.asarray(a, np.uint8)
    b = np.asarray(b, np.uint8)
    if c is not None:
        c = np.asarray(c)
        c = c.astype(np.float32).view(np.uint32) if c.dtype.kind == "f" else c.astype(np.uint32)
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
            a_scale, b_scale = a_scale.astype(np.uint8), b_scale.astype(np.uint8)
            if block is None and a_scale.ndim and a_scale.shape[-1]:
                block = a.shape[-1] // a_scale.shape[-1]
    if tensor_scale is not None:
        tensor_scale = np.asarray(tensor_scale, np.float32).reshape(())
    vs = VectorSet(a=a, b=b, a_format=a_format, b_format=b_format or a_format, c=c,
                   a_scale=a_scale, b_scale=b_scale, tensor_scale=tensor_scale,
                   scale_format=scale_format, block=block).validate()
    return units.get(unit).compute(vs, engine)
