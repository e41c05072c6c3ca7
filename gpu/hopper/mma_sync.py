"""PTX ``mma.sync.aligned.m16n8k32.row.col.{f32,f16}.{e4m3,e5m2}.{e4m3,e5m2}.{f32,f16}``.

One warp computes one 16x8 tile of D: it loads C, then for every 32 indices of K issues one
``mma.sync`` whose C is the D of the previous one (a chain of instructions, exactly as the
unit spec chains them), then stores D. Fragment layout (PTX ISA, "Matrix Fragments for
mma.m16n8k32"; checked on our H200 with small integers): lane = 4g + t;
A regs ``A[g][4t..4t+3]``, ``A[g+8][4t..]``, ``A[g][16+4t..]``, ``A[g+8][16+4t..]`` (byte 0
lowest); B regs ``B[4t..4t+3][g]``, ``B[16+4t..][g]``; FP32 C/D ``D[g][2t]``, ``D[g][2t+1]``,
``D[g+8][2t]``, ``D[g+8][2t+1]``; FP16 C/D two ``f16x2`` registers, rows g and g+8, columns
2t (low half) and 2t+1.

On sm_90 the compiler emulates FP8 ``mma.sync`` (Hopper's FP8 tensor-core path is ``wgmma``;
NVIDIA/cutlass#1986), so its arithmetic is not ``hopper-wgmma``'s: finding it is the
probe-and-fit issue's work. The kernel is CUDA C++ with inline PTX, compiled by CuPy's NVRTC
for the local GPU (``-arch=sm_XY``); :func:`source` gives the same text to ``nvcc`` for SASS.
"""

from __future__ import annotations

import numpy as np

from mxsim.errors import UnitError
from mxsim.vectors import VectorSet

from ..device import capability, device_info, needs
from ..runner import require

__all__ = ["source", "unavailable_reason", "run", "FORMATS", "MmaSync"]

FORMATS = ("e4m3", "e5m2")

_KERNEL = r"""
extern "C" __global__ void mma_{a}_{b}_{acc}(const unsigned char* __restrict__ A,
        const unsigned char* __restrict__ Bt, const {ctype}* __restrict__ C,
        {ctype}* __restrict__ D, int M, int N, int K) {{
    // One warp per 16x8 tile of D; A is (M, K) row-major, Bt is B transposed, (N, K).
    const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    const int m0 = blockIdx.y * 16, n0 = blockIdx.x * 8;
    const unsigned char* a_lo = A + (size_t)(m0 + g) * K + 4 * t;
    const unsigned char* a_hi = A + (size_t)(m0 + g + 8) * K + 4 * t;
    const unsigned char* b_col = Bt + (size_t)(n0 + g) * K + 4 * t;
    {load_c}
    for (int k0 = 0; k0 < K; k0 += 32) {{
        unsigned a0 = *(const unsigned*)(a_lo + k0), a1 = *(const unsigned*)(a_hi + k0);
        unsigned a2 = *(const unsigned*)(a_lo + k0 + 16), a3 = *(const unsigned*)(a_hi + k0 + 16);
        unsigned b0 = *(const unsigned*)(b_col + k0), b1 = *(const unsigned*)(b_col + k0 + 16);
        {mma}
    }}
    {store_d}
}}
"""

_F32 = dict(
    ctype="float",
    load_c="""float c0 = C[(size_t)(m0 + g) * N + n0 + 2 * t], c1 = C[(size_t)(m0 + g) * N + n0 + 2 * t + 1];
    float c2 = C[(size_t)(m0 + g + 8) * N + n0 + 2 * t], c3 = C[(size_t)(m0 + g + 8) * N + n0 + 2 * t + 1];""",  # noqa: E501
    mma="""asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.{a}.{b}.f32 "
            "{{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};"
            : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));""",
    store_d="""D[(size_t)(m0 + g) * N + n0 + 2 * t] = c0; D[(size_t)(m0 + g) * N + n0 + 2 * t + 1] = c1;
    D[(size_t)(m0 + g + 8) * N + n0 + 2 * t] = c2; D[(size_t)(m0 + g + 8) * N + n0 + 2 * t + 1] = c3;""",  # noqa: E501
)

_F16 = dict(
    ctype="unsigned short",
    load_c="""unsigned c0 = C[(size_t)(m0 + g) * N + n0 + 2 * t] | ((unsigned)C[(size_t)(m0 + g) * N + n0 + 2 * t + 1] << 16);
    unsigned c1 = C[(size_t)(m0 + g + 8) * N + n0 + 2 * t] | ((unsigned)C[(size_t)(m0 + g + 8) * N + n0 + 2 * t + 1] << 16);""",  # noqa: E501
    mma="""asm volatile("mma.sync.aligned.m16n8k32.row.col.f16.{a}.{b}.f16 "
            "{{%0, %1}}, {{%2, %3, %4, %5}}, {{%6, %7}}, {{%0, %1}};"
            : "+r"(c0), "+r"(c1)
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));""",
    store_d="""D[(size_t)(m0 + g) * N + n0 + 2 * t] = c0 & 0xFFFF; D[(size_t)(m0 + g) * N + n0 + 2 * t + 1] = c0 >> 16;
    D[(size_t)(m0 + g + 8) * N + n0 + 2 * t] = c1 & 0xFFFF; D[(size_t)(m0 + g + 8) * N + n0 + 2 * t + 1] = c1 >> 16;""",  # noqa: E501
)


def source() -> str:
    """CUDA C++ of every kernel: ``mma_{a}_{b}_{f32|f16}`` for a, b in e4m3, e5m2."""
    parts = []
    for a in FORMATS:
        for b in FORMATS:
            for acc, spec in (("f32", _F32), ("f16", _F16)):
                body = {k: v.format(a=a, b=b) if k == "mma" else v for k, v in spec.items()}
                parts.append(_KERNEL.format(a=a, b=b, acc=acc, **body))
    return "\n".join(parts)


def unavailable_reason() -> str | None:
    return needs("cupy", (8, 9), "FP8 mma.sync")


_MODULE = None


def _module():
    global _MODULE
    if _MODULE is None:
        import cupy
        major, minor = capability()
        _MODULE = cupy.RawModule(code=source(), options=(f"-arch=sm_{major}{minor}",))
    return _MODULE


def run(vs: VectorSet) -> VectorSet:
    """D = A·B + C of an unscaled FP8 vector set through ``mma.sync``; ``d`` in C's format.

    C is FP32 (the f32 kernels) or FP16 (the f16 kernels); an absent C is +0 in FP32.
    """
    reason = unavailable_reason()
    if reason is not None:
        raise UnitError(f"mma-sync path unavailable: {reason}")
    if vs.a_format not in FORMATS or vs.b_format not in FORMATS:
        raise UnitError(f"FP8 mma.sync takes e4m3/e5m2 operands, not {vs.a_format} x "
                        f"{vs.b_format}")
    if vs.scale_format is not None:
        raise UnitError("FP8 mma.sync takes no block scales")
    if vs.m % 16 or vs.n % 8 or vs.k % 32:
        raise UnitError(f"mma.sync m16n8k32 needs M, N, K multiples of 16, 8, 32, not {vs.m}, "
                        f"{vs.n}, {vs.k}")
    if vs.c_format not in ("fp32", "fp16"):
        raise UnitError(f"mma.sync accumulates in f32 or f16, not {vs.c_format}")
    import cupy
    acc = "f16" if vs.c_format == "fp16" else "f32"
    kernel = _module().get_function(f"mma_{vs.a_format}_{vs.b_format}_{acc}")
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n, k = vs.m, vs.n, vs.k
    c_dtype = np.uint16 if acc == "f16" else np.uint32
    c_all = (vs.c.reshape(nb, m, n) if vs.c is not None else np.zeros((nb, m, n), c_dtype))
    out = np.empty((nb, m, n), c_dtype)
    for i in range(nb):
        a = cupy.asarray(np.ascontiguousarray(vs.a.reshape(nb, m, k)[i]))
        bt = cupy.asarray(np.ascontiguousarray(vs.b.reshape(nb, k, n)[i].T))
        c = cupy.asarray(np.ascontiguousarray(c_all[i]))
        if acc == "f32":
            c = c.view(cupy.float32)
        d = cupy.empty_like(c)
        kernel((n // 8, m // 16), (32,), (a, bt, c, d, np.int32(m), np.int32(n), np.int32(k)))
        out[i] = cupy.asnumpy(d).view(c_dtype)
    return vs.with_result(out.reshape(vs.batch_shape + (m, n)), d_format=vs.c_format,
                          producer="gpu mma.sync", path="mma-sync",
                          instruction=f"mma.sync.aligned.m16n8k32.row.col.{acc}.{vs.a_format}"
                                      f".{vs.b_format}.{acc}",
                          device=device_info())


class MmaSync:
    """The ``mma-sync`` path (a :class:`gpu.runner.Runner`): :func:`run`."""

    name = "mma-sync"
    summary = ("PTX mma.sync.aligned.m16n8k32 FP8 (f32/f16 accumulate), chained over K; "
               "emulated by the compiler on sm_90")
    instruction = "mma.sync.aligned.m16n8k32.row.col.{f32,f16}.{e4m3,e5m2}.{e4m3,e5m2}.{f32,f16}"
    #: Measured on the H200 (docs/gpu.md); gpu.runs.validate confirms it on every run.
    preset = "hopper-mma-sync"

    def unavailable_reason(self) -> str | None:
        return unavailable_reason()

    def run(self, vs: VectorSet) -> VectorSet:
        require(self)
        return run(vs)
