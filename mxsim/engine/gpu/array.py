"""Vector sets on the GPU: operands moved once, results brought back.

:func:`to_device` gives a vector set whose arrays are CuPy arrays (the NVFP4 ``tensor_scale``,
a scalar, stays on the host); :func:`to_host` brings D back as numpy codes.
"""

from __future__ import annotations

from typing import Any

import numpy.typing as npt

from ...vectors import VectorSet
from ..xp import is_numpy

__all__ = ["to_device", "to_host"]

_ARRAYS = ("a", "b", "c", "a_scale", "b_scale")


def to_device(vs: VectorSet) -> VectorSet:
    """``vs`` with its operands, scales and C as CuPy arrays (already there: unchanged) and no
    D. The set is not checked again: it was checked on the host."""
    import cupy
    moved = {name: None if getattr(vs, name) is None else cupy.asarray(getattr(vs, name))
             for name in _ARRAYS}
    return vs._derived(d=None, **moved)


def to_host(x: Any) -> npt.NDArray:
    """``x`` as a numpy array (copied from the GPU where it is a CuPy array)."""
    if is_numpy(x):
        return x
    import cupy
    return cupy.asnumpy(x)
