"""Hopper on fp16, bf16 and tf32 operands: the kernels, the run's plan, and the committed H200
run (``tests/data/h200/2026-12-02/hopper16``) replayed on the CPU against the presets."""

import gzip
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gpu.hopper import mma_sync
from gpu.paths import PATHS
from gpu.runs import dtype_figures as figures16
from gpu.runs import dtypes as hopper16
from gpu.runs import records, validate
from gpu.runs.dtype_figures import hopper16_sets
from gpu.runs.sets import load_bundle
from mxsim import presets, vectors
from mxsim.engine import fast

RUN = Path(__file__).parents[1] / "data" / "h200" / "2026-12-02" / "hopper16"
FIRST = RUN.parent / "hopper16-first"
EZERO = RUN.parent / "hopper16-ezero"
#: Salts of earlier runs and fits: a fresh run must use none of them.
USED_SALTS = {"", "validation-2026-12-01", "heldout-2026-12-01", "bias-2026-12-01", "dry"}


def test_gpu_hopper16_mma_sync_sources_assemble_for_sm90(tmp_path):
    """Every inline-PTX kernel assembles for Hopper and names the instruction it runs."""
    nvcc = shutil.which("nvcc") or next(
        (str(p) for p in (Path("/usr/local/cuda/bin/nvcc"),) if p.exists()), None)
    if nvcc is None:
        pytest.skip("nvcc is not installed here")
    src = tmp_path / "mma16.cu"
    src.write_text(mma_sync.float_source())
    p = subprocess.run([nvcc, "-cubin", "-arch=sm_90", "-o", str(tmp_path / "m.cubin"), str(src)],
                       capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
    text = mma_sync.float_source()
    for instr in ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                  "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
                  "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                  "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"):
        assert text.count(instr) == 1, instr
    assert [mma_sync.instruction(f, c) in text for f, c in mma_sync.FLOAT_KERNELS] == [True] * 4


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


def test_gpu_hopper16_dry_run_writes_records_samples_and_figures(tmp_path, monkeypatch):
    """The run on the CPU (tiny sets, each preset standing in for its GPU path; every path,
    format, C and K, three families): records that gpu.runs.records reads, a sample of every set,
    no mismatches and no mismatch file."""
    monkeypatch.setattr(hopper16, "UNSCALED", ["subnormal", "specials", "cancellation"])
    out = tmp_path / "dry"
    hopper16.run(out, "dry", sizes={"short": 16, "long": 16}, runner=validate.model_runner)
    run = records.read(out)
    assert run.header["what"] == "hopper16" and run.header["layout_check"] is None
    assert run.footer["ran"] == len(hopper16.plans()) and not run.errors
    assert all(s["equal"] == s["dots"] for s in run.sets)
    samples = load_bundle(out / "samples.npz")
    assert sorted(samples) == sorted(s["sample"] for s in run.sets)
    assert not (out / "mismatches.npz").exists()


def test_gpu_hopper16_a_disagreeing_path_leaves_its_dots_whole(tmp_path, monkeypatch):
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

    monkeypatch.setattr(hopper16, "UNSCALED", ["normal", "specials"])
    out = tmp_path / "bad"
    hopper16.run(out, "fake", sizes={"short": 16, "long": 16}, runner=off_by_one)
    run = records.read(out)
    bad = [s for s in run.sets if s["equal"] != s["dots"]]
    assert {s["path"] for s in bad} == {"mma-sync-fp16"} and len(bad) == 2 * 2
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
        mma_sync.instruction(f, c) for f, c in mma_sync.FLOAT_KERNELS}
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
    fast engine with its record's preset (split-K where the record says so)."""
    by_sample = {s["sample"]: s for s in _run().sets}
    samples = load_bundle(RUN / "samples.npz")
    assert sorted(samples) == sorted(by_sample)
    for key, vs in samples.items():
        rec = by_sample[key]
        assert (vs.a_format, vs.c_format, vs.k) == (rec["a_format"], rec["c_format"], rec["k"])
        model = fast.dot(records.model_spec(rec["preset"], vs, rec.get("split_k")), vs)
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


@pytest.mark.parametrize("folder", [RUN, FIRST, EZERO])
def test_gpu_hopper16_h200_records_are_the_plan_as_the_machine_wrote_it(folder):
    """Each run ran exactly gpu.runs.dtypes's plan (the fresh one with the split-K of SPLIT_K),
    under its own salt, each seed the hash of that salt and the set's parts, records as written
    (header first, footer last, no deadline cut), counts consistent."""
    with gzip.open(folder / "records.jsonl.gz", "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    assert rows[0]["kind"] == "header" and rows[-1]["kind"] == "footer"
    assert rows[-1]["stopped_by_deadline"] is False
    run = records.read(folder)
    todo = hopper16.plans(run.header["sizes"], run.header.get("families"))
    assert [(r["group"], r["path"], r["preset"], r["gen"]) for r in run.sets] == [
        (p.group, p.path, p.preset, p.gen) for p in todo]
    assert [r["seed"] for r in run.sets] == [p.seed(run.header["salt"]) for p in todo]
    fresh = folder != FIRST
    assert [r.get("split_k") for r in run.sets] == [
        hopper16.split_of(p) if fresh else None for p in todo]
    for rec in run.sets:
        assert rec["dots"] == rec["m"] * rec["n"] and 0 <= rec["equal"] <= rec["dots"]
        assert (rec["gpu_sha256"] == rec["model_sha256"]) == (rec["equal"] == rec["dots"])
        if fresh:          # the first run's log names them (gpu/runs/h200_dtypes.sh printed them)
            assert bool(rec["kernels"]) == rec["path"].startswith("cublas-")
    salts = {records.read(f).header["salt"] for f in (RUN, FIRST, EZERO)}
    assert len(salts) == 3 and not salts & USED_SALTS


def test_gpu_hopper16_triton_ran_wgmma_and_mma_sync_its_instruction():
    """The PTX each sample records: Triton's tl.dot became wgmma k16 (k8 for tf32), with an
    FP16 accumulator where C was FP16; the mma.sync kernels ran the instruction they name."""
    by_sample = {s["sample"]: s for s in _run().sets}
    for key, vs in load_bundle(RUN / "samples.npz").items():
        rec = by_sample[key]
        fmt, acc = rec["a_format"], "f16" if rec["c_format"] == "fp16" else "f32"
        if rec["path"].startswith("triton-dot-"):
            ptx = {"fp16": "f16.f16", "bf16": "bf16.bf16", "tf32": "tf32.tf32"}[fmt]
            k = 8 if fmt == "tf32" else 16
            assert vs.extra["ptx_mma"] == [f"wgmma.mma_async.sync.aligned.m64n64k{k}.{acc}."
                                           f"{ptx}"], key
        elif rec["path"].startswith("mma-sync-"):
            assert vs.extra["instruction"] == mma_sync.instruction(fmt, rec["c_format"])


def test_gpu_hopper16_h200_e_zero_ladders_separate_e_zero():
    """The e-zero run: every path bit-equal to its preset, and wherever the output reaches
    below the products (fp16 with FP16 output, bf16 and tf32 with FP32) every e_zero moved by
    -2..+2 disagrees; fp16 with FP32 output cannot tell them apart. The samples replay."""
    run = records.read(EZERO)
    assert run.header["families"] == ["e-zero"] and run.header["layout_check"]
    assert {s["family"] for s in run.sets} == {"e-zero"} and len(run.sets) == 22
    assert all(s["equal"] == s["dots"] for s in run.sets)
    for s in run.sets:
        shifted = {k: v for k, v in s["also"].items() if k.startswith("e_zero=")}
        assert len(shifted) == len(hopper16.E_ZERO_SHIFTS)
        blind = s["a_format"] == "fp16" and s["d_format"] == "fp32"
        assert all((v == s["dots"]) == blind for v in shifted.values()), s["group"]
    by_sample = {s["sample"]: s for s in run.sets}
    for key, vs in load_bundle(EZERO / "samples.npz").items():
        rec = by_sample[key]
        model = fast.dot(records.model_spec(rec["preset"], vs, rec.get("split_k")), vs)
        np.testing.assert_array_equal(model, vs.d, err_msg=key)


def test_gpu_hopper16_first_run_disagreed_only_by_cublas_split_k():
    """The first run: every set equal to its preset but cuBLAS tf32 at K = 8, whose kept
    outputs (16x8 samples and every mismatching dot, whole) are the preset split-K in two."""
    run = records.read(FIRST)
    bad = [s for s in run.sets if s["equal"] != s["dots"]]
    assert bad and {(s["path"], s["k"], s["m"], s["n"]) for s in bad} == {
        (path, k, m, n) for path, k, m, n in hopper16.SPLIT_K}
    log = (FIRST / "log").read_text(encoding="utf-8")
    assert "splitKreduce" in next(line for line in log.splitlines()
                                  if line.startswith("cuBLAS kernels tf32 256x256x8:"))
    kept = load_bundle(FIRST / "mismatches.npz")
    assert sorted(kept) == sorted(s["sample"] for s in bad)
    equal, total = figures16.first_split_k_scores()
    assert equal == total == sum(vs.d.size for vs in kept.values()) + 128 * 12
    unsplit = next(iter(kept.values()))
    model = fast.dot(presets.get("hopper-wgmma-tf32").spec_for(unsplit), unsplit)
    assert not (model == unsplit.d).any()
