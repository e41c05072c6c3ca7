"""GST-FDPA: the grouped datapath of :class:`hdl.unit.DotProductUnit` (``spec.group`` set).

A grouped unit (Blackwell's ``kind::mxf4`` / ``kind::mxf4nvf4``: K = 64, groups of 16) sums
each run of G products exactly, in fixed point, before anything is aligned; the group's sum
times its scales' significands is one term, whose alignment exponent is the sum of the group's
two scale exponents (``e_zero`` when every product of the group is zero or a scale is zero; a
group whose non-zero products cancel keeps its scale exponent). The terms and C are then
aligned to ``frac_bits`` below their largest exponent, truncated and added, as the ungrouped
unit adds its products. This is ``mxsim.engine.fast.alignment.step_terms`` bit for bit.

=================  ==========================================================================
``ScaleProduct``   two scale codes -> exponent sum, significand product, zero, NaN
``GroupSum``       G pairs of element codes -> exact signed sum, all-zero, NaN/Inf flags
``GroupTerm``      a group's sum and scales -> sign, magnitude, alignment exponent, flags
=================  ==========================================================================

Two stages replace their ungrouped versions (same ports, so the unit joins them alike):
``GroupExponentMax`` (the largest alignment exponent over every group term and C) and
``GroupAccumulate`` (each pass takes ``lanes / G`` whole groups; ``check_rtl`` asks lanes to
be a multiple of G). A group's scales are those of its block (``k / block`` scale codes per
operand in the input beat). Decisions are small methods (``GroupTerm.align_exp``...) so that a
subclass can replace one alone.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from mxsim import formats
from mxsim.microarch import MicroArch, group_geometry
from mxsim.spec import UnitSpec, group_sum_bits

from .blocks import EXP_WIDTH, AdderTree, Decoder, clog2, scale_sig_bits, sig_width
from .stages import Accumulate, ExponentMax, any_of, scale_codes, select, sum_bits, term_bits

__all__ = ["ScaleProduct", "GroupSum", "GroupTerm", "GroupExponentMax", "GroupAccumulate",
           "scale_product_layout", "group_term_layout"]


def scale_product_layout(scale_format: str) -> data.StructLayout:
    return data.StructLayout({"exp": signed(EXP_WIDTH),
                              "sig": unsigned(max(1, 2 * scale_sig_bits(scale_format))),
                              "zero": 1, "nan": 1})


class ScaleProduct(wiring.Component):
    """A group's two scale codes: the sum of their exponents, the product of their
    significands (UE4M3: 4 bits each, in units of 2**-3; E8M0: 1), whether one is zero (UE4M3
    0x00/0x80) and whether one is NaN (E8M0 0xFF, UE4M3 0x7F/0xFF; UE4M3's sign bit ignored).

    Members: ``sa``, ``sb`` (in, scale codes), ``o`` (out, :func:`scale_product_layout`).
    Combinational.
    """

    def __init__(self, scale_format: str):
        if scale_format not in ("e8m0", "ue4m3"):
            raise ValueError(f"scale_format must be e8m0 or ue4m3, not {scale_format!r}")
        self._scale = scale_format
        super().__init__({"sa": In(8), "sb": In(8), "o": Out(scale_product_layout(scale_format))})

    def elaborate(self, platform):
        m = Module()
        o = self.o
        if self._scale == "e8m0":
            m.d.comb += [o.exp.eq(self.sa + self.sb - self.e8m0_bias()), o.sig.eq(1),
                         o.zero.eq(0), o.nan.eq((self.sa == 0xFF) | (self.sb == 0xFF))]
            return m
        m.submodules.dsa = dsa = Decoder("ue4m3")
        m.submodules.dsb = dsb = Decoder("ue4m3")
        m.d.comb += [dsa.code.eq(self.sa), dsb.code.eq(self.sb),
                     o.exp.eq(dsa.o.exp + dsb.o.exp), o.sig.eq(dsa.o.sig * dsb.o.sig),
                     o.zero.eq(dsa.o.zero | dsb.o.zero), o.nan.eq(dsa.o.nan | dsb.o.nan)]
        return m

    def e8m0_bias(self) -> int:
        """What the two E8M0 scale fields lose to their biases together: 2 * 127."""
        return 254


def _lsb_shift_range(fmt: formats.Format) -> int:
    """The largest ``exp - emin`` a code's fields give (0 for INT8; NaN/Inf codes included)."""
    if fmt.kind == "int":
        return 0
    top = (1 << fmt.exp_bits) - 1 - fmt.bias
    return max(top, fmt.emax) - fmt.emin


class GroupSum(wiring.Component):
    """The exact sum of G products of A and B codes, in units of ``2**(lsb_a + lsb_b)`` (the
    formats' smallest steps): each product's significand shifted left by its exponents above
    the formats' smallest, signed, added in a tree. Inf and NaN codes count as 0 (the engine's
    significand 0).

    Members: ``a``, ``b`` (in, G codes each), ``sum`` (out, signed, ``group_sum_bits``),
    ``zero`` (every product's significand is 0), ``nan`` (a NaN operand or Inf x 0),
    ``inf`` (an Inf operand), ``pinf``/``ninf`` (an Inf product, not times 0, of that sign).
    Combinational.
    """

    a_decoder: type[Decoder] = Decoder
    b_decoder: type[Decoder] = Decoder
    adder_tree: type[AdderTree] = AdderTree

    def __init__(self, a_format: str, b_format: str, group: int):
        self._a, self._b, self._g = formats.get(a_format), formats.get(b_format), group
        self._bits = group_sum_bits(a_format, b_format, group)
        super().__init__({"a": In(data.ArrayLayout(unsigned(self._a.bits), group)),
                          "b": In(data.ArrayLayout(unsigned(self._b.bits), group)),
                          "sum": Out(signed(self._bits)), "zero": Out(1), "nan": Out(1),
                          "inf": Out(1), "pinf": Out(1), "ninf": Out(1)})

    @property
    def sum_bits(self) -> int:
        return self._bits

    def elaborate(self, platform):
        m = Module()
        fa, fb, g = self._a, self._b, self._g
        ra, rb = _lsb_shift_range(fa), _lsb_shift_range(fb)
        pbits = sig_width(fa) + sig_width(fb) + ra + rb
        m.submodules.adders = adders = self.adder_tree(g, pbits + 1)
        zeros, nans, infs, pinfs, ninfs = [], [], [], [], []
        for j in range(g):
            da, db = self.a_decoder(fa), self.b_decoder(fb)
            m.submodules[f"da{j}"], m.submodules[f"db{j}"] = da, db
            m.d.comb += [da.code.eq(self.a[j]), db.code.eq(self.b[j])]
            x, y = da.o, db.o
            sh = Signal(range(ra + rb + 1), name=f"shift{j}")
            m.d.comb += sh.eq(self.shift(x.exp, fa) + self.shift(y.exp, fb))
            mag = Signal(pbits, name=f"fixed{j}")
            m.d.comb += mag.eq((x.sig * y.sig) << sh)
            sign = x.sign ^ y.sign
            m.d.comb += adders.i[j].eq(Mux(sign, -mag, mag))
            inf = x.inf | y.inf
            inv = inf & (x.zero | y.zero)
            zeros.append((x.sig == 0) | (y.sig == 0))
            nans.append(x.nan | y.nan | inv)
            infs.append(inf)
            pinfs.append(inf & ~inv & ~sign)
            ninfs.append(inf & ~inv & sign)
        m.d.comb += [self.sum.eq(self.total(adders.o)), self.zero.eq(_all(zeros)),
                     self.nan.eq(any_of(nans)), self.inf.eq(any_of(infs)),
                     self.pinf.eq(any_of(pinfs)), self.ninf.eq(any_of(ninfs))]
        return m

    def shift(self, exp, fmt: formats.Format):
        """How far a decoded exponent lies above the format's smallest (0 for INT8)."""
        return 0 if fmt.kind == "int" else (exp - fmt.emin)[:clog2(_lsb_shift_range(fmt) + 1)
                                                             or 1]

    def total(self, tree_sum):
        """The group's sum as it leaves: the adder tree's, exact."""
        return tree_sum


def _all(values):
    out = 1
    for v in values:
        out = out & v
    return out


def group_term_layout(spec: UnitSpec) -> data.StructLayout:
    geo = group_geometry(spec)
    return data.StructLayout({"sign": 1, "mag": unsigned(geo.mag_bits), "exp": signed(EXP_WIDTH),
                              "nan": 1, "pinf": 1, "ninf": 1})


class GroupTerm(wiring.Component):
    """One group term: the exact sum of G products times the group's scale significands, with
    its alignment exponent (the scale exponents' sum, or ``e_zero`` when every product is zero
    or a scale is zero) and its specials (a NaN scale, Inf x a zero scale included).

    ``o.mag`` is in units of ``2**(o.exp - man_bits)`` (:func:`mxsim.microarch.group_geometry`).
    Members: ``a``, ``b`` (in, G codes each), ``sa``, ``sb`` (in, the group's scale codes),
    ``o`` (out, :func:`group_term_layout`). Combinational.
    """

    group_sum: type[GroupSum] = GroupSum
    scale_product: type[ScaleProduct] = ScaleProduct

    def __init__(self, spec: UnitSpec):
        self._spec = spec
        fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)
        super().__init__({"a": In(data.ArrayLayout(unsigned(fa.bits), spec.group)),
                          "b": In(data.ArrayLayout(unsigned(fb.bits), spec.group)),
                          "sa": In(8), "sb": In(8), "o": Out(group_term_layout(spec))})

    def elaborate(self, platform):
        m = Module()
        spec, o = self._spec, self.o
        m.submodules.sum = gs = self.group_sum(spec.a_format, spec.b_format, spec.group)
        m.submodules.scales = sp = self.scale_product(spec.scale_format)
        m.d.comb += [gs.a.eq(self.a), gs.b.eq(self.b), sp.sa.eq(self.sa), sp.sb.eq(self.sb)]
        mag = Signal(gs.sum_bits - 1)
        m.d.comb += mag.eq(Mux(gs.sum < 0, -gs.sum, gs.sum))
        m.d.comb += [
            o.sign.eq(gs.sum < 0),
            o.mag.eq(self.scaled_mag(mag, sp.o.sig)),
            o.exp.eq(self.align_exp(sp.o.exp, self.zero_group(gs, sp.o))),
            o.nan.eq(gs.nan | sp.o.nan | (gs.inf & sp.o.zero)),
            o.pinf.eq(gs.pinf),
            o.ninf.eq(gs.ninf),
        ]
        return m

    def scaled_mag(self, mag, scale_sig):
        """The group sum's magnitude times the scales' significand product (1 for E8M0)."""
        return mag * scale_sig

    def zero_group(self, gs: GroupSum, sp):
        """Whether the group aligns at ``e_zero``: every product zero, or a zero scale (a
        group whose non-zero products cancel is not one)."""
        return gs.zero | sp.zero

    def align_exp(self, scale_exp, zero):
        """The group's alignment exponent: the scale exponents' sum, or ``e_zero``."""
        return Mux(zero, self._spec.e_zero, scale_exp)


class _Grouping:
    """What both grouped stages share: which products and which scales make group ``g``."""

    _spec: UnitSpec

    def members(self, g: int) -> list[int]:
        """The product indices of group ``g``: ``g*G ... g*G + G - 1``."""
        G = self._spec.group
        return list(range(g * G, g * G + G))

    def scale_index(self, g: int) -> int:
        """The scale (block) of group ``g``: the block its products are in."""
        return g * self._spec.group // self._spec.block

    def _wire_group(self, m: Module, term: GroupTerm, blk, g: int) -> None:
        for j, idx in enumerate(self.members(g)):
            m.d.comb += [term.a[j].eq(blk.a[idx]), term.b[j].eq(blk.b[idx])]
        sa, sb = scale_codes(self._spec, blk, self.scale_index(g))
        m.d.comb += [term.sa.eq(sa), term.sb.eq(sb)]


class GroupExponentMax(_Grouping, ExponentMax):
    """The block's largest alignment exponent over its ``k / G`` group terms and C, and its
    NaN/Inf flags (:class:`hdl.stages.ExponentMax`'s ports and C rule)."""

    group_term: type[GroupTerm] = GroupTerm

    def elaborate(self, platform):
        m = Module()
        spec, blk, c, o = self._spec, self.s0.block, self.s0.c, self.o
        n = spec.k // spec.group
        terms = []
        for g in range(n):
            term = self.group_term(spec)
            m.submodules[f"gexp{g}"] = term
            self._wire_group(m, term, blk, g)
            terms.append(term.o)
        m.submodules.max_tree = mt = self.max_tree(n + 1)
        for g, t in enumerate(terms):
            m.d.comb += mt.i[g].eq(t.exp)
        m.d.comb += [
            mt.i[n].eq(self.c_exp(c)),
            o.e_max.eq(mt.o),
            o.nan.eq(c.nan | any_of(t.nan for t in terms)),
            o.pinf.eq((c.inf & ~c.sign) | any_of(t.pinf for t in terms)),
            o.ninf.eq((c.inf & c.sign) | any_of(t.ninf for t in terms)),
        ]
        return m


class GroupAccumulate(_Grouping, Accumulate):
    """This pass's ``lanes / G`` groups (pass ``p`` takes groups ``p*lanes/G ...``), each term
    aligned to the block's largest exponent, added with C (pass 0) onto the accumulator
    (:class:`hdl.stages.Accumulate`'s ports, C path and accumulator)."""

    group_term: type[GroupTerm] = GroupTerm

    def __init__(self, spec: UnitSpec, microarch: MicroArch):
        super().__init__(spec, microarch)
        self._per_pass = microarch.lanes // spec.group

    def _terms(self, m: Module) -> list:
        spec, per, e_max = self._spec, self._per_pass, self.exponents.e_max
        geo = group_geometry(spec)
        out = []
        for j in range(per):
            term = self.group_term(spec)
            m.submodules[f"group{j}"] = term
            if self._passes > 1:
                sel = [self._pass_view(p * per + j) for p in range(self._passes)]
                src = select(m, self.s0.p, sel, f"group{j}_in")
                m.d.comb += term.a.as_value().eq(src[:len(term.a.as_value())])
                rest = src[len(term.a.as_value()):]
                nb = len(term.b.as_value())
                m.d.comb += [term.b.as_value().eq(rest[:nb]), term.sa.eq(rest[nb:nb + 8]),
                             term.sb.eq(rest[nb + 8:nb + 16])]
            else:
                self._wire_group(m, term, self.s0.block, j)
            al = self.aligner(geo.mag_bits, geo.man_bits, spec.frac_bits, int_bits=geo.int_bits)
            m.submodules[f"galign{j}"] = al
            m.d.comb += [al.sign.eq(term.o.sign), al.sig.eq(term.o.mag), al.exp.eq(term.o.exp),
                         al.e_max.eq(e_max)]
            out.append(al.q)
        return out

    def _pass_view(self, g: int):
        """Group ``g``'s codes and scale codes, concatenated (a, b, sa, sb) for the pass mux."""
        blk = self.s0.block
        idx = self.members(g)
        sa, sb = scale_codes(self._spec, blk, self.scale_index(g))
        return Cat(*[blk.a[i] for i in idx], *[blk.b[i] for i in idx], sa, sb)

    def elaborate(self, platform):
        m = Module()
        spec, s0, e_max = self._spec, self.s0, self.exponents.e_max
        terms = self._terms(m)
        n = len(terms)
        m.submodules.adders = adders = self.adder_tree(n + 1, term_bits(spec) + 1)
        for j, q in enumerate(terms):
            m.d.comb += adders.i[j].eq(q)
        c = s0.c
        m.submodules.align_c = ac = self.c_aligner(24, 23, spec.frac_bits)
        m.d.comb += [ac.sign.eq(self.c_sign(c)), ac.sig.eq(c.sig), ac.exp.eq(c.exp),
                     ac.e_max.eq(e_max),
                     adders.i[n].eq(Mux(self.c_joins(s0.p) & ~c.zero, ac.q, 0))]
        acc = Signal(signed(sum_bits(spec)))
        m.d.comb += self.o.sum.eq(self.acc_in(acc, s0.p) + adders.o)
        with m.If(s0.go):
            m.d.sync += acc.eq(self.o.sum)
        return m

