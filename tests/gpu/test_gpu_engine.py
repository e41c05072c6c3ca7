"""The GPU engine's device check (gpu/engine/check.py): its committed summary replays on the CPU.

Until the H200 summary (tests/data/h200/2026-12-02-engine/engine_check.json) is committed, the
replay runs on a fixture made on the CPU with the fast engine standing in for the GPU engine
(tests/data/gpu_engine_fixture/, which says so in its ``engine`` field); the same code replays
the device summary once it lands.
"""

import json

import pytest

from gpu.engine import check as engine_check
from gpu.engine import figures as engine_figures
from mxsim import presets


@pytest.fixture(scope="module")
def summary_path():
    return engine_figures.summary_path()


def test_summary_replays_on_the_cpu(summary_path):
    """Small cases recomputed from their seeds give the codes the GPU hashed."""
    lines = []
    assert engine_check.check(summary_path, sample=300, log=lines.append) == 0, lines
    assert "300 cases replayed on the CPU, 0 differ" in lines[-1]


def test_summary_covers_what_the_issue_asks(summary_path):
    s = json.loads(summary_path.read_text())
    t = s["totals"]
    assert t["mismatches"] == 0 and t["ref_mismatches"] == 0 and t["ref_dots"] > 0
    assert t.get("errors", 0) == 0
    assert t["presets"] == len(presets.names())
    assert t["drawn_specs"] >= 200
    assert all(c["gpu_sha256"] == c["cpu_sha256"] for c in s["cases"])
    if summary_path == engine_check.SUMMARY:
        assert s["engine"] == "gpu" and "H200" in s["device"] and not s["quick"]
        assert t["dots"] >= 10 ** 8 and t["max_k"] >= 65536
    else:
        assert s["engine"] == engine_check.STAND_IN


def test_replay_catches_a_wrong_hash(summary_path, tmp_path):
    s = json.loads(summary_path.read_text())
    small = [c for c in s["cases"] if c["size"] == "small"]
    small[0]["gpu_sha256"] = small[0]["cpu_sha256"] = "0" * 64
    path = tmp_path / "engine_check.json"
    engine_check.write(s, path)
    assert engine_check.check(path, sample=1, log=lambda _: None) == 1


def test_docs_figures_are_the_summarys():
    text = engine_figures.DOC.read_text(encoding="utf-8")
    assert engine_figures.render(text, engine_figures.figures()) == text
    for key in ("engine:check", "table:engine-check", "table:engine-bench"):
        assert f"<!-- fig:{key} -->" in text


def test_engine_check_without_a_gpu_says_so_in_one_line(tmp_path, capsys):
    from mxsim.engine import gpu
    if gpu.available():
        pytest.skip("a GPU is present: the device check would run")
    assert engine_check.main(["--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no CUDA device" in err


def test_engine_check_bad_arguments_exit_2(tmp_path, capsys):
    assert engine_check.main(["--check", str(tmp_path)]) == 2
    assert engine_check.main(["--out", str(tmp_path), "--shard", "3/2", "--stand-in-cpu"]) == 2
    assert capsys.readouterr().err.count("\n") == 2


#: The issue-39 runs on an H100: chain.cu's whole-dot kernels (plain path included), then
#: with the sides packed on the device (pack.cu), then with block-wise scales' FMA in fma.cu.
H100 = [engine_check.SUMMARY.parents[2] / "h100" / name / "engine_check.json"
        for name in ("2026-12-06-engine", "2026-12-06-engine-pack", "2026-12-06-engine-fma")]


@pytest.mark.parametrize("summary", H100, ids=lambda p: p.parent.name)
def test_h100_whole_dot_summary_replays_and_covers_the_same_cases(summary):
    """The H100 runs of python -m gpu.engine.check with the whole-dot kernels: every case of
    the H200 run (same recipes, same seeds), every GPU hash equal to the CPU's, and a sample
    recomputed here."""
    s, old = json.loads(summary.read_text()), json.loads(engine_check.SUMMARY.read_text())
    assert s["engine"] == "gpu" and "H100" in s["device"] and not s["quick"]
    assert s["totals"]["mismatches"] == 0 and s["totals"]["ref_mismatches"] == 0
    assert [c["digest"] for c in s["cases"]] == [c["digest"] for c in old["cases"]]
    assert all(c["gpu_sha256"] == c["cpu_sha256"] for c in s["cases"])
    lines = []
    assert engine_check.check(summary, sample=30, log=lines.append) == 0, lines
