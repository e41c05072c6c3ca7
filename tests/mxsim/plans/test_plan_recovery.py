"""The order probe and the plan fit recover plans drawn at random: the 20-trial study is a
committed record (tests/data/plan_recovery_20.json, written by
`python -m mxsim.probe.planfit --trials 20 --seed 2026 -o ...`, about five minutes); CI checks
that the record holds the plans the seed draws, that every fitted plan computes as the drawn
one on fresh inputs, and reruns four trials, which must equal the record field for field."""

import json
from pathlib import Path

import numpy as np
import pytest

from mxsim import vectors
from mxsim.plans import from_dict
from mxsim.plans.run import run
from mxsim.probe.planfit import STUDY_MAX_SPLIT, draw_plan, order_probe, recovery_trial

RECORD = Path(__file__).resolve().parents[2] / "data" / "plan_recovery_20.json"
RERUN = (0, 5, 10, 19)


@pytest.fixture(scope="module")
def record():
    return json.loads(RECORD.read_text())


def test_record_holds_the_drawn_plans_and_20_of_20(record):
    assert record["seed"] == 2026 and record["max_split"] == STUDY_MAX_SPLIT
    trials = record["trials"]
    assert [t["trial"] for t in trials] == list(range(20))
    for t in trials:
        fmt, k, plan = draw_plan(np.random.default_rng([record["seed"], t["trial"]]))
        assert (t["format"], t["k"], t["drawn"]) == (fmt, k, plan.to_dict())
    assert sum(t["fresh_equal"] for t in trials) == 20
    assert sum(t["identical"] for t in trials) >= 18
    kinds = {(t["drawn"]["merge"], t["drawn"]["partial_format"]) for t in trials}
    assert len(kinds) >= 3 and len({t["format"] for t in trials}) == 5


def test_a_fitted_plan_computes_as_the_drawn_one(record):
    t = record["trials"][1]                        # hopper-cublas found as a split-K plan
    fresh = vectors.generate("llm", a_format=t["format"], m=8, n=8, k=t["k"], seed=77,
                             with_c=False)
    assert np.array_equal(run(from_dict(t["drawn"]), fresh), run(from_dict(t["fitted"]), fresh))


@pytest.mark.parametrize("index", RERUN)
def test_trials_rerun_as_recorded(record, index):
    assert recovery_trial(index, record["seed"]) == record["trials"][index]


def test_order_probe_staircase_steps_at_chunk_boundaries():
    from mxsim.plans import Plan
    probe = order_probe("bf16", k=512, seed=0)
    d = run(Plan(unit="hopper-wgmma-bf16", split=4, granule=64), probe)
    steps = np.asarray(d)[:512 // 8 - 1, 0].view(np.float32)     # p = 8, 16, ..., 504
    p = np.arange(8, 512, 8)
    later = p[(p >= 128)]
    plateau = steps[p >= 128]
    # past the first chunk, the output is constant within a chunk and changes between them
    for lo in (128, 256, 384):
        inside = plateau[(later >= lo) & (later < lo + 128)]
        assert len(set(inside.tolist())) == 1
    assert len(set(plateau.tolist())) == 3
