"""The loss curves of a train-eval report, one line per run (matplotlib, the ``plot`` extra)."""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from ..errors import MxsimError

__all__ = ["curves_png"]


def _smooth(y: list[float], n: int) -> np.ndarray:
    v = np.asarray(y, float)
    if v.size < n:
        return v
    return np.convolve(v, np.ones(n) / n, mode="valid")


def curves_png(report: dict[str, Any]) -> bytes:
    """PNG bytes: training loss (moving mean of 10 steps) per run, emulation dashed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        from matplotlib import pyplot as plt
    except ImportError:
        raise MxsimError("--plot needs matplotlib: pip install 'mxsim[plot]'") from None
    fig, ax = plt.subplots(figsize=(8, 5))
    colours = {}
    for run in report["runs"]:
        c = colours.setdefault(run["recipe"], f"C{len(colours) % 10}")
        y = _smooth(run["loss"], 10)
        ax.plot(np.arange(len(y)) + (len(run["loss"]) - len(y)) + 1, y, color=c,
                ls="--" if run["path"] == "emulation" else "-", lw=1,
                label=f"{run['recipe']} ({run['path']})")
    m = report["model"]
    ax.set(xlabel="step", ylabel="training loss (mean of 10 steps)",
           title=f"{m['layers']} layers, width {m['width']}, {m['tokens_per_step']} tokens/step, "
                 f"seed {report['seed']}")
    ax.legend(fontsize=7, ncol=2)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()
