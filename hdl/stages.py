"""The four stages of :class:`hdl.unit.DotProductUnit`, and the signatures that join them.

Each stage is a ``wiring.Component`` built from the spec and the micro-architecture; the unit
joins them with ``wiring.connect`` (the timing contract is in :mod:`hdl.unit`):

==================  =========================================================================
``BlockStage``      S0: the accepted beat, its pass counter, ``i``'s handshake, the block's C
``ExponentMax``     the block's largest alignment exponent and its NaN/Inf flags
``Accumulate``      this pass's lanes multiplied, aligned and added onto the accumulator
``PostPipeline``    S1..S``stages`` (normalise | round | pack), the chain's feedback register,
                    the output register and ``o``'s handshake
==================  =========================================================================

A stage names the sub-blocks it builds in class attributes (``Accumulate.aligner``...), and the
datapath decisions it makes in small methods (``BlockStage.ready``...), so a subclass may put
another implementation in one place without copying the rest.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from mxsim import formats
from mxsim.microarch import MicroArch, group_geometry
from mxsim.spec import UnitSpec

from .blocks import (
    EXP_WIDTH,
    AdderTree,
    Aligner,
    Decoder,
    MaxTree,
    Multiplier,
    Normaliser,
    Packer,
    Rounder,
    clog2,
    decoded_layout,
    normalised_layout,
    scale_sig_bits,
    sig_width,
)

__all__ = ["BlockStage", "ExponentMax", "Accumulate", "PostPipeline", "block_layout",
           "s0_signature", "exponents_signature", "sum_signature", "status_signature",
           "term_bits", "sum_bits", "n_scales", "scale_codes", "any_of", "select"]


def block_layout(spec: UnitSpec) -> data.StructLayout:
    """One input beat: a K-block of one dot product (see :mod:`hdl.unit`)."""
    fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)
    fields = {"a": data.ArrayLayout(unsigned(fa.bits), spec.k),
              "b": data.ArrayLayout(unsigned(fb.bits), spec.k)}
    n = n_scales(spec)
    if n == 1:
        fields.update(a_scale=unsigned(8), b_scale=unsigned(8))
    elif n > 1:                 # k / block scale codes per operand, block j's at index j
        fields.update(a_scale=data.ArrayLayout(unsigned(8), n),
                      b_scale=data.ArrayLayout(unsigned(8), n))
    fields.update(c=unsigned(32), first=1, last=1)
    return data.StructLayout(fields)


def n_scales(spec: UnitSpec) -> int:
    """Scale codes per operand in one input beat: ``k / block`` (0 without block scales)."""
    return 0 if spec.scale_format is None else spec.k // spec.block


def scale_codes(spec: UnitSpec, block, j: int):
    """The A and B scale codes of the beat's scale block ``j`` (the one scale when k = block)."""
    if n_scales(spec) == 1:
        return block.a_scale, block.b_scale
    return block.a_scale[j], block.b_scale[j]


def _int_bits(spec: UnitSpec) -> int:
    # Products are below 4 (16 with UE4M3 scales, whose significands multiply in); a GST
    # group term reaches its exact sum's top bit (group_geometry).
    if spec.group is not None:
        return group_geometry(spec).int_bits
    return 2 + (2 if spec.scale_format == "ue4m3" else 0)


def term_bits(spec: UnitSpec) -> int:
    """Magnitude bits of an aligned term: ``frac_bits`` below the largest exponent, the
    product's integer bits above it, and one for a carry."""
    return spec.frac_bits + _int_bits(spec) + 1


def sum_bits(spec: UnitSpec) -> int:
    """Bits of the accumulator: a signed sum of ``k`` terms (``k / G`` group terms) and C,
    exact."""
    terms = spec.k if spec.group is None else spec.k // spec.group
    return term_bits(spec) + 1 + clog2(terms + 1)


def s0_signature(spec: UnitSpec, microarch: MicroArch) -> wiring.Signature:
    """What S0 gives the other stages: the ``block`` it holds, the pass ``p``, ``go`` (a pass
    runs this cycle), ``done`` (the block's last pass runs this cycle) and the block's C,
    decoded (``c``)."""
    return wiring.Signature({
        "block": Out(block_layout(spec)),
        "p":     Out(range(max(microarch.passes(spec), 2))),
        "go":    Out(1),
        "done":  Out(1),
        "c":     Out(decoded_layout(formats.get("fp32"))),
    })


def exponents_signature() -> wiring.Signature:
    """The block's largest alignment exponent and whether a NaN, +Inf or -Inf is in it."""
    return wiring.Signature({"e_max": Out(signed(EXP_WIDTH)), "nan": Out(1), "pinf": Out(1),
                             "ninf": Out(1)})


def sum_signature(spec: UnitSpec) -> wiring.Signature:
    """The accumulator after this cycle's pass (the exact sum so far)."""
    return wiring.Signature({"sum": Out(signed(sum_bits(spec)))})


def status_signature() -> wiring.Signature:
    """What the post pipeline tells S0: the pipeline is stalled, a block is in S1..S``R``
    (``busy``), and the code of the last result (``feedback``, a chained block's C)."""
    return wiring.Signature({"stall": Out(1), "busy": Out(1), "feedback": Out(32)})


class BlockStage(wiring.Component):
    """S0: one accepted beat, held for its ``passes`` cycles, and the pass that runs.

    A pass runs (``s0.go``) when S0 holds a block, the pipeline is not stalled and, for a
    chained block (``first`` low), no older block is in S1..S``R`` (it needs that result as
    C). ``i.ready`` is high when S0 is empty or its block's last pass runs this cycle. The
    accepted beat is in ``s0.block`` from the next cycle, with ``s0.p`` = 0.

    Members: ``i`` (in, ``stream.Signature(block_layout(spec))``), ``s0`` (out,
    :func:`s0_signature`), ``post`` (in, :func:`status_signature`).
    """

    def __init__(self, spec: UnitSpec, microarch: MicroArch):
        self._spec, self._passes = spec, microarch.passes(spec)
        super().__init__({"i": In(stream.Signature(block_layout(spec))),
                          "s0": Out(s0_signature(spec, microarch)),
                          "post": In(status_signature())})

    @property
    def spec(self) -> UnitSpec:
        return self._spec

    def elaborate(self, platform):
        m = Module()
        s0, post = self.s0, self.post
        valid = Signal()                            # S0 holds a block
        last_pass = s0.p == self._passes - 1
        m.d.comb += [
            s0.go.eq(valid & self.may_start(s0.block, post.busy) & ~post.stall),
            s0.done.eq(s0.go & last_pass),
            self.i.ready.eq(self.ready(valid, last_pass, s0.done)),
        ]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [valid.eq(1), s0.block.eq(self.i.payload), s0.p.eq(0)]
        with m.Elif(s0.done):
            m.d.sync += valid.eq(0)
        with m.If(s0.go & ~s0.done):
            m.d.sync += s0.p.eq(s0.p + 1)
        c_code = Signal(32)
        m.submodules.dec_c = dc = Decoder("fp32")
        m.d.comb += [c_code.eq(self.c_code(s0.block, post.feedback)), dc.code.eq(c_code),
                     s0.c.eq(dc.o)]
        return m

    def may_start(self, block, busy):
        """Whether the chain lets a pass run: always for a first block, and for a chained one
        only when no older block is in the post stages (``busy``)."""
        return block.first | ~busy

    def ready(self, valid, last_pass, done):
        """``i.ready``: S0 is empty (``valid`` low), or its block's last pass runs (``done``)."""
        return ~valid | done

    def c_code(self, block, feedback):
        """The FP32 code of the block's C: ``block.c`` for a first block, else ``feedback``
        (the previous block's result)."""
        return Mux(block.first, block.c, feedback)


def _feed(m: Module, mul: Multiplier, a, b, scales) -> None:
    """Drive a multiplier with codes ``a`` and ``b`` and, unless ``scales`` is None, the
    scale codes ``(sa, sb)``."""
    m.d.comb += [mul.a.eq(a), mul.b.eq(b)]
    if scales is not None:
        m.d.comb += [mul.sa.eq(scales[0]), mul.sb.eq(scales[1])]


def any_of(values):
    """The OR of ``values`` (0 for none)."""
    out = 0
    for v in values:
        out = out | v
    return out


class ExponentMax(wiring.Component):
    """The block's largest alignment exponent, over every product and C, and its specials.

    A zero or special C takes part as ``e_zero``. ``o.nan`` is set by a NaN product or C (an
    Inf x 0 product included), ``o.pinf``/``o.ninf`` by an Inf of that sign. Combinational,
    over the whole block in every pass (its multipliers' significand products are unused, and
    synthesis drops them).

    Members: ``s0`` (in, :func:`s0_signature`), ``o`` (out, :func:`exponents_signature`).
    """

    #: The blocks it builds (a subclass may name others with the same constructor and ports).
    multiplier: type[Multiplier] = Multiplier
    max_tree: type[MaxTree] = MaxTree

    def __init__(self, spec: UnitSpec, microarch: MicroArch):
        self._spec = spec
        super().__init__({"s0": In(s0_signature(spec, microarch)),
                          "o": Out(exponents_signature())})

    @property
    def spec(self) -> UnitSpec:
        return self._spec

    def elaborate(self, platform):
        m = Module()
        spec, blk, c, o = self._spec, self.s0.block, self.s0.c, self.o
        mults = []
        for j in range(spec.k):
            mul = self.multiplier(spec.a_format, spec.b_format, scale_format=spec.scale_format,
                                  e_zero=spec.e_zero)
            m.submodules[f"exp{j}"] = mul
            _feed(m, mul, blk.a[j], blk.b[j], _scales_of(spec, blk, j))
            mults.append(mul)
        m.submodules.max_tree = mt = self.max_tree(spec.k + 1)
        for j, mul in enumerate(mults):
            m.d.comb += mt.i[j].eq(mul.o.exp)
        m.d.comb += [
            mt.i[spec.k].eq(self.c_exp(c)),
            o.e_max.eq(mt.o),
            o.nan.eq(c.nan | any_of(mul.o.nan for mul in mults)),
            o.pinf.eq((c.inf & ~c.sign) | any_of(mul.o.inf & ~mul.o.sign for mul in mults)),
            o.ninf.eq((c.inf & c.sign) | any_of(mul.o.inf & mul.o.sign for mul in mults)),
        ]
        return m

    def c_exp(self, c):
        """C's exponent in the maximum: its own, or ``e_zero`` for a zero, Inf or NaN."""
        return Mux(c.zero | c.nan | c.inf, self._spec.e_zero, c.exp)


def _scales_of(spec: UnitSpec, blk, j: int):
    """Product ``j``'s scale codes (its block's), or None for an unscaled spec."""
    return None if spec.scale_format is None else scale_codes(spec, blk, j // spec.block)


def select(m: Module, index, items, name):
    """``items[index]``: a multiplexer."""
    out = Signal(len(items[0]), name=name)
    with m.Switch(index):
        for j, item in enumerate(items):
            with m.Case(j):
                m.d.comb += out.eq(item)
    return out


class Accumulate(wiring.Component):
    """This pass's lanes, multiplied, aligned to the block's largest exponent and added (with C
    in pass 0) onto the accumulator, which pass 0 clears.

    Pass ``p`` takes the products of lanes ``p*lanes ... p*lanes + lanes - 1``. ``o.sum`` is
    the accumulator after this cycle's pass (combinational); the accumulator register takes it
    when the pass runs (``s0.go``).

    Members: ``s0`` (in, :func:`s0_signature`), ``exponents`` (in,
    :func:`exponents_signature`), ``o`` (out, :func:`sum_signature`).
    """

    #: The blocks it builds (a subclass may name others with the same constructor and ports).
    multiplier: type[Multiplier] = Multiplier
    aligner: type[Aligner] = Aligner
    c_aligner: type[Aligner] = Aligner
    adder_tree: type[AdderTree] = AdderTree

    def __init__(self, spec: UnitSpec, microarch: MicroArch):
        self._spec, self._lanes, self._passes = spec, microarch.lanes, microarch.passes(spec)
        super().__init__({"s0": In(s0_signature(spec, microarch)),
                          "exponents": In(exponents_signature()),
                          "o": Out(sum_signature(spec))})

    @property
    def spec(self) -> UnitSpec:
        return self._spec

    def elaborate(self, platform):
        m = Module()
        spec, lanes, s0, e_max = self._spec, self._lanes, self.s0, self.exponents.e_max
        m.submodules.adders = adders = self.adder_tree(lanes + 1, term_bits(spec) + 1)
        for lane in range(lanes):
            al = self._lane(m, lane)
            m.d.comb += [al.e_max.eq(e_max), adders.i[lane].eq(al.q)]
        c = s0.c
        m.submodules.align_c = ac = self.c_aligner(24, 23, spec.frac_bits)
        m.d.comb += [ac.sign.eq(self.c_sign(c)), ac.sig.eq(c.sig), ac.exp.eq(c.exp),
                     ac.e_max.eq(e_max),
                     adders.i[lanes].eq(Mux(self.c_joins(s0.p) & ~c.zero, ac.q, 0))]
        acc = Signal(signed(sum_bits(spec)))
        m.d.comb += self.o.sum.eq(self.acc_in(acc, s0.p) + adders.o)
        with m.If(s0.go):
            m.d.sync += acc.eq(self.o.sum)
        return m

    def _lane(self, m: Module, lane: int) -> Aligner:
        """Lane ``lane``'s operands this pass (a multiplexer when lanes < k), their product,
        and the aligner it goes through."""
        spec, lanes, passes, blk = self._spec, self._lanes, self._passes, self.s0.block
        if passes > 1:
            a_sel = select(m, self.s0.p, [blk.a[g * lanes + lane] for g in range(passes)],
                            f"a_lane{lane}")
            b_sel = select(m, self.s0.p, [blk.b[g * lanes + lane] for g in range(passes)],
                            f"b_lane{lane}")
        else:
            a_sel, b_sel = blk.a[lane], blk.b[lane]
        mul = self.multiplier(spec.a_format, spec.b_format, scale_format=spec.scale_format,
                              e_zero=spec.e_zero)
        m.submodules[f"lane_mul{lane}"] = mul
        _feed(m, mul, a_sel, b_sel, self._lane_scales(m, lane))
        fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)
        ssb = scale_sig_bits(spec.scale_format)
        al = self.aligner(sig_width(fa) + sig_width(fb) + 2 * ssb,
                          fa.man_bits + fb.man_bits + 2 * max(0, ssb - 1), spec.frac_bits,
                          int_bits=_int_bits(spec))
        m.submodules[f"align{lane}"] = al
        m.d.comb += [al.sign.eq(mul.o.sign), al.sig.eq(mul.o.sig), al.exp.eq(mul.o.exp)]
        return al

    def _lane_scales(self, m: Module, lane: int):
        """Lane ``lane``'s scale codes this pass (a multiplexer when passes cross blocks)."""
        spec, lanes, passes, blk = self._spec, self._lanes, self._passes, self.s0.block
        if spec.scale_format is None:
            return None
        idx = [(g * lanes + lane) // spec.block for g in range(passes)]
        if len(set(idx)) == 1:
            return scale_codes(spec, blk, idx[0])
        return tuple(select(m, self.s0.p, [scale_codes(spec, blk, j)[side] for j in idx],
                             f"{name}_lane{lane}") for side, name in ((0, "sa"), (1, "sb")))

    def c_sign(self, c):
        """The sign C is aligned with."""
        return c.sign

    def c_joins(self, p):
        """Whether C is added in pass ``p``: in the first pass only."""
        return p == 0

    def acc_in(self, acc, p):
        """What the accumulator adds to this pass's terms: nothing in pass 0 (a new block),
        else its value."""
        return Mux(p == 0, 0, acc)


class PostPipeline(wiring.Component):
    """S1..S``stages`` (normalise | round | pack), the chain's feedback register and the output
    register.

    A block's sum enters S1 in the cycle its last pass runs; each stage holds one cycle. From
    the last stage a result goes to the feedback register and, for a ``last`` block, to the
    output register, whose valid bit is ``o.valid``. While ``o.valid`` is high and ``o.ready``
    low, ``status.stall`` is high and nothing moves.

    Members: ``s0`` (in, :func:`s0_signature`), ``exponents`` (in,
    :func:`exponents_signature`), ``acc`` (in, :func:`sum_signature`), ``status`` (out,
    :func:`status_signature`), ``o`` (out, ``stream.Signature(unsigned(32))``: FP32 codes).
    """

    #: The blocks it builds (a subclass may name others with the same constructor and ports).
    normaliser: type[Normaliser] = Normaliser
    rounder: type[Rounder] = Rounder
    packer: type[Packer] = Packer

    def __init__(self, spec: UnitSpec, microarch: MicroArch):
        self._spec, self._stages = spec, microarch.stages
        super().__init__({"s0": In(s0_signature(spec, microarch)),
                          "exponents": In(exponents_signature()),
                          "acc": In(sum_signature(spec)),
                          "status": Out(status_signature()),
                          "o": Out(stream.Signature(unsigned(32)))})

    @property
    def spec(self) -> UnitSpec:
        return self._spec

    def elaborate(self, platform):
        m = Module()
        out_valid = Signal()
        out_code = Signal(32)
        stall = self.status.stall
        m.d.comb += [stall.eq(self.stalled(out_valid)), self.o.valid.eq(out_valid),
                     self.o.payload.eq(out_code)]
        f, code = self._stages_of(m)
        with m.If(~stall & f.valid):
            m.d.sync += self.status.feedback.eq(code)
        with m.If(self.taken()):
            m.d.sync += out_valid.eq(0)
        with m.If(~stall & f.valid & self.leaves(f)):
            m.d.sync += [out_valid.eq(1), out_code.eq(code)]
        return m

    def _stages_of(self, m: Module):
        """S1..S``stages`` and their blocks; the last stage's flags and the packed code."""
        spec, stall, ex = self._spec, self.status.stall, self.exponents
        man = formats.get(spec.acc_format).man_bits
        flags = data.StructLayout({"valid": 1, "last": 1, "nan": 1, "pinf": 1, "ninf": 1})
        s1 = Signal(data.StructLayout({"f": flags, "sum": signed(sum_bits(spec)),
                                       "e_max": signed(EXP_WIDTH)}))
        with m.If(~stall):
            m.d.sync += [s1.f.valid.eq(self.s0.done), s1.f.last.eq(self.s0.block.last),
                         s1.f.nan.eq(ex.nan), s1.f.pinf.eq(ex.pinf), s1.f.ninf.eq(ex.ninf),
                         s1.sum.eq(self.acc.sum), s1.e_max.eq(ex.e_max)]
        m.submodules.norm = norm = self.normaliser(sum_bits(spec), man, spec.frac_bits)
        m.submodules.rnd = rnd = self.rounder(man, spec.acc_rounding)
        m.submodules.pack = pack = self.packer(man, spec.acc_rounding, spec.overflow)
        m.d.comb += [norm.sum.eq(s1.sum), norm.e_max.eq(s1.e_max)]
        f = s1.f
        busy = [s1.f.valid]
        nlayout = data.StructLayout({"f": flags, "n": normalised_layout(man)})
        n_src = norm.o
        if self._stages >= 2:                       # a register after the normaliser
            s2 = Signal(nlayout)
            with m.If(~stall):
                m.d.sync += [s2.f.eq(f), s2.n.eq(norm.o)]
            f, n_src = s2.f, s2.n
            busy.append(s2.f.valid)
        m.d.comb += rnd.i.eq(n_src)
        r_src = rnd.o
        if self._stages >= 3:                       # and one after rounding
            s3 = Signal(nlayout)
            with m.If(~stall):
                m.d.sync += [s3.f.eq(f), s3.n.eq(rnd.o)]
            f, r_src = s3.f, s3.n
            busy.append(s3.f.valid)
        m.d.comb += [pack.i.eq(r_src), pack.nan.eq(f.nan), pack.pinf.eq(f.pinf),
                     pack.ninf.eq(f.ninf), self.status.busy.eq(any_of(busy))]
        return f, pack.code

    def stalled(self, out_valid):
        """Whether the pipeline stalls: the output register holds a result not taken."""
        return out_valid & ~self.o.ready

    def taken(self):
        """Whether the result in the output register is taken this cycle (it then leaves)."""
        return self.o.valid & self.o.ready

    def leaves(self, f):
        """Whether a result of the last post stage (flags ``f``) goes to ``o``: a ``last``
        block's."""
        return f.last
