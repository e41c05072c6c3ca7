"""The Blackwell runners (:class:`gpu.runner.Runner`): pack a vector set, launch, read D back.

``MmaSyncBlockScaled`` (sm_120a/sm_121a) and ``Tcgen05BlockScaled`` (sm_100a/sm_103a) launch
the PTX kernels of ``ptx`` on buffers packed by ``mma_sync_layout`` and ``tcgen05_layout``;
their ``pack(vs)`` is host-side only and runs anywhere. ``ScaledMmMx`` runs MXFP8, MXFP4 and
NVFP4 GEMMs through ``torch._scaled_mm`` (cuBLASLt, sm_100 and newer).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from mxsim import formats
from mxsim.errors import UnitError
from mxsim.vectors import VectorSet

from ..device import capability, device_info, torch_unavailable_reason
from ..runner import require
from .loader import cupy_unavailable_reason, load_kernel
from .mma_sync_layout import (
    pack_mma_sync_a,
    pack_mma_sync_b,
    pack_mma_sync_c,
    pack_mma_sync_scale_a,
    pack_mma_sync_scale_b,
    unpack_mma_sync_d,
)
from .ptx import mma_sync_ptx, tcgen05_ptx
from .tcgen05_layout import (
    TCGEN05_M,
    pack_tcgen05_operand,
    pack_tcgen05_scales,
    unpack_tcgen05_d,
)
from .variants import (
    MMA_SYNC_ARCHS,
    RUNNER_KINDS,
    TCGEN05_ARCHS,
    BlockScaledVariant,
    variant_for,
)

__all__ = ["MmaSyncBlockScaled", "Tcgen05BlockScaled", "ScaledMmMx"]


def _arch_reason(archs: dict[tuple[int, int], str], what: str) -> str | None:
    wanted = " or ".join(f"{a}.{b} ({name})" for (a, b), name in archs.items())
    reason = torch_unavailable_reason()
    if reason is not None:
        return f"{what} needs an NVIDIA GPU of compute capability {wanted}; {reason}"
    cap = capability()
    if cap not in archs:
        return f"{what} needs compute capability {wanted}, not {cap[0]}.{cap[1]}"
    return None



def _flat_batch(vs: VectorSet) -> tuple[int, npt.NDArray, npt.NDArray, npt.NDArray, npt.NDArray]:
    """The batch folded into one axis: (batches, A, B, A scales, B scales). A set without
    scales (``kind::f8f6f4``) gets zero scale codes in blocks of 32, which no MMA reads."""
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    if vs.a_scale is None:
        sa = np.zeros((nb, vs.m, -(-vs.k // 32)), np.uint8)
        sb = np.zeros((nb, -(-vs.k // 32), vs.n), np.uint8)
    else:
        sa, sb = vs.a_scale.reshape(nb, vs.m, -1), vs.b_scale.reshape(nb, -1, vs.n)
    return nb, vs.a.reshape(nb, vs.m, vs.k), vs.b.reshape(nb, vs.k, vs.n), sa, sb


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
        if kind not in RUNNER_KINDS:
            raise ValueError(f"Kind must be one of {', '.join(RUNNER_KINDS)}, not {kind!r}")
        self.kind = kind
        self.name = f"{self.prefix}-{kind}"
        self.preset: str | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.kind!r})"

    def unavailable_reason(self) -> str | None:
        return (_arch_reason(self.archs, f"{self.what} kind::{self.kind}")
                or cupy_unavailable_reason())

    def variant(self, vs: VectorSet) -> BlockScaledVariant:
        return variant_for(vs, self.kind, mma_sync=self.mma_sync)


class MmaSyncBlockScaled(_BlockScaledRunner):
    """Runner for ``mma.sync ... .block_scale`` of one kind (sm_120a / sm_121a).

    ``run(vs)`` packs the set (M padded to 16 and N to 8 with zero codes; K must be a multiple
    of the instruction's K), launches :func:`mma_sync_ptx` with C from the set (or +0), and
    returns D as FP32 bit patterns: one instruction per 16x8xK tile step, chained over K.
    """

    prefix, archs, what, mma_sync = "mma-sync", MMA_SYNC_ARCHS, "mma.sync", True

    def __init__(self, kind: str):
        super().__init__(kind)
        shape = "m16n8k64" if kind in ("mxf4", "mxf4nvf4") else "m16n8k32"
        scale = "" if kind == "f8f6f4" else ".block_scale"
        self.instruction = f"mma.sync.aligned.{shape}.row.col.kind::{kind}{scale}"
        self.summary = (f"PTX mma.sync ... kind::{kind}{scale} (sm_120a), one 16x8 tile "
                        f"per warp, chained over K")

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
        require(self)
        import cupy as cp
        p = self.pack(vs)
        v = p["variant"]
        arch = MMA_SYNC_ARCHS[capability()]
        ptx = mma_sync_ptx(v, arch=arch)
        fn = load_kernel(ptx)
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

    def __init__(self, kind: str):
        super().__init__(kind)
        scale = "" if kind == "f8f6f4" else ".block_scale"
        self.instruction = f"tcgen05.mma.cta_group::1.kind::{kind}{scale}"
        self.summary = (f"PTX tcgen05.mma.cta_group::1.kind::{kind}{scale} (sm_100a), "
                        f"M=128 tiles, D in tensor memory")
        self.preset = f"blackwell-{kind}"

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
        require(self)
        import cupy as cp
        p = self.pack(vs)
        v = p["variant"]
        arch = TCGEN05_ARCHS[capability()]
        ptx = tcgen05_ptx(v, n_tile=p["n_tile"], arch=arch)
        fn = load_kernel(ptx)
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
    blocked layout of ``gpu.blackwell.blocked.to_blocked`` (cuBLASLt
    ``VEC32_UE8M0``/``VEC16_UE4M3``).
    The output is requested as float32; if torch refuses that, the run fails with its message
    rather than rounding through bf16. Sets with C or an NVFP4 ``tensor_scale`` are refused
    (``_scaled_mm`` takes neither bit-exactly).
    """
    name = "scaled-mm-mx"
    summary = "torch._scaled_mm MXFP8/MXFP4/NVFP4, blocked E8M0/UE4M3 scales (sm_100+)"
    instruction = "torch._scaled_mm (cuBLASLt block-scaled GEMM)"
    preset = None
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
        require(self)
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
