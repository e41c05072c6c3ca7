"""Batch invariance, predicted from plans: does a row's result depend on how many rows M the
call had?

A library picks its plan by shape, so the same activation row times the same weights can give
other bits at M = 8 than at M = 1. :func:`batch_invariance` takes a layer (N, K), a GPU path
and a list of M, finds each M's plan in the plan table (recorded, or by the table's rule, as
:func:`mxsim.plans.table.lookup` says), runs the same rows through each plan on a CPU and
reports, per M, how many outputs differ from M = 1's and by how many ulp. Columns are
independent dot products, so ``cols`` of the N columns stand for the layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import formats, vectors
from ..compare import ulp_distance
from . import PlanError
from .run import run
from .table import DEFAULT_GPU, lookup, same_chunking

__all__ = ["Row", "batch_invariance", "LLAMA3_8B", "OPERAND_FORMAT", "markdown",
           "INVARIANCE_MS_DOC"]

#: Llama-3-8B's linear layers as (N, K) = (out_features, in_features).
LLAMA3_8B = {"q_proj, o_proj": (4096, 4096), "k_proj, v_proj": (1024, 4096),
             "gate_proj, up_proj": (14336, 4096), "down_proj": (4096, 14336)}

#: The batch sizes docs/plans.md's table asks (issue 33).
INVARIANCE_MS_DOC = (1, 2, 3, 8, 17, 33, 128, 257, 1024)

#: The operand format each library path takes.
OPERAND_FORMAT = {"cublas": "e4m3", "cublas-fast": "e4m3", "cublas-fp16": "fp16",
                  "cublas-bf16": "bf16", "cublas-tf32": "tf32"}


@dataclass(frozen=True)
class Row:
    """One M of the answer."""
    m: int
    plan: str                 #: the plan, in words
    source: str               #: "record" or "rule"
    same_plan: bool           #: computes as M = 1's plan does
    differ: int               #: outputs of the sample rows whose bits differ from M = 1's
    outputs: int
    max_ulp: int
    median_ulp: float         #: of the outputs that differ (0 when none does)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def batch_invariance(path: str, n: int, k: int, ms: list[int], *, gpu: str = DEFAULT_GPU,
                     rows: int = 4, cols: int = 64, seed: int = 0) -> list[Row]:
    """Per M: M's plan, and how ``rows`` activation rows against ``cols`` weight columns
    differ from the same rows at M = 1 (``llm`` values of the path's operand format)."""
    if path not in OPERAND_FORMAT:
        raise PlanError(f"batch invariance is for the library paths "
                        f"{', '.join(OPERAND_FORMAT)}, not {path!r}")
    for name, value in (("N", n), ("K", k), ("rows", rows), ("cols", cols)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise PlanError(f"{name} must be a positive whole number, not {value!r}")
    if not ms or any(isinstance(m, bool) or not isinstance(m, int) or m < 1 for m in ms):
        raise PlanError(f"M values must be positive whole numbers, not {ms!r}")
    fmt = OPERAND_FORMAT[path]
    if k > 1 << 20:
        raise PlanError(f"K must be at most {1 << 20:,} here, not {k:,}")
    vs = vectors.generate("llm", a_format=fmt, m=rows, n=min(cols, n), k=k, seed=seed,
                          with_c=False)
    base = lookup(path, 1, n, k, gpu=gpu)
    d1 = np.asarray(run(base.plan, vs))
    out_fmt = formats.get(base.plan.out_format)
    out = []
    for m in ms:
        found = lookup(path, m, n, k, gpu=gpu)
        same = same_chunking(found.plan, base.plan, k, fmt, fmt)
        d = d1 if same else np.asarray(run(found.plan, vs))
        if found.plan.out_format != base.plan.out_format:
            raise PlanError(f"{path}'s plans at M = 1 and M = {m} write different formats")
        differ = d != d1
        ulp = ulp_distance(d, d1, out_fmt)
        far = np.abs(ulp)[differ]
        out.append(Row(m=m, plan=found.plan.describe(), source=found.source, same_plan=same,
                       differ=int(differ.sum()), outputs=int(d.size),
                       max_ulp=int(far.max()) if far.size else 0,
                       median_ulp=float(np.median(far)) if far.size else 0.0))
    return out


def markdown(path: str, layers: dict[str, tuple[int, int]], ms: list[int],
             **kwargs: Any) -> str:
    """A table (layer x M) of differing outputs / max ulp against M = 1, for ``path``."""
    head = "| layer (N×K) | " + " | ".join(f"M = {m}" for m in ms) + " |"
    lines = [head, "|---|" + "---|" * len(ms)]
    for name, (n, k) in layers.items():
        cells = []
        for r in batch_invariance(path, n, k, ms, **kwargs):
            mark = "" if r.source == "record" else "*"
            cells.append("=" if r.differ == 0 else
                         f"{r.differ}/{r.outputs}, median {r.median_ulp:g} ulp")
            cells[-1] += mark
        lines.append(f"| {name} ({n}×{k}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)
