"""torch tensors to exact numpy values and codes, and FP32 results back to torch dtypes.

Nothing here rounds except :func:`to_torch`, which rounds an FP32 result once (RNE) to a 16-bit
output dtype, as the real kernels' epilogues convert their FP32 accumulators.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .. import formats
from ..errors import UnitError

__all__ = ["check_tensor", "float_dtype", "fp8_format", "on_meta", "values", "fp8_codes",
           "to_torch", "fp32_bits_of", "bf16_rne", "fp16_rne", "FP8_DTYPES", "OUT_DTYPES"]

#: torch's FP8 dtypes by name, and the mxsim format each holds.
FP8_DTYPES = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}
#: Output dtypes the functions return, and the mxsim format each is.
OUT_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "float64": None}


def _name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _host(t: Any) -> Any:
    """``t``'s values as a dense CPU tensor: a sparse layout is densified (the product of its
    values is the product a unit computes), with no copy where ``t`` is already one."""
    import torch
    t = t.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    return t.to("cpu")


def check_tensor(t: Any, what: str) -> None:
    """Raise UnitError unless ``t`` is a torch tensor mxsim.torch can read: dense (strided) or
    sparse, on any device; a nested tensor is refused (it is many GEMMs of other shapes)."""
    import torch
    if not isinstance(t, torch.Tensor):
        raise UnitError(f"{what} must be a torch.Tensor, not {type(t).__name__}")
    if t.is_nested:
        raise UnitError(f"{what} is a nested tensor, which mxsim.torch does not take; unbind it "
                        f"and multiply each of its tensors")


def float_dtype(t: Any, what: str) -> str:
    """The name of ``t``'s dtype, which must be float32, bfloat16, float16 or float64 (one-line
    UnitError otherwise, and for what :func:`check_tensor` refuses)."""
    check_tensor(t, what)
    name = _name(t.dtype)
    if name not in OUT_DTYPES:
        raise UnitError(f"{what} must be float32, bfloat16, float16 or float64, not {name}")
    return name


def fp8_format(t: Any, what: str) -> str:
    """The mxsim format of an FP8 tensor (one-line UnitError for another dtype, and for what
    :func:`check_tensor` refuses)."""
    check_tensor(t, what)
    fmt = FP8_DTYPES.get(_name(t.dtype))
    if fmt is None:
        raise UnitError(f"{what} must be {' or '.join('torch.' + k for k in FP8_DTYPES)}, not "
                        f"{t.dtype}")
    return fmt


def on_meta(*tensors: Any) -> bool:
    """Whether any of the tensors is on the meta device (shapes and dtypes, no values): torch
    then returns a meta result, and so does mxsim.torch."""
    return any(getattr(t, "is_meta", False) for t in tensors)


def values(t: Any, what: str) -> npt.NDArray:
    """A floating tensor's values as an exact numpy array: float32 for 32- and 16-bit
    dtypes (bf16/fp16 convert exactly), float64 for float64."""
    import torch
    name = float_dtype(t, what)
    h = _host(t)
    if name == "bfloat16":
        return (h.view(torch.int16).numpy().astype(np.uint32) << np.uint32(16)).view(np.float32)
    return h.numpy().astype(np.float64 if name == "float64" else np.float32)


def fp8_codes(t: Any, what: str) -> tuple[npt.NDArray[np.uint8], str]:
    """An FP8 tensor's codes (as stored, any layout) and its mxsim format."""
    import torch
    fmt = fp8_format(t, what)
    t = t.detach()
    if t.layout == torch.strided and t.device.type != "cpu":
        # A column-major operand (torch._scaled_mm's B) is made row-major on its own device,
        # where it is a copy kernel: numpy's strided byte copy of the Llama layer's weights
        # on the host took 0.4 s. The values and their order are the same.
        t = t.contiguous()
    return np.ascontiguousarray(_host(t).view(torch.uint8).numpy()), fmt


def fp32_bits_of(x: npt.NDArray) -> npt.NDArray[np.uint32]:
    """FP32 bit patterns of float32 values (float64 values must be FP32 values)."""
    return np.ascontiguousarray(np.asarray(x, np.float32)).view(np.uint32)


def fp16_rne(bits: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint16]:
    """FP16 codes of FP32 bit patterns, rounded once to nearest even (IEEE overflow)."""
    fmt = formats.get("fp16")
    return fmt.encode(bits.view(np.float32), "rne", saturate=False).astype(np.uint16)


def bf16_rne(bits: npt.NDArray[np.uint32], exact: bool = False,
             kernel: bool | None = None) -> npt.NDArray[np.uint16]:
    """BF16 codes of FP32 bit patterns, rounded once to nearest even (IEEE overflow to Inf;
    NaN as :meth:`~mxsim.formats.Format.encode` gives it: 0x7FC0 with the sign; a GPU's
    conversion may give another NaN code, which mxsim does not model).

    BF16 is FP32's top half, so for a non-NaN the rounding is an integer add on the bits:
    ``(b + 0x7FFF + lsb) >> 16``, where ``lsb`` is bit 16 (ties go to the even half; a carry
    into the exponent is the next binade, or Inf). ``exact=True`` calls ``encode`` on every
    value instead (the twin the tests hold equal). ``kernel`` chooses the code, never the
    result: None runs the formula compiled (:mod:`._bf16`, numba) for 65,536 values or more
    where numba is installed, True for any size, False in numpy."""
    fmt = formats.get("bf16")
    if exact:
        return fmt.encode(bits.view(np.float32), "rne", saturate=False).astype(np.uint16)
    from ..engine.fast import kernel_available  # numba can be imported
    if (kernel or (kernel is None and np.size(bits) >= 1 << 16)) and isinstance(
            bits, np.ndarray) and kernel_available():
        from . import _bf16
        return _bf16.rne(bits)
    # In uint32: no non-NaN pattern overflows (-Inf, 0xFF800000, is the largest), and a NaN's
    # wrapped sum is replaced below.
    bits = np.asarray(bits, np.uint32)
    t = bits >> np.uint32(16)
    t &= np.uint32(1)
    t += bits
    t += np.uint32(0x7FFF)
    t >>= np.uint32(16)
    out = t.astype(np.uint16)
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    if nan.any():
        # encode's NaN: the quiet NaN 0x7FC0 with the input's sign
        out[nan] = (0x7FC0 | (bits[nan] >> np.uint32(16)) & 0x8000).astype(np.uint16)
    return out


def to_torch(bits: npt.NDArray[np.uint32], dtype: Any, device: Any) -> Any:
    """FP32 results (bit patterns) as a tensor of ``dtype`` on ``device``: float32 and
    float64 exactly, bfloat16 and float16 rounded once to nearest even (IEEE overflow)."""
    import torch
    name = _name(dtype)
    shape = np.shape(bits)              # ascontiguousarray makes a 0-D result 1-D
    bits = np.ascontiguousarray(bits, np.uint32)
    if name == "float32":
        out = torch.from_numpy(bits.view(np.int32).copy()).view(torch.float32)
    elif name == "float64":
        out = torch.from_numpy(bits.view(np.float32).astype(np.float64))
    elif name in ("bfloat16", "float16"):
        codes = bf16_rne(bits) if name == "bfloat16" else fp16_rne(bits)    # a new array
        out = torch.from_numpy(codes.view(np.int16)).view(getattr(torch, name))
    else:
        raise UnitError(f"Output dtype must be one of {', '.join(OUT_DTYPES)}, not {name}")
    return out.reshape(shape).to(device)
