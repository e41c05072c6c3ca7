"""Single-fault mutants of the RTL, built from outside it: one subclass per fault.

A mutant is a subclass of :class:`hdl.unit.DotProductUnit` in which one small, named method of
one stage (:mod:`hdl.stages`) or of one block inside it (:mod:`hdl.blocks`) is overridden by a
wrong one; the stage or block reaches the unit through the class attributes that name each
part (``DotProductUnit.accumulate``, ``Accumulate.aligner``, ``Multiplier.a_decoder``...).
The production RTL has no knowledge of them. :data:`FAULTS` names each mutant and says what
it breaks; :func:`unit` builds one, :func:`verilog_text` writes its Verilog with a
``// MUTANT`` header line.
"""

from __future__ import annotations

from amaranth import Const, Mux, Signal

from hdl.blocks import (
    FP32_EMAX,
    AdderTree,
    Aligner,
    Decoder,
    MaxTree,
    Multiplier,
    Normaliser,
    Packer,
    Rounder,
)
from hdl.stages import Accumulate, BlockStage, ExponentMax, PostPipeline
from hdl.unit import DotProductUnit
from mxsim.microarch import MicroArch
from mxsim.spec import UnitSpec

from .group_faults import GROUP_FAULTS, GROUP_UNITS

__all__ = ["FAULTS", "unit_class", "unit", "verilog_text"]

#: fault -> where it is and what it breaks
FAULTS: dict[str, str] = {
    "decode-subnormal-exp": "decoder: subnormal exponent 0 - bias instead of 1 - bias",
    "decode-nan-missed": "decoder: the E4M3 NaN code (finite-and-NaN formats) read as a number",
    "decode-sign-dropped": "decoder: A's sign bit ignored",
    "mul-scale-bias": "multiplier: scale exponents biased by 253 instead of 254",
    "mul-scale-sig-dropped": "multiplier: a UE4M3 scale's significand left out of the product "
                             "(its exponent kept; UE4M3-scaled units only)",
    "mul-inf-zero-not-nan": "multiplier: Inf x 0 is not NaN",
    "mul-zero-exp": "multiplier: zero products keep e_a + e_b instead of e_zero",
    "max-tree-node": "max tree: one comparator (level 1, node 1) picks the smaller exponent",
    "max-tree-drops-c": "max tree: C's exponent left out of the maximum",
    "align-drops-lsb": "aligner: the last kept bit (2**(E-F)) truncated away too",
    "align-rounds": "aligner: rounds the cut bits (half up) instead of truncating",
    "align-c-sign": "C aligner: C's sign ignored",
    "adder-carry-dropped": "adder tree: the first level one bit too narrow (carry lost)",
    "acc-not-cleared": "accumulator: not cleared at a block's first pass",
    "c-every-pass": "accumulator: C added in every pass, not only the first",
    "norm-lead-off-by-one": "normaliser: leading-one detector one low at one bit position",
    "norm-sticky-dropped": "normaliser: sticky bit forced to 0",
    "norm-subnormal-shift": "normaliser: subnormal results shifted one place too far",
    "round-up-on-guard": "rounder: rounds up on the guard bit alone (ties away; RZ rounds)",
    "round-carry-lost": "rounder: a carry out of the significand does not bump the exponent",
    "pack-overflow-missed": "packer: overflow detected one binade late",
    "pack-nan-code": "packer: NaN as 0x7FC00000 instead of 0x7FFFFFFF",
    "pack-inf-sign": "packer: -Inf given as +Inf",
    "ready-ignores-stall": "handshake: i.ready high on a block's last pass even when stalled "
                           "(one cycle early under back-pressure)",
    "chain-no-wait": "handshake: a chained block does not wait for its C (stale feedback)",
    "stall-ignored": "handshake: the pipeline advances while o.valid waits for o.ready",
    "out-valid-stuck": "handshake: o.valid not cleared when the result is taken",
    "first-ignored": "control: C read from the feedback register even on first blocks",
    "last-ignored": "control: every block's result leaves on o, not only last blocks",
}


# -- the wrong methods, one class each ----------------------------------------------------------

class _SubnormalExpZero(Decoder):
    def subnormal_exp(self):
        return 0


class _FnNanMissed(Decoder):
    def fn_nan(self, mag):
        return 0


class _SignDropped(Decoder):
    def sign(self, code):
        return 0


class _ScaleBias253(Multiplier):
    def e8m0_bias(self):
        return 253


class _ScaleSigDropped(Multiplier):
    def scaled_sig(self, sig, sa_sig, sb_sig):
        return sig


class _InfZeroNotNan(Multiplier):
    def invalid(self, inf, zero_factor):
        return 0


class _ZeroKeepsExp(Multiplier):
    def product_exp(self, exp, zero):
        return exp


class _NodeInverted(MaxTree):
    def pick(self, depth, j, x, y):
        pick = super().pick(depth, j, x, y)
        return ~pick if depth == 1 and j == 1 else pick


class _CDroppedFromMax(ExponentMax):
    def c_exp(self, c):
        return self.spec.e_zero


class _AlignDropsLsb(Aligner):
    def cut(self, m, x, d):
        return super().cut(m, x, d) & ~1


class _AlignRounds(Aligner):
    def cut(self, m, x, d):
        half = Signal(self.q_bits + 1)              # the first bit cut off
        m.d.comb += half.eq(Mux((d >= 1) & (d <= len(x)),
                                ((x << 1) >> d[:self.shift_bits]) & 1, 0))
        return super().cut(m, x, d) + half


class _CSignDropped(Accumulate):
    def c_sign(self, c):
        return 0


class _CarryDropped(AdderTree):
    def sum_width(self, depth):
        return super().sum_width(depth) - 1


class _NotCleared(Accumulate):
    def acc_in(self, acc, p):
        return acc


class _CEveryPass(Accumulate):
    def c_joins(self, p):
        return 1


class _LeadOffByOne(Normaliser):
    def lead_index(self, j):
        return j - 1 if j == self.sum_bits - 4 else j


class _StickyDropped(Normaliser):
    def sticky(self, r, shifted, low):
        return 0


class _SubnormalShiftOff(Normaliser):
    def subnormal_shift(self, lsb):
        return super().subnormal_shift(lsb) + 1


class _UpOnGuard(Rounder):
    def round_up(self, i):
        return i.guard


class _CarryLost(Rounder):
    def carry(self, s):
        return 0


class _OverflowLate(Packer):
    def overflows(self, exp):
        return exp > FP32_EMAX + 1


class _NanCode7FC(Packer):
    def nan_code(self):
        return 0x7FC00000


class _NegInfPositive(Packer):
    def neg_inf_code(self):
        return 0x7F800000


class _ReadyIgnoresStall(BlockStage):
    def ready(self, valid, last_pass, done):
        return ~valid | (valid & last_pass)


class _ChainNoWait(BlockStage):
    def may_start(self, block, busy):
        return 1


class _FirstIgnored(BlockStage):
    def c_code(self, block, feedback):
        return feedback


class _StallIgnored(PostPipeline):
    def stalled(self, out_valid):
        return 0


class _OutValidStuck(PostPipeline):
    def taken(self):
        return Const(0)


class _LastIgnored(PostPipeline):
    def leaves(self, f):
        return 1


# -- where each goes -------------------------------------------------------------------------

def _sub(base: type, **parts) -> type:
    """A subclass of ``base`` with the part classes ``parts`` named instead of its own."""
    return type(base.__name__, (base,), parts)


def _with_multiplier(mul: type[Multiplier]) -> type[DotProductUnit]:
    """The unit with every multiplier (the exponent stage's and the lanes') a ``mul``."""
    return _sub(DotProductUnit, exponent_max=_sub(ExponentMax, multiplier=mul),
                accumulate=_sub(Accumulate, multiplier=mul))


def _with_decoders(a: type[Decoder], b: type[Decoder]) -> type[DotProductUnit]:
    """The unit whose multipliers decode A's codes with ``a`` and B's with ``b``."""
    return _with_multiplier(_sub(Multiplier, a_decoder=a, b_decoder=b))


_UNITS: dict[str, type[DotProductUnit]] = {
    "decode-subnormal-exp": _with_decoders(_SubnormalExpZero, _SubnormalExpZero),
    "decode-nan-missed": _with_decoders(_FnNanMissed, _FnNanMissed),
    "decode-sign-dropped": _with_decoders(_SignDropped, Decoder),
    "mul-scale-bias": _with_multiplier(_ScaleBias253),
    "mul-scale-sig-dropped": _with_multiplier(_ScaleSigDropped),
    "mul-inf-zero-not-nan": _with_multiplier(_InfZeroNotNan),
    "mul-zero-exp": _with_multiplier(_ZeroKeepsExp),
    "max-tree-node": _sub(DotProductUnit, exponent_max=_sub(ExponentMax, max_tree=_NodeInverted)),
    "max-tree-drops-c": _sub(DotProductUnit, exponent_max=_CDroppedFromMax),
    "align-drops-lsb": _sub(DotProductUnit, accumulate=_sub(Accumulate, aligner=_AlignDropsLsb)),
    "align-rounds": _sub(DotProductUnit, accumulate=_sub(Accumulate, aligner=_AlignRounds)),
    "align-c-sign": _sub(DotProductUnit, accumulate=_CSignDropped),
    "adder-carry-dropped": _sub(DotProductUnit,
                                accumulate=_sub(Accumulate, adder_tree=_CarryDropped)),
    "acc-not-cleared": _sub(DotProductUnit, accumulate=_NotCleared),
    "c-every-pass": _sub(DotProductUnit, accumulate=_CEveryPass),
    "norm-lead-off-by-one": _sub(DotProductUnit,
                                 post_pipeline=_sub(PostPipeline, normaliser=_LeadOffByOne)),
    "norm-sticky-dropped": _sub(DotProductUnit,
                                post_pipeline=_sub(PostPipeline, normaliser=_StickyDropped)),
    "norm-subnormal-shift": _sub(DotProductUnit,
                                 post_pipeline=_sub(PostPipeline, normaliser=_SubnormalShiftOff)),
    "round-up-on-guard": _sub(DotProductUnit, post_pipeline=_sub(PostPipeline, rounder=_UpOnGuard)),
    "round-carry-lost": _sub(DotProductUnit, post_pipeline=_sub(PostPipeline, rounder=_CarryLost)),
    "pack-overflow-missed": _sub(DotProductUnit,
                                 post_pipeline=_sub(PostPipeline, packer=_OverflowLate)),
    "pack-nan-code": _sub(DotProductUnit, post_pipeline=_sub(PostPipeline, packer=_NanCode7FC)),
    "pack-inf-sign": _sub(DotProductUnit,
                          post_pipeline=_sub(PostPipeline, packer=_NegInfPositive)),
    "ready-ignores-stall": _sub(DotProductUnit, block_stage=_ReadyIgnoresStall),
    "chain-no-wait": _sub(DotProductUnit, block_stage=_ChainNoWait),
    "stall-ignored": _sub(DotProductUnit, post_pipeline=_StallIgnored),
    "out-valid-stuck": _sub(DotProductUnit, post_pipeline=_OutValidStuck),
    "first-ignored": _sub(DotProductUnit, block_stage=_FirstIgnored),
    "last-ignored": _sub(DotProductUnit, post_pipeline=_LastIgnored),
}
assert _UNITS.keys() == FAULTS.keys()


def unit_class(fault: str) -> type[DotProductUnit]:
    """The ``DotProductUnit`` subclass of mutant ``fault`` (a key of :data:`FAULTS`, or of
    :data:`testbenches.unit.group_faults.GROUP_FAULTS` for grouped units)."""
    if fault in GROUP_UNITS:
        return GROUP_UNITS[fault]
    if fault not in _UNITS:
        raise ValueError(f"Fault must be one of {', '.join([*FAULTS, *GROUP_FAULTS])}, not "
                         f"{fault!r}")
    return _UNITS[fault]


def unit(fault: str, spec: UnitSpec, microarch: MicroArch) -> DotProductUnit:
    """Mutant ``fault`` of the unit of ``spec``, built as ``microarch`` says."""
    return unit_class(fault)(spec, microarch)


def verilog_text(spec: UnitSpec, microarch: MicroArch, fault: str | None = None) -> str:
    """The Verilog of the unit (``fault`` None) or of mutant ``fault``, whose first line says
    so (``// MUTANT: injected fault 'NAME'``)."""
    from hdl.verilog import generate
    if fault is None:
        return generate(spec, microarch)
    return (f"// MUTANT: injected fault {fault!r}\n"
            + generate(spec, microarch, unit=unit_class(fault)))
