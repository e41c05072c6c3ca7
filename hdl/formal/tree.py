"""``TreeDot``: one instruction of a reduction-tree unit spec (``reduce = "tree"``) as a plain
combinational circuit, for proofs of designs that round pairwise.

It is drawn from the spec alone, the way :func:`mxsim.engine.reference.dot` reads a tree, and
is the tree sibling of :class:`.reference.ReferenceDot` (whose decoding and GST group terms it
shares, :func:`.reference.group_terms`):

1. each GST group of ``spec.group`` products is summed exactly and multiplied by its two block
   scales: an exact term ``v * 2**L`` (``v`` a signed integer), or NaN / signed Inf (IEEE: NaN
   wins, Inf times a zero scale is NaN, a NaN scale is NaN);
2. the terms are added pairwise in a balanced tree in index order, ``((t0 + t1) + (t2 + t3))
   + ...``; every node forms the EXACT sum of its two inputs (the one with the larger LSB
   exponent shifted left onto the other's: no bit is dropped, at a width the spec's exponent
   ranges bound) and rounds it once to its level's format (``spec.tree_level_formats()``) by
   ``acc_rounding``, gradual underflow below the format's least normal exponent, overflow as
   ``spec.overflow`` says; NaN and Inf propagate as IEEE addition has them; a zero's sign
   follows ``zero_sign``. A lone term (``k == group``) is rounded once, as ``t0 + 0``;
3. the root's value (held exactly by FP32: the last level's format must be within FP32) is
   added to C, an FP32 code, the same way, rounded by ``c_rounding`` (``c_mode = "after"``);
4. D is written as an FP32 code; NaN is ``spec.d_nan``.

:func:`tree_problem` names what it does not render; :func:`dot_problem` and
:func:`dot_reference` choose between the two reference circuits.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth import Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.stages import block_layout
from mxsim import formats
from mxsim.formats import Overflow, Rounding
from mxsim.spec import CMode, Reduce, Specials, UnitSpec, UpcastSpecials, ZeroSign

from .reference import ReferenceDot, Term, group_terms, reference_problem
from .rounding import EXP

__all__ = ["TreeDot", "Node", "tree_problem", "dot_problem", "dot_reference", "add_round",
           "term_node", "fp32_node", "fp32_code", "leading_one"]

_ROUNDINGS = ("rz", "rne", "rna", "ru", "rd")


def tree_problem(spec: UnitSpec) -> str | None:
    """Why :class:`TreeDot` does not render ``spec`` (None: it does)."""
    if spec.reduce is not Reduce.TREE:
        return f"reduce {spec.reduce.value} (the tree reference renders reduce tree)"
    levels = _levels(spec)
    checks = [
        (spec.upcast is not None or spec.fold_scales, "an operand upcast"),
        (spec.upcast_specials is not UpcastSpecials.IEEE,
         f"upcast_specials {spec.upcast_specials.value}"),
        (spec.specials is not Specials.IEEE, f"specials {spec.specials.value}"),
        (spec.zero_sign not in (ZeroSign.POSITIVE, ZeroSign.IEEE),
         f"zero_sign {spec.zero_sign.value}"),
        (spec.d_format != "fp32", f"d_format {spec.d_format}"),
        (spec.c_mode is not CMode.AFTER, f"c_mode {spec.c_mode.value}"),
        (spec.scale_format not in ("e8m0", "ue4m3"), f"scale_format {spec.scale_format}"),
        (spec.scale_sum_bits is not None, "scale_sum_bits"),
        (spec.promote_every is not None, "promote_every"),
        (spec.epilogue is not None, "an epilogue"),
        (spec.acc_rounding.value not in _ROUNDINGS, f"acc_rounding {spec.acc_rounding.value}"),
        (spec.c_rounding.value not in _ROUNDINGS, f"c_rounding {spec.c_rounding.value}"),
        *((not _plain_float(formats.get(name)), f"tree format {name}") for name in levels),
        (not _within_fp32(formats.get(levels[-1])),
         f"a last tree level in {levels[-1]} (FP32 must hold it exactly)"),
    ]
    bad = list(dict.fromkeys(what for cond, what in checks if cond))
    return None if not bad else f"the tree reference circuit does not render {', '.join(bad)}"


def dot_problem(spec: UnitSpec) -> str | None:
    """Why neither reference circuit renders ``spec`` (:class:`.reference.ReferenceDot` a
    chain, :class:`TreeDot` a tree), in one line; None: one does."""
    return tree_problem(spec) if spec.reduce is Reduce.TREE else reference_problem(spec)


def dot_reference(spec: UnitSpec, *, c_zero: bool = False) -> wiring.Component:
    """The reference circuit of ``spec``: a :class:`TreeDot` for a tree (with ``c_zero``: C
    is +0), else a :class:`.reference.ReferenceDot` (which reads C from ``i.c``); both take
    ``i`` (``block_layout(spec)``) and give ``d``. Raises ValueError for a spec
    :func:`dot_problem` refuses."""
    if spec.reduce is Reduce.TREE:
        return TreeDot(spec, c_zero=c_zero)
    return ReferenceDot(spec)


def _levels(spec: UnitSpec) -> tuple[str, ...]:
    """The format each tree level rounds to, leaves first (a lone term's one rounding: the
    acc_format)."""
    return spec.tree_level_formats() or (spec.acc_format,)


def _plain_float(fmt: formats.Format) -> bool:
    """A float format whose largest value ends its top binade, within the exponent width."""
    return (fmt.kind == "float" and fmt.max == (2 - 2.0 ** -fmt.man_bits) * 2.0 ** fmt.emax
            and -1000 < fmt.emin - fmt.man_bits and fmt.emax < 1000)


def _within_fp32(fmt: formats.Format) -> bool:
    return fmt.kind == "float" and fmt.emin >= -126 and fmt.emax <= 127 and fmt.man_bits <= 23 \
        and fmt.emin - fmt.man_bits >= -149


@dataclass(frozen=True)
class Node:
    """A value in the tree: ``v * 2**L`` (``v`` signed), or NaN, or Inf of sign ``neg``
    (``neg`` is also the sign of a zero); ``|v| < 2**vbits``."""
    v: object
    L: object
    nan: object
    inf: object
    neg: object
    vbits: int


class TreeDot(wiring.Component):
    """D of one instruction of a tree ``spec`` from one input beat (``first``/``last``
    ignored), exact to the spec (see the module docstring).

    Members: ``i`` (in, ``block_layout(spec)``: the beat's codes and C), ``d`` (out, the FP32
    code of D). ``c_zero``: C is +0 whatever ``i.c`` holds (a design without a C input), so D
    is the tree's result itself (exact in FP32; +0 + -0 is +0), without the C adder, whose
    identity a proof would otherwise have to find. Raises ValueError for a spec
    :func:`tree_problem` refuses.
    """

    def __init__(self, spec: UnitSpec, *, c_zero: bool = False):
        problem = tree_problem(spec)
        if problem:
            raise ValueError(f"Unit {spec.name!r}: {problem}")
        self._spec, self._c_zero = spec, c_zero
        super().__init__({"i": In(block_layout(spec)), "d": Out(32)})

    @property
    def spec(self) -> UnitSpec:
        return self._spec

    def elaborate(self, platform):
        m = Module()
        spec = self._spec
        nodes = [term_node(m, spec, t, f"t{n}")
                 for n, t in enumerate(group_terms(m, spec, self.i))]
        if len(nodes) == 1:                # t0 + 0: the lone term rounded once
            nodes = [_lone(m, spec, nodes[0])]
        for depth, name in enumerate(spec.tree_level_formats(), 1):
            fmt = formats.get(name)
            nodes = [add_round(m, spec, x, y, fmt, spec.acc_rounding, f"L{depth}n{n}")
                     for n, (x, y) in enumerate(zip(nodes[::2], nodes[1::2], strict=True))]
        assert len(nodes) == 1
        if self._c_zero:
            d = _as_fp32(m, nodes[0], "d")
        else:
            d = add_round(m, spec, fp32_node(m, self.i.c, "c"), nodes[0],
                          formats.get("fp32"), spec.c_rounding, "d")
        m.d.comb += self.d.eq(fp32_code(m, spec, d))
        return m


# -- values -----------------------------------------------------------------------------------

def term_node(m: Module, spec: UnitSpec, t: Term, name: str) -> Node:
    """A GST group term (:func:`.reference.group_terms`) as a :class:`Node`: ``L = e - M``."""
    v = Signal(signed(len(t.mag) + 1), name=f"{name}_v")
    m.d.comb += v.eq(Mux(t.neg, -t.mag, t.mag))
    L = Signal(signed(EXP), name=f"{name}_L")
    m.d.comb += L.eq(t.e - t.M)
    return Node(v, L, t.nan, t.inf, t.neg, len(t.mag))


def fp32_node(m: Module, code, name: str) -> Node:
    """An FP32 code (C) as a :class:`Node`, by its fields."""
    biased, frac = code[23:31], code[:23]
    sig = Mux(biased == 0, frac, frac | (1 << 23))
    v = Signal(signed(25), name=f"{name}_v")
    m.d.comb += v.eq(Mux(code[31], -sig, sig))
    L = Signal(signed(EXP), name=f"{name}_L")
    m.d.comb += L.eq(Mux(biased == 0, 1, biased) - 150)
    top = biased == 0xFF
    return Node(Mux(top, 0, v), L, top & (frac != 0), top & (frac == 0), code[31], 24)


def _as_fp32(m: Module, x: Node, name: str) -> Node:
    """``x + (+0)``: a node of a format within FP32 written as FP32 holds it (the significand
    normalised to 24 bits, or a subnormal's at 2**-149), a zero as +0."""
    mag = abs(x.v)
    lead = Signal(range(len(mag)), name=f"{name}_lead")
    m.d.comb += lead.eq(leading_one(mag)[1])
    normal = Signal(name=f"{name}_normal")
    m.d.comb += normal.eq(x.L + lead >= -126)
    lift = Signal(range(24), name=f"{name}_lift")       # zeros appended: up to 23
    m.d.comb += lift.eq(Mux(normal, 23 - lead, x.L + 149))
    sig = Signal(24, name=f"{name}_sig")
    m.d.comb += sig.eq(mag << lift)
    L = Signal(signed(EXP), name=f"{name}_L")
    m.d.comb += L.eq(x.L - lift)
    v = Signal(signed(25), name=f"{name}_v")
    m.d.comb += v.eq(Mux(x.v < 0, -sig, sig))
    return Node(v, L, x.nan, x.inf, x.neg & (x.inf | (x.v != 0)), 24)


def fp32_code(m: Module, spec: UnitSpec, x: Node):
    """The FP32 code of ``x``, a node rounded to FP32 (NaN: ``spec.d_nan``)."""
    sig = Signal(24, name="d_sig")
    m.d.comb += sig.eq(abs(x.v))
    biased = Mux(sig[23], x.L + 150, 0)[:8]
    code = Signal(32, name="d_code")
    m.d.comb += code.eq(Mux(x.nan, spec.d_nan,
                            (x.neg << 31) | Mux(x.inf, 0x7F800000, (biased << 23) | sig[:23])))
    return code


# -- one node ---------------------------------------------------------------------------------

def _lone(m: Module, spec: UnitSpec, t: Node) -> Node:
    """A lone term plus +0, rounded once to acc_format: the term rounded (its own exact sum;
    -0 + +0 is +0; a negative term rounded to zero is -0 under zero_sign ieee)."""
    r = _round(m, t.v, t.L, formats.get(spec.acc_format), spec.acc_rounding, spec.overflow,
               "L1n0")
    inf = Signal(name="L1n0_inf")
    m.d.comb += inf.eq(~t.nan & (t.inf | r.inf))
    neg = Signal(name="L1n0_neg")
    zero_neg = 0 if spec.zero_sign is ZeroSign.POSITIVE else t.v < 0
    m.d.comb += neg.eq(Mux(t.inf, t.neg, Mux(r.v != 0, t.v < 0, zero_neg)))
    return Node(r.v, r.L, t.nan, inf, neg, r.vbits)

def _exact_sum(m: Module, x: Node, y: Node, man: int, name: str):
    """``x + y`` (finite) as ``(total, L)``, ``total * 2**L``, exactly or, where the operands
    lie far apart, as a value that every rounding to ``man`` fraction bits takes to the same
    result.

    Exact: a zero operand gives the other; otherwise the operand with the larger LSB exponent
    (``hi``) is shifted left by ``d``, the gap, onto the other's (``lo``). Far (``d > D``,
    ``D = vbits + man + 2``): ``lo`` is replaced by ``±2**(hi.L - D)``, its sign kept. Why that
    rounds the same: the representable values and midpoints near ``hi`` (in its binade and
    the one below) are multiples of a power of two ``s >= 2**(hi.L - man - 2)``, and ``hi`` is
    a non-zero multiple of ``2**hi.L``; so ``hi`` and such a point are both multiples of
    ``min(s, 2**hi.L)``, and none lies within ``2**(hi.L - man - 2)`` of ``hi`` but ``hi``
    itself. ``lo`` and its stand-in are non-zero, of one sign and below that in magnitude, so
    the two sums fall in the same open interval between such points: every rounding
    direction, the overflow and the sign give the same. The sum then takes ``max vbits + D +
    2`` bits, not the whole exponent range of the operands."""
    D = max(x.vbits, y.vbits) + man + 2
    both = (x.v != 0) & (y.v != 0)
    swap = Signal(name=f"{name}_swap")
    m.d.comb += swap.eq(y.L > x.L)
    hi_v, hi_L = Mux(swap, y.v, x.v), Mux(swap, y.L, x.L)
    lo_v, lo_L = Mux(swap, x.v, y.v), Mux(swap, x.L, y.L)
    gap = Signal(signed(EXP), name=f"{name}_gap")
    m.d.comb += gap.eq(hi_L - lo_L)
    near = gap <= D
    shift = Signal(range(D + 1), name=f"{name}_shift")
    m.d.comb += shift.eq(Mux(near, gap, D))
    width = max(x.vbits, y.vbits) + D + 2
    hi = Signal(signed(width), name=f"{name}_hi")
    m.d.comb += hi.eq(hi_v)
    total = Signal(signed(width), name=f"{name}_sum")
    L = Signal(signed(EXP), name=f"{name}_lsb")
    with m.If(both):
        m.d.comb += [total.eq((hi << shift) + Mux(near, lo_v, Mux(lo_v < 0, -1, 1))),
                     L.eq(hi_L - shift)]
    with m.Elif(x.v == 0):
        m.d.comb += [total.eq(y.v), L.eq(y.L)]
    with m.Else():
        m.d.comb += [total.eq(x.v), L.eq(x.L)]
    return total, L


def add_round(m: Module, spec: UnitSpec, x: Node, y: Node, fmt: formats.Format,
              rounding: Rounding, name: str) -> Node:
    """``x + y`` rounded once to ``fmt`` by ``rounding``, overflow as ``spec.overflow`` says,
    a zero's sign as ``spec.zero_sign`` does; NaN wins, +Inf + -Inf is NaN."""
    pos = (x.inf & ~x.neg) | (y.inf & ~y.neg)
    neg_inf = (x.inf & x.neg) | (y.inf & y.neg)
    nan = Signal(name=f"{name}_nan")
    m.d.comb += nan.eq(x.nan | y.nan | (pos & neg_inf))
    total, L = _exact_sum(m, x, y, fmt.man_bits, name)
    r = _round(m, total, L, fmt, rounding, spec.overflow, name)
    # zero_sign positive: +0; ieee: -0 for -0 + -0 and for a negative sum rounded to zero.
    zero_neg = 0 if spec.zero_sign is ZeroSign.POSITIVE else Mux(total == 0, x.neg & y.neg,
                                                                 total < 0)
    special = pos | neg_inf
    inf = Signal(name=f"{name}_inf")
    m.d.comb += inf.eq(~nan & (special | r.inf))
    sign = Signal(name=f"{name}_neg")
    m.d.comb += sign.eq(Mux(special, neg_inf, Mux(r.v == 0, zero_neg, total < 0)))
    return Node(r.v, r.L, nan, inf, sign, r.vbits)


def _round(m: Module, total, L, fmt: formats.Format, rounding: Rounding, overflow: Overflow,
           name: str) -> Node:
    """``total * 2**L`` rounded once to ``fmt`` (its precision, subnormals and range), as
    :func:`mxsim.engine.reference.values.round_value` reads it: the leading one gives the
    exponent, the bits below the format's LSB are dropped and decide the rounding. The node's
    ``inf`` is an overflow to Inf; ``nan`` and ``neg`` are left to the caller."""
    man, W = fmt.man_bits, len(total)
    neg = total < 0
    mag = Signal(W, name=f"{name}_mag")
    m.d.comb += mag.eq(abs(total))
    lead = Signal(range(W), name=f"{name}_lead")
    m.d.comb += lead.eq(leading_one(mag)[1])
    # The value's exponent, floored at the format's least normal one (subnormals).
    e = Signal(signed(EXP), name=f"{name}_e")
    m.d.comb += e.eq(Mux(lead + L < fmt.emin, fmt.emin, lead + L))
    # q: how many low bits of mag lie below the result's LSB 2**(e - man) (< 0: none, and
    # -q <= man zeros appended).
    q = Signal(signed(EXP), name=f"{name}_q")
    m.d.comb += q.eq(e - man - L)
    drop = Signal(range(W + 2), name=f"{name}_drop")
    m.d.comb += drop.eq(Mux(q <= 0, 0, Mux(q > W + 1, W + 1, q)))
    lift = Signal(range(man + 2), name=f"{name}_lift")
    m.d.comb += lift.eq(Mux(q < 0, -q, 0))
    kept = Signal(man + 2, name=f"{name}_kept")     # < 2**(man + 1): the leading one's bound
    m.d.comb += kept.eq(Mux(q > 0, mag >> drop, mag << lift))
    # The dropped bits: the top one (half a unit of the kept LSB) and whether any below it
    # is set.
    below = Signal(range(W + 1), name=f"{name}_below")   # drop - 1
    m.d.comb += below.eq(Mux(drop == 0, 0, drop - 1))
    half = Signal(name=f"{name}_half")
    m.d.comb += half.eq((drop != 0) & (mag >> below)[0])
    sticky = Signal(name=f"{name}_sticky")
    m.d.comb += sticky.eq((drop != 0) & ((mag & ((Const(1, W + 1) << below) - 1)[:W]) != 0))
    up = _round_up(rounding, neg, kept[0], half, sticky)
    r = Signal(man + 2, name=f"{name}_r")
    m.d.comb += r.eq(kept + up)
    carry = r[man + 1]                     # rounded up to the next binade: r = 2**(man + 1)
    sig = Signal(man + 1, name=f"{name}_sig")
    m.d.comb += sig.eq(Mux(carry, r >> 1, r))
    over = (e + carry > fmt.emax) & (sig != 0)
    to_inf = _overflows_to_inf(overflow, rounding, neg)
    top = (1 << (man + 1)) - 1
    v = Signal(signed(man + 2), name=f"{name}_v")
    out = Mux(over, top, sig)
    m.d.comb += v.eq(Mux(neg, -out, out))
    lsb = Signal(signed(EXP), name=f"{name}_rL")
    m.d.comb += lsb.eq(Mux(over, fmt.emax - man, e - man + carry))
    return Node(v, lsb, Const(0), over & to_inf, neg, man + 1)


def leading_one(bits) -> tuple:
    """(any bit set, the index of the highest set bit; 0 when none) of ``bits``, as a balanced
    tree of halves: its depth is logarithmic, where a chain of ``len(bits)`` priority muxes
    overflows the call stack of Yosys's SMT-LIB writer for sums of hundreds of bits."""
    if len(bits) == 1:
        return bits[0], Const(0, 1)
    half = len(bits) // 2
    lo_any, lo_at = leading_one(bits[:half])
    hi_any, hi_at = leading_one(bits[half:])
    return lo_any | hi_any, Mux(hi_any, hi_at + half, lo_at)


def _round_up(rounding: Rounding, neg, odd, half, sticky):
    """Whether the kept significand goes up one unit: ``half``, the top dropped bit;
    ``sticky``, any dropped bit below it."""
    if rounding is Rounding.RZ:
        return Const(0)
    if rounding is Rounding.RNE:
        return half & (sticky | odd)
    if rounding is Rounding.RNA:
        return half
    if rounding is Rounding.RU:
        return (half | sticky) & ~neg
    if rounding is Rounding.RD:
        return (half | sticky) & neg
    raise ValueError(f"Rounding must be one of {', '.join(_ROUNDINGS)}, not {rounding.value!r}")


def _overflows_to_inf(overflow: Overflow, rounding: Rounding, neg):
    """Whether an overflow gives Inf (else the format's largest value): ``inf`` always,
    ``saturate`` never, ``ieee`` unless the rounding is toward zero for the sign."""
    if overflow is Overflow.SATURATE:
        return Const(0)
    if overflow is Overflow.INF:
        return Const(1)
    if rounding is Rounding.RZ:
        return Const(0)
    if rounding is Rounding.RU:
        return ~neg
    if rounding is Rounding.RD:
        return neg
    return Const(1)

