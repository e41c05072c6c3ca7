"""Where ``mma.sync ... .block_scale`` reads its operands: register fragments and scale words.

The numpy packers put vector-set codes into the per-lane registers the instruction reads
(PTX ISA §9.7.14.5.10 "Matrix Fragments for mma.m16n8k32", §9.7.14.5.11 "... mma.m16n8k64",
§9.7.14.5.14 for the 8-bit containers of FP4/FP6) and the scale words with their selectors
(§9.7.14.3 "Block Scaling", Tables 35-37). ``tests/gpu/test_gpu_blackwell.py`` checks them against
the ISA's tables written out independently.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import numpy.typing as npt

from .variants import BlockScaledVariant

__all__ = ["mma_sync_containers", "mma_sync_a_index", "mma_sync_b_index", "mma_sync_c_index",
           "pack_mma_sync_a", "pack_mma_sync_b", "pack_mma_sync_c", "unpack_mma_sync_d",
           "pack_mma_sync_scale_a", "pack_mma_sync_scale_b", "mma_sync_scale_selector"]

# -- mma.sync: register fragments (PTX ISA §9.7.14.5.10, §9.7.14.5.11) -----------------------

def _lane_groups() -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    lane = np.arange(32)
    return lane >> 2, lane & 3        # groupID, threadID_in_group


@functools.cache
def mma_sync_a_index(k: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(row, col) of A element ``a_i`` held by each lane: two (32, E) arrays, E = k // 2.

    ``k = 32`` (8-bit containers, §9.7.14.5.10, Figure 88): ``row = groupID`` for
    ``0 <= i < 4 || 8 <= i < 12`` else ``groupID + 8``; ``col = threadID_in_group*4 + (i & 3)``,
    ``+ 16`` for ``i >= 8``. ``k = 64`` (e2m1, §9.7.14.5.11, Figure 93): ``row = groupID`` for
    ``0 <= i < 8 || 16 <= i < 24`` else ``groupID + 8``; ``col = threadID_in_group*8 + (i & 7)``,
    ``+ 32`` for ``i >= 16``. Elements go low to high through the registers: ``a_0`` is the
    lowest byte (k = 32) or nibble (k = 64) of the first register.
    """
    g, t = _lane_groups()
    if k == 32:
        i = np.arange(16)
        row = g[:, None] + 8 * ((i[None, :] // 4) % 2)
        col = 4 * t[:, None] + (i[None, :] & 3) + 16 * (i[None, :] >= 8)
    elif k == 64:
        i = np.arange(32)
        row = g[:, None] + 8 * ((i[None, :] // 8) % 2)
        col = 8 * t[:, None] + (i[None, :] & 7) + 32 * (i[None, :] >= 16)
    else:
        raise ValueError(f"K must be 32 or 64, not {k!r}")
    return row, col


@functools.cache
def mma_sync_b_index(k: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(row, col) of B element ``b_i`` held by each lane: two (32, E) arrays, E = k // 4.

    ``k = 32`` (Figures 90, 91): ``row = threadID_in_group*4 + (i & 3)``, ``+ 16`` for
    ``i >= 4``; ``k = 64`` (Figures 94, 95): ``row = threadID_in_group*8 + (i & 7)``, ``+ 32``
    for ``i >= 8``; ``col = groupID`` for both.
    """
    g, t = _lane_groups()
    if k == 32:
        i = np.arange(8)
        row = 4 * t[:, None] + (i[None, :] & 3) + 16 * (i[None, :] >= 4)
    elif k == 64:
        i = np.arange(16)
        row = 8 * t[:, None] + (i[None, :] & 7) + 32 * (i[None, :] >= 8)
    else:
        raise ValueError(f"K must be 32 or 64, not {k!r}")
    return row, np.broadcast_to(g[:, None], row.shape)


@functools.cache
def mma_sync_c_index() -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(row, col) of accumulator ``c_i``/``d_i`` per lane, (32, 4) each (Figures 92, 96).

    ``row = groupID`` for ``i < 2`` else ``groupID + 8``; ``col = threadID_in_group*2 + (i & 1)``.
    """
    g, t = _lane_groups()
    i = np.arange(4)
    return g[:, None] + 8 * (i[None, :] >= 2), 2 * t[:, None] + (i[None, :] & 1)


def mma_sync_containers(codes: Any, fmt: str, kind: str) -> npt.NDArray[np.uint8]:
    """What ``mma.sync`` reads for each code: an 8-bit container, or the bare FP4 nibble.

    For ``kind::mxf8f6f4`` (PTX ISA §9.7.14.5.14): e2m1 sits in the central four bits of its
    byte (``code << 2``: two padding bits above and below), e3m2/e2m3 in the low six bits, FP8
    as is. For ``kind::mxf4``/``mxf4nvf4`` e2m1 is not padded: the 4-bit code itself, packed
    two per byte by :func:`pack_mma_sync_a`/``_b``.
    """
    c = np.asarray(codes, np.uint8)
    if kind == "mxf8f6f4" and fmt == "e2m1":
        return (c << 2).astype(np.uint8)
    return c


def _pack_registers(elems: npt.NDArray[np.uint8], kind: str) -> npt.NDArray[np.uint32]:
    """Fragment elements (..., 32, E), low to high, into (..., 32, regs) little-endian words."""
    if kind != "mxf8f6f4":                  # two e2m1 per byte, a_0 in the low nibble
        elems = (elems[..., 0::2] | (elems[..., 1::2] << 4)).astype(np.uint8)
    return np.ascontiguousarray(elems).view("<u4")


def pack_mma_sync_a(a: Any, variant: BlockScaledVariant) -> npt.NDArray[np.uint32]:
    """A codes (..., M, K) into A fragments (..., M/16, K/k, 32 lanes, 4 registers).

    M must be a multiple of 16 and K of ``variant.k``. Each tile's registers follow
    :func:`mma_sync_a_index`; element codes first become :func:`mma_sync_containers`.
    """
    a = mma_sync_containers(a, variant.a_format, variant.containers)
    k = variant.k
    *lead, m, kk = a.shape
    if m % 16 or kk % k:
        raise ValueError(f"A must be (..., 16i, {k}j), not {a.shape}")
    t = a.reshape(*lead, m // 16, 16, kk // k, k)
    t = np.moveaxis(t, -3, -2)                      # (..., M/16, K/k, 16, k)
    row, col = mma_sync_a_index(k)
    return _pack_registers(t[..., row, col], variant.containers)


def pack_mma_sync_b(b: Any, variant: BlockScaledVariant) -> npt.NDArray[np.uint32]:
    """B codes (..., K, N) into B fragments (..., N/8, K/k, 32 lanes, 2 registers)."""
    b = mma_sync_containers(b, variant.b_format, variant.containers)
    k = variant.k
    *lead, kk, n = b.shape
    if n % 8 or kk % k:
        raise ValueError(f"B must be (..., {k}i, 8j), not {b.shape}")
    t = b.reshape(*lead, kk // k, k, n // 8, 8)
    t = np.moveaxis(t, -2, -4)                      # (..., N/8, K/k, k, 8)
    row, col = mma_sync_b_index(k)
    return _pack_registers(t[..., row, col], variant.containers)


def pack_mma_sync_c(c: Any) -> npt.NDArray[np.uint32]:
    """FP32 bit patterns (..., M, N) into C fragments (..., M/16, N/8, 32 lanes, 4)."""
    c = np.asarray(c, np.uint32)
    *lead, m, n = c.shape
    if m % 16 or n % 8:
        raise ValueError(f"C must be (..., 16i, 8j), not {c.shape}")
    t = np.moveaxis(c.reshape(*lead, m // 16, 16, n // 8, 8), -3, -2)
    row, col = mma_sync_c_index()
    return np.ascontiguousarray(t[..., row, col])


def unpack_mma_sync_d(frags: Any) -> npt.NDArray[np.uint32]:
    """Inverse of :func:`pack_mma_sync_c`: D fragments (..., M/16, N/8, 32, 4) to (..., M, N)."""
    f = np.asarray(frags, np.uint32)
    *lead, mt, nt, lanes, regs = f.shape
    if (lanes, regs) != (32, 4):
        raise ValueError(f"D fragments must be (..., M/16, N/8, 32, 4), not {f.shape}")
    t = np.zeros((*lead, mt, nt, 16, 8), np.uint32)
    row, col = mma_sync_c_index()
    t[..., row, col] = f
    return np.moveaxis(t, -3, -2).reshape(*lead, mt * 16, nt * 8)


def mma_sync_scale_selector(variant: BlockScaledVariant, kt: int) -> tuple[int, int]:
    """(scale word, byte-id) the kernel uses for k-tile ``kt``.

    Each 32-bit scale word holds four consecutive scale blocks of one row of A (column of B), so
    it serves 4 k-tiles of ``.scale_vec::1X`` (byte-id 0..3), 2 of ``2X`` (byte-id 0 or 2: the
    byte pair) or 1 of ``4X`` (byte-id 0: all four bytes), as §9.7.14.3 and Table 37 allow.
    """
    first = kt * variant.blocks_per_mma
    return first // 4, first % 4


def _scale_words(s: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint32]:
    """Scales (..., R, blocks) into words (..., R, ceil(blocks/4)): block 4w+j in byte j."""
    *lead, r, nb = s.shape
    words = -(-nb // 4)
    padded = np.zeros((*lead, r, words * 4), np.uint8)
    padded[..., :nb] = s
    return np.ascontiguousarray(padded).view("<u4")


def pack_mma_sync_scale_a(a_scale: Any) -> npt.NDArray[np.uint32]:
    """A scales (..., M, K/block) into ``scale-a-data`` words (..., M/16, words, 32 lanes).

    §9.7.14.3: ``thread-id-a`` picks the thread pair of each quad that supplies SF_A (0: lanes
    with ``%laneid % 4`` in {0, 1}; 1: in {2, 3}). Which row each thread of the pair supplies is
    only drawn (Figure 43); we follow CUTLASS's ``SM120_16x8x32_TN_VS`` ``SFALayout``
    (``cute/atom/mma_traits_sm120.hpp``: thread stride (8, 0, 1) over (2, 2, 8)): lane
    ``4g + 2p + h`` holds row ``g + 8h``. Both pairs are filled, so either ``thread-id-a``
    works. The words' bytes are consecutive scale blocks (see :func:`mma_sync_scale_selector`).
    """
    s = np.asarray(a_scale, np.uint8)
    *lead, m, _ = s.shape
    if m % 16:
        raise ValueError(f"A scales must have a multiple of 16 rows, not {m}")
    w = _scale_words(s).reshape(*lead, m // 16, 16, -1)      # (..., M/16, 16 rows, words)
    lane = np.arange(32)
    row = (lane >> 2) + 8 * (lane & 1)
    return np.ascontiguousarray(np.moveaxis(w[..., row, :], -1, -2))


def pack_mma_sync_scale_b(b_scale: Any) -> npt.NDArray[np.uint32]:
    """B scales (..., K/block, N) into ``scale-b-data`` words (..., N/8, words, 32 lanes).

    §9.7.14.3: the thread with ``%laneid % 4 == thread-id-b`` of quad ``g`` supplies SF_B of
    column ``g``; every lane of the quad is filled, so any ``thread-id-b`` works.
    """
    s = np.swapaxes(np.asarray(b_scale, np.uint8), -1, -2)     # (..., N, blocks)
    *lead, n, _ = s.shape
    if n % 8:
        raise ValueError(f"B scales must have a multiple of 8 columns, not {n}")
    w = _scale_words(s).reshape(*lead, n // 8, 8, -1)
    col = np.arange(32) >> 2
    return np.ascontiguousarray(np.moveaxis(w[..., col, :], -1, -2))

