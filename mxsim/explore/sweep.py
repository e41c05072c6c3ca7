"""The sweep file: its schema, and :func:`load`, which builds and checks every point first.

A sweep file (TOML, docs/explore.md gives every key) names a base ``[unit]``, what to vary (a
``[grid]`` of parameters and/or a list of ``[[point]]`` tables, whose own list values are a grid
of their own), ``[[reference]]`` units measured for accuracy only, the ``[[workload]]`` GEMMs,
the ``[array]`` of units and the ``[cost]`` options. A point is one design on one workload.
Every error is one line, ``FILE:LINE: what is wrong``, at the line of the key it names.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import quantize
from ..errors import MxsimError, printable
from . import designs as designs_mod
from .designs import ARRAY_KEYS, SPEC_KEYS, Design, Reference
from .workloads import DISTRIBUTIONS, LAYERS, RECIPES, Workload, problem

__all__ = ["SweepError", "Sweep", "load", "FPGAS", "ERRORS"]

FPGAS = ("ice40", "lut4", "none")
ERRORS = ("unit", "total")

_DESIGN_KEYS = SPEC_KEYS | {"preset", "spec", "lanes", "stages", "label"}
_TABLES = {
    "sweep": {"name", "title", "description", "error"},
    "unit": _DESIGN_KEYS - {"label"},
    "grid": (_DESIGN_KEYS | ARRAY_KEYS) - {"label"},
    "point": _DESIGN_KEYS | ARRAY_KEYS,
    "reference": _DESIGN_KEYS - {"lanes", "stages"},
    "workload": {"name", "layer", "tokens", "shape", "sample", "distribution", "recipe",
                 "scale_rule", "seed"},
    "array": set(ARRAY_KEYS),
    "cost": {"fpga"},
}
_ARRAYS = {"point", "reference", "workload"}          # [[...]] tables
_MAX_SWEEP_BYTES = 1 << 20
#: A workload's sample is drawn as float64 operands: at most 2^24 values (128 MiB each way).
_MAX_SAMPLE_VALUES = 1 << 24


class SweepError(MxsimError, ValueError):
    """A sweep file that cannot run: ``FILE:LINE: what is wrong``."""


@dataclass
class Sweep:
    """A checked sweep: every design built, every workload valid on every unit."""
    path: str
    name: str
    title: str
    description: str
    error: str                       #: the error the Pareto front uses: "unit" or "total"
    designs: list[Design]
    references: list[Reference]
    workloads: list[Workload]
    rows: int = 16
    cols: int = 16
    bandwidth: float = 256.0
    fpga: str = "lut4"
    varied: list[str] = field(default_factory=list)      #: the grid's keys, in file order
    array: dict[str, Any] = field(default_factory=dict)  #: the [array] table as written

    @property
    def points(self) -> list[tuple[Design, Workload]]:
        return [(d, w) for d in self.designs for w in self.workloads]


class _Source:
    """The sweep file's path and where each table and key sits in it (``tomllib`` keeps no
    positions), to word errors as ``FILE:LINE: message``."""

    def __init__(self, path: str, text: str):
        self.path = path
        self.tables: dict[tuple[str, int], int] = {}
        self.keys: dict[tuple[str, int, str], int] = {}
        counts: dict[str, int] = {}
        current = ("", 0)
        for no, line in enumerate(text.splitlines(), 1):
            s = line.split("#", 1)[0].strip()
            if m := re.fullmatch(r"\[\[\s*([\w.-]+)\s*\]\]", s):
                i = counts.get(m.group(1), 0)
                counts[m.group(1)] = i + 1
                current = (m.group(1), i)
                self.tables[current] = no
            elif m := re.fullmatch(r"\[\s*([\w.-]+)\s*\]", s):
                current = (m.group(1), 0)
                self.tables[current] = no
            elif m := re.match(r"""^(["']?)([\w-]+)\1\s*=""", s):
                self.keys.setdefault((*current, m.group(2)), no)

    def of(self, table: str, index: int = 0, key: str | None = None) -> int:
        """The line of ``key`` in the ``index``-th ``[table]`` (of the table without it)."""
        if key is not None and (table, index, key) in self.keys:
            return self.keys[(table, index, key)]
        return self.tables.get((table, index), 1)

    def fail(self, line: int, msg: str) -> SweepError:
        return SweepError(f"{self.path}:{line}: {msg}")


def load(path: str | os.PathLike) -> Sweep:
    """Read and check a sweep file: every design, workload and combination is built and
    checked here, before anything runs (SweepError names the file and line)."""
    path = str(path)
    text = _read(path)
    doc = _parse(path, text)
    src = _Source(path, text)
    _check_tables(doc, src)
    name, error, fpga, arr = _head(doc, src)
    combos, varied = _combinations(doc, src)
    designs = _designs(combos, arr, src)
    references = _references(doc, src)
    workloads = _workloads(doc, designs, references, src)
    return Sweep(path=path, name=name, title=str(doc.get("sweep", {}).get("title", name)),
                 description=str(doc.get("sweep", {}).get("description", "")), error=error,
                 designs=designs, references=references, workloads=workloads,
                 rows=arr.get("rows", 16), cols=arr.get("cols", 16),
                 bandwidth=float(arr.get("bandwidth", 256)), fpga=fpga, varied=varied,
                 array=dict(arr))


def _read(path: str) -> str:
    """The sweep file's text: a regular file of at most 1 MiB of UTF-8."""
    if Path(path).exists() and not Path(path).is_file():   # a FIFO or /dev/zero never ends
        raise SweepError(f"Cannot read sweep file {path}: not a regular file")
    if Path(path).is_file() and Path(path).stat().st_size > _MAX_SWEEP_BYTES:
        raise SweepError(f"{path}: {Path(path).stat().st_size:,} bytes, more than a sweep file's "
                         f"{_MAX_SWEEP_BYTES:,}; a sweep file is a short TOML file")
    try:
        return Path(path).read_bytes().decode("utf-8")
    except OSError as e:
        raise SweepError(f"Cannot read sweep file {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise SweepError(f"{path}: not UTF-8 text (byte {e.object[e.start]:#04x} at offset "
                         f"{e.start}); a sweep file is TOML in UTF-8") from None


def _parse(path: str, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SweepError(f"{path}: not valid TOML: {e}") from None
    except RecursionError:
        raise SweepError(f"{path}: nested too deeply to read (a sweep file's values are "
                         f"numbers, strings and short lists)") from None


def _check_tables(doc: dict[str, Any], src: _Source) -> None:
    """Only known tables, each written as [t] or [[t]] as the schema has it, with known keys."""
    for table, body in doc.items():
        if table not in _TABLES:
            raise src.fail(src.of(table), f"unknown table [{printable(table)}]; a sweep has "
                           f"{', '.join(f'[{t}]' for t in _TABLES)}")
        entries = body if isinstance(body, list) else [body]
        if (table in _ARRAYS) != isinstance(body, list):
            form = f"[[{table}]]" if table in _ARRAYS else f"[{table}]"
            raise src.fail(src.of(table), f"{table} must be written as {form}")
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise src.fail(src.of(table, i), f"[{table}] must be a table")
            for key in entry:
                if key not in _TABLES[table]:
                    hint = ", ".join(sorted(_TABLES[table]))
                    raise src.fail(src.of(table, i, key), f"unknown parameter "
                                   f"{table}.{printable(key)}; "
                                   f"[{table}] takes {hint}")


def _head(doc: dict[str, Any], src: _Source) -> tuple[str, str, str, dict[str, Any]]:
    """The sweep's name, error kind and FPGA mapping, and its [array] (checked)."""
    head = doc.get("sweep", {})
    name = str(head.get("name", Path(src.path).stem))
    if name in ("", ".", "..") or any(ch in name for ch in "/\\\0") or name != name.strip():
        # The name is the default output folder, results/NAME: it must stay inside results/.
        raise src.fail(src.of("sweep", 0, "name"), f"sweep.name must be a plain folder name "
                       f"(no '/', '\\', '..' or surrounding spaces), not {name!r}")
    _text(name, src, "sweep", 0, "name")
    _text(head.get("title", name), src, "sweep", 0, "title")
    _text(head.get("description", ""), src, "sweep", 0, "description", lines=True)
    error = head.get("error", "unit")
    if not _among(error, ERRORS):
        raise src.fail(src.of("sweep", 0, "error"), f"sweep.error must be one of "
                       f"{', '.join(ERRORS)}, not {error!r}")
    fpga = doc.get("cost", {}).get("fpga", "lut4")
    if not _among(fpga, FPGAS):
        raise src.fail(src.of("cost", 0, "fpga"), f"cost.fpga must be one of "
                       f"{', '.join(FPGAS)}, not {fpga!r}")
    arr = doc.get("array", {})
    for key in ("rows", "cols", "bandwidth"):
        # `not 0 < x < inf`: also nan, which no comparison holds for.
        if key in arr and (isinstance(arr[key], bool) or not isinstance(arr[key], (int, float))
                           or not 0 < arr[key] < math.inf or (key != "bandwidth" and
                                                              not isinstance(arr[key], int))):
            raise src.fail(src.of("array", 0, key), f"array.{key} must be a positive "
                           f"{'number (bytes per cycle)' if key == 'bandwidth' else 'integer'}, "
                           f"not {arr[key]!r}")
    return name, error, fpga, arr


#: A design to build: (params, origins, label, varied, group). ``origins`` maps each key to
#: the (table, index) that set it, for an error's line.
_Combo = tuple[dict, dict, str, dict, str]


def _combinations(doc: dict[str, Any], src: _Source) -> tuple[list[_Combo], list[str]]:
    """Every grid combination and every point (whose own list values, a schedule excepted,
    are swept too: a grid of its own), and the varied keys in file order."""
    base = doc.get("unit", {})
    origins_base = {k: ("unit", 0) for k in base}
    grid = doc.get("grid", {})
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise src.fail(src.of("grid", 0, key), f"grid.{key} must be a non-empty list of "
                           f"values, not {values!r}")
    combos: list[_Combo] = []
    if grid:
        for values in itertools.product(*grid.values()):
            varied = dict(zip(grid, values, strict=True))
            combos.append(({**base, **varied}, {**origins_base, **{k: ("grid", 0) for k in grid}},
                           " ".join(f"{k}={v}" for k, v in varied.items()), varied, ""))
    varied_keys = list(grid)
    for i, pt in enumerate(doc.get("point", [])):
        combos += _point_combinations(i, pt, base, origins_base, varied_keys, src)
    if not combos:
        combos.append((dict(base), origins_base,
                       str(base.get("preset") or base.get("spec") or "unit"), {}, ""))
    return combos, varied_keys


def _point_combinations(i: int, pt: dict, base: dict, origins_base: dict,
                        varied_keys: list[str], src: _Source) -> list[_Combo]:
    """The designs of the i-th [[point]]; its list-valued keys join ``varied_keys``."""
    lists = {k: v for k, v in pt.items() if isinstance(v, list) and k != "schedule"}
    for k, v in lists.items():
        if not v:
            raise src.fail(src.of("point", i, k), f"point.{k} must not be an empty list")
        if k not in varied_keys:
            varied_keys.append(k)
    group = _text(pt.get("label", ""), src, "point", i, "label")
    combos = []
    for values in itertools.product(*lists.values()):
        varied = dict(zip(lists, values, strict=True))
        shown = " ".join(f"{k}={v}" for k, v in varied.items())
        label = " ".join(x for x in (group, shown) if x) or " ".join(
            f"{k}={v}" for k, v in pt.items())
        combos.append(({**base, **pt, **varied}, {**origins_base, **{k: ("point", i) for k in pt}},
                       label, varied, group))
    return combos


def _designs(combos: list[_Combo], arr: dict[str, Any], src: _Source) -> list[Design]:
    """Each combination built and checked on its array (the [array] table, then the
    combination's own array keys); labels made unique (they name rows and lines)."""
    designs = []
    for params, origins, label, varied, group in combos:
        where = f"{'point' if group or not varied else 'grid point'} {label!r}: "
        try:
            designs.append(designs_mod.design(label, params, varied, group, arr))
        except (MxsimError, TypeError) as e:
            origins = {**{k: ("array", 0) for k in arr}, **origins}
            line, key = _blame(e, origins, src, ("unit", 0))
            if isinstance(e, designs_mod.ParameterError) and key.startswith("unit."):
                where = ""                       # the base unit's own: every point has it
            raise src.fail(line, f"{where}{key}{_msg(e)}") from None
    seen: dict[str, int] = {}
    for i, d in enumerate(designs):
        seen[d.label] = seen.get(d.label, 0) + 1
        if seen[d.label] > 1:
            designs[i] = replace(d, label=f"{d.label} ({seen[d.label]})")
    return designs


def _references(doc: dict[str, Any], src: _Source) -> list[Reference]:
    base = doc.get("unit", {})
    references = []
    for i, ref in enumerate(doc.get("reference", [])):
        origins = {**{k: ("unit", 0) for k in base}, **{k: ("reference", i) for k in ref}}
        try:
            spec = designs_mod.reference({**base, **ref})
        except (MxsimError, TypeError) as e:
            line, key = _blame(e, origins, src, ("reference", i))
            raise src.fail(line, f"reference {i + 1}: {key}{_msg(e)}") from None
        references.append(Reference(_text(ref.get("label", spec.name), src, "reference", i,
                                          "label"), spec))
    return references


def _blame(e: Exception, origins: dict[str, tuple[str, int]], src: _Source,
           fallback: tuple[str, int]) -> tuple[int, str]:
    """The line of the key an error is about, and its ``table.key: ``: the key it carries
    (:class:`~mxsim.explore.designs.ParameterError`), else the longest key its message names,
    else the first key the design itself sets (a [grid] or [[point]] key), else the first of
    the base [unit]'s (an [array] key only where the message names it)."""
    key = getattr(e, "key", None)
    if key not in origins:
        text = re.sub(r"'[^']*'", "", str(e))         # not the words inside a quoted name
        named = [k for k in origins if re.search(rf"\b{re.escape(k)}\b", text)]
        named = [k for k in named if origins[k][0] != "unit"] or named
        own = [k for k in origins if origins[k][0] not in ("unit", "array")]
        base = [k for k in origins if origins[k][0] == "unit"]
        if named:
            key = max(named, key=len)
        elif own or base:
            key = (own or base)[0]
        else:
            return src.of(*fallback), ""
    table, index = origins[key]
    return src.of(table, index, key), f"{table}.{key}: "


def _msg(e: Exception) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return re.sub(r"^Unit spec '[^']*': ", "", text)


def _workloads(doc: dict[str, Any], designs: list[Design], references: list[Reference],
               src: _Source) -> list[Workload]:
    """The [[workload]]s, each checked on every design and reference; names unique."""
    workloads = [_workload(w, i, src) for i, w in enumerate(doc.get("workload", []))]
    if not workloads:
        raise src.fail(1, "a sweep needs at least one [[workload]]")
    units = [(d.spec, d.label) for d in designs] + [(r.spec, r.label) for r in references]
    for i, w in enumerate(workloads):
        for unit_spec, label in units:
            why = problem(w, unit_spec)
            if why:
                key = "recipe" if "recipe" in why else ("layer" if w.layer else "shape")
                raise src.fail(src.of("workload", i, key), f"workload {w.name!r} on {label!r}: "
                               f"{why}")
    names = [w.name for w in workloads]
    if len(set(names)) != len(names):
        again = next(i for i, n in enumerate(names) if n in names[:i])   # the second one
        raise src.fail(src.of("workload", again, "name"),
                       f"two workloads are named {names[again]!r}")
    return workloads


def _workload(w: dict, i: int, src: _Source) -> Workload:
    def bad(key: str, msg: str) -> SweepError:
        return src.fail(src.of("workload", i, key), f"workload.{key}: {msg}")

    name = _text(w.get("name", w.get("layer", f"workload{i + 1}")), src, "workload", i, "name")
    shape = _shape(w, name, i, src, bad)
    sample = w.get("sample", [64, 64])
    if not (isinstance(sample, list) and len(sample) == 2 and all(_count(x) for x in sample)):
        raise bad("sample", f"must be [m, n], two positive integers, not {sample!r}")
    sample = (min(sample[0], shape[0]), min(sample[1], shape[1]))
    if (sample[0] + sample[1]) * shape[2] > _MAX_SAMPLE_VALUES:
        raise bad("sample", f"the sample's operands (m x K + K x n = "
                  f"{(sample[0] + sample[1]) * shape[2]:,} values) must be at most "
                  f"{_MAX_SAMPLE_VALUES:,}; sample fewer outputs")
    dist = w.get("distribution", "llm")
    if not _among(dist, DISTRIBUTIONS):
        raise bad("distribution", f"must be one of {', '.join(DISTRIBUTIONS)}, not {dist!r}")
    recipe = w.get("recipe", "auto")
    if recipe != "auto" and not _among(recipe, RECIPES):
        raise bad("recipe", f"must be auto or one of {', '.join(RECIPES)}, not {recipe!r}")
    rules = [r.value for r in quantize.ScaleRule]
    rule = w.get("scale_rule", "rceil")
    if not _among(rule, rules):
        raise bad("scale_rule", f"must be one of {', '.join(rules)}, not {rule!r}")
    seed = w.get("seed", 0)
    if not _count(seed, least=0):
        raise bad("seed", f"must be a non-negative integer, not {seed!r}")
    return Workload(name=name, shape=shape, sample=sample, distribution=dist, recipe=recipe,
                    scale_rule=rule, seed=seed, layer=w.get("layer"))


def _shape(w: dict, name: str, i: int, src: _Source, bad: Any) -> tuple[int, int, int]:
    """M, N, K of a workload: a layer's (N, K) at ``tokens`` rows, or its ``shape``."""
    if "layer" in w:
        if not _among(w["layer"], LAYERS):
            raise bad("layer", f"unknown layer {w['layer']!r}; known: {', '.join(LAYERS)}")
        if "shape" in w:
            raise bad("shape", "give layer (and tokens) or shape, not both")
        tokens = w.get("tokens", 4096)
        if not _count(tokens):
            raise bad("tokens", f"must be a positive integer, not {tokens!r}")
        n, k = LAYERS[w["layer"]]
        return (tokens, n, k)
    if "shape" in w:
        s = w["shape"]
        if not (isinstance(s, list) and len(s) == 3 and all(_count(x) for x in s)):
            raise bad("shape", f"must be [M, N, K], three positive integers, not {s!r}")
        return tuple(s)
    raise src.fail(src.of("workload", i), f"workload {name!r} needs layer (one of "
                   f"{', '.join(LAYERS)}) or shape = [M, N, K]")


def _text(value: Any, src: _Source, table: str, index: int, key: str, *,
          lines: bool = False) -> str:
    """A name or text of the sweep (a label, a title), which reports and the terminal show:
    printable, on one line (a description may break lines and hold tabs); SweepError if not."""
    text = str(value)
    if printable(text, keep="\n\t" if lines else "") != text:
        bad = next(ch for ch in text if not (ch.isprintable() or lines and ch in "\n\t"))
        raise src.fail(src.of(table, index, key), f"{table}.{key} must be printable text"
                       f"{'' if lines else ' on one line'}, without control or format "
                       f"characters, not {text[:60]!r} (which holds {bad!r})")
    return text


def _among(x: Any, options: Any) -> bool:
    """A string among ``options`` (a TOML list or table is none, and not hashable)."""
    return isinstance(x, str) and x in options


def _count(x: Any, least: int = 1) -> bool:
    """An integer (not a bool) of at least ``least``."""
    return isinstance(x, int) and not isinstance(x, bool) and x >= least
