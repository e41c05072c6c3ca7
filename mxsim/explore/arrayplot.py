"""The plot of a sweep that varies its array: throughput against the array's area, and error.

Drawn by :func:`mxsim.explore.report.write` when the sweep varies an [array] key (rows, cols,
dataflow, ...). Left: MACs per cycle on the whole GEMM against the array's area (the unit's
gate equivalents times its units), one marker shape per dataflow and one colour per element
format, each point labelled with its shape. Right: the error of each (format, dataflow,
rows), where the accumulation order (K-tiles added in FP32 for "ws"/"is" with a tensor memory,
every ``rows`` instructions) changes the bits.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NAME", "CAPTION", "draw"]

NAME = "array.png"
CAPTION = ("Left: MACs per cycle on the workload's whole GEMM against the array's area (gate "
           "equivalents of the unit times rows x cols), one marker per dataflow, one colour "
           "per A format, each point labelled rows x cols. Right: error per format and "
           "dataflow against rows (K-tile length for ws/is with tmem accumulators).")
_MARK = {"os": "o", "ws": "s", "is": "^"}


def draw(res: Any, plt: Any, err: Any, err_name: str) -> str | None:
    """Draw ``NAME`` into ``res.out``; its name (None when the rows lack array columns)."""
    rows = [r for r in res.rows if "array_ge" in r]
    if not rows:
        return None
    fmts = list(dict.fromkeys(r["a_format"] for r in rows))
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5.5), dpi=110)
    w0 = rows[0]["workload"]
    for i, fmt in enumerate(fmts):
        for df, mk in _MARK.items():
            rs = [r for r in rows if r["a_format"] == fmt and r["dataflow"] == df
                  and r["workload"] == w0]
            if not rs:
                continue
            ax.scatter([r["array_ge"] for r in rs], [r["macs_per_cycle"] for r in rs],
                       marker=mk, color=f"C{i}", s=50, alpha=0.8,
                       label=f"{fmt} {df} ({rs[0]['accumulators']})")
            for r in rs:
                ax.annotate(f"{r['rows']}x{r['cols']}", (r["array_ge"], r["macs_per_cycle"]),
                            fontsize=5.5, xytext=(3, 2), textcoords="offset points", alpha=0.7)
            by_rows: dict[int, float] = {}
            for r in rs:
                by_rows.setdefault(r["rows"], err(res.sweep, r))
            xs = sorted(by_rows)
            bx.plot(xs, [by_rows[x] for x in xs], marker=mk, color=f"C{i}",
                    ls="-" if df == "os" else "--", label=f"{fmt} {df}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("array area: unit gate equivalents x rows x cols")
    ax.set_ylabel(f"MACs per cycle, whole GEMM ({w0})")
    ax.set_title("throughput vs area (closed form of the array model)", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, loc="upper left")
    bx.set_yscale("log")
    bx.set_xscale("log", base=2)
    bx.set_xlabel("array rows (K-tile = rows x k for ws/is with tmem)")
    bx.set_ylabel(err_name)
    bx.set_title(f"error by format and dataflow ({w0})", fontsize=9)
    bx.grid(True, which="both", alpha=0.3)
    bx.legend(fontsize=6, loc="best")
    fig.suptitle(res.sweep.title, fontsize=10)
    fig.tight_layout()
    path = res.out / NAME
    from ..output import open_output
    with open_output(path) as fh:
        fig.savefig(fh, format="png")
    plt.close(fig)
    return NAME
