"""Hardware presets: named families of unit specs, each with where its parameters come from.

A preset is named after the hardware path it models (``hopper-wgmma``), by instruction and
architecture. It yields a :class:`~mxsim.spec.UnitSpec` for each operand-format pair (and C/D
format) it supports, and says which it does not. ``mxsim units`` lists them. A spec of one's
own (a spec file) is a preset of one spec, :func:`from_spec`.

- :mod:`.family`: :class:`Preset`, :class:`SpecPreset`, :func:`from_spec`;
- :mod:`.hopper`: Hopper FP8 (wgmma, the emulated FP8 mma.sync, cuBLASLt, Triton);
- :mod:`.generations`: MMA-Sim's T-FDPA for FP16/BF16/TF32 mma and wgmma, Volta to
  Blackwell, and Ada's FP8 mma;
- :mod:`.blackwell`: the kind:: instructions and the legacy FP8 mma.sync on sm_100;
- :mod:`.cdna`: AMD CDNA matrix cores, where a spec can state them.
"""

from __future__ import annotations

from itertools import product

from ..errors import UnitError
from ..formats import ELEMENT_FORMATS, Overflow, Rounding
from ..spec import CMode, UnitSpec, ZeroSign
from . import blackwell, cdna, generations, hopper
from .family import MMASIM, UNVERIFIED, Preset, SpecPreset, from_spec

__all__ = ["Preset", "SpecPreset", "PRESETS", "PRESETS_PROVENANCE", "NO_C", "MMASIM",
           "UNVERIFIED", "get", "names", "from_spec"]


def _exact(a, b, scale_format, block, c_format) -> UnitSpec:
    return UnitSpec(
        name="exact", instruction="exact dot product, one rounding", a_format=a, b_format=b,
        scale_format=scale_format, block=block, k=None, frac_bits=None,
        acc_format="fp32", acc_rounding=Rounding.RNE, d_format="fp32",
        overflow=Overflow.IEEE, zero_sign=ZeroSign.IEEE, provenance="definition")


def _ocp_fp32(a, b, scale_format, block, c_format) -> UnitSpec:
    return UnitSpec(
        name="ocp-fp32", instruction="OCP MX v1.0 dot product: exact per block, FP32 between",
        a_format=a, b_format=b, scale_format=scale_format, block=block, k=block,
        frac_bits=None, acc_format="fp32", acc_rounding=Rounding.RNE, c_mode=CMode.AFTER,
        c_rounding=Rounding.RNE, overflow=Overflow.IEEE, zero_sign=ZeroSign.IEEE,
        provenance=_OCP)


_OCP = ("a reading of OCP MX v1.0 §6 (Dot Product): each block's dot product exact, rounded "
        "to FP32 (RNE), blocks added to C in FP32 in order (RNE)")

_EXACT = Preset(
    "exact", "infinitely precise A·B + C (scales applied exactly), rounded once to FP32 RNE",
    "definition (mathematically exact); no hardware computes it", "n/a",
    tuple(product(ELEMENT_FORMATS, ELEMENT_FORMATS)) + (("fp16", "fp16"), ("bf16", "bf16"),
                                                        ("tf32", "tf32")),
    ((None, None), ("e8m0", 32), ("e8m0", 16), ("ue4m3", 16), ("ue4m3", 32), ("fp32", None),
     ("fp32", 128)), ("fp32",), _exact)
_OCP_FP32 = Preset(
    "ocp-fp32", "OCP MX reading: exact per-block dot products added in FP32 (RNE)", _OCP,
    "n/a (a reading of the spec)", tuple(product(ELEMENT_FORMATS, ELEMENT_FORMATS)),
    (("e8m0", 32),), ("fp32",), _ocp_fp32)

PRESETS: dict[str, Preset] = {p.name: p for p in [
    _EXACT, *hopper.PRESETS, *blackwell.PRESETS[:4], _OCP_FP32, *blackwell.PRESETS[4:],
    generations.ADA_F8, *generations.SIXTEEN_BIT, *cdna.PRESETS,
]}

#: Where each preset's parameters come from (the ``provenance`` of its specs).
PRESETS_PROVENANCE = {name: p.provenance for name, p in PRESETS.items()}

#: Presets whose hardware path has no C operand, and why a C cannot be modelled there.
NO_C = {name: p.no_c for name, p in PRESETS.items() if p.no_c is not None}


def names() -> list[str]:
    return list(PRESETS)


def get(name: str) -> Preset:
    """Look a preset up by name."""
    try:
        return PRESETS[name]
    except KeyError:
        raise UnitError(f"Unknown unit {name!r}; choose one of {', '.join(PRESETS)} "
                        f"(see `mxsim units`), or give a spec file (.toml/.json)") from None
