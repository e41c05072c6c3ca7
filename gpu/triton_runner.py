"""Triton paths: ``tl.dot`` on FP8 operands and ``tl.dot_scaled`` on MX operands.

Each program computes a 64x64 tile of D. It starts its accumulator from C and walks K in steps
of ``BLOCK_K = 32``: ``acc = tl.dot(a, b, acc)`` (or ``tl.dot_scaled`` with the blocks' E8M0
scales), so every output is a chain of K/32 dot steps, each fed the previous result. On
Hopper ``tl.dot`` on FP8 lowers to ``wgmma`` k32 (Triton may promote the accumulator: the data
says which), and ``tl.dot_scaled`` is emulated (elements upcast to bf16, scales folded in);
on Blackwell it is native. Which preset matches each is the probe-and-fit issue's question.
"""

from __future__ import annotations

import numpy as np

from mxsim.errors import UnitError
from mxsim.vectors import VectorSet

from .device import device_info, needs
from .runner import require

__all__ = ["unavailable_reason", "run_dot", "run_dot_scaled", "DOT_SCALED_FORMATS", "TritonDot",
           "TritonDotScaled"]

BLOCK_M = BLOCK_N = 64
BLOCK_K = 32
#: Element formats tl.dot_scaled takes here (Triton's names).
DOT_SCALED_FORMATS = {"e4m3": "e4m3", "e5m2": "e5m2", "e2m1": "e2m1"}

_KERNELS = None


def unavailable_reason() -> str | None:
    return needs("triton", (8, 9), "FP8 tl.dot")


def _kernels():
    global _KERNELS
    if _KERNELS is not None:
        return _KERNELS
    import triton
    import triton.language as tl

    @triton.jit
    def dot_kernel(a_ptr, b_ptr, c_ptr, d_ptr, M, N, K,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
        for k0 in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :])
            b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :])
            acc = tl.dot(a, b, acc)
        tl.store(d_ptr + rm[:, None] * N + rn[None, :], acc)

    @triton.jit
    def dot_scaled_kernel(a_ptr, sa_ptr, b_ptr, sb_ptr, c_ptr, d_ptr, M, N, K,
                          A_FMT: tl.constexpr, B_FMT: tl.constexpr, A_PACK: tl.constexpr,
                          B_PACK: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                          BK: tl.constexpr):
        # A is (M, K / A_PACK) bytes, B is (K / B_PACK, N) bytes (FP4 two per byte along K);
        # scales: sa (M, K / 32), sb transposed to (N, K / 32), as tl.dot_scaled wants.
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rka = tl.arange(0, BK // A_PACK)
        rkb = tl.arange(0, BK // B_PACK)
        rs = tl.arange(0, BK // 32)
        acc = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
        for k0 in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * (K // A_PACK) + (k0 // A_PACK + rka)[None, :])
            b = tl.load(b_ptr + (k0 // B_PACK + rkb)[:, None] * N + rn[None, :])
            sa = tl.load(sa_ptr + rm[:, None] * (K // 32) + (k0 // 32 + rs)[None, :])
            sb = tl.load(sb_ptr + rn[:, None] * (K // 32) + (k0 // 32 + rs)[None, :])
            acc = tl.dot_scaled(a, sa, A_FMT, b, sb, B_FMT, acc)
        tl.store(d_ptr + rm[:, None] * N + rn[None, :], acc)

    _KERNELS = (dot_kernel, dot_scaled_kernel)
    return _KERNELS


def _check(vs: VectorSet, what: str) -> None:
    reason = unavailable_reason()
    if reason is not None:
        raise UnitError(f"{what} path unavailable: {reason}")
    if vs.m % BLOCK_M or vs.n % BLOCK_N or vs.k % BLOCK_K:
        raise UnitError(f"The Triton runner needs M and N multiples of {BLOCK_M} and K of "
                        f"{BLOCK_K}, not {vs.m}, {vs.n}, {vs.k}")
    if vs.c is not None and vs.c_format != "fp32":
        raise UnitError(f"The Triton runner accumulates in FP32; C must be fp32, not "
                        f"{vs.c_format}")


def _result(vs: VectorSet, out: np.ndarray, path: str, **extra) -> VectorSet:
    import triton
    return vs.with_result(out.reshape(vs.batch_shape + (vs.m, vs.n)), producer=f"gpu {path}",
                          path=path, triton=triton.__version__, device=device_info(),
                          block=[BLOCK_M, BLOCK_N, BLOCK_K], **extra)


def run_dot(vs: VectorSet) -> VectorSet:
    """D = A·B + C of an unscaled FP8 set through ``tl.dot`` (FP32 accumulator)."""
    _check(vs, "triton-dot")
    if vs.a_format not in ("e4m3", "e5m2") or vs.b_format not in ("e4m3", "e5m2") \
            or vs.scale_format is not None:
        raise UnitError(f"tl.dot here takes unscaled e4m3/e5m2 operands, not {vs.a_format} x "
                        f"{vs.b_format}")
    import torch
    dot_kernel, _ = _kernels()
    dt = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n, k = vs.m, vs.n, vs.k
    out = np.empty((nb, m, n), np.uint32)
    for i in range(nb):
        a = torch.from_numpy(vs.a.reshape(nb, m, k)[i].copy()).cuda().view(dt[vs.a_format])
        b = torch.from_numpy(vs.b.reshape(nb, k, n)[i].copy()).cuda().view(dt[vs.b_format])
        c = (torch.from_numpy(vs.c.reshape(nb, m, n)[i].copy()).cuda().view(torch.float32)
             if vs.c is not None else torch.zeros((m, n), dtype=torch.float32, device="cuda"))
        d = torch.empty_like(c)
        dot_kernel[(m // BLOCK_M, n // BLOCK_N)](a, b, c, d, m, n, k, BM=BLOCK_M, BN=BLOCK_N,
                                                 BK=BLOCK_K)
        out[i] = d.view(torch.int32).cpu().numpy().view(np.uint32)
    return _result(vs, out, "triton-dot")


def run_dot_scaled(vs: VectorSet) -> VectorSet:
    """D = A·B + C of an MX set (E8M0 blocks of 32) through ``tl.dot_scaled``."""
    _check(vs, "triton-dot-scaled")
    if vs.scale_format != "e8m0" or vs.block != 32:
        raise UnitError("tl.dot_scaled takes E8M0 scales in blocks of 32")
    for f in (vs.a_format, vs.b_format):
        if f not in DOT_SCALED_FORMATS:
            raise UnitError(f"tl.dot_scaled here takes {', '.join(DOT_SCALED_FORMATS)}, not "
                            f"{f}")
    import torch

    from mxsim.formats import pack_fp4
    _, kernel = _kernels()
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n, k = vs.m, vs.n, vs.k
    a_pack = 2 if vs.a_format == "e2m1" else 1
    b_pack = 2 if vs.b_format == "e2m1" else 1
    out = np.empty((nb, m, n), np.uint32)
    for i in range(nb):
        a = vs.a.reshape(nb, m, k)[i]
        b = vs.b.reshape(nb, k, n)[i]
        a = pack_fp4(a) if a_pack == 2 else a
        b = pack_fp4(b.T).T if b_pack == 2 else b
        sa = vs.a_scale.reshape(nb, m, k // 32)[i]
        sb = vs.b_scale.reshape(nb, k // 32, n)[i].T
        dev = [torch.from_numpy(np.ascontiguousarray(x)).cuda() for x in (a, sa, b, sb)]
        c = (torch.from_numpy(vs.c.reshape(nb, m, n)[i].copy()).cuda().view(torch.float32)
             if vs.c is not None else torch.zeros((m, n), dtype=torch.float32, device="cuda"))
        d = torch.empty_like(c)
        kernel[(m // BLOCK_M, n // BLOCK_N)](
            dev[0], dev[1], dev[2], dev[3], c, d, m, n, k,
            A_FMT=DOT_SCALED_FORMATS[vs.a_format], B_FMT=DOT_SCALED_FORMATS[vs.b_format],
            A_PACK=a_pack, B_PACK=b_pack, BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K)
        out[i] = d.view(torch.int32).cpu().numpy().view(np.uint32)
    return _result(vs, out, "triton-dot-scaled")


class TritonDot:
    """The ``triton-dot`` path (a :class:`gpu.runner.Runner`): :func:`run_dot`."""

    name = "triton-dot"
    summary = "Triton tl.dot on FP8, 64x64x32 tiles, accumulator chained over K"
    instruction = "tl.dot"
    preset = None

    def unavailable_reason(self) -> str | None:
        return unavailable_reason()

    def run(self, vs: VectorSet) -> VectorSet:
        require(self)
        return run_dot(vs)


class TritonDotScaled:
    """The ``triton-dot-scaled`` path (a :class:`gpu.runner.Runner`): :func:`run_dot_scaled`."""

    name = "triton-dot-scaled"
    summary = ("Triton tl.dot_scaled on MX operands (E8M0, blocks of 32); emulated on Hopper, "
               "native on Blackwell")
    instruction = "tl.dot_scaled"
    #: Measured on the H200 (docs/gpu.md): Triton's emulation of dot_scaled on Hopper.
    preset = "triton-dot-scaled-hopper"

    def unavailable_reason(self) -> str | None:
        return unavailable_reason()

    def run(self, vs: VectorSet) -> VectorSet:
        require(self)
        return run_dot_scaled(vs)
