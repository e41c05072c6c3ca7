"""Shape -> plan: which plan a library call runs at a shape, from recorded GPU runs.

A table (``mxsim/plans/data/<gpu>.json``, written by ``python -m gpu.runs.plan_table`` from
the committed H200 records) holds, per GPU, library version, path (``mxsim gpu info``'s names:
``cublas-bf16``, ``cublas-fast``, ...) and shape, the plan that reproduced every output there
and the record that says so. For a shape the table lacks, :func:`lookup` applies the table's
rule, the plan of the nearest recorded shape of the same path (distance in log M, log N,
log K), and says how often that rule was right on the recorded shapes held out one at a time.
A path the table has no record of is an error that names what is covered.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from . import Plan, PlanError, from_dict

__all__ = ["Entry", "Lookup", "entries", "lookup", "paths", "covered", "TABLES", "DEFAULT_GPU",
           "held_out"]

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
    t = _table(gpu)
    return [Entry(path=e["path"], m=e["m"], n=e["n"], k=e["k"],
                  plan=from_dict(e["plan"], source=f"plan table {gpu}"), evidence=e["evidence"])
            for e in t["entries"]]


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
    return math.sqrt(sum(math.log2(x / y) ** 2 for x, y in zip(a, b, strict=True)))


def _nearest(pool: list[Entry], shape: tuple[int, int, int]) -> Entry:
    return min(pool, key=lambda e: (_distance(e.shape, shape), e.shape))


def held_out(gpu: str = DEFAULT_GPU) -> dict[str, tuple[int, int]]:
    """Per path: (right, of) for the nearest-shape rule on each recorded shape held out in turn
    (right: the nearest other shape's plan computes alike, see :func:`same_chunking`)."""
    out: dict[str, tuple[int, int]] = {}
    es = entries(gpu)
    for path in sorted({e.path for e in es}):
        pool = [e for e in es if e.path == path]
        right = 0
        for e in pool:
            others = [o for o in pool if o is not e]
            if others and same_chunking(_nearest(others, e.shape).plan, e.plan, e.k):
                right += 1
        out[path] = (right, len(pool) if len(pool) > 1 else 0)
    return out


def same_chunking(x: Plan, y: Plan, k: int) -> bool:
    """Plans that cut a K of ``k`` alike and reduce alike, with the same unit."""
    def key(p: Plan):
        bounds = p.bounds(k)
        red = (p.partial_format, p.merge, p.sum_format) if len(bounds) > 1 else ()
        return p.unit, tuple(bounds), red, p.out_format, p.alpha, p.beta
    return key(x) == key(y)


def lookup(path: str, m: int, n: int, k: int, gpu: str = DEFAULT_GPU) -> Lookup:
    """The plan ``path`` runs at M x N x K on ``gpu``: recorded, or by the table's rule."""
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
