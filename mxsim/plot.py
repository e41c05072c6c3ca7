"""Plots of error distributions (matplotlib, imported only when a plot is asked for)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from . import formats, presets
from .errors import MxsimError, UnitError
from .output import check_output, open_output
from .vectors import VectorSet

__all__ = ["relative_errors", "error_distribution", "REL_FLOOR"]

_KINDS = ("png", "pdf", "svg")     # drawn by matplotlib alone (no Pillow, no LaTeX)
#: log10 of the relative error at or below which an output counts as exact.
REL_FLOOR = -12.0


def relative_errors(d: npt.NDArray, d_format: str, exact: npt.NDArray) -> npt.NDArray:
    """log10 |d - exact| / |exact| for finite, non-zero exact outputs (``REL_FLOOR`` for equal)."""
    x = formats.get(d_format).decode(d).ravel()
    e = formats.get("fp32").decode(exact).ravel()
    ok = np.isfinite(x) & np.isfinite(e) & (e != 0)
    with np.errstate(divide="ignore"):          # log10(0) is -inf: clipped to the floor
        rel = np.log10(np.abs(x[ok] - e[ok]) / np.abs(e[ok]))
    return np.maximum(rel, REL_FLOOR)


def error_distribution(result: VectorSet, path: str | Path,
                       units: list[str] | None = None) -> dict[str, int]:
    """Draw the relative error of ``result.d`` and of each preset's ``d`` against ``exact``.

    ``units`` defaults to every preset that takes the set's formats. Writes the image format
    the suffix names (``.png``, ``.pdf`` or ``.svg``) through :func:`mxsim.output.open_output`;
    returns how many outputs each curve holds.
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MxsimError("--plot needs matplotlib: pip install 'mxsim[plot]'") from None
    check_output(path)
    kind = Path(path).suffix[1:].lower()
    if kind not in _KINDS:
        raise MxsimError(f"{path}: the plot's file name must end in .png, .pdf or .svg, not "
                         f"{Path(path).suffix or 'nothing'!r}")
    if result.d is None:
        raise MxsimError("the result has no 'd' to plot")
    exact = presets.get("exact").spec_for(result)
    from .engine import fast
    e = fast.dot(exact, result)
    curves = {f"{result.producer}": relative_errors(result.d, result.d_format, e)}
    for name in units if units is not None else presets.names():
        if name == "exact":
            continue
        try:
            spec = presets.get(name).spec_for(result)
            spec.check_vectors(result)
        except UnitError:
            continue
        curves[f"preset {name}"] = relative_errors(fast.dot(spec, result), spec.d_format, e)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    bins = np.linspace(REL_FLOOR - 0.25, 0.5, 60)
    for label, rel in curves.items():
        ax.hist(rel, bins=bins, histtype="step", linewidth=1.6,
                label=f"{label} ({int((rel <= REL_FLOOR).sum())} of {rel.size} exact)")
    ax.set_xlabel("log10 relative error against `exact` (left edge: equal to exact)")
    ax.set_ylabel("outputs")
    ax.set_title(f"{result.a_format} x {result.b_format}, K={result.k}: {result.num_dots} "
                 f"dot products")
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        with open_output(path) as fh:
            fig.savefig(fh, format=kind)
    finally:
        plt.close(fig)
    return {label: int(rel.size) for label, rel in curves.items()}
