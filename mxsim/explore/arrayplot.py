"""The plot of a sweep that varies its array: throughput against the array's area, and error.

Drawn by :func:`mxsim.explore.report.write` when the sweep varies an [array] key (rows, cols,
dataflow, ...). Left: MACs per cycle on the whole GEMM against the array's area (the unit's
gate equivalents times its units), one marker shape per dataflow and one colour per element
format, each point labelled with its shape. Right: the error of each (format, dataflow,
rows): the arithmetic's own error against ``exact`` (``unit_err``), which the accumulation
order changes (K-tiles added in FP32 for "ws"/"is" with a tensor memory, every ``rows``
instructions); an error of 0 (every output bit-equal to exact) is drawn at :data:`FLOOR`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NAME", "CAPTION", "FLOOR", "draw"]

FLOOR = 1e-10

NAME = "array.png"
CAPTION = ("Left: MACs per cycle on the workload's whole GEMM against the array's area (gate "
           "equivalents of the unit times rows x cols), one marker per dataflow, one colour "
           "per A format, each point labelled rows x cols. Right: the arithmetic's error "
           "against exact (unit_err) per format and dataflow against rows (the K-tile is rows "
           "x k for ws/is with tmem accumulators); 0 (bit-exact) is drawn at 1e-10.")
_MARK = {"os": "o", "ws": "s", "is": "^"}
#: Marker size and fill per dataflow, so that coinciding points stay visible.
_STYLE = {"os": (80, True), "ws": (55, False), "is": (18, True)}


def draw(res: Any, plt: Any) -> str | None:
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
            size, filled = _STYLE[df]
            ax.scatter([r["array_ge"] for r in rs], [r["macs_per_cycle"] for r in rs],
                       marker=mk, s=size, alpha=0.85, linewidths=1.2,
                       facecolors=f"C{i}" if filled else "none", edgecolors=f"C{i}",
                       label=f"{fmt} {df} ({rs[0]['accumulators']})")
            for r in rs if i == 0 and df != "is" else ():   # shapes named once
                ax.annotate(f"{r['rows']}x{r['cols']}", (r["array_ge"], r["macs_per_cycle"]),
                            fontsize=6, xytext=(4, -9 if df == "os" else 3),
                            textcoords="offset points", alpha=0.8)
            by_rows: dict[int, float] = {}
            for r in rs:
                by_rows.setdefault(r["rows"], max(r["unit_err"], FLOOR))
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
    zero = [f for f in fmts if all(r["unit_err"] == 0 for r in rows if r["a_format"] == f)]
    if zero:
        bx.annotate(f"{', '.join(zero)}: unit error 0 (every sampled output bit-equal to "
                    f"exact), drawn at {FLOOR:g}", (0.02, 0.06), xycoords="axes fraction",
                    fontsize=7)
    bx.set_yscale("log")
    bx.set_xscale("log", base=2)
    bx.set_xlabel("array rows (K-tile = rows x k for ws/is with tmem)")
    bx.set_ylabel("unit error: normwise relative error against exact")
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
