""":func:`mxsim.torch.tensors.bf16_rne` compiled (numba): one pass over the FP32 bit patterns.

The numpy twin makes eight passes over the result's four bytes a value, most of the time that
a bfloat16 output adds to an FP32 one for a large product; the same integer formula here makes
one. tests/mxsim/test_torch.py holds the two and ``encode`` equal.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .. import _numba

__all__ = ["rne"]

_kernel = None


def _loop(bits, out):
    for i in range(bits.shape[0]):
        b = np.int64(bits[i])
        if (b & 0x7FFFFFFF) > 0x7F800000:           # NaN: the quiet NaN with its sign
            out[i] = 0x7FC0 | ((b >> 16) & 0x8000)
        else:                                       # ties to the even half
            out[i] = (b + 0x7FFF + ((b >> 16) & 1)) >> 16


def rne(bits: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint16]:
    """BF16 codes of FP32 bit patterns, as ``bf16_rne`` gives them (raises ImportError without
    numba)."""
    global _kernel
    if _kernel is None:
        _kernel = _numba.load().njit(cache=_numba.cache(), nogil=True)(_loop)
    flat = np.ascontiguousarray(bits, np.uint32).reshape(-1)
    out = np.empty(flat.shape, np.uint16)
    _kernel(flat, out)
    return out.reshape(np.shape(bits))
