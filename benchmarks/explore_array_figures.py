"""The figures of docs/explore.md's array example, from its committed results.

    mxsim explore docs/sweeps/array.toml -o docs/explore/array     # the sweep (minutes)
    python benchmarks/explore_array_figures.py                     # the figures into the doc
    python benchmarks/explore_array_figures.py --check             # exit 1 unless current

Reads ``docs/explore/array/results.json`` and writes the spans ``<!-- fig:array:KEY -->``
... ``<!-- /fig -->`` of docs/explore.md: ``summary`` (what ran), ``area`` (the unit per
format), ``accuracy`` (errors per format, dataflow and K-tile) and ``throughput`` (MACs per
cycle and the first stall per shape, dataflow and format).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "explore" / "array" / "results.json"
DOC = ROOT / "docs" / "explore.md"
_SPAN = re.compile(r"<!-- fig:(array:[a-z]+) -->(.*?)<!-- /fig -->", re.DOTALL)


def _g(x: float) -> str:
    return "0" if x == 0 else f"{x:.3g}"


def _table(head: list[str], body: list[list]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(out + ["| " + " | ".join(str(c) for c in row) + " |" for row in body])


def _one(points: list[dict], **keys) -> dict:
    got = [p for p in points if all(p[k] == v for k, v in keys.items())]
    return got[0]


def figures(data: dict) -> dict[str, str]:
    """Every span's text, from the results."""
    pts, sw = data["points"], data["sweep"]
    fmts = list(dict.fromkeys(p["a_format"] for p in pts))
    shapes = list(dict.fromkeys((p["rows"], p["cols"]) for p in pts))
    flows = list(dict.fromkeys(p["dataflow"] for p in pts))
    rows = sorted({p["rows"] for p in pts})
    w = sw["workloads"][0]
    out = {"array:summary": (
        f"{len(pts)} points: {sw['designs']} designs ({sw['rtl_configurations']} RTL "
        f"configurations: one unit per format) on `{w['name']}`, M x N x K = "
        f"{' x '.join(map(str, w['shape']))}, {w['sample'][0]} x {w['sample'][1]} outputs "
        f"sampled at the full K; {data['run']['computed']['area']} syntheses and "
        f"{data['run']['computed']['accuracy']} accuracy runs in this run "
        f"({data['run']['reused']['area']} and {data['run']['reused']['accuracy']} from the "
        f"cache), {data['run']['seconds']:.0f} s.")}
    out["array:area"] = _table(
        ["A x B format", "unit GE", "unit LUT4", "16 x 16 array GE"],
        [[f"{f} x {f}", f"{(p := _one(pts, a_format=f))['gate_equivalents']:,.0f}",
          f"{p['luts']:,}", f"{p['gate_equivalents'] * 256:,.0f}"] for f in fmts])
    body = []
    for f in fmts:
        body.append([f, "os (any shape)", _g((p := _one(pts, a_format=f, dataflow="os"))[
            "unit_err"]), f"{p['differ']:.1%}", _g(p["total_err"]), _g(p["quant_err"])])
        for r in rows:
            q = _one(pts, a_format=f, dataflow="ws", rows=r)
            body.append([f, f"ws / is, tmem, K-tile {r * q['k']}", _g(q["unit_err"]),
                         f"{q['differ']:.1%}", _g(q["total_err"]), _g(q["quant_err"])])
    out["array:accuracy"] = _table(["format", "dataflow", "unit error", "differ from exact",
                                    "total error", "quantisation alone"], body)
    head = ["rows x cols"] + [f"{f} {d}" for f in fmts for d in flows]
    body = []
    for r, c in shapes:
        cells = [f"{r} x {c}"]
        for f in fmts:
            for d in flows:
                p = _one(pts, a_format=f, dataflow=d, rows=r, cols=c)
                stall = max((v, k) for k, v in p["stalls"].items()
                            if k not in ("fill and drain", "ragged edges"))
                note = f" ({stall[1]})" if p["utilisation"] < 0.995 and stall[0] else ""
                cells.append(f"{p['macs_per_cycle']:,.0f}, {p['utilisation']:.0%}{note}")
        body.append(cells)
    out["array:throughput"] = _table(head, body)
    return out


def write(check: bool = False) -> bool:
    """Put the figures into docs/explore.md; True when it was current."""
    figs = figures(json.loads(RESULTS.read_text()))
    text = DOC.read_text(encoding="utf-8")
    missing = set(figs) - set(_SPAN.findall(text) and [m[0] for m in _SPAN.findall(text)])
    if missing:
        raise SystemExit(f"docs/explore.md lacks the spans {sorted(missing)}")
    new = _SPAN.sub(lambda m: f"<!-- fig:{m.group(1)} -->\n{figs[m.group(1)]}\n<!-- /fig -->",
                    text)
    if not check and new != text:
        DOC.write_text(new, encoding="utf-8")
    return new == text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 unless the doc is current")
    args = p.parse_args(argv)
    ok = write(check=args.check)
    if args.check:
        print("docs/explore.md: array figures current" if ok else
              "docs/explore.md: array figures differ from docs/explore/array/results.json; "
              "run python benchmarks/explore_array_figures.py")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
