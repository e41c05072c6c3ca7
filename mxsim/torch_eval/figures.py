"""The figures of docs/torch_eval.md, computed from the committed report JSON.

    python -m mxsim.torch_eval.figures          # rewrite the marked spans of the doc
    python -m mxsim.torch_eval.figures --check  # exit 1 (and say which) if the doc differs
    python -m mxsim.torch_eval.figures --plot   # also redraw docs/img/torch_eval.png

A figure sits between ``<!-- fig:KEY -->`` and ``<!-- /fig -->``. Keys: ``te:summary`` and
``te:layers`` (tables); ``te:model``, ``te:tokens``, ``te:engine``, ``te:layers-count``,
``te:macs``, ``te:wall`` (all units' seconds), ``te:f32:kl``, ``te:f32:ppl``; per unit U (its
name as in the report): ``te:U:kl``, ``te:U:klmax``, ``te:U:ppl``, ``te:U:top1``,
``te:U:identical``, ``te:U:logit-max``, ``te:U:wall``, ``te:U:first`` (the first linear
layer's relative RMS error: its input is the same in every unit), ``te:U:median`` (the median
over the layers), ``te:U:LAYER:rel`` and ``te:U:LAYER:max`` (one layer's relative RMS and
max abs error, LAYER as ``blocks.11.down`` or ``head``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..output import MARK, fill_marked, update_marked
from . import report

__all__ = ["figures", "render", "DOC", "DATA", "PLOT", "MARK"]

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "torch_eval.md"
DATA = ROOT / "docs" / "data" / "torch_eval.json"
PLOT = ROOT / "docs" / "img" / "torch_eval.png"


def figures(rep: dict[str, Any]) -> dict[str, str]:
    """Every key's text."""
    g, pct = report.num, report.pct
    out = {"te:summary": "\n" + report.summary_table(rep) + "\n",
           "te:layers": "\n" + report.layer_table(rep, every=5) + "\n",
           "te:model": rep["model"]["name"], "te:tokens": str(rep["tokens"]),
           "te:engine": rep["engine"], "te:layers-count": str(rep["linear_layers"]),
           "te:macs": f"{rep['linear_macs']:,}",
           "te:wall": f"{sum(u['wall_s'] for u in rep['units']):.0f}",
           "te:f32:kl": g(rep["float32"]["kl_mean"]),
           "te:f32:ppl": g(rep["float32"]["perplexity"], 5)}
    for u in rep["units"]:
        k = f"te:{u['unit']}"
        out |= {f"{k}:kl": g(u["kl_mean"]), f"{k}:klmax": g(u["kl_max"]),
                f"{k}:ppl": g(u["perplexity"], 5), f"{k}:top1": pct(u["top1_agree"]),
                f"{k}:identical": pct(report.identical_share(u)),
                f"{k}:logit-max": g(u["logits"]["max_abs"]), f"{k}:wall": f"{u['wall_s']:.0f}"}
        for la in u["layers"][:len(u["layers"]) if "rel_rms" in u["layers"][0] else 0]:
            out |= {f"{k}:{la['name']}:rel": pct(la["rel_rms"] or 0.0, 2),
                    f"{k}:{la['name']}:max": g(la["max_abs"])}
        rel = sorted(la.get("rel_rms") or 0.0 for la in u["layers"])
        if rel:
            out |= {f"{k}:first": pct(u["layers"][0].get("rel_rms") or 0.0),
                    f"{k}:median": pct(rel[len(rel) // 2])}
    return out


def render(text: str, figs: dict[str, str]) -> tuple[str, list[str]]:
    """The text with every marked span filled; and the keys it names that have no figure."""
    return fill_marked(text, figs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mxsim.torch_eval.figures",
                                 description="docs/torch_eval.md's figures from the report")
    ap.add_argument("--check", action="store_true", help="exit 1 if the doc differs")
    ap.add_argument("--data", default=str(DATA), help="the report JSON (default: committed)")
    ap.add_argument("--doc", default=str(DOC), help="the document (default: %(default)s)")
    ap.add_argument("--plot", action="store_true",
                    help=f"also draw the plot from the JSON to {PLOT.relative_to(ROOT)}")
    args = ap.parse_args(argv)
    rep = json.loads(Path(args.data).read_text())
    status = update_marked(args.doc, figures(rep), check=args.check,
                           source=args.data, command="python -m mxsim.torch_eval.figures")
    if status or args.check:
        return status
    if args.plot:
        report.plot(rep, PLOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
