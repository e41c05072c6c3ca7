"""The typed reader of a port map's TOML (see :mod:`testbenches.foreign.portmap.parse`): getters
that check a key's type and name its line in a :class:`MapError`, the record of every port bit
a field takes (no two fields share a bit; no port is both read and driven), and operand lanes
(packed, arrays, a port per lane, across several ports, or a width per element format).
"""

from __future__ import annotations

import bisect
import re
from pathlib import Path
from typing import Any

from .locate import key_lines, line_of
from .parts import LAYOUTS, ORDERS, Field, Lanes, MapError

__all__ = ["Reader", "Key", "IDENT", "dotted", "show"]

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*\Z")
_LANE_KEYS = ("port", "layout", "lsb", "stride", "width", "order")

Key = tuple[str, ...]


def dotted(path: Key) -> str:
    return ".".join(path)


def show(value: Any) -> str:
    text = repr(value) if not isinstance(value, bool) else str(value).lower()
    return text if len(text) <= 60 else text[:57] + "..."


class Reader:
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
                raise self.fail(path, f"[{dotted(path)}] is missing; add the table (see "
                                      f"'Port map reference' in docs/foreign-rtl.md)")
            return {}
        if not isinstance(value, dict):
            raise self.fail(path, f"{dotted(path)} must be a table, not {show(value)}")
        for key in value:
            if key not in allowed:
                raise self.fail(path + (key,), f"unknown key {dotted(path + (key,))!r}; "
                                               f"[{dotted(path)}] takes {', '.join(allowed)}")
        return value

    def refuse(self, path: Key, keys: tuple[str, ...], why: str) -> None:
        """Raise for the first of ``keys`` present in the table at ``path``."""
        table = self.get(path) or {}
        for key in keys:
            if key in table:
                raise self.fail(path + (key,), f"{dotted(path + (key,))} is not used {why}; "
                                               f"remove it")

    def need(self, path: Key) -> Any:
        value = self.get(path)
        if value is None:
            raise self.fail(path, f"{dotted(path)} is missing; add it to "
                                  f"[{dotted(path[:-1])}]")
        return value

    def string(self, path: Key, default: str | None = None, *, ident: bool = False) -> Any:
        value = self.get(path)
        if value is None:
            if default is not None:
                return default
            value = self.need(path)
        if not isinstance(value, str) or not value:
            raise self.fail(path, f"{dotted(path)} must be a non-empty string, not "
                                  f"{show(value)}")
        if ident and not IDENT.match(value):
            raise self.fail(path, f"{dotted(path)} must be a Verilog identifier, not "
                                  f"{show(value)}")
        return value

    def port(self, path: Key) -> str:
        return self.string(path, ident=True)

    def choice(self, path: Key, choices: tuple[str, ...], default: str | None = None) -> str:
        value = self.string(path, default)
        if value not in choices:
            raise self.fail(path, f"{dotted(path)} must be one of {', '.join(choices)}, not "
                                  f"{show(value)}")
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
            raise self.fail(path, f"{dotted(path)} must be {rule}, not {show(value)}")
        return value

    def boolean(self, path: Key, default: bool) -> bool:
        value = self.get(path)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(path, f"{dotted(path)} must be true or false, not {show(value)}")
        return value

    def names(self, path: Key, what: str) -> dict[str, int | str]:
        """A table of identifiers to integers or strings (defines, parameters)."""
        table = self.get(path)
        if table is None:
            return {}
        if not isinstance(table, dict):
            raise self.fail(path, f"{dotted(path)} must be a table of {what}, not "
                                  f"{show(table)}")
        for key, value in table.items():
            if not IDENT.match(key):
                raise self.fail(path + (key,), f"{dotted(path)}: {key!r} is not a Verilog "
                                               f"identifier; rename it")
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                raise self.fail(path + (key,), f"{dotted(path + (key,))} must be an integer "
                                               f"or a string, not {show(value)}")
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
        what = dotted(path)
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
            raise self.fail(path, f"{dotted(path)} must be [msb, lsb] with msb >= lsb >= 0, "
                                  f"not {show(value)}")
        return value[0], value[1]

    def lanes(self, path: Key, count: int, code_bits: int, what_codes: str, *,
              dense: dict[str, tuple[int, int]] | None = None) -> Lanes:
        """Per-lane codes of ``code_bits`` bits (operands, per-block scales). ``dense``
        (element format -> (k, element bits)): a map whose k depends on the format; packed
        lanes without ``width`` and ``stride`` then sit their format's element width apart."""
        self.table(path, _LANE_KEYS, required=True)
        table = self.get(path)
        if dense is not None and "width" not in table and "stride" not in table and \
                table.get("layout", "packed") == "packed":
            return self._dense_lanes(path, dense)
        layout = self.choice(path + ("layout",), LAYOUTS, "packed")
        if layout != "packed":
            self.refuse(path, ("lsb", "stride", "order"), f"by layout {layout!r}")
        if isinstance(table.get("port"), list):
            return self._concat_lanes(path, layout, count, code_bits, what_codes, dense)
        port = self.string(path + ("port",))
        what, line = dotted(path), self.line(path + ("port",))
        if layout == "ports":
            try:
                names = {port.format(i=i) for i in (0, 1)}
            except (KeyError, IndexError, ValueError):
                names = set()
            if len(names) != 2 or not all(IDENT.match(n) for n in names):
                raise self.fail(path + ("port",), f"{what}.port must name one port per lane "
                                                  f"with {{i}} for the lane, e.g. 'a_{{i}}', "
                                                  f"not {show(port)}")
        else:
            port = self.port(path + ("port",))
        width, stride = self._lane_size(path, code_bits, what, what_codes)
        lanes = Lanes(port, layout, count, width, self.integer(path + ("lsb",), 0), stride,
                      self.choice(path + ("order",), ORDERS, "lsb-first"), line, what)
        for name in lanes.port_names():
            if layout == "packed":
                for off in lanes.offsets():
                    self.use(name, off, off + width - 1, what, line, driven=True)
            else:
                self.use(name, None, None, what, line, driven=True)
        return lanes

    def _lane_size(self, path: Key, code_bits: int, what: str, what_codes: str
                   ) -> tuple[int, int]:
        """``width`` (at least ``code_bits``) and ``stride`` (at least the width) of lanes."""
        width = self.integer(path + ("width",), code_bits, least=1, most=32)
        if width < code_bits:
            raise self.fail(path + ("width",), f"{what}.width {width} is narrower than the "
                                               f"{code_bits} bits of {what_codes}; widen it")
        stride = self.integer(path + ("stride",), width, least=1)
        if stride < width:
            raise self.fail(path + ("stride",), f"{what}.stride {stride} is less than its "
                                                f"width {width}, so lanes overlap; make it at "
                                                f"least {width}")
        return width, stride

    def _concat_lanes(self, path: Key, layout: str, count: int, code_bits: int,
                      what_codes: str, dense: dict[str, tuple[int, int]] | None) -> Lanes:
        """Packed lanes in several whole ports concatenated (``port = ["lo", "hi"]``)."""
        what, line = dotted(path), self.line(path + ("port",))
        names = self.get(path + ("port",))
        if layout != "packed" or len(names) < 2 or not all(
                isinstance(n, str) and IDENT.match(n) for n in names) or \
                len(set(names)) != len(names):
            raise self.fail(path + ("port",), f"{what}.port as a list names two or more "
                                              f"distinct ports, concatenated with the first as "
                                              f"the least significant (layout \"packed\" only), "
                                              f"not {show(names)}")
        for name in names:
            self.use(name, None, None, what, line, driven=True)
        order = self.choice(path + ("order",), ORDERS, "lsb-first")
        lsb = self.integer(path + ("lsb",), 0)
        if dense is not None and "width" not in self.get(path) and "stride" not in self.get(path):
            k, bits = max(dense.values(), key=lambda kb: kb[0] * kb[1])
            return Lanes(names[0], "packed", k, bits, lsb, bits, order, line, what, dense=True,
                         concat=tuple(names))
        width, stride = self._lane_size(path, code_bits, what, what_codes)
        return Lanes(names[0], "packed", count, width, lsb, stride, order, line, what,
                     concat=tuple(names))

    def _dense_lanes(self, path: Key, dense: dict[str, tuple[int, int]]) -> Lanes:
        """Packed lanes whose count and width follow the element format: one span of the port
        from ``lsb`` to the top of the widest format's lanes."""
        port, what, line = self.port(path + ("port",)), dotted(path), self.line(path + ("port",))
        lsb = self.integer(path + ("lsb",), 0)
        order = self.choice(path + ("order",), ORDERS, "lsb-first")
        k, bits = max(dense.values(), key=lambda kb: kb[0] * kb[1])
        self.use(port, lsb, lsb + max(kk * bb for kk, bb in dense.values()) - 1, what, line,
                 driven=True)
        return Lanes(port, "packed", k, bits, lsb, bits, order, line, what, dense=True)
