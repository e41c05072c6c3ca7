"""Reading a port-map TOML file into its parts, every key checked (see
:mod:`testbenches.foreign.portmap`).

:func:`parse` returns the keyword arguments of a :class:`~testbenches.foreign.portmap.PortMap`.
Every
table and key of the schema is checked here: unknown tables and keys, types, enum values, the
keys each handshake, layout and accumulator kind needs or refuses, bit ranges (``[msb, lsb]``,
wide enough for what they hold, never overlapping another field in the same port), and files
that must exist. The first problem raises :class:`MapError` in one line that names the map's
line and says what to do.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from mxsim import formats
from mxsim.formats import ELEMENT_FORMATS

from .domain import C_CLASSES, ELEMENT_CLASSES, Domain
from .parts import (
    ACC_KINDS,
    CONTROL_FIELDS,
    FP_ENCODINGS,
    HANDSHAKE_KINDS,
    RESULT_ENCODINGS,
    SCALE_FORMATS,
    STATUS_FLAGS,
    Accumulator,
    Clock,
    Control,
    Design,
    Field,
    FormatSelect,
    Handshake,
    MapError,
    Reset,
    Result,
    ScaleExponent,
    Scales,
    Status,
    Tie,
)
from .probes import parse_probes
from .reader import IDENT as _IDENT
from .reader import Key
from .reader import Reader as _Reader
from .reader import dotted as _dotted
from .reader import show as _show
from .waivers import parse_waivers

__all__ = ["parse", "TABLES", "MAX_K", "FORMAT_BITS"]

#: The top-level tables of a map, in the order they are read.
TABLES = ("design", "clock", "reset", "handshake", "instruction", "format", "operands",
          "scales", "accumulator", "result", "tie", "control", "status", "domain", "probes",
          "waive")
MAX_K = 1 << 16
#: Bits of the C and result encodings.
FORMAT_BITS = {"fp32": 32, "fp16": 16, "bf16": 16}
SCALE_BITS = 8
#: The handshake ports each kind needs, and those it may have.
_HANDSHAKE_KEYS = {
    "valid-ready": (("in_valid", "in_ready", "out_valid", "latency"), ("out_ready", "interval")),
    "start-done": (("start", "done", "latency"), ("latency_is",)),
    "pipeline": (("latency",), ("in_valid", "out_valid", "interval")),
    "combinational": ((), ()),
}
_MAX_RESULT_BITS = 64


def parse(path: Path) -> dict[str, Any]:
    """The keyword arguments of the ``PortMap`` of the map file at ``path``; MapError (one
    line naming the map's line) for the first problem found."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise MapError(f"{path}: the port map does not exist; check the path") from None
    except OSError as exc:
        raise MapError(f"{path}: cannot read the port map ({exc.strerror}); check the "
                       f"path") from None
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError:
        raise MapError(f"{path}:1: the port map is not UTF-8 text; save it as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise MapError(_syntax(path, text, exc)) from None
    r = _Reader(path, text, data)
    for key in data:
        if key not in TABLES:
            raise r.fail((key,), f"unknown table or key {key!r}; a port map has "
                                 f"{', '.join(TABLES)}")
    out: dict[str, Any] = {"path": path}
    out["design"] = _design(r)
    out["handshake"] = _handshake(r)
    out["clock"], out["reset"] = _clock_reset(r, out["handshake"])
    out.update(_instruction(r))
    a_bits = max(formats.get(f).bits for f in out["element_formats"])
    by_format = out["k_by_format"]
    dense = None if by_format is None else {
        f: (by_format[f], formats.get(f).bits) for f in out["element_formats"]}
    for name in ("a", "b"):
        r.table(("operands",), ("a", "b"), required=True)
        out[name] = r.lanes(("operands", name), out["k"], a_bits, "an element code",
                            dense=dense)
    out["scales"] = _scales(r, out["k"] if by_format is None else tuple(by_format.values()))
    out["accumulator"] = _accumulator(r)
    out["result"] = _result(r)
    out["tie"] = _tie(r)
    out["controls"] = _controls(r)
    out["status"] = _status(r)
    out["domain"] = _domain(r, out["scales"])
    out["int8_integer"] = _int8(r, out)
    out["probes"] = parse_probes(r)
    out["waivers"] = parse_waivers(r)
    del out["element_formats"]
    return out


def _controls(r: _Reader) -> tuple[Control, ...]:
    """``[control.NAME]``: inputs driven on every instruction from a unit-spec field."""
    p = ("control",)
    table = r.get(p)
    if table is None:
        return ()
    if not isinstance(table, dict) or not table or not all(isinstance(v, dict)
                                                            for v in table.values()):
        raise r.fail(p, "control must hold one table per control input, e.g. [control.rm] "
                        "with port, from and values; see docs/foreign-rtl.md")
    out = []
    for name in table:
        q = p + (name,)
        f = r.field(q, extra=("from", "values"))
        source = r.choice(q + ("from",), CONTROL_FIELDS)
        values = r.need(q + ("values",))
        if not isinstance(values, dict) or not values:
            raise r.fail(q + ("values",), f"control.{name}.values must map {source} values to "
                                          f"the port values that select them, e.g. {{ rne = 0,"
                                          f" rz = 1 }}, not {_show(values)}")
        seen: dict[int, str] = {}
        for key in values:
            value = r.integer(q + ("values", key), least=0, most=(1 << 32) - 1)
            if f.width is not None and value >> f.width:
                raise r.fail(q + ("values", key), f"control.{name}.values.{key} = {value} does "
                                                  f"not fit the {f.width} bits of "
                                                  f"control.{name}.bits; widen the field")
            if value in seen:
                raise r.fail(q + ("values", key), f"control.{name}.values: {key} and "
                                                  f"{seen[value]} are both {value}; give each "
                                                  f"its own value")
            seen[value] = key
        bad = [key for key in values if key != key.lower()]
        if bad:
            raise r.fail(q + ("values", bad[0]), f"control.{name}.values: write {bad[0]!r} as "
                                                 f"a spec file spells it, {bad[0].lower()!r}")
        out.append(Control(name, f, source, dict(values), r.line(q)))
    return tuple(out)


def _status(r: _Reader) -> Status | None:
    """``[status]``: one-bit flag outputs checked against the engine's status flags."""
    p = ("status",)
    if "status" not in r.data:
        return None
    table = r.table(p, STATUS_FLAGS)
    if not table:
        raise r.fail(p, f"[status] maps no flag; give at least one of {', '.join(STATUS_FLAGS)}"
                        f", e.g. nx = {{ port = \"flags\", bits = [0, 0] }}")
    flags = {name: r.field(p + (name,), flag=True, driven=False) for name in STATUS_FLAGS
             if name in table}
    return Status(flags, r.line(p))


def _tie(r: _Reader) -> tuple[Tie, ...]:
    """``[tie]``: input ports held at a constant, ``PORT = VALUE`` (an integer >= 0), each a
    whole port that nothing else in the map uses."""
    p = ("tie",)
    table = r.get(p)
    if table is None:
        return ()
    if not isinstance(table, dict):
        raise r.fail(p, f"tie must be a table of input ports and their values (e.g. ce = 1), "
                        f"not {_show(table)}")
    out = []
    for name in table:
        if not _IDENT.match(name):
            raise r.fail(p + (name,), f"tie: {name!r} is not a Verilog identifier; name an "
                                      f"input port of the design")
        value, line = r.integer(p + (name,)), r.line(p + (name,))
        r.use(name, None, None, f"tie.{name}", line, driven=True)
        out.append(Tie(name, value, line))
    return tuple(out)


def _syntax(path: Path, text: str, exc: tomllib.TOMLDecodeError) -> str:
    """One line for a TOML syntax error: tomllib's reason and its line number."""
    msg = str(exc)
    found = re.search(r"\(at line (\d+), column \d+\)", msg)
    if found:
        line, reason = found.group(1), msg[:found.start()].strip()
    else:
        line, reason = "1", msg
    return f"{path}:{line}: TOML syntax error: {reason}; fix the line"


def _design(r: _Reader) -> Design:
    p = ("design",)
    r.table(p, ("sources", "include_dirs", "defines", "parameters", "top"), required=True)
    base = r.path.parent
    paths = {}
    for key, kind in (("sources", "file"), ("include_dirs", "folder")):
        value = r.get(p + (key,))
        if value is None and key == "sources":
            value = r.need(p + (key,))
        value = [] if value is None else value
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value) or (
                key == "sources" and not value):
            least = " with at least one" if key == "sources" else ""
            raise r.fail(p + (key,), f"design.{key} must be a list of {kind} paths (relative "
                                     f"to the map){least}, not {_show(value)}")
        found = []
        for entry in value:
            full = Path(os.path.abspath(base / entry))
            try:
                full = full.resolve()
            except (OSError, RuntimeError):
                pass             # a symbolic link loop: there is no file, as for a missing one
            if not (full.is_file() if kind == "file" else full.is_dir()):
                raise r.fail(p + (key,), f"design.{key}: {kind} {entry!r} does not exist (looked "
                                         f"for {full}); fix the path, relative to the map")
            found.append(full)
        paths[key] = tuple(found)
    return Design(paths["sources"], r.string(p + ("top",), ident=True), paths["include_dirs"],
                  r.names(p + ("defines",), "macro names"),
                  r.names(p + ("parameters",), "parameter values"), r.line(p))


def _handshake(r: _Reader) -> Handshake:
    p = ("handshake",)
    keys = ("kind", "in_valid", "in_ready", "out_valid", "out_ready", "start", "done",
            "latency", "interval", "latency_is")
    r.table(p, keys, required=True)
    kind = r.choice(p + ("kind",), HANDSHAKE_KINDS)
    need, may = _HANDSHAKE_KEYS[kind]
    r.refuse(p, tuple(k for k in keys[1:] if k not in need + may), f"by handshake {kind!r}")
    args: dict[str, Any] = {}
    for key in need + may:
        if r.get(p + (key,)) is None and key in may:
            continue
        if key == "latency":
            args[key] = r.integer(p + (key,), least=1, most=1 << 20)
        elif key == "interval":
            args[key] = r.integer(p + (key,), least=1, most=1 << 20)
        elif key == "latency_is":
            args[key] = r.choice(p + (key,), ("exact", "max"))
        else:
            args[key] = r.port(p + (key,))
            r.use(args[key], None, None, f"handshake.{key}", r.line(p + (key,)),
                  driven=key in ("in_valid", "out_ready", "start"))
    return Handshake(kind, line=r.line(p), lines={k: r.line(p + (k,)) for k in args}, **args)


def _clock_reset(r: _Reader, hs: Handshake) -> tuple[Clock | None, Reset | None]:
    if hs.kind == "combinational":
        for name in ("clock", "reset"):
            if name in r.data:
                raise r.fail((name,), f"[{name}] is not used by handshake 'combinational' (no "
                                      f"clock); remove it")
        return None, None
    r.table(("clock",), ("port",), required=True)
    clock = Clock(r.port(("clock", "port")), r.line(("clock", "port")))
    r.use(clock.port, None, None, "clock.port", clock.line, driven=True)
    reset = None
    if "reset" in r.data:
        p = ("reset",)
        r.table(p, ("port", "active", "sync", "cycles"))
        reset = Reset(r.port(p + ("port",)), r.choice(p + ("active",), ("high", "low"), "high"),
                      r.boolean(p + ("sync",), True),
                      r.integer(p + ("cycles",), 3, least=1, most=1 << 16), r.line(p + ("port",)))
        r.use(reset.port, None, None, "reset.port", reset.line, driven=True)
    return clock, reset


def _instruction(r: _Reader) -> dict[str, Any]:
    p = ("instruction",)
    r.table(p, ("k", "a_format", "b_format", "int8"), required=True)
    by_format = r.get(p + ("k",)) if isinstance(r.get(p + ("k",)), dict) else None
    k = r.integer(p + ("k",), least=1, most=MAX_K) if by_format is None else 0
    f = ("format",)
    r.table(f, ("by", "name", "values"))
    by = r.choice(f + ("by",), ("fixed", "parameter", "port"), "fixed") if f[0] in r.data \
        else "fixed"
    out: dict[str, Any] = {"k": k, "format_select": None, "instruction_line": r.line(p + ("k",)),
                           "k_by_format": None}
    if by_format is not None and by == "fixed":
        raise r.fail(p + ("k",), "instruction.k is a table of element formats, but [format] "
                                 "selects none; give one k, or select the format by port or "
                                 "parameter")
    if by == "fixed":
        r.refuse(f, ("name", "values"), "by format by = 'fixed' (give a_format and b_format "
                                        "in [instruction])")
        for name in ("a_format", "b_format"):
            out[name] = r.choice(p + (name,), ELEMENT_FORMATS)
        out["element_formats"] = (out["a_format"], out["b_format"])
        return out
    r.refuse(p, ("a_format", "b_format"), f"when [format] selects the format by {by}")
    name = r.string(f + ("name",), ident=True)
    values = r.need(f + ("values",))
    if not isinstance(values, dict) or not values:
        raise r.fail(f + ("values",), f"format.values must map element formats to the {by} "
                                      f"values that select them, e.g. {{ e4m3 = 1 }}, not "
                                      f"{_show(values)}")
    seen: dict[int, str] = {}
    for fmt, value in values.items():
        if fmt not in ELEMENT_FORMATS:
            raise r.fail(f + ("values", fmt), f"format.values: {fmt!r} is not an element "
                                              f"format; use {', '.join(ELEMENT_FORMATS)}")
        r.integer(f + ("values", fmt), least=0, most=(1 << 32) - 1)
        if value in seen:
            raise r.fail(f + ("values", fmt), f"format.values: {fmt} and {seen[value]} are both "
                                              f"{value}; give each format its own value")
        seen[value] = fmt
    if by == "parameter" and name in (r.get(("design", "parameters")) or {}):
        raise r.fail(f + ("name",), f"format.name {name!r} is also in design.parameters; the "
                                    f"unit spec's format sets it, remove it there")
    if by == "port":
        r.use(name, None, None, "format.name", r.line(f + ("name",)), driven=True)
    if by_format is not None:
        for fmt in list(by_format) + list(values):
            if fmt not in values:
                raise r.fail(p + ("k", fmt), f"instruction.k: {fmt!r} is not a format of "
                                             f"format.values ({', '.join(values)}); give k for "
                                             f"those")
            if fmt not in by_format:
                raise r.fail(p + ("k",), f"instruction.k has no k for {fmt}; give one for "
                                         f"every format of format.values")
            r.integer(p + ("k", fmt), least=1, most=MAX_K)
        out.update(k=max(by_format.values()), k_by_format=dict(by_format))
    out.update(a_format=None, b_format=None, element_formats=tuple(values),
               format_select=FormatSelect(by, name, dict(values), r.line(f + ("name",))))
    return out


def _scales(r: _Reader, k: int | tuple[int, ...]) -> Scales:
    p = ("scales",)
    if "scales" not in r.data:
        return Scales()
    r.table(p, ("format", "per", "block", "a", "b", "sum", "exponent"))
    fmt = r.choice(p + ("format",), SCALE_FORMATS)
    if fmt == "none":
        r.refuse(p, ("per", "block", "a", "b", "sum", "exponent"), "by scales.format = 'none'")
        return Scales(line=r.line(p))
    summed = r.get(p + ("sum",)) is not None
    if summed:
        r.refuse(p, ("a", "b"), "by scales.sum (the design takes the pair's exponents "
                                "pre-summed: give sum alone)")
        if r.get(p + ("exponent",)) is None:
            raise r.fail(p + ("sum",), "scales.sum sends the sum of the two scale exponents; "
                                       "say how in scales.exponent = { bits, signed, bias }")
    exponent = _scale_exponent(r, fmt, summed)
    bits = SCALE_BITS if exponent is None else exponent.bits
    per = r.choice(p + ("per",), ("instruction", "block"), "instruction")
    block = None
    if per == "instruction":
        r.refuse(p, ("block",), "by scales.per = 'instruction' (one scale per instruction)")
        parts = [r.field(p + (name,), bits=bits) for name in (("sum",) if summed
                                                              else ("a", "b"))]
    else:
        if isinstance(k, tuple):
            raise r.fail(p + ("per",), "scales.per = 'block' needs one instruction.k; with a k "
                                       "per element format give one scale per instruction")
        block = r.integer(p + ("block",), least=1, most=MAX_K)
        if k % block:
            raise r.fail(p + ("block",), f"scales.block {block} does not divide "
                                         f"instruction.k {k}; use a divisor of k")
        parts = [r.lanes(p + (name,), k // block, bits, f"an {fmt} scale"
                         if exponent is None else "a scale exponent")
                 for name in (("sum",) if summed else ("a", "b"))]
    if summed:
        return Scales(fmt, per, block, None, None, r.line(p), exponent, parts[0])
    return Scales(fmt, per, block, parts[0], parts[1], r.line(p), exponent)


def _scale_exponent(r: _Reader, fmt: str, summed: bool = False) -> ScaleExponent | None:
    """``scales.exponent = { bits, signed, bias }``: E8M0 scales sent as integer exponents
    (``summed``: the sum of each pair's exponents, ``scales.sum``)."""
    p = ("scales", "exponent")
    if r.get(p) is None:
        return None
    r.table(p, ("bits", "signed", "bias"))
    if fmt != "e8m0":
        raise r.fail(p, f"scales.exponent sends E8M0 scales as exponents; scales.format is "
                        f"{fmt}; remove it")
    ex = ScaleExponent(r.integer(p + ("bits",), least=2, most=16), r.boolean(p + ("signed",), True),
                       r.integer(p + ("bias",), 0, least=-(1 << 16), most=1 << 16), r.line(p))
    lo, hi = ex.sums if summed else ex.exponents
    if lo > hi:
        raise r.fail(p + ("bias",), f"scales.exponent with bias {ex.bias} holds no exponent of "
                                    f"E8M0 (-127..127); fix the bias")
    if summed:
        dom = r.get(("domain",)) or {}
        rng = dom.get("scale_sum")
        if not (isinstance(rng, list) and len(rng) == 2 and all(isinstance(v, int) for v in rng)
                and lo <= rng[0] and rng[1] <= hi):
            raise r.fail(p, f"scales.exponent holds sums of scale exponents {lo}..{hi} only "
                            f"(scales.sum); declare [domain] scale_sum = [{lo}, {hi}] (or "
                            f"narrower) so that every sum sent fits")
    elif (lo, hi) != (-127, 127):
        dom = r.get(("domain",)) or {}
        for key in ("a_scale", "b_scale"):
            rng = dom.get(key)
            ok = isinstance(rng, list) and len(rng) == 2 and all(
                isinstance(v, int) for v in rng) and lo <= rng[0] and rng[1] <= hi
            if not ok:
                raise r.fail(p, f"scales.exponent holds scale exponents {lo}..{hi} only; "
                                f"declare [domain] {key} = [{lo}, {hi}] (or narrower) so that "
                                f"every scale sent fits")
    return ex


def _accumulator(r: _Reader) -> Accumulator:
    p = ("accumulator",)
    if "accumulator" not in r.data:
        return Accumulator()
    r.table(p, ("kind", "format", "port", "bits", "first", "last", "clear"))
    kind = r.choice(p + ("kind",), ACC_KINDS)
    line = r.line(p)
    if kind == "none":
        r.refuse(p, ("format", "port", "bits", "first", "last", "clear"),
                 "by accumulator.kind = 'none'")
        return Accumulator(line=line)
    table = r.get(p)
    if kind == "port":
        r.refuse(p, ("clear",), "by accumulator.kind = 'port' (C is loaded with first)")
        fmt = _encodings(r, p + ("format",), FP_ENCODINGS)
        c = _inline_field(r, p, max(FORMAT_BITS[x] for x in fmt.split("|")), "accumulator",
                          driven=True)
        if ("first" in table) != ("last" in table):
            missing = "last" if "first" in table else "first"
            raise r.fail(p, f"accumulator.{missing} is missing: a C port chains instructions "
                            f"with both first and last (or neither); add it")
    else:
        r.refuse(p, ("format", "port", "bits"), "by accumulator.kind = 'internal' (C is +0)")
        if "clear" in table and "first" in table:
            raise r.fail(p + ("first",), "accumulator: give first and last, or clear (and "
                                         "optionally last), not first and clear")
        if "clear" not in table and not ("first" in table and "last" in table):
            missing = "last" if "first" in table else "first"
            raise r.fail(p, f"accumulator.{missing} is missing: an internal accumulator needs "
                            f"first and last (or clear); add it, e.g. {missing} = {{ port = "
                            f"\"{missing}\" }}")
        fmt, c = None, None
    flags = {name: r.field(p + (name,), flag=True) for name in ("first", "last", "clear")
             if name in table}
    return Accumulator(kind, fmt, c, line=line, **flags)


def _encodings(r: _Reader, path: Key, choices: tuple[str, ...]) -> str:
    """One encoding, or a list of FP encodings (the unit spec's d_format chooses) joined by
    "|"."""
    value = r.get(path)
    if not isinstance(value, list):
        return r.choice(path, choices)
    fp = tuple(c for c in choices if c in FORMAT_BITS)
    if len(value) < 2 or len(set(map(str, value))) != len(value) or not all(
            v in fp for v in value):
        raise r.fail(path, f"{_dotted(path)} must be one of {', '.join(choices)}, or a list "
                           f"of two or more of {', '.join(fp)} (the unit spec's d_format "
                           f"chooses), not {_show(value)}")
    return "|".join(value)


def _inline_field(r: _Reader, p: Key, bits: int, what: str, *, driven: bool) -> Field:
    """The ``port`` and ``bits`` keys of the table ``p`` itself as a field."""
    port = r.port(p + ("port",))
    rng = None
    if r.get(p + ("bits",)) is not None:
        rng = r.bit_range(p + ("bits",))
        if rng[0] - rng[1] + 1 != bits:
            raise r.fail(p + ("bits",), f"{what}.bits {list(rng)} hold {rng[0] - rng[1] + 1} "
                                        f"bits; its format needs {bits}")
    line = r.line(p + ("port",))
    r.use(port, None if rng is None else rng[1], None if rng is None else rng[0], what, line,
          driven=driven)
    return Field(port, rng, line, what)


def _result(r: _Reader) -> Result:
    p = ("result",)
    r.table(p, ("encoding", "port", "bits", "mantissa", "exponent", "nan"), required=True)
    enc = _encodings(r, p + ("encoding",), RESULT_ENCODINGS)
    line = r.line(p)
    if enc != "fixed":
        r.refuse(p, ("mantissa", "exponent", "nan"), f"by result.encoding = {enc!r}")
        several = tuple(enc.split("|")) if "|" in enc else ()
        bits = max(FORMAT_BITS[x] for x in enc.split("|"))
        return Result("spec" if several else enc,
                      _inline_field(r, p, bits, "result", driven=False), line=line,
                      encodings=several)
    r.refuse(p, ("port", "bits"), "by result.encoding = 'fixed' (give mantissa, exponent and "
                                  "nan fields)")
    mant = r.field(p + ("mantissa",), extra=("signed", "sign_magnitude"), driven=False)
    exp = r.field(p + ("exponent",), extra=("signed", "offset"), driven=False)
    signed = r.boolean(p + ("mantissa", "signed"), True)
    sign_magnitude = r.boolean(p + ("mantissa", "sign_magnitude"), False)
    if sign_magnitude and not signed:
        raise r.fail(p + ("mantissa", "signed"), "result.mantissa: sign_magnitude = true is "
                                                 "signed; remove signed = false")
    for f, most in ((mant, _MAX_RESULT_BITS if signed else _MAX_RESULT_BITS - 1), (exp, 32)):
        if f.width is not None and (f.width > most or (f.width < 2 and f is mant and signed)):
            raise r.fail(p + (f.what.split(".")[-1], "bits"),
                         f"{f.what}.bits {list(f.bits)} hold {f.width} bits; use "
                         f"{'2' if signed and f is mant else '1'} to {most}")
    nan = r.field(p + ("nan",), flag=True, driven=False) if r.get(p + ("nan",)) is not None \
        else None
    return Result(enc, None, mant, exp, nan, signed, sign_magnitude,
                  r.boolean(p + ("exponent", "signed"), False),
                  r.integer(p + ("exponent", "offset"), 0, least=-(1 << 20), most=1 << 20),
                  line)


def _domain(r: _Reader, scales: Scales) -> Domain | None:
    """``[domain]``: the operand classes and scale-exponent ranges the design is built for."""
    p = ("domain",)
    if "domain" not in r.data:
        return None
    keys = ("a", "b", "c", "a_scale", "b_scale", "scale_sum", "c_exponent")
    table = r.table(p, keys)
    if not table:
        raise r.fail(p, f"[domain] is empty; give at least one of {', '.join(keys)}, or remove "
                        f"the table")
    args: dict[str, Any] = {}
    for key, classes in (("a", ELEMENT_CLASSES), ("b", ELEMENT_CLASSES), ("c", C_CLASSES)):
        value = table.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or not value or not all(v in classes for v in value) \
                or len(set(value)) != len(value):
            raise r.fail(p + (key,), f"domain.{key} must be a list of distinct classes among "
                                     f"{', '.join(classes)}, not {_show(value)}")
        args[key] = tuple(value)
    for key in ("a_scale", "b_scale", "scale_sum"):
        if key not in table:
            continue
        value = table[key]
        most = 254 if key == "scale_sum" else 127
        if not (isinstance(value, list) and len(value) == 2 and all(
                isinstance(v, int) and not isinstance(v, bool) and -most <= v <= most
                for v in value) and value[0] <= value[1]):
            raise r.fail(p + (key,), f"domain.{key} must be [lo, hi], integers with "
                                     f"{-most} <= lo <= hi <= {most} (scale exponents: E8M0 "
                                     f"code - 127), not {_show(value)}")
        if scales.format != "e8m0":
            raise r.fail(p + (key,), f"domain.{key} limits E8M0 scale exponents, but "
                                     f"scales.format is {scales.format}; remove it")
        args[key] = (value[0], value[1])
    if "c_exponent" in table:
        value = table["c_exponent"]
        if not (isinstance(value, list) and len(value) == 2 and all(
                isinstance(v, int) and not isinstance(v, bool) and -200 <= v <= 200
                for v in value) and value[0] <= value[1]):
            raise r.fail(p + ("c_exponent",), f"domain.c_exponent must be [lo, hi], integers "
                                              f"with -200 <= lo <= hi <= 200 (the binades of "
                                              f"C: floor(log2|C|)), not {_show(value)}")
        args["c_exponent"] = (value[0], value[1])
    dom = Domain(**args, line=r.line(p), lines={k: r.line(p + (k,)) for k in table})
    if dom.scaled:
        (lo_a, hi_a), (lo_b, hi_b) = dom.exponent_ranges()
        if lo_a > hi_a or lo_b > hi_b:
            raise r.fail(p + ("scale_sum",) if "scale_sum" in table else p,
                         "the domain's scale ranges admit no pair of scales; widen them")
    return dom


def _int8(r: _Reader, out: dict[str, Any]) -> bool:
    """``instruction.int8``: "mx" (an INT8 code is code * 2**-6, OCP MXINT8) or "integer" (the
    design reads the code as a whole integer: mxsim sends every scale 2**6 smaller, or, with no
    scales, reads a fixed-point result 2**12 smaller, so results stay MXINT8's)."""
    p = ("instruction", "int8")
    if r.get(p) is None:
        return False
    how = r.choice(p, ("mx", "integer"))
    if "int8" not in out["element_formats"]:
        raise r.fail(p, f"instruction.int8 says how INT8 codes are read, but the design takes "
                        f"{', '.join(out['element_formats'])}; remove it")
    if how == "integer" and out["scales"].format not in ("e8m0",) and \
            out["result"].encoding != "fixed":
        raise r.fail(p, "instruction.int8 = 'integer' needs E8M0 scales (sent 2**6 smaller) or "
                        "a fixed-point result (read 2**12 smaller) to keep results MXINT8's; "
                        "the map has neither")
    return how == "integer"
