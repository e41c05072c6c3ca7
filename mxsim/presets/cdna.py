"""AMD CDNA matrix cores (MFMA), where a unit spec states MMA-Sim's model exactly.

MMA-Sim (``amd/sim.py``) models CDNA1's FP16 and BF16 ``v_mfma`` as E-FDPA: every run of
``L`` products (4 for FP16, 2 for BF16) and the accumulator are summed exactly and rounded once
to FP32, to nearest even. That is a spec with exact steps (``frac_bits`` null) of L and RNE FP32
rounding; an exactly-zero result is +0 (MMA-Sim returns +0 for -0 products and a -0 C) and an
overflow rounds to Inf as IEEE 754 does. The other CDNA models do not fit a spec (docs/units.md,
"AMD CDNA"): CDNA2's flush-to-zero multiply-add pairs, CDNA3's two-level TR-FDPA and the FNUZ
FP8 GTR-FDPA.
"""

from __future__ import annotations

from ..formats import Overflow, Rounding
from ..spec import UnitSpec, ZeroSign
from .family import MMASIM, UNVERIFIED, Preset

__all__ = ["PRESETS", "PROVENANCE"]

#: operand -> (step L, the instructions, MMA-Sim's names)
_CDNA1 = {
    "fp16": (4, "v_mfma_f32_{32x32x8,16x16x16,32x32x4,16x16x4,4x4x4}f16"),
    "bf16": (2, "v_mfma_f32_{32x32x4,16x16x8,32x32x2,16x16x2,4x4x2}bf16"),
}


def _cdna1(a, b, scale_format, block, c_format) -> UnitSpec:
    step, names = _CDNA1[a]
    name = f"cdna1-mfma-{'f16' if a == 'fp16' else 'bf16'}"
    return UnitSpec(
        name=name, instruction=f"{names} (CDNA1, MI100): one exact step per {step} of K",
        a_format=a, b_format=b, k=step, frac_bits=None, acc_format="fp32",
        acc_rounding=Rounding.RNE, overflow=Overflow.IEEE, zero_sign=ZeroSign.POSITIVE,
        provenance=PROVENANCE[name])


PROVENANCE = {
    f"cdna1-mfma-{'f16' if a == 'fp16' else 'bf16'}":
        f"{MMASIM}, CDNA1 {a} MFMA: E-FDPA, {step} products and C summed exactly per step, "
        f"rounded once to FP32 (RNE); every instruction's K is a multiple of {step}, so a "
        f"chain of them is a chain of these steps"
    for a, (step, _) in _CDNA1.items()}

PRESETS = [
    Preset(f"cdna1-mfma-{'f16' if a == 'fp16' else 'bf16'}",
           f"AMD CDNA1 (MI100) {names}: exact sums of {step} products and C, RNE FP32",
           PROVENANCE[f"cdna1-mfma-{'f16' if a == 'fp16' else 'bf16'}"], UNVERIFIED,
           ((a, a),), ((None, None),), ("fp32",), _cdna1)
    for a, (step, names) in _CDNA1.items()]
