"""The report's files: JSON, Markdown tables and a plot (matplotlib, Agg), written to a folder.

The tables are made by :func:`summary_table` and :func:`layer_table` from the report dict
alone, so that ``mxsim.torch_eval.figures`` rebuilds the ones in docs/torch_eval.md from the
committed JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import MxsimError

__all__ = ["write", "summary_table", "layer_table", "markdown", "plot", "num", "pct",
           "identical_share"]


def num(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else "0" if x == 0 else f"{x:.{digits}g}"


def pct(x: float, digits: int = 1) -> str:
    return f"{100 * x:.{digits}f}%"


def _table(head: list[str], rows: list[list[str]], left: int = 1) -> str:
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" if i < left else "---:" for i in range(len(head))) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def identical_share(u: dict) -> float:
    """Share of all linear-layer outputs whose FP32 bits equal the exact run's."""
    n = sum(la["shape"][1] for la in u["layers"])
    return sum(la.get("identical", 1.0) * la["shape"][1] for la in u["layers"]) / n


def summary_table(rep: dict[str, Any]) -> str:
    """One row per unit, then plain float32 torch (not emulated) for scale."""
    rows = []
    for u in rep["units"] + [{"unit": "float32 torch (not emulated)", "recipe": "-",
                              **rep["float32"], "layers": []}]:
        lg = u["logits"]
        rows.append([f"`{u['unit']}`" if u["layers"] else u["unit"], u["recipe"],
                     num(lg["max_abs"]), num(lg["rms"]), num(u["kl_mean"]), num(u["kl_max"]),
                     pct(u["top1_agree"]), num(u["perplexity"], 5),
                     pct(identical_share(u)) if u["layers"] else "-", f"{u['wall_s']:.1f}"])
    return _table(["unit", "recipe", "logits max abs err", "logits RMS err", "KL mean (nats)",
                   "KL max", "top-1 = exact", "perplexity", "linear outputs bit-equal",
                   "wall s"], rows, left=2)


def layer_table(rep: dict[str, Any], every: int = 1) -> str:
    """Relative RMS error against exact of each block's last projection (``down``; every
    ``every``-th block and the last) and of the output head: rows are layers, columns units
    (exact left out)."""
    units = [u for u in rep["units"][1:]]
    names = [la["name"] for la in rep["units"][0]["layers"]
             if la["name"].endswith(".down") or la["name"] == "head"]
    keep = [n for i, n in enumerate(names) if i % every == 0 or i >= len(names) - 2]
    rows = []
    for name in keep:
        cells = [next(la for la in u["layers"] if la["name"] == name) for u in units]
        rows.append([f"`{name}`"] + [num(c["rel_rms"]) for c in cells])
    return _table(["layer"] + [f"`{u['unit']}`" for u in units], rows)


def markdown(rep: dict[str, Any]) -> str:
    m = rep["model"]
    return "\n\n".join([
        f"# mxsim torch-eval: {m['name']}",
        f"{rep['tokens']} tokens ({m['sample']}), {rep['linear_layers']} linear layers, "
        f"{rep['linear_macs']:,} multiply-adds per pass, engine `{rep['engine']}`.",
        "## Next-token distributions and logits against `exact`", summary_table(rep),
        "## Relative RMS error of layer outputs against `exact`", layer_table(rep)]) + "\n"


def plot(rep: dict[str, Any], path: Path) -> None:
    """Left: relative RMS error of every linear layer's output by unit (log scale, layers in
    execution order). Right: mean KL against exact by unit."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MxsimError("torch-eval's plot needs matplotlib: pip install 'mxsim[plot]'") \
            from None
    units = rep["units"][1:]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 6), width_ratios=(2.2, 1))
    for u in units:
        y = [la["rel_rms"] if la["rel_rms"] else float("nan") for la in u["layers"]]
        ax.plot(range(len(y)), y, marker=".", ms=3, lw=0.8, label=f"{u['unit']} ({u['recipe']})")
    ax.set_yscale("log")
    per = 7
    blocks = (len(units[0]["layers"]) - 1) // per if units else 0
    step = max(1, blocks // 6)
    ax.set_xticks([b * per for b in range(0, blocks, step)] + [blocks * per],
                  [f"block {b}" for b in range(0, blocks, step)] + ["head"], fontsize=8)
    ax.set_xlabel("linear layer in execution order (q k v o gate up down per block, then the "
                  "head)")
    ax.set_ylabel("relative RMS error vs exact")
    ax.set_title("Layer outputs (errors compound through the blocks)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    kl = [u["kl_mean"] or 0.0 for u in units]
    bx.bar(range(len(units)), kl, color=[f"C{i}" for i in range(len(units))])
    for i, u in enumerate(units):
        bx.annotate(f"ppl {num(u['perplexity'], 4)}", (i, kl[i]), ha="center", va="bottom",
                    fontsize=7)
    bx.set_xticks(range(len(units)), [u["unit"] for u in units], rotation=30, ha="right",
                  fontsize=8)
    bx.set_ylabel("mean KL(exact || unit), nats")
    bx.set_title(f"Next token (exact: ppl {num(rep['units'][0]['perplexity'], 4)})")
    fig.suptitle(f"{rep['model']['name']}: {rep['tokens']} tokens, engine {rep['engine']}",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(rep: dict[str, Any], out: str | Path) -> dict[str, str]:
    """report.json, report.md and report.png in ``out`` (created); returns their paths."""
    folder = Path(out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MxsimError(f"{out}: cannot create the output folder "
                         f"({exc.strerror or exc})") from None
    files = {"json": folder / "report.json", "markdown": folder / "report.md",
             "plot": folder / "report.png"}
    files["json"].write_text(json.dumps(rep, indent=1, allow_nan=False) + "\n")
    files["markdown"].write_text(markdown(rep))
    plot(rep, files["plot"])
    return {k: str(v) for k, v in files.items()}
