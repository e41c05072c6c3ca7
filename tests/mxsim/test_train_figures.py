"""docs/training.md's figures are what the committed train-eval report says, and the report
holds every run the issue asks for: each recipe and ablation under both paths."""

from __future__ import annotations

import json

from mxsim.train import figures

WANT = ["bf16", "fp8-delayed", "fp8-current", "mxfp8", "mxfp8-floor", "nvfp4",
        "nvfp4/disable_stochastic_rounding", "nvfp4/disable_rht",
        "nvfp4/disable_2d_quantization", "mxfp4", "mxfp4/disable_stochastic_rounding",
        "mxfp4/disable_rht"]


def test_the_doc_is_computed_from_the_committed_report():
    assert figures.main(["--check"]) == 0
    assert figures.PLOT.read_bytes()[:4] == b"\x89PNG"


def test_the_report_holds_every_recipe_and_ablation_on_both_paths():
    rep = json.loads(figures.DATA.read_text())
    assert [(r["recipe"], r["path"]) for r in rep["runs"]] == [
        (name, path) for name in WANT for path in ("emulation", "unit")]
    for r in rep["runs"]:
        assert len(r["loss"]) == rep["steps"] >= 200 and r["val"][-1][0] == rep["steps"]
    assert rep["command"].startswith("mxsim train-eval --model tiny")
