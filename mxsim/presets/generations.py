"""NVIDIA mma and wgmma by architecture, as MMA-Sim models them (truncated fused dot products).

MMA-Sim (PyPI ``mmasim`` 2.1.1, ``nv_ptx/sim.py``) models every FP16, BF16 and TF32 ``mma`` and
``wgmma`` of Volta to Blackwell as one T-FDPA: the instruction's K is cut into steps of
``L = L_max_bytes / operand bytes`` consecutive products; each step aligns its products and the
running accumulator to the largest exponent, truncating to ``F`` fraction bits, and rounds the
exact sum once: toward zero to FP32, or to nearest even to FP16 for FP16 output. The
architecture fixes ``F``, ``L_max_bytes`` and the exponent a zero term aligns at (``e_zero``):

============  ===  ===========  =========================
architecture   F   L_max bytes  e_zero (FP32 / FP16 out)
============  ===  ===========  =========================
Volta          23        8      -131 / -19
Turing         24       16      -132 / -20
Ampere, Ada    24       16      -132 / -20
Hopper         25       32      -133 / -21
Blackwell      25       32      -133 / -21
============  ===  ===========  =========================

TF32 operands are FP32 words whose low 13 bits the hardware ignores (mxsim's ``tf32`` code is
the top 19 bits). Ada's FP8 ``mma`` keeps F = 13 and rounds toward zero to E8M13, as Hopper's
FP8 ``wgmma`` does, in steps of 16.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..formats import Rounding
from ..spec import UnitSpec
from .family import MMASIM, UNVERIFIED, Preset
from .hopper import FP8

__all__ = ["Arch", "ARCHS", "PRESETS", "SIXTEEN_BIT", "ADA_F8", "PROVENANCE", "VERIFIED",
           "EVIDENCE", "steps_of"]


@dataclass(frozen=True)
class Arch:
    """One architecture's T-FDPA parameters in MMA-Sim."""
    name: str             #: as the preset names spell it (``ampere``)
    title: str            #: for people (``Ampere (sm_80, sm_86)``)
    frac_bits: int        #: F
    step_bytes: int       #: L_max in bytes of one operand vector
    e_zero_fp32: int
    e_zero_fp16: int


ARCHS = {a.name: a for a in [
    Arch("volta", "Volta (sm_70)", 23, 8, -131, -19),
    Arch("turing", "Turing (sm_75)", 24, 16, -132, -20),
    Arch("ampere", "Ampere (sm_80, sm_86)", 24, 16, -132, -20),
    Arch("ada", "Ada Lovelace (sm_89)", 24, 16, -132, -20),
    Arch("hopper", "Hopper (sm_90)", 25, 32, -133, -21),
    Arch("blackwell", "Blackwell (sm_100, sm_120)", 25, 32, -133, -21),
    Arch("rtx-blackwell", "RTX Blackwell (sm_120)", 25, 32, -133, -21),
]}

_BYTES = {"fp16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1}
_PTX = {"fp16": "f16", "bf16": "bf16", "tf32": "tf32", "e4m3": "e4m3", "e5m2": "e5m2"}


def steps_of(k: int, length: int) -> tuple[tuple[int, ...], ...] | None:
    """Contiguous fused steps of ``length`` indices covering ``k`` (None: one step)."""
    if length >= k:
        return None
    return tuple(tuple(range(i, i + length)) for i in range(0, k, length))


@dataclass(frozen=True)
class _Tfdpa:
    """The spec maker of one preset: an architecture, an instruction K and its PTX spelling."""
    name: str
    arch: Arch
    k: int
    ptx: str              #: the instruction, ``{d}``/``{a}``/``{b}`` for the PTX types
    frac_bits: int | None = None   #: F when the operand type overrides the architecture's
    acc32: str = "fp32"            #: the accumulator of FP32 output (Ada FP8: e8m13)

    def __call__(self, a, b, scale_format, block, c_format) -> UnitSpec:
        f16 = c_format == "fp16"
        d = "f16" if f16 else "f32"
        length = self.arch.step_bytes // _BYTES[a]
        return UnitSpec(
            name=self.name, instruction=self.ptx.format(d=d, a=_PTX[a], b=_PTX[b]),
            a_format=a, b_format=b, k=self.k, schedule=steps_of(self.k, length),
            frac_bits=self.frac_bits or self.arch.frac_bits,
            acc_format="fp16" if f16 else self.acc32,
            acc_rounding=Rounding.RNE if f16 else Rounding.RZ, d_format=c_format,
            e_zero=self.arch.e_zero_fp16 if f16 else self.arch.e_zero_fp32,
            provenance=PROVENANCE[self.name])


def _mma(shape: str, sm: str) -> str:
    return f"mma.sync.aligned.{shape}.row.col.{{d}}.{{a}}.{{b}}.{{d}} ({sm})"


#: (preset, arch, operand, k, instruction(s), C/D formats)
_TABLE = [
    ("volta-mma-f16", "volta", "fp16", 4, _mma("m8n8k4", "sm_70"), True),
    ("turing-mma-f16", "turing", "fp16", 8, _mma("m16n8k8", "sm_75"), True),
    ("ampere-mma-f16", "ampere", "fp16", 16, _mma("m16n8k16", "sm_80/sm_86"),
     True),
    ("ampere-mma-bf16", "ampere", "bf16", 16, _mma("m16n8k16", "sm_80/sm_86"),
     False),
    ("ampere-mma-tf32", "ampere", "tf32", 8, _mma("m16n8k8", "sm_80/sm_86"),
     False),
    ("ada-mma-f16", "ada", "fp16", 16, _mma("m16n8k16", "sm_89"), True),
    ("ada-mma-bf16", "ada", "bf16", 16, _mma("m16n8k16", "sm_89"), False),
    ("ada-mma-tf32", "ada", "tf32", 8, _mma("m16n8k8", "sm_89"), False),
    ("hopper-mma-f16", "hopper", "fp16", 16, _mma("m16n8k16", "sm_90"), True),
    ("hopper-mma-bf16", "hopper", "bf16", 16, _mma("m16n8k16", "sm_90"), False),
    ("hopper-mma-tf32", "hopper", "tf32", 8, _mma("m16n8k8", "sm_90"), False),
    ("hopper-wgmma-f16", "hopper", "fp16", 16,
     "wgmma.mma_async.sync.aligned.m64nNk16.{d}.{a}.{b} (sm_90a)", True),
    ("hopper-wgmma-bf16", "hopper", "bf16", 16,
     "wgmma.mma_async.sync.aligned.m64nNk16.{d}.{a}.{b} (sm_90a)", False),
    ("hopper-wgmma-tf32", "hopper", "tf32", 8,
     "wgmma.mma_async.sync.aligned.m64nNk8.{d}.{a}.{b} (sm_90a)", False),
    ("hopper-mma-f16-k8", "hopper", "fp16", 8, _mma("m16n8k8", "sm_90"), True),
    ("hopper-mma-bf16-k8", "hopper", "bf16", 8, _mma("m16n8k8", "sm_90"), False),
    ("hopper-mma-tf32-k4", "hopper", "tf32", 4, _mma("m16n8k4", "sm_90"), False),
    ("blackwell-mma-f16", "blackwell", "fp16", 16,
     "mma.sync.aligned.m16n8k16.row.col.{d}.{a}.{b}.{d} (sm_100, sm_120) / "
     "tcgen05.mma.kind::f16 m64/m128 nN k16 (sm_100a)", True),
    ("blackwell-mma-bf16", "blackwell", "bf16", 16,
     "mma.sync.aligned.m16n8k16.row.col.{d}.{a}.{b}.{d} (sm_100, sm_120) / "
     "tcgen05.mma.kind::f16 m64/m128 nN k16 (sm_100a)", False),
    ("blackwell-mma-tf32", "blackwell", "tf32", 8,
     "mma.sync.aligned.m16n8k8.row.col.{d}.{a}.{b}.{d} (sm_100, sm_120) / "
     "tcgen05.mma.kind::tf32 m64/m128 nN k8 (sm_100a)", False),
    ("blackwell-mma-f16-k8", "blackwell", "fp16", 8, _mma("m16n8k8", "sm_100, sm_120"), True),
    ("blackwell-mma-bf16-k8", "blackwell", "bf16", 8, _mma("m16n8k8", "sm_100, sm_120"),
     False),
    ("blackwell-mma-tf32-k4", "blackwell", "tf32", 4, _mma("m16n8k4", "sm_100, sm_120"),
     False),
    ("rtx-blackwell-mma-sync-f8", "rtx-blackwell", "e4m3", 32, _mma("m16n8k32", "sm_120"),
     True),
    ("rtx-blackwell-mma-sync-f8-k16", "rtx-blackwell", "e4m3", 16,
     _mma("m16n8k16", "sm_120"), True),
]

_KM = ("Khattak & Mikaitis' outputs (north-numerical-computing/MATLAB-tensor-core @ b12b5a7, "
       "model_validation; wmma::mma_sync m16n16k16, tf32 m16n16k8, the row's elements and +0 "
       "in the rest of the fragment, imported by gpu/km_import.py)")


def _km(gpus: str, sets: str, dots: str, other: str) -> str:
    return (f"Confirmed on {_KM}: {gpus} {sets}, every one of {dots} dots equal; {other} "
            f"(docs/conformance.md)")


_PAD = ("the rows hold {n} elements padded with +0 to k, so they cannot tell steps of {n} from "
        "one step")
#: Evidence beyond MMA-Sim, by preset (Khattak & Mikaitis' rows, H200 runs): filled in as the
#: conformance tables (docs/conformance.md) and our own runs confirm a preset.
EVIDENCE: dict[str, str] = {
    "volta-mma-f16": _km("V100", "fp16, FP32 and FP16 output", "2 x 5,000",
                         "F=24 (Turing's) misses 1,200 of the FP32-output rows; FP16 output "
                         "cannot separate F"),
    "ampere-mma-f16": _km("A100 and A2", "fp16, FP32 and FP16 output", "4 x 5,000",
                          "Hopper's F=25 misses 766 and 815 FP32-output rows; "
                          + _PAD.format(n=8)),
    "ampere-mma-bf16": _km("A100 and A2", "bf16", "2 x 5,000", "Hopper's F=25 misses 426 and "
                           "400; " + _PAD.format(n=8)),
    "ampere-mma-tf32": _km("A100 and A2", "tf32", "2 x 5,000", "Hopper's F=25 misses 465 and "
                           "487; " + _PAD.format(n=4)),
    "ada-mma-f16": _km("Ada (the L40S files are the same bytes)", "fp16, FP32 and FP16 output",
                       "2 x 5,000", "Hopper's F=25 misses 828 FP32-output rows; "
                       + _PAD.format(n=8)),
    "ada-mma-bf16": _km("Ada (= L40S)", "bf16", "5,000", "Hopper's F=25 misses 415; "
                        + _PAD.format(n=8)),
    "ada-mma-tf32": _km("Ada (= L40S)", "tf32", "5,000", "Hopper's F=25 misses 467; "
                        + _PAD.format(n=4)),
    "hopper-mma-f16": _km("H100 and H200", "fp16, FP32 and FP16 output", "4 x 5,000",
                          "Ampere's F=24 and steps of 8 miss 1,757 and 1,755 FP32-output rows"),
    "hopper-mma-bf16": _km("H100 and H200", "bf16", "2 x 5,000", "Ampere's parameters miss "
                           "1,080 and 1,091"),
    "hopper-mma-tf32": _km("H100 and H200", "tf32", "2 x 5,000", "Ampere's parameters miss 498 "
                           "and 483"),
    "blackwell-mma-f16": _km("B200", "fp16, FP32 and FP16 output", "2 x 5,000",
                             "Ampere's parameters miss 1,812 FP32-output rows; Hopper's are the "
                             "same as Blackwell's"),
    "blackwell-mma-bf16": _km("B200", "bf16", "5,000", "Ampere's parameters miss 1,073"),
    "blackwell-mma-tf32": _km("B200", "tf32", "5,000", "Ampere's parameters miss 481"),
    "ada-mma-f8":
        "Confirmed on Khattak & Mikaitis' Ada outputs (north-numerical-computing/"
        "MATLAB-tensor-core @ b12b5a7, model_validation/Ada/{E4M3,E5M2}, mma.sync m16n8k32 "
        "with C; the L40S files are the same bytes): e4m3 and e5m2, FP32 and FP16 output, "
        "4 x 5,000 dots, every one equal; its neighbours (one step of 32, F=12 or 14, E8M12 or "
        "E8M14, RNE, C after the steps) each miss hundreds to thousands. The rows cannot "
        "separate e_zero (no step of theirs has only zero terms): it is MMA-Sim's",
}
#: ``verified`` by preset where it is more than MMA-Sim's model.
VERIFIED: dict[str, str] = {
    name: f"Khattak & Mikaitis' {gpus} outputs ({what}): every dot equal "
          f"(docs/conformance.md); not verified on hardware by mxsim"
    for name, gpus, what in [
        ("volta-mma-f16", "V100", "fp16, FP32/FP16 out, 10,000 dots"),
        ("ampere-mma-f16", "A100 and A2", "fp16, FP32/FP16 out, 20,000 dots"),
        ("ampere-mma-bf16", "A100 and A2", "bf16, 10,000 dots"),
        ("ampere-mma-tf32", "A100 and A2", "tf32, 10,000 dots"),
        ("ada-mma-f16", "Ada (= L40S)", "fp16, FP32/FP16 out, 10,000 dots"),
        ("ada-mma-bf16", "Ada (= L40S)", "bf16, 5,000 dots"),
        ("ada-mma-tf32", "Ada (= L40S)", "tf32, 5,000 dots"),
        ("hopper-mma-f16", "H100 and H200", "fp16, FP32/FP16 out, 20,000 dots"),
        ("hopper-mma-bf16", "H100 and H200", "bf16, 10,000 dots"),
        ("hopper-mma-tf32", "H100 and H200", "tf32, 10,000 dots"),
        ("blackwell-mma-f16", "B200", "fp16, FP32/FP16 out, 10,000 dots"),
        ("blackwell-mma-bf16", "B200", "bf16, 5,000 dots"),
        ("blackwell-mma-tf32", "B200", "tf32, 5,000 dots")]}
VERIFIED.update({
    "ada-mma-f8": "Khattak & Mikaitis' Ada (= L40S) outputs, e4m3/e5m2 x FP32/FP16 out, all "
                  "20,000 dots equal (docs/conformance.md); not verified on hardware by mxsim",
})


_LEGACY_F8 = ("MMA-Sim models sm_120's FP8 mma.sync without kind:: as kind::f8f6f4; the same "
              "PTX on sm_100 (B200) computes as sm_90's FP16 emulation (Khattak & Mikaitis' "
              "rows, preset blackwell-mma-sync-f8-legacy), so this is unmeasured")


def _label(operand: str) -> str:
    return "FP8" if operand in FP8 else operand


def _provenance(name: str, arch: Arch, operand: str, k: int) -> str:
    length = arch.step_bytes // _BYTES[operand]
    steps = "one fused step" if length >= k else f"fused steps of {length}"
    text = (f"{MMASIM}, {arch.title.split(' (')[0]} {_label(operand)} mma: T-FDPA, "
            f"F={arch.frac_bits}, {steps} ({arch.step_bytes} bytes of operands; k = {k}), RZ "
            f"FP32 (RNE FP16 for FP16 output), e_zero {arch.e_zero_fp32} ({arch.e_zero_fp16})")
    if operand == "tf32":
        text += "; TF32 operands are FP32 words truncated to 19 bits"
    if operand in FP8:
        text += f". {_LEGACY_F8}"
    return text + (f". {EVIDENCE[name]}" if name in EVIDENCE else "")


def _summary(arch: Arch, operand: str, k: int, ptx: str, has_f16: bool) -> str:
    length = arch.step_bytes // _BYTES[operand]
    steps = "one step" if length >= k else f"steps of {length}"
    inst = ptx.split(" (")[0].replace(".{d}.{a}.{b}", "").replace(".row.col", "").replace(
        ".{d}", "")
    return (f"{arch.title} {_label(operand)} {inst}: {steps}, F={arch.frac_bits}, RZ FP32"
            f"{' (RNE FP16 out)' if has_f16 else ''}")


def _presets() -> list[Preset]:
    out = []
    for name, arch_name, operand, k, ptx, has_f16 in _TABLE:
        arch = ARCHS[arch_name]
        PROVENANCE[name] = _provenance(name, arch, operand, k)
        pairs = tuple((a, b) for a in FP8 for b in FP8) if operand in FP8 else (
            (operand, operand),)
        out.append(Preset(
            name, _summary(arch, operand, k, ptx, has_f16), PROVENANCE[name],
            VERIFIED.get(name, UNVERIFIED), pairs, ((None, None),),
            ("fp32", "fp16") if has_f16 else ("fp32",), _Tfdpa(name, arch, k, ptx)))
    return out


PROVENANCE: dict[str, str] = {}
SIXTEEN_BIT = _presets()

PROVENANCE["ada-mma-f8"] = (
    f"{MMASIM}, Ada FP8 mma: T-FDPA with F=13, fused steps of 16 (16 bytes of operands; "
    f"k = 32), RZ to E8M13 (RNE FP16 for FP16 output), e_zero -132 (-20). "
    f"{EVIDENCE['ada-mma-f8']}")
ADA_F8 = Preset(
    "ada-mma-f8", "Ada Lovelace (sm_89) FP8 mma.sync m16n8k32: steps of 16, F=13, RZ to E8M13 "
                  "(RNE FP16 out)",
    PROVENANCE["ada-mma-f8"], VERIFIED.get("ada-mma-f8", UNVERIFIED),
    tuple((a, b) for a in FP8 for b in FP8), ((None, None),), ("fp32", "fp16"),
    _Tfdpa("ada-mma-f8", ARCHS["ada"], 32,
           "mma.sync.aligned.m16n8k32.row.col.{d}.{a}.{b}.{d} (sm_89)", frac_bits=13,
           acc32="e8m13"))

PRESETS = [*SIXTEEN_BIT, ADA_F8]
