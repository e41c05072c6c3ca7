"""The SCALE-Sim v3 comparison (docs/scalesim.md): the table is the committed reports' and our
closed form's, SCALE-Sim's counts follow its fold formula, and SCALE-Sim itself reproduces a
tiny layer through our harness."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
try:
    import scalesim_compare as sc
    import scalesim_run
finally:
    sys.path.remove(str(ROOT / "benchmarks"))


def test_the_table_is_rederived_from_the_committed_reports():
    assert sc.main(["--check"]) == 0
    data = sc.compare(cycle_model=False)
    assert len(data["rows"]) == len(sc.LAYERS) * len(sc.ARRAYS)
    for r in data["rows"]:
        assert r["scalesim"]["cycles"] == r["formula"], r        # SCALE-Sim's own model
        assert r["scalesim"]["stalls"] == 0
        assert r["ours"]["i1"]["exact"] and r["ours"]["i4"]["exact"]
        assert r["ours"]["i1"]["cycles"] > r["ours"]["i4"]["cycles"]


def test_the_cycle_model_column_is_the_cycle_models():
    """The committed cycle-model counts of the small rows, stepped again (the rest are
    held by --check and by tests/mxsim/array/test_array_analytic.py's closed form = cycle model)."""
    import json

    from mxsim.array import cycle
    rows = json.loads(sc.JSON.read_text())["rows"]
    stepped = 0
    for r in rows:
        for key, inter in (("i1", 1), ("i4", 4)):
            o = r["ours"][key]
            if "cycle_model" in o and o["cycles"] <= 6000:
                arr = sc.our_array(r["rows"], r["cols"], inter)
                assert cycle.simulate(arr, r["m"], r["n"], r["k"]).cycles == o["cycle_model"] \
                    == o["cycles"]
                stepped += 1
    assert stepped >= 4


def test_check_fails_on_a_changed_table(tmp_path, monkeypatch):
    doc = tmp_path / "scalesim.md"
    doc.write_text(sc.DOC.read_text().replace("| 8x8 | gemm64", "| 8x8 | gemm65", 1))
    monkeypatch.setattr(sc, "DOC", doc)
    assert sc.main(["--check"]) == 1


def test_scalesim_runs_a_tiny_layer_through_the_harness(tmp_path):
    pytest.importorskip("scalesim")
    got = scalesim_run.run(tmp_path, "tiny", 4, 4, [("L0", 8, 8, 16), ("L1", 5, 6, 7)])
    assert [r["cycles"] for r in got] == [sc.scalesim_formula(4, 4, 8, 8, 16),
                                          sc.scalesim_formula(4, 4, 5, 6, 7)]
    assert (tmp_path / "tiny" / "COMPUTE_REPORT.csv").exists()
