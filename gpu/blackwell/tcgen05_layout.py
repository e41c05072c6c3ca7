"""Where ``tcgen05.mma ... .block_scale`` reads its operands: shared memory, tensor memory, and
the descriptors that point at them (PTX ISA §9.7.16).

Operands go to shared memory in the K-major, no-swizzle canonical layout (§9.7.16.3.3, FP4/FP6
packing §9.7.16.10.4), scales in 512-byte chunks that ``tcgen05.cp`` copies into tensor memory
(§9.7.16.10.7); :func:`smem_descriptor` (Table 40) and :func:`tcgen05_instr_desc` (Tables 43,
44) encode the 64-bit and 32-bit descriptors, and :func:`unpack_tcgen05_d` reads D back.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from mxsim import formats

from .variants import BlockScaledVariant

__all__ = ["TCGEN05_M", "tcgen05_stage", "tcgen05_row_bytes", "tcgen05_canonical_k_major",
           "pack_tcgen05_operand", "pack_tcgen05_scales", "smem_descriptor",
           "tcgen05_instr_desc", "unpack_tcgen05_d"]


#: tcgen05 kernels compute M = 128 rows per CTA (Layout D: row m of D in tensor-memory lane m).
TCGEN05_M = 128


def tcgen05_stage(variant: BlockScaledVariant) -> tuple[int, int]:
    """(K elements, bytes per row) of one kernel stage: four scale blocks of K.

    A stage is one 512-byte chunk of each scale matrix (128 rows x 4 blocks), so it holds
    ``4·block`` elements of K: 128 for block 32, 64 for block 16. Rows take 128 bytes for
    ``kind::mxf8f6f4`` (one byte, or a padded slot, per element) and half a byte per element for
    the FP4 kinds.
    """
    k = 4 * variant.block
    return k, k if variant.containers == "mxf8f6f4" else k // 2


def _pack_bits_lsb(codes: npt.NDArray[np.uint8], bits: int) -> npt.NDArray[np.uint8]:
    """Pack ``bits``-wide codes along the last axis LSB-first: code ``i`` at bits i·w..i·w+w-1."""
    *lead, n = codes.shape
    shifts = np.arange(bits, dtype=np.uint8)
    bitplane = ((codes[..., :, None] >> shifts) & 1).astype(np.uint8)    # (..., n, bits)
    return np.packbits(bitplane.reshape(*lead, n * bits), axis=-1, bitorder="little")


def tcgen05_row_bytes(codes: Any, fmt: str, kind: str) -> npt.NDArray[np.uint8]:
    """Codes (..., R, K) into the bytes of each row in shared memory, (..., R, row bytes).

    §9.7.16.10.4: ``kind::mxf8f6f4`` keeps 8-bit elements as bytes; FP4 and FP6 elements are
    packed contiguously in groups of 16 followed by padding to 16 bytes (§9.7.16.9.1: "16
    elements of 4-bits each followed by 8 bytes of padding", "16 elements of 6-bits each
    followed by 4 bytes of padding"; CUDA's ``CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B`` /
    ``16U6_ALIGN16B``). The bit order inside a group is only drawn (Figures 202, 203); we pack
    LSB-first (element 0 in the low bits of byte 0), as ``formats.pack_fp4`` does.
    ``kind::mxf4``/``mxf4nvf4`` pack two e2m1 per byte with no padding (§9.7.16.10.4.6), first
    element in the low nibble. K must be a multiple of 16 (32 for the FP4 kinds).
    """
    c = np.asarray(codes, np.uint8)
    bits = formats.get(fmt).bits
    *lead, r, k = c.shape
    if kind != "mxf8f6f4":
        return formats.pack_fp4(c)
    if bits == 8:
        return c.copy()
    if k % 16:
        raise ValueError(f"K must be a multiple of 16 for {fmt} in shared memory, not {k}")
    groups = _pack_bits_lsb(c.reshape(*lead, r, k // 16, 16), bits)       # (..., 8 or 12)
    out = np.zeros((*lead, r, k // 16, 16), np.uint8)
    out[..., : groups.shape[-1]] = groups
    return out.reshape(*lead, r, k)


def tcgen05_canonical_k_major(row_bytes: Any) -> npt.NDArray[np.uint8]:
    """Rows of bytes (..., R, KB) in the K-major, no-swizzle canonical layout, (..., R·KB).

    §9.7.16.3.3: ``((8, m), (T, 2k)) : ((1T, SBO), (1, LBO))`` in 128-bit units: core matrices
    of 8 rows x 16 bytes (row ``r`` of a core matrix at byte 16·r). We put core matrix
    (row group ``i``, 16-byte column ``j``) at ``(j·R/8 + i)·128``, so SBO (next 8 rows) = 128
    bytes and LBO (next 16 bytes of K) = 16·R bytes, as in the ISA's Figure 188 example.
    """
    b = np.asarray(row_bytes, np.uint8)
    *lead, r, kb = b.shape
    if r % 8 or kb % 16:
        raise ValueError(f"Rows must be (..., 8i, 16j) bytes, not {b.shape}")
    t = b.reshape(*lead, r // 8, 8, kb // 16, 16)
    t = np.moveaxis(t, -2, -4)                      # (..., KB/16, R/8, 8, 16)
    return np.ascontiguousarray(t).reshape(*lead, r * kb)


def pack_tcgen05_operand(codes: Any, fmt: str, variant: BlockScaledVariant,
                         rows_per_tile: int) -> npt.NDArray[np.uint8]:
    """Operand codes (..., R, K), K-major, into stage slabs (..., R/tile, stages, tile·bytes).

    A is passed as (M, K) and B as its transpose (N, K): ``tcgen05.mma`` reads both K-major
    (transpose bits 0). Rows are zero-padded to a multiple of ``rows_per_tile`` and K to whole
    stages (:func:`tcgen05_stage`); the kernel never issues an MMA on padding K.
    """
    c = np.asarray(codes, np.uint8)
    *lead, r, k = c.shape
    sk, sb = tcgen05_stage(variant)
    stages = -(-k // sk)
    rp = -(-r // rows_per_tile) * rows_per_tile
    padded = np.zeros((*lead, rp, stages * sk), np.uint8)
    padded[..., :r, :k] = c
    rb = tcgen05_row_bytes(padded, fmt, variant.containers)         # (..., rp, stages*sb)
    t = rb.reshape(*lead, rp // rows_per_tile, rows_per_tile, stages, sb)
    t = np.moveaxis(t, -2, -3)                                  # (..., tiles, stages, tile, sb)
    return tcgen05_canonical_k_major(t)


def pack_tcgen05_scales(scales: Any) -> npt.NDArray[np.uint8]:
    """Scales (..., R, blocks) into 512-byte stage chunks (..., ceil(R/128), stages, 512).

    Each chunk is 128 rows x 4 blocks with scale (r, c) at byte ``(r % 32)·16 + (r // 32)·4 +
    c`` (cuBLAS's blocked layout, ``gpu.blackwell.blocked.to_blocked``). The kernel copies a chunk
    with
    ``tcgen05.cp.cta_group::1.32x128b.warpx4``: smem row ``l`` (16 bytes) goes to tensor-memory
    lane ``l`` of all four warps' lane quarters, so column ``j`` byte ``c`` of lane ``l`` holds
    scale (32·j + l, c). That scale A/B occupy 32 lanes x (rows/32) columns, duplicated in the
    four quarters (§9.7.16.10.7: "duplicated to all 32 lane partitions"), and that the scale
    factor ID picks the byte (1X), byte pair (2X) or word (4X), is how CUTLASS
    (``Sm1xxBlkScaledConfig``) and ThunderKittens' MXFP8 GEMM lay them out; the ISA only
    draws it (Figures 231-242).
    """
    s = np.asarray(scales, np.uint8)
    *lead, r, nb = s.shape
    rt, stages = -(-r // 128), -(-nb // 4)
    p = np.zeros((*lead, rt * 128, stages * 4), np.uint8)
    p[..., :r, :nb] = s
    t = p.reshape(*lead, rt, 4, 32, stages, 4)                  # (.., rt, j, l, stage, c)
    t = np.moveaxis(t, -2, -4)                                  # (.., rt, stage, j, l, c)
    t = np.swapaxes(t, -3, -2)                                  # (.., rt, stage, l, j, c)
    return np.ascontiguousarray(t).reshape(*lead, rt, stages, 512)


def smem_descriptor(start: int, lbo: int, sbo: int, *, swizzle: int = 0,
                    base_offset: int = 0) -> int:
    """The 64-bit shared memory descriptor of §9.7.16.4.1, Table 40.

    Bits 0-13 start address, 16-29 leading-dimension byte offset, 32-45 stride-dimension byte
    offset (each ``(x & 0x3FFFF) >> 4``), 46-48 the fixed constant 0b001, 49-51 base offset,
    52 LBO mode (0: relative), 53-60 zero, 61-63 swizzle mode (0: none). Start, LBO and SBO
    must be 16-byte aligned.
    """
    for name, v in (("start", start), ("lbo", lbo), ("sbo", sbo)):
        if v % 16 or not 0 <= v < 1 << 18:
            raise ValueError(f"{name} must be a 16-byte aligned shared-memory offset below "
                             f"256 KiB, not {v!r}")
    if swizzle not in (0, 1, 2, 4, 6):
        raise ValueError(f"Swizzle mode must be 0, 1, 2, 4 or 6, not {swizzle!r}")

    def enc(x: int) -> int:
        return (x & 0x3FFFF) >> 4

    return (enc(start) | enc(lbo) << 16 | enc(sbo) << 32 | 1 << 46 | (base_offset & 7) << 49
            | swizzle << 61)


_TCGEN05_TYPE = {"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4, "e2m1": 5}


def tcgen05_instr_desc(variant: BlockScaledVariant, *, m: int = TCGEN05_M, n: int,
                       sfa_id: int = 0, sfb_id: int = 0) -> int:
    """The 32-bit instruction descriptor of §9.7.16.4.2, Table 43 (mxf8f6f4) or 44 (FP4 kinds);
    for the unscaled ``kind::f8f6f4``, Table 42 (see below).

    Dense, no negation, A and B K-major (transpose bits 0); bits 4-5 scale factor B ID, 7-9
    atype, 10-12 (10-11 for the FP4 kinds) btype, 17-22 N >> 3, 23 scale type (1: UE8M0,
    0: UE4M3), 27-28 M >> 7, 29-30 scale factor A ID, 31 (FP4 kinds) K = 64 (0).
    """
    if m != 128 or n % 16 or not 16 <= n <= 256:
        raise ValueError(f"M must be 128 and N a multiple of 16 in 16..256, not {m}, {n}")
    if not variant.scaled:
        # Table 42 (PTX ISA 9.1; 43 in 9.0), kind::f8f6f4: bits 4-5 dtype (F32 = 1), 7-9
        # atype, 10-12 btype, 17-22 N >> 3, 24-28 M >> 4; no scale factor IDs.
        if sfa_id or sfb_id:
            raise ValueError(f"kind::{variant.kind} has no scale factor IDs, not {sfa_id!r}, "
                             f"{sfb_id!r}")
        a, b = _TCGEN05_TYPE[variant.a_format], _TCGEN05_TYPE[variant.b_format]
        return 1 << 4 | a << 7 | b << 10 | (n >> 3) << 17 | (m >> 4) << 24
    if variant.kind == "mxf8f6f4":
        a, b = _TCGEN05_TYPE[variant.a_format], _TCGEN05_TYPE[variant.b_format]
        ids = (0, 1, 2, 3)
    else:
        a = b = 1                                               # E2M1 = 1 (Table 44)
        ids = (0,) if variant.blocks_per_mma == 4 else (0, 2)
    if sfa_id not in ids or sfb_id not in ids:
        raise ValueError(f"Scale factor IDs of {variant.scale_vec} must be in {ids}, not "
                         f"{sfa_id!r}, {sfb_id!r}")
    scale_type = 1 if variant.scale_format == "e8m0" else 0
    return (sfb_id << 4 | a << 7 | b << 10 | (n >> 3) << 17 | scale_type << 23 | (m >> 7) << 27
            | sfa_id << 29)


def unpack_tcgen05_d(tiles: Any) -> npt.NDArray[np.uint32]:
    """D tiles (..., M/128, N/n_tile, 128, n_tile) as the kernel stores them, to (..., M, N)."""
    t = np.asarray(tiles, np.uint32)
    *lead, mt, nt, r, c = t.shape
    return np.moveaxis(t, -3, -2).reshape(*lead, mt * r, nt * c)
