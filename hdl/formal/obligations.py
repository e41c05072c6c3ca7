"""The three proof obligations of a compositional proof of a unit's datapath.

Each is a harness like :class:`.miter.SingleBeat` (one free beat in cycle 0, ``first`` =
``last`` = 1, ``o.ready`` high) around a unit cut by :func:`.cuts.cut`:

``Terms``
    In every pass, each lane's product (a GST unit's group term, given that each of the
    group's products is the reference's), as its aligner takes it, is the reference's term of
    this pass, and, given that, the lane's adder-tree input
    equals the reference's term truncated at the unit's largest exponent, which equals the
    reference's (C's in pass 0 and 0 after); the step's NaN and Inf agree. (Decoders,
    multipliers, scales, the exponent maximum and the aligners.)
``Sum``
    With the aligners free and a free stream of blocks (any ``i.valid``, payload and
    ``o.ready`` each cycle, chains well formed), the accumulator after each pass equals the
    exact sum of every tree input of its block so far, added in the tree's own pairing at
    full width: each adder of the tree and the accumulator is exact, and the accumulator
    starts each block from 0. (The tree, the accumulator, its clearing, C's pass.)
``Post``
    With the exponent and accumulate stages free, the result that appears ``latency`` cycles
    after the beat is the reference's rounding of the sum and exponent the stages gave on the
    block's last pass (NaN and Inf first), and nothing appears before. (Normalise, round,
    pack, the pipeline's timing.)
``Chain``
    With the same stages free and a free stream of blocks, a chained block (``first`` low)
    starts its first pass only once every block before it has left the post pipeline (its D
    produced and written to the feedback register), and uses the feedback register's code
    as its C. (The chaining rule; that the code written is the rounding is ``Post``'s.)

Composition (stated, not solved): by ``Terms`` the tree adds the reference's terms; by
``Sum`` it adds them exactly, and an exact sum does not depend on the order of its terms, so
the sum is the reference's ``total``; by ``Post`` the unit's D is the reference's rounding of
it. A proof of the three is a proof of D = the reference's D for every one-block beat; with
``Chain``, a chained block's C is its predecessor's D, so a chain's D is the reference's
chain of blocks.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal, signed
from amaranth.hdl import Assume

from .cuts import Taps, cut
from .miter import Harness
from .reference import reference_parts
from .rounding import round_to_fp32

__all__ = ["Terms", "Sum", "Post", "Chain", "OBLIGATIONS"]


class _Obligation(Harness):
    free: str | None = None

    @property
    def depth(self) -> int:
        """The bound a proof runs to: one beat's whole life."""
        return self.latency + 1

    def __init__(self, unit_cls: type, spec, ua):
        super().__init__()
        self.spec, self.ua = spec, ua
        self.taps = Taps(spec, ua)
        self.unit = cut(unit_cls, self.taps, self.free)(spec, ua)
        self.latency = ua.latency(spec)

    def _single_beat(self, m: Module):
        """Offer one free beat in cycle 0 (:meth:`Harness.single_beat`)."""
        beat, cycle = self.single_beat(m, self.unit, self.latency)
        return self.unit, beat, cycle


class Terms(_Obligation):
    """Each tree input is the reference's term (see the module docstring)."""

    def elaborate(self, platform):
        m = self._module()
        dut, beat, _ = self._single_beat(m)
        t, per, spec = self.taps, self.taps.per_pass, self.spec
        ref = reference_parts(m, spec, beat, e_max=t.e_max)
        with m.If(t.go):
            self.check(m, (t.nan | (t.pinf & t.ninf)) == ref.nan, "the step's NaN")
            with m.If(~ref.nan):
                self.check(m, t.pinf == (ref.inf & ~ref.neg), "the step's +Inf")
                self.check(m, t.ninf == (ref.inf & ref.neg), "the step's -Inf")
        with m.If(t.go & ~ref.nan & ~ref.inf):
            for j, e in enumerate(ref.exps):
                self.check(m, t.max_in[j] == e, f"term {j}'s alignment exponent")
            self.check(m, t.e_max == _tree_order(t.max_in, _max),
                       "the largest exponent, comparator by comparator")
            what, term = (("group", "term") if spec.group is not None
                          else ("lane", "product"))
            for j in range(per):
                # Split at the aligner's input: a wide multiplier (INT8's) and the aligner's
                # shift in one cone do not close; each alone does. A GST group's term is
                # split again at its products: each product, then the term given them.
                same = self._same_product(t.product[j], ref.terms, j)
                if t.members:
                    products = self._same_members(m, t.members[j], ref.terms, j)
                    with m.If(products):
                        self.check(m, same, f"{what} {j}'s {term}, given its products")
                else:
                    self.check(m, same, f"{what} {j}'s {term}")
                with m.If(same):
                    self.check(m, t.tree_in[j] == self._this_pass(ref.cut, j),
                               f"{what} {j}'s aligned term, given its {term}")
            self.check(m, t.tree_in[per] == Mux(t.p == 0, ref.cut[-1], 0),
                       "C's aligned term, in pass 0 only")
        return m

    def _this_pass(self, items: list, j: int):
        """Lane (or group) ``j``'s item of the pass ``s0`` is in."""
        per, want = self.taps.per_pass, items[j]
        for p in range(1, self.ua.passes(self.spec)):
            want = Mux(self.taps.p == p, items[p * per + j], want)
        return want

    def _same_members(self, m: Module, members: list, terms: list, j: int):
        """Check that each of GST group ``j``'s products is the reference's; their
        conjunction."""
        same = []
        for i, tap in enumerate(members):
            want = self._this_pass([t.members[i] for t in terms[:-1]], j)
            same.append(tap == want)
            self.check(m, same[-1], f"group {j}'s product {i}")
        out = same[0]
        for x in same[1:]:
            out = out & x
        return out

    def _same_product(self, product, terms: list, j: int):
        """The lane's product (as its aligner takes it) is the reference's term of this
        pass: the same magnitude in units of ``2**(e - M)``, and for a non-zero one the same
        sign and alignment exponent."""
        sign, sig, exp = product
        mag = self._this_pass([t.mag for t in terms], j)
        neg = self._this_pass([t.neg for t in terms], j)
        e = self._this_pass([t.e for t in terms], j)
        return (sig == mag) & ((mag == 0) | ((sign == neg) & (exp == e)))


class Sum(_Obligation):
    """The tree and accumulator add exactly, block after block (see the module docstring)."""
    free = "terms"

    @property
    def depth(self) -> int:
        """Long enough for a second block's passes after the first's."""
        return self.latency + self.ua.passes(self.spec) + 2

    def elaborate(self, platform):
        m = self._module()
        self.free_stream(m, self.unit)
        t = self.taps
        width = len(t.sum) + 2
        this_pass = _tree_order(t.tree_in, lambda x, y: (x + y)[:width].as_signed())
        so_far = Signal(signed(width), name="exact_so_far")
        exact = Signal(signed(width), name="exact_sum")
        m.d.comb += exact.eq(Mux(t.p == 0, 0, so_far) + this_pass)
        with m.If(t.go):
            m.d.sync += so_far.eq(exact)
            self.check(m, t.sum == exact, "the accumulator is the exact sum so far")
        return m


class Post(_Obligation):
    """The post pipeline rounds what it is given, on time (see the module docstring)."""
    free = "front"

    def elaborate(self, platform):
        m = self._module()
        dut, _, cycle = self._single_beat(m)
        want = self.rounded(m)
        with m.If((cycle > 0) & (cycle < self.latency)):
            self.check(m, ~dut.o.valid, "no result before the latency")
        with m.If(cycle == self.latency):
            self.check(m, dut.o.valid, "the result appears at the latency")
            self.check(m, dut.o.payload == want, "D is the rounding of the sum")
        return m

    def rounded(self, m: Module) -> Signal:
        """The reference's D of the sum, exponent and flags the free stages gave on the
        latest block's last pass (kept from that cycle on)."""
        t, spec = self.taps, self.spec
        kept = {name: Signal.like(getattr(t, name), name=f"kept_{name}")
                for name in ("sum", "e_max", "nan", "pinf", "ninf")}
        with m.If(t.go & t.done):
            m.d.sync += [kept[n].eq(getattr(t, n)) for n in kept]
            # The cut's contract: the exponent stage gives what a block can have, e_zero or
            # a term's exponent (within [-300, 300]: E8M0 scales, FP32 C).
            lo, hi = min(spec.e_zero, -300), max(spec.e_zero, 300)
            m.d.comb += Assume((t.e_max >= lo) & (t.e_max <= hi))
        lsb = Signal(signed(14), name="kept_lsb")
        m.d.comb += lsb.eq(kept["e_max"] - spec.frac_bits)
        finite = round_to_fp32(m, spec, kept["sum"], lsb)
        want = Signal(32, name="want")
        m.d.comb += want.eq(Mux(kept["nan"] | (kept["pinf"] & kept["ninf"]), spec.d_nan,
                                Mux(kept["pinf"], 0x7F800000,
                                    Mux(kept["ninf"], 0xFF800000, finite))))
        return want


class Chain(_Obligation):
    """A chained block waits for the D of the block before it and uses it as its C (see
    the module docstring)."""
    free = "front"

    @property
    def depth(self) -> int:
        """Two blocks' passes and results, with a stall."""
        return 2 * self.latency + self.ua.passes(self.spec) + 4

    def elaborate(self, platform):
        m = self._module()
        t = self.taps
        self.free_stream(m, self.unit)
        done = Signal(8, name="blocks_done")         # blocks whose last pass ran
        produced = Signal(8, name="blocks_produced")  # blocks whose D left the post stages
        m.d.sync += [done.eq(done + (t.go & t.done)), produced.eq(produced + t.produced)]
        with m.If(t.go & (t.p == 0) & ~t.first):
            self.check(m, produced == done, "a chained block starts after the D before it")
            self.check(m, t.c_code == t.feedback, "a chained block's C is that D")
        return m


def _tree_order(items: list, node):
    """``node(x, y)`` over the items pairwise, level by level as a balanced tree pairs them
    (an odd one out goes up a level)."""
    level = [x.as_signed() for x in items]
    while len(level) > 1:
        nxt = [node(level[j], level[j + 1]) for j in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def _max(x, y):
    return Mux(x >= y, x, y)


#: name -> harness class, in the order a compositional proof runs them.
OBLIGATIONS = {"terms": Terms, "sum": Sum, "post": Post, "chain": Chain}
