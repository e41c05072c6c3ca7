"""Hopper FP8 presets: wgmma, the sm_90 emulation of FP8 mma.sync, cuBLASLt and Triton paths.

Each measured on our H200 (docs/gpu.md); the parameters of ``hopper-wgmma`` are MMA-Sim's.
"""

from __future__ import annotations

from itertools import product

from ..formats import Rounding
from ..spec import CMode, UnitSpec
from .family import MMASIM, Preset

__all__ = ["PRESETS", "PROVENANCE", "FP8", "MMA_SYNC_STEPS", "hopper_wgmma", "hopper_mma_sync"]

FP8 = ("e4m3", "e5m2")
_THREE = (("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3"))


def hopper_wgmma(a, b, scale_format, block, c_format, name="hopper-wgmma") -> UnitSpec:
    """Hopper's FP8 wgmma (MMA-Sim: F=13, one k32 step, RZ to E8M13 or RNE to FP16)."""
    f16 = c_format == "fp16"
    d = "f16" if f16 else "f32"
    return UnitSpec(
        name=name, instruction=f"wgmma.mma_async.sync.aligned.m64nNk32.{d}.{a}.{b}",
        a_format=a, b_format=b, k=32, frac_bits=13,
        acc_format="fp16" if f16 else "e8m13",
        acc_rounding=Rounding.RNE if f16 else Rounding.RZ, d_format=c_format,
        e_zero=-21 if f16 else -133, provenance=PROVENANCE["hopper-wgmma"])


# How sm_90 emulates FP8 mma.sync (its SASS: F2FP.F16.E4M3/E5M2.UNPACK_B, then two
# HMMA.16816 per k32 instruction): the operands become FP16 (exactly; an E4M3 subnormal is an
# FP16 normal, which moves its alignment exponent); each 4-byte register of FP8 operands unpacks
# into two FP16x2 registers, k mod 4 in {0, 1} and in {2, 3}; each half is one FP16
# tensor-core step (F = 25, RZ to FP32, as MMA-Sim models Hopper's FP16 mma), started from
# zero; C is then added with an FP32 (or FP16) add, rounded to nearest even.
MMA_SYNC_STEPS = (tuple(i for i in range(32) if i % 4 < 2),
                  tuple(i for i in range(32) if i % 4 >= 2))


def hopper_mma_sync(a, b, scale_format, block, c_format) -> UnitSpec:
    """sm_90's FP8 mma.sync m16n8k32: FP16 upcast, two interleaved F=25 steps, C after."""
    f16 = c_format == "fp16"
    d = "f16" if f16 else "f32"
    return UnitSpec(
        name="hopper-mma-sync", instruction=f"mma.sync.aligned.m16n8k32.row.col.{d}.{a}.{b}.{d} "
                                            f"(sm_90: emulated with F2FP + HMMA.16816)",
        a_format=a, b_format=b, k=32, schedule=MMA_SYNC_STEPS, frac_bits=25, upcast="fp16",
        acc_format="fp16" if f16 else "fp32", acc_rounding=Rounding.RNE if f16 else Rounding.RZ,
        c_mode=CMode.AFTER, c_rounding=Rounding.RNE, d_format=c_format,
        e_zero=-21 if f16 else -133, provenance=PROVENANCE["hopper-mma-sync"])


def _cublas_fast(a, b, scale_format, block, c_format) -> UnitSpec:
    spec = hopper_wgmma(a, b, scale_format, block, c_format, name="hopper-cublas-fast")
    return spec.replace(instruction="cublasLtMatmul FP8, fast accumulation "
                                    "(torch._scaled_mm use_fast_accum=True): chained wgmma k32",
                        provenance=PROVENANCE["hopper-cublas-fast"])


def _hopper_cublas(a, b, scale_format, block, c_format) -> UnitSpec:
    spec = hopper_wgmma(a, b, scale_format, block, c_format, name="hopper-cublas")
    return spec.replace(instruction="cublasLtMatmul FP8, use_fast_accum=False "
                                    "(torch._scaled_mm): wgmma k32 chains promoted to FP32",
                        promote_every=4, promote_rounding=Rounding.RNE,
                        provenance=PROVENANCE["hopper-cublas"])


def _hopper_cublas_rowwise(a, b, scale_format, block, c_format, granularity="row") -> UnitSpec:
    spec = _hopper_cublas(a, b, None, None, c_format)
    # cuBLASLt's epilogue (H200): per-tensor scales as alpha = fl(sa*sb), then fl(alpha*D);
    # row-wise (outer-vector) scales column first: fl(fl(D*sb)*sa).
    return spec.replace(name="hopper-cublas-rowwise", scale_format="fp32", block=None,
                        epilogue="alpha" if granularity == "tensor" else "col-row",
                        instruction="cublasLtMatmul FP8, use_fast_accum=False, per-tensor / "
                                    "row-wise (outer vector) FP32 scales",
                        provenance=PROVENANCE["hopper-cublas-rowwise"])


def _hopper_cublas_blockwise(a, b, scale_format, block, c_format) -> UnitSpec:
    spec = _hopper_cublas(a, b, None, None, c_format)
    # DeepSeek-style 1x128 / 128x128 FP32 scales: each promoted 128-K partial P is scaled
    # inside the main loop, total = fma(P, fl(sa*sb), total) (fitted on H200 samples).
    return spec.replace(name="hopper-cublas-blockwise", scale_format="fp32", block=128,
                        epilogue="block-fma",
                        instruction="cublasLtMatmul FP8, use_fast_accum=False, block-wise FP32 "
                                    "scales (1x128 A, 128x128 B)",
                        provenance=PROVENANCE["hopper-cublas-blockwise"])


def _triton_dot_scaled_hopper(a, b, scale_format, block, c_format) -> UnitSpec:
    return UnitSpec(
        name="triton-dot-scaled-hopper",
        instruction=f"triton tl.dot_scaled({a}, {b}) on sm_90: bf16 upcast, wgmma bf16 k16",
        a_format=a, b_format=b, scale_format="e8m0", block=32, k=32,
        schedule=(tuple(range(16)), tuple(range(16, 32))), frac_bits=25, upcast="bf16",
        fold_scales=True, upcast_specials="finite", acc_format="fp32",
        acc_rounding=Rounding.RZ, e_zero=-133,
        provenance=PROVENANCE["triton-dot-scaled-hopper"])


_NO_C = ("torch._scaled_mm passes none to cuBLASLt, and the bias it takes (bf16 output only) "
         "is added after the scales, not before as C would be (docs/gpu.md); "
         "generate the set without C (--no-c)")

PROVENANCE = {
    "hopper-wgmma":
        f"{MMASIM} and Khattak & Mikaitis (arXiv 2512.07004): F=13 truncation, 32 products "
        "per fused step, RZ to E8M13 (RNE to FP16 for f16 output), e_zero -133 (-21)",
    "hopper-cublas-fast":
        "a chain of hopper-wgmma k32 instructions, D of one the C of the next (what cuBLASLt's "
        "fast-accumulation FP8 kernels do), measured on our H200 (docs/gpu.md)",
    "hopper-mma-sync":
        "fitted by `mxsim fit` to H200 outputs of gpu/mma_sync.py (the samples in "
        "tests/data/h200/h200_paths.npz) and read off its SASS (F2FP unpack + HMMA.16816): "
        "operands upcast to FP16, two fused steps (k mod 4 in {0,1}, then {2,3}), F=25, RZ FP32 "
        "(RNE FP16), C added after with RNE; the FP16 upcast found from the few outputs an "
        "earlier validation left off by one ulp (E4M3 subnormals are FP16 normals)",
    "hopper-cublas":
        "fitted by `mxsim fit` (with promotion in its search) to H200 outputs of "
        "torch._scaled_mm use_fast_accum=False (tests/data/h200/h200_cublas_noacc.npz): chains "
        "of 4 hopper-wgmma k32 steps (128 of K), each started from +0 and added into an FP32 "
        "total (which starts as C) with RNE, the DeepGEMM-style promotion",
    "triton-dot-scaled-hopper":
        "fitted by `mxsim fit` to H200 outputs of gpu/triton_runner.py (tl.dot_scaled, Triton "
        "3.6; the samples in tests/data/h200/h200_paths.npz): two bf16 wgmma k16 steps per 32 "
        "of K, F=25, RZ FP32, C in the first step; the operand upcast read from Triton's "
        "DecomposeScaledBlocked pass and confirmed code by code on the H200 (gpu.collect "
        "--what operand-map): each operand is fl_bf16(x * scale) with E8M0 0x00 as 0 and 0xFF "
        "as NaN, and E5M2 Inf/NaN codes become the numbers 2**16 * (1 + m/4) (Triton's "
        "bit-shift E5M2-to-BF16)",
    "hopper-cublas-rowwise":
        "hopper-cublas's accumulation, then cuBLASLt's epilogue as fitted to H200 samples "
        "(tests/data/h200/h200_paths.npz): per-tensor fl(fl(sa*sb)*D) + 0 (a zero is +0), "
        "row-wise fl(fl(D*sb)*sa)",
    "hopper-cublas-blockwise":
        "hopper-cublas's 128-K chains, each partial P scaled in the main loop as fitted to an "
        "H200 sample (tests/data/h200/h200_paths.npz; every dot, against fewer for any other "
        "order or rounding: docs/findings.md §7): total = fma(P, fl(sa*sb), total), RNE",
}

PRESETS = [
    Preset("hopper-wgmma", "Hopper FP8 wgmma, one k32 step: F=13 truncation, RZ to E8M13 "
                           "(FP32 out) or RNE FP16 (FP16 out)",
           PROVENANCE["hopper-wgmma"],
           "H200 (tests/data/h200/2026-12-01: torch._scaled_mm with K = 32, and Triton's tl.dot "
           "at K = 32), e4m3xe4m3/e4m3xe5m2/e5m2xe4m3, FP32 out, every generator family, 0 "
           "mismatches; counts in docs/gpu.md (python -m gpu.figures); e5m2xe5m2 and FP16 out "
           "checked against MMA-Sim only",
           tuple(product(FP8, FP8)),
           ((None, None),), ("fp32", "fp16"), hopper_wgmma),
    Preset("hopper-cublas-fast", "cuBLASLt FP8 GEMM with fast accumulation: chained wgmma "
                                 "k32 steps", PROVENANCE["hopper-cublas-fast"],
           "H200 (tests/data/h200/2026-12-01: torch._scaled_mm use_fast_accum=True, K = 64, 256, "
           "1024, 4096, and Triton's tl.dot chain at K = 256), three operand pairs, every "
           "generator family, 0 mismatches; counts in docs/gpu.md (python -m gpu.figures)",
           _THREE, ((None, None),), ("fp32",), _cublas_fast),
    Preset("hopper-cublas", "cuBLASLt FP8 GEMM without fast accumulation: wgmma k32 chains "
                            "promoted to FP32 every 128 of K (RNE)",
           PROVENANCE["hopper-cublas"],
           "H200 (tests/data/h200/2026-12-01: torch._scaled_mm use_fast_accum=False), three "
           "pairs, K = 256, 1024, 4096, every generator family, and 7 M x N x K shapes from "
           "16x16x4096 to 2048x2048x384, 0 mismatches; counts in docs/gpu.md "
           "(python -m gpu.figures)",
           _THREE, ((None, None),), ("fp32",), _hopper_cublas),
    Preset("hopper-cublas-rowwise", "cuBLASLt FP8 without fast accumulation, per-tensor or "
                                    "row-wise FP32 scales applied in the epilogue",
           PROVENANCE["hopper-cublas-rowwise"],
           "H200 (tests/data/h200/2026-12-01): e4m3 x e4m3, e4m3 x e5m2 and e5m2 x e4m3, K = 256, "
           "per-tensor and row-wise scales, every generator family incl. scale extremes, no C, "
           "0 mismatches; counts in docs/gpu.md (python -m gpu.figures)",
           _THREE, (("fp32", None),), ("fp32",), _hopper_cublas_rowwise, granular=True,
           no_c=_NO_C),
    Preset("hopper-cublas-blockwise", "cuBLASLt FP8 without fast accumulation, DeepSeek-style "
                                      "block-wise FP32 scales applied to each 128-K partial",
           PROVENANCE["hopper-cublas-blockwise"],
           "H200 (tests/data/h200/2026-12-01): e4m3 x e4m3, e4m3 x e5m2 and e5m2 x e4m3, "
           "K = 512 and 2048, every generator family incl. scale extremes, no C, 0 mismatches; "
           "counts in docs/gpu.md (python -m gpu.figures)",
           _THREE, (("fp32", 128),), ("fp32",), _hopper_cublas_blockwise, no_c=_NO_C),
    Preset("hopper-mma-sync", "Hopper FP8 mma.sync m16n8k32 (emulated on FP16 tensor cores): "
                              "two interleaved steps, F=25, C added after (RNE)",
           PROVENANCE["hopper-mma-sync"],
           "H200 (tests/data/h200/2026-12-01: gpu/mma_sync.py), all four e4m3/e5m2 pairs, FP32 "
           "and FP16 accumulate, K = 32 and 256, every generator family, 0 mismatches; counts "
           "in docs/gpu.md (python -m gpu.figures)",
           tuple(product(FP8, FP8)), ((None, None),), ("fp32", "fp16"), hopper_mma_sync),
    Preset("triton-dot-scaled-hopper", "Triton tl.dot_scaled on Hopper (emulated): bf16 "
                                       "upcast, steps of 16, F=25, RZ FP32",
           PROVENANCE["triton-dot-scaled-hopper"],
           "H200 (tests/data/h200/2026-12-01, Triton 3.6): all 9 pairs of e4m3/e5m2/e2m1, "
           "K = 128 and 1024, every generator family incl. scale extremes, NaN scales and "
           "Inf/NaN, and the operand map (every element code under every E8M0 scale, on A and "
           "B), 0 mismatches; counts in docs/gpu.md (python -m gpu.figures)",
           tuple(product(("e4m3", "e5m2", "e2m1"), ("e4m3", "e5m2", "e2m1"))),
           (("e8m0", 32),), ("fp32",), _triton_dot_scaled_hopper),
]
