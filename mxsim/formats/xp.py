"""The array module of an engine's arrays: numpy, or CuPy for arrays on an NVIDIA GPU.

:func:`of` gives the module whose arrays its arguments are (numpy unless one of them is a
CuPy array, or an array type that names its module in ``__xp__``); the engine and the
rounding code create every array through it, so the same code computes on the CPU (numpy)
or on the GPU (CuPy) with whichever module its inputs belong to. CuPy is never imported
here: a CuPy array's module is looked up from the array's type.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import numpy as np

__all__ = ["of", "is_numpy", "to_numpy"]


def _module(x: Any) -> ModuleType | None:
    """The array module of ``x`` when it is not a numpy array or a scalar, else None."""
    if x is None or isinstance(x, np.ndarray | np.generic | int | float | bool):
        return None
    mod = getattr(type(x), "__xp__", None)
    if mod is not None:
        return mod
    top = type(x).__module__.split(".")[0]
    if top == "cupy":
        return sys.modules["cupy"]
    return None


def of(*arrays: Any) -> ModuleType:
    """numpy, or the module of the first argument that is not a numpy array (CuPy)."""
    for x in arrays:
        mod = _module(x)
        if mod is not None:
            return mod
    return np


def is_numpy(*arrays: Any) -> bool:
    """True when every argument is a numpy array or a scalar (the CPU path)."""
    return of(*arrays) is np


def to_numpy(x: Any) -> Any:
    """``x`` as a numpy array (copied from the GPU where it lives there)."""
    mod = _module(x)
    if mod is None:
        return x
    return mod.asnumpy(x)
