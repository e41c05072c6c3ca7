"""Interop with ml_dtypes and torch: the same bits viewed as their arrays and tensors.

Nothing here rounds or converts a value: codes are reinterpreted bit for bit (FP4 is packed
two per byte for torch's ``float4_e2m1fn_x2``). torch and ml_dtypes are imported on use.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import FormatError
from .format import Format
from .packing import pack_fp4, unpack_fp4
from .registry import FORMATS, get

__all__ = ["to_ml_dtypes", "from_ml_dtypes", "to_torch", "from_torch"]


def _ml_dtype(fmt: Format) -> np.dtype:
    if fmt.ml_dtypes_name is None:
        raise FormatError(f"Format {fmt.name} has no ml_dtypes counterpart")
    if fmt.ml_dtypes_name in ("float16", "float32"):
        return np.dtype(fmt.ml_dtypes_name)
    import ml_dtypes
    return np.dtype(getattr(ml_dtypes, fmt.ml_dtypes_name))


def to_ml_dtypes(codes: Any, fmt: str | Format) -> npt.NDArray:
    """View codes as the matching ml_dtypes (or numpy) array, without changing any bit."""
    f = get(fmt)
    dt = _ml_dtype(f)
    c = f.checked_codes(codes)
    return c.astype(np.dtype(f"u{dt.itemsize}")).view(dt)


def from_ml_dtypes(array: Any) -> tuple[npt.NDArray, Format]:
    """Codes and format of an ml_dtypes/numpy float array, without changing any bit."""
    a = np.asarray(array)
    for f in FORMATS.values():
        if f.ml_dtypes_name is not None and _ml_dtype(f) == a.dtype:
            return a.view(np.dtype(f"u{a.dtype.itemsize}")).astype(f.code_dtype), f
    raise FormatError(f"No mxsim format matches dtype {a.dtype}")


def to_torch(codes: Any, fmt: str | Format):
    """A torch tensor holding the same bits (FP4 is packed two per byte into float4_e2m1fn_x2)."""
    import torch

    f = get(fmt)
    if f.torch_name is None:
        raise FormatError(f"Format {f.name} has no torch dtype")
    dtype = getattr(torch, f.torch_name)
    c = f.checked_codes(codes)
    if f.name == "e2m1":
        c = pack_fp4(c)
    raw = {1: torch.uint8, 2: torch.uint16, 4: torch.uint32}[dtype.itemsize]
    return torch.from_numpy(np.ascontiguousarray(c.astype(np.dtype(f"u{dtype.itemsize}")))
                            ).view(raw).view(dtype)


def from_torch(tensor) -> tuple[npt.NDArray, Format]:
    """Codes and format of a torch tensor, without changing any bit (FP4 is unpacked)."""
    import torch

    for f in FORMATS.values():
        if f.torch_name is not None and getattr(torch, f.torch_name, None) == tensor.dtype:
            raw = {1: torch.uint8, 2: torch.uint16, 4: torch.uint32}[tensor.dtype.itemsize]
            c = tensor.detach().cpu().contiguous().view(raw).numpy()
            if f.name == "e2m1":
                c = unpack_fp4(c)
            return c.astype(f.code_dtype), f
    raise FormatError(f"No mxsim format matches torch dtype {tensor.dtype}")
