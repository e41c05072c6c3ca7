"""docs/verification.md's mutation table, rerun column, against the run's committed JSON."""

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _rows() -> dict[str, list[str]]:
    text = (ROOT / "docs" / "verification.md").read_text()
    table = text[text.index("| mutant | fault | overrides |"):].split("\n\n")[0]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells
    return rows


def test_docs_mutation_rerun_column_is_the_committed_run():
    rows = _rows()
    run = json.loads((ROOT / "docs" / "data" / "mutants_2026-12-01.json").read_text())
    int8 = {r["fault"]: r for r in
            json.loads((ROOT / "docs" / "data" / "mutants_2026-12-01_int8.json").read_text())}
    assert sorted(rows) == sorted(r["fault"] for r in run)
    for r in run:
        cell = rows[r["fault"]][-1]
        if r["killed"]:
            assert cell == f"killed ({r['dots_to_kill']:,})", r["fault"]
        else:
            assert cell.startswith("survived"), r["fault"]
            other = int8[r["fault"]]
            assert other["killed"] and f"killed on INT8 × INT8 ({other['dots_to_kill']:,})" in cell
    killed = sum(r["killed"] for r in run)
    text = (ROOT / "docs" / "verification.md").read_text()
    assert f"{killed} of {len(run)}" in text
