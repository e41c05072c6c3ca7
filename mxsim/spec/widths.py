"""What a unit spec's formats hold and how wide its sums get: the bounds its rules check.

The engines sum a fused step's aligned terms, and a GST-FDPA group's products, in int64;
:func:`step_sum_bits` and :func:`group_sum_bits` give the bits those sums can need, from the
spec's formats, k, F and group. :func:`holds` and its kin say whether an upcast format
holds an operand format's values exactly; :func:`operand_problem` which operand formats a
unit takes.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from .. import formats
from .policies import Align, Product

if TYPE_CHECKING:
    from . import UnitSpec

__all__ = ["MAX_GROUP_BITS", "MAX_STEP_SUM_BITS", "group_sum_bits", "holds",
           "holds_every_code", "operand_problem", "holds_top_binade", "step_sum_bits"]

#: A step's aligned sum, in units of its LSB, must stay below 2**63 (the engines sum in int64).
MAX_STEP_SUM_BITS = 63
MAX_GROUP_BITS = 54       # a group sum times two UE4M3 significands must stay below 2**63


def operand_problem(a_format: str, b_format: str, scale_format: str | None) -> str | None:
    """Why A and B of these formats cannot be a unit's operands (None: they can).

    A and B are operand formats (:data:`~mxsim.formats.OPERAND_FORMATS`), in any pair;
    scales (E8M0, UE4M3, FP32) go with the MX element formats only.
    """
    allowed = formats.OPERAND_FORMATS
    for name, value in (("a_format", a_format), ("b_format", b_format)):
        if value not in allowed:
            return f"{name} must be one of {', '.join(allowed)}, not {value!r}"
    for name, value in (("a_format", a_format), ("b_format", b_format)):
        if scale_format is not None and value not in formats.ELEMENT_FORMATS:
            return (f"scales go with MX element formats only; {name} is {value}, so "
                    f"scale_format must be null, not {scale_format!r}")
    return None


def _finite_values(f: formats.Format) -> np.ndarray:
    """Every finite value of element or operand format ``f`` (TF32's 2**19 codes too)."""
    codes = np.arange(1 << f.bits, dtype=np.uint32).astype(f.code_dtype)
    cls = f.classify(codes)
    return f.decode(codes[(cls != formats.Class.NAN) & (cls != formats.Class.INF)])


@cache
def holds(up: formats.Format, name: str) -> bool:
    """True when format ``up`` represents every finite value of operand format ``name``."""
    values = _finite_values(formats.get(name))
    return bool(np.array_equal(up.decode(up.encode(values, "rne", saturate=False)), values))


@cache
def holds_every_code(up: formats.Format, name: str) -> bool:
    """True when format ``up`` represents, exactly, the number every code of element format
    ``name`` spells (its NaN and Inf codes read as numbers)."""
    f = formats.get(name)
    sign, e, sig = f.fields(np.arange(1 << f.bits, dtype=np.uint32).astype(f.code_dtype))
    values = np.ldexp(np.where(sign == 1, -1.0, 1.0) * sig, e.astype(np.int64) - f.man_bits)
    return bool(np.array_equal(up.decode(up.encode(values, "rne", saturate=False)), values))


@cache
def holds_top_binade(up: formats.Format, name: str) -> bool:
    """True when ``up`` holds, exactly, the numbers an IEEE-style format's Inf/NaN codes spell
    when read as one more binade (True for formats without such codes)."""
    f = formats.get(name)
    if f.kind != "float" or f.specials is not formats.Specials.IEEE:
        return True
    top = np.ldexp(1.0 + np.arange(1 << f.man_bits) / (1 << f.man_bits), f.emax + 1)
    return bool(np.array_equal(up.decode(up.encode(top, "rne", saturate=False)), top))


def _lsb_min(f: formats.Format) -> int:
    """Exponent of the smallest step of an element format (its subnormal LSB)."""
    return f.emin - f.man_bits if f.kind == "float" else -f.man_bits


def step_sum_bits(spec: UnitSpec) -> int:
    """Bits (sign excluded) that the largest aligned sum of one truncated step can need.

    Every term is rounded to a multiple of the step's LSB ``2**(E - frac_bits)``; a product
    is at most ``2**(e + 2)`` above its alignment exponent ``e <= E`` (``2**(e + 1)``
    normalised, times ``2**2`` for two UE4M3 scale significands; a GST group term by its
    exact group sum), the accumulator term below ``2**(E + 1)``, and ``rz-jam`` halves the
    LSB. The engines sum a step in int64, so this must stay at most ``MAX_STEP_SUM_BITS``.
    """
    if spec.frac_bits is None:
        raise ValueError("an exact step (frac_bits null) is not aligned")
    ue4m3 = 2 if spec.scale_format == "ue4m3" else 0
    longest = max(len(step) for step in spec.steps())
    if spec.group is not None:
        fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)
        above = (group_sum_bits(spec.a_format, spec.b_format, spec.group) - 1
                 + _lsb_min(fa) + _lsb_min(fb) + ue4m3)
        terms = longest // spec.group
    else:
        above = (1 if spec.product is Product.NORMALIZED else 2) + ue4m3
        terms = longest
    jam = 1 if spec.align is Align.RZ_JAM else 0
    biggest = terms * 2 ** (spec.frac_bits + max(above, 1) + jam) \
        + 2 ** (spec.frac_bits + 1 + jam)
    return biggest.bit_length()


def group_sum_bits(a_format: str, b_format: str, group: int) -> int:
    """Bits of the exact fixed-point sum of ``group`` products (GST-FDPA), sign included."""
    bits = 1 + (group - 1).bit_length()
    for name in (a_format, b_format):
        f = formats.get(name)
        span = 0 if f.kind == "int" else f.emax - f.emin
        bits += span + f.man_bits + 1 + (1 if f.kind == "int" else 0)
    return bits
