"""Blackwell block-scaled tensor-core paths: PTX kernels, operand packing and runners.

These paths cannot run on Hopper (our H200), but everything short of the launch is built and
checked here: the PTX of each kernel assembles with ``ptxas`` for its architecture, and the
numpy packers that put vector-set codes into the registers, shared memory and tensor memory
the instructions read are tested against the PTX ISA's fragment tables
(``tests/gpu/test_gpu_blackwell.py``).

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
``mma-sync-f8f6f4``
    ``mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.<a>.<b>.f32`` (sm_120a): the same
    operands, no scales; the block-scaled kernel without the MMA's scale operands.
``tcgen05-mxf8f6f4``, ``tcgen05-mxf4``, ``tcgen05-mxf4nvf4``, ``tcgen05-f8f6f4``
    ``tcgen05.mma.cta_group::1.kind::<kind>.block_scale.scale_vec::<n>X`` (sm_100a, sm_103a),
    M = 128, operands in shared memory, scales and D in tensor memory.
``scaled-mm-mx``
    ``torch._scaled_mm`` on MXFP8 (E8M0 scales), MXFP4 (E8M0) and NVFP4 (UE4M3, block 16),
    scales in cuBLAS's 128x4 blocked layout (cuBLASLt ``VEC32_UE8M0`` / ``VEC16_UE4M3``).

Modules, one job each: ``variants`` (which instruction variants exist; valid by
construction), ``mma_sync_layout`` and ``tcgen05_layout`` (where each instruction reads its
operands and scales: the numpy packers and descriptors), ``ptx`` (the kernels' PTX text),
``loader`` (PTX onto the GPU through CuPy) and ``runners`` (the :class:`gpu.runner.Runner`
objects ``gpu.paths`` registers). Everything here imports numpy only; torch and cupy are
imported by a run.


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

from .mma_sync_layout import (
    mma_sync_a_index,
    mma_sync_b_index,
    mma_sync_c_index,
    mma_sync_containers,
    mma_sync_scale_selector,
    pack_mma_sync_a,
    pack_mma_sync_b,
    pack_mma_sync_c,
    pack_mma_sync_scale_a,
    pack_mma_sync_scale_b,
    unpack_mma_sync_d,
)
from .ptx import mma_sync_ptx, tcgen05_ptx
from .runners import MmaSyncBlockScaled, ScaledMmMx, Tcgen05BlockScaled
from .tcgen05_layout import (
    TCGEN05_M,
    pack_tcgen05_operand,
    pack_tcgen05_scales,
    smem_descriptor,
    tcgen05_canonical_k_major,
    tcgen05_instr_desc,
    tcgen05_row_bytes,
    tcgen05_stage,
    unpack_tcgen05_d,
)
from .variants import (
    F8F6F4_FORMATS,
    KINDS,
    MMA_SYNC_ARCHS,
    PTX_VERSIONS,
    RUNNER_KINDS,
    TCGEN05_ARCHS,
    UNSCALED_KINDS,
    BlockScaledVariant,
    f8f6f4_variants,
    mma_sync_variants,
    tcgen05_variants,
)

__all__ = [
    "F8F6F4_FORMATS", "KINDS", "UNSCALED_KINDS", "RUNNER_KINDS", "PTX_VERSIONS",
    "MMA_SYNC_ARCHS", "TCGEN05_ARCHS", "BlockScaledVariant", "mma_sync_variants",
    "tcgen05_variants", "f8f6f4_variants",
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
    "MmaSyncBlockScaled", "Tcgen05BlockScaled", "ScaledMmMx",
]
