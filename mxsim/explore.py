"""Design-space exploration: accuracy x area x throughput of dot-product units.

A sweep file (TOML, docs/explore.md gives every key) names a base unit, what to vary (a
``[grid]`` of parameters and/or a list of ``[[point]]`` tables), the ``[[workload]]`` GEMMs and
the ``[array]`` of units. A point is one design on one workload. Each design is one
``(UnitSpec, MicroArch)``, and every figure of a point is read from those same objects:

- **accuracy**: the bit-exact fast engine (:func:`mxsim.engine.fast.dot`) runs the design's
  spec on a sample of the workload's GEMM outputs (full K) and the ``exact`` unit runs the same
  codes; the point reports the normwise relative error, the per-output relative error, the
  FP32 ulp distance and the fraction of outputs whose bits differ from ``exact``; and, against
  the unquantised float64 GEMM, the total error (quantisation and arithmetic together);
- **cost**: Yosys on the Verilog of ``hdl.verilog.generate(spec, microarch)`` (the generator
  ``mxsim rtl`` and ``mxsim verify`` use): cells by type, gate equivalents, flip-flops, the
  longest path, LUTs of one FPGA family; latency and initiation interval from the
  micro-architecture;
- **throughput**: :func:`mxsim.cycle.gemm` of the layer's whole GEMM on a rows x cols array of
  the units at the given operand bandwidth.

Promotion (``promote_every``) is done outside the unit (an FP32 add per P instructions, as on
Hopper's CUDA cores), so a design's RTL and cycle model take ``unit_spec``, the spec without
promotion; without promotion ``unit_spec`` *is* ``spec``.

Finished work is cached in ``OUT/cache``: areas by the hash of the Verilog text (points that
differ only in workload share it), accuracies by the hash of the spec and the workload. A sweep
that is stopped (Ctrl-C) keeps what it finished; the same command resumes it.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import hashlib
import itertools
import json
import os
import re
import signal
import time
import tomllib
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from . import cycle, formats, presets, quantize
from . import spec as spec_mod
from .errors import MxsimError
from .microarch import MicroArch, check_rtl
from .output import open_output, write_text
from .progress import Progress
from .quantize import RECIPE_SCALES, quantise_operands
from .spec import SpecError, UnitSpec

__all__ = ["SweepError", "Interrupted", "Workload", "Design", "Sweep", "Results", "load",
           "run", "accuracy", "area", "LAYERS", "DISTRIBUTIONS"]

SCHEMA = "mxsim.explore/1"
#: Bumped when a cached figure's meaning changes (old cache entries are then not reused).
CACHE_VERSION = 1

#: (N, K) of the GEMMs of a transformer layer (M is the number of tokens). Llama 3 8B: hidden
#: 4096, 8 KV heads of 128, FFN 14336; Llama 3 70B: hidden 8192, FFN 28672.
LAYERS = {
    "llama3-8b.qkv": (6144, 4096),
    "llama3-8b.attn-out": (4096, 4096),
    "llama3-8b.ffn-up": (28672, 4096),          # gate and up projections as one GEMM
    "llama3-8b.ffn-down": (4096, 14336),
    "llama3-70b.ffn-down": (8192, 28672),
}
DISTRIBUTIONS = {
    "normal": "activations and weights N(0, 1)",
    "llm": "activations Student-t (4 dof) with a log-normal scale per token and 0.5 % of "
           "channels 20-60x larger (outlier features, as in LLM.int8()); weights Student-t "
           "(8 dof) x 0.02 with a log-normal scale per output channel",
}
FPGAS = ("ice40", "lut4", "none")
ERRORS = ("unit", "total")

_SPEC_KEYS = {f.name for f in fields(UnitSpec)} - {"name", "instruction", "provenance"}
_DESIGN_KEYS = _SPEC_KEYS | {"preset", "spec", "lanes", "stages", "label"}
_OPTIONAL = {f.name for f in fields(UnitSpec) if "None" in str(f.type)}
_TABLES = {
    "sweep": {"name", "title", "description", "error"},
    "unit": _DESIGN_KEYS - {"label"},
    "grid": _DESIGN_KEYS - {"label"},
    "point": _DESIGN_KEYS,
    "reference": _DESIGN_KEYS - {"lanes", "stages"},
    "workload": {"name", "layer", "tokens", "shape", "sample", "distribution", "recipe",
                 "scale_rule", "seed"},
    "array": {"rows", "cols", "bandwidth"},
    "cost": {"fpga"},
}
_ARRAYS = {"point", "reference", "workload"}          # [[...]] tables

REL_FLOOR = -12.0
REL_BINS = np.arange(REL_FLOOR - 0.25, 0.51, 0.25)    # log10 relative error bins
ULP_EDGES = np.array([0, 1, 2, 3, 5, 9, 17, 33, 65, 129, 257, 513, 1025, 4097, 65537,
                      1 << 20, 1 << 62], np.int64)      # [0], [1], [2], [3,4], [5,8], ...


class SweepError(MxsimError, ValueError):
    """A sweep file that cannot run: ``FILE:LINE: what is wrong``."""


class Interrupted(MxsimError):
    """The sweep was stopped; what finished is cached and the same command resumes it."""


# -- the sweep file ---------------------------------------------------------------------------

class _Lines:
    """Where each table and key sits in the sweep file (``tomllib`` keeps no positions)."""

    def __init__(self, text: str):
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
        if key is not None and (table, index, key) in self.keys:
            return self.keys[(table, index, key)]
        return self.tables.get((table, index), 1)


@dataclass(frozen=True)
class Workload:
    """A GEMM of a layer: its whole shape (throughput) and the outputs sampled (accuracy)."""
    name: str
    shape: tuple[int, int, int]          #: M, N, K of the whole GEMM
    sample: tuple[int, int] = (64, 64)   #: m x n outputs computed at the full K
    distribution: str = "llm"
    recipe: str = "auto"                 #: "auto" (from the unit's scales), mx, nvfp4, fp8-tensor
    scale_rule: str = "rceil"            #: MX scale rule (mxsim.quantize)
    seed: int = 0
    layer: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "sample": list(self.sample),
                "distribution": self.distribution, "recipe": self.recipe,
                "scale_rule": self.scale_rule, "seed": self.seed, "layer": self.layer}

    def inputs_dict(self) -> dict[str, Any]:
        """What decides the workload's float inputs (the name does not)."""
        d = self.to_dict()
        del d["name"], d["layer"]
        d["shape"] = d["shape"][2:]                # only K: M and N are the throughput's
        return d

    @property
    def k(self) -> int:
        return self.shape[2]


@dataclass(frozen=True, eq=False)
class Design:
    """One unit design: the spec the engine runs, the unit the RTL builds, its microarch."""
    label: str
    spec: UnitSpec
    unit_spec: UnitSpec          #: ``spec`` less promotion (``spec`` itself when it has none)
    microarch: MicroArch
    params: dict[str, Any] = field(default_factory=dict)     #: the values swept
    group: str = ""              #: the [[point]] label it comes from ("" for the grid)

    @property
    def rtl_key(self) -> str:
        """Identifies the RTL to build (before it is generated): unit spec, microarch, hdl."""
        return _hash({"unit": self.unit_spec.to_dict(), "lanes": self.microarch.lanes,
                      "stages": self.microarch.stages, "hdl": _hdl_version(),
                      "v": CACHE_VERSION})


@dataclass(frozen=True, eq=False)
class Reference:
    """A unit measured for accuracy only (no RTL), drawn as a line: e.g. FP32 accumulation."""
    label: str
    spec: UnitSpec


@dataclass
class Sweep:
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

    @property
    def points(self) -> list[tuple[Design, Workload]]:
        return [(d, w) for d in self.designs for w in self.workloads]


def _none(value: Any) -> Any:
    return None if isinstance(value, str) and value.lower() in ("none", "exact") else value


def _build_design(params: dict[str, Any]) -> tuple[UnitSpec, UnitSpec, MicroArch | None]:
    """The spec, the unit spec (the spec less promotion; the spec itself without it) and the
    microarch a design's merged parameters name (raises the spec's errors)."""
    p = dict(params)
    preset, path = p.pop("preset", None), p.pop("spec", None)
    lanes, stages = p.pop("lanes", None), p.pop("stages", None)
    p.pop("label", None)
    a = p.pop("a_format", None)
    b = p.pop("b_format", None)
    if preset is not None and path is not None:
        raise SpecError("give preset or spec, not both")
    if preset is not None:
        pre = presets.get(preset)
        a, b = a or "e4m3", b or a or "e4m3"
        scale = (_none(p["scale_format"]) if "scale_format" in p else pre.scales[0][0],
                 _none(p["block"]) if "block" in p else pre.scales[0][1])
        if scale in pre.scales:
            p.pop("scale_format", None)
            p.pop("block", None)
            base = pre.spec(a, b, scale_format=scale[0], block=scale[1])
        else:
            base = pre.spec(a, b, scale_format=pre.scales[0][0], block=pre.scales[0][1])
    elif path is not None:
        base = spec_mod.load(path)
        base = base.replace(a_format=a or base.a_format, b_format=b or a or base.b_format)
    else:
        base = UnitSpec(a_format=a or "e4m3", b_format=b or a or "e4m3")
    changes = {}
    for key, value in p.items():
        value = _none(value) if key in _OPTIONAL else value
        if key == "schedule" and value == "serial":        # one product per fused step
            k = p.get("k", base.k)
            value = tuple((i,) for i in range(k)) if isinstance(k, int) else value
        changes[key] = value
    name = _name(base.name, params)
    spec = replace(base, name=name, **changes) if changes or name != base.name else base
    if spec.promote_every is not None:       # the unit the RTL builds is named without it
        unit = replace(spec, name=_name(base.name, params, unit=True), promote_every=None,
                       promote_rounding=UnitSpec.__dataclass_fields__["promote_rounding"]
                       .default)
    else:
        unit = spec
    ua = None
    if lanes is not None or stages is not None or spec.k is not None:
        ua = MicroArch(lanes=lanes if lanes is not None else (spec.k or 1),
                       stages=stages if stages is not None else 1)
    return spec, unit, ua


def _name(base: str, params: dict[str, Any], unit: bool = False) -> str:
    """``preset[key=value,...]``: the base's name and what the design changes (the unit's
    name leaves out promotion, which is done outside the unit)."""
    skip = {"preset", "spec", "label", "lanes", "stages"}
    if unit or _none(params.get("promote_every")) is None:
        skip |= {"promote_every", "promote_rounding"}
    shown = {k: v for k, v in params.items() if k not in skip}
    return base + ("[" + ",".join(f"{k}={v}" for k, v in shown.items()) + "]" if shown else "")


def _blame(msg: str, origins: dict[str, tuple[str, int]], lines: _Lines,
           fallback: tuple[str, int]) -> tuple[int, str]:
    """The line of the key an error message names (the longest that it names), or else of
    the first key the design sets beyond the base."""
    text = re.sub(r"'[^']*'", "", msg)               # not the words inside a quoted name
    named = [k for k in origins if re.search(rf"\b{re.escape(k)}\b", text)]
    named = [k for k in named if origins[k][0] != "unit"] or named
    varied = [k for k in origins if origins[k][0] != "unit"]
    if named:
        key = max(named, key=len)
    elif varied or origins:
        key = (varied or list(origins))[0]
    else:
        return lines.of(*fallback), ""
    table, index = origins[key]
    return lines.of(table, index, key), f"{table}.{key}: "


_MAX_SWEEP_BYTES = 1 << 20


def load(path: str | os.PathLike) -> Sweep:
    """Read and check a sweep file: every design, workload and combination is built and
    checked here, before anything runs (SweepError names the file and line)."""
    path = str(path)
    if Path(path).exists() and not Path(path).is_file():   # a FIFO or /dev/zero never ends
        raise SweepError(f"Cannot read sweep file {path}: not a regular file")
    if Path(path).is_file() and Path(path).stat().st_size > _MAX_SWEEP_BYTES:
        raise SweepError(f"{path}: {Path(path).stat().st_size:,} bytes, more than a sweep file's "
                         f"{_MAX_SWEEP_BYTES:,}; a sweep file is a short TOML file")
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as e:
        raise SweepError(f"Cannot read sweep file {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise SweepError(f"{path}: not UTF-8 text (byte {e.object[e.start]:#04x} at offset "
                         f"{e.start}); a sweep file is TOML in UTF-8") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SweepError(f"{path}: not valid TOML: {e}") from None
    except RecursionError:
        raise SweepError(f"{path}: nested too deeply to read (a sweep file's values are "
                         f"numbers, strings and short lists)") from None
    lines = _Lines(text)

    def fail(line: int, msg: str) -> SweepError:
        return SweepError(f"{path}:{line}: {msg}")

    for table, body in doc.items():
        if table not in _TABLES:
            raise fail(lines.of(table), f"unknown table [{table}]; a sweep has "
                       f"{', '.join(f'[{t}]' for t in _TABLES)}")
        entries = body if isinstance(body, list) else [body]
        if (table in _ARRAYS) != isinstance(body, list):
            form = f"[[{table}]]" if table in _ARRAYS else f"[{table}]"
            raise fail(lines.of(table), f"{table} must be written as {form}")
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise fail(lines.of(table, i), f"[{table}] must be a table")
            for key in entry:
                if key not in _TABLES[table]:
                    hint = ", ".join(sorted(_TABLES[table]))
                    raise fail(lines.of(table, i, key), f"unknown parameter {table}.{key}; "
                               f"[{table}] takes {hint}")

    head = doc.get("sweep", {})
    name = str(head.get("name", Path(path).stem))
    if name in ("", ".", "..") or any(ch in name for ch in "/\\\0") or name != name.strip():
        # The name is the default output folder, results/NAME: it must stay inside results/.
        raise fail(lines.of("sweep", 0, "name"), f"sweep.name must be a plain folder name "
                   f"(no '/', '\\', '..' or surrounding spaces), not {name!r}")
    error = head.get("error", "unit")
    if not _among(error, ERRORS):
        raise fail(lines.of("sweep", 0, "error"), f"sweep.error must be one of "
                   f"{', '.join(ERRORS)}, not {error!r}")
    cost = doc.get("cost", {})
    fpga = cost.get("fpga", "lut4")
    if not _among(fpga, FPGAS):
        raise fail(lines.of("cost", 0, "fpga"), f"cost.fpga must be one of {', '.join(FPGAS)}, "
                   f"not {fpga!r}")
    arr = doc.get("array", {})
    for key in ("rows", "cols", "bandwidth"):
        if key in arr and (isinstance(arr[key], bool) or not isinstance(arr[key], (int, float))
                           or arr[key] <= 0 or (key != "bandwidth" and
                                                not isinstance(arr[key], int))):
            raise fail(lines.of("array", 0, key), f"array.{key} must be a positive "
                       f"{'number (bytes per cycle)' if key == 'bandwidth' else 'integer'}, "
                       f"not {arr[key]!r}")

    base = doc.get("unit", {})
    origins_base = {k: ("unit", 0) for k in base}
    grid = doc.get("grid", {})
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise fail(lines.of("grid", 0, key), f"grid.{key} must be a non-empty list of "
                       f"values, not {values!r}")
    # (params, origins, label, varied, group): a grid combination or a point (whose own
    # list values, a schedule excepted, are swept too: a grid of its own).
    combos: list[tuple[dict, dict, str, dict, str]] = []
    if grid:
        for values in itertools.product(*grid.values()):
            varied = dict(zip(grid, values, strict=True))
            combos.append(({**base, **varied}, {**origins_base, **{k: ("grid", 0) for k in grid}},
                           " ".join(f"{k}={v}" for k, v in varied.items()), varied, ""))
    varied_keys = list(grid)
    for i, pt in enumerate(doc.get("point", [])):
        lists = {k: v for k, v in pt.items() if isinstance(v, list) and k != "schedule"}
        for k, v in lists.items():
            if not v:
                raise fail(lines.of("point", i, k), f"point.{k} must not be an empty list")
            if k not in varied_keys:
                varied_keys.append(k)
        group = str(pt.get("label", ""))
        for values in itertools.product(*lists.values()):
            varied = dict(zip(lists, values, strict=True))
            shown = " ".join(f"{k}={v}" for k, v in varied.items())
            label = " ".join(x for x in (group, shown) if x) or " ".join(
                f"{k}={v}" for k, v in pt.items())
            combos.append(({**base, **pt, **varied},
                           {**origins_base, **{k: ("point", i) for k in pt}}, label, varied,
                           group))
    if not combos:
        combos.append((dict(base), origins_base,
                       str(base.get("preset") or base.get("spec") or "unit"), {}, ""))

    designs = []
    for params, origins, label, varied, group in combos:
        where = f"{'point' if group or not varied else 'grid point'} {label!r}: "
        try:
            spec, unit, ua = _build_design(params)
            if spec.d_format != "fp32":
                raise SpecError(f"d_format must be fp32 for a sweep (the RTL outputs FP32), "
                                f"not {spec.d_format}")
            check_rtl(unit, ua)
        except (MxsimError, TypeError) as e:
            line, key = _blame(str(e), origins, lines, ("unit", 0))
            raise fail(line, f"{where}{key}{_msg(e)}") from None
        designs.append(Design(label, spec, unit, ua, dict(varied), group))

    seen: dict[str, int] = {}
    for i, d in enumerate(designs):                 # labels name rows and plot lines: unique
        seen[d.label] = seen.get(d.label, 0) + 1
        if seen[d.label] > 1:
            designs[i] = replace(d, label=f"{d.label} ({seen[d.label]})")

    references = []
    for i, ref in enumerate(doc.get("reference", [])):
        params = {**base, **ref}
        params = {k: v for k, v in params.items() if k not in ("lanes", "stages")}
        origins = {**{k: ("unit", 0) for k in base}, **{k: ("reference", i) for k in ref}}
        try:
            spec, _, _ = _build_design(params)
            if spec.d_format != "fp32":
                raise SpecError(f"d_format must be fp32, not {spec.d_format}")
        except (MxsimError, TypeError) as e:
            line, key = _blame(str(e), origins, lines, ("reference", i))
            raise fail(line, f"reference {i + 1}: {key}{_msg(e)}") from None
        references.append(Reference(str(ref.get("label", spec.name)), spec))

    workloads = [_workload(w, i, lines, fail) for i, w in enumerate(doc.get("workload", []))]
    if not workloads:
        raise fail(1, "a sweep needs at least one [[workload]]")
    for i, w in enumerate(workloads):
        for unit_spec, label in [(d.spec, d.label) for d in designs] + \
                [(r.spec, r.label) for r in references]:
            problem = _workload_problem(w, unit_spec)
            if problem:
                key = "recipe" if "recipe" in problem else ("layer" if w.layer else "shape")
                raise fail(lines.of("workload", i, key), f"workload {w.name!r} on {label!r}: "
                           f"{problem}")
    names = [w.name for w in workloads]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise fail(lines.of("workload", names.index(dup) + 1, "name"),
                   f"two workloads are named {dup!r}")
    return Sweep(path=path, name=name, title=str(head.get("title", name)),
                 description=str(head.get("description", "")), error=error, designs=designs,
                 references=references, workloads=workloads, rows=arr.get("rows", 16),
                 cols=arr.get("cols", 16), bandwidth=float(arr.get("bandwidth", 256)),
                 fpga=fpga, varied=varied_keys)


def _msg(e: Exception) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return re.sub(r"^Unit spec '[^']*': ", "", text)


def _workload(w: dict, i: int, lines: _Lines, fail: Callable) -> Workload:
    def bad(key: str, msg: str) -> SweepError:
        return fail(lines.of("workload", i, key), f"workload.{key}: {msg}")

    name = str(w.get("name", w.get("layer", f"workload{i + 1}")))
    if "layer" in w:
        if not _among(w["layer"], LAYERS):
            raise bad("layer", f"unknown layer {w['layer']!r}; known: {', '.join(LAYERS)}")
        if "shape" in w:
            raise bad("shape", "give layer (and tokens) or shape, not both")
        tokens = w.get("tokens", 4096)
        if not _count(tokens):
            raise bad("tokens", f"must be a positive integer, not {tokens!r}")
        n, k = LAYERS[w["layer"]]
        shape = (tokens, n, k)
    elif "shape" in w:
        s = w["shape"]
        if not (isinstance(s, list) and len(s) == 3 and all(_count(x) for x in s)):
            raise bad("shape", f"must be [M, N, K], three positive integers, not {s!r}")
        shape = tuple(s)
    else:
        raise fail(lines.of("workload", i), f"workload {name!r} needs layer (one of "
                   f"{', '.join(LAYERS)}) or shape = [M, N, K]")
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
    if recipe != "auto" and not _among(recipe, RECIPE_SCALES):
        raise bad("recipe", f"must be auto or one of {', '.join(RECIPE_SCALES)}, not {recipe!r}")
    rule = w.get("scale_rule", "rceil")
    if not _among(rule, [r.value for r in quantize.ScaleRule]):
        raise bad("scale_rule", f"must be one of "
                  f"{', '.join(r.value for r in quantize.ScaleRule)}, not {rule!r}")
    seed = w.get("seed", 0)
    if not _count(seed, least=0):
        raise bad("seed", f"must be a non-negative integer, not {seed!r}")
    return Workload(name=name, shape=shape, sample=sample, distribution=dist, recipe=recipe,
                    scale_rule=rule, seed=seed, layer=w.get("layer"))


#: A workload's sample is drawn as float64 operands: at most 2^24 values (128 MiB each way).
_MAX_SAMPLE_VALUES = 1 << 24


def _among(x: Any, options: Any) -> bool:
    """A string among ``options`` (a TOML list or table is none, and not hashable)."""
    return isinstance(x, str) and x in options


def _count(x: Any, least: int = 1) -> bool:
    """An integer (not a bool) of at least ``least``."""
    return isinstance(x, int) and not isinstance(x, bool) and x >= least


def _recipe(w: Workload, spec: UnitSpec) -> str:
    if w.recipe != "auto":
        return w.recipe
    by_scales = {scales: recipe for recipe, scales in RECIPE_SCALES.items()}
    return by_scales.get(spec.scale_format, "?")


def _workload_problem(w: Workload, spec: UnitSpec) -> str | None:
    recipe = _recipe(w, spec)
    if recipe not in RECIPE_SCALES:
        return (f"no recipe quantises for {spec.scale_format} scales (the recipes are "
                f"{', '.join(RECIPE_SCALES)})")
    if RECIPE_SCALES[recipe] != spec.scale_format:
        return (f"recipe {recipe} gives {RECIPE_SCALES[recipe] or 'no'} block scales, but the unit "
                f"takes {spec.scale_format or 'none'}")
    if recipe == "nvfp4" and (spec.a_format, spec.b_format) != ("e2m1", "e2m1"):
        return f"recipe nvfp4 gives e2m1 elements, not {spec.a_format} x {spec.b_format}"
    if spec.k is not None and w.k % spec.k:
        return f"K = {w.k} is not a multiple of the unit's k ({spec.k})"
    if spec.block is not None and w.k % spec.block:
        return f"K = {w.k} is not a multiple of the scale block ({spec.block})"
    return None


# -- workloads: float inputs, quantised by the recipe ---------------------------------------------

def floats(w: Workload) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """The float32 activations x (m, K) and weights w (K, n) of a workload's sample."""
    rng = np.random.default_rng(w.seed)
    (m, n), k = w.sample, w.k
    if w.distribution == "normal":
        x = rng.standard_normal((m, k))
        y = rng.standard_normal((k, n))
    else:
        x = rng.standard_t(4, (m, k)) * rng.lognormal(0.0, 0.5, (m, 1))
        outliers = rng.choice(k, max(1, k // 200), replace=False)
        x[:, outliers] *= rng.uniform(20.0, 60.0, outliers.size)
        y = rng.standard_t(8, (k, n)) * 0.02 * rng.lognormal(0.0, 0.3, (1, n))
    return x.astype(np.float32), y.astype(np.float32)


def quantised(w: Workload, spec: UnitSpec):
    """The workload's codes for ``spec`` (a VectorSet), the factor that turns the unit's output
    into the GEMM's value, and the unquantised float64 GEMM."""
    x, y = floats(w)
    vs, (fx, fy) = quantise_operands(x, y, _recipe(w, spec), spec.a_format, spec.b_format,
                                     block=spec.block, scale_rule=w.scale_rule)
    return vs, float(fx) * float(fy), x.astype(np.float64) @ y.astype(np.float64)


# -- the three views ------------------------------------------------------------------------------

#: The inputs of a few recent (workload, formats, scales): codes, factor, float GEMM and the
#: exact outputs, which every design on them shares (tasks come workload by workload).
_INPUTS: dict[str, tuple] = {}


def _inputs(w: Workload, spec: UnitSpec) -> tuple:
    from .engine import fast

    key = _hash({"w": w.inputs_dict(), "a": spec.a_format, "b": spec.b_format,
                 "s": spec.scale_format, "blk": spec.block, "r": _recipe(w, spec)})
    if key not in _INPUTS:
        if len(_INPUTS) >= 4:
            del _INPUTS[next(iter(_INPUTS))]
        vs, factor, ref = quantised(w, spec)
        exact = fast.dot(presets.get("exact").spec_for(vs), vs).reshape(-1)
        _INPUTS[key] = (vs, factor, ref.reshape(-1), exact)
    return _INPUTS[key]


def accuracy(spec: UnitSpec, w: Workload) -> dict[str, Any]:
    """Accuracy of ``spec`` on ``w``: its FP32 outputs (the fast engine) against ``exact``'s
    on the same codes, and against the unquantised float64 GEMM."""
    from .engine import fast

    vs, factor, ref, exact = _inputs(w, spec)
    return metrics(fast.dot(spec, vs).reshape(-1), exact, factor, ref)


def _ordered(bits: npt.NDArray[np.uint32]) -> npt.NDArray[np.int64]:
    """FP32 bit patterns as integers in value order (+0 and -0 both 0): ulp distances."""
    b = bits.astype(np.int64)
    mag = b & 0x7FFFFFFF
    return np.where(b >> 31, -mag, mag)


def metrics(d: npt.NDArray[np.uint32], e: npt.NDArray[np.uint32], factor: float,
            ref: npt.NDArray[np.float64]) -> dict[str, Any]:
    """Error figures of FP32 outputs ``d`` against the exact outputs ``e`` (same codes), and of
    ``d * factor`` against the float GEMM ``ref``."""
    from .plot import relative_errors

    fp32 = formats.get("fp32")
    dv, ev = fp32.decode(d), fp32.decode(e)
    ok = np.isfinite(dv) & np.isfinite(ev)
    ulp = np.abs(_ordered(d[ok]) - _ordered(e[ok]))
    rel = relative_errors(d[ok], "fp32", e[ok])
    lin = 10.0 ** rel
    lin[rel <= REL_FLOOR] = 0.0
    norm = float(np.linalg.norm(ev[ok]))
    rnorm = float(np.linalg.norm(ref[ok]))
    return {
        "outputs": int(d.size),
        "non_finite": int((~ok).sum()),
        "differ": float(np.mean(d != e)),
        "unit_err": float(np.linalg.norm(dv[ok] - ev[ok]) / norm) if norm else 0.0,
        "rel_median": float(np.median(lin)) if lin.size else 0.0,
        "rel_p99": float(np.quantile(lin, 0.99)) if lin.size else 0.0,
        "rel_max": float(lin.max()) if lin.size else 0.0,
        "ulp_mean": float(ulp.mean()) if ulp.size else 0.0,
        "ulp_max": int(ulp.max()) if ulp.size else 0,
        "total_err": float(np.linalg.norm(dv[ok] * factor - ref[ok]) / rnorm) if rnorm else 0.0,
        "quant_err": float(np.linalg.norm(ev[ok] * factor - ref[ok]) / rnorm) if rnorm else 0.0,
        "rel_hist": np.histogram(rel, bins=REL_BINS)[0].tolist(),
        "ulp_hist": np.histogram(ulp, bins=ULP_EDGES)[0].tolist(),
    }


def area(unit_spec: UnitSpec, microarch: MicroArch, fpga: str, cache_dir: str | None = None
         ) -> dict[str, Any]:
    """Yosys on ``hdl.verilog.generate(unit_spec, microarch)``, with the Verilog's hash.

    With ``cache_dir``, the Verilog is kept as ``rtl/HASH.v`` and a synthesis already in
    ``area/HASH-FPGA.json`` (the same Verilog text) is reused instead of run again.
    """
    from hdl import verilog

    t0 = time.perf_counter()
    text = verilog.generate(unit_spec, microarch)
    rtl_hash = hashlib.sha256(text.encode()).hexdigest()[:16]
    if cache_dir is not None:
        _write(Path(cache_dir) / "rtl" / f"{rtl_hash}.v", text)
        got = _read(Path(cache_dir) / "area" / f"{rtl_hash}-{fpga}.json")
        if got is not None:
            return {**got, "reused": True}           # this Verilog was synthesised already
    st = verilog.stats(unit_spec, microarch, ice40=fpga == "ice40", lut4=fpga == "lut4",
                       text=text)
    luts = st.luts if fpga == "ice40" else st.lut4 if fpga == "lut4" else None
    return {"rtl_hash": rtl_hash, "spec_digest": unit_spec.digest(), "cells": st.cells,
            "total_cells": st.total_cells, "flip_flops": st.flip_flops, "depth": st.depth,
            "gate_equivalents": st.gate_equivalents, "luts": luts, "fpga": fpga,
            "fpga_cells": st.ice40, "seconds": round(time.perf_counter() - t0, 1)}


def throughput(d: Design, w: Workload, rows: int, cols: int, bandwidth: float) -> dict:
    """The workload's whole GEMM on a rows x cols array of the design's units."""
    r = cycle.gemm(d.unit_spec, d.microarch, *w.shape, rows=rows, cols=cols,
                   bandwidth=bandwidth)
    return {"cycles": r.cycles, "dots_per_cycle": r.dots_per_cycle,
            "utilisation": r.utilisation, "stalls": r.stalls,
            "latency": d.microarch.latency(d.unit_spec),
            "interval": d.microarch.interval(d.unit_spec, chained=False),
            "interval_chained": d.microarch.interval(d.unit_spec, chained=True)}


# -- running a sweep ------------------------------------------------------------------------------

def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


@functools.cache
def _hdl_version() -> str:
    """A hash of the RTL generator's source: a cached RTL hash is stale when it changes."""
    root = Path(__file__).resolve().parent.parent / "hdl"
    text = "".join(p.read_text() for p in sorted(root.glob("*.py")))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _accuracy_key(spec: UnitSpec, w: Workload) -> str:
    d = spec.to_dict()
    for k in ("name", "instruction", "provenance"):
        d.pop(k, None)
    return _hash({"spec": d, "w": w.inputs_dict(), "v": CACHE_VERSION})


def _write(path: Path, text: str) -> None:
    """Write atomically: a reader (or a resumed sweep) sees the whole file or none."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, text)


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@dataclass
class Results:
    sweep: Sweep
    out: Path
    rows: list[dict[str, Any]]
    references: list[dict[str, Any]]
    computed: dict[str, int]          #: tasks run this time, by kind
    reused: dict[str, int]            #: tasks taken from the cache, by kind
    seconds: float
    files: list[str] = field(default_factory=list)


def _worker_init() -> None:
    """A worker leads its own process group and ignores SIGINT: Ctrl-C reaches only the
    sweep, which then stops each worker together with its Yosys child (SIGKILL to the
    group), and no worker prints a traceback of its own."""
    os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _area_job(unit_spec, microarch, fpga, cache_dir):
    return area(unit_spec, microarch, fpga, cache_dir)


def _accuracy_job(spec, workload):
    return accuracy(spec, workload)


def run(sweep: Sweep, out: str | os.PathLike, *, jobs: int | None = None,
        progress: bool | None = None, fresh: bool = False,
        on_done: Callable[[int], None] | None = None) -> Results:
    """Run every point of ``sweep`` not already in ``out/cache``; write the table, the Pareto
    front, the plots and the report into ``out``. ``on_done(n)`` is called after the n-th
    task finishes (tests use it to interrupt a sweep)."""
    t0 = time.perf_counter()
    out = Path(out)
    cache = out / "cache"
    jobs = max(1, jobs or os.cpu_count() or 1)
    if fresh and cache.exists():
        import shutil
        shutil.rmtree(cache)
    for stale in cache.glob("**/.*.tmp"):           # left by a worker that was stopped
        stale.unlink(missing_ok=True)

    # Tasks: one area per distinct RTL, one accuracy per distinct (spec, workload).
    tasks: dict[tuple[str, str], tuple[Callable, tuple, Path, int]] = {}
    # An area is cached by the hash of its Verilog (cache/area/HASH-FPGA.json); an index
    # from the design's RTL key to that hash (cache/index/) spares regenerating it on resume.
    for d in sweep.designs:
        tasks.setdefault(("area", d.rtl_key), (
            _area_job, (d.unit_spec, d.microarch, sweep.fpga, str(cache)),
            cache / "index" / f"{d.rtl_key}-{sweep.fpga}.json", 40))
    specs = [d.spec for d in sweep.designs] + [r.spec for r in sweep.references]
    for w in sweep.workloads:               # workload by workload: they share inputs
        for s in specs:
            key = _accuracy_key(s, w)
            tasks.setdefault(("accuracy", key), (_accuracy_job, (s, w),
                                                 cache / "accuracy" / f"{key}.json", 1))
    found: dict[tuple[str, str], Any] = {}
    for tk, (_, _, path, _) in tasks.items():
        got = _read(path)
        if got is not None and tk[0] == "area":
            got = _read(cache / "area" / f"{got['rtl_hash']}-{sweep.fpga}.json")
        if got is not None:
            found[tk] = got
    pending = [tk for tk in tasks if tk not in found]
    reused = {kind: sum(1 for k in found if k[0] == kind) for kind in ("area", "accuracy")}
    computed = {"area": 0, "accuracy": 0}
    total_w = sum(tasks[tk][3] for tk in pending) or 1
    bar = Progress(len(pending), progress, what="tasks")       # None: on for a terminal
    done_w = 0
    n_done = 0

    def finish(tk, result):
        nonlocal done_w, n_done
        hit = result.pop("reused", False)
        if tk[0] == "area":
            if not hit:
                _write(cache / "area" / f"{result['rtl_hash']}-{sweep.fpga}.json",
                       json.dumps(result, indent=1))
            _write(tasks[tk][2], json.dumps({"rtl_hash": result["rtl_hash"]}))
        else:
            _write(tasks[tk][2], json.dumps(result, indent=1))
        found[tk] = result
        (reused if hit else computed)[tk[0]] += 1
        done_w += tasks[tk][3]
        n_done += 1
        bar.update(n_done, f"(area {computed['area']}, accuracy {computed['accuracy']})",
                   frac=done_w / total_w)
        if on_done is not None:
            on_done(n_done)

    pending.sort(key=lambda tk: -tasks[tk][3])          # the long syntheses first
    bar.update(0, frac=0.0)
    try:
        if jobs == 1 or len(pending) <= 1:
            for tk in pending:
                fn, args, _, _ = tasks[tk]
                finish(tk, fn(*args))
        else:
            with ProcessPoolExecutor(max_workers=jobs, initializer=_worker_init) as pool:
                futures = {pool.submit(tasks[tk][0], *tasks[tk][1]): tk for tk in pending}
                try:
                    remaining = set(futures)
                    while remaining:
                        ready, remaining = wait(remaining, return_when=FIRST_COMPLETED)
                        for f in ready:
                            finish(futures[f], f.result())
                except BaseException:
                    # Stop the workers and their Yosys runs now (each is its own process
                    # group); ``_processes`` is private, but the only handle on them.
                    for proc in list((pool._processes or {}).values()):
                        with contextlib.suppress(OSError):
                            os.killpg(proc.pid, signal.SIGKILL)
                    pool.shutdown(wait=False, cancel_futures=True)
                    raise
    except KeyboardInterrupt:
        bar.close()
        raise Interrupted(f"interrupted: {n_done} of {len(pending)} tasks finished this run "
                          f"and are cached in {cache}; run the same command to resume") from None
    bar.close()

    rows = []
    for d in sweep.designs:
        cost = found[("area", d.rtl_key)]
        for w in sweep.workloads:
            acc = found[("accuracy", _accuracy_key(d.spec, w))]
            rows.append(_row(sweep, d, w, acc, cost, throughput(d, w, sweep.rows, sweep.cols,
                                                               sweep.bandwidth)))
    _mark_pareto(rows)
    refs = [{"label": r.label, "workload": w.name, "spec": r.spec.name,
             "spec_digest": r.spec.digest(),
             **found[("accuracy", _accuracy_key(r.spec, w))]}
            for r in sweep.references for w in sweep.workloads]
    res = Results(sweep, out, rows, refs, computed, reused, time.perf_counter() - t0)
    from . import explore_report
    res.files = explore_report.write(res)
    return res


def _row(sweep: Sweep, d: Design, w: Workload, acc: dict, cost: dict, tp: dict) -> dict:
    s = d.spec
    return {
        "label": d.label, "workload": w.name, "K": w.k,
        "a_format": s.a_format, "b_format": s.b_format,
        "scale": f"{s.scale_format}/{s.block}" if s.scale_format else "none",
        "k": s.k, "frac_bits": s.frac_bits, "acc": f"{s.acc_format} {s.acc_rounding.value}",
        "promote_every": s.promote_every,
        "lanes": d.microarch.lanes, "stages": d.microarch.stages,
        "error": acc["unit_err"] if sweep.error == "unit" else acc["total_err"],
        **{k: v for k, v in acc.items()},
        "gate_equivalents": cost["gate_equivalents"], "luts": cost["luts"],
        "fpga": cost["fpga"], "flip_flops": cost["flip_flops"], "cells": cost["total_cells"],
        "depth": cost["depth"], "cells_by_type": cost["cells"],
        **{k: v for k, v in tp.items()},
        "rtl_hash": cost["rtl_hash"], "unit_digest": d.unit_spec.digest(),
        "spec_digest": s.digest(), "spec": s.name,
        "params": d.params, "group": d.group,
        "promotions": (w.k // (s.k * s.promote_every)) if s.promote_every else 0,
    }


def _mark_pareto(rows: list[dict]) -> None:
    """Pareto front per workload over (error low, gate equivalents low, dots/cycle high)."""
    for r in rows:
        r["pareto"] = not any(
            q is not r and q["workload"] == r["workload"]
            and q["error"] <= r["error"] and q["gate_equivalents"] <= r["gate_equivalents"]
            and q["dots_per_cycle"] >= r["dots_per_cycle"]
            and (q["error"] < r["error"] or q["gate_equivalents"] < r["gate_equivalents"]
                 or q["dots_per_cycle"] > r["dots_per_cycle"])
            for q in rows)


def _csv_rows(rows: list[dict]) -> tuple[list[str], list[dict]]:
    skip = {"rel_hist", "ulp_hist", "cells_by_type", "stalls", "params"}
    cols = [k for k in rows[0] if k not in skip] if rows else []
    return cols, [{k: r[k] for k in cols} for r in rows]


def write_table(rows: list[dict], path: Path) -> None:
    cols, flat = _csv_rows(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_output(path, "w") as f:
        wr = csv.DictWriter(f, fieldnames=cols)
        wr.writeheader()
        wr.writerows(flat)
