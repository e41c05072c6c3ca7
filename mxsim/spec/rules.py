"""Rules of a unit spec that stand alone: the operand upcast, inputs without NaN/Inf, and the
later fields (blocks of any power of two, ``zero_sign = "c"``, a reduction tree's level
formats and a narrow scale-exponent sum).

Each rule takes the spec (any object with :class:`~mxsim.spec.UnitSpec`'s fields) and returns
what is wrong, as the rest of one line, or None; ``UnitSpec`` raises it as a
:class:`~mxsim.spec.SpecError` naming the spec.
"""

from __future__ import annotations

from typing import Any

from .. import formats
from ..errors import MxsimError
from . import widths
from .checks import SpecError, short
from .policies import Reduce, ScaleSumOverflow, Specials, UpcastSpecials, ZeroSign

__all__ = ["SCALE_SUM_BITS", "upcast_problem", "specials_problem", "block_problem",
           "zero_sign_problem", "tree_formats_value", "tree_formats_problem", "tree_levels",
           "scale_sum_problem"]

#: Widths a scale-exponent sum field may have (two's complement bits).
SCALE_SUM_BITS = range(2, 17)


def upcast_problem(spec: Any) -> str | None:
    """upcast holds every A and B value; fold_scales and upcast_specials need it."""
    if spec.upcast is not None:
        try:
            up = formats.get(spec.upcast)
        except MxsimError:
            up = None
        lossless = up is not None and up.kind == "float" and all(
            widths.holds(up, name) for name in (spec.a_format, spec.b_format))
        if not lossless:
            return (f"upcast must be a float format holding every {spec.a_format} and "
                    f"{spec.b_format} value exactly, not {spec.upcast!r}")
        if spec.group is not None:
            return "upcast applies to the products of fused steps, not to GST groups"
    if not isinstance(spec.fold_scales, bool):
        return f"fold_scales must be true or false, not {spec.fold_scales!r}"
    if spec.fold_scales and (spec.upcast is None or spec.scale_format != "e8m0"):
        return ("fold_scales multiplies E8M0 block scales into the operands in the upcast "
                "format: it needs upcast and scale_format e8m0")
    if not isinstance(spec.upcast_specials, UpcastSpecials):
        return (f"upcast_specials must be one of {', '.join(UpcastSpecials)}, not "
                f"{spec.upcast_specials!r}")
    if spec.upcast_specials is not UpcastSpecials.IEEE:
        if spec.upcast is None:
            return "upcast_specials describes the operand upcast: it needs upcast"
        if not all(widths.holds_top_binade(formats.get(spec.upcast), name)
                   for name in (spec.a_format, spec.b_format)):
            return (f"upcast_specials 'finite' reads Inf/NaN codes as numbers up to "
                    f"2**(emax+2); {spec.upcast} cannot hold them (use bf16 or fp32)")
    return None


def specials_problem(spec: Any) -> str | None:
    """A unit without NaN/Inf reads its inputs' codes as numbers it can hold."""
    if spec.specials is not Specials.NONE:
        return None
    if spec.exact or spec.scale_format == "fp32":
        return ("specials none reads element, E8M0/UE4M3 scale and C codes as numbers in a "
                "unit with an instruction k; the exact unit and fp32 scales follow IEEE 754")
    if spec.fold_scales:
        return ("fold_scales reads an E8M0 scale 0xFF as NaN (a bf16-building emulation); "
                "specials none cannot go with it")
    if spec.upcast is not None and not all(
            widths.holds_every_code(formats.get(spec.upcast), name)
            for name in (spec.a_format, spec.b_format)):
        return (f"specials none reads Inf/NaN codes as numbers up to 2**(emax+2); upcast "
                f"{spec.upcast} cannot hold them (use bf16 or fp32)")
    return None


def block_problem(block: int | None) -> str | None:
    """A block-scale block is a power of two from 1 to 65536."""
    if block is not None and not formats.is_scale_block(block):
        return (f"block must be a power of two from 1 to {formats.MAX_SCALE_BLOCK}, not "
                f"{block!r}")
    return None


def zero_sign_problem(spec: Any) -> str | None:
    """``zero_sign = "c"`` is defined where the products' exact sum is what the unit adds: one
    exact fused step (C in it or after it) or a reduction tree, inputs with NaN/Inf, and nothing
    after the instruction but the chain."""
    if spec.zero_sign is not ZeroSign.C:
        return None
    if spec.k is None:
        return ("zero_sign c needs an instruction k (the exact unit, k null, follows IEEE 754 "
                "sum rules)")
    if spec.frac_bits is not None:
        return ("zero_sign c passes C through where the products' exact sum is zero: it needs "
                "exact terms (frac_bits null), not a truncated step")
    if len(spec.steps()) > 1:
        return "zero_sign c needs one fused step per instruction (schedule null or one step)"
    if spec.specials is Specials.NONE:
        return ("zero_sign c passes C's code through, which specials none reads as a number: "
                "it needs specials ieee")
    if spec.promote_every is not None or spec.epilogue is not None:
        return "zero_sign c is defined for units without promote_every or an epilogue"
    return None


def tree_formats_value(value: Any, name: str) -> tuple[str, ...] | None:
    """``tree_formats`` as a tuple of strings (None stays None); SpecError for another type."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)) and len(value) <= 64 \
            and all(isinstance(x, str) for x in value):
        return tuple(value)
    raise SpecError(f"Unit spec {name!r}: tree_formats must be a list of format names (one per "
                    f"tree level) or null, not {short(repr(value))}")


def tree_levels(k: int, group: int) -> int:
    """Levels of the balanced binary tree over k / group terms (k / group a power of two)."""
    return (k // group).bit_length() - 1


def tree_formats_problem(spec: Any) -> tuple[str | None, tuple[str, ...] | None]:
    """(what is wrong or None, the formats' canonical names): one float format with IEEE
    Inf/NaN and 5 to 11 exponent bits per level of a reduction tree, leaves first."""
    names = spec.tree_formats
    if names is None:
        return None, None
    if spec.reduce is not Reduce.TREE:
        return ("tree_formats gives each level of a reduction tree its format: it needs reduce "
                "tree"), None
    levels = tree_levels(spec.k, spec.group)
    if levels == 0:
        return (f"tree_formats must be null when k / group = 1 (k = group = {spec.k}): a lone "
                f"term has no adder level and rounds to acc_format"), None
    if len(names) != levels:
        return (f"tree_formats must name one format per tree level, log2(k / group) = "
                f"log2({spec.k} / {spec.group}) = {levels}, not {len(names)}"), None
    out = []
    for i, name in enumerate(names):
        try:
            fmt = formats.get(name)
        except MxsimError:
            return (f"tree_formats[{i}] must be a format mxsim knows (fp32, bf16, e8m14, "
                    f"e10m11 ...), not {short(repr(name))}"), None
        if fmt.kind != "float" or fmt.specials is not formats.Specials.IEEE \
                or not 5 <= fmt.exp_bits <= 11:
            return (f"tree_formats[{i}] must be a float format with IEEE Inf/NaN and 5 to 11 "
                    f"exponent bits (fp32, bf16, e8m14, e10m11 ...), not {name!r}"), None
        out.append(fmt.name)
    return None, tuple(out)


def scale_sum_problem(spec: Any) -> str | None:
    """A scale-exponent sum field of 2 to 16 bits, for E8M0 scales whose exponents the unit
    adds (not folded into the operands; not the exact unit)."""
    bits = spec.scale_sum_bits
    if bits is None:
        if spec.scale_sum_overflow is not ScaleSumOverflow.WRAP:
            return (f"scale_sum_overflow {spec.scale_sum_overflow.value} needs scale_sum_bits "
                    f"(the field it saturates)")
        return None
    if bits not in SCALE_SUM_BITS:
        return (f"scale_sum_bits must be an integer from {SCALE_SUM_BITS.start} to "
                f"{SCALE_SUM_BITS.stop - 1} or null, not {bits!r}")
    if spec.scale_format != "e8m0":
        return (f"scale_sum_bits holds the sum of two E8M0 scale exponents: it needs "
                f"scale_format e8m0, not {spec.scale_format}")
    if spec.k is None:
        return ("scale_sum_bits models a unit's exponent field; the exact unit (k null) sums "
                "scale exponents exactly")
    if spec.fold_scales:
        return ("scale_sum_bits cannot go with fold_scales, which multiplies each scale into its "
                "operand (no exponent sum is formed)")
    return None
