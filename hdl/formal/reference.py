"""``ReferenceDot``: one instruction of a unit spec as a plain combinational circuit.

This is the second construction a proof compares the datapath of :mod:`hdl.unit` with. It is
drawn from the spec alone, the way :mod:`mxsim.engine.reference` reads it, and shares nothing
with :mod:`hdl.stages` or :mod:`hdl.blocks` but the input beat's layout:

1. every element and scale code is decoded by a table written from :mod:`mxsim.formats` (sign,
   exponent, integer significand, NaN, Inf); C, an FP32 code, by its bit fields;
2. each term (a product times its block scales, or a GST group's exact sum times its scales:
   the group's products added in adjacent pairs, level by level, at full width) is an exact
   integer ``mag * 2**(e - M)`` with its alignment exponent ``e`` (``e_zero`` when
   it is zero) and a constant ``M``;
3. ``E`` is the largest alignment exponent; each term is truncated toward zero to whole units of
   ``2**(E - F)``: ``(mag << F) >> (E - e + M)``, one right shift;
4. the truncated terms are summed exactly, one after another, at a width no sum can overflow;
5. the sum is rounded once to ``acc_format`` (:mod:`.rounding`) and written as an FP32 code,
   NaN and Inf first (IEEE: NaN wins, +Inf + -Inf is NaN).

It renders the specs the RTL generator builds (``mxsim.microarch.check_rtl``): one fused step
per instruction, ``align rz``, raw products or GST groups, C in the step, E8M0 or UE4M3 scales
or none. :func:`reference_problem` names what it does not render.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from amaranth import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.stages import block_layout
from mxsim import formats
from mxsim.spec import Align, CMode, Product, Reduce, Specials, UnitSpec, ZeroSign

from .rounding import EXP, round_to_fp32

__all__ = ["ReferenceDot", "reference_problem", "reference_parts", "Parts", "Term"]


def reference_problem(spec: UnitSpec) -> str | None:
    """Why :class:`ReferenceDot` does not render ``spec`` (None: it does)."""
    acc = formats.get(spec.acc_format)
    checks = [
        (spec.k is None or spec.frac_bits is None, "an exact unit (k or frac_bits null)"),
        (spec.reduce is not Reduce.CHAIN, f"reduce {spec.reduce.value}"),
        (spec.schedule is not None and len(spec.steps()) > 1, "a schedule of several steps"),
        (spec.align is not Align.RZ, f"align {spec.align.value}"),
        (spec.product is not Product.RAW and spec.group is None,
         f"product {spec.product.value}"),
        (spec.upcast is not None, "an operand upcast"),
        (spec.c_mode is not CMode.STEP, f"c_mode {spec.c_mode.value}"),
        (spec.specials is not Specials.IEEE, f"specials {spec.specials.value}"),
        (spec.zero_sign is not ZeroSign.POSITIVE, f"zero_sign {spec.zero_sign.value}"),
        (spec.d_format != "fp32", f"d_format {spec.d_format}"),
        (not (acc.kind == "float" and acc.emin == -126 and acc.emax == 127
              and acc.man_bits <= 23), f"acc_format {spec.acc_format}"),
        (spec.scale_format not in (None, "e8m0", "ue4m3"), f"scale_format {spec.scale_format}"),
        (spec.scale_sum_bits is not None, "scale_sum_bits"),
        (spec.promote_every is not None, "promote_every"),
        (spec.epilogue is not None, "an epilogue"),
        (spec.acc_rounding.value not in ("rz", "rne", "rna", "ru", "rd"),
         f"acc_rounding {spec.acc_rounding.value}"),
    ]
    bad = [what for cond, what in checks if cond]
    return None if not bad else f"the reference circuit does not render {', '.join(bad)}"


@dataclass(frozen=True)
class Term:
    """One term of a step: ``(-1)**neg * mag * 2**(e - M)``, or NaN / signed Inf."""
    neg: object
    mag: object          # unsigned Value
    e: object            # signed alignment exponent (e_zero for a zero term)
    M: int               # constant: the term's LSB exponent is e - M
    nan: object
    inf: object
    #: A GST group's products, signed, in units of the formats' smallest steps.
    members: tuple = ()


class ReferenceDot(wiring.Component):
    """D of one instruction of ``spec`` from one input beat (``first``/``last`` ignored).

    Members: ``i`` (in, ``block_layout(spec)``: the beat's codes and C), ``d`` (out, the FP32
    code of D). Raises ValueError for a spec :func:`reference_problem` refuses.
    """

    def __init__(self, spec: UnitSpec):
        problem = reference_problem(spec)
        if problem:
            raise ValueError(f"Unit {spec.name!r}: {problem}; `mxsim prove` covers the specs "
                             f"the RTL generator builds (docs/formal.md)")
        self._spec = spec
        super().__init__({"i": In(block_layout(spec)), "d": Out(32)})

    @property
    def spec(self) -> UnitSpec:
        return self._spec

    def elaborate(self, platform):
        m = Module()
        parts = reference_parts(m, self._spec, self.i)
        m.d.comb += self.d.eq(parts.d)
        return m


@dataclass(frozen=True)
class Parts:
    """The reference's signals on the way to D, for proofs that cut the datapath: each term
    truncated into the step's window (``cut``, signed, C last), their alignment exponents
    (``exps``), the terms themselves (``terms``) and the largest ``E``, the exact sum of the
    cut terms ``total`` (in units of ``2**lsb``, ``lsb = E - F``), the step's NaN and Inf
    (and Inf's sign), and D's code."""
    cut: list
    exps: list
    terms: list
    E: object
    total: object
    lsb: object
    nan: object
    inf: object
    neg: object
    d: object


def reference_parts(m: Module, spec: UnitSpec, beat, e_max=None) -> Parts:
    """Build the reference for ``beat`` (a ``block_layout(spec)`` value) into ``m``.
    ``e_max`` (a proof's cut): truncate the terms at this exponent instead of their own
    largest one (``Parts.E`` is still theirs)."""
    terms = (group_terms(m, spec, beat) if spec.group is not None
             else product_terms(m, spec, beat))
    terms.append(c_term(m, spec, beat.c))
    big = largest(m, terms)
    cut, total, lsb = step_sum(m, spec, terms, big if e_max is None else e_max)
    nan, inf, neg = sum_specials(m, terms)
    d = Signal(32, name="ref_d")
    finite = round_to_fp32(m, spec, total, lsb)
    m.d.comb += d.eq(Mux(nan, spec.d_nan, Mux(inf, Mux(neg, 0xFF800000, 0x7F800000), finite)))
    return Parts(cut=cut, exps=[t.e for t in terms], terms=terms, E=big, total=total,
                 lsb=lsb, nan=nan, inf=inf, neg=neg, d=d)


# -- decoding ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Decoded:
    """An element or scale code read by its format's table."""
    neg: object
    e: object
    sig: object
    nan: object
    inf: object


def _table(m: Module, name: str, code, values, shape) -> Signal:
    out = Signal(shape, name=name)
    with m.Switch(code):
        for c, v in enumerate(values):
            if v:
                with m.Case(c):
                    m.d.comb += out.eq(int(v))
    return out


def decode(m: Module, fmt: formats.Format, code, name: str) -> Decoded:
    """``code`` read by ``fmt``: a table per field, written from :mod:`mxsim.formats`."""
    codes = np.arange(1 << fmt.bits).astype(fmt.code_dtype)
    sign, e, sig = (np.asarray(x).astype(np.int64) for x in fmt.fields(codes))
    value = fmt.decode(codes)
    return Decoded(
        neg=_table(m, f"{name}_neg", code, sign, 1),
        e=_table(m, f"{name}_e", code, e, signed(EXP)),
        sig=_table(m, f"{name}_sig", code, sig, unsigned(int(sig.max()).bit_length())),
        nan=_table(m, f"{name}_nan", code, np.isnan(value), 1),
        inf=_table(m, f"{name}_inf", code, np.isinf(value), 1))


def _scales(m: Module, spec: UnitSpec, beat, j: int) -> Decoded | None:
    """The product of block ``j``'s two scales: NaN if either is, sign ignored (None: the
    spec has no scales)."""
    if spec.scale_format is None:
        return None
    fs = formats.get(spec.scale_format)
    one = spec.k // spec.block == 1
    codes = (beat.a_scale, beat.b_scale) if one else (beat.a_scale[j], beat.b_scale[j])
    sa, sb = (decode(m, fs, code & fs.value_mask, f"{who}_scale{j}")
              for who, code in zip("ab", codes, strict=True))
    return Decoded(neg=Const(0), e=sa.e + sb.e, sig=sa.sig * sb.sig, nan=sa.nan | sb.nan,
                   inf=Const(0))


# -- terms ------------------------------------------------------------------------------------

def product_terms(m: Module, spec: UnitSpec, beat) -> list[Term]:
    """Each product a[i] * b[i] times its block's scales: exact, with e_a + e_b + the scale
    exponents as its alignment exponent (e_zero when it is zero)."""
    fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)
    fs = formats.get(spec.scale_format) if spec.scale_format else None
    M = fa.man_bits + fb.man_bits + (2 * fs.man_bits if fs else 0)
    terms, scales = [], {}
    for i in range(spec.k):
        a = decode(m, fa, beat.a[i], f"a{i}")
        b = decode(m, fb, beat.b[i], f"b{i}")
        if fs and i // spec.block not in scales:
            scales[i // spec.block] = _scales(m, spec, beat, i // spec.block)
        s = scales[i // spec.block] if fs else None
        mag = Signal(range(_max_sig(fa) * _max_sig(fb) * (_max_sig(fs) ** 2 if fs else 1) + 1),
                     name=f"p{i}_mag")
        m.d.comb += mag.eq(a.sig * b.sig * (s.sig if s is not None else 1))
        zero = mag == 0
        exp = a.e + b.e + (s.e if s is not None else 0)
        e = Signal(signed(EXP), name=f"p{i}_e")
        m.d.comb += e.eq(Mux(zero, spec.e_zero, exp))
        snan = s.nan if s is not None else Const(0)
        inf = a.inf | b.inf
        # Inf times a zero (an element or a UE4M3 scale of 0) is NaN.
        zero_factor = ((a.sig == 0) & ~a.inf & ~a.nan) | ((b.sig == 0) & ~b.inf & ~b.nan) | (
            (s.sig == 0) if s is not None else Const(0))
        nan = a.nan | b.nan | snan | (inf & zero_factor)
        terms.append(Term(neg=a.neg ^ b.neg, mag=mag, e=e, M=M, nan=nan, inf=inf & ~nan))
    return terms


def group_terms(m: Module, spec: UnitSpec, beat) -> list[Term]:
    """Each GST group of ``spec.group`` products: their exact sum times the group's scales,
    aligned at the scales' exponent sum (e_zero when every product or the scale is zero)."""
    fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)
    fs = formats.get(spec.scale_format)
    # A product sig_a * sig_b * 2**(e_a - m_a + e_b - m_b) in units of the least one.
    span_a, span_b = _e_span(fa), _e_span(fb)
    unit = fa.emin - fa.man_bits + fb.emin - fb.man_bits
    M = 2 * fs.man_bits - unit
    width = (_max_sig(fa) * _max_sig(fb)).bit_length() + span_a + span_b \
        + spec.group.bit_length() + 1
    terms = []
    for g0 in range(0, spec.k, spec.group):
        parts, members = [], []
        for i in range(g0, g0 + spec.group):
            a = decode(m, fa, beat.a[i], f"a{i}")
            b = decode(m, fb, beat.b[i], f"b{i}")
            up = Signal(range(span_a + span_b + 1), name=f"p{i}_up")
            m.d.comb += up.eq((a.e - fa.emin) + (b.e - fb.emin))
            units = Signal(signed(width), name=f"p{i}_units")
            m.d.comb += units.eq(Mux(a.neg ^ b.neg, -((a.sig * b.sig) << up),
                                     (a.sig * b.sig) << up))
            zero_factor = ((a.sig == 0) & ~a.inf & ~a.nan) | ((b.sig == 0) & ~b.inf & ~b.nan)
            inf = a.inf | b.inf
            members.append((a.nan | b.nan | (inf & zero_factor), inf & ~(a.nan | b.nan),
                            a.neg ^ b.neg, a.sig * b.sig == 0))
            parts.append(units)
        total = Signal(signed(width), name=f"g{g0}_sum")
        m.d.comb += total.eq(_pair_sum(parts, width))
        s = _scales(m, spec, beat, g0 // spec.block)
        terms.append(replace(_group_term(m, spec, g0, total, members, s, M),
                             members=tuple(parts)))
    return terms


def _group_term(m: Module, spec: UnitSpec, g0: int, total, members, s: Decoded, M: int
                ) -> Term:
    nan_in = _any(x[0] for x in members)
    pos_inf = _any(x[1] & ~x[2] for x in members)
    neg_inf = _any(x[1] & x[2] for x in members)
    special_nan = nan_in | (pos_inf & neg_inf)
    special_inf = (pos_inf | neg_inf) & ~special_nan
    scale_zero = s.sig == 0
    nan = special_nan | s.nan | (special_inf & scale_zero)
    all_zero = _all(x[3] & ~x[1] & ~x[0] for x in members)
    e = Signal(signed(EXP), name=f"g{g0}_e")
    m.d.comb += e.eq(Mux(all_zero | scale_zero, spec.e_zero, s.e))
    mag = Signal(len(total) + len(s.sig), name=f"g{g0}_mag")
    m.d.comb += mag.eq(abs(total) * s.sig)
    return Term(neg=Mux(special_inf, neg_inf, total < 0), mag=mag, e=e, M=M, nan=nan,
                inf=special_inf & ~nan)


def c_term(m: Module, spec: UnitSpec, c) -> Term:
    """C, an FP32 code, by its fields: aligned at its exponent (the least normal one for a
    subnormal; e_zero for a zero)."""
    biased, frac = c[23:31], c[:23]
    mag = Signal(24, name="c_mag")
    m.d.comb += mag.eq(Mux(biased == 0, frac, frac | (1 << 23)))
    e = Signal(signed(EXP), name="c_e")
    m.d.comb += e.eq(Mux(mag == 0, spec.e_zero, Mux(biased == 0, -126, biased - 127)))
    top = biased == 0xFF
    return Term(neg=c[31], mag=mag, e=e, M=23, nan=top & (frac != 0), inf=top & (frac == 0))


# -- the step -----------------------------------------------------------------------------------

def largest(m: Module, terms: list[Term]):
    """E, the largest alignment exponent of the step, one comparison after another."""
    top = terms[0].e
    for n, t in enumerate(terms[1:], 1):   # a signal per step: each is read twice
        step = Signal(signed(EXP), name=f"E{n}")
        m.d.comb += step.eq(Mux(t.e > top, t.e, top))
        top = step
    return top


def step_sum(m: Module, spec: UnitSpec, terms: list[Term], big):
    """Each term truncated into the window below ``big`` (signed; 0 for NaN and Inf), their
    exact sum, and the exponent of its LSB, ``big - F``."""
    F = spec.frac_bits
    cut = []
    for n, t in enumerate(terms):
        pad = max(0, -t.M)                 # keeps every right shift non-negative
        wide = t.mag << (F + pad)
        gap = Signal(EXP, name=f"t{n}_gap")    # E - e >= 0
        m.d.comb += gap.eq(big - t.e + t.M + pad)
        kept = Signal(len(wide), name=f"t{n}_kept")
        m.d.comb += kept.eq(Mux(t.nan | t.inf, 0, wide >> gap))
        signed_kept = Signal(signed(len(wide) + 1), name=f"t{n}_cut")
        m.d.comb += signed_kept.eq(Mux(t.neg, -kept, kept))
        cut.append(signed_kept)
    width = max(len(c) for c in cut) + len(terms).bit_length() + 2
    total = Signal(signed(width), name="sum")
    m.d.comb += total.eq(_chain_sum(cut, width))
    lsb = Signal(signed(EXP), name="sum_lsb")
    m.d.comb += lsb.eq(big - F)
    return cut, total, lsb


def sum_specials(m: Module, terms: list[Term]):
    """(NaN, Inf, Inf's sign) of the step: NaN wins, +Inf + -Inf is NaN."""
    pos = _any(t.inf & ~t.neg for t in terms)
    neg = _any(t.inf & t.neg for t in terms)
    nan = _any(t.nan for t in terms) | (pos & neg)
    return nan, (pos | neg) & ~nan, neg


def _pair_sum(parts, width: int):
    """The parts added in adjacent pairs, level by level (an odd one out passes up), each sum
    at ``width`` bits: exact, as the chain is; solvers match this order to a balanced adder
    tree's where they cannot prove a chain equal to it."""
    level = [p.as_signed() if len(p) < width else p for p in parts]
    while len(level) > 1:
        nxt = [(level[j] + level[j + 1])[:width].as_signed() for j in range(0, len(level) - 1, 2)]
        level = nxt + ([level[-1]] if len(level) % 2 else [])
    return level[0]


def _chain_sum(parts, width: int):
    """The parts added one after another (not a tree), each sum at ``width`` bits."""
    acc = parts[0].as_signed() if len(parts[0]) < width else parts[0]
    for p in parts[1:]:
        acc = (acc + p)[:width].as_signed()
    return acc


def _any(values):
    out = Const(0)
    for v in values:
        out = out | v
    return out


def _all(values):
    out = Const(1)
    for v in values:
        out = out & v
    return out


def _max_sig(fmt: formats.Format) -> int:
    codes = np.arange(1 << fmt.bits).astype(fmt.code_dtype)
    return int(np.asarray(fmt.fields(codes)[2]).max())


def _e_span(fmt: formats.Format) -> int:
    codes = np.arange(1 << fmt.bits).astype(fmt.code_dtype)
    e = np.asarray(fmt.fields(codes)[1]).astype(np.int64)
    return int(e.max() - e.min())


