"""``[probes]``: internal signals of a foreign design and the model nodes they hold.

A probe names a signal below the design's top module (``u_blk3.term``, ``s1_t[2]``), the node
of mxsim's reference engine it holds (``g24``, ``L1.n0``: a name as ``mxsim explain`` prints
it, without the ``iN.`` of the instruction), a one-bit strobe that is 1 in each cycle the
signal holds the next instruction's value, and how its bits spell that value: an integer of
a fixed LSB weight, a mantissa with an exponent (as ``[result]``'s fixed encoding), or an
FP32/FP16/BF16 code. :func:`parse_probes` reads and checks the table (one-line
:class:`MapError` naming the map's line); :func:`check_signals` checks the signals against the
design's hierarchy; :func:`check_nodes` the nodes against a unit spec's; :meth:`Probe.value`
decodes sampled bits to an exact value. The harnesses sample the probes
(:mod:`testbenches.foreign.probing`) and :mod:`testbenches.foreign.localise` compares them
with the model's nodes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from mxsim import formats

from .parts import MapError
from .reader import Key
from .reader import Reader as _Reader
from .reader import show as _show

__all__ = ["Probe", "ProbeField", "parse_probes", "check_signals", "check_nodes",
           "signal_path", "SIGNAL", "FLOAT_FORMATS", "KINDS"]

#: A signal below the top module: instances, generate blocks and one variable, each
#: identifier with at most one ``[index]`` (an unpacked array's element, a generate loop's).
SIGNAL = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(\[\d+\])?(\.[A-Za-z_][A-Za-z0-9_$]*(\[\d+\])?)*\Z")
#: The nodes of one instruction as the reference engine names them (mxsim.engine.explain).
NODE = re.compile(r"(p\d+|scale\d+|g\d+|acc|L\d+\.n\d+|to_d|c_after|c_passes"
                  r"|s\d+\.(p\d+|g\d+|acc|round|aligned\.(p\d+|g\d+|acc|t\d+)))\Z")
_PRODUCT = re.compile(r"(s\d+\.)?(aligned\.)?p\d+\Z")
KINDS = ("fixed", "float")
FLOAT_FORMATS = ("fp32", "fp16", "bf16")
_KEYS = ("signal", "node", "valid", "encoding")
_ENCODING_KEYS = ("kind", "lsb", "signed", "bits", "mantissa", "exponent", "format")
_MAX_BITS = 4096


@dataclass(frozen=True)
class ProbeField:
    """Bits ``[msb, lsb]`` of a signal (None: all of it) read as an integer: unsigned, two's
    complement (``signed``), or sign and magnitude (the top bit the sign)."""
    signal: str
    bits: tuple[int, int] | None = None
    signed: bool = False
    sign_magnitude: bool = False

    def integer(self, word: int, width: int) -> int:
        """The field's integer in ``word``, a value of its ``width``-bit signal."""
        lo, hi = (0, width - 1) if self.bits is None else (self.bits[1], self.bits[0])
        n = hi - lo + 1
        raw = (word >> lo) & ((1 << n) - 1)
        if self.sign_magnitude:
            mag = raw & ((1 << (n - 1)) - 1)
            return -mag if raw >> (n - 1) else mag
        if self.signed and raw >> (n - 1):
            return raw - (1 << n)
        return raw


@dataclass(frozen=True)
class Probe:
    """One ``[probes.NAME]`` table: the model node ``node`` (within an instruction) that
    ``signal`` holds in each cycle ``valid`` is 1, one instruction after another.

    ``kind`` "fixed": the value is ``mantissa · 2^(exponent + lsb)`` (``exponent`` None: 0);
    "float": ``mantissa`` holds an IEEE code of ``format``."""
    name: str
    node: str
    signal: str
    valid: str
    kind: str
    mantissa: ProbeField
    exponent: ProbeField | None = None
    lsb: int = 0
    format: str | None = None
    line: int = 1

    def signals(self) -> tuple[str, ...]:
        """The signals the value is read from (one, or a mantissa's and an exponent's)."""
        parts = [self.mantissa.signal] + ([self.exponent.signal] if self.exponent else [])
        return tuple(dict.fromkeys(parts))

    def value(self, words: Mapping[str, int], widths: Mapping[str, int]) -> Fraction | str:
        """The exact value the sampled ``words`` (signal -> its value as an integer, of
        ``widths[signal]`` bits) spell: a Fraction (a zero of either sign is 0), or "nan",
        "+inf", "-inf"."""
        m = self.mantissa
        raw = m.integer(words[m.signal], widths[m.signal])
        if self.kind == "float":
            return _float_value(formats.get(self.format), raw)
        e = self.lsb
        if self.exponent is not None:
            e += self.exponent.integer(words[self.exponent.signal], widths[self.exponent.signal])
        return Fraction(raw) * Fraction(2) ** e


def _float_value(fmt: formats.Format, code: int) -> Fraction | str:
    """The exact value of an IEEE-style code of ``fmt`` (Inf and NaN at the top exponent)."""
    frac = code & ((1 << fmt.man_bits) - 1)
    exp = (code >> fmt.man_bits) & ((1 << fmt.exp_bits) - 1)
    neg = (code >> (fmt.man_bits + fmt.exp_bits)) & 1
    if exp == (1 << fmt.exp_bits) - 1:
        return "nan" if frac else ("-inf" if neg else "+inf")
    sig = frac if exp == 0 else frac | (1 << fmt.man_bits)
    q = Fraction(sig) * Fraction(2) ** (max(exp, 1) - fmt.bias - fmt.man_bits)
    return -q if neg else q


def signal_path(path: str) -> tuple[tuple[str, ...], str, int | None]:
    """``path`` (checked against :data:`SIGNAL`) as (the scopes above the variable, the
    variable, its element index or None): ``"gen[1].u.arr[3]"`` is
    ``(("gen[1]", "u"), "arr", 3)``."""
    *scopes, last = path.split(".")
    name, _, index = last.partition("[")
    return tuple(scopes), name, int(index[:-1]) if index else None


def parse_probes(r: _Reader) -> tuple[Probe, ...]:
    """``[probes.NAME]`` tables, every key checked (MapError naming the line)."""
    p = ("probes",)
    table = r.get(p)
    if table is None:
        return ()
    if not isinstance(table, dict) or not table or not all(isinstance(v, dict)
                                                            for v in table.values()):
        raise r.fail(p, "probes must hold one table per probe, e.g. [probes.u0] with signal, "
                        "node, valid and encoding; see 'Probes' in docs/foreign-rtl.md")
    out, nodes = [], {}
    for name in table:
        q = p + (name,)
        r.table(q, _KEYS, required=True)
        signal = _signal(r, q + ("signal",))
        node = r.string(q + ("node",))
        if re.match(r"i\d+\.", node):
            raise r.fail(q + ("node",), f"probes.{name}.node {node!r} names an instruction; "
                                        f"write it as within one ({node.split('.', 1)[1]!r}): "
                                        f"each instruction's value is compared with its own")
        if not NODE.match(node):
            raise r.fail(q + ("node",), f"probes.{name}.node {node!r} is not a node of the "
                                        f"model; name one as `mxsim explain` prints it within "
                                        f"an instruction (g8, L1.n0, s0.round, to_d, ...)")
        if node in nodes:
            raise r.fail(q + ("node",), f"probes.{name} and probes.{nodes[node]} both hold "
                                        f"node {node}; keep one")
        nodes[node] = name
        valid = _signal(r, q + ("valid",))
        kind, args = _encoding(r, q + ("encoding",), signal)
        out.append(Probe(name, node, signal, valid, kind, line=r.line(q), **args))
    return tuple(out)


def _signal(r: _Reader, path: Key) -> str:
    value = r.string(path)
    if not SIGNAL.match(value):
        raise r.fail(path, f"{'.'.join(path)} must be a signal's path below the top module "
                           f"(instance.signal, an unpacked array's element as name[3]), not "
                           f"{_show(value)}")
    return value


def _encoding(r: _Reader, p: Key, signal: str) -> tuple[str, dict[str, Any]]:
    """(kind, the Probe keywords) of ``encoding = { kind, ... }``."""
    what = ".".join(p)
    enc = r.table(p, _ENCODING_KEYS, required=True)
    kind = r.choice(p + ("kind",), KINDS)
    if kind == "float":
        r.refuse(p, ("lsb", "signed", "mantissa", "exponent"), f"by {what}.kind = 'float'")
        fmt = r.choice(p + ("format",), FLOAT_FORMATS)
        field = _bits_field(r, p, signal, exact=formats.get(fmt).bits)
        return kind, {"mantissa": field, "format": fmt}
    r.refuse(p, ("format",), f"by {what}.kind = 'fixed'")
    if "mantissa" not in enc:
        r.refuse(p, ("exponent",), f"without {what}.mantissa (give mantissa and exponent, or "
                                   f"lsb)")
        field = _bits_field(r, p, signal, signed=r.boolean(p + ("signed",), True))
        return kind, {"mantissa": field, "lsb": r.integer(p + ("lsb",), 0, least=-(1 << 20),
                                                          most=1 << 20)}
    r.refuse(p, ("lsb", "signed", "bits"), f"with {what}.mantissa (say them in mantissa and "
                                           f"exponent)")
    if "exponent" not in enc:
        raise r.fail(p, f"{what}.exponent is missing: a mantissa needs its exponent (or give "
                        f"lsb, a fixed weight, instead of mantissa); add it")
    mp, ep = p + ("mantissa",), p + ("exponent",)
    r.table(mp, ("signal", "bits", "signed", "sign_magnitude"), required=True)
    r.table(ep, ("signal", "bits", "signed", "offset"), required=True)
    sign_magnitude = r.boolean(mp + ("sign_magnitude",), False)
    signed = r.boolean(mp + ("signed",), True)
    if sign_magnitude and not signed:
        raise r.fail(mp + ("signed",), f"{what}.mantissa: sign_magnitude = true is signed; "
                                       f"remove signed = false")
    mant = _bits_field(r, mp, _own_signal(r, mp, signal), signed=signed,
                       sign_magnitude=sign_magnitude, least=2 if signed else 1)
    exp = _bits_field(r, ep, _own_signal(r, ep, signal),
                      signed=r.boolean(ep + ("signed",), False))
    offset = r.integer(ep + ("offset",), 0, least=-(1 << 20), most=1 << 20)
    return kind, {"mantissa": mant, "exponent": exp, "lsb": -offset}


def _own_signal(r: _Reader, p: Key, signal: str) -> str:
    """A mantissa's or exponent's ``signal`` (default: the probe's)."""
    return signal if r.get(p + ("signal",)) is None else _signal(r, p + ("signal",))


def _bits_field(r: _Reader, p: Key, signal: str, *, signed: bool = False,
                sign_magnitude: bool = False, exact: int | None = None,
                least: int = 1) -> ProbeField:
    """``bits = [msb, lsb]`` of ``signal`` (absent: the whole signal) as a field."""
    rng = None
    if r.get(p + ("bits",)) is not None:
        rng = r.bit_range(p + ("bits",))
        width = rng[0] - rng[1] + 1
        if (exact is not None and width != exact) or width < least or width > _MAX_BITS:
            rule = f"exactly {exact}" if exact is not None else f"{least} to {_MAX_BITS}"
            raise r.fail(p + ("bits",), f"{'.'.join(p)}.bits {list(rng)} hold {width} bits; "
                                        f"it needs {rule}")
    return ProbeField(signal, rng, signed, sign_magnitude)


# -- against the design and the unit spec ------------------------------------------------


def check_signals(pm: Any, find: Callable[[str], Any]) -> None:
    """Check every probe's signals and strobe against the design, and keep them in
    ``pm.signals`` (path -> :class:`~testbenches.foreign.portmap.ports.Signal`): ``find(path)``
    gives a signal, or raises LookupError saying why there is none.

    Raises
    ------
    MapError
        One line naming the probe's line: a signal the design lacks (with the names that
        are there), a strobe wider than one bit, bits beyond the signal, a float code of the
        wrong width.
    """
    found: dict[str, Any] = {}

    def width(probe: Probe, path: str, what: str) -> int:
        if path not in found:
            try:
                found[path] = find(path)
            except LookupError as exc:
                raise MapError(f"{pm.path}:{probe.line}: probes.{probe.name}.{what}: "
                               f"{exc}; fix the path (below the top module)") from None
        return found[path].width

    for probe in pm.probes:
        if width(probe, probe.valid, "valid") != 1:
            raise MapError(f"{pm.path}:{probe.line}: probes.{probe.name}.valid: signal "
                           f"{probe.valid!r} has {found[probe.valid].width} bits; a strobe "
                           f"has 1, name a one-bit signal")
        for part, f in (("mantissa", probe.mantissa), ("exponent", probe.exponent)):
            if f is None:
                continue
            n = width(probe, f.signal, "signal")
            top = f.bits[0] if f.bits is not None else n - 1
            if top >= n:
                raise MapError(f"{pm.path}:{probe.line}: probes.{probe.name}: signal "
                               f"{f.signal!r} has {n} bits ([{n - 1}, 0]), the encoding uses "
                               f"bit {top}; fix the bits")
            if probe.kind == "float" and f.bits is None and n != formats.get(probe.format).bits:
                raise MapError(f"{pm.path}:{probe.line}: probes.{probe.name}: signal "
                               f"{f.signal!r} has {n} bits; a {probe.format} code has "
                               f"{formats.get(probe.format).bits}: give encoding.bits")
            if probe.kind == "fixed" and part == "mantissa" and f.bits is None and \
                    (f.signed or f.sign_magnitude) and n < 2:
                raise MapError(f"{pm.path}:{probe.line}: probes.{probe.name}: a signed "
                               f"mantissa needs 2 bits or more; signal {f.signal!r} has 1")
    pm.signals.clear()
    pm.signals.update(found)


def check_nodes(pm: Any, nodes: list[str], unit: str) -> None:
    """Refuse a probe whose node is not among ``nodes`` (the names within one instruction of
    the nodes unit ``unit`` computes)."""
    for probe in pm.probes:
        if probe.node not in nodes:
            near = ", ".join(n for n in nodes if not _PRODUCT.match(n))
            raise MapError(f"{pm.path}:{probe.line}: probes.{probe.name}.node {probe.node!r} "
                           f"is not a node of unit {unit!r}; its nodes: {near or 'none'} "
                           f"(and products p0, p1, ...); name one, or run with probes off")
