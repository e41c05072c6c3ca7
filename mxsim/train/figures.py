"""The figures of docs/training.md, computed from the committed train-eval report.

    python -m mxsim.train.figures          # rewrite the marked spans of the doc
    python -m mxsim.train.figures --check  # exit 1 (and say which) if the doc differs
    python -m mxsim.train.figures --plot   # also redraw the plot from the report

Keys (``<!-- fig:KEY -->...<!-- /fig -->``): ``tr:command``, ``tr:model``, ``tr:steps``,
``tr:tokens``, ``tr:wall`` (hours of all runs); ``tr:recipes`` (each recipe's operands);
``tr:runs`` (a row per run), ``tr:paths``
(per recipe: the steps whose loss differs between the emulation and the exact unit, the first
of them, the largest difference); ``tr:nvfp4-vs-fp8:PATH`` (NVFP4's loss of the last 10 steps
minus FP8 current scaling's), ``tr:worth:RECIPE:SWITCH:PATH`` (the recipe with one technique
off minus the full recipe), ``tr:floor-saturated`` (MXFP8 floor: saturated elements, all
steps) and ``tr:floor-vs-rceil:PATH``; from the GPU record (:func:`step_figures`),
``tr:gpu:*``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..output import update_marked, write_bytes
from .run import PATHS, summary

__all__ = ["figures", "step_figures", "DOC", "DATA", "PLOT", "STEP"]

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "training.md"
DATA = ROOT / "docs" / "data" / "train_eval_tiny_2026-12-06.json"
PLOT = ROOT / "docs" / "img" / "train_eval_tiny_2026-12-06.png"
STEP = ROOT / "docs" / "data" / "train_step_h100_2026-12-06.json"
_TAIL = 10


def _tail(run: dict) -> float:
    return float(np.mean(run["loss"][-_TAIL:]))


def _paths_table(runs: dict) -> str:
    lines = ["| recipe | steps whose loss differs (of all) | first | largest difference | "
             "validation loss, emulation / unit |", "|---|---|---|---|---|"]
    for recipe in dict.fromkeys(r for r, _ in runs):
        if (recipe, "emulation") not in runs or (recipe, "unit") not in runs:
            continue
        e, u = runs[recipe, "emulation"], runs[recipe, "unit"]
        d = np.abs(np.asarray(e["loss"]) - np.asarray(u["loss"]))
        differ = np.flatnonzero(d)
        first = str(int(differ[0]) + 1) if differ.size else "none"
        lines.append(f"| {recipe} | {differ.size} of {d.size} | {first} | {d.max():.2e} | "
                     f"{e['val'][-1][1]:.4f} / {u['val'][-1][1]:.4f} |")
    return "\n".join(lines)


def _runs_table(rep: dict) -> str:
    lines = ["| recipe | path | unit | loss, last 10 steps | validation loss | vs other path | "
             f"vs {rep['runs'][0]['recipe']} | saturated elements | seconds |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in summary(rep):
        other = "" if r["vs_other_path"] is None else f"{r['vs_other_path']:+.4f}"
        lines.append(f"| {r['recipe']} | {r['path']} | {r['unit']} | {r['loss_tail']:.4f} | "
                     f"{r['val']:.4f} | {other} | {r['vs_baseline']:+.4f} | "
                     f"{r['saturated']:,} | {r['seconds']:.0f} |")
    return "\n".join(lines)


def _recipes_table(rep: dict) -> str:
    lines = ["| recipe | fprop: x, W | dgrad: dy, W | wgrad: dy, x | unit | BF16 layers |",
             "|---|---|---|---|---|---|"]
    for r in rep["recipes"]:
        lines.append(f"| {r['name']} | {'; '.join(r['fprop'])} | {'; '.join(r['dgrad'])} | "
                     f"{'; '.join(r['wgrad'])} | {r['unit']} | "
                     f"{', '.join(r['bf16_layers']) or 'none'} |")
    return "\n".join(lines)


def figures(rep: dict[str, Any]) -> dict[str, str]:
    """Every key's text."""
    runs = {(r["recipe"], r["path"]): r for r in rep["runs"]}
    m = rep["model"]
    out = {"tr:command": rep.get("command", ""), "tr:steps": str(rep["steps"]),
           "tr:model": f"{m['layers']} layers, width {m['width']}, {m['heads']} heads, "
                       f"context {m['context']}, batch {m['batch']}",
           "tr:tokens": f"{rep['steps'] * m['tokens_per_step']:,}",
           "tr:wall": f"{sum(r['seconds'] for r in rep['runs']) / 3600:.1f}",
           "tr:recipes": "\n" + _recipes_table(rep) + "\n",
           "tr:runs": "\n" + _runs_table(rep) + "\n", "tr:paths": "\n" + _paths_table(runs) + "\n"}
    for path in PATHS:
        if ("nvfp4", path) in runs and ("fp8-current", path) in runs:
            out[f"tr:nvfp4-vs-fp8:{path}"] = \
                f"{_tail(runs['nvfp4', path]) - _tail(runs['fp8-current', path]):+.4f}"
        if ("mxfp8-floor", path) in runs and ("mxfp8", path) in runs:
            out[f"tr:floor-vs-rceil:{path}"] = \
                f"{_tail(runs['mxfp8-floor', path]) - _tail(runs['mxfp8', path]):+.4f}"
        for (recipe, p), run in runs.items():
            base, _, off = recipe.partition("/")
            if p == path and off and (base, path) in runs:
                worth = _tail(run) - _tail(runs[base, path])
                out[f"tr:worth:{base}:{off}:{path}"] = f"{worth:+.4f}"
    if ("mxfp8-floor", "unit") in runs:
        out["tr:floor-saturated"] = f"{sum(runs['mxfp8-floor', 'unit']['saturated']):,}"
    return out


def step_figures(rec: dict[str, Any]) -> dict[str, str]:
    """The GPU record's keys (gpu.runs.train_step): ``tr:gpu:device``, ``tr:gpu:quantise``,
    ``tr:gpu:bf16``, ``tr:gpu:units``, ``tr:gpu:ratio``, ``tr:gpu:model``."""
    q = rec["quantise"]
    st = rec["step"]
    m = st["model"]
    return {"tr:gpu:device": f"{rec['device']} (torch {rec['torch']})",
            "tr:gpu:quantise": f"{sum(r['equal'] for r in q)} of {len(q)} checks equal, "
                               f"{q[0]['elements']:,} elements each",
            "tr:gpu:bf16": f"{statistics.median(st['bf16_s']):.3f}",
            "tr:gpu:units": f"{statistics.median(st['nvfp4_units_gpu_s']):.2f}",
            "tr:gpu:ratio": f"{st['ratio']:.0f}",
            "tr:gpu:model": f"{m['layers']} layers, width {m['width']}, "
                            f"{m['tokens_per_step']} tokens a step; median of "
                            f"{st['steps_timed']} steps after one warm-up"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mxsim.train.figures",
                                 description="docs/training.md's figures from the report")
    ap.add_argument("--check", action="store_true", help="exit 1 if the doc differs")
    ap.add_argument("--data", default=str(DATA), help="the report JSON (default: committed)")
    ap.add_argument("--doc", default=str(DOC), help="the document (default: %(default)s)")
    ap.add_argument("--plot", action="store_true", help="also redraw the plot from the JSON")
    args = ap.parse_args(argv)
    rep = json.loads(Path(args.data).read_text())
    figs = figures(rep) | step_figures(json.loads(STEP.read_text()))
    status = update_marked(args.doc, figs, check=args.check, source=args.data,
                           command="python -m mxsim.train.figures")
    if status or args.check:
        return status
    if args.plot:
        from .plot import curves_png
        write_bytes(PLOT, curves_png(rep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
