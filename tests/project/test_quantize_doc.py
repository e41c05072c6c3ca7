"""docs/quantize.md's benchmark tables are the ones in the committed outputs of
`python benchmarks/bench_quantize.py`: the 2026-12-06 run (docs/data/bench_quantize_2026-12-06.txt),
every row of which agrees with torchao, and the issue-39 part-3 and part-4 runs
(docs/data/bench_quantize_2026-12-06_part3.txt, _part4.txt: quantisation and dequantisation,
each beside torchao and the ceiling measured in the same run)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mxsim.output import fill_marked

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "data" / "bench_quantize_2026-12-06.txt"
PART3 = ROOT / "docs" / "data" / "bench_quantize_2026-12-06_part3.txt"
PART4 = ROOT / "docs" / "data" / "bench_quantize_2026-12-06_part4.txt"
DOC = ROOT / "docs" / "quantize.md"
FIGS = {"bench-quantize-2026-12-06": DATA, "bench-quantize-2026-12-06-part3": PART3,
        "bench-quantize-2026-12-06-part4": PART4}


def table(data: Path) -> str:
    lines = [ln for ln in data.read_text().splitlines() if ln.startswith("|")]
    return "\n```\n" + "\n".join(lines) + "\n```\n"


def spans() -> dict[str, str]:
    return {key: table(data) for key, data in FIGS.items()}


def rows(data: Path) -> list[list[str]]:
    out = [ln for ln in data.read_text().splitlines() if ln.startswith("| ")]
    return [[c.strip() for c in r.split("|")[1:-1]] for r in out[1:]]


def test_the_doc_shows_the_committed_output():
    text = DOC.read_text()
    new, missing = fill_marked(text, spans())
    assert not missing and new == text, "run: python tests/project/test_quantize_doc.py"


def test_every_row_agrees_with_torchao_and_names_its_command():
    out = DATA.read_text()
    assert "# command: python benchmarks/bench_quantize.py --n 16777216" in out
    got = rows(DATA)
    assert [r[0] for r in got] == ["floor", "ceil", "even", "rceil", "ocp", "rceil-sat",
                                   "nvfp4"]
    assert all(r[5] in ("yes", "0 scales differ") for r in got)


@pytest.mark.parametrize("part", [PART3, PART4], ids=["part3", "part4"])
def test_part3_names_its_command_and_ceilings_and_agrees_with_torchao(part):
    out = part.read_text()
    assert ("# command: flock /tmp/mxsim-bench.lock python benchmarks/bench_quantize.py "
            "--n 16777216") in out
    assert "# ceilings on 2 cores: read FP32 + write 1 byte" in out
    got = rows(part)
    paths = [r[0] for r in got]
    assert paths[:6] == [f"q mxfp8 {r}" for r in
                         ("floor", "ceil", "even", "rceil", "ocp", "rceil-sat")]
    assert "q nvfp4" in paths and "dq mxfp8 e4m3" in paths and "dq nvfp4 1-level" in paths
    for r in got:
        if r[0] == "dq nvfp4 2-level":
            assert r[6].endswith("differ (rounding)")
        elif r[0] == "dq mxint8":
            assert r[6] == "no peer"
        else:
            assert r[6] in ("yes", "0 scales differ"), r


if __name__ == "__main__":                     # fill the doc from the data files
    text = DOC.read_text()
    new, missing = fill_marked(text, spans())
    if missing:
        sys.exit(f"{DOC}: no span {', '.join(missing)}")
    DOC.write_text(new)
