"""The miter of ``mxsim prove --rtl``: a user's combinational design (a black box, read by
Yosys from its own sources) against the reference circuit of a unit spec, for one free input.

:class:`ForeignMiter` is a :class:`hdl.formal.miter.Harness` (ports ``clk`` and ``sel``).
Every code of one instruction is free (``AnyConst``: A, B and the block scales; C too where
the map has a C input, else +0) and held in ``beat`` (``block_layout(spec)``, the layout
:func:`testbenches.formal.prove.beats_to_vectors` reads a counterexample from). The codes go
into the design's ports as the port map lays them out (:func:`port_values`: packed lanes,
unpacked-array elements, a port per lane, bit fields; the format select, ``[control]`` and
``[tie]`` values; C's ``first``/``last`` flags set), and into :func:`hdl.formal.tree.
dot_reference`, whose D (an FP32 code) the result is compared with, exactly:

- an FP32 result field: bit for bit (NaN codes included), as ``mxsim verify`` compares it;
- a ``fixed`` result, ``mantissa * 2**(exponent - offset)`` with an optional NaN flag: the
  flag must be set exactly when D is NaN; otherwise the value must be D's exactly (+0 equals
  -0; D = ±Inf never matches: the encoding has none). The design's value is written as an
  FP32 code (:func:`fp32_of`: its leading one gives the exponent) with a flag saying whether
  FP32 holds it exactly; it matches where the flag is set and the codes are equal, so a
  design value that FP32 cannot represent differs from every D. The value is checked field
  by field (zero, sign, exactness, exponent, fraction where D is normal, and where D is
  subnormal one check per range of the scales, :data:`SCALE_SUM_SPLIT`): each check is a
  job of its own, and together they are the value's.

Unpacked arrays: Yosys (yosys-slang) flattens an array port ``[W-1:0] x [L:R]`` to one vector
whose least significant element is index ``R`` (the right-hand bound), element ``i`` at bits
``|i - R| * W`` upwards; :func:`element_offset` says so and ``tests/testbenches/
test_formal_rtl_slang.py`` checks it against Yosys for each way of writing the range.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.asserts import AnyConst
from amaranth.hdl import Instance

from hdl.formal.miter import Harness
from hdl.formal.tree import dot_reference, leading_one
from hdl.stages import block_layout, n_scales
from mxsim.spec import UnitSpec

from ..foreign.portmap import Field, Lanes, PortMap

__all__ = ["ForeignMiter", "element_offset", "port_values", "fp32_of", "TOP",
           "SCALE_SUM_SPLIT"]

#: The harness's module name in RTLIL (not ``top``, which a user's design may be called).
TOP = "mxsim_top"
#: Ranges of the largest sum of a block's two E8M0 scale codes (0..510) that split the check
#: of a subnormal D's fraction: the bottom one rounds everything to zero or the least
#: subnormal, the next ones hold the scales where sums cross FP32's subnormal range (found on
#: example 2 at one element, docs/formal.md).
SCALE_SUM_SPLIT = ((0, 100), (101, 115), (116, 125), (126, 135), (136, 145), (146, 510))


def element_offset(index: int, right: int, width: int) -> int:
    """The bit offset of element ``index`` of an unpacked array port declared ``[L:R]`` with
    elements of ``width`` bits, in the vector Yosys (yosys-slang) flattens it to."""
    return abs(index - right) * width


@dataclass
class _Port:
    """A design port as one flat vector, and the parts the harness drives in it."""
    name: str
    width: int
    parts: list          #: (bit offset, width, Value)


def _flat_width(pm: PortMap, name: str) -> int:
    port = pm.ports[name]
    return port.width * (port.elements or 1)


def _lane_parts(pm: PortMap, ln: Lanes, codes: list, rights: Mapping[str, int]) -> list:
    """(port, bit offset, width, value) of each lane of ``ln`` holding ``codes``."""
    if ln.concat:
        out, at = [], 0
        spans = []
        for name in ln.concat:
            spans.append((name, at, pm.ports[name].width))
            at += pm.ports[name].width
        for code, off in zip(codes, ln.offsets(), strict=True):
            for name, start, width in spans:          # a lane may straddle two ports
                lo, hi = max(off, start), min(off + ln.width, start + width)
                if lo < hi:
                    out.append((name, lo - start, hi - lo, code >> (lo - off)))
        return out
    if ln.layout == "packed":
        return [(ln.port, off, ln.width, code)
                for code, off in zip(codes, ln.offsets(), strict=True)]
    if ln.layout == "array":
        port = pm.ports[ln.port]
        return [(ln.port, element_offset(port.low + i, rights[ln.port], port.width), ln.width,
                 code) for i, code in enumerate(codes)]
    return [(name, 0, ln.width, code)
            for name, code in zip(ln.port_names(), codes, strict=True)]


def port_values(pm: PortMap, spec: UnitSpec, beat, rights: Mapping[str, int]
                ) -> dict[str, _Port]:
    """Each port the map drives, as parts of one flat vector: ``beat``'s codes and C, the
    format select, ``[control]`` and ``[tie]`` values, C's flags. ``rights``: the right-hand
    bound of each unpacked-array port's range."""
    parts = []

    def field(f: Field, value) -> None:
        lsb = 0 if f.bits is None else f.bits[1]
        parts.append((f.port, lsb, pm.ports[f.port].width if f.bits is None else f.width,
                      value))

    parts += _lane_parts(pm, pm.a, [beat.a[i] for i in range(spec.k)], rights)
    parts += _lane_parts(pm, pm.b, [beat.b[i] for i in range(spec.k)], rights)
    sc, n = pm.scales, n_scales(spec)
    for part, codes in ((sc.a, beat.a_scale), (sc.b, beat.b_scale)) if sc.a else ():
        values = [codes] if n == 1 else [codes[j] for j in range(n)]
        if isinstance(part, Lanes):
            parts += _lane_parts(pm, part, values, rights)
        else:
            field(part, values[0])
    acc = pm.accumulator
    if acc.c is not None:
        field(acc.c, beat.c)
    for flag in (acc.first, acc.last):
        if flag is not None:
            field(flag, Const(1, 1))
    sel = pm.format_select
    if sel is not None and sel.by == "port":
        field(Field(sel.name), Const(sel.values[spec.a_format]))
    for ctl in pm.controls:
        field(ctl.field, Const(ctl.value_for(spec)))
    for tie in pm.tie:
        port = pm.ports[tie.port]
        parts += [(tie.port, e * port.width, port.width, Const(tie.value, port.width))
                  for e in range(port.elements or 1)]
    ports: dict[str, _Port] = {}
    for name, offset, width, value in parts:
        ports.setdefault(name, _Port(name, _flat_width(pm, name), [])).parts.append(
            (offset, width, value))
    return ports


class ForeignMiter(Harness):
    """The design behind ``pm`` (resolved for ``spec``, its ports checked) against the
    reference circuit of ``spec``, for one free instruction (see the module docstring).
    ``rights``: each unpacked-array port's right-hand bound. ``beat`` holds the codes."""

    def __init__(self, pm: PortMap, spec: UnitSpec, rights: Mapping[str, int]):
        super().__init__()
        self.pm, self.spec, self.rights = pm, spec, dict(rights)
        self.beat = Signal(block_layout(spec), name="beat")

    def elaborate(self, platform):
        m = self._module()
        pm, spec, beat = self.pm, self.spec, self.beat
        free = Signal(block_layout(spec), name="free")
        m.d.comb += free.eq(AnyConst(block_layout(spec)))
        for name, _ in block_layout(spec):
            if name in ("first", "last"):
                m.d.comb += getattr(beat, name).eq(1)
            elif name != "c" or pm.accumulator.c is not None:    # no C input: C is +0
                m.d.comb += getattr(beat, name).eq(getattr(free, name))
        m.submodules.ref = ref = dot_reference(spec, c_zero=pm.accumulator.c is None)
        m.d.comb += ref.i.eq(beat)
        want = Signal(32, name="want")
        m.d.comb += want.eq(ref.d)
        args = []
        for port in port_values(pm, spec, beat, self.rights).values():
            value = Signal(port.width, name=f"in_{port.name}")
            for offset, width, part in port.parts:
                m.d.comb += value[offset:offset + width].eq(part)
            args.append(("i", port.name, value))
        if pm.clock is not None:
            args.append(("i", pm.clock.port, self.domain.clk))
        if pm.reset is not None:
            args.append(("i", pm.reset.port, Const(1 - pm.reset.active_value, 1)))
        outs = {}
        for f in pm.result.fields():
            if f.port not in outs:
                outs[f.port] = Signal(_flat_width(pm, f.port), name=f"out_{f.port}")
                args.append(("o", f.port, outs[f.port]))
        m.submodules.dut = Instance(pm.design.top, *args)

        def bits(f: Field):
            return outs[f.port] if f.bits is None else outs[f.port][f.bits[1]:f.bits[0] + 1]

        res = pm.result
        if res.field is not None:
            self.check(m, bits(res.field)[:32] == want,
                       "the result code is the reference's D, bit for bit")
        else:
            self._fixed(m, bits, want)
        return m

    def _fixed(self, m: Module, bits, want) -> None:
        """The checks of a ``fixed`` result (see the module docstring)."""
        res = self.pm.result
        raw = bits(res.mantissa)
        if res.sign_magnitude:
            g_neg, g_mag = raw[-1], raw[:-1]
        elif res.mantissa_signed:
            g_neg, g_mag = raw[-1], abs(raw.as_signed())
        else:
            g_neg, g_mag = Const(0), raw
        e_raw = bits(res.exponent)
        width = max(len(e_raw), abs(res.offset).bit_length()) + 3
        g_exp = Signal(signed(width), name="got_exp")
        m.d.comb += g_exp.eq((e_raw.as_signed() if res.exponent_signed else e_raw) - res.offset)
        g_nan = bits(res.nan)[0] if res.nan is not None else Const(0)
        w_nan = (want[23:31] == 0xFF) & (want[:23] != 0)
        code, exact = fp32_of(m, g_neg, g_mag, g_exp, "got")
        self.check(m, g_nan == w_nan, "the NaN flag is set exactly when D is NaN")
        # The value, field by field (each check a proof of its own: together, the value).
        with m.If(~w_nan & ~g_nan):
            self.check(m, (g_mag == 0) == (want[:31] == 0), "the value is zero exactly when "
                                                            "D is")
            with m.If(g_mag != 0):
                self.check(m, g_neg == want[31], "the sign is D's")
                self.check(m, exact, "FP32 holds the value exactly")
                self.check(m, code[23:31] == want[23:31], "the exponent field is D's")
                with m.If(want[23:31] != 0):
                    self.check(m, code[:23] == want[:23], "the fraction field is D's (D "
                                                          "normal)")
                with m.If(want[23:31] == 0):
                    self._subnormal(m, code, want)

    def _subnormal(self, m: Module, code, want) -> None:
        """The fraction of a subnormal D, as a check per range of the largest sum of a
        block's two E8M0 scale codes (:data:`SCALE_SUM_SPLIT`): the ranges cover every sum,
        so the checks together are the one; apart, each closes where the one did not."""
        spec, beat = self.spec, self.beat
        if spec.scale_format != "e8m0":
            self.check(m, code[:23] == want[:23], "the fraction field is D's (D subnormal)")
            return
        n = n_scales(spec)
        sums = [beat.a_scale + beat.b_scale] if n == 1 else \
            [beat.a_scale[j] + beat.b_scale[j] for j in range(n)]
        largest = sums[0]
        for s in sums[1:]:
            largest = Mux(s > largest, s, largest)
        top = Signal(9, name="scale_sum_max")
        m.d.comb += top.eq(largest)
        for lo, hi in SCALE_SUM_SPLIT:
            with m.If((top >= lo) & (top <= hi)):
                self.check(m, code[:23] == want[:23], f"the fraction field is D's (D "
                                                      f"subnormal, scale sums up to {lo}..{hi})")


def fp32_of(m: Module, neg, mag, exp, name: str):
    """``(-1)**neg * mag * 2**exp`` (``mag`` unsigned, non-zero) as an FP32 code, and whether
    FP32 holds it exactly (no bit below its LSB, not above its largest binade)."""
    lead = Signal(range(max(2, len(mag))), name=f"{name}_lead")
    m.d.comb += lead.eq(leading_one(mag)[1])
    e = Signal(signed(len(exp) + 2), name=f"{name}_e")          # the leading one's exponent
    m.d.comb += e.eq(exp + lead)
    q = Signal(signed(len(exp) + 3), name=f"{name}_q")          # mag's bits below FP32's LSB
    m.d.comb += q.eq(Mux(e < -126, -126, e) - 23 - exp)
    drop = Signal(range(len(mag) + 1), name=f"{name}_drop")
    m.d.comb += drop.eq(Mux(q <= 0, 0, Mux(q > len(mag), len(mag), q)))
    lift = Signal(range(24), name=f"{name}_lift")               # at most 23 when q < 0
    m.d.comb += lift.eq(Mux(q < 0, -q, 0))
    sig = Signal(24, name=f"{name}_sig")
    m.d.comb += sig.eq(Mux(q > 0, mag >> drop, mag << lift))
    lost = Signal(name=f"{name}_lost")
    m.d.comb += lost.eq((mag & ((Const(1, len(mag) + 1) << drop) - 1)[:len(mag)]) != 0)
    code = Signal(32, name=f"{name}_code")
    m.d.comb += code.eq(Cat(sig[:23], Mux(sig[23], e + 127, 0)[:8], neg))
    return code, ~lost & (e <= 127)
