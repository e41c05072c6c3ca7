"""Blackwell FP8/FP6/FP4 presets: the kind:: instructions MMA-Sim models, and legacy FP8 mma.sync.

The ``kind::`` presets name ``tcgen05.mma`` on sm_100a and ``mma.sync`` on sm_120a, which
MMA-Sim models with the same arithmetic; their only evidence is that published model. The B200
FP8 outputs of Khattak & Mikaitis come from a different instruction, FP8 ``mma.sync.m16n8k32``
without ``kind::`` on sm_100, which computes as sm_90's FP16 emulation:
``blackwell-mma-sync-f8-legacy``.
"""

from __future__ import annotations

from itertools import product

from ..formats import Rounding
from ..spec import UnitSpec
from .family import MMASIM, Preset
from .hopper import FP8, hopper_mma_sync

__all__ = ["PRESETS", "PROVENANCE", "F8F6F4", "KM_B200_FP8"]

F8F6F4 = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")

#: The evidence for the legacy FP8 mma.sync on sm_100: Khattak & Mikaitis' B200 outputs.
KM_B200_FP8 = (
    "Khattak & Mikaitis' B200 outputs (north-numerical-computing/MATLAB-tensor-core @ b12b5a7, "
    "model_validation/B200/{E4M3,E5M2}: mma.sync.aligned.m16n8k32.row.col FP8 with C, FP32 and "
    "FP16 output; 4 x 5,000 dots, K = 32): equal to hopper-mma-sync's arithmetic in all "
    "20,000 (docs/conformance.md, recomputed from tests/data/km), where blackwell-f8f6f4 "
    "(F=25, one step, no FP16 upcast) misses 1,793 / 1,764 (e4m3 / e5m2, FP32 out) and "
    "1,892 / 1,597 (FP16 out)")

_EVIDENCE = ("evidence: MMA-Sim's published model; not verified on hardware. The B200 FP8 "
             "rows of Khattak & Mikaitis are a different instruction (legacy mma.sync without "
             "kind::), preset blackwell-mma-sync-f8-legacy")


def _blackwell_f8f6f4(a, b, scale_format, block, c_format) -> UnitSpec:
    f16 = c_format == "fp16"
    d = "f16" if f16 else "f32"
    return UnitSpec(
        name="blackwell-f8f6f4",
        instruction=f"tcgen05.mma.cta_group::1.kind::f8f6f4 (sm_100a) / "
                    f"mma.sync.m16n8k32.kind::f8f6f4.{d}.{a}.{b}.{d} (sm_120a)",
        a_format=a, b_format=b, k=32, frac_bits=25, acc_format="fp16" if f16 else "fp32",
        acc_rounding=Rounding.RNE if f16 else Rounding.RZ, d_format=c_format,
        e_zero=-21 if f16 else -133, provenance=PROVENANCE["blackwell-f8f6f4"])


def _blackwell_mxf8f6f4(a, b, scale_format, block, c_format) -> UnitSpec:
    return UnitSpec(
        name="blackwell-mxf8f6f4",
        instruction=f"mma.sync.m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.{a}.{b}"
                    f".f32.ue8m0 / tcgen05.mma.kind::mxf8f6f4.block_scale",
        a_format=a, b_format=b, scale_format="e8m0", block=32, k=32, frac_bits=25,
        acc_format="fp32", acc_rounding=Rounding.RZ, e_zero=-133,
        provenance=PROVENANCE["blackwell-mxf8f6f4"])


def _blackwell_mxf4(a, b, scale_format, block, c_format, kind="mxf4") -> UnitSpec:
    vec = "2X" if block == 32 else "4X"
    return UnitSpec(
        name=f"blackwell-{kind}",
        instruction=f"mma.sync.m16n8k64.kind::{kind}.block_scale.scale_vec::{vec}.f32.e2m1"
                    f".e2m1.f32.{'ue8m0' if scale_format == 'e8m0' else 'ue4m3'} (sm_120a) / "
                    f"tcgen05.mma.kind::{kind}.block_scale (sm_100a)",
        a_format=a, b_format=b, scale_format=scale_format, block=block, k=64, group=16,
        frac_bits=35, acc_format="fp32", acc_rounding=Rounding.RZ, e_zero=-139,
        provenance=PROVENANCE[f"blackwell-{kind}"])


def _blackwell_mxf4nvf4(a, b, scale_format, block, c_format) -> UnitSpec:
    return _blackwell_mxf4(a, b, scale_format, block, c_format, kind="mxf4nvf4")


def _blackwell_mma_sync_f8_legacy(a, b, scale_format, block, c_format) -> UnitSpec:
    d = "f16" if c_format == "fp16" else "f32"
    return hopper_mma_sync(a, b, scale_format, block, c_format).replace(
        name="blackwell-mma-sync-f8-legacy",
        instruction=f"mma.sync.aligned.m16n8k32.row.col.{d}.{a}.{b}.{d} without kind:: "
                    f"(sm_100, B200: computed as sm_90's FP16 emulation)",
        provenance=PROVENANCE["blackwell-mma-sync-f8-legacy"])


PROVENANCE = {
    "blackwell-f8f6f4": f"{MMASIM}, for tcgen05.mma (Blackwell) and mma.sync kind::f8f6f4 "
                        "(RTX Blackwell) alike: F=25, 32 products per step, RZ FP32 (RNE FP16), "
                        "e_zero -133 (-21)",
    "blackwell-mxf8f6f4": f"{MMASIM}: E8M0 scale exponents added to each product's exponent "
                          "before alignment, F=25, RZ FP32, e_zero -133",
    "blackwell-mxf4": f"{MMASIM}: GST-FDPA, groups of 16 products summed exactly, F=35, "
                      "RZ FP32, e_zero -139",
    "blackwell-mxf4nvf4": f"{MMASIM}: GST-FDPA as mxf4, with UE4M3 or E8M0 scales",
    "blackwell-mma-sync-f8-legacy":
        f"{KM_B200_FP8}. The arithmetic is hopper-mma-sync's (operands upcast to FP16, steps "
        "k mod 4 in {0,1} then {2,3}, F=25, RZ FP32 / RNE FP16, C added after with RNE); the "
        "same PTX runs so on sm_90 and, with the toolchain K&M used, on sm_100",
}

PRESETS = [
    Preset("blackwell-f8f6f4", "kind::f8f6f4: tcgen05.mma (sm_100a) and mma.sync m16n8k32 "
                               "(sm_120a): F=25, RZ FP32 (RNE FP16 out)",
           PROVENANCE["blackwell-f8f6f4"], _EVIDENCE,
           tuple(product(F8F6F4, F8F6F4)), ((None, None),), ("fp32", "fp16"),
           _blackwell_f8f6f4),
    Preset("blackwell-mxf8f6f4", "kind::mxf8f6f4 (MXFP8/6/4, E8M0 block 32): tcgen05.mma "
                                 "(sm_100a) and mma.sync (sm_120a): scaled products, F=25, "
                                 "RZ FP32",
           PROVENANCE["blackwell-mxf8f6f4"], _EVIDENCE,
           tuple(product(F8F6F4, F8F6F4)), (("e8m0", 32),), ("fp32",), _blackwell_mxf8f6f4),
    Preset("blackwell-mxf4", "kind::mxf4 (MXFP4, K=64): tcgen05.mma (sm_100a) and mma.sync "
                             "(sm_120a): GST-FDPA, F=35, RZ FP32",
           PROVENANCE["blackwell-mxf4"], _EVIDENCE, (("e2m1", "e2m1"),),
           (("e8m0", 32),), ("fp32",), _blackwell_mxf4),
    Preset("blackwell-mxf4nvf4", "kind::mxf4nvf4 (MXFP4/NVFP4, K=64): tcgen05.mma (sm_100a) "
                                 "and mma.sync (sm_120a): GST-FDPA, F=35, RZ FP32",
           PROVENANCE["blackwell-mxf4nvf4"], _EVIDENCE, (("e2m1", "e2m1"),),
           (("e8m0", 32), ("e8m0", 16), ("ue4m3", 16)), ("fp32",), _blackwell_mxf4nvf4),
    Preset("blackwell-mma-sync-f8-legacy",
           "Blackwell (sm_100, B200) FP8 mma.sync m16n8k32 without kind::: FP16 emulation as "
           "hopper-mma-sync (two interleaved steps, F=25, C added after)",
           PROVENANCE["blackwell-mma-sync-f8-legacy"],
           "Khattak & Mikaitis' B200 outputs, e4m3/e5m2 x FP32/FP16 out, all 20,000 dots "
           "equal (docs/conformance.md); not verified on hardware by mxsim (we have no B200)",
           tuple(product(FP8, FP8)), ((None, None),), ("fp32", "fp16"),
           _blackwell_mma_sync_f8_legacy),
]
