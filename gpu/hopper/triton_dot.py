"""Triton paths: ``tl.dot`` on FP8 operands and ``tl.dot_scaled`` on MX operands.

Each program computes a 64x64 tile of D. It starts its accumulator from C and walks K in steps
of ``BLOCK_K = 32``: ``acc = tl.dot(a, b, acc)`` (or ``tl.dot_scaled`` with the blocks' E8M0
scales), so every output is a chain of K/32 dot steps, each fed the previous result. On
Hopper ``tl.dot`` on FP8 lowers to ``wgmma`` k32 (Triton may promote the accumulator: the data
says which), and ``tl.dot_scaled`` is emulated (elements upcast to bf16, scales folded in);
on Blackwell it is native. Which preset matches each is the probe-and-fit issue's question.

On fp16, bf16 and tf32 operands (:func:`run_dot16`, the ``triton-dot-{fp16,bf16,tf32}``
paths) each step is a ``tl.dot`` of K = 16, the accumulator FP32 (or FP16 for fp16 operands
with an FP16 C): on Hopper one ``wgmma ... k16`` (two ``k8`` for tf32) per step. The PTX
instructions Triton emitted are recorded with every result (``ptx_mma``).
"""

from __future__ import annotations

import re

import numpy as np

from mxsim.errors import UnitError
from mxsim.vectors import VectorSet

from ..device import device_info, needs
from ..runner import require, require_operands

__all__ = ["unavailable_reason", "run_dot", "run_dot_scaled", "run_dot16", "ptx_mma",
           "DOT_SCALED_FORMATS", "DOT16_FORMATS", "TritonDot", "TritonDotScaled", "TritonDot16"]

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

    @triton.jit
    def dot16_kernel(a_ptr, b_ptr, c_ptr, d_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                     BK: tl.constexpr, IS_F32: tl.constexpr, ACC_F16: tl.constexpr):
        # fp16/bf16 operands, or fp32 words whose low 13 bits are zero (tf32); C in FP32,
        # or in FP16 with ACC_F16 (the accumulator stays FP16 from step to step).
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
        for k0 in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :])
            b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :])
            if IS_F32:
                acc = tl.dot(a, b, acc, input_precision="tf32")
            elif ACC_F16:
                acc = tl.dot(a, b, acc, out_dtype=tl.float16)
            else:
                acc = tl.dot(a, b, acc)
        tl.store(d_ptr + rm[:, None] * N + rn[None, :], acc)

    _KERNELS = (dot_kernel, dot_scaled_kernel, dot16_kernel)
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
    dot_kernel = _kernels()[0]
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
    kernel = _kernels()[1]
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


#: Formats tl.dot takes here on 16-bit and TF32 operands, and the K of one tl.dot: Triton
#: wants K >= 16, so a tf32 step is two wgmma k8 instructions, chained.
DOT16_FORMATS = {"fp16": 16, "bf16": 16, "tf32": 16}
_MMA_PTX = re.compile(r"\b(wgmma\.mma_async[\w.]*|mma\.sync[\w.]*)")


def ptx_mma(compiled) -> list[str]:
    """The tensor-core instructions in a compiled Triton kernel's PTX (empty if unreadable)."""
    try:
        ptx = compiled.asm["ptx"]
    except (AttributeError, KeyError, TypeError):
        return []
    return sorted(set(_MMA_PTX.findall(ptx)))


def _check16(vs: VectorSet) -> None:
    reason = unavailable_reason()
    if reason is not None:
        raise UnitError(f"triton-dot path unavailable: {reason}")
    if vs.a_format != vs.b_format or vs.a_format not in DOT16_FORMATS:
        raise UnitError(f"tl.dot here takes fp16, bf16 or tf32 operands of one format, not "
                        f"{vs.a_format} x {vs.b_format}")
    bk = DOT16_FORMATS[vs.a_format]
    if vs.m % BLOCK_M or vs.n % BLOCK_N or vs.k % bk or vs.scale_format is not None:
        raise UnitError(f"The Triton runner needs unscaled sets with M and N multiples of "
                        f"{BLOCK_M} and K of {bk}, not {vs.m}, {vs.n}, {vs.k}")
    if vs.c_format not in ("fp32", "fp16") or (vs.c_format == "fp16" and vs.a_format != "fp16"):
        raise UnitError(f"tl.dot on {vs.a_format} accumulates in FP32"
                        f"{' or FP16' if vs.a_format == 'fp16' else ''}, not {vs.c_format}")


def run_dot16(vs: VectorSet) -> VectorSet:
    """D = A·B + C of an fp16, bf16 or tf32 set through ``tl.dot`` (tf32: fp32 words whose
    low 13 bits are zero, ``input_precision="tf32"``); ``d`` in C's format."""
    _check16(vs)
    import torch
    kernel = _kernels()[2]
    fmt, acc16 = vs.a_format, vs.c_format == "fp16"
    bk = DOT16_FORMATS[fmt]
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n, k = vs.m, vs.n, vs.k

    def operand(x):
        if fmt == "tf32":
            words = (x.astype(np.uint32) << np.uint32(13)).view(np.int32)
            return torch.from_numpy(words).cuda().view(torch.float32)
        dt = torch.float16 if fmt == "fp16" else torch.bfloat16
        return torch.from_numpy(x.astype(np.uint16).view(np.int16)).cuda().view(dt)

    c_np, c_t, raw = ((np.uint16, torch.float16, torch.int16) if acc16 else
                      (np.uint32, torch.float32, torch.int32))
    out = np.empty((nb, m, n), c_np)
    seen: set[str] = set()
    for i in range(nb):
        a = operand(np.ascontiguousarray(vs.a.reshape(nb, m, k)[i]))
        b = operand(np.ascontiguousarray(vs.b.reshape(nb, k, n)[i]))
        c = (torch.from_numpy(vs.c.reshape(nb, m, n)[i].copy().view(
            np.int16 if acc16 else np.int32)).cuda().view(c_t)
             if vs.c is not None else torch.zeros((m, n), dtype=c_t, device="cuda"))
        d = torch.full_like(c, float("nan"))               # poisoned: every D is written
        compiled = kernel[(m // BLOCK_M, n // BLOCK_N)](
            a, b, c, d, m, n, k, BM=BLOCK_M, BN=BLOCK_N, BK=bk, IS_F32=fmt == "tf32",
            ACC_F16=acc16)
        seen.update(ptx_mma(compiled))
        out[i] = d.view(raw).cpu().numpy().view(c_np)
    import triton
    return vs.with_result(out.reshape(vs.batch_shape + (m, n)), d_format=vs.c_format,
                          producer=f"gpu triton-dot-{fmt}", path=f"triton-dot-{fmt}",
                          triton=triton.__version__, device=device_info(),
                          block=[BLOCK_M, BLOCK_N, bk], ptx_mma=sorted(seen))


class TritonDot16:
    """The ``triton-dot-{fp16,bf16,tf32}`` paths (:class:`gpu.runner.Runner`):
    :func:`run_dot16`."""

    def __init__(self, fmt: str):
        self.fmt = fmt
        self.name = f"triton-dot-{fmt}"
        self.summary = (f"Triton tl.dot on {fmt}, 64x64x{DOT16_FORMATS[fmt]} tiles, accumulator "
                        f"chained over K (wgmma on Hopper)")
        self.instruction = "tl.dot" + (' input_precision="tf32"' if fmt == "tf32" else "")
        #: The preset the H200 run compares it with (docs/gpu.md, Hopper 16-bit section).
        self.preset = "hopper-wgmma-" + ("f16" if fmt == "fp16" else fmt)

    def __repr__(self) -> str:
        return f"TritonDot16({self.fmt!r})"

    def unavailable_reason(self) -> str | None:
        return unavailable_reason()

    def run(self, vs: VectorSet) -> VectorSet:
        require_operands(self, vs, self.fmt)
        return run_dot16(vs)


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
