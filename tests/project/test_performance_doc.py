"""docs/performance.md's figures are computed from the committed benchmark records by
`python benchmarks/performance.py`, and its plot is there; every record it reads names the
command that wrote it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from mxsim.output import fill_marked

ROOT = Path(__file__).resolve().parents[2]


def _performance():
    spec = importlib.util.spec_from_file_location("performance",
                                                  ROOT / "benchmarks" / "performance.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_performance_page_is_its_records():
    perf = _performance()
    text = perf.DOC.read_text()
    new, missing = fill_marked(text, perf.figures())
    assert missing == []
    assert new == text, "run python benchmarks/performance.py"
    assert perf.PLOT.exists() and perf.PLOT.stat().st_size > 0


def test_every_record_names_its_command():
    perf = _performance()
    for path in (perf.ENGINE, perf.VERIFY, perf.FOREIGN):
        assert "command" in json.loads(path.read_text()), path
    assert "# command:" in perf.QUANT.read_text()
    gpu = json.loads(perf.GPU.read_text())
    assert gpu["device"] and all(r["equal"] in (True, None) for r in gpu["rows"])


def test_every_row_has_a_figure_and_a_record():
    table = _performance().figures()["perf:table"].strip().splitlines()[2:]
    assert len(table) >= 30
    for row in table:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 7 and cells[1] and cells[6].startswith("`"), row
