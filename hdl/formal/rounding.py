"""The one rounding of :class:`hdl.formal.reference.ReferenceDot`: an exact sum
``total * 2**lsb`` rounded to ``acc_format`` by ``acc_rounding``, its overflow handled as the
spec's ``overflow`` says, written as an FP32 code (an FP32-range ``acc_format`` converts to FP32
exactly). Plainly, as :func:`mxsim.engine.reference.values.round_value` reads it: the leading
one gives the exponent, the bits below the format's LSB are dropped and decide the rounding.
"""

from __future__ import annotations

from amaranth import Const, Module, Mux, Signal, signed

from mxsim import formats
from mxsim.formats import Overflow, Rounding
from mxsim.spec import UnitSpec

__all__ = ["EXP", "round_to_fp32"]

#: Bits of a signed exponent in flight (alignment exponents, e_zero up to +-1024 and their
#: differences).
EXP = 14


def round_to_fp32(m: Module, spec: UnitSpec, total, lsb):
    """The FP32 code of ``total * 2**lsb`` rounded once to ``spec.acc_format`` (+0 for 0)."""
    acc = formats.get(spec.acc_format)
    man, W = acc.man_bits, len(total)
    neg = total < 0
    mag = Signal(W, name="round_mag")
    m.d.comb += mag.eq(abs(total))
    lead = Signal(range(W), name="round_lead")
    for n in range(W):                     # the highest set bit wins
        with m.If(mag[n]):
            m.d.comb += lead.eq(n)
    # The value's exponent, floored at the format's least normal one (subnormals).
    exp = Signal(signed(EXP), name="round_exp")
    m.d.comb += exp.eq(Mux(lead + lsb < acc.emin, acc.emin, lead + lsb))
    # q: how many low bits of mag lie below the result's LSB 2**(exp - man).
    q = Signal(signed(EXP), name="round_q")
    m.d.comb += q.eq(exp - man - lsb)
    drop = Signal(range(W + 2), name="round_drop")        # q clamped to [0, W + 1]
    m.d.comb += drop.eq(Mux(q <= 0, 0, Mux(q > W + 1, W + 1, q)))
    lift = Signal(range(man + 2), name="round_lift")      # -q, at most man + 1 (exact)
    m.d.comb += lift.eq(Mux(q < 0, -q, 0))
    kept = Signal(W + man + 2, name="round_kept")
    m.d.comb += kept.eq(Mux(q > 0, mag >> drop, mag << lift))
    low = Signal(W + 1, name="round_low")                 # the dropped bits, as a number
    m.d.comb += low.eq(mag - ((mag >> drop) << drop)[:W + 1])
    below = Signal(range(W + 1), name="round_below")      # drop - 1: the half-unit bit
    m.d.comb += below.eq(Mux(drop == 0, 0, drop - 1))
    half = Signal(W + 2, name="round_half")
    m.d.comb += half.eq(Mux(drop == 0, 0, (Const(1, 1) << below)[:W + 2]))
    up = _round_up(spec.acc_rounding, neg, kept[0], low, half)
    r = Signal(man + 2, name="round_sig")
    m.d.comb += r.eq(kept + up)
    carry = r[man + 1]                      # rounded up to the next binade
    sig = Mux(carry, r >> 1, r)
    e_out = Signal(signed(EXP), name="round_e")
    m.d.comb += e_out.eq(exp + carry)
    normal = sig[man]
    biased = Mux(normal, e_out + 127, 0)[:8]
    frac = (sig[:man] << (23 - man))[:23]
    code = Signal(32, name="round_code")
    m.d.comb += code.eq(Mux(sig == 0, 0, (neg << 31) | (biased << 23) | frac))
    over = e_out > acc.emax
    return Mux(sig == 0, 0, Mux(over, _overflow_code(spec, acc, neg), code))


def _round_up(rounding: Rounding, neg, odd, low, half):
    """Whether the kept significand goes up one unit."""
    inexact = low != 0
    if rounding is Rounding.RZ:
        return 0
    if rounding is Rounding.RNE:
        return (low > half) | ((low == half) & inexact & odd)
    if rounding is Rounding.RNA:
        return inexact & (low >= half)
    if rounding is Rounding.RU:
        return inexact & ~neg
    if rounding is Rounding.RD:
        return inexact & neg
    raise ValueError(f"rounding {rounding.value} is not rendered")


def _overflow_code(spec: UnitSpec, acc: formats.Format, neg):
    """±Inf or ±(acc_format's largest value), as ``spec.overflow`` says for its rounding."""
    top = (254 << 23) | (((1 << acc.man_bits) - 1) << (23 - acc.man_bits))
    inf = 0x7F800000
    r = spec.acc_rounding
    if spec.overflow is Overflow.SATURATE:
        return Mux(neg, top | (1 << 31), top)
    if spec.overflow is Overflow.INF:
        return Mux(neg, inf | (1 << 31), inf)
    # IEEE: toward zero (RZ, RU of a negative, RD of a positive) stops at the largest value.
    if r is Rounding.RZ:
        return Mux(neg, top | (1 << 31), top)
    if r is Rounding.RU:
        return Mux(neg, top | (1 << 31), inf)
    if r is Rounding.RD:
        return Mux(neg, inf | (1 << 31), top)
    return Mux(neg, inf | (1 << 31), inf)
