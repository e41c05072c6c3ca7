"""GST-FDPA in real simulation and its documented bulk run.

A grouped unit's Verilog through cocotb on Verilator (registers random until the reset), every
output against the engine and every cycle against the cycle model; the beat's several scale
codes where ``block_layout`` puts them; the grouping mutants killed in Amaranth's simulator on
the verify stimulus; and docs/verification.md's GST section recomputed from the committed run
(docs/data/campaign_gst.json), whose coverage holes follow from its hits.
"""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from mxsim import presets, vectors
from mxsim.microarch import MicroArch, cycle
from mxsim.spec import UnitSpec

pytestmark = pytest.mark.rtl
pytest.importorskip("amaranth")

from hdl.payload import payload_ints, payload_words  # noqa: E402
from testbenches.campaigns import gst as campaign_gst  # noqa: E402
from testbenches.campaigns import pairs as campaign  # noqa: E402
from testbenches.unit import coverage, faults  # noqa: E402
from testbenches.unit.group_faults import GROUP_FAULTS  # noqa: E402

ROOT = Path(__file__).parents[2]
RUN_FILE = ROOT / "docs" / "data" / "campaign_gst.json"
NVF4 = presets.get("blackwell-mxf4nvf4")

#: A grouped unit small enough for CI's Verilator build: NVFP4's arithmetic at k = 16 (two
#: UE4M3 blocks of 8, groups of 4), two passes of 8 lanes (two groups each).
SMALL = UnitSpec(name="gst-small", a_format="e2m1", b_format="e2m1", scale_format="ue4m3",
                 block=8, k=16, group=4, frac_bits=35, acc_format="fp32", acc_rounding="rz",
                 e_zero=-139)


@pytest.mark.slow
def test_rtl_gst_verilator_x_initial_unique(tmp_path, monkeypatch):
    pytest.importorskip("cocotb")
    from testbenches.unit.runner import run

    # The model's C++ at -O0 (make takes variables from MAKEFLAGS): a quarter of the -Os build
    # time here (16 s against 60 s on 2 cores), and these few thousand cycles run as fast.
    flags = os.environ.get("MAKEFLAGS", "")
    monkeypatch.setenv("MAKEFLAGS", f"{flags} OPT_FAST=-O0 OPT_GLOBAL=-O0".strip())
    vs = coverage.stimulus(SMALL, 300, blocks=2, seed=6)
    result = run(SMALL, MicroArch(lanes=8, stages=2), vs, tmp_path / "build", seed=6,
                 valid_p=0.7, ready_p=0.6)
    assert result.passed, result.mismatches
    assert result.dots == vs.num_dots and result.cycles > result.beats


def test_rtl_gst_payload_holds_every_scale_block():
    """k / block scale codes per operand, block j's at index j, where block_layout says."""
    from amaranth.lib import data

    from hdl.unit import block_layout
    spec = NVF4.spec("e2m1", "e2m1", scale_format="ue4m3", block=16)
    vs = vectors.generate("scale-extremes", a_format="e2m1", b_format="e2m1", m=1, n=2, k=128,
                          scale_format="ue4m3", block=16, seed=2)
    layout = block_layout(spec)
    for n, word in enumerate(payload_ints(payload_words(spec, vs))):
        view = data.Const(layout, word)
        j, blk = n // 2, n % 2
        assert [int(x) for x in view.a_scale] == vs.a_scale[0, blk * 4:blk * 4 + 4].tolist()
        assert [int(x) for x in view.b_scale] == vs.b_scale[blk * 4:blk * 4 + 4, j].tolist()
        assert [int(x) for x in view.b] == vs.b[blk * 64:(blk + 1) * 64, j].tolist()


def _kill_set(spec: UnitSpec):
    """The verify stimulus's entries that show a grouping fault: one uniform entry and the
    normal entries the grouped constructions change (zero and cancelling groups leading)."""
    vs = coverage.stimulus(spec, 1200, blocks=2, seed=3)
    fam = vs.extra["families"]
    normal = [i for i, f in enumerate(fam) if f == "normal"]
    idx = [fam.index("uniform"), *normal[len(normal) // 2:][:2]]
    return vs.replace(a=vs.a[idx], b=vs.b[idx], c=vs.c[idx], d=None, a_scale=vs.a_scale[idx],
                      b_scale=vs.b_scale[idx], extra={})


#: Mutant -> the scale format of the small unit that shows it (the UE4M3 one needs UE4M3
#: scales); docs/verification.md has them killed on the Blackwell FP4 units too.
KILL = {"group-boundary-off-by-one": "e8m0", "group-sum-truncated": "ue4m3",
        "group-scale-first-block": "e8m0", "group-zero-exp-kept": "e8m0",
        "group-cancel-to-e-zero": "ue4m3", "group-scale-sig-dropped": "ue4m3"}


@pytest.mark.parametrize("fault", list(GROUP_FAULTS))
def test_rtl_gst_mutants_killed(fault):
    """Each grouping mutant, in Amaranth's simulator, gives other values than the engine on
    the stimulus entries that exercise it (and the production unit gives the engine's)."""
    from hdl.sim import simulate
    from hdl.unit import DotProductUnit
    spec = SMALL.replace(scale_format=KILL[fault])
    ua = MicroArch(lanes=16, stages=1)
    vs = _kill_set(spec)
    gaps, ready = cycle.patterns(1024, valid_p=1.0, ready_p=1.0, seed=3)
    model = cycle.run(cycle.UnitModel(spec, ua), cycle.beats_of(spec, vs), gaps, ready)
    bad = simulate(faults.unit(fault, spec, ua), vs, gaps, ready, max_cycles=model.cycles + 8)
    assert bad.results != model.results, f"mutant {fault} survived"
    if fault == "group-zero-exp-kept":      # once: the production unit passes the same set
        good = simulate(DotProductUnit(spec, ua), vs, gaps, ready, max_cycles=model.cycles + 8)
        assert good.results == model.results


def test_rtl_gst_mutants_are_subclasses_outside_the_rtl():
    from hdl.unit import DotProductUnit
    classes = [faults.unit_class(f) for f in GROUP_FAULTS]
    assert all(issubclass(c, DotProductUnit) and c is not DotProductUnit for c in classes)
    assert len(set(classes)) == len(GROUP_FAULTS) and not set(GROUP_FAULTS) & set(faults.FAULTS)


@pytest.mark.parametrize("name", list(campaign_gst.SECTIONS))
def test_rtl_gst_docs_sections_rendered_from_the_committed_runs(name):
    """docs/verification.md's bulk-run and mutant sections are their JSON, rendered."""
    begin, end = campaign_gst.markers(name)
    text = (ROOT / "docs" / "verification.md").read_text()
    assert text.count(begin) == 1 and text.count(end) == 1
    assert text.split(begin)[1].split(end)[0].strip() == campaign_gst.section(name, ROOT).strip()


def test_rtl_gst_mutant_runs_kill_every_grouping_mutant():
    runs = json.loads((ROOT / "docs" / "data" / "mutants_gst.json").read_text())
    ran = {r["fault"] for rows in runs.values() for r in rows}
    assert ran == set(GROUP_FAULTS)
    for label, rows in runs.items():
        assert all(r["killed"] and r["dots_to_kill"] > 0 for r in rows), label
        assert all(r["where"] == GROUP_FAULTS[r["fault"]] for r in rows), label


def test_rtl_gst_campaign_covers_every_config_and_its_holes_follow_from_its_hits():
    """Every FP4 design ran with the grouped coverpoints measured; each row's holes are its
    bins under their minimum; its spec is the one the campaign names."""
    run = json.loads(RUN_FILE.read_text())
    labels = [campaign_gst.label_of(*c) for c in campaign_gst.CONFIGS]
    assert [r["pair"] for r in run["pairs"]] == labels
    assert run["bulk"] and run["seed"] == campaign.SEED
    specs = dict(campaign_gst.designs())
    for r in run["pairs"]:
        assert {"group_scale", "group_case", "backpressure"} <= set(r["coverage"]), r["pair"]
        assert r["unmeasured"] == []
        cov = coverage.Coverage(hits=r["coverage"], expected=set(r["coverage"]))
        assert cov.holes() == r["holes"], r["pair"]
        assert len(r["mismatches"]) == min(20, r["value_mismatches"] + r["cycle_mismatches"])
        assert r["result"] == ("FAIL" if r["mismatches"] else
                               "PASS with holes" if r["holes"] else "PASS"), r["pair"]
        assert r["cycles"] > r["blocks"] > 0 and r["dots"] > 0
        assert specs[r["pair"]].digest() == r["spec_digest"]
    assert np.all([r["dots"] >= 1 for r in run["pairs"]])
