"""The H200 plan table, `mxsim compare` with a library path or plan, the batch-invariance
prediction, and the plan verbs' one-line errors."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mxsim import vectors
from mxsim.plans import PlanError
from mxsim.plans.invariance import batch_invariance
from mxsim.plans.table import entries, held_out, lookup, paths

ROOT = Path(__file__).resolve().parents[3]
LIB = ROOT / "tests" / "data" / "h200_library_gemms"


def mxsim(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "mxsim", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd or ROOT)


def test_table_is_computed_from_the_committed_records():
    out = subprocess.run([sys.executable, "-m", "gpu.runs.plan_table", "--check"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr


def test_table_covers_the_library_paths_and_states_its_rule():
    assert paths() == ["cublas", "cublas-bf16", "cublas-fast", "cublas-fp16", "cublas-tf32"]
    fitted = [e for e in entries() if "fitted from that file alone" in e.evidence]
    assert {(e.path, e.shape) for e in fitted} == {
        ("cublas-bf16", (128, 128, 8192)), ("cublas-fast", (128, 128, 8192)),
        ("cublas-tf32", (64, 64, 64))}
    right, of = held_out()["cublas-tf32"]
    assert of == 3 and right <= of


def test_lookup_says_record_or_rule():
    rec = lookup("cublas-bf16", 128, 128, 8192)
    assert rec.source == "record" and rec.plan.split == 6
    rule = lookup("cublas-bf16", 1, 4096, 4096)
    assert rule.source == "rule" and "held out" in rule.note and "nearest" in rule.note
    with pytest.raises(PlanError, match="no plan for GPU path 'triton-dot'.*cublas-bf16: 3"):
        lookup("triton-dot", 16, 16, 16)
    with pytest.raises(PlanError, match="M must be a positive whole number, not 0"):
        lookup("cublas-bf16", 0, 16, 16)
    assert lookup("cublas-bf16", np.int64(128), 128, 8192).source == "record"


@pytest.mark.parametrize("name", ["cublas-bf16.128.128.8192", "cublas-tf32.64.64.64"])
def test_compare_models_the_recorded_path(name):
    out = mxsim("compare", LIB / f"{name}.out.npz")
    assert out.returncode == 0, out.stderr
    assert "100.0000%" in out.stdout and "recorded on the H200" in out.stdout
    out = mxsim("compare", LIB / f"{name}.out.npz", "--unit", name.split(".")[0], "--json")
    assert json.loads(out.stdout)["plan"]["split"] in (2, 6)


def test_compare_with_a_plan_file(tmp_path):
    plan = ROOT / "tests" / "data" / "plans" / "h200-cublas-tf32.64.64.64.toml"
    out = mxsim("compare", LIB / "cublas-tf32.64.64.64.out.npz", "--unit", plan)
    assert out.returncode == 0 and "plan file" in out.stdout


def test_compare_without_a_path_or_unit_is_one_line(tmp_path):
    vs = vectors.generate("llm", a_format="bf16", m=2, n=2, k=16, seed=1, with_c=False)
    f = tmp_path / "x.npz"
    vectors.save(vs.with_result(np.zeros((2, 2), np.uint32), producer="t"), f)
    out = mxsim("compare", f)
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "records no GPU path" in out.stderr
    vs2 = vs.replace(extra={"path": "triton-dot"}).with_result(np.zeros((2, 2), np.uint32),
                                                               producer="t")
    vectors.save(vs2, f)
    out = mxsim("compare", f)
    assert out.returncode == 2 and "which no plan models" in out.stderr


def test_batch_invariance_from_plans():
    rows = batch_invariance("cublas-bf16", 4096, 4096, [1, 8, 1024], cols=16, rows=2)
    assert [r.m for r in rows] == [1, 8, 1024]
    assert rows[0].differ == 0 and rows[0].same_plan
    for r in rows:
        assert (r.differ == 0) == r.same_plan or r.differ == 0
    with pytest.raises(PlanError, match="library paths"):
        batch_invariance("wgmma", 16, 16, [1])
    with pytest.raises(PlanError, match="M values must be positive"):
        batch_invariance("cublas-bf16", 16, 16, [0])


def test_invariance_verb():
    out = mxsim("invariance", "-n", 1024, "-k", 4096, "-m", 1, 1024, "--cols", 8, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data[0]["rows"][0]["m"] == 1 and data[0]["rows"][0]["differ"] == 0
    for bad, words in ((["-n", 4], "needs a layer"), (["--llama3-8b", "-n", 4], "not both"),
                       (["-n", 4, "-k", 4, "--path", "wgmma"], "library paths")):
        out = mxsim("invariance", *bad)
        assert out.returncode == 2 and words in out.stderr and out.stderr.count("\n") == 1


def test_fit_plan_and_probe_verbs(tmp_path):
    out = mxsim("fit", "--plan", LIB / "cublas-tf32.64.64.64.out.npz", "-o", tmp_path / "p.toml")
    assert out.returncode == 0, out.stderr
    assert "split = 2" in (tmp_path / "p.toml").read_text()
    out = mxsim("probe", "--kind", "plan", "--format", "bf16", "-k", "64", "-o",
                tmp_path / "probe.npz")
    assert out.returncode == 0, out.stderr
    for bad, words in (
            (["fit", "--plan", LIB / "cublas-tf32.64.64.64.out.npz",
              LIB / "cublas-tf32.64.64.64.out.npz", "-o", tmp_path / "q.toml"], "one result file"),
            (["fit", "--plan", tmp_path / "probe.npz", "-o", tmp_path / "q.toml"], "no results"),
            (["fit", "--plan-unit", "x", "a.npz", "-o", tmp_path / "q.toml"], "is for --plan"),
            (["probe", "--kind", "plan", "-o", tmp_path / "r.npz"], "needs --format"),
            (["probe", "--kind", "plan", "--format", "bf16", "-k", "60", "-o",
              tmp_path / "r.npz"], "multiple of the probe step")):
        out = mxsim(*bad)
        assert out.returncode == 2, (bad, out.stderr)
        assert words in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert not (tmp_path / "q.toml").exists() and not (tmp_path / "r.npz").exists()


def test_mxsim_torch_takes_library_paths():
    torch = pytest.importorskip("torch")
    import mxsim.torch as mt
    from mxsim import formats
    from mxsim.errors import MxsimError

    vs = vectors.load(LIB / "cublas-bf16.128.128.8192.out.npz")
    f = formats.get("bf16")
    x = torch.from_numpy(f.decode(vs.a).astype(np.float32)).to(torch.bfloat16)
    w = torch.from_numpy(f.decode(vs.b).astype(np.float32)).to(torch.bfloat16)
    y = mt.matmul(x.float(), w.float(), unit="cublas-bf16")
    assert np.array_equal(y.numpy().view(np.uint32), vs.d)
    y16 = mt.matmul(x, w, unit="cublas-bf16")             # torch.mm's own dtype: RNE of D
    assert y16.dtype == torch.bfloat16
    plan, note = mt.library_plan("cublas-bf16", 128, 128, 8192)
    assert plan.split == 6 and "torch flags assumed" in note and "recorded" in note
    with pytest.raises(MxsimError, match="use recipe 'none'"):
        mt.matmul(x, w, unit="cublas-bf16", recipe="mxfp8")


def test_bad_plan_files_and_sets_are_one_line(tmp_path):
    res = LIB / "cublas-tf32.64.64.64.out.npz"
    bad = tmp_path / "bad.toml"
    for text, words in (('unit = "hopper-mma-tf32"\nsplit = 0\n', "split must be a positive"),
                        ('unit = "no-such-unit"\n', "no-such-unit"),
                        ('unit = "hopper-mma-tf32"\nmerge = "sideways"\n', "merge must be"),
                        ('unit = "hopper-mma-tf32"\nsplitk = 2\n', "unknown key(s) splitk")):
        bad.write_text(text)
        out = mxsim("compare", res, "--unit", bad)
        assert out.returncode == 2, (text, out.stderr)
        assert words in out.stderr and out.stderr.count("\n") == 1, out.stderr
    scaled = vectors.generate("llm", a_format="e4m3", m=2, n=2, k=256, scale_format="fp32",
                              scale_granularity="row", seed=1, with_c=False)
    f = tmp_path / "scaled.npz"
    vectors.save(scaled.with_result(np.zeros((2, 2), np.uint32), producer="t"), f)
    out = mxsim("fit", "--plan", f, "-o", tmp_path / "p.toml")
    assert out.returncode == 2 and "FP32 scales" in out.stderr
    assert out.stderr.count("\n") == 1 and not (tmp_path / "p.toml").exists()


def test_compare_plan_options(tmp_path):
    from mxsim.plans import load
    res = LIB / "cublas-tf32.64.64.64.out.npz"
    out = mxsim("compare", res, "--engine", "fast", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["plan"]["split"] == 2
    plan_json = tmp_path / "plan.json"
    plan_json.write_text(load(ROOT / "tests" / "data" / "plans" /
                              "h200-cublas-tf32.64.64.64.toml").dumps("json"))
    out = mxsim("compare", res, "--unit", plan_json)
    assert out.returncode == 0 and "100.0000%" in out.stdout and "plan file" in out.stdout
    out = mxsim("compare", res, res, "--engine", "fast")
    assert out.returncode == 2 and "--engine does not apply with OTHER.npz" in out.stderr
