"""Port values in and results out for a port map: packing, exact decoding, comparison.

:func:`pack_instructions` turns every instruction of a vector set into ``uint32`` words per
driven port; :func:`decode_results` reads result ports back into FP32/FP16/BF16 codes or the
exact values of a fixed-point encoding (integer mantissa and exponent, never floats);
:func:`compare_results` checks them against the model. Everything is numpy over all
instructions or results at once (bulk runs pack millions); only the listed mismatches
(:data:`~testbenches.sim.backend.VALUE_LIMIT` at most) are worked out one by one, with exact
fractions for their ulps.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from mxsim.formats import Format
from mxsim.vectors import VectorSet

from ...sim.backend import VALUE_LIMIT, Mismatch, MismatchKind, not_listed
from ...sim.census import canonical
from .parse import FORMAT_BITS
from .parts import Field, Lanes, MapError, MapLike

__all__ = ["Beats", "Results", "pack_instructions", "decode_results", "compare_results",
           "compare_flags", "port_words", "WORD", "FLAG_BITS"]

WORD = 32
_MASK32 = np.uint64(0xFFFFFFFF)
#: The status flags' bits, RISC-V fflags order (as mxsim.engine.flags computes them).
FLAG_BITS = {"nv": 0x10, "dz": 0x08, "of": 0x04, "uf": 0x02, "nx": 0x01}


@dataclass
class Beats:
    """Every instruction of a vector set as port values.

    ``ports`` maps each data port (:meth:`PortMap.data_ports`) to ``(instructions, words)``
    uint32 words, least significant first (an unpacked array port: ``(instructions,
    elements, words)``); ``words`` covers the design's port width once
    :meth:`PortMap.check_ports` ran, else the highest bit the map uses. Instructions are in
    dot-product order (batch, row, column), ``per_dot`` consecutive ones per dot product in K
    order; ``last`` marks each dot product's last instruction (its result is the dot's).
    """
    ports: dict[str, npt.NDArray[np.uint32]]
    per_dot: int
    last: npt.NDArray[np.bool_]

    @property
    def instructions(self) -> int:
        return len(self.last)

    def ints(self, port: str) -> list:
        """The values of ``port`` as Python ints, one per instruction (an unpacked array port:
        a list of its elements' per instruction), for simulators that assign integers."""
        words = np.ascontiguousarray(self.ports[port], "<u4")
        flat = words.reshape(-1, words.shape[-1])
        values = [int.from_bytes(row.tobytes(), "little") for row in flat]
        if words.ndim == 3:
            n = words.shape[1]
            return [values[i:i + n] for i in range(0, len(values), n)]
        return values


@dataclass
class Results:
    """Decoded results, one per instruction read.

    FP32/FP16/BF16 encodings: ``codes`` (uint32 bit patterns). ``fixed``: the exact value
    ``mant * 2**exp`` (int64 each; ``exp`` has the offset taken off) and ``nan`` (bool), with
    ``precision`` (magnitude bits of the mantissa) and ``e_min`` (the smallest exponent the
    encoding holds) for ulps. ``raw_mant``/``raw_exp`` are the fields' bits as the design
    wrote them.
    """
    encoding: str
    codes: npt.NDArray[np.uint32] | None = None
    mant: npt.NDArray[np.int64] | None = None
    exp: npt.NDArray[np.int64] | None = None
    nan: npt.NDArray[np.bool_] | None = None
    precision: int = 0
    e_min: int = 0
    #: the ``[status]`` flags read (uint8, RISC-V fflags bits: NV 0x10 ... NX 0x01) and the
    #: mask of those the map reads; None without ``[status]``
    flags: npt.NDArray[np.uint8] | None = None
    flag_mask: int = 0

    def __len__(self) -> int:
        return len(self.codes if self.codes is not None else self.mant)

    def take(self, index: npt.ArrayLike) -> Results:
        """The results at ``index`` (an index array or a boolean mask)."""
        pick = {n: None if getattr(self, n) is None else getattr(self, n)[index]
                for n in ("codes", "mant", "exp", "nan", "flags")}
        return Results(self.encoding, precision=self.precision, e_min=self.e_min,
                       flag_mask=self.flag_mask, **pick)

    def fp32_codes(self) -> npt.NDArray[np.uint32]:
        """Each result as an FP32 code, for traces and coverage (never compared): exact
        when FP32 represents the value (every FP16/BF16 value; a fixed-point value whose
        mantissa fits 24 bits and whose exponent is in range), else a nearby FP32 value
        (rounded through float64; ±Inf beyond FP32's range). NaN is 0x7FC00000."""
        if self.encoding == "fp32":
            return self.codes.astype(np.uint32)
        if self.encoding == "bf16":
            return (self.codes.astype(np.uint32) << np.uint32(16)).astype(np.uint32)
        if self.encoding == "fp16":
            half = self.codes.astype(np.uint16).view(np.float16)
            return half.astype(np.float32).view(np.uint32)
        exp = np.clip(self.exp, -2000, 2000)
        with np.errstate(over="ignore"):        # beyond FP32's range is Inf, as documented
            value = np.ldexp(self.mant.astype(np.float64), exp).astype(np.float32)
        codes = value.view(np.uint32).copy()
        codes[self.nan] = 0x7FC00000
        return codes


# -- packing ------------------------------------------------------------------------------


def _put(words: npt.NDArray[np.uint32], values: npt.NDArray, offset: int, width: int) -> None:
    """OR ``values`` (< 2**32) into bits ``offset .. offset + width - 1`` of ``words[..., :]``
    (bits beyond the last word are dropped: check_ports keeps fields inside their ports)."""
    w, shift = divmod(offset, WORD)
    v = values.astype(np.uint64) << np.uint64(shift)
    if w < words.shape[-1]:
        words[..., w] |= (v & _MASK32).astype(np.uint32)
    if shift + width > WORD and w + 1 < words.shape[-1]:
        words[..., w + 1] |= (v >> np.uint64(WORD)).astype(np.uint32)


def _words(bits: int) -> int:
    return max(1, -(-bits // WORD))


class _Packer:
    """The port arrays of one pack, allocated as fields are placed."""

    def __init__(self, pm: MapLike, n: int):
        self.pm, self.n = pm, n
        self.ports: dict[str, npt.NDArray[np.uint32]] = {}
        self.tops: dict[str, int] = {}
        for part in pm.data_fields():
            if isinstance(part, Lanes) and part.layout == "packed":
                self.tops[part.port] = max(self.tops.get(part.port, 0), part.top)
            elif isinstance(part, Field):
                top = part.bits[0] if part.bits is not None else 0
                self.tops[part.port] = max(self.tops.get(part.port, 0), top)
        for tie in pm.tie:
            self.tops[tie.port] = max(tie.value.bit_length() - 1, 0)
        for ctl in pm.controls:
            top = ctl.field.bits[0] if ctl.field.bits is not None else \
                max(max(ctl.values.values()).bit_length() - 1, 0)
            self.tops[ctl.field.port] = max(self.tops.get(ctl.field.port, 0), top)

    def words(self, port: str, elements: int | None = None) -> npt.NDArray[np.uint32]:
        if port not in self.ports:
            known = self.pm.ports.get(port)
            bits = known.width if known is not None else self.tops.get(port, 31) + 1
            shape = (self.n,) + ((elements,) if elements else ()) + (_words(bits),)
            self.ports[port] = np.zeros(shape, np.uint32)
        return self.ports[port]

    def constant(self, port: str, value: int) -> None:
        """``value`` (of any width) in every instruction, in each element of an array port."""
        known = self.pm.ports.get(port)
        words = self.words(port, None if known is None else known.elements)
        for j in range(words.shape[-1]):
            words[..., j] = (value >> (WORD * j)) & 0xFFFFFFFF

    def field(self, f: Field, values: npt.NDArray) -> None:
        width = f.width if f.width is not None else WORD
        _put(self.words(f.port), values, 0 if f.bits is None else f.bits[1], width)

    def lanes(self, lanes: Lanes, codes: npt.NDArray) -> None:
        """``codes``: ``(n, lanes.count)``."""
        if lanes.concat:
            self._concat(lanes, codes)
        elif lanes.layout == "packed":
            words = self.words(lanes.port)
            for i, off in enumerate(lanes.offsets()):
                _put(words, codes[:, i], off, lanes.width)
        elif lanes.layout == "array":
            _put(self.words(lanes.port, lanes.count), codes, 0, lanes.width)
        else:
            for i, name in enumerate(lanes.port_names()):
                _put(self.words(name), codes[:, i], 0, lanes.width)


    def _concat(self, lanes: Lanes, codes: npt.NDArray) -> None:
        """Lanes packed into the concatenation of ``lanes.concat``, then cut into its ports."""
        widths = []
        for name in lanes.concat:
            known = self.pm.ports.get(name)
            if known is None:
                raise ValueError(f"Lanes across ports ({', '.join(lanes.concat)}) need the "
                                 f"ports' widths: call PortMap.check_ports first")
            widths.append(known.width)
        whole = np.zeros((self.n, _words(sum(widths))), np.uint32)
        for i, off in enumerate(lanes.offsets()):
            _put(whole, codes[:, i], off, lanes.width)
        at = 0
        for name, width in zip(lanes.concat, widths, strict=True):
            words = self.words(name)
            for j in range(words.shape[-1]):
                take = min(WORD, width - WORD * j)
                words[:, j] = _get(whole, at + WORD * j, take).astype(np.uint32)
            at += width


def _fit(pm: MapLike, vs: VectorSet) -> int:
    """Instructions per dot product of ``vs``; MapError when ``vs`` does not fit the map."""
    acc, sc = pm.accumulator, pm.scales

    def fail(line: int, msg: str) -> MapError:
        return MapError(f"{pm.path}:{line}: {msg}")

    if vs.a_format not in pm.element_formats() or vs.b_format not in pm.element_formats() or (
            pm.format_select is None and (vs.a_format, vs.b_format) != (pm.a_format,
                                                                       pm.b_format)):
        raise fail(pm.instruction_line, f"the vector set holds {vs.a_format} x {vs.b_format}; "
                                        f"the design takes {' or '.join(pm.element_formats())}"
                                        f"; generate a set in its formats")
    if vs.k % pm.k or (not acc.chains and vs.k != pm.k):
        rule = (f"a multiple of k = {pm.k}" if acc.chains else
                f"k = {pm.k} (one instruction per dot product: no first/last in "
                f"[accumulator])")
        raise fail(acc.line if not acc.chains else pm.instruction_line,
                   f"the vector set has K = {vs.k}; the design needs {rule}; generate a set "
                   f"with that K")
    want = None if sc.format == "none" else sc.format
    if vs.scale_format != want or (want and vs.block != (pm.k if sc.per == "instruction" else
                                                         sc.block)):
        has = (f"{vs.scale_format} scales per {vs.block} elements" if vs.scale_format
               else "no scales")
        per = "per instruction" if sc.per == "instruction" else f"per {sc.block}"
        takes = f"{sc.format} scales {per}" if want else "no scales"
        raise fail(sc.line, f"the vector set has {has}; the design takes {takes}; generate a "
                            f"set with those")
    if acc.kind == "port":
        if vs.c is not None and vs.c_format != acc.format:
            raise fail(acc.line, f"the vector set's C is {vs.c_format}; the design takes "
                                 f"{acc.format}; generate a set with c_format {acc.format}")
    elif vs.c is not None and np.any(vs.c != 0):
        raise fail(acc.line, f"the design has no C input (accumulator.kind = {acc.kind!r}: "
                             f"C is +0) but the vector set's C is not +0; generate a set "
                             f"without C")
    return vs.k // pm.k


def pack_instructions(pm: MapLike, vs: VectorSet, spec=None) -> Beats:
    """Every instruction of ``vs`` as port words (see :class:`Beats`); ``vs`` checked to fit.
    ``spec`` (a unit spec the map was resolved for) gives the ``[control]`` inputs' values."""
    per_dot = _fit(pm, vs)
    k = pm.k
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n = vs.m, vs.n
    shape = (nb, m, n, per_dot)
    count = nb * m * n * per_dot

    def spread(x: npt.NDArray, trailing: tuple[int, ...] = ()) -> npt.NDArray:
        return np.broadcast_to(x, shape + trailing).reshape((-1,) + trailing)

    p = _Packer(pm, count)
    p.lanes(pm.a, spread(vs.a.reshape(nb, m, 1, per_dot, k), (k,)))
    p.lanes(pm.b, spread(vs.b.reshape(nb, 1, per_dot, k, n).transpose(0, 1, 4, 2, 3), (k,)))
    sc = pm.scales
    if sc.a is not None or sc.sum is not None:
        per = 1 if sc.per == "instruction" else k // sc.block
        a_s = spread(vs.a_scale.reshape(nb, m, 1, per_dot, per), (per,))
        b_s = spread(vs.b_scale.reshape(nb, 1, per_dot, per, n).transpose(0, 1, 4, 2, 3),
                     (per,))
        if pm.int8_integer and vs.a_format == "int8":
            a_s, b_s = _int8_scales(pm, a_s, b_s)
        if sc.sum is not None:
            fields = ((sc.sum, _exponent_sums(pm, a_s, b_s)),)
        elif sc.exponent is not None:
            fields = tuple(zip((sc.a, sc.b), _exponents(pm, vs, a_s, b_s), strict=True))
        else:
            fields = ((sc.a, a_s), (sc.b, b_s))
        for part, codes in fields:
            if isinstance(part, Lanes):
                p.lanes(part, codes)
            else:
                p.field(part, codes[:, 0])
    acc = pm.accumulator
    step = np.arange(per_dot)
    last = spread(step == per_dot - 1)
    if acc.c is not None:
        c = vs.c if vs.c is not None else np.zeros(vs.out_shape, np.uint32)
        p.field(acc.c, spread(c.reshape(nb, m, n, 1)))
    for flag, on in ((acc.first, step == 0), (acc.clear, step == 0), (acc.last, step ==
                                                                        per_dot - 1)):
        if flag is not None:
            p.field(flag, spread(on).astype(np.uint32))
    sel = pm.format_select
    if sel is not None and sel.by == "port":
        p.field(Field(sel.name), np.full(count, sel.values[vs.a_format], np.uint32))
    for ctl in pm.controls:
        if spec is None:
            raise ValueError("a map with [control] inputs packs for a unit spec: pass spec")
        p.field(ctl.field, np.full(count, ctl.value_for(spec), np.uint32))
    for tie in pm.tie:
        p.constant(tie.port, tie.value)
    return Beats({name: p.ports[name] for name in pm.data_ports()}, per_dot, last)


def _int8_scales(pm: MapLike, a_s: npt.NDArray, b_s: npt.NDArray) -> tuple:
    """E8M0 scale codes 2**6 smaller (code - 6) for a design that reads INT8 codes as whole
    integers: its results are then MXINT8's exactly. MapError for a code below 6 or NaN."""
    out = []
    for name, codes in (("A", a_s), ("B", b_s)):
        bad = (codes < 6) | (codes == 0xFF)
        if bad.any():
            first = int(np.argwhere(bad.reshape(len(bad), -1))[0][0])
            raise MapError(f"{pm.path}:{pm.instruction_line}: instruction {first} has a scale "
                           f"of {name} that cannot be sent 2**6 smaller (instruction.int8 = "
                           f"'integer' needs E8M0 codes 6..254); keep scale exponents >= -121 "
                           f"with [domain] a_scale/b_scale")
        out.append((codes - 6).astype(codes.dtype))
    return out[0], out[1]


def _exponents(pm: MapLike, vs: VectorSet, a_s: npt.NDArray, b_s: npt.NDArray) -> tuple:
    """E8M0 scale codes as ``scales.exponent`` fields; MapError for a code the field cannot
    hold (the NaN code, an exponent out of its range), naming the first instruction's dot."""
    ex = pm.scales.exponent
    lo, hi = ex.exponents
    out = []
    for name, codes in (("A", a_s), ("B", b_s)):
        e = codes.astype(np.int64) - 127
        bad = (codes == 0xFF) | (e < lo) | (e > hi)
        if bad.any():
            first, lane = (int(x) for x in np.argwhere(bad.reshape(len(bad), -1))[0])
            code = int(codes.reshape(len(codes), -1)[first, lane])
            what = "the NaN code 0xFF" if code == 0xFF else f"exponent {code - 127}"
            raise MapError(f"{pm.path}:{ex.line}: instruction {first} has a scale of {name} "
                           f"the design cannot take ({what}; scales.exponent holds {lo}..{hi});"
                           f" keep the vector set inside [domain]")
        out.append(ex.encode(codes))
    return out[0], out[1]


def _exponent_sums(pm: MapLike, a_s: npt.NDArray, b_s: npt.NDArray) -> npt.NDArray:
    """Each pair of E8M0 scale codes as the ``scales.sum`` field of their exponents' sum;
    MapError for a pair the field cannot carry (a NaN code, a sum out of its range)."""
    ex = pm.scales.exponent
    lo, hi = ex.sums
    s = a_s.astype(np.int64) + b_s.astype(np.int64) - 254
    bad = (a_s == 0xFF) | (b_s == 0xFF) | (s < lo) | (s > hi)
    if bad.any():
        first, lane = (int(x) for x in np.argwhere(bad.reshape(len(bad), -1))[0])
        pa, pb = (int(x.reshape(len(x), -1)[first, lane]) for x in (a_s, b_s))
        what = ("the NaN code 0xFF" if 0xFF in (pa, pb)
                else f"exponents summing to {pa + pb - 254}")
        raise MapError(f"{pm.path}:{ex.line}: instruction {first} has a scale pair the design "
                       f"cannot take ({what}; scales.sum holds sums {lo}..{hi}); keep the "
                       f"vector set inside [domain]")
    return ex.encode_exponents(s)


# -- decoding -----------------------------------------------------------------------------


def port_words(values: list[int], width: int) -> npt.NDArray[np.uint32]:
    """Integers read from a ``width``-bit port (as a simulator gives them) as the
    ``(n, words)`` uint32 words, least significant first, that :meth:`PortMap.decode` reads."""
    nwords = _words(width)
    raw = b"".join(int(v).to_bytes(4 * nwords, "little") for v in values)
    return np.frombuffer(raw, "<u4").reshape(len(values), nwords).astype(np.uint32)



def _get(words: npt.NDArray[np.uint32], lsb: int, width: int) -> npt.NDArray[np.uint64]:
    """Bits ``lsb .. lsb + width - 1`` (width <= 64) of each row of ``words``; missing words
    read as 0."""
    w, shift = divmod(lsb, WORD)
    n = len(words)
    out = np.zeros(n, np.uint64)
    for j in range(3):
        if w + j >= words.shape[1] or j * WORD - shift >= width:
            break
        part = words[:, w + j].astype(np.uint64)
        out |= part >> np.uint64(shift) if j == 0 else part << np.uint64(j * WORD - shift)
    if width < 64:
        out &= np.uint64((1 << width) - 1)
    return out


def _field_bits(pm: MapLike, raw, f: Field, width: int | None = None) -> tuple:
    """The bits of field ``f`` in ``raw`` and the field's width."""
    if f.port not in raw:
        raise ValueError(f"Results must hold port {f.port!r} ({f.what}), not only "
                         f"{', '.join(raw) or 'none'}")
    words = np.asarray(raw[f.port], np.uint32)
    words = words.reshape(len(words), -1)
    if f.bits is not None:
        width = f.width
    elif width is None:
        known = pm.ports.get(f.port)
        if known is None:
            raise ValueError(f"The width of port {f.port!r} ({f.what}) is the design's: call "
                             f"PortMap.check_ports first")
        width = known.width
    return _get(words, 0 if f.bits is None else f.bits[1], width), width


def _signed(bits: npt.NDArray[np.uint64], width: int) -> npt.NDArray[np.int64]:
    if width == 64:
        return bits.view(np.int64).copy()
    value = bits.astype(np.int64)
    return value - (((value >> (width - 1)) & 1) << width)


def _flags(pm: MapLike, raw) -> dict:
    """The ``[status]`` flags in ``raw`` as Results' ``flags`` and ``flag_mask``."""
    if pm.status is None:
        return {}
    flags, mask = None, 0
    for name, f in pm.status.flags.items():
        bit = FLAG_BITS[name]
        got = (_field_bits(pm, raw, f, 1)[0].astype(np.uint8) & np.uint8(1)) * np.uint8(bit)
        flags = got if flags is None else flags | got
        mask |= bit
    return {"flags": flags.astype(np.uint8), "flag_mask": mask}


def decode_results(pm: MapLike, raw) -> Results:
    """The results in ``raw`` (result port -> ``(n, words)`` uint32), decoded exactly."""
    res = pm.result
    if res.encoding == "spec":
        raise ValueError("a map whose result encoding the unit spec chooses decodes after "
                         "PortMap.resolve(spec)")
    if res.field is not None:
        bits, _ = _field_bits(pm, raw, res.field, FORMAT_BITS[res.encoding])
        return Results(res.encoding, codes=bits.astype(np.uint32), **_flags(pm, raw))
    mbits, mw = _field_bits(pm, raw, res.mantissa)
    if res.sign_magnitude:
        mag = (mbits & np.uint64((1 << (mw - 1)) - 1)).astype(np.int64)
        mant = np.where((mbits >> np.uint64(mw - 1)) & np.uint64(1), -mag, mag)
        precision = mw - 1
    elif res.mantissa_signed:
        mant, precision = _signed(mbits, mw), mw - 1
    else:
        mant, precision = mbits.astype(np.int64), mw
    ebits, ew = _field_bits(pm, raw, res.exponent)
    exp = (_signed(ebits, ew) if res.exponent_signed else ebits.astype(np.int64)) - res.offset
    e_min = (-(1 << (ew - 1)) if res.exponent_signed else 0) - res.offset
    nan = np.zeros(len(mant), bool) if res.nan is None else \
        _field_bits(pm, raw, res.nan, 1)[0].astype(bool)
    return Results("fixed", mant=mant.astype(np.int64), exp=exp, nan=nan, precision=precision,
                   e_min=e_min, **_flags(pm, raw))


# -- comparing ----------------------------------------------------------------------------


def _model_values(fmt: Format, codes: npt.NDArray) -> tuple:
    """The exact values of FP codes: (mantissa, exponent, nan, inf)."""
    c = codes.astype(np.int64)
    frac_mask = (1 << fmt.man_bits) - 1
    exp_field = (c >> fmt.man_bits) & ((1 << fmt.exp_bits) - 1)
    frac = c & frac_mask
    top = exp_field == (1 << fmt.exp_bits) - 1
    sig = np.where(exp_field == 0, frac, frac | (1 << fmt.man_bits))
    e = np.maximum(exp_field, 1) - fmt.bias - fmt.man_bits
    sign = (c >> (fmt.exp_bits + fmt.man_bits)) & 1
    mant = np.where(top, 0, np.where(sign == 1, -sig, sig))
    return mant, e, top & (frac != 0), top & (frac == 0)


def _text(mant: int, exp: int) -> str:
    return f"{mant}·2^{exp}"


def _ulps(results: Results, got: Fraction, want: Fraction) -> str:
    """``got - want`` in ulps of the design's encoding at ``want``."""
    e = results.e_min
    if want:
        num, den = abs(want.numerator), want.denominator
        # 2**(top - 1) < |want| < 2**(top + 1): floor(log2 |want|) is top or top - 1.
        top = num.bit_length() - den.bit_length()
        if Fraction(num, den) < Fraction(2) ** top:
            top -= 1
        e = max(top - (results.precision - 1), e)
    diff = (got - want) / Fraction(2) ** e
    amount = f"{int(diff):+d}" if diff.denominator == 1 else f"{float(diff):+.4g}"
    return f"{amount} ulps (ulp 2^{e} of the design's {results.precision}-bit mantissa)"


def compare_results(pm: MapLike, results: Results, want: npt.NDArray, fmt: Format,
                    ) -> list[Mismatch]:
    """See :meth:`PortMap.compare`."""
    kind = MismatchKind.VALUE
    out = []
    if len(results) != len(want):
        out.append(Mismatch(kind, note=f"{len(results)} of {len(want)} results were read"))
    n = min(len(results), len(want))
    got, want = results.take(np.arange(n)), want.reshape(-1)[:n]
    digits = 2 + fmt.bits // 4
    if results.encoding != "fixed":
        bad = np.nonzero(got.codes.astype(np.int64) != want.astype(np.int64))[0]
        out += [Mismatch(kind, dot=int(i), rtl=f"{int(got.codes[i]):#0{digits}x}",
                         model=f"{int(want[i]):#0{digits}x}") for i in bad[:VALUE_LIMIT]]
    else:
        w_mant, w_exp, w_nan, w_inf = _model_values(fmt, want)
        g_mant, g_exp = canonical(got.mant, got.exp)
        w_mant, w_exp = canonical(w_mant, w_exp)
        same = np.where(got.nan | w_nan, got.nan & w_nan,
                        ~w_inf & (g_mant == w_mant) & (g_exp == w_exp))
        bad = np.nonzero(~same)[0]
        for i in bad[:VALUE_LIMIT]:
            out.append(_fixed_mismatch(got, int(i), want, fmt, (w_mant, w_exp, w_nan, w_inf),
                                       digits))
    if len(bad) > VALUE_LIMIT:
        out.append(not_listed(kind, len(bad), VALUE_LIMIT))
    return out


def _fixed_mismatch(got: Results, i: int, want: npt.NDArray, fmt: Format, model: tuple,
                    digits: int) -> Mismatch:
    w_mant, w_exp, w_nan, w_inf = (x[i] for x in model)
    code = f"{int(want[i]):#0{digits}x}"
    rtl = "NaN" if got.nan[i] else _text(int(got.mant[i]), int(got.exp[i]))
    if w_nan or w_inf:
        sign = "-" if (int(want[i]) >> (fmt.bits - 1)) & 1 else "+"
        mod = "NaN" if w_nan else f"{sign}Inf"
        why = "the model's result is NaN" if w_nan else "the design's encoding has no Inf"
        return Mismatch(MismatchKind.VALUE, dot=i, rtl=rtl, model=mod,
                        note=f"{why} (model {fmt.name} {code})")
    mod = _text(int(w_mant), int(w_exp))
    if got.nan[i]:
        return Mismatch(MismatchKind.VALUE, dot=i, rtl=rtl, model=mod,
                        note=f"the design flags NaN (model {fmt.name} {code})")
    g = Fraction(int(got.mant[i])) * Fraction(2) ** int(got.exp[i])
    w = Fraction(int(w_mant)) * Fraction(2) ** int(w_exp)
    return Mismatch(MismatchKind.VALUE, dot=i, rtl=rtl, model=mod,
                    note=f"{_ulps(got, g, w)}; model {fmt.name} {code}")


def compare_flags(results: Results, want: npt.NDArray) -> list[Mismatch]:
    """Every result whose ``[status]`` flags differ from ``want`` (the engine's flags, uint8
    RISC-V fflags bits; only the flags the map reads are compared)."""
    if results.flags is None:
        return []
    n = min(len(results.flags), len(want))
    mask = np.uint8(results.flag_mask)
    got, want = results.flags[:n] & mask, np.asarray(want, np.uint8).reshape(-1)[:n] & mask
    bad = np.nonzero(got != want)[0]
    out = [Mismatch(MismatchKind.VALUE, dot=int(i), rtl=_flag_text(int(got[i])),
                    model=_flag_text(int(want[i])), note="status flags differ")
           for i in bad[:VALUE_LIMIT]]
    if len(bad) > VALUE_LIMIT:
        out.append(not_listed(MismatchKind.VALUE, len(bad), VALUE_LIMIT))
    return out


def _flag_text(bits: int) -> str:
    names = [name.upper() for name, bit in FLAG_BITS.items() if bits & bit]
    return "flags " + ("|".join(names) if names else "none")
