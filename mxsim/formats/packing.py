"""Packed storage of FP4 and FP6 codes, at the interop edge only (mxsim passes one code per
array element everywhere else)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["pack_fp4", "unpack_fp4", "pack_fp6", "unpack_fp6"]


def _check_last(codes: npt.NDArray, multiple: int, what: str) -> None:
    if codes.ndim == 0 or codes.shape[-1] % multiple:
        raise ValueError(f"Last axis of {what} must be a multiple of {multiple}, "
                         f"not {codes.shape[-1:] or '()'}")


def pack_fp4(codes: Any) -> npt.NDArray[np.uint8]:
    """Pack 4-bit codes two per byte along the last axis, the first in the low nibble.

    This is the layout of torch's ``float4_e2m1fn_x2`` and of Triton's packed FP4.
    """
    c = np.asarray(codes, np.uint8)
    _check_last(c, 2, "FP4 codes")
    if (c > 0xF).any():
        raise ValueError("FP4 codes must be below 16")
    return (c[..., 0::2] | (c[..., 1::2] << 4)).astype(np.uint8)


def unpack_fp4(packed: Any) -> npt.NDArray[np.uint8]:
    """Inverse of :func:`pack_fp4`."""
    p = np.asarray(packed, np.uint8)
    out = np.empty(p.shape[:-1] + (p.shape[-1] * 2,), np.uint8)
    out[..., 0::2] = p & 0xF
    out[..., 1::2] = p >> 4
    return out


def pack_fp6(codes: Any) -> npt.NDArray[np.uint8]:
    """Pack 6-bit codes four into three bytes along the last axis, most significant first.

    Elements ``x0..x3`` form the 24-bit big-endian word ``x0 x1 x2 x3``: bytes
    ``x0<<2 | x1>>4``, ``(x1&15)<<4 | x2>>2``, ``(x2&3)<<6 | x3`` (torchao's ``pack_uint6``).
    """
    c = np.asarray(codes, np.uint8)
    _check_last(c, 4, "FP6 codes")
    if (c > 0x3F).any():
        raise ValueError("FP6 codes must be below 64")
    x0, x1, x2, x3 = (c[..., i::4].astype(np.uint8) for i in range(4))
    out = np.empty(c.shape[:-1] + (c.shape[-1] // 4, 3), np.uint8)
    out[..., 0] = (x0 << 2) | (x1 >> 4)
    out[..., 1] = ((x1 & 0xF) << 4) | (x2 >> 2)
    out[..., 2] = ((x2 & 0x3) << 6) | x3
    return out.reshape(c.shape[:-1] + (c.shape[-1] // 4 * 3,))


def unpack_fp6(packed: Any) -> npt.NDArray[np.uint8]:
    """Inverse of :func:`pack_fp6`."""
    p = np.asarray(packed, np.uint8)
    _check_last(p, 3, "packed FP6 bytes")
    b = p.reshape(p.shape[:-1] + (p.shape[-1] // 3, 3))
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    out = np.empty(p.shape[:-1] + (p.shape[-1] // 3, 4), np.uint8)
    out[..., 0] = b0 >> 2
    out[..., 1] = ((b0 & 0x3) << 4) | (b1 >> 4)
    out[..., 2] = ((b1 & 0xF) << 2) | (b2 >> 6)
    out[..., 3] = b2 & 0x3F
    return out.reshape(p.shape[:-1] + (p.shape[-1] // 3 * 4,))
