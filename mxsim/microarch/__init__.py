"""``MicroArch``: how a dot-product unit is built, beside the ``UnitSpec`` of what it computes.

A micro-architecture never changes numerics: the RTL (``hdl``) and the cycle model
(:mod:`mxsim.microarch.cycle`) built from the same ``(spec, microarch)`` give the engine's outputs,
and differ from other micro-architectures only in timing and area.

``lanes``
    Products multiplied, aligned and added per cycle. A K-block takes ``K / lanes`` cycles
    (passes) in the accumulate stage.
``stages``
    Register stages between the accumulator and the output register: 1 (normalise, round and
    pack in one cycle), 2 (a register after the normaliser) or 3 (and one after rounding).

:func:`check_rtl` says, before anything is elaborated, whether a spec is one the RTL generator
builds: single-step truncated fused sums (T-FDPA), optionally with E8M0 or UE4M3 block scales
(ST-FDPA, ``k / block`` scales per operand per instruction) and GST-FDPA groups (lanes a
multiple of the group), FP32 output, and A and B in MX element formats
(:func:`check_rtl_formats`: fp16, bf16 and tf32 operands run in the model only).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import NamedTuple

from .. import formats
from ..errors import MxsimError
from ..formats import ELEMENT_FORMATS, OPERAND_FORMATS, SCALE_BLOCKS
from ..spec import Align, CMode, Product, Reduce, Specials, UnitSpec, ZeroSign, group_sum_bits

__all__ = ["MicroArch", "MicroArchError", "check_rtl", "check_rtl_formats", "RTL_FORMATS",
           "MAX_STAGES", "RTL_EXP_WIDTH", "RTL_MAX_K", "GroupGeometry",
           "group_geometry"]

#: Element formats the RTL decodes: every MX element format (not fp16, bf16 or tf32, which
#: the model computes).
RTL_FORMATS = ELEMENT_FORMATS
MAX_STAGES = 3
#: Signed width of every exponent the RTL carries (element, scale, accumulator, e_zero, and
#: the step's LSB exponent E - frac_bits and the sum's leading-one exponent).
RTL_EXP_WIDTH = 12
#: The widest instruction the RTL generator builds: its input payload carries k elements of A
#: and of B, and k / lanes passes (hardware instructions take k = 16 to 256).
RTL_MAX_K = 256
class GroupGeometry(NamedTuple):
    """Widths of a GST-FDPA group term in the RTL: its magnitude (the exact group sum times
    the scales' significands) has ``mag_bits`` bits, ``man_bits`` of them below the term's
    alignment exponent, and fits ``int_bits`` bits above it. The spec's own bound (a step sum
    of at most 63 bits, ``mxsim.spec.step_sum_bits``) keeps an aligned term, F + int_bits,
    under 63 bits for every grouped spec the engine accepts."""
    mag_bits: int
    man_bits: int
    int_bits: int


def group_geometry(spec: UnitSpec) -> GroupGeometry:
    """The :class:`GroupGeometry` of a grouped spec (``spec.group`` set)."""
    lsb = 0
    for name in (spec.a_format, spec.b_format):
        f = formats.get(name)
        lsb += (f.emin - f.man_bits) if f.kind == "float" else -f.man_bits
    ue4m3 = spec.scale_format == "ue4m3"
    mag = group_sum_bits(spec.a_format, spec.b_format, spec.group) - 1 + (8 if ue4m3 else 0)
    man = -lsb + (6 if ue4m3 else 0)
    return GroupGeometry(mag, man, max(1, mag - man))


def _int_bits(spec: UnitSpec) -> int:
    """Bits of an aligned term above the step's largest exponent (``hdl.stages``'s)."""
    if spec.group is not None:
        return group_geometry(spec).int_bits
    return 2 + (2 if spec.scale_format == "ue4m3" else 0)


class MicroArchError(MxsimError, ValueError):
    """A micro-architecture or spec the RTL generator cannot build (raised before elaboration)."""


@dataclass(frozen=True)
class MicroArch:
    """Lanes and pipeline stages of a dot-product unit (see the module docstring)."""
    lanes: int = 32
    stages: int = 1

    def __post_init__(self) -> None:
        for name in ("lanes", "stages"):
            value = getattr(self, name)
            try:
                value = operator.index(value)
            except TypeError:
                raise MicroArchError(f"{name} must be an integer, not {value!r}") from None
            object.__setattr__(self, name, value)
        if self.lanes < 1:
            raise MicroArchError(f"lanes must be at least 1, not {self.lanes}")
        if not 1 <= self.stages <= MAX_STAGES:
            raise MicroArchError(f"stages must be 1, 2 or 3 (registers after the accumulator), "
                                 f"not {self.stages}")

    def passes(self, spec: UnitSpec) -> int:
        """Cycles a K-block spends in the accumulate stage."""
        return spec.k // self.lanes

    def latency(self, spec: UnitSpec) -> int:
        """Cycles from a block's input handshake to its result on the output (no stalls)."""
        return self.passes(spec) + self.stages + 1

    def interval(self, spec: UnitSpec, chained: bool) -> int:
        """Cycles between accepted blocks: independent ones, or links of one chain in steady
        state (each waits in S0 for the previous result, which it takes as C; a chain's second
        block is still taken ``passes`` cycles after its first)."""
        return self.passes(spec) + (self.stages if chained else 0)


def check_rtl_formats(unit: str, a_format: str | None, b_format: str | None) -> None:
    """Raise MicroArchError unless the RTL decodes A and B of these formats (None: not given,
    nothing to check): the MX element formats; fp16, bf16 and tf32 run in the model only."""
    for name, value in (("a_format", a_format), ("b_format", b_format)):
        if value is None or value in RTL_FORMATS:
            continue
        model = (f"; {value} operands run in the model (`mxsim run`)"
                 if value in OPERAND_FORMATS else "")
        raise MicroArchError(f"Unit {unit!r} cannot be built as RTL: {name} {value!r} is not "
                             f"decoded in RTL: the RTL generator builds MX element formats "
                             f"only ({', '.join(RTL_FORMATS)}){model}")


def check_rtl(spec: UnitSpec, ua: MicroArch | None = None) -> None:
    """Raise MicroArchError unless the RTL generator builds ``spec`` with ``ua``."""
    def fail(msg: str) -> MicroArchError:
        return MicroArchError(f"Unit {spec.name!r} cannot be built as RTL: {msg}")

    check_rtl_formats(spec.name, spec.a_format, spec.b_format)
    if spec.reduce is not Reduce.CHAIN:
        raise fail("the RTL builds fused steps, not a reduction tree of rounding adders "
                   "(reduce tree)")
    if spec.k is None or spec.frac_bits is None:
        raise fail("the RTL builds truncated fused sums; the exact unit (k or frac_bits null) "
                   "has no fixed width")
    if spec.k > RTL_MAX_K:
        raise fail(f"k must be at most {RTL_MAX_K} for RTL, not {spec.k}")
    # Exponents in flight: e_zero is the step's E when a zero term leads; the LSB exponent
    # E - F and the sum's leading one (E + the sum's integer bits) must fit RTL_EXP_WIDTH bits,
    # signed. Non-zero terms lie within [-300, 300] (E8M0 scales, FP32 C).
    terms = spec.k if spec.group is None else spec.k // spec.group
    int_bits = _int_bits(spec) + 2 + (terms + 1).bit_length()
    lo, hi = -(1 << (RTL_EXP_WIDTH - 1)) + spec.frac_bits, (1 << (RTL_EXP_WIDTH - 1)) - 1 - int_bits
    if not lo <= spec.e_zero <= hi:
        raise fail(f"e_zero must be between {lo} and {hi} for the RTL's {RTL_EXP_WIDTH}-bit "
                   f"exponents, not {spec.e_zero}")
    if spec.schedule is not None and len(spec.steps()) > 1:
        raise fail(f"the RTL builds one fused step per instruction, not {len(spec.steps())} "
                   f"(schedule)")
    if spec.scale_format not in (None, "e8m0", "ue4m3"):
        raise fail(f"the RTL takes E8M0 or UE4M3 block scales or none, not "
                   f"{spec.scale_format}")
    unsupported = [
        (spec.upcast is not None, "an operand upcast (upcast)"),
        (spec.align is not Align.RZ, f"align {spec.align.value} (the RTL truncates: rz)"),
        # A GST group term's exponent is its scales' whatever `product` says.
        (spec.product is not Product.RAW and spec.group is None,
         "normalised product exponents (product)"),
        (spec.c_mode is not CMode.STEP, "C added after the step (c_mode after)"),
        (spec.acc_rounding.value not in ("rz", "rne"), f"acc_rounding "
                                                       f"{spec.acc_rounding.value}"),
        (spec.d_format != "fp32", f"d_format {spec.d_format} (the RTL outputs FP32)"),
        (not (spec.acc_format == "fp32" or spec.acc_format.startswith("e8m")),
         f"acc_format {spec.acc_format} (FP32 or E8Mn)"),
        (spec.zero_sign is not ZeroSign.POSITIVE, "IEEE zero signs (zero_sign)"),
        (spec.specials is not Specials.IEEE, "inputs without NaN/Inf (specials none)"),
        (spec.promote_every is not None, "promotion (promote_every)"),
        (spec.epilogue is not None, "FP32-scale epilogues"),
        (spec.nan_code is not None and spec.nan_code != 0x7FFFFFFF, "a NaN code other than "
                                                                   "0x7FFFFFFF"),
        (spec.scale_sum_bits is not None, "a narrow scale-exponent sum (scale_sum_bits)"),
        (spec.block not in (None, *SCALE_BLOCKS), f"block {spec.block} (the RTL takes blocks "
                                                  f"of 8, 16 or 32)"),
    ]
    for bad, what in unsupported:
        if bad:
            raise fail(f"{what} is not supported")
    if ua is None:
        return
    if spec.k % ua.lanes:
        divisors = ", ".join(str(d) for d in range(1, spec.k + 1) if spec.k % d == 0)
        raise MicroArchError(f"lanes ({ua.lanes}) must divide the instruction k ({spec.k}) of "
                             f"unit {spec.name!r}: try one of {divisors}")
    if spec.group is not None and ua.lanes % spec.group:
        fits = ", ".join(str(d) for d in range(spec.group, spec.k + 1, spec.group)
                         if spec.k % d == 0)
        raise MicroArchError(f"lanes ({ua.lanes}) must be a multiple of the group "
                             f"({spec.group}) of unit {spec.name!r}, so that a pass sums whole "
                             f"groups: try one of {fits}")
