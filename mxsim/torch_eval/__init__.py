"""The model-level report: a real language model's matmuls through each unit, against exact.

``run_eval(model="smollm2", units=(...))`` runs a fixed token sample through the model once
per unit under :func:`mxsim.torch.emulate` (each unit with its quantisation recipe) and
measures, against the ``exact`` pass, every linear layer's output (max abs error, relative RMS
error, share of bit-identical outputs), the logits (max abs and RMS error), the next-token
distributions (KL divergence, top-1 agreement) and the sample's perplexity, with wall time.
:func:`mxsim.torch_eval.report.write` writes it as JSON, Markdown and a plot; ``mxsim
torch-eval`` does both (docs/torch_eval.md).

torch is imported only when a report is run (``import mxsim.torch_eval`` does not import it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .run import DEFAULT_UNITS, RECIPES

__all__ = ["run_eval", "DEFAULT_UNITS", "RECIPES"]


def run_eval(model: Any = "smollm2", units: Sequence[str] = DEFAULT_UNITS, *,
             engine: str | None = None, text: str | None = None, tokens: int | None = None,
             out: str | None = None,
             progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The report as a dict (see :func:`mxsim.torch_eval.run.run_eval`); with ``out``, also
    written there (report.json, report.md, report.png) and the paths put in ``files``."""
    from .report import write
    from .run import run_eval as _run
    rep = _run(model, units, engine=engine, text=text, tokens=tokens, progress=progress)
    if out is not None:
        rep["files"] = write(rep, out)
    return rep
