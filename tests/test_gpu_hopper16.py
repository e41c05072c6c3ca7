"""Hopper on fp16, bf16 and tf32 operands: the kernels, the run's plan, and the committed H200
run (``tests/data/h200/2026-12-02/hopper16``) replayed on the CPU against the presets."""

import gzip
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gpu import hopper16, mma_sync16, records, validate
from gpu.figures16 import hopper16_sets
from gpu.paths import PATHS
from gpu.sets import load_bundle
from mxsim import presets, vectors
from mxsim.engine import fast

RUN = Path(__file__).parent / "data" / "h200" / "2026-12-02" / "hopper16"
#: Salts of earlier runs and fits: a fresh run must use none of them.
USED_SALTS = {"", "validation-2026-12-01", "heldout-2026-12-01", "bias-2026-12-01", "dry"}


def test_gpu_hopper16_mma_sync_sources_assemble_for_sm90(tmp_path):
    """Every inline-PTX kernel assembles for Hopper and names the instruction it runs."""
    nvcc = shutil.which("nvcc") or next(
        (str(p) for p in (Path("/usr/local/cuda/bin/nvcc"),) if p.exists()), None)
    if nvcc is None:
        pytest.skip("nvcc is not installed here")
    src = tmp_path / "mma16.cu"
    src.write_text(mma_sync16.source())
    p = subprocess.run([nvcc, "-cubin", "-arch=sm_90", "-o", str(tmp_path / "m.cubin"), str(src)],
                       capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
    text = mma_sync16.source()
    for instr in ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                  "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
                  "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                  "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"):
        assert text.count(instr) == 1, instr
    assert [mma_sync16.instruction(f, c) in text for f, c in mma_sync16.KERNELS] == [True] * 4


def test_gpu_hopper16_paths_are_registered_with_their_presets():
    for fmt, short in (("fp16", "f16"), ("bf16", "bf16"), ("tf32", "tf32")):
        assert PATHS[f"mma-sync-{fmt}"].preset == f"hopper-mma-{short}"
        assert PATHS[f"triton-dot-{fmt}"].preset == f"hopper-wgmma-{short}"
        assert PATHS[f"cublas-{fmt}"].preset == f"hopper-wgmma-{short}"


def test_gpu_hopper16_plan_covers_every_format_path_and_family():
    """At least 1,000,000 dots per operand format, every path, every family, distinct seeds."""
    todo = hopper16.plans()
    fams = {f for f in vectors.FAMILIES if f != "nan-scale"}
    for fmt in hopper16.FORMATS:
        mine = [p for p in todo if p.gen["a_format"] == fmt]
        assert sum(p.gen["m"] * p.gen["n"] for p in mine) >= 1_000_000, fmt
        assert {p.path for p in mine} == {f"mma-sync-{fmt}", f"triton-dot-{fmt}",
                                          f"cublas-{fmt}"}
        for path in {p.path for p in mine}:
            ks = {p.gen["k"] for p in mine if p.path == path}
            assert hopper16.LONG_K in ks and min(ks) <= 16
            assert {p.gen["family"] for p in mine if p.path == path} == fams
    accs = {(p.path, p.gen.get("c_format")) for p in todo}
    assert ("mma-sync-fp16", "fp16") in accs and ("triton-dot-fp16", "fp16") in accs
    seeds = [p.seed("a-salt") for p in todo]
    assert len(set(seeds)) == len(seeds)
    assert not set(seeds) & {p.seed("another-salt") for p in todo}


def test_gpu_hopper16_dry_run_writes_records_samples_and_figures(tmp_path):
    """The run on the CPU (tiny sets, each preset standing in for its GPU path): records that
    gpu.records reads, a sample of every set, no mismatches and no mismatch file."""
    out = tmp_path / "dry"
    hopper16.run(out, "dry", sizes={"short": 16, "long": 16}, runner=validate.model_runner)
    run = records.read(out)
    assert run.header["what"] == "hopper16" and run.header["layout_check"] is None
    assert run.footer["ran"] == len(hopper16.plans()) and not run.errors
    assert all(s["equal"] == s["dots"] for s in run.sets)
    samples = load_bundle(out / "samples.npz")
    assert sorted(samples) == sorted(s["sample"] for s in run.sets)
    assert not (out / "mismatches.npz").exists()


def test_gpu_hopper16_a_disagreeing_path_leaves_its_dots_whole(tmp_path):
    """A stand-in GPU that is one ulp off on some outputs of the mma.sync fp16 sets: the
    records count them, and mismatches.npz holds those dots whole (row of A, column of B, C,
    the GPU's D) with the preset's D beside them, enough for ``mxsim fit``."""
    def off_by_one(plan, vs):
        res = validate.model_runner(plan, vs)
        if plan.path != "mma-sync-fp16" or plan.gen["k"] != 16:
            return res
        d = res.d.copy()
        d[..., 0, :3] ^= 1
        return res.with_result(d, d_format=res.d_format, producer="fake")

    out = tmp_path / "bad"
    hopper16.run(out, "fake", sizes={"short": 16, "long": 16}, runner=off_by_one)
    run = records.read(out)
    bad = [s for s in run.sets if s["equal"] != s["dots"]]
    assert {s["path"] for s in bad} == {"mma-sync-fp16"} and len(bad) == 2 * 12
    assert all(s["dots"] - s["equal"] == 3 for s in bad)
    kept = load_bundle(out / "mismatches.npz")
    assert sorted(kept) == sorted(s["sample"] for s in bad)
    for vs in kept.values():
        assert vs.d.shape == (3, 1, 1) and vs.a.shape == (3, 1, 16) and vs.extra["dots"] == [
            0, 1, 2]
        assert [int(x) ^ 1 for x in vs.d.reshape(-1)] == vs.extra["model_d"]


# -- the committed H200 run ------------------------------------------------------------------

def _run() -> records.Run:
    return records.read(RUN)


def test_gpu_hopper16_h200_run_is_fresh_complete_and_bit_exact():
    """>= 1,000,000 dots per operand format on the H200, every path, 0 mismatches; a salt no
    earlier run or fit used; every mma.sync fragment layout exact on small integers."""
    run = _run()
    h = run.header
    assert h["what"] == "hopper16" and h["runner"] == "gpu"
    assert h["versions"]["device"]["gpu"] == "NVIDIA H200" and h["salt"] not in USED_SALTS
    assert h["layout_check"] and all(r["equal"] == r["outputs"] for r in h["layout_check"])
    assert {r["kernel"] for r in h["layout_check"]} == {
        mma_sync16.instruction(f, c) for f, c in mma_sync16.KERNELS}
    assert not run.errors and run.footer["ran"] == len(run.sets)
    for fmt in hopper16.FORMATS:
        mine = [s for s in run.sets if s["a_format"] == fmt]
        assert sum(s["dots"] for s in mine) >= 1_000_000, fmt
        assert {s["path"] for s in mine} == {f"mma-sync-{fmt}", f"triton-dot-{fmt}",
                                             f"cublas-{fmt}"}
    assert all(s["equal"] == s["dots"] for s in run.sets)
    assert hopper16_sets() == run.sets


def test_gpu_hopper16_h200_samples_replay_bit_for_bit():
    """Every committed sample (16x8 of each set: inputs and the H200's outputs) through the
    fast engine with its record's preset."""
    by_sample = {s["sample"]: s for s in _run().sets}
    samples = load_bundle(RUN / "samples.npz")
    assert sorted(samples) == sorted(by_sample)
    for key, vs in samples.items():
        rec = by_sample[key]
        assert (vs.a_format, vs.c_format, vs.k) == (rec["a_format"], rec["c_format"], rec["k"])
        model = fast.dot(presets.get(rec["preset"]).spec_for(vs), vs)
        np.testing.assert_array_equal(model, vs.d, err_msg=f"{key} {rec['group']}")


@pytest.mark.parametrize("fmt", hopper16.FORMATS)
def test_gpu_hopper16_h200_sets_regenerate_from_their_seeds(fmt):
    """The cheapest set of each path on ``fmt`` and its longest-K set, regenerated here from the
    recorded seed: the inputs and the model's output hash as recorded, and that hash is the
    H200's."""
    sets = [s for s in _run().sets if s["a_format"] == fmt]
    chosen = {}
    for s in sorted(sets, key=lambda s: (s["k"] * s["m"] * s["n"], s["family"])):
        chosen.setdefault((s["path"], s["c_format"], s["k"] == hopper16.LONG_K), s)
    for rec in chosen.values():
        vs = records.regenerate(rec)
        assert records.inputs_sha256(vs) == rec["inputs_sha256"], rec["group"]
        d = records.model_d(rec, vs)
        assert records.d_sha256(d) == rec["model_sha256"] == rec["gpu_sha256"], rec["group"]


def test_gpu_hopper16_records_file_is_what_the_machine_wrote():
    with gzip.open(RUN / "records.jsonl.gz", "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    assert rows[0]["kind"] == "header" and rows[-1]["kind"] == "footer"
    assert rows[-1]["stopped_by_deadline"] is False
