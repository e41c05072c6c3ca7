"""Shape -> plan: which plan a library call runs at a shape, from recorded GPU runs.

A table (``mxsim/plans/data/<gpu>.json``, written by ``python -m gpu.runs.plan_table`` from
the committed H200 records) holds, per GPU, library version, path (``mxsim gpu info``'s names:
``cublas-bf16``, ``cublas-fast``, ...) and shape, the plan that reproduced every output there
and the record that says so. For a shape the table lacks, :func:`lookup` applies the table's
rule, the plan of the nearest recorded shape of the same path (distance in log2(M x N) and
log2(K)), and says how often that rule was right on the recorded shapes held out one at a time.
A path the table has no record of is an error that names what is covered.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .. import presets
from . import Plan, PlanError, from_dict

__all__ = ["Entry", "Lookup", "entries", "entries_of", "lookup", "paths", "covered", "TABLES",
           "DEFAULT_GPU", "held_out", "held_out_of", "same_chunking"]

_DATA = Path(__file__).with_name("data")
#: The tables shipped, by name.
TABLES = ("h200",)
DEFAULT_GPU = "h200"


@dataclass(frozen=True)
class Entry:
    """One recorded (path, shape) and the plan that reproduced every output there."""
    path: str
    m: int
    n: int
    k: int
    plan: Plan
    evidence: str            #: the record(s) and the count of equal outputs
    a_format: str = ""
    b_format: str = ""

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.m, self.n, self.k


@dataclass(frozen=True)
class Lookup:
    """What :func:`lookup` found: the plan, and whether a record or the rule gave it."""
    plan: Plan
    source: str              #: "record" or "rule"
    entry: Entry             #: the recorded entry (the nearest one, for the rule)
    note: str                #: one line: where the plan comes from and how far to trust it


@cache
def _table(gpu: str) -> dict[str, Any]:
    if gpu not in TABLES:
        raise PlanError(f"no plan table for GPU {gpu!r}; tables: {', '.join(TABLES)}")
    return json.loads((_DATA / f"{gpu}.json").read_text())


def entries(gpu: str = DEFAULT_GPU) -> list[Entry]:
    return entries_of(_table(gpu))


def entries_of(table: dict[str, Any]) -> list[Entry]:
    """The entries of a table given as its JSON data."""
    return [Entry(path=e["path"], m=e["m"], n=e["n"], k=e["k"],
                  plan=from_dict(e["plan"], source="plan table"), evidence=e["evidence"],
                  a_format=e["a_format"], b_format=e["b_format"])
            for e in table["entries"]]


def paths(gpu: str = DEFAULT_GPU) -> list[str]:
    """The GPU paths the table has records of."""
    return sorted({e.path for e in entries(gpu)})


def covered(gpu: str = DEFAULT_GPU) -> str:
    """One line: what the table covers."""
    t = _table(gpu)
    per = {}
    for e in entries(gpu):
        per.setdefault(e.path, []).append(e)
    return (f"plan table {gpu} ({t['device']}): " + "; ".join(
        f"{p}: {len(es)} shape(s)" for p, es in sorted(per.items())))


def _distance(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    """Shapes apart in log2(M x N) (how many output tiles there are to spread over the SMs)
    and log2(K) (how deep each one is): what a split-K heuristic weighs."""
    return math.hypot(math.log2(a[0] * a[1] / (b[0] * b[1])), math.log2(a[2] / b[2]))


def _nearest(pool: list[Entry], shape: tuple[int, int, int]) -> Entry:
    return min(pool, key=lambda e: (_distance(e.shape, shape), e.shape))


def held_out(gpu: str = DEFAULT_GPU) -> dict[str, tuple[int, int]]:
    """Per path: (right, of), as the table records it (:func:`held_out_of`)."""
    return {p: (v[0], v[1]) for p, v in _table(gpu)["held_out"].items()}


def held_out_of(table: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Per path: (right, of) for the nearest-shape rule on each recorded shape held out in turn
    (right: the nearest other shape's plan computes alike, see :func:`same_chunking`)."""
    out: dict[str, tuple[int, int]] = {}
    es = entries_of(table)
    for path in sorted({e.path for e in es}):
        pool = [e for e in es if e.path == path]
        right = 0
        for e in pool:
            others = [o for o in pool if o is not e]
            if others and same_chunking(_nearest(others, e.shape).plan, e.plan, e.k,
                                        e.a_format, e.b_format):
                right += 1
        out[path] = (right, len(pool) if len(pool) > 1 else 0)
    return out


def same_chunking(x: Plan, y: Plan, k: int, a_format: str, b_format: str) -> bool:
    """Plans that cut a K of ``k`` alike and reduce alike, with units that compute alike on
    ``a_format`` x ``b_format`` (presets of other names but the same arithmetic)."""
    def key(p: Plan):
        spec = presets.get(p.unit).spec_for_formats(a_format, b_format)
        bounds = p.bounds(k, spec.k)
        red = (p.partial_format, p.merge, p.sum_format) if len(bounds) > 1 else ()
        arith = sorted((f, v) for f, v in spec.to_dict().items()
                       if f not in ("name", "instruction", "provenance"))
        return repr(arith), tuple(bounds), red, p.out_format, p.alpha, p.beta
    return key(x) == key(y)


def lookup(path: str, m: int, n: int, k: int, gpu: str = DEFAULT_GPU) -> Lookup:
    """The plan ``path`` runs at M x N x K on ``gpu``: recorded, or by the table's rule."""
    for name, value in (("M", m), ("N", n), ("K", k)):
        if isinstance(value, bool) or not hasattr(value, "__index__") or value < 1:
            raise PlanError(f"{name} must be a positive whole number, not {value!r}")
    m, n, k = int(m), int(n), int(k)
    es = [e for e in entries(gpu) if e.path == path]
    if not es:
        raise PlanError(f"no plan for GPU path {path!r}: {covered(gpu)}; record one with "
                        f"`mxsim gpu run` and `mxsim fit --plan`")
    for e in es:
        if e.shape == (m, n, k):
            return Lookup(plan=e.plan, source="record", entry=e,
                          note=f"{path} at {m}x{n}x{k}: recorded on the {gpu.upper()} "
                               f"({e.evidence})")
    near = _nearest(es, (m, n, k))
    right, of = held_out(gpu).get(path, (0, 0))
    trust = (f"right on {right} of {of} recorded shapes held out" if of else
             "untested: one recorded shape, none to hold out")
    return Lookup(plan=near.plan, source="rule", entry=near,
                  note=f"{path} at {m}x{n}x{k}: not recorded; the plan of the nearest recorded "
                       f"shape {near.m}x{near.n}x{near.k} (rule {trust})")
