"""The figures of a point: accuracy (the bit-exact engine against ``exact`` and the float
GEMM), throughput (the cycle model on an array of units), its table row and the Pareto front.

- **accuracy**: the fast engine (:func:`mxsim.engine.fast.dot`) runs the design's spec on a
  sample of the workload's GEMM outputs (full K) and the ``exact`` unit runs the same codes: the
  normwise relative error, the per-output relative error, the FP32 ulp distance and the fraction
  of outputs whose bits differ; and, against the unquantised float64 GEMM, the total error.
- **throughput**: :func:`mxsim.array.analytic.estimate` of the workload's whole GEMM on the
  design's array (:class:`mxsim.array.ArraySpec`: rows x cols of the unit, its dataflow,
  buffers, accumulators and interleave); latency and interval from the MicroArch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .. import formats, presets
from ..array import analytic
from ..compare import ulp_order
from ..plot import REL_FLOOR, relative_errors
from ..spec import UnitSpec
from . import workloads
from .designs import Design, stable_hash
from .workloads import Workload

__all__ = ["REL_FLOOR", "REL_BINS", "ULP_EDGES", "metrics", "accuracy", "throughput", "row",
           "mark_pareto"]

REL_BINS = np.arange(REL_FLOOR - 0.25, 0.51, 0.25)    # log10 relative error bins
ULP_EDGES = np.array([0, 1, 2, 3, 5, 9, 17, 33, 65, 129, 257, 513, 1025, 4097, 65537,
                      1 << 20, 1 << 62], np.int64)      # [0], [1], [2], [3,4], [5,8], ...

#: The inputs of a few recent (workload, formats, scales): codes, factor, float GEMM and the
#: exact outputs, which every design on them shares (tasks come workload by workload).
_INPUTS: dict[str, tuple] = {}


def _inputs(w: Workload, spec: UnitSpec) -> tuple:
    from ..engine import fast

    key = stable_hash({"w": w.inputs_dict(), "a": spec.a_format, "b": spec.b_format,
                       "s": spec.scale_format, "blk": spec.block,
                       "r": workloads.recipe(w, spec)})
    if key not in _INPUTS:
        if len(_INPUTS) >= 4:
            del _INPUTS[next(iter(_INPUTS))]
        vs, factor, ref = workloads.quantised(w, spec)
        exact = fast.dot(presets.get("exact").spec_for(vs), vs).reshape(-1)
        _INPUTS[key] = (vs, factor, ref.reshape(-1), exact)
    return _INPUTS[key]


def accuracy(spec: UnitSpec, w: Workload) -> dict[str, Any]:
    """Accuracy of ``spec`` on ``w``: its FP32 outputs (the fast engine) against ``exact``'s
    on the same codes, and against the unquantised float64 GEMM."""
    from ..engine import fast

    vs, factor, ref, exact = _inputs(w, spec)
    return metrics(fast.dot(spec, vs).reshape(-1), exact, factor, ref)


def metrics(d: npt.NDArray[np.uint32], e: npt.NDArray[np.uint32], factor: float,
            ref: npt.NDArray[np.float64]) -> dict[str, Any]:
    """Error figures of FP32 outputs ``d`` against the exact outputs ``e`` (same codes), and of
    ``d * factor`` against the float GEMM ``ref``."""
    fp32 = formats.get("fp32")
    dv, ev = fp32.decode(d), fp32.decode(e)
    ok = np.isfinite(dv) & np.isfinite(ev)
    ulp = np.abs(ulp_order(d[ok], fp32) - ulp_order(e[ok], fp32))
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


def throughput(d: Design, w: Workload) -> dict:
    """The workload's whole GEMM on the design's array (:attr:`Design.array`)."""
    arr = d.array
    r = analytic.estimate(arr, *w.shape)
    m, n, _ = w.shape
    return {"rows": arr.rows, "cols": arr.cols, "units": arr.units,
            "dataflow": arr.dataflow.value, "interleave": arr.interleave,
            "accumulators": arr.accumulators.kind.value,
            "cycles": r.cycles, "dots_per_cycle": m * n / r.cycles,
            "macs_per_cycle": m * n * w.k / r.cycles,
            "utilisation": r.utilisation, "stalls": r.stalls, "traffic": r.traffic,
            "latency": d.microarch.latency(d.unit_spec),
            "interval": d.microarch.interval(d.unit_spec, chained=False),
            "interval_chained": d.microarch.interval(d.unit_spec, chained=True)}


def row(error: str, d: Design, w: Workload, acc: dict, cost: dict, tp: dict) -> dict:
    """One point's row of the results table: the design, its accuracy (``error``, "unit" or
    "total", picks the error the Pareto front uses), its area and its throughput."""
    s = d.spec
    return {
        "label": d.label, "workload": w.name, "K": w.k,
        "a_format": s.a_format, "b_format": s.b_format,
        "scale": f"{s.scale_format}/{s.block}" if s.scale_format else "none",
        "k": s.k, "frac_bits": s.frac_bits, "acc": f"{s.acc_format} {s.acc_rounding.value}",
        "promote_every": s.promote_every,
        "lanes": d.microarch.lanes, "stages": d.microarch.stages,
        "error": acc["unit_err"] if error == "unit" else acc["total_err"],
        **{k: v for k, v in acc.items()},
        "gate_equivalents": cost["gate_equivalents"], "luts": cost["luts"],
        "array_ge": cost["gate_equivalents"] * tp["units"],
        "fpga": cost["fpga"], "flip_flops": cost["flip_flops"], "cells": cost["total_cells"],
        "depth": cost["depth"], "cells_by_type": cost["cells"],
        **{k: v for k, v in tp.items()},
        "rtl_hash": cost["rtl_hash"], "unit_digest": d.unit_spec.digest(),
        "spec_digest": s.digest(), "spec": s.name,
        "params": d.params, "group": d.group,
        "promotions": (w.k // (s.k * s.promote_every)) if s.promote_every else 0,
    }


def mark_pareto(rows: list[dict]) -> None:
    """Pareto front per workload over (error low, the array's gate equivalents low -- the
    unit's times the units, ``array_ge``, where the row has it --, dots/cycle high): sets
    each row's ``pareto``."""
    def area(r: dict) -> float:
        return r.get("array_ge", r["gate_equivalents"])

    for r in rows:
        r["pareto"] = not any(
            q is not r and q["workload"] == r["workload"]
            and q["error"] <= r["error"] and area(q) <= area(r)
            and q["dots_per_cycle"] >= r["dots_per_cycle"]
            and (q["error"] < r["error"] or area(q) < area(r)
                 or q["dots_per_cycle"] > r["dots_per_cycle"])
            for q in rows)
