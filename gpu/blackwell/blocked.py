"""cuBLAS's 128x4 "blocked" layout of block scales (cuBLASLt ``VEC32_UE8M0`` /
``VEC16_UE4M3``), as the GPU runners hand scales to cuBLAS and ``tcgen05.cp`` reads them."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from mxsim.quantize import QuantizeError

__all__ = ["to_blocked", "from_blocked"]


def to_blocked(scales: Any) -> npt.NDArray[np.uint8]:
    """Rearrange a (rows, cols) scale matrix into cuBLAS's blocked layout, flattened.

    The matrix is zero-padded to multiples of 128 rows and 4 columns; each 128x4 tile, taken
    in row-major tile order, becomes 512 bytes where scale ``(r, c)`` of the tile sits at
    ``(r % 32) * 16 + (r // 32) * 4 + c``. Bit for bit torchao's ``to_blocked``.
    """
    s = np.asarray(scales)
    if s.ndim != 2:
        raise QuantizeError(f"Scales must be a 2-d (rows, cols) array, not shape {s.shape}; "
                            f"fold batch dimensions into the rows first")
    if s.dtype != np.uint8:
        raise QuantizeError(f"Scales must be uint8 codes, not {s.dtype}")
    rows, cols = s.shape
    nr, nc = -(-rows // 128), -(-cols // 4)
    padded = np.zeros((nr * 128, nc * 4), np.uint8)
    padded[:rows, :cols] = s
    tiles = padded.reshape(nr, 128, nc, 4).transpose(0, 2, 1, 3)        # (nr, nc, 128, 4)
    out = tiles.reshape(nr, nc, 4, 32, 4).transpose(0, 1, 3, 2, 4)      # (.., 32, 4, 4)
    return np.ascontiguousarray(out).reshape(-1)


def from_blocked(blocked: Any, rows: int, cols: int) -> npt.NDArray[np.uint8]:
    """Inverse of :func:`to_blocked`: the (rows, cols) scales, padding dropped."""
    b = np.asarray(blocked)
    for name, v in (("rows", rows), ("cols", cols)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise QuantizeError(f"{name} must be a positive integer, not {v!r}")
    nr, nc = -(-rows // 128), -(-cols // 4)
    if b.dtype != np.uint8 or b.ndim != 1 or b.size != nr * nc * 512:
        raise QuantizeError(f"Blocked scales of a {rows}x{cols} matrix must be {nr * nc * 512} "
                            f"uint8 values in one dimension, not {b.dtype} of shape {b.shape}")
    t = b.reshape(nr, nc, 32, 4, 4).transpose(0, 1, 3, 2, 4)            # (nr, nc, 4, 32, 4)
    padded = t.reshape(nr, nc, 128, 4).transpose(0, 2, 1, 3).reshape(nr * 128, nc * 4)
    return np.ascontiguousarray(padded[:rows, :cols])
