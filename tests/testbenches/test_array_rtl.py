"""The array RTL (hdl.array) through cocotb and Verilator, every cycle against the array cycle
model; the documented 4 x 4 run's committed summary re-derived and its figures in the docs."""

import pytest

from mxsim import units, vectors
from mxsim.array import ArraySpec, Buffer, from_dict
from mxsim.array.cycle import simulate
from mxsim.microarch import MicroArch

pytest.importorskip("cocotb")
pytest.importorskip("amaranth")

from testbenches.array import campaign as array_campaign  # noqa: E402
from testbenches.array.runner import check  # noqa: E402


def _array():
    unit = units.get("hopper-wgmma").spec_for_formats("e4m3", "e4m3").replace(
        name="wgmma-k8", k=8)
    return ArraySpec(name="ci-2x2", unit=unit, rows=2, cols=2, interleave=2,
                     microarch=MicroArch(lanes=1, stages=1),     # 1 lane: the quickest build
                     a_buffer=Buffer(bytes=4096, bandwidth=8),
                     b_buffer=Buffer(bytes=4096, bandwidth=8))


@pytest.mark.rtl
@pytest.mark.slow
def test_array_rtl_verilator_matches_cycle_model(tmp_path):
    """2 x 2 units, interleave 2, bandwidth-bound: every cycle's handshake and every unit's
    D code, RTL against model (the scoreboard catching a difference: the next test)."""
    arr = _array()
    vs = vectors.generate_suite(["normal", "specials"], m=3, n=5, k=32, seed=2)
    vs = vs.replace(a=vs.a[1], b=vs.b[1], c=vs.c[1], d=None)      # the specials entry
    res = check(arr, 3, 5, 32, vs, tmp_path / "ok", cache=tmp_path / "builds")
    assert res.passed, res.mismatches
    assert res.waves == 2 * 4 * (2 + 1) and res.outputs == res.waves   # N = 5: slots 2 + 1
    assert res.cycles == simulate(arr, 3, 5, 32).cycles


def test_array_rtl_scoreboard_catches_differences():
    """The cocotb scoreboard reports a late handshake as a cycle mismatch and a wrong code
    as a value mismatch, and stops at its limit."""
    from testbenches.array.tb import Scoreboard
    board = Scoreboard([1, 0, 0], [0, 1, 1], [0, 0x12, 0x34], limit=2)
    assert board.check(0, 0, (1, 0, 0)) and not board.mismatches
    assert board.check(1, 1, (0, 0, 0))
    assert not board.check(2, 1, (0, 1, 0x35))
    assert [m["kind"] for m in board.mismatches] == ["cycle", "value"]
    assert board.mismatches[1]["rtl"][2] == "0x35" and board.mismatches[1]["model"][2] == "0x34"


def test_array_rtl_run_summary_rederived():
    """The committed 4 x 4 run: every case compared with 0 mismatches, the RTL's cycle count
    equal to the model's, and the model's numbers re-derived now from the descriptions."""
    data = array_campaign.load()
    assert len(data["cases"]) == len(array_campaign.cases())
    for name, desc in data["designs"].items():
        assert from_dict(desc) == array_campaign.DESIGNS[name]
    for row in data["cases"]:
        assert row["mismatches"] == 0 and row["cycles"] == row["model_cycles"]
        assert row["outputs"] == row["waves"] > 0
        arr = array_campaign.DESIGNS[row["design"]]
        now = array_campaign.model_numbers(arr, (row["m"], row["n"], row["k"]))
        assert now["model_cycles"] == row["model_cycles"]
        assert now["utilisation"] == row["utilisation"]


def test_array_rtl_figures_in_the_docs():
    """docs/array.md's array-rtl figures are what the committed summary gives."""
    assert array_campaign.main(["--check"]) == 0


def test_array_rtl_figures_check_finds_a_hand_edit(tmp_path, monkeypatch):
    doc = tmp_path / "array.md"
    doc.write_text(array_campaign.DOC.read_text().replace(
        "<!-- fig:array-rtl:mismatches -->0<", "<!-- fig:array-rtl:mismatches -->1<"))
    monkeypatch.setattr(array_campaign, "DOC", doc)
    assert array_campaign.main(["--check"]) == 1
