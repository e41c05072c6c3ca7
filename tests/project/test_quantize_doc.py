"""docs/quantize.md's 2026-12-06 benchmark table is the one in the committed output of
`python benchmarks/bench_quantize.py` (docs/data/bench_quantize_2026-12-06.txt), every row of
which agrees with torchao."""

from __future__ import annotations

import sys
from pathlib import Path

from mxsim.output import fill_marked

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "data" / "bench_quantize_2026-12-06.txt"
DOC = ROOT / "docs" / "quantize.md"
KEY = "bench-quantize-2026-12-06"


def table() -> str:
    lines = [ln for ln in DATA.read_text().splitlines() if ln.startswith("|")]
    return "\n```\n" + "\n".join(lines) + "\n```\n"


def test_the_doc_shows_the_committed_output():
    text = DOC.read_text()
    new, missing = fill_marked(text, {KEY: table()})
    assert not missing and new == text, "run: python tests/project/test_quantize_doc.py"


def test_every_row_agrees_with_torchao_and_names_its_command():
    out = DATA.read_text()
    assert "# command: python benchmarks/bench_quantize.py --n 16777216" in out
    rows = [ln for ln in out.splitlines() if ln.startswith("| ") and "rule" not in ln]
    assert [r.split("|")[1].strip() for r in rows] == [
        "floor", "ceil", "even", "rceil", "ocp", "rceil-sat", "nvfp4"]
    assert all(r.split("|")[6].strip() in ("yes", "0 scales differ") for r in rows)


if __name__ == "__main__":                     # fill the doc from the data file
    text = DOC.read_text()
    new, missing = fill_marked(text, {KEY: table()})
    if missing:
        sys.exit(f"{DOC}: no span {KEY}")
    DOC.write_text(new)
