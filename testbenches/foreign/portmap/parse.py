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

import bisect
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from mxsim import formats
from mxsim.formats import ELEMENT_FORMATS

from .locate import key_lines, line_of
from .parts import (
    ACC_KINDS,
    FP_ENCODINGS,
    HANDSHAKE_KINDS,
    LAYOUTS,
    ORDERS,
    RESULT_ENCODINGS,
    SCALE_FORMATS,
    Accumulator,
    Clock,
    Design,
    Field,
    FormatSelect,
    Handshake,
    Lanes,
    MapError,
    Reset,
    Result,
    Scales,
    Tie,
)

__all__ = ["parse", "TABLES", "MAX_K", "FORMAT_BITS"]

#: The top-level tables of a map, in the order they are read.
TABLES = ("design", "clock", "reset", "handshake", "instruction", "format", "operands",
          "scales", "accumulator", "result", "tie")
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
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*\Z")
_LANE_KEYS = ("port", "layout", "lsb", "stride", "width", "order")
_MAX_RESULT_BITS = 64

Key = tuple[str, ...]


def _dotted(path: Key) -> str:
    return ".".join(path)


def _show(value: Any) -> str:
    text = repr(value) if not isinstance(value, bool) else str(value).lower()
    return text if len(text) <= 60 else text[:57] + "..."


class _Reader:
    """The parsed TOML of one map, with the lines of its keys, and typed getters that raise
    MapError naming the key's line."""

    def __init__(self, path: Path, text: str, data: dict):
        self.path, self.name, self.data = path, str(path), data
        self.lines = key_lines(text)
        self.occupied: dict[str, list[tuple[int, int, str]]] = {}
        self.driven: dict[str, str] = {}
        self.read: dict[str, str] = {}

    def line(self, path: Key) -> int:
        return line_of(self.lines, path)

    def fail(self, path: Key, msg: str) -> MapError:
        return MapError(f"{self.name}:{self.line(path)}: {msg}")

    def get(self, path: Key) -> Any:
        node: Any = self.data
        for part in path:
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node

    def table(self, path: Key, allowed: tuple[str, ...], *, required: bool = False) -> dict:
        """The table at ``path`` ({} when absent and not ``required``), its keys checked."""
        value = self.get(path)
        if value is None:
            if required:
                raise self.fail(path, f"[{_dotted(path)}] is missing; add the table (see "
                                      f"'Port map reference' in docs/foreign-rtl.md)")
            return {}
        if not isinstance(value, dict):
            raise self.fail(path, f"{_dotted(path)} must be a table, not {_show(value)}")
        for key in value:
            if key not in allowed:
                raise self.fail(path + (key,), f"unknown key {_dotted(path + (key,))!r}; "
                                               f"[{_dotted(path)}] takes {', '.join(allowed)}")
        return value

    def refuse(self, path: Key, keys: tuple[str, ...], why: str) -> None:
        """Raise for the first of ``keys`` present in the table at ``path``."""
        table = self.get(path) or {}
        for key in keys:
            if key in table:
                raise self.fail(path + (key,), f"{_dotted(path + (key,))} is not used {why}; "
                                               f"remove it")

    def need(self, path: Key) -> Any:
        value = self.get(path)
        if value is None:
            raise self.fail(path, f"{_dotted(path)} is missing; add it to "
                                  f"[{_dotted(path[:-1])}]")
        return value

    def string(self, path: Key, default: str | None = None, *, ident: bool = False) -> Any:
        value = self.get(path)
        if value is None:
            if default is not None:
                return default
            value = self.need(path)
        if not isinstance(value, str) or not value:
            raise self.fail(path, f"{_dotted(path)} must be a non-empty string, not "
                                  f"{_show(value)}")
        if ident and not _IDENT.match(value):
            raise self.fail(path, f"{_dotted(path)} must be a Verilog identifier, not "
                                  f"{_show(value)}")
        return value

    def port(self, path: Key) -> str:
        return self.string(path, ident=True)

    def choice(self, path: Key, choices: tuple[str, ...], default: str | None = None) -> str:
        value = self.string(path, default)
        if value not in choices:
            raise self.fail(path, f"{_dotted(path)} must be one of {', '.join(choices)}, not "
                                  f"{_show(value)}")
        return value

    def integer(self, path: Key, default: int | None = None, *, least: int = 0,
                most: int | None = None) -> int:
        value = self.get(path)
        if value is None:
            if default is not None:
                return default
            value = self.need(path)
        if isinstance(value, bool) or not isinstance(value, int) or value < least or (
                most is not None and value > most):
            rule = f"an integer >= {least}" + (f" and <= {most}" if most is not None else "")
            raise self.fail(path, f"{_dotted(path)} must be {rule}, not {_show(value)}")
        return value

    def boolean(self, path: Key, default: bool) -> bool:
        value = self.get(path)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(path, f"{_dotted(path)} must be true or false, not {_show(value)}")
        return value

    def names(self, path: Key, what: str) -> dict[str, int | str]:
        """A table of identifiers to integers or strings (defines, parameters)."""
        table = self.get(path)
        if table is None:
            return {}
        if not isinstance(table, dict):
            raise self.fail(path, f"{_dotted(path)} must be a table of {what}, not "
                                  f"{_show(table)}")
        for key, value in table.items():
            if not _IDENT.match(key):
                raise self.fail(path + (key,), f"{_dotted(path)}: {key!r} is not a Verilog "
                                               f"identifier; rename it")
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                raise self.fail(path + (key,), f"{_dotted(path + (key,))} must be an integer "
                                               f"or a string, not {_show(value)}")
        return dict(table)

    # -- ports and bit ranges --------------------------------------------------------------

    def use(self, port: str, lo: int | None, hi: int | None, what: str, line: int, *,
            driven: bool) -> None:
        """Record that ``what`` uses bits ``[hi, lo]`` of ``port`` (None: the whole port):
        refuse a port both driven and read, and bits another field uses."""
        mine, other = (self.driven, self.read) if driven else (self.read, self.driven)
        if port in other:
            raise MapError(f"{self.name}:{line}: port {port!r} is read and driven ({what} and "
                           f"{other[port]}); a port is an input or an output, give each its own")
        mine.setdefault(port, what)
        spans = self.occupied.setdefault(port, [])
        # Spans of one port never overlap and are sorted by lsb: only the neighbours of the
        # new one can overlap it (a whole port is the span [-1, inf)).
        lo_, hi_ = (-1, 1 << 62) if lo is None else (lo, hi)
        at = bisect.bisect(spans, (lo_,))
        for o_lo, o_hi, o_what in spans[max(at - 1, 0):at + 1]:
            if lo_ <= o_hi and o_lo <= hi_:
                span = "the whole port" if lo is None or o_lo < 0 else \
                    f"bits [{hi}, {lo}] and [{o_hi}, {o_lo}]"
                where = f"{what} overlaps {o_what}" if what != o_what else \
                    f"{what} uses a bit twice"
                raise MapError(f"{self.name}:{line}: {where} in port {port!r} ({span}); "
                               f"give each field bits of its own")
        spans.insert(at, (lo_, hi_, what))

    def field(self, path: Key, *, extra: tuple[str, ...] = (), bits: int | None = None,
              flag: bool = False, driven: bool = True) -> Field:
        """A ``{ port, bits }`` field (``bits``: the width it must have when given; ``flag``:
        one bit)."""
        table = self.table(path, ("port", "bits") + extra, required=True)
        what = _dotted(path)
        port = self.port(path + ("port",))
        rng = None
        if "bits" in table:
            rng = self.bit_range(path + ("bits",))
            width = rng[0] - rng[1] + 1
            want = 1 if flag else bits
            if want is not None and width != want:
                raise self.fail(path + ("bits",), f"{what}.bits {list(rng)} hold {width} bits; "
                                                  f"{what} needs {want}")
        line = self.line(path)
        self.use(port, None if rng is None else rng[1], None if rng is None else rng[0], what,
                 line, driven=driven)
        return Field(port, rng, line, what)

    def bit_range(self, path: Key) -> tuple[int, int]:
        value = self.get(path)
        ok = isinstance(value, list) and len(value) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
        if not ok or value[0] < value[1]:
            raise self.fail(path, f"{_dotted(path)} must be [msb, lsb] with msb >= lsb >= 0, "
                                  f"not {_show(value)}")
        return value[0], value[1]

    def lanes(self, path: Key, count: int, code_bits: int, what_codes: str) -> Lanes:
        """Per-lane codes of ``code_bits`` bits (operands, per-block scales)."""
        self.table(path, _LANE_KEYS, required=True)
        layout = self.choice(path + ("layout",), LAYOUTS, "packed")
        if layout != "packed":
            self.refuse(path, ("lsb", "stride", "order"), f"by layout {layout!r}")
        port = self.string(path + ("port",))
        what, line = _dotted(path), self.line(path + ("port",))
        if layout == "ports":
            try:
                names = {port.format(i=i) for i in (0, 1)}
            except (KeyError, IndexError, ValueError):
                names = set()
            if len(names) != 2 or not all(_IDENT.match(n) for n in names):
                raise self.fail(path + ("port",), f"{what}.port must name one port per lane "
                                                  f"with {{i}} for the lane, e.g. 'a_{{i}}', "
                                                  f"not {_show(port)}")
        else:
            port = self.port(path + ("port",))
        width = self.integer(path + ("width",), code_bits, least=1, most=32)
        if width < code_bits:
            raise self.fail(path + ("width",), f"{what}.width {width} is narrower than the "
                                               f"{code_bits} bits of {what_codes}; widen it")
        stride = self.integer(path + ("stride",), width, least=1)
        if stride < width:
            raise self.fail(path + ("stride",), f"{what}.stride {stride} is less than its "
                                                f"width {width}, so lanes overlap; make it at "
                                                f"least {width}")
        lanes = Lanes(port, layout, count, width, self.integer(path + ("lsb",), 0), stride,
                      self.choice(path + ("order",), ORDERS, "lsb-first"), line, what)
        for name in lanes.port_names():
            if layout == "packed":
                for off in lanes.offsets():
                    self.use(name, off, off + width - 1, what, line, driven=True)
            else:
                self.use(name, None, None, what, line, driven=True)
        return lanes


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
    for name in ("a", "b"):
        r.table(("operands",), ("a", "b"), required=True)
        out[name] = r.lanes(("operands", name), out["k"], a_bits, "an element code")
    out["scales"] = _scales(r, out["k"])
    out["accumulator"] = _accumulator(r)
    out["result"] = _result(r)
    out["tie"] = _tie(r)
    del out["element_formats"]
    return out


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
    r.table(p, ("k", "a_format", "b_format"), required=True)
    k = r.integer(p + ("k",), least=1, most=MAX_K)
    f = ("format",)
    r.table(f, ("by", "name", "values"))
    by = r.choice(f + ("by",), ("fixed", "parameter", "port"), "fixed") if f[0] in r.data \
        else "fixed"
    out: dict[str, Any] = {"k": k, "format_select": None, "instruction_line": r.line(p + ("k",))}
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
    out.update(a_format=None, b_format=None, element_formats=tuple(values),
               format_select=FormatSelect(by, name, dict(values), r.line(f + ("name",))))
    return out


def _scales(r: _Reader, k: int) -> Scales:
    p = ("scales",)
    if "scales" not in r.data:
        return Scales()
    r.table(p, ("format", "per", "block", "a", "b"))
    fmt = r.choice(p + ("format",), SCALE_FORMATS)
    if fmt == "none":
        r.refuse(p, ("per", "block", "a", "b"), "by scales.format = 'none'")
        return Scales(line=r.line(p))
    per = r.choice(p + ("per",), ("instruction", "block"), "instruction")
    block = None
    if per == "instruction":
        r.refuse(p, ("block",), "by scales.per = 'instruction' (one scale per instruction)")
        parts = [r.field(p + (name,), bits=SCALE_BITS) for name in ("a", "b")]
    else:
        block = r.integer(p + ("block",), least=1, most=MAX_K)
        if k % block:
            raise r.fail(p + ("block",), f"scales.block {block} does not divide "
                                         f"instruction.k {k}; use a divisor of k")
        parts = [r.lanes(p + (name,), k // block, SCALE_BITS, f"an {fmt} scale")
                 for name in ("a", "b")]
    return Scales(fmt, per, block, parts[0], parts[1], r.line(p))


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
        fmt = r.choice(p + ("format",), FP_ENCODINGS)
        c = _inline_field(r, p, FORMAT_BITS[fmt], "accumulator", driven=True)
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
    enc = r.choice(p + ("encoding",), RESULT_ENCODINGS)
    line = r.line(p)
    if enc != "fixed":
        r.refuse(p, ("mantissa", "exponent", "nan"), f"by result.encoding = {enc!r}")
        return Result(enc, _inline_field(r, p, FORMAT_BITS[enc], "result", driven=False),
                      line=line)
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
