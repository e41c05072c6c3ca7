"""Blackwell block-scaled tensor-core paths: PTX kernels, operand packing and runners.

These paths cannot run on Hopper (our H200), but everything short of the launch is built and
checked here: the PTX of each kernel assembles with ``ptxas`` for its architecture, and the
numpy packers that put vector-set codes into the registers, shared memory and tensor memory
the instructions read are tested against the PTX ISA's fragment tables
(``tests/test_gpu_blackwell.py``).

Paths (runner names)
--------------------
``mma-sync-mxf8f6f4``
    ``mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.<a>.<b>
    .f32.ue8m0`` with ``<a>``, ``<b>`` in ``e4m3 e5m2 e3m2 e2m3 e2m1`` (sm_120a, sm_121a).
``mma-sync-mxf4``
    ``mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1
    .f32.ue8m0``.
``mma-sync-mxf4nvf4``
    ``mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X...ue8m0``
    (block 32) and ``.scale_vec::4X...ue4m3`` (block 16, NVFP4).
``tcgen05-mxf8f6f4``, ``tcgen05-mxf4``, ``tcgen05-mxf4nvf4``
    ``tcgen05.mma.cta_group::1.kind::<kind>.block_scale.scale_vec::<n>X`` (sm_100a, sm_103a),
    M = 128, operands in shared memory, scales and D in tensor memory.
``scaled-mm-mx``
    ``torch._scaled_mm`` on MXFP8 (E8M0 scales), MXFP4 (E8M0) and NVFP4 (UE4M3, block 16),
    scales in cuBLAS's 128x4 blocked layout (cuBLASLt ``VEC32_UE8M0`` / ``VEC16_UE4M3``).

How kernels are compiled and launched: the generated text is PTX for one arch-specific target
(``.target sm_120a`` ...); the runner writes it to a file and loads it with
``cupy.RawModule(path=...)``, i.e. the CUDA driver JIT-compiles the PTX for the local GPU
(no NVRTC, no CUDA C). Arch-specific (``a``) PTX only JIT-compiles on exactly that
architecture, which is why the runners pick the target from the device's compute capability.

Layout sources (PTX ISA, 9.0 edition, https://docs.nvidia.com/cuda/parallel-thread-execution/):
§9.7.14.3 "Block Scaling" (selectors ``{byte-id, thread-id}``, Tables 35-37), §9.7.14.5.10
"Matrix Fragments for mma.m16n8k32", §9.7.14.5.11 "... mma.m16n8k64", §9.7.14.5.14 "mma"
(8-bit containers of FP4/FP6 for ``kind::mxf8f6f4``), §9.7.16.3 "Major-ness supported by
strides" and §9.7.16.3.3 "Canonical layouts", §9.7.16.4.1 "Shared memory descriptor" (Table 40),
§9.7.16.4.2 "Instruction descriptor" (Tables 43, 44), §9.7.16.9.1 "Optional decompression" and
§9.7.16.10.4 "Packing formats" (FP4/FP6 in shared memory), §9.7.16.10.7 "Block scaling"
(Tables 54, 55; scale-factor A/B ID), §9.7.16.9.2 ``tcgen05.cp``. Where the ISA gives a layout
only as a figure, the docstring says which public kernel the layout was taken from.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mxsim import formats
from mxsim.errors import UnitError
from mxsim.vectors import VectorSet

from .device import capability, device_info, torch_unavailable_reason

__all__ = [
    "F8F6F4_FORMATS", "KINDS", "PTX_VERSIONS", "MMA_SYNC_ARCHS", "TCGEN05_ARCHS",
    "BlockScaledVariant", "mma_sync_variants", "tcgen05_variants",
    # mma.sync packing
    "mma_sync_containers", "mma_sync_a_index", "mma_sync_b_index", "mma_sync_c_index",
    "pack_mma_sync_a", "pack_mma_sync_b", "pack_mma_sync_c", "unpack_mma_sync_d",
    "pack_mma_sync_scale_a", "pack_mma_sync_scale_b", "mma_sync_scale_selector",
    "mma_sync_ptx",
    # tcgen05 packing
    "TCGEN05_M", "tcgen05_row_bytes", "tcgen05_canonical_k_major", "pack_tcgen05_operand",
    "pack_tcgen05_scales", "smem_descriptor", "tcgen05_instr_desc", "tcgen05_stage",
    "unpack_tcgen05_d", "tcgen05_ptx",
    # runners
    "MmaSyncBlockScaled", "Tcgen05BlockScaled", "ScaledMmMx", "RUNNERS", "unavailable_reasons",
]

#: Element formats ``kind::mxf8f6f4`` takes, in the ISA's order.
F8F6F4_FORMATS = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")
KINDS = ("mxf8f6f4", "mxf4", "mxf4nvf4")
#: PTX ISA version each target needs: 8.7 introduced ``.kind``, ``.block_scale`` and
#: ``kind::mxf4nvf4`` (sm_100a, sm_120a); ptxas 13.0 wants 8.8 for sm_103a and sm_121a.
PTX_VERSIONS = {"sm_100a": "8.7", "sm_103a": "8.8", "sm_120a": "8.7", "sm_121a": "8.8"}
#: Compute capability -> arch-specific PTX target.
MMA_SYNC_ARCHS = {(12, 0): "sm_120a", (12, 1): "sm_121a"}
TCGEN05_ARCHS = {(10, 0): "sm_100a", (10, 3): "sm_103a"}

# -- instruction variants --------------------------------------------------------------------

# (kind, scale_format, block) -> scale_vec, as the ISA allows them (Table 36 for mma.sync, Table
# 55 for tcgen05.mma). ptxas 13.0 rejects mma.sync mxf4nvf4 with 4X/ue8m0 and with 2X/ue4m3.
_MMA_SYNC_SCALES = {("mxf8f6f4", "e8m0", 32): "1X", ("mxf4", "e8m0", 32): "2X",
                    ("mxf4nvf4", "e8m0", 32): "2X", ("mxf4nvf4", "ue4m3", 16): "4X"}
_TCGEN05_SCALES = {**_MMA_SYNC_SCALES, ("mxf4nvf4", "e8m0", 16): "4X"}
_STYPE = {"e8m0": "ue8m0", "ue4m3": "ue4m3"}


@dataclass(frozen=True)
class BlockScaledVariant:
    """One block-scaled MMA: kind, element formats, scale format and block size.

    ``k`` is the instruction's K (32 for ``kind::mxf8f6f4``, 64 for the FP4 kinds) and
    ``blocks_per_mma`` = ``k // block`` is the ``N`` of ``.scale_vec::NX``: how many scale
    factors each row of A (column of B) uses per instruction.
    """
    kind: str
    a_format: str
    b_format: str
    scale_format: str
    block: int

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Kind must be one of {', '.join(KINDS)}, not {self.kind!r}")
        allowed = F8F6F4_FORMATS if self.kind == "mxf8f6f4" else ("e2m1",)
        for name in ("a_format", "b_format"):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} of kind::{self.kind} must be one of "
                                 f"{', '.join(allowed)}, not {getattr(self, name)!r}")
        if (self.kind, self.scale_format, self.block) not in _TCGEN05_SCALES:
            raise ValueError(f"kind::{self.kind} takes no {self.scale_format} scales with "
                             f"block {self.block!r}")

    @property
    def k(self) -> int:
        return 32 if self.kind == "mxf8f6f4" else 64

    @property
    def blocks_per_mma(self) -> int:
        return self.k // self.block

    @property
    def scale_vec(self) -> str:
        return f"{self.blocks_per_mma}X"

    @property
    def stype(self) -> str:
        return _STYPE[self.scale_format]

    @property
    def on_mma_sync(self) -> bool:
        """Whether ``mma.sync`` (sm_120a) has this variant; ``tcgen05.mma`` has them all."""
        return (self.kind, self.scale_format, self.block) in _MMA_SYNC_SCALES

    @property
    def mma_sync_instruction(self) -> str:
        shape = "m16n8k32" if self.kind == "mxf8f6f4" else "m16n8k64"
        return (f"mma.sync.aligned.{shape}.row.col.kind::{self.kind}.block_scale."
                f"scale_vec::{self.scale_vec}.f32.{self.a_format}.{self.b_format}.f32."
                f"{self.stype}")

    @property
    def tcgen05_instruction(self) -> str:
        return (f"tcgen05.mma.cta_group::1.kind::{self.kind}.block_scale."
                f"scale_vec::{self.scale_vec}")

    @property
    def name(self) -> str:
        return f"{self.kind}_{self.a_format}_{self.b_format}_{self.scale_format}_b{self.block}"


def _variants(table: dict) -> list[BlockScaledVariant]:
    out = []
    for kind, scale_format, block in table:
        pairs = ([(a, b) for a in F8F6F4_FORMATS for b in F8F6F4_FORMATS]
                 if kind == "mxf8f6f4" else [("e2m1", "e2m1")])
        out += [BlockScaledVariant(kind, a, b, scale_format, block) for a, b in pairs]
    return out


def mma_sync_variants() -> list[BlockScaledVariant]:
    """Every variant ``mma.sync ... block_scale`` allows: 25 format pairs of mxf8f6f4 + 3."""
    return _variants(_MMA_SYNC_SCALES)


def tcgen05_variants() -> list[BlockScaledVariant]:
    """Every variant ``tcgen05.mma ... block_scale`` allows: the mma.sync ones + 4X/ue8m0."""
    return _variants(_TCGEN05_SCALES)


def _variant_for(vs: VectorSet, kind: str, mma_sync: bool) -> BlockScaledVariant:
    """The variant of ``kind`` that runs ``vs``, or a one-line UnitError saying why none does."""
    if vs.scale_format not in ("e8m0", "ue4m3"):
        raise UnitError(f"kind::{kind} needs e8m0 or ue4m3 block scales, not "
                        f"{vs.scale_format or 'none'}")
    try:
        v = BlockScaledVariant(kind, vs.a_format, vs.b_format, vs.scale_format, int(vs.block))
    except ValueError as exc:
        raise UnitError(f"{kind} cannot run this set: {exc}") from None
    if mma_sync and not v.on_mma_sync:
        raise UnitError(f"mma.sync kind::{kind} takes no {v.scale_format} scales with block "
                        f"{v.block} (only tcgen05.mma does)")
    return v


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
    a = mma_sync_containers(a, variant.a_format, variant.kind)
    k = variant.k
    *lead, m, kk = a.shape
    if m % 16 or kk % k:
        raise ValueError(f"A must be (..., 16i, {k}j), not {a.shape}")
    t = a.reshape(*lead, m // 16, 16, kk // k, k)
    t = np.moveaxis(t, -3, -2)                      # (..., M/16, K/k, 16, k)
    row, col = mma_sync_a_index(k)
    return _pack_registers(t[..., row, col], variant.kind)


def pack_mma_sync_b(b: Any, variant: BlockScaledVariant) -> npt.NDArray[np.uint32]:
    """B codes (..., K, N) into B fragments (..., N/8, K/k, 32 lanes, 2 registers)."""
    b = mma_sync_containers(b, variant.b_format, variant.kind)
    k = variant.k
    *lead, kk, n = b.shape
    if n % 8 or kk % k:
        raise ValueError(f"B must be (..., {k}i, 8j), not {b.shape}")
    t = b.reshape(*lead, kk // k, k, n // 8, 8)
    t = np.moveaxis(t, -2, -4)                      # (..., N/8, K/k, k, 8)
    row, col = mma_sync_b_index(k)
    return _pack_registers(t[..., row, col], variant.kind)


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


# -- mma.sync: PTX ---------------------------------------------------------------------------

def mma_sync_ptx(variant: BlockScaledVariant, *, arch: str = "sm_120a", thread_id_a: int = 0,
                 thread_id_b: int = 0) -> str:
    """A complete PTX module: one 16x8 D tile per warp, D = A·B + C chained over K.

    Kernel ``mxsim_mma_sync_<variant>(a, b, c, sa, sb, d, n_mt, n_nt, k_tiles, n_tiles)``:
    warp ``w`` of the grid (4 warps a CTA) computes tile ``t = w`` (``(batch·n_mt + mt)·n_nt +
    nt``) when ``t < n_tiles``; it loads C, then for each of ``k_tiles`` k-tiles issues one
    ``variant.mma_sync_instruction`` whose C is the previous D, and stores D. Buffers are the
    packers' outputs: ``a`` (batch·n_mt, k_tiles, 32, 4), ``b`` (batch·n_nt, k_tiles, 32, 2),
    ``c``/``d`` (n_tiles, 32, 4), ``sa`` (batch·n_mt, words, 32), ``sb`` (batch·n_nt, words,
    32), words = ceil(k_tiles · blocks_per_mma / 4); byte-id is computed per k-tile by the rule
    of :func:`mma_sync_scale_selector`, thread-ids are the given immediates.
    """
    if not variant.on_mma_sync:
        raise ValueError(f"mma.sync has no {variant.name}")
    if arch not in MMA_SYNC_ARCHS.values():
        raise ValueError(f"Arch must be one of {', '.join(MMA_SYNC_ARCHS.values())}, not "
                         f"{arch!r}")
    if thread_id_a not in (0, 1) or thread_id_b not in (0, 1, 2, 3):
        raise ValueError(f"thread-id-a must be 0 or 1 and thread-id-b 0..3, not "
                         f"{thread_id_a!r}, {thread_id_b!r}")
    bpm = variant.blocks_per_mma
    per_word = 4 // bpm                             # k-tiles served by one scale word
    shift = per_word.bit_length() - 1
    if per_word == 1:
        byte_id = "\tmov.u16 %bid, 0;"              # 4X: byte-id must be 0 (Table 37)
    else:
        byte_id = (f"\tand.b32 %x0, %kt, {per_word - 1};\n"
                   f"\tmul.lo.u32 %x0, %x0, {bpm};\n"
                   f"\tcvt.u16.u32 %bid, %x0;")
    name = f"mxsim_mma_sync_{variant.name}"
    return f"""//
// mxsim {name}: {variant.mma_sync_instruction}
// One 16x8 tile per warp, C loaded from memory, chained over K (D of one k-tile is C of the
// next). Generated by gpu/blackwell.py; layouts in its packers' docstrings.
//
.version {PTX_VERSIONS[arch]}
.target {arch}
.address_size 64

.visible .entry {name}(
\t.param .u64 p_a, .param .u64 p_b, .param .u64 p_c,
\t.param .u64 p_sa, .param .u64 p_sb, .param .u64 p_d,
\t.param .u32 p_n_mt, .param .u32 p_n_nt, .param .u32 p_k_tiles, .param .u32 p_n_tiles)
{{
\t.reg .pred %p<2>;
\t.reg .b16 %bid;
\t.reg .b32 %lane, %t, %q, %nt, %bq, %kt, %n_mt, %n_nt, %k_tiles, %n_tiles, %words, %x<4>;
\t.reg .b32 %a<4>, %b<2>, %sa, %sb;
\t.reg .f32 %d<4>;
\t.reg .b64 %pa, %pb, %pc, %psa, %psb, %pd, %off;

\tld.param.u64 %pa, [p_a];
\tld.param.u64 %pb, [p_b];
\tld.param.u64 %pc, [p_c];
\tld.param.u64 %psa, [p_sa];
\tld.param.u64 %psb, [p_sb];
\tld.param.u64 %pd, [p_d];
\tld.param.u32 %n_mt, [p_n_mt];
\tld.param.u32 %n_nt, [p_n_nt];
\tld.param.u32 %k_tiles, [p_k_tiles];
\tld.param.u32 %n_tiles, [p_n_tiles];
\tmov.u32 %lane, %laneid;
\tmov.u32 %x0, %tid.x;
\tshr.u32 %x0, %x0, 5;
\tmov.u32 %x1, %ctaid.x;
\tmov.u32 %x2, %ntid.x;
\tshr.u32 %x2, %x2, 5;
\tmad.lo.u32 %t, %x1, %x2, %x0;                 // this warp's tile
\tsetp.ge.u32 %p0, %t, %n_tiles;
\t@%p0 bra DONE;                                // warp-uniform
\tdiv.u32 %q, %t, %n_nt;                         // batch*n_mt + mt
\tmul.lo.u32 %x0, %q, %n_nt;
\tsub.u32 %nt, %t, %x0;
\tdiv.u32 %x0, %q, %n_mt;
\tmad.lo.u32 %bq, %x0, %n_nt, %nt;              // batch*n_nt + nt
\tmul.lo.u32 %x0, %q, %k_tiles;                 // A: ((q*k_tiles)*32 + lane)*16
\tshl.b32 %x0, %x0, 5;
\tadd.u32 %x0, %x0, %lane;
\tmul.wide.u32 %off, %x0, 16;
\tadd.u64 %pa, %pa, %off;
\tmul.lo.u32 %x0, %bq, %k_tiles;                // B: ((bq*k_tiles)*32 + lane)*8
\tshl.b32 %x0, %x0, 5;
\tadd.u32 %x0, %x0, %lane;
\tmul.wide.u32 %off, %x0, 8;
\tadd.u64 %pb, %pb, %off;
\tmul.lo.u32 %words, %k_tiles, {bpm};           // scale words per row: ceil(blocks/4)
\tadd.u32 %words, %words, 3;
\tshr.u32 %words, %words, 2;
\tmul.lo.u32 %x0, %q, %words;                   // SA: ((q*words)*32 + lane)*4
\tshl.b32 %x0, %x0, 5;
\tadd.u32 %x0, %x0, %lane;
\tmul.wide.u32 %off, %x0, 4;
\tadd.u64 %psa, %psa, %off;
\tmul.lo.u32 %x0, %bq, %words;                  // SB: ((bq*words)*32 + lane)*4
\tshl.b32 %x0, %x0, 5;
\tadd.u32 %x0, %x0, %lane;
\tmul.wide.u32 %off, %x0, 4;
\tadd.u64 %psb, %psb, %off;
\tshl.b32 %x0, %t, 5;                           // C, D: (t*32 + lane)*16
\tadd.u32 %x0, %x0, %lane;
\tmul.wide.u32 %off, %x0, 16;
\tadd.u64 %pc, %pc, %off;
\tadd.u64 %pd, %pd, %off;
\tld.global.v4.f32 {{%d0, %d1, %d2, %d3}}, [%pc];
\tmov.u32 %kt, 0;
LOOP:
\tsetp.ge.u32 %p1, %kt, %k_tiles;
\t@%p1 bra STORE;
\tld.global.v4.b32 {{%a0, %a1, %a2, %a3}}, [%pa];
\tld.global.v2.b32 {{%b0, %b1}}, [%pb];
\tshr.u32 %x0, %kt, {shift};                    // scale word of this k-tile
\tmul.wide.u32 %off, %x0, 128;
\tadd.u64 %off, %psa, %off;
\tld.global.b32 %sa, [%off];
\tmul.wide.u32 %off, %x0, 128;
\tadd.u64 %off, %psb, %off;
\tld.global.b32 %sb, [%off];
{byte_id}
\t{variant.mma_sync_instruction}
\t\t{{%d0, %d1, %d2, %d3}}, {{%a0, %a1, %a2, %a3}}, {{%b0, %b1}}, {{%d0, %d1, %d2, %d3}},
\t\t%sa, {{%bid, {thread_id_a}}}, %sb, {{%bid, {thread_id_b}}};
\tadd.u64 %pa, %pa, 512;
\tadd.u64 %pb, %pb, 256;
\tadd.u32 %kt, %kt, 1;
\tbra.uni LOOP;
STORE:
\tst.global.v4.f32 [%pd], {{%d0, %d1, %d2, %d3}};
DONE:
\tret;
}}
"""


# -- tcgen05: shared memory, tensor memory, descriptors (PTX ISA §9.7.16) ----------------------

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
    return k, k if variant.kind == "mxf8f6f4" else k // 2


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
    rb = tcgen05_row_bytes(padded, fmt, variant.kind)          # (..., rp, stages*sb)
    t = rb.reshape(*lead, rp // rows_per_tile, rows_per_tile, stages, sb)
    t = np.moveaxis(t, -2, -3)                                  # (..., tiles, stages, tile, sb)
    return tcgen05_canonical_k_major(t)


def pack_tcgen05_scales(scales: Any) -> npt.NDArray[np.uint8]:
    """Scales (..., R, blocks) into 512-byte stage chunks (..., ceil(R/128), stages, 512).

    Each chunk is 128 rows x 4 blocks with scale (r, c) at byte ``(r % 32)·16 + (r // 32)·4 +
    c`` (cuBLAS's blocked layout, ``gpu.blocked.to_blocked``). The kernel copies a chunk with
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
    """The 32-bit instruction descriptor of §9.7.16.4.2, Table 43 (mxf8f6f4) or 44 (FP4 kinds).

    Dense, no negation, A and B K-major (transpose bits 0); bits 4-5 scale factor B ID, 7-9
    atype, 10-12 (10-11 for the FP4 kinds) btype, 17-22 N >> 3, 23 scale type (1: UE8M0,
    0: UE4M3), 27-28 M >> 7, 29-30 scale factor A ID, 31 (FP4 kinds) K = 64 (0).
    """
    if m != 128 or n % 16 or not 16 <= n <= 256:
        raise ValueError(f"M must be 128 and N a multiple of 16 in 16..256, not {m}, {n}")
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


def tcgen05_ptx(variant: BlockScaledVariant, *, n_tile: int = 128,
                arch: str = "sm_100a") -> str:
    """A complete PTX module: one CTA (4 warps) computes a 128 x ``n_tile`` D tile.

    Kernel ``mxsim_tcgen05_<variant>_n<n_tile>(a, b, sa, sb, c, d, stages, k_blocks)``, grid
    (N tiles, M tiles, batch). Steps: warp 0 allocates tensor memory (``tcgen05.alloc``, D in
    columns 0..n_tile-1, scale A at column n_tile, scale B at n_tile + 4); every thread loads its
    row of C into D (``tcgen05.st.32x32b``); then per stage all threads copy the stage's A and B
    slabs (canonical K-major, :func:`pack_tcgen05_operand`) and scale chunks
    (:func:`pack_tcgen05_scales`) from global to shared memory, thread 0 copies the scales into
    tensor memory (``tcgen05.cp.32x128b.warpx4``), builds the shared memory descriptors
    (:func:`smem_descriptor`) and issues the stage's ``4 / blocks_per_mma`` MMAs with
    ``enable-input-d`` true (D += A·B, the first adding to C), each with the scale factor IDs of
    its blocks in the instruction descriptor; MMAs on padding K (block index >= ``k_blocks``)
    are predicated off. ``tcgen05.commit`` arrives on an mbarrier that every thread waits on
    before the next stage overwrites shared memory. Finally each warp reads its 32 rows of D
    (``tcgen05.ld.32x32b``), stores them row-major, and warp 0 frees the tensor memory.
    """
    if n_tile % 16 or not 16 <= n_tile <= 128:
        raise ValueError(f"n_tile must be a multiple of 16 in 16..128, not {n_tile!r}")
    if arch not in TCGEN05_ARCHS.values():
        raise ValueError(f"Arch must be one of {', '.join(TCGEN05_ARCHS.values())}, not "
                         f"{arch!r}")
    _, sb = tcgen05_stage(variant)
    m = TCGEN05_M
    a_slab, b_slab = m * sb, n_tile * sb
    off_b, off_sa = a_slab, a_slab + b_slab
    off_sb = off_sa + 512
    total = off_sb + 512
    tmem_cols = max(32, 1 << (n_tile + 8 - 1).bit_length())
    col_sfa, col_sfb = n_tile, n_tile + 4
    lbo_a, lbo_b = 16 * m, 16 * n_tile                  # next 16 bytes of K
    n_mma = 4 // variant.blocks_per_mma
    name = f"mxsim_tcgen05_{variant.name}_n{n_tile}"
    sdesc_scale = smem_descriptor(0, 128, 128)

    def copy(label: str, src: str, length: int, offset: int) -> str:
        return f"""\tshl.b32 %i, %tix, 4;                        // {label}: {length} bytes
{label}_LOOP:
\tsetp.ge.u32 %pc, %i, {length};
\t@%pc bra {label}_END;
\tcvt.u64.u32 %o64, %i;
\tadd.u64 %g, {src}, %o64;
\tld.global.v4.b32 {{%v0, %v1, %v2, %v3}}, [%g];
\tadd.u32 %sh, %smem, {offset};
\tadd.u32 %sh, %sh, %i;
\tst.shared.v4.b32 [%sh], {{%v0, %v1, %v2, %v3}};
\tadd.u32 %i, %i, 2048;
\tbra {label}_LOOP;
{label}_END:
"""

    mmas = []
    for q in range(n_mma):
        sf = (q * variant.blocks_per_mma) % 4
        idesc = tcgen05_instr_desc(variant, n=n_tile, sfa_id=sf, sfb_id=sf)
        # MMA q reads 16-byte columns 2q, 2q+1 of the stage: start address + 2q·LBO.
        da = smem_descriptor(2 * q * lbo_a, lbo_a, 128)
        db = smem_descriptor(off_b + 2 * q * lbo_b, lbo_b, 128)
        mmas.append(f"""\tadd.u32 %x0, %blk, {q * variant.blocks_per_mma};
\tsetp.lt.u32 %pq, %x0, %k_blocks;                  // skip MMAs on padding K
\tadd.u64 %adesc, %sbase, {da};
\tadd.u64 %bdesc, %sbase, {db};
\tmov.u32 %idesc, {idesc:#010x};                  // SFA_ID = SFB_ID = {sf}
\t@%pq {variant.tcgen05_instruction}
\t\t[%t_d], %adesc, %bdesc, %idesc, [%t_sfa], [%t_sfb], %pt;
""")
    chunks = n_tile // 8
    regs8 = ", ".join(f"%v{i}" for i in range(8))
    load_c = "".join(f"""\tld.global.v4.b32 {{%v0, %v1, %v2, %v3}}, [%crow+{32 * j}];
\tld.global.v4.b32 {{%v4, %v5, %v6, %v7}}, [%crow+{32 * j + 16}];
\tadd.u32 %x0, %t_row, {8 * j};
\ttcgen05.st.sync.aligned.32x32b.x8.b32 [%x0], {{{regs8}}};
""" for j in range(chunks))
    store_d = "".join(f"""\tadd.u32 %x0, %t_row, {8 * j};
\ttcgen05.ld.sync.aligned.32x32b.x8.b32 {{{regs8}}}, [%x0];
\ttcgen05.wait::ld.sync.aligned;
\tst.global.v4.b32 [%crow+{32 * j}], {{%v0, %v1, %v2, %v3}};
\tst.global.v4.b32 [%crow+{32 * j + 16}], {{%v4, %v5, %v6, %v7}};
""" for j in range(chunks))
    return f"""//
// mxsim {name}: {variant.tcgen05_instruction}
// M = 128, N = {n_tile}, K = {variant.k} per MMA, {n_mma} MMA(s) per stage of {4 * variant.block}
// elements of K; D = C + sum of A*B in tensor memory. Generated by gpu/blackwell.py.
//
.version {PTX_VERSIONS[arch]}
.target {arch}
.address_size 64

.visible .entry {name}(
\t.param .u64 p_a, .param .u64 p_b, .param .u64 p_sa, .param .u64 p_sb,
\t.param .u64 p_c, .param .u64 p_d, .param .u32 p_stages, .param .u32 p_k_blocks)
.reqntid 128
{{
\t.shared .align 1024 .b8 smem_buf[{total}];
\t.shared .align 8 .b64 mbar;
\t.shared .align 4 .b32 tmem_slot;
\t.reg .pred %pw0, %pt0, %pc, %pq, %pt, %pw, %pl;
\t.reg .b32 %tix, %warp, %i, %sh, %smem, %taddr, %t_d, %t_sfa, %t_sfb, %t_row, %idesc;
\t.reg .b32 %stages, %k_blocks, %s, %blk, %parity, %qa, %qb, %qd, %x<3>, %v<8>;
\t.reg .b64 %pa, %pb, %psa, %psb, %crow, %g, %o64, %sbase, %adesc, %bdesc, %sdesc;
\t.reg .b64 %ga, %gb, %gsa, %gsb;

\tld.param.u64 %pa, [p_a];
\tld.param.u64 %pb, [p_b];
\tld.param.u64 %psa, [p_sa];
\tld.param.u64 %psb, [p_sb];
\tld.param.u32 %stages, [p_stages];
\tld.param.u32 %k_blocks, [p_k_blocks];
\tmov.u32 %tix, %tid.x;
\tshr.u32 %warp, %tix, 5;
\tsetp.eq.u32 %pw0, %warp, 0;
\tsetp.eq.u32 %pt0, %tix, 0;
\tsetp.eq.u32 %pt, %tix, %tix;                      // enable-input-d: always accumulate
\tmov.u32 %smem, smem_buf;
\tcvt.u64.u32 %sbase, %smem;
\tshr.u64 %sbase, %sbase, 4;                        // descriptor start-address field
\tmov.u32 %x0, %ctaid.z;                            // qa = batch*n_mt + mt, qb, qd
\tmov.u32 %x1, %nctaid.y;
\tmov.u32 %x2, %ctaid.y;
\tmad.lo.u32 %qa, %x0, %x1, %x2;
\tmov.u32 %x1, %nctaid.x;
\tmov.u32 %x2, %ctaid.x;
\tmad.lo.u32 %qb, %x0, %x1, %x2;
\tmad.lo.u32 %qd, %qa, %x1, %x2;

\t// 1. Tensor memory: warp 0 allocates {tmem_cols} columns; thread 0 sets up the mbarrier.
\t@!%pw0 bra ALLOCATED;
\ttcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [tmem_slot], {tmem_cols};
\ttcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
ALLOCATED:
\t@%pt0 mbarrier.init.shared::cta.b64 [mbar], 1;
\tfence.mbarrier_init.release.cluster;
\ttcgen05.fence::before_thread_sync;
\tbar.sync 0;
\ttcgen05.fence::after_thread_sync;
\tld.shared.b32 %taddr, [tmem_slot];
\tmov.u32 %t_d, %taddr;
\tadd.u32 %t_sfa, %taddr, {col_sfa};
\tadd.u32 %t_sfb, %taddr, {col_sfb};
\tshl.b32 %x0, %warp, 21;                           // lane 32*warp in address bits 16..31
\tadd.u32 %t_row, %taddr, %x0;

\t// 2. C into D: thread (warp w, lane l) owns row 32w + l of the tile (Layout D).
\tld.param.u64 %crow, [p_c];
\tmul.lo.u32 %x0, %qd, {m};
\tadd.u32 %x0, %x0, %tix;
\tmul.wide.u32 %o64, %x0, {4 * n_tile};
\tadd.u64 %crow, %crow, %o64;
{load_c}\ttcgen05.wait::st.sync.aligned;
\ttcgen05.fence::before_thread_sync;

\t// 3. Stages: copy to shared memory, thread 0 issues scale copies and MMAs, all wait.
\tmul.lo.u32 %x0, %qa, %stages;
\tmul.wide.u32 %o64, %x0, {a_slab};
\tadd.u64 %ga, %pa, %o64;
\tmul.wide.u32 %o64, %x0, 512;
\tadd.u64 %gsa, %psa, %o64;
\tmul.lo.u32 %x0, %qb, %stages;
\tmul.wide.u32 %o64, %x0, {b_slab};
\tadd.u64 %gb, %pb, %o64;
\tmul.wide.u32 %o64, %x0, 512;
\tadd.u64 %gsb, %psb, %o64;
\tmov.u32 %s, 0;
STAGE:
\tsetp.ge.u32 %pl, %s, %stages;
\t@%pl bra EPILOGUE;
{copy("COPY_A", "%ga", a_slab, 0)}{copy("COPY_B", "%gb", b_slab, off_b)}\
{copy("COPY_SA", "%gsa", 512, off_sa)}{copy("COPY_SB", "%gsb", 512, off_sb)}\
\tfence.proxy.async.shared::cta;                    // generic-proxy writes -> tensor core
\tbar.sync 0;
\tshl.b32 %blk, %s, 2;                              // first scale block of this stage
\t@!%pt0 bra WAIT;
\ttcgen05.fence::after_thread_sync;
\tadd.u64 %sdesc, %sbase, {sdesc_scale + (off_sa >> 4)};
\ttcgen05.cp.cta_group::1.32x128b.warpx4 [%t_sfa], %sdesc;
\tadd.u64 %sdesc, %sbase, {sdesc_scale + (off_sb >> 4)};
\ttcgen05.cp.cta_group::1.32x128b.warpx4 [%t_sfb], %sdesc;
{"".join(mmas)}\ttcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [mbar];
WAIT:
\tand.b32 %parity, %s, 1;
WAIT_LOOP:
\tmbarrier.try_wait.parity.shared::cta.b64 %pw, [mbar], %parity;
\t@!%pw bra WAIT_LOOP;
\ttcgen05.fence::after_thread_sync;
\tadd.u64 %ga, %ga, {a_slab};
\tadd.u64 %gb, %gb, {b_slab};
\tadd.u64 %gsa, %gsa, 512;
\tadd.u64 %gsb, %gsb, 512;
\tadd.u32 %s, %s, 1;
\tbra STAGE;

EPILOGUE:
\t// 4. D out: each thread its row, {chunks} chunks of 8 columns.
\ttcgen05.fence::after_thread_sync;
\tld.param.u64 %crow, [p_d];
\tmul.lo.u32 %x0, %qd, {m};
\tadd.u32 %x0, %x0, %tix;
\tmul.wide.u32 %o64, %x0, {4 * n_tile};
\tadd.u64 %crow, %crow, %o64;
{store_d}\ttcgen05.fence::before_thread_sync;
\tbar.sync 0;
\t@!%pw0 bra DONE;
\ttcgen05.fence::after_thread_sync;
\ttcgen05.dealloc.cta_group::1.sync.aligned.b32 %taddr, {tmem_cols};
DONE:
\tret;
}}
"""


# -- runners ---------------------------------------------------------------------------------

def _cupy_reason() -> str | None:
    try:
        import cupy  # noqa: F401
    except ImportError:
        return "cupy is not installed (the PTX kernels load through cupy.RawModule)"
    return None


def _arch_reason(archs: dict[tuple[int, int], str], what: str) -> str | None:
    wanted = " or ".join(f"{a}.{b} ({name})" for (a, b), name in archs.items())
    reason = torch_unavailable_reason()
    if reason is not None:
        return f"{what} needs an NVIDIA GPU of compute capability {wanted}; {reason}"
    cap = capability()
    if cap not in archs:
        return f"{what} needs compute capability {wanted}, not {cap[0]}.{cap[1]}"
    return None


@functools.lru_cache(maxsize=64)
def _kernel(ptx: str):
    """The kernel of a PTX module, JIT-compiled by the driver for the local GPU; cached.

    The text goes to a file that lives as long as the process and is loaded with
    ``cupy.RawModule(path=...)`` (the driver's ``cuModuleLoad`` compiles PTX); fetching the
    function forces the load while the file exists.
    """
    import cupy
    path = os.path.join(_ptx_dir(), f"{_entry(ptx)}_{abs(hash(ptx)):x}.ptx")
    with open(path, "w") as f:
        f.write(ptx)
    return cupy.RawModule(path=path).get_function(_entry(ptx))


@functools.cache
def _ptx_dir() -> str:
    path = tempfile.mkdtemp(prefix="mxsim_ptx_")
    atexit.register(shutil.rmtree, path, True)
    return path


def _entry(ptx: str) -> str:
    return ptx.split(".visible .entry ", 1)[1].split("(", 1)[0]


def _flat_batch(vs: VectorSet) -> tuple[int, npt.NDArray, npt.NDArray, npt.NDArray, npt.NDArray]:
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    return (nb, vs.a.reshape(nb, vs.m, vs.k), vs.b.reshape(nb, vs.k, vs.n),
            vs.a_scale.reshape(nb, vs.m, -1), vs.b_scale.reshape(nb, -1, vs.n))


def _c_bits(vs: VectorSet, nb: int) -> npt.NDArray[np.uint32]:
    if vs.c is None:
        return np.zeros((nb, vs.m, vs.n), np.uint32)
    if vs.c_format != "fp32":
        raise UnitError(f"block-scaled MMAs accumulate in fp32; C must be fp32, not "
                        f"{vs.c_format}")
    return vs.c.reshape(nb, vs.m, vs.n)


def _pad(x: npt.NDArray, axis: int, multiple: int) -> npt.NDArray:
    extra = -x.shape[axis] % multiple
    if not extra:
        return x
    width = [(0, 0)] * x.ndim
    width[axis] = (0, extra)
    return np.pad(x, width)


class _BlockScaledRunner:
    """What the two block-scaled MMA runners share: the kind, the name, where they run."""
    prefix: str
    archs: dict[tuple[int, int], str]
    what: str
    mma_sync: bool

    def __init__(self, kind: str):
        if kind not in KINDS:
            raise ValueError(f"Kind must be one of {', '.join(KINDS)}, not {kind!r}")
        self.kind = kind
        self.name = f"{self.prefix}-{kind}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.kind!r})"

    def unavailable_reason(self) -> str | None:
        return (_arch_reason(self.archs, f"{self.what} kind::{self.kind}")
                or _cupy_reason())

    def variant(self, vs: VectorSet) -> BlockScaledVariant:
        return _variant_for(vs, self.kind, mma_sync=self.mma_sync)


class MmaSyncBlockScaled(_BlockScaledRunner):
    """Runner for ``mma.sync ... .block_scale`` of one kind (sm_120a / sm_121a).

    ``run(vs)`` packs the set (M padded to 16 and N to 8 with zero codes; K must be a multiple
    of the instruction's K), launches :func:`mma_sync_ptx` with C from the set (or +0), and
    returns D as FP32 bit patterns: one instruction per 16x8xK tile step, chained over K.
    """

    prefix, archs, what, mma_sync = "mma-sync", MMA_SYNC_ARCHS, "mma.sync", True

    def pack(self, vs: VectorSet) -> dict[str, Any]:
        """The kernel's buffers and sizes for ``vs`` (host side only; runs anywhere)."""
        v = self.variant(vs)
        if vs.k % v.k:
            raise UnitError(f"{v.mma_sync_instruction} needs K a multiple of {v.k}, not "
                            f"{vs.k}")
        nb, a, b, sa, sb = _flat_batch(vs)
        c = _c_bits(vs, nb)
        a, sa, c = _pad(a, 1, 16), _pad(sa, 1, 16), _pad(c, 1, 16)
        b, sb, c = _pad(b, 2, 8), _pad(sb, 2, 8), _pad(c, 2, 8)
        n_mt, n_nt, k_tiles = a.shape[1] // 16, b.shape[2] // 8, vs.k // v.k
        return {"variant": v, "n_mt": n_mt, "n_nt": n_nt, "k_tiles": k_tiles,
                "n_tiles": nb * n_mt * n_nt, "batch": nb,
                "a": pack_mma_sync_a(a, v).reshape(nb * n_mt, k_tiles, 32, 4),
                "b": pack_mma_sync_b(b, v).reshape(nb * n_nt, k_tiles, 32, 2),
                "c": pack_mma_sync_c(c).reshape(-1, 32, 4),
                "sa": pack_mma_sync_scale_a(sa).reshape(nb * n_mt, -1, 32),
                "sb": pack_mma_sync_scale_b(sb).reshape(nb * n_nt, -1, 32)}

    def run(self, vs: VectorSet) -> VectorSet:
        """D = A·B + C of ``vs`` on the local GPU; FP32 bit patterns in ``d``."""
        reason = self.unavailable_reason()
        if reason is not None:
            raise UnitError(f"{self.name} path unavailable: {reason}")
        import cupy as cp
        p = self.pack(vs)
        v = p["variant"]
        arch = MMA_SYNC_ARCHS[capability()]
        ptx = mma_sync_ptx(v, arch=arch)
        fn = _kernel(ptx)
        dev = {k: cp.asarray(p[k]) for k in ("a", "b", "c", "sa", "sb")}
        d = cp.zeros_like(dev["c"])
        warps = 4
        fn(((p["n_tiles"] + warps - 1) // warps,), (32 * warps,),
           (dev["a"], dev["b"], dev["c"], dev["sa"], dev["sb"], d, np.uint32(p["n_mt"]),
            np.uint32(p["n_nt"]), np.uint32(p["k_tiles"]), np.uint32(p["n_tiles"])))
        frags = cp.asnumpy(d).reshape(p["batch"], p["n_mt"], p["n_nt"], 32, 4)
        out = unpack_mma_sync_d(frags)[:, : vs.m, : vs.n]
        return vs.with_result(out.reshape(vs.batch_shape + (vs.m, vs.n)),
                              producer=f"gpu {self.name} ({arch})", path=self.name,
                              instruction=v.mma_sync_instruction, device=device_info())


class Tcgen05BlockScaled(_BlockScaledRunner):
    """Runner for ``tcgen05.mma.cta_group::1 ... .block_scale`` of one kind (sm_100a/sm_103a).

    ``run(vs)`` packs the set into 128-row M tiles and N tiles of up to 128 columns (padding
    with zero codes), launches :func:`tcgen05_ptx` with C (or +0) preloaded into D, and returns
    D as FP32 bit patterns. K must be a multiple of the instruction's K (32 or 64); K beyond it
    up to a whole stage is padding on which no MMA is issued.
    """

    prefix, archs, what, mma_sync = "tcgen05", TCGEN05_ARCHS, "tcgen05.mma", False

    @staticmethod
    def n_tile(n: int) -> int:
        return min(128, -(-n // 16) * 16)

    def pack(self, vs: VectorSet) -> dict[str, Any]:
        """The kernel's buffers and sizes for ``vs`` (host side only; runs anywhere)."""
        v = self.variant(vs)
        if vs.k % v.k:
            raise UnitError(f"{v.tcgen05_instruction} needs K a multiple of {v.k}, not "
                            f"{vs.k}")
        nb, a, b, sa, sb = _flat_batch(vs)
        nt = self.n_tile(vs.n)
        c = _pad(_pad(_c_bits(vs, nb), 1, TCGEN05_M), 2, nt)
        n_mt, n_nt = c.shape[1] // TCGEN05_M, c.shape[2] // nt
        bt = np.swapaxes(b, 1, 2)                                   # (nb, N, K), K-major
        pa = pack_tcgen05_operand(a, v.a_format, v, TCGEN05_M)      # (nb, n_mt, stages, ..)
        pb = pack_tcgen05_operand(bt, v.b_format, v, nt)
        ssa = pack_tcgen05_scales(_pad(sa, 1, TCGEN05_M).reshape(nb * n_mt, TCGEN05_M, -1))
        ssb = pack_tcgen05_scales(
            _pad(np.swapaxes(sb, 1, 2), 1, nt).reshape(nb * n_nt, nt, -1))
        tiles = c.reshape(nb, n_mt, TCGEN05_M, n_nt, nt).transpose(0, 1, 3, 2, 4)
        return {"variant": v, "n_tile": nt, "n_mt": n_mt, "n_nt": n_nt, "batch": nb,
                "stages": pa.shape[2], "k_blocks": vs.k // v.block,
                "a": pa, "b": pb, "sa": ssa, "sb": ssb, "c": np.ascontiguousarray(tiles)}

    def run(self, vs: VectorSet) -> VectorSet:
        """D = A·B + C of ``vs`` on the local GPU; FP32 bit patterns in ``d``."""
        reason = self.unavailable_reason()
        if reason is not None:
            raise UnitError(f"{self.name} path unavailable: {reason}")
        import cupy as cp
        p = self.pack(vs)
        v = p["variant"]
        arch = TCGEN05_ARCHS[capability()]
        ptx = tcgen05_ptx(v, n_tile=p["n_tile"], arch=arch)
        fn = _kernel(ptx)
        dev = {k: cp.asarray(p[k]) for k in ("a", "b", "sa", "sb", "c")}
        d = cp.zeros_like(dev["c"])
        fn((p["n_nt"], p["n_mt"], p["batch"]), (128,),
           (dev["a"], dev["b"], dev["sa"], dev["sb"], dev["c"], d, np.uint32(p["stages"]),
            np.uint32(p["k_blocks"])))
        out = unpack_tcgen05_d(cp.asnumpy(d))[:, : vs.m, : vs.n]
        return vs.with_result(out.reshape(vs.batch_shape + (vs.m, vs.n)),
                              producer=f"gpu {self.name} ({arch})", path=self.name,
                              instruction=v.tcgen05_instruction, device=device_info())


class ScaledMmMx:
    """Runner for MXFP8 / MXFP4 / NVFP4 GEMMs through ``torch._scaled_mm`` (sm_100 and newer).

    Operands: MXFP8 as ``float8_e4m3fn``/``float8_e5m2`` with ``float8_e8m0fnu`` scales (block
    32); MXFP4 as ``float4_e2m1fn_x2`` (two per byte, first in the low nibble, which is
    ``formats.pack_fp4``) with E8M0 scales (block 32); NVFP4 as ``float4_e2m1fn_x2`` with UE4M3
    scales passed as ``float8_e4m3fn`` (block 16). A is row-major, B column-major, scales in the
    blocked layout of ``gpu.blocked.to_blocked`` (cuBLASLt ``VEC32_UE8M0``/``VEC16_UE4M3``).
    The output is requested as float32; if torch refuses that, the run fails with its message
    rather than rounding through bf16. Sets with C or an NVFP4 ``tensor_scale`` are refused
    (``_scaled_mm`` takes neither bit-exactly).
    """
    name = "scaled-mm-mx"
    #: (a_format, b_format, scale_format, block) this path takes.
    COMBOS = tuple([(a, b, "e8m0", 32) for a in ("e4m3", "e5m2") for b in ("e4m3", "e5m2")]
                   + [("e2m1", "e2m1", "e8m0", 32), ("e2m1", "e2m1", "ue4m3", 16)])

    def __repr__(self) -> str:
        return "ScaledMmMx()"

    def unavailable_reason(self) -> str | None:
        reason = torch_unavailable_reason()
        if reason is not None:
            return (f"MX/NVFP4 torch._scaled_mm needs an NVIDIA GPU of compute capability 10.0 "
                    f"or newer; {reason}")
        import torch
        for dtype in ("float8_e8m0fnu", "float4_e2m1fn_x2"):
            if not hasattr(torch, dtype):
                return f"torch {torch.__version__} has no torch.{dtype}"
        cap = capability()
        if cap < (10, 0):
            return (f"MX/NVFP4 torch._scaled_mm needs compute capability 10.0 or newer "
                    f"(cuBLASLt block-scaled GEMMs), not {cap[0]}.{cap[1]}")
        return None

    def check(self, vs: VectorSet) -> None:
        """Raise a one-line UnitError unless this path can run ``vs``."""
        combo = (vs.a_format, vs.b_format, vs.scale_format, vs.block)
        if combo not in self.COMBOS:
            raise UnitError(f"{self.name} takes MXFP8 (e4m3/e5m2, e8m0, block 32), MXFP4 "
                            f"(e2m1, e8m0, block 32) or NVFP4 (e2m1, ue4m3, block 16), not "
                            f"{vs.a_format}x{vs.b_format} with {vs.scale_format} block "
                            f"{vs.block}")
        if vs.c is not None or vs.tensor_scale is not None:
            raise UnitError(f"{self.name} runs sets without C or tensor_scale (generate with "
                            f"--no-c)")

    def run(self, vs: VectorSet) -> VectorSet:
        """D = A·B of ``vs`` on the local GPU; FP32 bit patterns in ``d``."""
        reason = self.unavailable_reason()
        if reason is not None:
            raise UnitError(f"{self.name} path unavailable: {reason}")
        self.check(vs)
        import torch

        from .blocked import to_blocked
        fp4 = vs.a_format == "e2m1"
        elem = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2,
                "e2m1": torch.float4_e2m1fn_x2}
        sdt = torch.float8_e8m0fnu if vs.scale_format == "e8m0" else torch.float8_e4m3fn
        nb, a_all, b_all, sa_all, sb_all = _flat_batch(vs)
        out = np.empty((nb, vs.m, vs.n), np.uint32)
        for i in range(nb):
            a, bt = a_all[i], np.ascontiguousarray(b_all[i].T)      # (M, K), (N, K)
            if fp4:
                a, bt = formats.pack_fp4(a), formats.pack_fp4(bt)
            ta = torch.from_numpy(np.ascontiguousarray(a)).view(elem[vs.a_format]).cuda()
            tb = torch.from_numpy(bt).view(elem[vs.b_format]).cuda().t()
            sa = torch.from_numpy(to_blocked(sa_all[i])).view(sdt).cuda()
            sb = torch.from_numpy(to_blocked(np.ascontiguousarray(sb_all[i].T))).view(sdt).cuda()
            try:
                d = torch._scaled_mm(ta, tb, sa, sb, out_dtype=torch.float32)
            except (RuntimeError, ValueError) as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                raise UnitError(f"torch._scaled_mm refused this set: {first}") from None
            out[i] = d.view(torch.int32).cpu().numpy().view(np.uint32)
        return vs.with_result(out.reshape(vs.batch_shape + (vs.m, vs.n)),
                              producer="gpu torch._scaled_mm (block-scaled)", path=self.name,
                              torch=torch.__version__, device=device_info())


#: Every Blackwell path by name.
RUNNERS: dict[str, Any] = {r.name: r for r in (
    *(MmaSyncBlockScaled(k) for k in KINDS), *(Tcgen05BlockScaled(k) for k in KINDS),
    ScaledMmMx())}


def unavailable_reasons() -> dict[str, str | None]:
    """Each Blackwell path's reason it cannot run here (None where it can)."""
    return {name: r.unavailable_reason() for name, r in RUNNERS.items()}


def _summary(runner: Any) -> str:
    if isinstance(runner, MmaSyncBlockScaled):
        return (f"PTX mma.sync ... kind::{runner.kind}.block_scale (sm_120a), one 16x8 tile per "
                f"warp, chained over K")
    if isinstance(runner, Tcgen05BlockScaled):
        return (f"PTX tcgen05.mma.cta_group::1.kind::{runner.kind}.block_scale (sm_100a), "
                f"M=128 tiles, D in tensor memory")
    return "torch._scaled_mm MXFP8/MXFP4/NVFP4, blocked E8M0/UE4M3 scales (sm_100+)"


def __getattr__(name: str) -> Any:
    # ``PATHS`` (the entries ``gpu.paths`` lists) is built on first use: ``gpu.paths`` imports
    # this module while it builds its own registry, so importing it here at load would cycle.
    if name == "PATHS":
        from .paths import Path
        return [Path(r.name, _summary(r), r.unavailable_reason, r.run,
                     f"blackwell-{r.kind}" if isinstance(r, Tcgen05BlockScaled) else None)
                for r in RUNNERS.values()]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
