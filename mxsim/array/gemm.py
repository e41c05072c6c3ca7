"""A GEMM tiled onto an array of units: its output bits beside its timing, in one run.

:func:`gemm` takes an :class:`~mxsim.array.ArraySpec` and an M x N x K GEMM and gives

- **D's bits** (when operands are given or drawn): the engine's, summed in the dataflow's
  accumulation order (:mod:`mxsim.array.numerics`: the unit's C chain for "os" and for
  "ws"/"is" with register accumulators; K-tiles of ``rows`` instructions added in FP32 for
  "ws"/"is" with a tensor memory), so D changes with the dataflow exactly when the
  accumulator rounds;
- **cycles, utilisation, stalls by cause and buffer traffic**: from the cycle model
  (:func:`mxsim.array.cycle.simulate`, cycle by cycle) for GEMMs it can step, and from the
  closed form (:func:`mxsim.array.analytic.estimate`) otherwise or when asked; the result says
  which (``view``) and whether the closed form is exact there (``exact``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..vectors import VectorSet
from . import analytic, numerics
from .spec import ArrayError, ArraySpec

__all__ = ["GemmRun", "gemm", "operands", "VIEWS", "CYCLE_LIMIT"]

VIEWS = ("auto", "cycle", "analytic")
#: ``view="auto"`` steps the cycle model for GEMMs of at most this many beats (M x N x K / k).
CYCLE_LIMIT = 1 << 16


@dataclass
class GemmRun:
    """One GEMM on one array: timing from ``view``, and D's codes when operands were given."""
    array: ArraySpec
    shape: tuple[int, int, int]
    order: str                       #: "chain" or "tiles" (mxsim.array.numerics)
    k_tile: int | None               #: K elements per tile in the "tiles" order
    view: str                        #: "cycle" or "analytic": where the timing comes from
    exact: bool                      #: the timing is the cycle model's (or equal to it)
    cycles: int
    utilisation: float
    stalls: dict[str, int]
    traffic: dict[str, int]
    d: npt.NDArray | None = None     #: D's FP32 codes, (M, N)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def macs_per_cycle(self) -> float:
        m, n, k = self.shape
        return m * n * k / self.cycles

    def to_dict(self) -> dict[str, Any]:
        m, n, k = self.shape
        return {"array": self.array.name, "m": m, "n": n, "k": k,
                "dataflow": self.array.dataflow.value, "order": self.order,
                "k_tile": self.k_tile, "view": self.view, "exact": self.exact,
                "cycles": self.cycles, "utilisation": self.utilisation,
                "macs_per_cycle": self.macs_per_cycle, "stalls": dict(self.stalls),
                "traffic": dict(self.traffic), **self.extra}


def operands(array: ArraySpec, m: int, n: int, k: int, *, family: str = "normal",
             seed: int = 0) -> VectorSet:
    """Seeded operands for the array's unit (its formats and block scales), no C."""
    from ..vectors import generators
    u = array.unit
    return generators.generate(family, a_format=u.a_format, b_format=u.b_format, m=m, n=n,
                               k=k, scale_format=u.scale_format, block=u.block,
                               with_c=False, seed=seed)


def _timing(array: ArraySpec, m: int, n: int, k: int, view: str, vs: VectorSet | None):
    """(view, exact, cycles, utilisation, stalls, traffic, D from the cycle model or None)."""
    if view not in VIEWS:
        raise ArrayError(f"view must be one of {', '.join(VIEWS)}, not {view!r}")
    est = analytic.estimate(array, m, n, k)
    if view == "auto":
        view = "cycle" if m * n * (k // array.unit.k) <= CYCLE_LIMIT else "analytic"
    if view == "analytic":
        return ("analytic", est.exact, est.cycles, est.utilisation, est.stalls, est.traffic,
                None)
    from . import cycle
    ops = {} if vs is None else {"a": vs.a, "b": vs.b, "c": vs.c, "a_scale": vs.a_scale,
                                 "b_scale": vs.b_scale}
    run = cycle.simulate(array, m, n, k, **ops)
    return ("cycle", True, run.cycles, run.utilisation, dict(run.stalls), dict(run.traffic),
            run.d)


def gemm(array: ArraySpec, m: int, n: int, k: int, *, vs: VectorSet | None = None,
         view: str = "auto") -> GemmRun:
    """The GEMM ``m x n x k`` on ``array``: timing from ``view`` ("auto": the cycle model
    up to :data:`CYCLE_LIMIT` beats, else the closed form) and, with operands ``vs`` (a
    VectorSet of shape M x K, K x N for the array's unit), D's codes from the engine in the
    dataflow's accumulation order."""
    analytic.check(array, m, n, k)
    if vs is not None and (vs.m, vs.n, vs.k) != (m, n, k):
        raise ArrayError(f"the operands are {vs.m} x {vs.n} x {vs.k}, not the GEMM's "
                         f"{m} x {n} x {k}")
    order = numerics.order_of(array.dataflow.value, array.accumulators.kind.value)
    k_tile = array.rows * array.unit.k if order == "tiles" else None
    view, exact, cycles, util, stalls, traffic, d_cycle = _timing(array, m, n, k, view, vs)
    d = None
    extra: dict[str, Any] = {}
    if vs is not None:
        d = numerics.accumulate(array.unit, vs, order, k_tile).reshape(m, n)
        if d_cycle is not None:      # the cycle model's D, by the engine's promotion route
            extra["cycle_model_d_equal"] = bool(np.array_equal(d, d_cycle))
    return GemmRun(array, (m, n, k), order, k_tile, view, exact, cycles, util, stalls,
                   traffic, d, extra)
