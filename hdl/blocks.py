"""The datapath's sub-blocks, each a combinational ``wiring.Component`` built from a spec.

Every block is pure logic (no clock); the stages of :mod:`hdl.stages` place the pipeline
registers between them. Each decision a block makes is a small method (``Decoder.sign``,
``Rounder.round_up``...), so a subclass can replace one of them alone. The arithmetic is the
numerics engine's (``mxsim.engine.fast``) for a single fused step, bit for bit:

=================  ==========================================================================
``Decoder``        element code -> sign, exponent, significand, zero/Inf/NaN (``formats.fields``)
``Multiplier``     two codes (and E8M0 scale codes) -> exact product and alignment exponent
``MaxTree``        the largest of n signed exponents
``Aligner``        a term cut to ``frac_bits`` below the largest exponent, truncated, signed
``AdderTree``      the exact sum of n signed terms
``Normaliser``     sum -> leading one, significand of the accumulator format, guard and sticky
``Rounder``        round to nearest even or toward zero, carry into the exponent
``Packer``         overflow, specials and the FP32 code
=================  ==========================================================================
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from mxsim import formats
from mxsim.formats import Overflow, Rounding
from mxsim.microarch import RTL_EXP_WIDTH

__all__ = ["EXP_WIDTH", "FP32_EMIN", "FP32_EMAX", "FP32_BIAS", "Decoder", "Multiplier",
           "MaxTree", "Aligner", "AdderTree", "Normaliser", "Rounder", "Packer",
           "decoded_layout", "product_layout", "normalised_layout", "scale_sig_bits",
           "sig_width", "clog2"]

#: Signed width of every exponent in flight (element, scale and accumulator exponents, e_zero);
#: check_rtl holds every spec it passes to this width.
EXP_WIDTH = RTL_EXP_WIDTH
FP32_EMIN, FP32_EMAX, FP32_BIAS = -126, 127, 127


def clog2(n: int) -> int:
    return max(0, (n - 1).bit_length())


def sig_width(fmt: formats.Format) -> int:
    """Bits of a decoded significand (hidden bit included; int8: the magnitude, up to 128)."""
    return 8 if fmt.kind == "int" else fmt.man_bits + 1


def decoded_layout(fmt: formats.Format) -> data.StructLayout:
    return data.StructLayout({
        "sign": 1, "exp": signed(EXP_WIDTH), "sig": unsigned(sig_width(fmt)),
        "zero": 1, "inf": 1, "nan": 1,
    })


class Decoder(wiring.Component):
    """An element code of ``fmt`` as ``formats.Format.fields`` and ``classify`` see it.

    Members: ``code`` (in), ``o`` (out, :func:`decoded_layout`). For Inf/NaN codes ``sig`` is
    0, as the engine has it. Combinational.
    """

    def __init__(self, fmt: str | formats.Format):
        self._fmt = formats.get(fmt)
        super().__init__({"code": In(self._fmt.bits), "o": Out(decoded_layout(self._fmt))})

    def elaborate(self, platform):
        m = Module()
        f, code, o = self._fmt, self.code, self.o
        if f.kind == "int":
            value = code.as_signed()
            m.d.comb += [o.sign.eq(code[-1]), o.exp.eq(0),
                         o.sig.eq(Mux(code[-1], -value, value)), o.zero.eq(code == 0)]
            return m
        man = code[:f.man_bits] if f.man_bits else Const(0, 1)
        expf = code[f.man_bits:f.man_bits + f.exp_bits]
        mag = code[:f.man_bits + f.exp_bits]
        top = (1 << f.exp_bits) - 1
        if f.specials is formats.Specials.IEEE:
            m.d.comb += [o.nan.eq((expf == top) & (man != 0)), o.inf.eq((expf == top) & (man == 0))]
        elif f.specials is formats.Specials.FN:
            m.d.comb += o.nan.eq(self.fn_nan(mag))
        normal = expf != 0
        sig = Signal(sig_width(f))
        m.d.comb += sig.eq(Cat(man, normal) if f.man_bits else normal)
        m.d.comb += [
            o.sign.eq(self.sign(code)),
            o.exp.eq(Mux(normal, expf, self.subnormal_exp()) - f.bias),
            o.sig.eq(Mux(o.nan | o.inf, 0, sig)),
            o.zero.eq((sig == 0) & ~o.nan & ~o.inf),
        ]
        return m

    def sign(self, code):
        """The sign bit of a float code (0 for an unsigned format)."""
        return code[-1] if self._fmt.signed else 0

    def fn_nan(self, mag):
        """NaN of a finite-and-NaN (FN) format such as E4M3: the all-ones magnitude ``mag``."""
        f = self._fmt
        return mag == (1 << (f.man_bits + f.exp_bits)) - 1

    def subnormal_exp(self) -> int:
        """The exponent field a subnormal (field 0) is read as: 1, so it weighs 2**(1 - bias)."""
        return 1


def scale_sig_bits(scale_format: str | None) -> int:
    """Significand bits a scale adds to a product: none for E8M0 (a power of two), four for
    UE4M3 (hidden bit and three fraction bits)."""
    return 4 if scale_format == "ue4m3" else 0


def product_layout(a: formats.Format, b: formats.Format,
                   scale_format: str | None = None) -> data.StructLayout:
    return data.StructLayout({
        "sign": 1, "sig": unsigned(sig_width(a) + sig_width(b)
                                   + 2 * scale_sig_bits(scale_format)),
        "exp": signed(EXP_WIDTH), "nan": 1, "inf": 1,
    })


class Multiplier(wiring.Component):
    """One exact product: A and B codes (and, with ``scale_format``, their scale codes).

    ``o.exp`` is the alignment exponent ``e_a + e_b`` (plus the scale exponents) with the
    significand product left in [0, 4) (MMA-Sim's raw products; in [0, 16) with UE4M3 scales,
    whose significands multiply in), or ``e_zero`` for a zero or special product. ``o.nan``
    covers NaN operands, NaN scales (E8M0 0xFF, UE4M3 0x7F/0xFF) and Inf x 0 (a zero scale
    included); ``o.inf`` the other Inf products, signed by ``o.sign``. Combinational.

    Members: ``a``, ``b`` (in, element codes), ``sa``, ``sb`` (in, scale codes; scaled
    products only), ``o`` (out, :func:`product_layout`).
    """

    #: The decoders of A's and B's element codes (a subclass may name others with the same
    #: constructor and ports).
    a_decoder: type[Decoder] = Decoder
    b_decoder: type[Decoder] = Decoder

    def __init__(self, a_format: str, b_format: str, *, scale_format: str | None, e_zero: int):
        if scale_format not in (None, "e8m0", "ue4m3"):
            raise ValueError(f"scale_format must be None, e8m0 or ue4m3, not {scale_format!r}")
        self._a, self._b = formats.get(a_format), formats.get(b_format)
        self._scale, self._e_zero = scale_format, e_zero
        ports = {"a": In(self._a.bits), "b": In(self._b.bits),
                 "o": Out(product_layout(self._a, self._b, scale_format))}
        if scale_format is not None:
            ports.update(sa=In(8), sb=In(8))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.submodules.da = da = self.a_decoder(self._a)
        m.submodules.db = db = self.b_decoder(self._b)
        m.d.comb += [da.code.eq(self.a), db.code.eq(self.b)]
        x, y, o = da.o, db.o, self.o
        exp = Signal(signed(EXP_WIDTH))
        m.d.comb += exp.eq(x.exp + y.exp)
        nan = x.nan | y.nan
        zero = (x.sig == 0) | (y.sig == 0)
        sig = x.sig * y.sig
        zero_factor = x.zero | y.zero
        if self._scale == "e8m0":
            nan = nan | (self.sa == 0xFF) | (self.sb == 0xFF)
            m.d.comb += exp.eq(x.exp + y.exp + self.sa + self.sb - self.e8m0_bias())
        elif self._scale == "ue4m3":
            m.submodules.dsa = dsa = Decoder("ue4m3")
            m.submodules.dsb = dsb = Decoder("ue4m3")
            m.d.comb += [dsa.code.eq(self.sa), dsb.code.eq(self.sb)]
            nan = nan | dsa.o.nan | dsb.o.nan
            m.d.comb += exp.eq(x.exp + y.exp + dsa.o.exp + dsb.o.exp)
            zero = zero | (dsa.o.sig == 0) | (dsb.o.sig == 0)
            zero_factor = zero_factor | dsa.o.zero | dsb.o.zero
            sig = self.scaled_sig(sig, dsa.o.sig, dsb.o.sig)
        inf = x.inf | y.inf
        nan = nan | self.invalid(inf, zero_factor)
        psig = Signal.like(o.sig)
        m.d.comb += [
            psig.eq(sig),
            o.sign.eq(x.sign ^ y.sign),
            o.sig.eq(psig),
            o.exp.eq(self.product_exp(exp, zero)),
            o.nan.eq(nan),
            o.inf.eq(inf & ~nan),
        ]
        return m

    def e8m0_bias(self) -> int:
        """What the two E8M0 scale fields lose to their biases together: 2 * 127."""
        return 254

    def scaled_sig(self, sig, sa_sig, sb_sig):
        """The product's significand with both UE4M3 scales' significands multiplied in."""
        return sig * (sa_sig * sb_sig)

    def invalid(self, inf, zero_factor):
        """Inf x 0 (a zero scale included), which is NaN."""
        return inf & zero_factor

    def product_exp(self, exp, zero):
        """The alignment exponent: ``exp``, or ``e_zero`` when the product is zero or special
        (its significand is 0), so it never sets the block's maximum."""
        return Mux(zero, self._e_zero, exp)


class MaxTree(wiring.Component):
    """The largest of ``n`` signed ``width``-bit values: a balanced tree of comparators.

    Members: ``i`` (in, ``n`` values), ``o`` (out). Combinational.
    """

    def __init__(self, n: int, width: int = EXP_WIDTH):
        self._n, self._width = n, width
        super().__init__({"i": In(data.ArrayLayout(signed(width), n)), "o": Out(signed(width))})

    def elaborate(self, platform):
        m = Module()

        def node(depth, j, x, y):
            s = Signal(signed(self._width), name=f"max_{depth}_{j}")
            m.d.comb += s.eq(Mux(self.pick(depth, j, x, y), x, y))
            return s

        m.d.comb += self.o.eq(_reduce_tree([self.i[j] for j in range(self._n)], node))
        return m

    def pick(self, depth: int, j: int, x, y):
        """Whether comparator ``j`` of level ``depth`` passes ``x`` on (else ``y``)."""
        return x >= y


class Aligner(wiring.Component):
    """A term ``(-1)**sign * sig * 2**(exp - man_bits)`` as a signed integer in units of
    ``2**(e_max - frac_bits)``, its magnitude truncated (toward zero).

    ``sig`` has ``sig_bits`` bits and is below ``2**(man_bits + int_bits)``, so the result
    fits ``frac_bits + int_bits + 1`` bits plus the sign. ``e_max >= exp`` is the caller's
    promise. Members: ``sign``, ``sig``, ``exp``, ``e_max`` (in), ``q`` (out). Combinational.
    """

    def __init__(self, sig_bits: int, man_bits: int, frac_bits: int, *, int_bits: int = 2):
        self._sig_bits, self._man, self._frac = sig_bits, man_bits, frac_bits
        self._int = int_bits
        super().__init__({
            "sign": In(1), "sig": In(sig_bits), "exp": In(signed(EXP_WIDTH)),
            "e_max": In(signed(EXP_WIDTH)), "q": Out(signed(self.q_bits + 1)),
        })

    @property
    def q_bits(self) -> int:
        return self._frac + self._int + 1

    @property
    def shift_bits(self) -> int:
        """Bits of the shift distance that can matter (a longer shift gives 0)."""
        return max(1, (self._sig_bits + max(0, self._frac - self._man)).bit_length())

    def elaborate(self, platform):
        m = Module()
        pre = max(0, self._frac - self._man)             # left shift: F above the LSB
        post = max(0, self._man - self._frac)            # or right shift: bits below F
        x = Signal(self._sig_bits + pre)
        m.d.comb += x.eq(self.sig << pre)
        d = Signal(unsigned(EXP_WIDTH + 1))
        m.d.comb += d.eq(self.e_max - self.exp + post)
        mag = self.cut(m, x, d)
        m.d.comb += self.q.eq(Mux(self.sign, -mag, mag))
        return m

    def cut(self, m: Module, x, d):
        """The magnitude ``x >> d``, the bits shifted out dropped (truncation)."""
        mag = Signal(self.q_bits)
        m.d.comb += mag.eq(Mux(d >= len(x), 0, x >> d[:self.shift_bits]))
        return mag


class AdderTree(wiring.Component):
    """The exact sum of ``n`` signed ``width``-bit terms: a balanced tree of adders, each
    level one bit wider. Members: ``i`` (in, ``n`` terms), ``o`` (out). Combinational."""

    def __init__(self, n: int, width: int):
        self._n, self._width = n, width
        super().__init__({"i": In(data.ArrayLayout(signed(width), n)),
                          "o": Out(signed(width + clog2(n)))})

    def elaborate(self, platform):
        m = Module()

        def node(depth, j, x, y):
            s = Signal(signed(self.sum_width(depth)), name=f"add_{depth}_{j}")
            m.d.comb += s.eq(x + y)
            return s

        m.d.comb += self.o.eq(_reduce_tree([self.i[j] for j in range(self._n)], node))
        return m

    def sum_width(self, depth: int) -> int:
        """Bits of a sum at level ``depth`` (0 first): one more than its terms, so no carry is
        lost."""
        return self._width + depth + 1


def _reduce_tree(items: list, node) -> object:
    """A balanced tree over ``items``: ``node(depth, j, x, y)`` gives pair ``j`` of level
    ``depth``; an odd item out passes to the next level."""
    level, depth = list(items), 0
    while len(level) > 1:
        nxt = [node(depth, j // 2, level[j], level[j + 1]) for j in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level, depth = nxt, depth + 1
    return level[0]


def normalised_layout(man_bits: int) -> data.StructLayout:
    return data.StructLayout({"sign": 1, "zero": 1, "exp": signed(EXP_WIDTH),
                              "sig": unsigned(man_bits + 1), "guard": 1, "sticky": 1})


class Normaliser(wiring.Component):
    """``sum * 2**(e_max - frac_bits)`` cut to the accumulator's precision: its significand
    (``man_bits + 1`` bits, below ``2**man_bits`` when subnormal), the guard bit and the
    sticky OR of the bits below. ``o.exp`` is the exponent (FP32's emin when subnormal).

    Members: ``sum``, ``e_max`` (in), ``o`` (out, :func:`normalised_layout`). Combinational.
    """

    def __init__(self, sum_bits: int, man_bits: int, frac_bits: int):
        self._sum_bits, self._man, self._frac = sum_bits, man_bits, frac_bits
        super().__init__({"sum": In(signed(sum_bits)), "e_max": In(signed(EXP_WIDTH)),
                          "o": Out(normalised_layout(man_bits))})

    @property
    def sum_bits(self) -> int:
        return self._sum_bits

    def elaborate(self, platform):
        m = Module()
        w, mb = self._sum_bits, self._man
        mag = Signal(w)
        m.d.comb += mag.eq(Mux(self.sum < 0, -self.sum, self.sum))
        lead = Signal(range(w + 1))                 # index of the leading one
        for j in range(w):
            with m.If(mag[j]):
                m.d.comb += lead.eq(self.lead_index(j))
        lsb = Signal(signed(EXP_WIDTH))             # exponent of the sum's LSB
        m.d.comb += lsb.eq(self.e_max - self._frac)
        ev = Signal(signed(EXP_WIDTH))
        m.d.comb += ev.eq(lsb + lead)
        normal = ev >= FP32_EMIN
        r = Signal(signed(EXP_WIDTH))               # right shift to keep man_bits + 1 bits
        m.d.comb += r.eq(Mux(normal, lead - mb, self.subnormal_shift(lsb)))
        left = Signal(range(mb + 1))
        m.d.comb += left.eq(Mux(r < 0, -r, 0))
        right = Signal(range(w + 2))
        m.d.comb += right.eq(Mux(r <= 0, 0, Mux(r > w + 1, w + 1, r)))
        # mag, with two bits appended below, shifted right: guard and the top sticky bit.
        ext = Signal(w + 2)
        m.d.comb += ext.eq(mag << 2)
        shifted = Signal(w + 2)
        m.d.comb += shifted.eq(ext >> right)
        mask = Signal(w + 2)
        m.d.comb += mask.eq((Const(1, w + 3) << right) - 1)
        low = Signal(w + 2)
        m.d.comb += low.eq(ext & mask)                  # bits shifted out (the pad is zeros)
        o = self.o
        m.d.comb += [
            o.sign.eq(self.sum < 0),
            o.zero.eq(mag == 0),
            o.exp.eq(Mux(normal, ev, FP32_EMIN)),
            o.sig.eq(Mux(r <= 0, mag << left, shifted[2:])),
            o.guard.eq(Mux(r <= 0, 0, shifted[1])),
            o.sticky.eq(self.sticky(r, shifted, low)),
        ]
        return m

    def lead_index(self, j: int) -> int:
        """What the leading-one detector reports when bit ``j`` is the highest one: ``j``."""
        return j

    def subnormal_shift(self, lsb):
        """The right shift of a subnormal result, whose exponent is FP32's emin (``lsb``: the
        exponent of the sum's LSB)."""
        return FP32_EMIN - self._man - lsb

    def sticky(self, r, shifted, low):
        """The OR of every bit below the guard bit (none when the sum shifts left, ``r <= 0``)."""
        return Mux(r <= 0, 0, shifted[0] | (low != 0))


class Rounder(wiring.Component):
    """Round the normalised significand (``rne`` or ``rz``); a carry out moves the exponent.

    Members: ``i`` (in), ``o`` (out), both :func:`normalised_layout`. Combinational.
    """

    def __init__(self, man_bits: int, rounding: Rounding):
        self._man, self._rounding = man_bits, Rounding(rounding)
        layout = normalised_layout(man_bits)
        super().__init__({"i": In(layout), "o": Out(layout)})

    def elaborate(self, platform):
        m = Module()
        i, o, mb = self.i, self.o, self._man
        s = Signal(mb + 2)
        m.d.comb += s.eq(i.sig + self.round_up(i))
        m.d.comb += [o.sign.eq(i.sign), o.zero.eq(i.zero), o.guard.eq(0), o.sticky.eq(0),
                     o.sig.eq(Mux(s[mb + 1], s[1:], s)), o.exp.eq(i.exp + self.carry(s))]
        return m

    def round_up(self, i):
        """Whether the significand of ``i`` rounds up: to nearest even on guard and sticky
        (``rne``), never (``rz``)."""
        return (i.guard & (i.sticky | i.sig[0])) if self._rounding is Rounding.RNE else 0

    def carry(self, s):
        """The carry out of the rounded significand ``s``, which adds one to the exponent."""
        return s[self._man + 1]


class Packer(wiring.Component):
    """The FP32 code: overflow (by the spec's policy), zeros (+0, exact or a sum rounded to
    zero below the least subnormal), NaN (0x7FFFFFFF) and
    signed Inf, else the significand and exponent in place (an E8Mn accumulator's code padded
    with zeros below).

    Members: ``i`` (in, :func:`normalised_layout`), ``nan``, ``pinf``, ``ninf`` (in, the
    block's special flags), ``code`` (out). Combinational.
    """

    def __init__(self, man_bits: int, rounding: Rounding, overflow: Overflow):
        self._man, self._rounding, self._overflow = man_bits, Rounding(rounding), overflow
        super().__init__({"i": In(normalised_layout(man_bits)), "nan": In(1), "pinf": In(1),
                          "ninf": In(1), "code": Out(32)})

    def elaborate(self, platform):
        m = Module()
        i, mb = self.i, self._man
        field = Signal(8)
        m.d.comb += field.eq(Mux(i.sig[mb], i.exp + FP32_BIAS, 0))
        mant = i.sig[:mb] if mb else Const(0, 1)
        finite = Cat(Const(0, 23 - mb), mant, field, i.sign)
        inf = Cat(Const(0, 23), Const(0xFF, 8), i.sign)
        big = Cat(Const(0, 23 - mb), Const((1 << mb) - 1, mb), Const(0xFE, 8), i.sign)
        to_max = self._overflow is Overflow.SATURATE or (
            self._overflow is Overflow.IEEE and self._rounding is Rounding.RZ)
        with m.If(self.nan | (self.pinf & self.ninf)):
            m.d.comb += self.code.eq(self.nan_code())
        with m.Elif(self.pinf):
            m.d.comb += self.code.eq(0x7F800000)
        with m.Elif(self.ninf):
            m.d.comb += self.code.eq(self.neg_inf_code())
        with m.Elif(i.zero | (i.sig == 0)):      # exact, or rounded away below the least step
            m.d.comb += self.code.eq(0)
        with m.Elif(self.overflows(i.exp)):
            m.d.comb += self.code.eq(big if to_max else inf)
        with m.Else():
            m.d.comb += self.code.eq(finite)
        return m

    def overflows(self, exp):
        """Whether a rounded result of exponent ``exp`` is beyond FP32's largest binade."""
        return exp > FP32_EMAX

    def nan_code(self) -> int:
        """The one NaN every NaN result gives (the engine's, ``UnitSpec``'s NaN output)."""
        return 0x7FFFFFFF

    def neg_inf_code(self) -> int:
        """The code of -Inf."""
        return 0xFF800000
