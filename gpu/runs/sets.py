"""The vector sets of the GPU runs: their seeds, the operand map, and bundles of sets.

Shared by the collector (``gpu/runs/collect.py``), the validation runs (``gpu/runs/validate.py``)
and
the readers of their records (``gpu/runs/records.py``, ``gpu/runs/figures.py``); needs no GPU.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from mxsim import formats, vectors

__all__ = ["seed", "SHAPES", "operand_map_sets", "save_bundle", "load_bundle", "stack"]

#: M x N x K of the cuBLASLt shapes sweep (``gpu.runs.collect --what shapes`` and the validation).
SHAPES = ((16, 16, 4096), (64, 64, 512), (128, 256, 2048), (512, 512, 1024), (256, 1024, 256),
          (1024, 128, 8192), (2048, 2048, 384))


def seed(*parts) -> int:
    """A 63-bit seed from every part (salt included): SHA-256 of their canonical JSON.

    Dicts are keyed in sorted order, so the same parts always give the same seed, and any
    difference in any part (a salt, a family, a K) gives another.
    """
    text = json.dumps(list(parts), sort_keys=True, separators=(",", ":"), default=str)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def operand_map_sets(fmt: str) -> dict[str, vectors.VectorSet]:
    """Sets whose outputs are the operands as ``tl.dot_scaled``'s emulation sees them.

    Batch entry s (every E8M0 code) times row (or column) c (every element code): one product
    of the element, under scale s, with 1.0 (scale 127) and zeros elsewhere, so D[s, c] is the
    upcast operand itself. ``a-lift`` multiplies by 2**100 (B's scale 227), lifting bf16
    subnormal operands into FP32's normal range to show whether they were kept.
    """
    f = formats.get(fmt)
    codes = (np.arange(256) % (1 << f.bits)).astype(np.uint8)
    one = f.encode(np.array([1.0]))[0]
    nb, k = 256, 32
    scale = np.arange(256, dtype=np.uint8)
    out = {}
    for side, b_scale in (("a", 127), ("a-lift", 227), ("b", None)):
        if side == "b":
            m, n = 64, 256
            a = np.zeros((nb, m, k), np.uint8)
            a[:, :, 0] = one
            b = np.zeros((nb, k, n), np.uint8)
            b[:, 0, :] = codes
            sa = np.full((nb, m, 1), 127, np.uint8)
            sb = np.broadcast_to(scale[:, None, None], (nb, 1, n)).copy()
        else:
            m, n = 256, 64
            a = np.zeros((nb, m, k), np.uint8)
            a[:, :, 0] = codes
            b = np.zeros((nb, k, n), np.uint8)
            b[:, 0, :] = one
            sa = np.broadcast_to(scale[:, None, None], (nb, m, 1)).copy()
            sb = np.full((nb, 1, n), b_scale, np.uint8)
        out[side] = vectors.VectorSet(
            a=a, b=b, a_format=fmt, b_format=fmt, c=np.zeros((nb, m, n), np.uint32),
            a_scale=sa, b_scale=sb, scale_format="e8m0", block=32,
            extra={"probe": "operand-map", "side": side})
    return out


def stack(sets: list[vectors.VectorSet]) -> vectors.VectorSet:
    """Sets of one shape as one set, batch entry i the i-th: the first set's formats and
    provenance, its arrays stacked (per-tensor scales kept), and the families in ``extra``."""
    first = sets[0]
    arrays = {name: np.stack([getattr(s, name) for s in sets])
              for name in ("a", "b", "c", "d", "a_scale", "b_scale")
              if getattr(first, name) is not None and getattr(first, name).ndim > 0}
    return first.replace(**arrays, extra={**first.extra,
                                          "families": [s.extra.get("family") for s in sets]})


def save_bundle(sets: dict[str, vectors.VectorSet], path: Path) -> None:
    """Several vector sets in one ``.npz``: set ``key``'s arrays are stored as ``key/name``."""
    arrays = {f"{key}/{name}": arr for key, vs in sets.items()
              for name, arr in vectors.to_arrays(vs).items()}
    np.savez_compressed(path, **arrays)


def load_bundle(path: str | Path) -> dict[str, vectors.VectorSet]:
    """The vector sets of a bundle written by :func:`save_bundle`, each validated."""
    with np.load(path, allow_pickle=False) as z:
        grouped: dict[str, dict] = {}
        for name in z.files:
            key, _, member = name.rpartition("/")
            grouped.setdefault(key, {})[member] = z[name]
    return {key: vectors.from_arrays(arrays, f"{path}:{key}")
            for key, arrays in grouped.items()}
