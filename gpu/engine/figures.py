"""docs/engine.md's GPU-engine figures, computed from the committed device check and benchmark.

    python -m gpu.engine.check --figures [--check-docs]

Keys (between ``<!-- fig:KEY -->...<!-- /fig -->``): ``engine:check`` (one paragraph: what
ran where, the totals), ``table:engine-check`` (cases, dots and mismatches by kind) and
``table:engine-bench`` (the benchmark's rows). The check's numbers come from
tests/data/h200/2026-12-02-engine/engine_check.json, or, until that device summary is
committed, from the CPU stand-in fixture, and the text then says so; the benchmark's from
bench_gpu_engine.json beside it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..runs.figures import MARK
from .cases import FIXTURE, ROOT, STAND_IN, SUMMARY

__all__ = ["BENCH", "DOC", "figures", "main", "render", "summary_path"]

DOC = ROOT / "docs" / "engine.md"
BENCH = SUMMARY.parent / "bench_gpu_engine.json"
_KINDS = {"preset": "every preset x generator family", "drawn": "hypothesis-drawn specs",
          "bulk": "a dozen presets, large batches", "chain": "long chains"}


def summary_path() -> Path:
    """The device summary when committed, else the CPU stand-in fixture."""
    return SUMMARY if SUMMARY.exists() else FIXTURE


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _check_text(s: dict[str, Any], path: Path) -> str:
    t = s["totals"]
    where = (f"**not a device run**: the CPU fast engine stood in for the GPU engine "
             f"(a test fixture, `{_rel(path)}`)" if s["engine"] == STAND_IN
             else f"engine `gpu` on {s['device']} against the CPU fast engine "
                  f"(`{_rel(path)}`)")
    return (f"{t['cases']:,} cases, {t['dots']:,} dots: {t['presets']} presets x "
            f"{t['families']} generator families, {t['drawn_specs']} drawn specs, K up to "
            f"{t['max_k']:,}; **{t['mismatches']} mismatches**, {t.get('errors', 0)} cases "
            f"failing to run; the reference engine on "
            f"{t['ref_dots']:,} dots, {t['ref_mismatches']} mismatches. Run: {where}; "
            f"{s['versions']}; {s['seconds']:,} s.")


def _table(head: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def _kinds_table(s: dict[str, Any]) -> str:
    rows = [[f"{kind} ({_KINDS.get(kind, kind)})", f"{t['cases']:,}", f"{t['dots']:,}",
             f"{t['max_k']:,}", t["mismatches"]] for kind, t in s["totals"]["by_kind"].items()]
    return _table(["cases", "count", "dots", "max K", "mismatches"], rows)


def _bench_table() -> str:
    if not BENCH.exists():
        return (f"Not measured yet: `{_rel(BENCH)}` is written by "
                f"`python benchmarks/bench_gpu_engine.py --json {_rel(BENCH)}` on the device.")
    b = json.loads(BENCH.read_text())
    rows = [[r["what"], f"{r['dots']:,}", f"{r['seconds']:.3g}", f"{r['dots_per_s']:.3g}",
             r.get("ratio") or "-", "-" if r.get("equal") is None else r["equal"]]
            for r in b["rows"]]
    return (_table(["what", "dots", "seconds", "dots/s", "ratio", "bit-equal"], rows)
            + f"\n\n{b['device']}; {b['versions']}; {b.get('note', '')}".rstrip("; "))


def figures() -> dict[str, str]:
    """Every key's text from the committed data."""
    path = summary_path()
    s = json.loads(path.read_text())
    return {"engine:check": _check_text(s, path), "table:engine-check": _kinds_table(s),
            "table:engine-bench": _bench_table()}


def render(text: str, figs: dict[str, str]) -> str:
    """``text`` with every engine figure span replaced (other keys are left alone)."""
    def sub(m):
        key = m.group(1)
        if key not in figs:
            return m.group(0)
        new = figs[key]
        if "\n" in m.group(2) or "\n" in new:
            new = "\n" + new + "\n"
        return f"<!-- fig:{key} -->{new}<!-- /fig -->"
    return MARK.sub(sub, text)


def main(check_only: bool = False) -> int:
    """Rewrite docs/engine.md's spans (``check_only``: exit 1 if they are stale)."""
    text = DOC.read_text(encoding="utf-8")
    new = render(text, figures())
    if new == text:
        return 0
    if check_only:
        print(f"stale figures in {_rel(DOC)}: run python -m gpu.engine.check --figures")
        return 1
    DOC.write_text(new, encoding="utf-8")
    print(f"updated {_rel(DOC)}")
    return 0
