"""``DotProductUnit``: the MX multiply-accumulate datapath of a ``UnitSpec``, as a stream.

Timing contract (``mxsim.cycle.UnitModel`` steps the same machine; docs/rtl.md has the port
map). One input beat is one K-block of a dot product: K codes of A's row and B's column, their
E8M0 or UE4M3 scale codes (scaled specs), C (FP32 code) and ``first``/``last`` markers. A chain of
blocks from ``first`` to ``last`` is one long dot product: each block's result, rounded as the
spec rounds an instruction's result, is the next block's C (``c`` is read only on ``first``
blocks). Only ``last`` blocks produce an output beat, the FP32 code of D.

Registers: the block stage S0 (the accepted beat and a pass counter), the accumulator, the
post stages S1..S``stages`` (normalise | round | pack, cut as ``MicroArch.stages`` says), the
output register, and the chain's feedback register.

- ``i.ready`` is high when S0 is empty or finishes its block this cycle.
- A block spends ``P = k / lanes`` cycles (passes) in S0; pass ``p`` multiplies, aligns and
  adds lanes ``p*lanes ... p*lanes + lanes - 1`` (and C in pass 0) into the accumulator. A
  chained block (``first`` low) starts its passes only when no older block is in S1..S``R``
  (it needs the previous result).
- Each post stage holds one cycle; the last one writes the feedback register and, for a
  ``last`` block, the output register.
- ``o.valid`` is the output register's valid bit. While it holds a beat that is not taken
  (``o.ready`` low) the whole pipeline stalls.

So an unstalled block's result is valid ``P + stages + 1`` cycles after its handshake;
independent blocks are accepted every ``P`` cycles, links of one chain every ``P + stages``.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from mxsim import formats
from mxsim.microarch import MicroArch, MicroArchError, check_rtl
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
    normalised_layout,
    scale_sig_bits,
    sig_width,
)

__all__ = ["DotProductUnit", "block_layout"]


def block_layout(spec: UnitSpec) -> data.StructLayout:
    """One input beat: a K-block of one dot product (see the module docstring)."""
    fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)
    fields = {"a": data.ArrayLayout(unsigned(fa.bits), spec.k),
              "b": data.ArrayLayout(unsigned(fb.bits), spec.k)}
    if spec.scale_format is not None:
        fields.update(a_scale=unsigned(8), b_scale=unsigned(8))
    fields.update(c=unsigned(32), first=1, last=1)
    return data.StructLayout(fields)


class DotProductUnit(wiring.Component):
    """The dot-product-add unit of ``spec``, built as ``microarch`` says.

    Members: ``i`` (in, ``stream.Signature(block_layout(spec))``), ``o`` (out,
    ``stream.Signature(32)``: FP32 codes of D). Latency, interval and the cycle-by-cycle
    behaviour are in the module docstring; ``latency`` and ``passes`` give them as numbers.

    ``fault`` elaborates a mutant with one injected fault, named in
    ``testbenches.mutants.FAULTS`` (mutation testing of the testbench); never for use.
    """

    def __init__(self, spec: UnitSpec, microarch: MicroArch | None = None, *,
                 fault: str | None = None):
        microarch = microarch or MicroArch(lanes=spec.k or 1)
        self._fault = fault                 # one injected fault (testbenches.mutants), or None
        try:
            check_rtl(spec, microarch)
        except MicroArchError:
            self._MustUse__silence = True        # never built, so never "unused"
            raise
        self._spec, self._ua = spec, microarch
        fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)
        acc = formats.get(spec.acc_format)
        self._fa, self._fb, self._man = fa, fb, acc.man_bits
        # Products are below 4 (16 with UE4M3 scales, whose significands multiply in).
        self._int_bits = 2 + (2 if spec.scale_format == "ue4m3" else 0)
        self._q_bits = spec.frac_bits + self._int_bits + 1
        self._sum_bits = self._q_bits + 1 + clog2(spec.k + 1)
        super().__init__({"i": In(stream.Signature(block_layout(spec))),
                          "o": Out(stream.Signature(unsigned(32)))})

    @property
    def spec(self) -> UnitSpec:
        return self._spec

    @property
    def microarch(self) -> MicroArch:
        return self._ua

    @property
    def passes(self) -> int:
        return self._ua.passes(self._spec)

    @property
    def latency(self) -> int:
        return self._ua.latency(self._spec)

    def elaborate(self, platform):
        m = Module()
        spec, ua, fault = self._spec, self._ua, self._fault
        k, lanes, passes, R = spec.k, ua.lanes, self.passes, ua.stages
        scaled = spec.scale_format is not None
        fa, fb = self._fa, self._fb
        ssb = scale_sig_bits(spec.scale_format)

        # -- state ---------------------------------------------------------------------------
        s0_valid = Signal()
        blk = Signal(block_layout(spec))
        p = Signal(range(max(passes, 2)))
        acc = Signal(signed(self._sum_bits))
        fb_code = Signal(32)                       # the previous block's result (chain C)
        out_valid = Signal()
        out_code = Signal(32)

        # -- control ---------------------------------------------------------------------------
        stall = Signal()
        post_busy = Signal()
        go = Signal()
        s0_done = Signal()
        m.d.comb += [
            stall.eq(0 if fault == "stall-ignored" else out_valid & ~self.o.ready),
            go.eq(s0_valid & (blk.first | ~post_busy | (fault == "chain-no-wait")) & ~stall),
            s0_done.eq(go & (p == passes - 1)),
            self.i.ready.eq(~s0_valid | (s0_valid & (p == passes - 1) if fault ==
                                         "ready-ignores-stall" else s0_done)),
            self.o.valid.eq(out_valid),
            self.o.payload.eq(out_code),
        ]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [s0_valid.eq(1), blk.eq(self.i.payload), p.eq(0)]
        with m.Elif(s0_done):
            m.d.sync += s0_valid.eq(0)
        with m.If(go & ~s0_done):
            m.d.sync += p.eq(p + 1)

        # -- every product's exponent and special flags (the whole block, every pass; the
        # significand products of these are unused, and synthesis drops them) -------------------
        mults = []
        for j in range(k):
            mul = Multiplier(spec.a_format, spec.b_format, scale_format=spec.scale_format,
                             e_zero=spec.e_zero, fault=fault)
            m.submodules[f"exp{j}"] = mul
            m.d.comb += [mul.a.eq(blk.a[j]), mul.b.eq(blk.b[j])]
            if scaled:
                m.d.comb += [mul.sa.eq(blk.a_scale), mul.sb.eq(blk.b_scale)]
            mults.append(mul)
        c_code = Signal(32)
        m.d.comb += c_code.eq(Mux(blk.first & (fault != "first-ignored"), blk.c, fb_code))
        m.submodules.dec_c = dc = Decoder("fp32")
        m.d.comb += dc.code.eq(c_code)
        m.submodules.max_tree = mt = MaxTree(k + 1, fault=fault)
        for j, mul in enumerate(mults):
            m.d.comb += mt.i[j].eq(mul.o.exp)
        c_special = dc.o.zero | dc.o.nan | dc.o.inf | (fault == "max-tree-drops-c")
        m.d.comb += mt.i[k].eq(Mux(c_special, spec.e_zero, dc.o.exp))
        e_max = mt.o
        nan = Signal()
        pinf = Signal()
        ninf = Signal()
        m.d.comb += [
            nan.eq(dc.o.nan | _any(mul.o.nan for mul in mults)),
            pinf.eq((dc.o.inf & ~dc.o.sign) | _any(mul.o.inf & ~mul.o.sign for mul in mults)),
            ninf.eq((dc.o.inf & dc.o.sign) | _any(mul.o.inf & mul.o.sign for mul in mults)),
        ]

        # -- this pass's lanes: align and add (C joins in pass 0) -------------------------------
        psig_bits = sig_width(fa) + sig_width(fb) + 2 * ssb
        mab = fa.man_bits + fb.man_bits + 2 * max(0, ssb - 1)
        m.submodules.adders = adders = AdderTree(lanes + 1, self._q_bits + 1, fault=fault)
        for lane in range(lanes):
            # The lane's operands this pass (a multiplexer when lanes < k), its product.
            if passes > 1:
                a_sel = _select(m, p, [blk.a[g * lanes + lane] for g in range(passes)],
                                f"a_lane{lane}")
                b_sel = _select(m, p, [blk.b[g * lanes + lane] for g in range(passes)],
                                f"b_lane{lane}")
            else:
                a_sel, b_sel = blk.a[lane], blk.b[lane]
            mul = Multiplier(spec.a_format, spec.b_format, scale_format=spec.scale_format,
                             e_zero=spec.e_zero, fault=fault)
            m.submodules[f"lane_mul{lane}"] = mul
            m.d.comb += [mul.a.eq(a_sel), mul.b.eq(b_sel)]
            if scaled:
                m.d.comb += [mul.sa.eq(blk.a_scale), mul.sb.eq(blk.b_scale)]
            al = Aligner(psig_bits, mab, spec.frac_bits, int_bits=self._int_bits, fault=fault)
            m.submodules[f"align{lane}"] = al
            m.d.comb += [al.sign.eq(mul.o.sign), al.sig.eq(mul.o.sig), al.exp.eq(mul.o.exp),
                         al.e_max.eq(e_max), adders.i[lane].eq(al.q)]
        m.submodules.align_c = ac = Aligner(24, 23, spec.frac_bits)
        c_pass = (p == 0) | (fault == "c-every-pass")
        m.d.comb += [ac.sign.eq(dc.o.sign & (fault != "align-c-sign")), ac.sig.eq(dc.o.sig),
                     ac.exp.eq(dc.o.exp), ac.e_max.eq(e_max),
                     adders.i[lanes].eq(Mux(c_pass & ~dc.o.zero, ac.q, 0))]
        acc_next = Signal(signed(self._sum_bits))
        cleared = Mux(p == 0, 0, acc) if fault != "acc-not-cleared" else acc
        m.d.comb += acc_next.eq(cleared + adders.o)
        with m.If(go):
            m.d.sync += acc.eq(acc_next)

        # -- post stages: normalise | round | pack --------------------------------------------
        flags = data.StructLayout({"valid": 1, "last": 1, "nan": 1, "pinf": 1, "ninf": 1})
        s1 = Signal(data.StructLayout({"f": flags, "sum": signed(self._sum_bits),
                                       "e_max": signed(EXP_WIDTH)}))
        with m.If(~stall):
            m.d.sync += [s1.f.valid.eq(s0_done), s1.f.last.eq(blk.last), s1.f.nan.eq(nan),
                         s1.f.pinf.eq(pinf), s1.f.ninf.eq(ninf), s1.sum.eq(acc_next),
                         s1.e_max.eq(e_max)]
        m.submodules.norm = norm = Normaliser(self._sum_bits, self._man, spec.frac_bits,
                                              fault=fault)
        m.submodules.rnd = rnd = Rounder(self._man, spec.acc_rounding, fault=fault)
        m.submodules.pack = pack = Packer(self._man, spec.acc_rounding, spec.overflow,
                                          fault=fault)
        m.d.comb += [norm.sum.eq(s1.sum), norm.e_max.eq(s1.e_max)]
        f = s1.f
        busy = [s1.f.valid]
        nlayout = data.StructLayout({"f": flags, "n": normalised_layout(self._man)})
        n_src = norm.o
        if R >= 2:                                  # a register after the normaliser
            s2 = Signal(nlayout)
            with m.If(~stall):
                m.d.sync += [s2.f.eq(f), s2.n.eq(norm.o)]
            f, n_src = s2.f, s2.n
            busy.append(s2.f.valid)
        m.d.comb += rnd.i.eq(n_src)
        r_src = rnd.o
        if R >= 3:                                  # and one after rounding
            s3 = Signal(nlayout)
            with m.If(~stall):
                m.d.sync += [s3.f.eq(f), s3.n.eq(rnd.o)]
            f, r_src = s3.f, s3.n
            busy.append(s3.f.valid)
        m.d.comb += [pack.i.eq(r_src), pack.nan.eq(f.nan), pack.pinf.eq(f.pinf),
                     pack.ninf.eq(f.ninf)]
        m.d.comb += post_busy.eq(_any(busy))

        # -- result: the chain's feedback, and the output register -----------------------------
        with m.If(~stall & f.valid):
            m.d.sync += fb_code.eq(pack.code)
        with m.If(self.o.valid & self.o.ready & (fault != "out-valid-stuck")):
            m.d.sync += out_valid.eq(0)
        with m.If(~stall & f.valid & (f.last | (fault == "last-ignored"))):
            m.d.sync += [out_valid.eq(1), out_code.eq(pack.code)]
        return m


def _any(values):
    out = 0
    for v in values:
        out = out | v
    return out


def _select(m: Module, index, items, name):
    """``items[index]``: a multiplexer."""
    out = Signal(len(items[0]), name=name)
    with m.Switch(index):
        for j, item in enumerate(items):
            with m.Case(j):
                m.d.comb += out.eq(item)
    return out
