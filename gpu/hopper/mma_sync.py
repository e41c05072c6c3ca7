"""PTX ``mma.sync`` on Hopper, every operand type: FP8 (the "alternate floating point" types of
the PTX ISA) and f16, bf16, tf32 (its "floating point" types, here the float kernels).

**FP8**, ``mma.sync.aligned.m16n8k32.row.col.{f32,f16}.{e4m3,e5m2}.{e4m3,e5m2}.{f32,f16}``
(:func:`run`, :class:`MmaSync`). One warp computes one 16x8 tile of D: it loads C, then for
every 32 indices of K issues one ``mma.sync`` whose C is the D of the previous one (a chain of
instructions, exactly as the unit spec chains them), then stores D. Fragment layout (PTX ISA,
"Matrix Fragments for mma.m16n8k32"; checked on our H200 with small integers): lane = 4g + t;
A regs ``A[g][4t..4t+3]``, ``A[g+8][4t..]``, ``A[g][16+4t..]``, ``A[g+8][16+4t..]`` (byte 0
lowest); B regs ``B[4t..4t+3][g]``, ``B[16+4t..][g]``; FP32 C/D ``D[g][2t]``, ``D[g][2t+1]``,
``D[g+8][2t]``, ``D[g+8][2t+1]``; FP16 C/D two ``f16x2`` registers, rows g and g+8, columns
2t (low half) and 2t+1.

On sm_90 the compiler emulates FP8 ``mma.sync`` (Hopper's FP8 tensor-core path is ``wgmma``;
NVIDIA/cutlass#1986), so its arithmetic is not ``hopper-wgmma``'s: finding it is the
probe-and-fit issue's work. The kernel is CUDA C++ with inline PTX, compiled by CuPy's NVRTC
for the local GPU (``-arch=sm_XY``); :func:`source` gives the same text to ``nvcc`` for SASS.

**f16, bf16 and tf32**: ``m16n8k16`` f16/bf16 and ``m16n8k8`` tf32 (:func:`run_float`,
:class:`MmaSyncFloat`). One warp computes one 16x8 tile of D: it loads C, then for every
instruction K of the dot (16 for f16/bf16, 8 for tf32) issues one ``mma.sync`` whose C is the D
of the previous one, then stores D. Fragment layouts (PTX ISA, "Matrix Fragments for
mma.m16n8k16 with floating point type" and "... for mma.m16n8k8"); lane = 4g + t:

- f16/bf16 (k16): A regs ``A[g][2t..2t+1]``, ``A[g+8][2t..]``, ``A[g][8+2t..]``,
  ``A[g+8][8+2t..]`` (the lower column in the low half); B regs ``B[2t..2t+1][g]``,
  ``B[8+2t..][g]``;
- tf32 (k8): A regs ``A[g][t]``, ``A[g+8][t]``, ``A[g][t+4]``, ``A[g+8][t+4]``; B regs
  ``B[t][g]``, ``B[t+4][g]`` (each one FP32 word whose low 13 bits are zero);
- FP32 C/D ``D[g][2t]``, ``D[g][2t+1]``, ``D[g+8][2t]``, ``D[g+8][2t+1]``; FP16 C/D two
  ``f16x2`` registers, rows g and g+8, columns 2t (low half) and 2t+1.

:func:`layout_check` runs every kernel on small integers, whose products and sums every
preset computes exactly, and compares with numpy: a wrong register layout shows there. The
kernels are CUDA C++ with inline PTX compiled by CuPy's NVRTC (``-arch=sm_XY``);
:func:`float_source` gives the same text to ``nvcc``/``ptxas``.
"""

from __future__ import annotations

import numpy as np

from mxsim.errors import UnitError
from mxsim.vectors import VectorSet

from ..device import capability, device_info, needs
from ..runner import require, require_operands

__all__ = ["source", "unavailable_reason", "run", "FORMATS", "MmaSync", "float_source",
           "float_unavailable_reason", "run_float", "layout_check", "FLOAT_FORMATS",
           "FLOAT_KERNELS", "INSTRUCTION_K", "instruction", "MmaSyncFloat"]

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


# -- f16, bf16 and tf32 ------------------------------------------------------------------------

FLOAT_FORMATS = ("fp16", "bf16", "tf32")
#: The K of one instruction.
INSTRUCTION_K = {"fp16": 16, "bf16": 16, "tf32": 8}
_PTX_TYPE = {"fp16": "f16", "bf16": "bf16", "tf32": "tf32"}
#: (operand format, C/D format) of every kernel: FP16 accumulation exists for f16 only.
FLOAT_KERNELS = (("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32"), ("tf32", "fp32"))

_FLOAT_KERNEL = r"""
extern "C" __global__ void mma16_{name}(const {etype}* __restrict__ A,
        const {etype}* __restrict__ Bt, const {ctype}* __restrict__ C,
        {ctype}* __restrict__ D, int M, int N, int K) {{
    // One warp per 16x8 tile of D; A is (M, K) row-major, Bt is B transposed, (N, K).
    const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    const int m0 = blockIdx.y * 16, n0 = blockIdx.x * 8;
    const {etype}* a_lo = A + (size_t)(m0 + g) * K + {lane_k};
    const {etype}* a_hi = A + (size_t)(m0 + g + 8) * K + {lane_k};
    const {etype}* b_col = Bt + (size_t)(n0 + g) * K + {lane_k};
    {load_c}
    for (int k0 = 0; k0 < K; k0 += {kstep}) {{
        unsigned a0 = *(const unsigned*)(a_lo + k0), a1 = *(const unsigned*)(a_hi + k0);
        unsigned a2 = *(const unsigned*)(a_lo + k0 + {half}), a3 = *(const unsigned*)(a_hi + k0 + {half});
        unsigned b0 = *(const unsigned*)(b_col + k0), b1 = *(const unsigned*)(b_col + k0 + {half});
        {mma}
    }}
    {store_d}
}}
"""  # noqa: E501

_FLOAT_F32 = dict(
    ctype="float",
    load_c="""float c0 = C[(size_t)(m0 + g) * N + n0 + 2 * t], c1 = C[(size_t)(m0 + g) * N + n0 + 2 * t + 1];
    float c2 = C[(size_t)(m0 + g + 8) * N + n0 + 2 * t], c3 = C[(size_t)(m0 + g + 8) * N + n0 + 2 * t + 1];""",  # noqa: E501
    mma="""asm volatile("{instr} "
            "{{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};"
            : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));""",
    store_d="""D[(size_t)(m0 + g) * N + n0 + 2 * t] = c0; D[(size_t)(m0 + g) * N + n0 + 2 * t + 1] = c1;
    D[(size_t)(m0 + g + 8) * N + n0 + 2 * t] = c2; D[(size_t)(m0 + g + 8) * N + n0 + 2 * t + 1] = c3;""",  # noqa: E501
)

_FLOAT_F16 = dict(
    ctype="unsigned short",
    load_c="""unsigned c0 = C[(size_t)(m0 + g) * N + n0 + 2 * t] | ((unsigned)C[(size_t)(m0 + g) * N + n0 + 2 * t + 1] << 16);
    unsigned c1 = C[(size_t)(m0 + g + 8) * N + n0 + 2 * t] | ((unsigned)C[(size_t)(m0 + g + 8) * N + n0 + 2 * t + 1] << 16);""",  # noqa: E501
    mma="""asm volatile("{instr} "
            "{{%0, %1}}, {{%2, %3, %4, %5}}, {{%6, %7}}, {{%0, %1}};"
            : "+r"(c0), "+r"(c1)
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));""",
    store_d="""D[(size_t)(m0 + g) * N + n0 + 2 * t] = c0 & 0xFFFF; D[(size_t)(m0 + g) * N + n0 + 2 * t + 1] = c0 >> 16;
    D[(size_t)(m0 + g + 8) * N + n0 + 2 * t] = c1 & 0xFFFF; D[(size_t)(m0 + g + 8) * N + n0 + 2 * t + 1] = c1 >> 16;""",  # noqa: E501
)


def instruction(fmt: str, c_format: str) -> str:
    """The PTX instruction of the kernel for operand format ``fmt`` and C/D ``c_format``."""
    acc = "f16" if c_format == "fp16" else "f32"
    return (f"mma.sync.aligned.m16n8k{INSTRUCTION_K[fmt]}.row.col.{acc}.{_PTX_TYPE[fmt]}."
            f"{_PTX_TYPE[fmt]}.{acc}")


def _name(fmt: str, c_format: str) -> str:
    return f"{fmt}_{'f16' if c_format == 'fp16' else 'f32'}"


def float_source() -> str:
    """CUDA C++ of every kernel: ``mma16_{fp16,bf16,tf32}_{f32|f16}``."""
    parts = []
    for fmt, c_format in FLOAT_KERNELS:
        spec = _FLOAT_F16 if c_format == "fp16" else _FLOAT_F32
        tf32 = fmt == "tf32"
        body = {k: v.format(instr=instruction(fmt, c_format)) if k == "mma" else v
                for k, v in spec.items()}
        parts.append(_FLOAT_KERNEL.format(
            name=_name(fmt, c_format), etype="unsigned" if tf32 else "unsigned short",
            lane_k="t" if tf32 else "2 * t", half=4 if tf32 else 8,
            kstep=INSTRUCTION_K[fmt], **body))
    return "\n".join(parts)


def float_unavailable_reason() -> str | None:
    return needs("cupy", (8, 0), "16-bit and TF32 mma.sync")


_FLOAT_MODULE = None


def _float_module():
    global _FLOAT_MODULE
    if _FLOAT_MODULE is None:
        import cupy
        major, minor = capability()
        _FLOAT_MODULE = cupy.RawModule(code=float_source(), options=(f"-arch=sm_{major}{minor}",))
    return _FLOAT_MODULE


def _words(fmt: str, codes: np.ndarray) -> np.ndarray:
    """Operand codes as the kernel reads them: 16-bit codes as they are, tf32 codes as the
    FP32 words they are the top 19 bits of."""
    if fmt == "tf32":
        return (codes.astype(np.uint32) << np.uint32(13)).astype(np.uint32)
    return codes.astype(np.uint16)


def _check_float(vs: VectorSet) -> None:
    if vs.a_format != vs.b_format or vs.a_format not in FLOAT_FORMATS:
        raise UnitError(f"16-bit mma.sync takes fp16, bf16 or tf32 operands of one format, not "
                        f"{vs.a_format} x {vs.b_format}")
    if vs.scale_format is not None:
        raise UnitError("16-bit mma.sync takes no block scales")
    k = INSTRUCTION_K[vs.a_format]
    if vs.m % 16 or vs.n % 8 or vs.k % k:
        raise UnitError(f"mma.sync m16n8k{k} needs M, N, K multiples of 16, 8, {k}, not "
                        f"{vs.m}, {vs.n}, {vs.k}")
    if (vs.a_format, vs.c_format) not in FLOAT_KERNELS:
        raise UnitError(f"mma.sync on {vs.a_format} accumulates in "
                        f"{' or '.join(c for f, c in FLOAT_KERNELS if f == vs.a_format)}, not "
                        f"{vs.c_format}")


def run_float(vs: VectorSet) -> VectorSet:
    """D = A·B + C of an fp16, bf16 or tf32 vector set through ``mma.sync``; ``d`` in C's
    format (an absent C is +0 in FP32)."""
    reason = float_unavailable_reason()
    if reason is not None:
        raise UnitError(f"16-bit mma.sync path unavailable: {reason}")
    _check_float(vs)
    import cupy
    fmt, c_format = vs.a_format, vs.c_format
    kernel = _float_module().get_function(f"mma16_{_name(fmt, c_format)}")
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n, k = vs.m, vs.n, vs.k
    c_dtype = np.uint16 if c_format == "fp16" else np.uint32
    c_all = (vs.c.reshape(nb, m, n) if vs.c is not None else np.zeros((nb, m, n), c_dtype))
    out = np.empty((nb, m, n), c_dtype)
    for i in range(nb):
        a = cupy.asarray(np.ascontiguousarray(_words(fmt, vs.a.reshape(nb, m, k)[i])))
        bt = cupy.asarray(np.ascontiguousarray(_words(fmt, vs.b.reshape(nb, k, n)[i].T)))
        c = cupy.asarray(np.ascontiguousarray(c_all[i]))
        if c_format == "fp32":
            c = c.view(cupy.float32)
        d = cupy.full(c.shape, 0xFF, dtype=c.dtype) if c_format == "fp16" else \
            cupy.full(c.shape, np.nan, dtype=c.dtype)            # poisoned: every D is written
        kernel((n // 8, m // 16), (32,), (a, bt, c, d, np.int32(m), np.int32(n), np.int32(k)))
        out[i] = cupy.asnumpy(d).view(c_dtype)
    return vs.with_result(out.reshape(vs.batch_shape + (m, n)), d_format=c_format,
                          producer="gpu mma.sync", path=f"mma-sync-{fmt}",
                          instruction=instruction(fmt, c_format), device=device_info())


def layout_check(seeds: int = 4) -> list[dict]:
    """Every kernel on small integers (|x| <= 4, one and two instructions of K, C in
    [-8, 8]), against numpy's exact product: one row per kernel, seed and K."""
    from mxsim import formats
    rows = []
    for fmt, c_format in FLOAT_KERNELS:
        f, cf = formats.get(fmt), formats.get(c_format)
        for seed in range(seeds):
            for k in (INSTRUCTION_K[fmt], 2 * INSTRUCTION_K[fmt]):
                rng = np.random.default_rng([seed, k, len(rows)])
                a = rng.integers(-4, 5, (16, k)).astype(np.float64)
                b = rng.integers(-4, 5, (k, 8)).astype(np.float64)
                c = rng.integers(-8, 9, (16, 8)).astype(np.float64)
                vs = VectorSet(a=f.encode(a, "rne"), b=f.encode(b, "rne"), a_format=fmt,
                               b_format=fmt, c=cf.encode(c, "rne"), c_format=c_format)
                got = cf.decode(run_float(vs).d)
                want = a @ b + c
                rows.append({"kernel": instruction(fmt, c_format), "seed": seed, "k": k,
                             "outputs": int(want.size),
                             "equal": int((got == want).sum())})
    return rows


class MmaSyncFloat:
    """The ``mma-sync-{fp16,bf16,tf32}`` paths (:class:`gpu.runner.Runner`): :func:`run_float`."""

    def __init__(self, fmt: str):
        self.fmt = fmt
        self.name = f"mma-sync-{fmt}"
        k = INSTRUCTION_K[fmt]
        accs = "{f32,f16}" if fmt == "fp16" else "f32"
        self.summary = (f"PTX mma.sync.aligned.m16n8k{k} on {fmt} ({accs} accumulate), chained "
                        f"over K")
        self.instruction = (f"mma.sync.aligned.m16n8k{k}.row.col.{accs}.{_PTX_TYPE[fmt]}."
                            f"{_PTX_TYPE[fmt]}.{accs}")
        #: The preset the H200 run compares it with (docs/gpu.md, Hopper 16-bit section).
        self.preset = f"hopper-mma-{_PTX_TYPE[fmt]}"

    def __repr__(self) -> str:
        return f"MmaSyncFloat({self.fmt!r})"

    def unavailable_reason(self) -> str | None:
        return float_unavailable_reason()

    def run(self, vs: VectorSet) -> VectorSet:
        require_operands(self, vs, self.fmt)
        return run_float(vs)
