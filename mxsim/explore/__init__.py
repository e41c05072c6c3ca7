"""Design-space exploration: accuracy x area x throughput of dot-product units.

A sweep file (TOML, docs/explore.md gives every key; :mod:`.sweep` reads it) names a base unit,
what to vary, the workloads and the array of units. A point is one design on one workload. Each
design is one ``(UnitSpec, MicroArch)`` (:mod:`.designs`), and every figure of a point is read
from those same objects:

- **accuracy** (:mod:`.metrics`): the bit-exact fast engine against the ``exact`` unit on the
  same codes of the workload's sample (:mod:`.workloads`), and against the float64 GEMM;
- **cost**: the area of the RTL the unit builds, through the :class:`AreaCost` the caller
  passes (the CLI passes ``hdl.verilog``'s generator and Yosys: this package never imports
  ``hdl``); latency and initiation interval from the micro-architecture;
- **throughput** (:mod:`.metrics`): :func:`mxsim.array.analytic.estimate` of the whole GEMM on
  the design's array (:class:`mxsim.array.ArraySpec`).

:func:`run` runs the points not already cached as :mod:`mxsim.campaign` tasks (:mod:`.tasks`:
in this process, on local workers (Dask's, or a process pool without Dask) or on an existing
Dask cluster) and writes the tables, the plots and the report (:mod:`.report`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from . import report, tasks
from .designs import Design, Reference
from .metrics import accuracy, mark_pareto, metrics, throughput
from .report import SCHEMA
from .sweep import Sweep, SweepError, load
from .tasks import AreaCost, Interrupted, Results, SweepFailed, Synthesis, measure_area
from .workloads import DISTRIBUTIONS, LAYERS, Workload, floats, quantised

__all__ = ["SweepError", "Interrupted", "SweepFailed", "Workload", "Design", "Reference",
           "Sweep", "Results", "AreaCost", "Synthesis", "load", "run", "accuracy", "metrics",
           "throughput", "measure_area", "mark_pareto", "floats", "quantised", "LAYERS",
           "DISTRIBUTIONS", "SCHEMA"]


def run(sweep: Sweep, out: str | os.PathLike, *, area: AreaCost, jobs: int | None = None,
        progress: bool | None = None, fresh: bool = False,
        on_done: Callable[[int], None] | None = None, scheduler: str | None = None,
        cluster_spec: str | None = None) -> Results:
    """Run every point of ``sweep`` not already in ``out/cache`` (areas through ``area``);
    write the table, the Pareto front, the plots and the report into ``out``. The tasks run
    in this process (``jobs=1``), on ``jobs`` local workers (default: one per core; a Dask
    cluster, or without Dask a process pool), on a running ``scheduler`` or on a dask-jobqueue
    ``cluster_spec``
    (:func:`tasks.run`). ``on_done(n)`` is called after the n-th task finishes (tests use it
    to interrupt a sweep)."""
    res = tasks.run(sweep, out, area=area, jobs=jobs, progress=progress, fresh=fresh,
                    on_done=on_done, scheduler=scheduler, cluster_spec=cluster_spec)
    res.files = report.write(res)
    return res
