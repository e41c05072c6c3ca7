"""What ``mxsim explore`` writes: ``results.json``, ``results.csv``, ``pareto.csv``, the plots
(PNG, matplotlib imported only here) and ``report.md``, the page a person reads first."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from ..output import open_output, write_text
from . import arrayplot
from .designs import ARRAY_DEFAULTS, ARRAY_KEYS
from .metrics import REL_BINS, REL_FLOOR, ULP_EDGES
from .sweep import Sweep
from .tasks import Results

__all__ = ["SCHEMA", "write", "write_table"]

SCHEMA = "mxsim.explore/1"
_MARKERS = "osD^vP*X"


def write(res: Results) -> list[str]:
    """Write every output of a finished sweep into ``res.out``; the file names."""
    out = res.out
    out.mkdir(parents=True, exist_ok=True)
    sw = res.sweep
    doc = {
        "schema": SCHEMA,
        "sweep": {"path": sw.path, "name": sw.name, "title": sw.title,
                  "description": sw.description, "error": sw.error,
                  "array": {"rows": sw.rows, "cols": sw.cols, "bandwidth": sw.bandwidth,
                            **sw.array},
                  "fpga": sw.fpga, "designs": len(sw.designs),
                  "rtl_configurations": len({r["rtl_hash"] for r in res.rows}),
                  "workloads": [w.to_dict() for w in sw.workloads],
                  "rel_bins": REL_BINS.tolist(), "ulp_edges": ULP_EDGES[:-1].tolist()},
        "run": {"seconds": round(res.seconds, 1), "computed": res.computed,
                "reused": res.reused},
        "points": res.rows,
        "references": res.references,
    }
    write_text(out / "results.json", json.dumps(doc, indent=1, default=str))
    write_table(res.rows, out / "results.csv")
    write_table([r for r in res.rows if r["pareto"]], out / "pareto.csv")
    files = ["results.json", "results.csv", "pareto.csv"]
    plots = _plots(res)
    files += plots
    write_text(out / "report.md", _report(res, plots))
    files.append("report.md")
    return files


def write_table(rows: list[dict], path: Path) -> None:
    """The rows as CSV, less the columns that are lists or tables (histograms, cells by type,
    stalls, traffic, params: results.json has them)."""
    skip = {"rel_hist", "ulp_hist", "cells_by_type", "stalls", "traffic", "params"}
    cols = [k for k in rows[0] if k not in skip] if rows else []
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_output(path, "w") as f:
        wr = csv.DictWriter(f, fieldnames=cols)
        wr.writeheader()
        wr.writerows([{k: r[k] for k in cols} for r in rows])


# -- plots ----------------------------------------------------------------------------------------

def _err(sw: Sweep, r: dict) -> float:
    return max(r["unit_err"] if sw.error == "unit" else r["total_err"], 1e-12)


def _err_name(sw: Sweep) -> str:
    return ("normwise relative error against exact" if sw.error == "unit" else
            "normwise relative error against the float64 GEMM")


def _plots(res: Results) -> list[str]:
    """Draw every plot into ``res.out``; their file names (none without matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    files = [_error_vs_area(res, matplotlib, plt), _error_distributions(res, matplotlib, plt)]
    if set(res.sweep.varied) & ARRAY_KEYS:
        name = arrayplot.draw(res, plt)
        if name is not None:
            files.append(name)
    for key in res.sweep.varied:
        name = _error_along(res, key, plt)
        if name is not None:
            files.append(name)
    return files


def _save(fig: Any, plt: Any, path: Path, **kwargs: Any) -> str:
    with open_output(path) as fh:
        fig.savefig(fh, format="png", **kwargs)
    plt.close(fig)
    return path.name


def _error_vs_area(res: Results, matplotlib: Any, plt: Any) -> str:
    """Error against area, coloured by throughput; the Pareto front ringed in red."""
    sw, rows = res.sweep, res.rows
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=110)
    dpc = np.array([r["dots_per_cycle"] for r in rows])
    norm = matplotlib.colors.Normalize(vmin=dpc.min(), vmax=dpc.max() if dpc.max() > dpc.min()
                                       else dpc.min() + 1)
    labelled = set()
    for i, w in enumerate(sw.workloads):
        rs = [r for r in rows if r["workload"] == w.name]
        sc = ax.scatter([r["gate_equivalents"] for r in rs], [_err(sw, r) for r in rs],
                        c=[r["dots_per_cycle"] for r in rs], cmap="viridis", norm=norm,
                        marker=_MARKERS[i % len(_MARKERS)], s=60,
                        edgecolors=["red" if r["pareto"] else "none" for r in rs],
                        linewidths=1.8, zorder=3)
        ax.scatter([], [], marker=_MARKERS[i % len(_MARKERS)], s=60, color="grey",
                   label=w.name)
        for r in rs:                     # each design named once: on the front, or all if few
            if r["label"] not in labelled and (r["pareto"] or len(sw.designs) <= 12):
                labelled.add(r["label"])
                ax.annotate(r["label"], (r["gate_equivalents"], _err(sw, r)), fontsize=6,
                            xytext=(5, -2), textcoords="offset points", alpha=0.85)
    for j, ref in enumerate(res.references):
        ax.axhline(_err(sw, ref), ls="--", lw=1, color=f"C{j % 10}",
                   label=f"{ref['label']} ({ref['workload']})")
    ax.set_yscale("log")
    ax.set_xlabel("area: gate equivalents (NAND2) of the unit, Yosys")
    ax.set_ylabel(_err_name(sw))
    where = ("its own array" if set(sw.varied) & ARRAY_KEYS else
             f"a {sw.rows}x{sw.cols} array")
    ax.set_title(f"{sw.title}\nerror vs area (colour: dot products/cycle on {where}; red "
                 f"ring: Pareto front)", fontsize=9)
    fig.colorbar(sc, ax=ax, label="dot products per cycle (array)")
    ax.legend(fontsize=7, loc="best")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return _save(fig, plt, res.out / "error_vs_area.png")


def _error_distributions(res: Results, matplotlib: Any, plt: Any) -> str:
    """Error distributions per design: one heat-map row per design, one panel per workload."""
    sw, rows = res.sweep, res.rows
    n_w = len(sw.workloads)
    labels = list(dict.fromkeys(r["label"] for r in rows)) + [f"[ref] {r['label']}" for r in
                                                             {x["label"]: x for x in
                                                              res.references}.values()]
    fig, axes = plt.subplots(1, n_w, figsize=(5.2 * n_w + 1.5, 0.28 * len(labels) + 1.8),
                             dpi=110, squeeze=False)
    cmap = matplotlib.colormaps["magma_r"]
    for ax, w in zip(axes[0], sw.workloads, strict=True):
        grid = np.full((len(labels), REL_BINS.size - 1), np.nan)
        for r in rows + [{**x, "label": f"[ref] {x['label']}"} for x in res.references]:
            if r["workload"] == w.name and r["label"] in labels:
                h = np.asarray(r["rel_hist"], float)
                grid[labels.index(r["label"])] = h / max(1, h.sum())
        im = ax.imshow(np.where(grid > 0, grid, np.nan), aspect="auto", cmap=cmap,
                       norm=matplotlib.colors.LogNorm(vmin=1e-4, vmax=1),
                       extent=(REL_BINS[0], REL_BINS[-1], len(labels) - 0.5, -0.5),
                       interpolation="nearest")
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels(labels if ax is axes[0][0] else [""] * len(labels), fontsize=7)
        ax.axvline(REL_FLOOR, color="grey", lw=0.5)
        ax.set_xlabel("log10 |d - exact| / |exact| per output (left column: equal to exact)",
                      fontsize=7)
        ax.set_title(f"{w.name} (K = {w.k}, {w.sample[0]}x{w.sample[1]} outputs)", fontsize=8)
    fig.colorbar(im, ax=axes[0].tolist(), label="fraction of outputs", shrink=0.8)
    fig.suptitle(f"{sw.title}: error distribution per design", fontsize=9, y=1.0)
    return _save(fig, plt, res.out / "error_distributions.png", bbox_inches="tight")


def _error_along(res: Results, key: str, plt: Any) -> str | None:
    """Error (and, dotted, area) along one varied parameter; None when it takes one value."""
    sw, rows = res.sweep, res.rows
    values = list(dict.fromkeys(str(r["params"].get(key)) for r in rows if key in r["params"]))
    if len(values) < 2:
        return None
    others = [k for k in sw.varied if k != key]
    fig, ax = plt.subplots(figsize=(8, 4.8), dpi=110)
    ax2 = ax.twinx()
    _error_lines(ax, res, key, values, others)
    _area_lines(ax2, rows, key, values, others)
    for j, ref in enumerate(res.references):
        ax.axhline(_err(sw, ref), ls="--", lw=1, color=f"C{(j + 5) % 10}",
                   label=f"{ref['label']} ({ref['workload']})")
    ax.set_xticks(range(len(values)))
    ax.set_xticklabels(values)
    ax.set_xlabel(key)
    ax.set_yscale("log")
    ax.set_ylabel(_err_name(sw))
    ax2.set_ylabel("gate equivalents (dotted grey)")
    ax.grid(True, which="both", alpha=0.3)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper left", bbox_to_anchor=(1.1, 1.0))
    ax.set_title(f"{sw.title}: error and area against {key}", fontsize=9)
    name = f"error_vs_{re.sub(r'[^A-Za-z0-9_]', '_', key)}.png"
    return _save(fig, plt, res.out / name, bbox_inches="tight")


def _error_lines(ax: Any, res: Results, key: str, values: list[str], others: list[str]
                 ) -> None:
    """One error line per (workload, point group, other varied values) along ``key``."""
    groups: dict[tuple, list[dict]] = {}
    for r in res.rows:
        if key in r["params"]:
            g = (r["workload"], r["group"], *(str(r["params"].get(o)) for o in others
                                              if o in r["params"]))
            groups.setdefault(g, []).append(r)
    for i, (g, rs) in enumerate(groups.items()):
        xs = [values.index(str(r["params"][key])) for r in rs]
        rest = [f"{o}={r}" for o, r in zip([o for o in others if o in rs[0]["params"]],
                                           g[2:], strict=True)]
        name = ", ".join(x for x in (g[1], g[0], *rest) if x)
        ax.plot(xs, [_err(res.sweep, r) for r in rs], marker=_MARKERS[i % len(_MARKERS)],
                color=f"C{i % 10}", label=name)


def _area_lines(ax2: Any, rows: list[dict], key: str, values: list[str], others: list[str]
                ) -> None:
    """One dotted area line per (point group, other varied values) along ``key``."""
    seen: dict[tuple, dict[int, float]] = {}
    for r in rows:
        if key in r["params"]:
            g = (r["group"], *(f"{o}={r['params'][o]}" for o in others if o in r["params"]))
            seen.setdefault(g, {})[values.index(str(r["params"][key]))] = r["gate_equivalents"]
    for g, pts in seen.items():
        xs = sorted(pts)
        ax2.plot(xs, [pts[x] for x in xs], ls=":", color="grey", marker=".",
                 label=", ".join(["area", *(x for x in g if x)]))


# -- the report -----------------------------------------------------------------------------------

def _g(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return "0" if x == 0 else f"{x:.{digits}g}"
    return str(x)


def _table(head: list[str], body: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(_g(c) for c in row) + " |" for row in body]
    return "\n".join(lines)


_HEAD = ["design", "error", "differ", "ulp max", "total err", "GE", "LUTs", "latency", "II",
         "dots/cycle", "util."]
_LUTS = {"ice40": "iCE40 LUT4s (`synth_ice40`)",
         "lut4": "4-input LUTs (`abc -lut 4`, no carry chains)", "none": "no FPGA mapping"}
_CAPTIONS = {
    "error_vs_area.png": "Error against area: one marker per point, coloured by the array's "
                         "dot products per cycle; red rings mark the Pareto front; dashed "
                         "lines are the references.",
    arrayplot.NAME: arrayplot.CAPTION,
    "error_distributions.png": "Per-output relative error against `exact`, one row per "
                               "design, one panel per workload; the leftmost column counts "
                               "outputs equal to `exact`.",
}
_HOW = [
    "## How each figure is made", "",
    "- **error, differ, ulp max**: the fast engine (bit-exact, held equal to the integer "
    "reference engine by the test suite) runs the design's spec on the sampled outputs of the "
    "workload's GEMM at its full K; the `exact` unit runs the same codes. *differ* is the "
    "fraction of outputs whose FP32 bits differ; *ulp max* the largest distance in FP32 ulps. "
    "*total err* compares with the float64 GEMM of the unquantised inputs.",
    "- **GE, LUTs**: Yosys on the Verilog that `hdl.verilog.generate` writes for the design "
    "(the generator `mxsim rtl` and `mxsim verify` use; each file is kept as "
    "`cache/rtl/HASH.v` and its header carries the spec digest). GE counts NAND2 gate "
    "equivalents of the generic cells (flip-flops 5.33 each).",
    "- **latency, II, dots/cycle, util.**: `mxsim.array.analytic` on the design's array (the "
    "closed form of the array cycle model `mxsim.array.cycle`, equal to it where it says "
    "exact). II is the interval between links of one unit's accumulation chain.",
    "", "Files: `results.csv` and `results.json` (every figure, cells by type, histograms), "
    "`pareto.csv`.", ""]


def _cells(r: dict) -> list[Any]:
    return [r["label"], r["error"], f"{r['differ']:.1%}", r["ulp_max"], r["total_err"],
            f"{r['gate_equivalents']:.0f}", r["luts"], r["latency"],
            r["interval_chained"], r["dots_per_cycle"], f"{r['utilisation']:.0%}"]


def _report(res: Results, plots: list[str]) -> str:
    """report.md: what was run, the Pareto front per workload, the references, the plots,
    every point and how each figure is made."""
    sw, rows = res.sweep, res.rows
    out = _summary(res)
    out += ["", "## Pareto front", "",
            "Per workload, the designs no other design beats on error, area and throughput "
            "at once.", ""]
    for w in sw.workloads:
        front = sorted((r for r in rows if r["workload"] == w.name and r["pareto"]),
                       key=lambda r: r["error"])
        out += [f"**{w.name}**", "", _table(_HEAD, [_cells(r) for r in front]), ""]
    if res.references:
        out += ["## References (accuracy only, no RTL)", "",
                _table(["reference", "workload", "error", "differ", "total err"],
                       [[r["label"], r["workload"], r["unit_err"] if sw.error == "unit"
                         else r["total_err"], f"{r['differ']:.1%}", r["total_err"]]
                        for r in res.references]), ""]
    if not plots:
        out += ["No plots: matplotlib is not installed (`pip install 'mxsim[plot]'`).", ""]
    else:
        out += ["## Plots", ""]
        for p in plots:
            cap = _CAPTIONS.get(p, f"Error (and, dotted, area) along "
                                   f"{p[len('error_vs_'):-4]}, one line per workload.")
            out += [f"![{p}]({p})", "", cap, ""]
    out += ["## All points", "", _table(["workload"] + _HEAD + ["pareto"],
                                        [[r["workload"], *_cells(r), "yes" if r["pareto"]
                                          else ""] for r in rows]), ""]
    return "\n".join(out + _HOW)


def _array_words(sw: Sweep) -> str:
    varied = [k for k in sw.varied if k in ARRAY_KEYS]
    base = {**ARRAY_DEFAULTS, **sw.array}
    text = (f"a {base['rows']} x {base['cols']} {base['dataflow']} array of the unit at "
            f"{base['bandwidth']:g} bytes per cycle per operand buffer")
    return text + (f" (each point's own {', '.join(varied)})" if varied else "")


def _summary(res: Results) -> list[str]:
    """The report's title, description, command, what the figures are, and the workloads."""
    sw, rows = res.sweep, res.rows
    n_rtl = len({r["rtl_hash"] for r in rows})
    err = ("normwise relative error of the unit's FP32 outputs against `exact` on the same "
           "codes (the arithmetic's own error)" if sw.error == "unit" else
           "normwise relative error against the unquantised float64 GEMM (quantisation and "
           "arithmetic together)")
    out = [f"# {sw.title}", ""]
    if sw.description:
        out += [sw.description.strip(), ""]
    out += [f"Reproduce: `mxsim explore {sw.path} -o {res.out}`", "",
            f"**{len(rows)} points**: {len(sw.designs)} designs ({n_rtl} distinct RTL "
            f"configurations) x {len(sw.workloads)} workloads. Error: {err}. Throughput: the "
            f"workload's whole GEMM on {_array_words(sw)}. FPGA: {_LUTS[sw.fpga]}.", "",
            f"This run: {res.computed['area']} syntheses and {res.computed['accuracy']} "
            f"accuracy runs computed, {res.reused['area']} and {res.reused['accuracy']} taken "
            f"from the cache, {res.seconds:.0f} s.", "", "## Workloads", ""]
    out.append(_table(["workload", "GEMM M x N x K", "outputs sampled", "inputs", "recipe"],
                      [[w.name, " x ".join(map(str, w.shape)), f"{w.sample[0]} x "
                        f"{w.sample[1]}", w.distribution, w.recipe] for w in sw.workloads]))
    return out
