"""Hardware presets: named families of unit specs, each with where its parameters come from.

A preset is named after the hardware path it models (``hopper-wgmma``). It yields a
:class:`~mxsim.spec.UnitSpec` for each operand-format pair (and C/D format) it supports, and
says which it does not. ``mxsim units`` lists them. A spec of one's own (a spec file) is a
preset of one spec, :func:`from_spec`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from itertools import product
from typing import Any

from .errors import UnitError
from .formats import ELEMENT_FORMATS, Overflow, Rounding
from .spec import CMode, UnitSpec, ZeroSign

__all__ = ["Preset", "SpecPreset", "PRESETS", "get", "names", "from_spec"]

FP8 = ("e4m3", "e5m2")
F8F6F4 = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")

MMASIM = "MMA-Sim (microsoft/MMA-Sim, arXiv 2511.10909; PyPI mmasim 2.1.1)"


@dataclass(frozen=True)
class Preset:
    """A family of specs for one hardware path.

    Each spec is built once per process: the same formats give the same (immutable) spec.
    """
    name: str
    summary: str
    provenance: str
    verified: str                      #: on which hardware, how many vectors, or "no"
    pairs: tuple[tuple[str, str], ...]
    scales: tuple[tuple[str | None, int | None], ...]   #: (scale_format, block) accepted
    c_formats: tuple[str, ...]
    make: Callable[..., UnitSpec]

    def spec(self, a_format: str, b_format: str | None = None, *,
             scale_format: str | None = None, block: int | None = None,
             c_format: str = "fp32", granularity: str | None = None) -> UnitSpec:
        """The spec for one operand-format pair (raises UnitError for one it lacks)."""
        b_format = b_format or a_format
        if (a_format, b_format) not in self.pairs:
            pairs = ", ".join(f"{a}x{b}" for a, b in self.pairs)
            raise UnitError(f"Unit {self.name} does not take {a_format} x {b_format}; it "
                            f"takes {pairs}")
        if (scale_format, block) not in self.scales:
            want = " or ".join(f"{s} scales in blocks of {b}" if s else "no block scales"
                               for s, b in self.scales)
            got = f"{scale_format} scales in blocks of {block}" if scale_format \
                else "no block scales"
            raise UnitError(f"Unit {self.name} takes {want}, not {got}")
        if c_format not in self.c_formats:
            raise UnitError(f"Unit {self.name} takes C and D as {' or '.join(self.c_formats)}"
                            f", not {c_format}")
        if scale_format == "fp32" and self.make in _BY_GRANULARITY:
            return _built(self.make, a_format, b_format, scale_format, block, c_format,
                          granularity=granularity or "row")
        return _built(self.make, a_format, b_format, scale_format, block, c_format)

    def spec_for(self, vs) -> UnitSpec:
        """The spec that applies to a vector set's formats (and FP32 scale granularity).

        Raises UnitError for a set with C on a preset whose hardware path takes none
        (:data:`NO_C`).
        """
        if vs.c is not None and self.name in NO_C:
            raise UnitError(f"Unit {self.name} takes no C: {NO_C[self.name]}")
        granularity = None
        if vs.scale_format == "fp32":
            granularity = "tensor" if vs.a_scale.ndim == 0 else "row"
        return self.spec(vs.a_format, vs.b_format, scale_format=vs.scale_format,
                         block=vs.block, c_format=vs.c_format, granularity=granularity)

    def spec_for_formats(self, a_format: str | None = None,
                         b_format: str | None = None) -> UnitSpec:
        """The spec for A in ``a_format`` (default E4M3) and B in ``b_format`` (default A's),
        with the preset's first scale pattern and C format: for the RTL generator, which has
        no vector set to read formats from."""
        a_format = a_format or "e4m3"
        scale, block = self.scales[0]
        return self.spec(a_format, b_format or a_format, scale_format=scale, block=block,
                         c_format=self.c_formats[0])


@functools.lru_cache(maxsize=512)
def _built(make: Callable[..., UnitSpec], *args: Any, **kwargs: Any) -> UnitSpec:
    """``make(*args, **kwargs)``, built once (a spec is immutable; building one checks it)."""
    return make(*args, **kwargs)


@dataclass(frozen=True)
class SpecPreset(Preset):
    """A preset of one spec (a spec file, or a UnitSpec used as a unit).

    It takes the spec's operand pair, scales and C format only, and refuses others in the
    words of :meth:`~mxsim.spec.UnitSpec.check_operands`; a vector set without C runs whatever
    its ``c_format`` says.
    """
    only: UnitSpec

    def spec(self, a_format: str, b_format: str | None = None, *,
             scale_format: str | None = None, block: int | None = None,
             c_format: str | None = None, granularity: str | None = None) -> UnitSpec:
        """The spec, when it takes these formats (``c_format`` None: no C); raises UnitError
        otherwise."""
        self.only.check_operands(a_format, b_format or a_format, scale_format, block, c_format)
        return self.only

    def spec_for(self, vs) -> UnitSpec:
        """The spec, when it takes the vector set's formats; raises UnitError otherwise."""
        return self.spec(vs.a_format, vs.b_format, scale_format=vs.scale_format,
                         block=vs.block, c_format=None if vs.c is None else vs.c_format)

    def spec_for_formats(self, a_format: str | None = None,
                         b_format: str | None = None) -> UnitSpec:
        """The spec itself (no ``a_format``), or the spec when it is for A in ``a_format`` and
        B in ``b_format`` (default A's)."""
        if a_format is None:
            return self.only
        return super().spec_for_formats(a_format, b_format)


def _the_spec(spec: UnitSpec, *args: Any, **kwargs: Any) -> UnitSpec:
    return spec


def from_spec(spec: UnitSpec, *, summary: str, provenance: str) -> SpecPreset:
    """The preset of one spec: named after it, its formats the only ones it takes, not
    verified on hardware."""
    return SpecPreset(name=spec.name, summary=summary, provenance=provenance, verified="no",
                      pairs=((spec.a_format, spec.b_format),),
                      scales=((spec.scale_format, spec.block),), c_formats=(spec.d_format,),
                      make=functools.partial(_the_spec, spec), only=spec)


def _exact(a, b, scale_format, block, c_format) -> UnitSpec:
    return UnitSpec(
        name="exact", instruction="exact dot product, one rounding", a_format=a, b_format=b,
        scale_format=scale_format, block=block, k=None, frac_bits=None,
        acc_format="fp32", acc_rounding=Rounding.RNE, d_format="fp32",
        overflow=Overflow.IEEE, zero_sign=ZeroSign.IEEE, provenance="definition")


def _hopper_wgmma(a, b, scale_format, block, c_format, name="hopper-wgmma") -> UnitSpec:
    f16 = c_format == "fp16"
    d = "f16" if f16 else "f32"
    return UnitSpec(
        name=name, instruction=f"wgmma.mma_async.sync.aligned.m64nNk32.{d}.{a}.{b}",
        a_format=a, b_format=b, k=32, frac_bits=13,
        acc_format="fp16" if f16 else "e8m13",
        acc_rounding=Rounding.RNE if f16 else Rounding.RZ, d_format=c_format,
        e_zero=-21 if f16 else -133, provenance=PRESETS_PROVENANCE["hopper-wgmma"])


# How sm_90 emulates FP8 mma.sync (its SASS: F2FP.F16.E4M3/E5M2.UNPACK_B, then two
# HMMA.16816 per k32 instruction): the operands become FP16 (exactly; an E4M3 subnormal is an
# FP16 normal, which moves its alignment exponent); each 4-byte register of FP8 operands unpacks
# into two FP16x2 registers, k mod 4 in {0, 1} and in {2, 3}; each half is one FP16
# tensor-core step (F = 25, RZ to FP32, as MMA-Sim models Hopper's FP16 mma), started from
# zero; C is then added with an FP32 (or FP16) add, rounded to nearest even.
_MMA_SYNC_STEPS = (tuple(i for i in range(32) if i % 4 < 2),
                   tuple(i for i in range(32) if i % 4 >= 2))


def _hopper_mma_sync(a, b, scale_format, block, c_format) -> UnitSpec:
    f16 = c_format == "fp16"
    d = "f16" if f16 else "f32"
    return UnitSpec(
        name="hopper-mma-sync", instruction=f"mma.sync.aligned.m16n8k32.row.col.{d}.{a}.{b}.{d} "
                                            f"(sm_90: emulated with F2FP + HMMA.16816)",
        a_format=a, b_format=b, k=32, schedule=_MMA_SYNC_STEPS, frac_bits=25, upcast="fp16",
        acc_format="fp16" if f16 else "fp32", acc_rounding=Rounding.RNE if f16 else Rounding.RZ,
        c_mode=CMode.AFTER, c_rounding=Rounding.RNE, d_format=c_format,
        e_zero=-21 if f16 else -133, provenance=PRESETS_PROVENANCE["hopper-mma-sync"])


def _cublas_fast(a, b, scale_format, block, c_format) -> UnitSpec:
    spec = _hopper_wgmma(a, b, scale_format, block, c_format, name="hopper-cublas-fast")
    return spec.replace(instruction="cublasLtMatmul FP8, fast accumulation "
                                    "(torch._scaled_mm use_fast_accum=True): chained wgmma k32",
                        provenance=PRESETS_PROVENANCE["hopper-cublas-fast"])


def _hopper_cublas(a, b, scale_format, block, c_format) -> UnitSpec:
    spec = _hopper_wgmma(a, b, scale_format, block, c_format, name="hopper-cublas")
    return spec.replace(instruction="cublasLtMatmul FP8, use_fast_accum=False "
                                    "(torch._scaled_mm): wgmma k32 chains promoted to FP32",
                        promote_every=4, promote_rounding=Rounding.RNE,
                        provenance=PRESETS_PROVENANCE["hopper-cublas"])


def _hopper_cublas_rowwise(a, b, scale_format, block, c_format, granularity="row") -> UnitSpec:
    spec = _hopper_cublas(a, b, None, None, c_format)
    # cuBLASLt's epilogue (H200): per-tensor scales as alpha = fl(sa*sb), then fl(alpha*D);
    # row-wise (outer-vector) scales column first: fl(fl(D*sb)*sa).
    return spec.replace(name="hopper-cublas-rowwise", scale_format="fp32", block=None,
                        epilogue="alpha" if granularity == "tensor" else "col-row",
                        instruction="cublasLtMatmul FP8, use_fast_accum=False, per-tensor / "
                                    "row-wise (outer vector) FP32 scales",
                        provenance=PRESETS_PROVENANCE["hopper-cublas-rowwise"])


_BY_GRANULARITY = (_hopper_cublas_rowwise,)


def _hopper_cublas_blockwise(a, b, scale_format, block, c_format) -> UnitSpec:
    spec = _hopper_cublas(a, b, None, None, c_format)
    # DeepSeek-style 1x128 / 128x128 FP32 scales: each promoted 128-K partial P is scaled
    # inside the main loop, total = fma(P, fl(sa*sb), total) (fitted on H200 samples).
    return spec.replace(name="hopper-cublas-blockwise", scale_format="fp32", block=128,
                        epilogue="block-fma",
                        instruction="cublasLtMatmul FP8, use_fast_accum=False, block-wise FP32 "
                                    "scales (1x128 A, 128x128 B)",
                        provenance=PRESETS_PROVENANCE["hopper-cublas-blockwise"])


def _triton_dot_scaled_hopper(a, b, scale_format, block, c_format) -> UnitSpec:
    return UnitSpec(
        name="triton-dot-scaled-hopper",
        instruction=f"triton tl.dot_scaled({a}, {b}) on sm_90: bf16 upcast, wgmma bf16 k16",
        a_format=a, b_format=b, scale_format="e8m0", block=32, k=32,
        schedule=(tuple(range(16)), tuple(range(16, 32))), frac_bits=25, upcast="bf16",
        fold_scales=True, upcast_specials="finite", acc_format="fp32",
        acc_rounding=Rounding.RZ, e_zero=-133,
        provenance=PRESETS_PROVENANCE["triton-dot-scaled-hopper"])


def _blackwell_f8f6f4(a, b, scale_format, block, c_format) -> UnitSpec:
    f16 = c_format == "fp16"
    d = "f16" if f16 else "f32"
    return UnitSpec(
        name="blackwell-f8f6f4", instruction=f"tcgen05.mma.cta_group::1.kind::f8f6f4 / "
                                             f"mma.sync.m16n8k32.kind::f8f6f4.{d}.{a}.{b}.{d}",
        a_format=a, b_format=b, k=32, frac_bits=25, acc_format="fp16" if f16 else "fp32",
        acc_rounding=Rounding.RNE if f16 else Rounding.RZ, d_format=c_format,
        e_zero=-21 if f16 else -133, provenance=PRESETS_PROVENANCE["blackwell-f8f6f4"])


def _blackwell_mxf8f6f4(a, b, scale_format, block, c_format) -> UnitSpec:
    return UnitSpec(
        name="blackwell-mxf8f6f4",
        instruction=f"mma.sync.m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.{a}.{b}"
                    f".f32.ue8m0 / tcgen05.mma.kind::mxf8f6f4.block_scale",
        a_format=a, b_format=b, scale_format="e8m0", block=32, k=32, frac_bits=25,
        acc_format="fp32", acc_rounding=Rounding.RZ, e_zero=-133,
        provenance=PRESETS_PROVENANCE["blackwell-mxf8f6f4"])


def _blackwell_mxf4(a, b, scale_format, block, c_format, kind="mxf4") -> UnitSpec:
    vec = "2X" if block == 32 else "4X"
    return UnitSpec(
        name=f"blackwell-{kind}",
        instruction=f"mma.sync.m16n8k64.kind::{kind}.block_scale.scale_vec::{vec}.f32.e2m1.e2m1"
                    f".f32.{'ue8m0' if scale_format == 'e8m0' else 'ue4m3'} / "
                    f"tcgen05.mma.kind::{kind}.block_scale",
        a_format=a, b_format=b, scale_format=scale_format, block=block, k=64, group=16,
        frac_bits=35, acc_format="fp32", acc_rounding=Rounding.RZ, e_zero=-139,
        provenance=PRESETS_PROVENANCE[f"blackwell-{kind}"])


def _ocp_fp32(a, b, scale_format, block, c_format) -> UnitSpec:
    return UnitSpec(
        name="ocp-fp32", instruction="OCP MX v1.0 dot product: exact per block, FP32 between",
        a_format=a, b_format=b, scale_format=scale_format, block=block, k=block,
        frac_bits=None, acc_format="fp32", acc_rounding=Rounding.RNE, c_mode=CMode.AFTER,
        c_rounding=Rounding.RNE, overflow=Overflow.IEEE, zero_sign=ZeroSign.IEEE,
        provenance=PRESETS_PROVENANCE["ocp-fp32"])


#: Presets whose hardware path has no C operand, and why a C cannot be modelled there.
NO_C = {
    name: "torch._scaled_mm passes none to cuBLASLt, and the bias it takes (bf16 output only) "
          "is added after the scales, not before as C would be (docs/gpu.md); "
          "generate the set without C (--no-c)"
    for name in ("hopper-cublas-rowwise", "hopper-cublas-blockwise")}

PRESETS_PROVENANCE = {
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
    "blackwell-f8f6f4": f"{MMASIM}: F=25, 32 products per step, RZ FP32, e_zero -133",
    "blackwell-mxf8f6f4": f"{MMASIM}: E8M0 scale exponents added to each product's exponent "
                          "before alignment, F=25, RZ FP32, e_zero -133",
    "blackwell-mxf4": f"{MMASIM}: GST-FDPA, groups of 16 products summed exactly, F=35, "
                      "RZ FP32, e_zero -139",
    "blackwell-mxf4nvf4": f"{MMASIM}: GST-FDPA as mxf4, with UE4M3 or E8M0 scales",
    "ocp-fp32": "a reading of OCP MX v1.0 §6 (Dot Product): each block's dot product exact, "
                "rounded to FP32 (RNE), blocks added to C in FP32 in order (RNE)",
}

_UNVERIFIED = "published parameters; not verified on hardware by mxsim"

PRESETS: dict[str, Preset] = {p.name: p for p in [
    Preset("exact", "infinitely precise A·B + C (scales applied exactly), rounded once to FP32 "
                    "RNE", "definition (mathematically exact); no hardware computes it",
           "n/a", tuple(product(ELEMENT_FORMATS, ELEMENT_FORMATS)),
           ((None, None), ("e8m0", 32), ("e8m0", 16), ("ue4m3", 16), ("ue4m3", 32),
            ("fp32", None), ("fp32", 128)), ("fp32",), _exact),
    Preset("hopper-wgmma", "Hopper FP8 wgmma, one k32 step: F=13 truncation, RZ to E8M13 "
                           "(FP32 out) or RNE FP16 (FP16 out)",
           PRESETS_PROVENANCE["hopper-wgmma"],
           "H200 (tests/data/h200/2026-12-01: torch._scaled_mm with K = 32, and Triton's tl.dot "
           "at K = 32), e4m3xe4m3/e4m3xe5m2/e5m2xe4m3, FP32 out, every generator family, 0 "
           "mismatches; counts in docs/gpu.md (python -m gpu.figures); e5m2xe5m2 and FP16 out "
           "checked against MMA-Sim only",
           tuple(product(FP8, FP8)),
           ((None, None),), ("fp32", "fp16"), _hopper_wgmma),
    Preset("hopper-cublas-fast", "cuBLASLt FP8 GEMM with fast accumulation: chained wgmma "
                                 "k32 steps", PRESETS_PROVENANCE["hopper-cublas-fast"],
           "H200 (tests/data/h200/2026-12-01: torch._scaled_mm use_fast_accum=True, K = 64, 256, "
           "1024, 4096, and Triton's tl.dot chain at K = 256), three operand pairs, every "
           "generator family, 0 mismatches; counts in docs/gpu.md (python -m gpu.figures)",
           (("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3")),
           ((None, None),), ("fp32",), _cublas_fast),
    Preset("hopper-cublas", "cuBLASLt FP8 GEMM without fast accumulation: wgmma k32 chains "
                            "promoted to FP32 every 128 of K (RNE)",
           PRESETS_PROVENANCE["hopper-cublas"],
           "H200 (tests/data/h200/2026-12-01: torch._scaled_mm use_fast_accum=False), three "
           "pairs, K = 256, 1024, 4096, every generator family, and 7 M x N x K shapes from "
           "16x16x4096 to 2048x2048x384, 0 mismatches; counts in docs/gpu.md "
           "(python -m gpu.figures)",
           (("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3")), ((None, None),), ("fp32",),
           _hopper_cublas),
    Preset("hopper-cublas-rowwise", "cuBLASLt FP8 without fast accumulation, per-tensor or "
                                    "row-wise FP32 scales applied in the epilogue",
           PRESETS_PROVENANCE["hopper-cublas-rowwise"],
           "H200 (tests/data/h200/2026-12-01): e4m3 x e4m3, e4m3 x e5m2 and e5m2 x e4m3, K = 256, "
           "per-tensor and row-wise scales, every generator family incl. scale extremes, no C, "
           "0 mismatches; counts in docs/gpu.md (python -m gpu.figures)",
           (("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3")), (("fp32", None),),
           ("fp32",), _hopper_cublas_rowwise),
    Preset("hopper-cublas-blockwise", "cuBLASLt FP8 without fast accumulation, DeepSeek-style "
                                      "block-wise FP32 scales applied to each 128-K partial",
           PRESETS_PROVENANCE["hopper-cublas-blockwise"],
           "H200 (tests/data/h200/2026-12-01): e4m3 x e4m3, e4m3 x e5m2 and e5m2 x e4m3, "
           "K = 512 and 2048, every generator family incl. scale extremes, no C, 0 mismatches; "
           "counts in docs/gpu.md (python -m gpu.figures)",
           (("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3")), (("fp32", 128),), ("fp32",),
           _hopper_cublas_blockwise),
    Preset("hopper-mma-sync", "Hopper FP8 mma.sync m16n8k32 (emulated on FP16 tensor cores): "
                              "two interleaved steps, F=25, C added after (RNE)",
           PRESETS_PROVENANCE["hopper-mma-sync"],
           "H200 (tests/data/h200/2026-12-01: gpu/mma_sync.py), all four e4m3/e5m2 pairs, FP32 "
           "and FP16 accumulate, K = 32 and 256, every generator family, 0 mismatches; counts "
           "in docs/gpu.md (python -m gpu.figures)",
           tuple(product(FP8, FP8)), ((None, None),), ("fp32", "fp16"), _hopper_mma_sync),
    Preset("triton-dot-scaled-hopper", "Triton tl.dot_scaled on Hopper (emulated): bf16 "
                                       "upcast, steps of 16, F=25, RZ FP32",
           PRESETS_PROVENANCE["triton-dot-scaled-hopper"],
           "H200 (tests/data/h200/2026-12-01, Triton 3.6): all 9 pairs of e4m3/e5m2/e2m1, "
           "K = 128 and 1024, every generator family incl. scale extremes, NaN scales and "
           "Inf/NaN, and the operand map (every element code under every E8M0 scale, on A and "
           "B), 0 mismatches; counts in docs/gpu.md (python -m gpu.figures)",
           tuple(product(("e4m3", "e5m2", "e2m1"), ("e4m3", "e5m2", "e2m1"))),
           (("e8m0", 32),), ("fp32",), _triton_dot_scaled_hopper),
    Preset("blackwell-f8f6f4", "Blackwell kind::f8f6f4: F=25, RZ FP32 (RNE FP16 out)",
           PRESETS_PROVENANCE["blackwell-f8f6f4"], _UNVERIFIED,
           tuple(product(F8F6F4, F8F6F4)), ((None, None),), ("fp32", "fp16"),
           _blackwell_f8f6f4),
    Preset("blackwell-mxf8f6f4", "Blackwell kind::mxf8f6f4 (MXFP8/6/4, E8M0 block 32): "
                                 "scaled products, F=25, RZ FP32",
           PRESETS_PROVENANCE["blackwell-mxf8f6f4"], _UNVERIFIED,
           tuple(product(F8F6F4, F8F6F4)), (("e8m0", 32),), ("fp32",), _blackwell_mxf8f6f4),
    Preset("blackwell-mxf4", "Blackwell kind::mxf4 (MXFP4, K=64): GST-FDPA, F=35, RZ FP32",
           PRESETS_PROVENANCE["blackwell-mxf4"], _UNVERIFIED, (("e2m1", "e2m1"),),
           (("e8m0", 32),), ("fp32",), _blackwell_mxf4),
    Preset("blackwell-mxf4nvf4", "Blackwell kind::mxf4nvf4 (MXFP4/NVFP4, K=64): GST-FDPA, "
                                 "F=35, RZ FP32",
           PRESETS_PROVENANCE["blackwell-mxf4nvf4"], _UNVERIFIED, (("e2m1", "e2m1"),),
           (("e8m0", 32), ("e8m0", 16), ("ue4m3", 16)), ("fp32",),
           lambda *args: _blackwell_mxf4(*args, kind="mxf4nvf4")),
    Preset("ocp-fp32", "OCP MX reading: exact per-block dot products added in FP32 (RNE)",
           PRESETS_PROVENANCE["ocp-fp32"], "n/a (a reading of the spec)",
           tuple(product(ELEMENT_FORMATS, ELEMENT_FORMATS)), (("e8m0", 32),), ("fp32",), _ocp_fp32),
]}


def names() -> list[str]:
    return list(PRESETS)


def get(name: str) -> Preset:
    """Look a preset up by name."""
    try:
        return PRESETS[name]
    except KeyError:
        raise UnitError(f"Unknown unit {name!r}; choose one of {', '.join(PRESETS)} "
                        f"(see `mxsim units`), or give a spec file (.toml/.json)") from None
