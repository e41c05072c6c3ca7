"""Real H200 outputs (tests/data/h200, made by ``python -m gpu.runs.collect``) against the presets.

These run everywhere, with no GPU. The validation run (``2026-12-01/validate``) is checked
from its records: every figure the docs quote is recomputed from them (``gpu.runs.figures``), and a
sample of its sets is regenerated from the recorded seeds and run through the fast engine,
whose output must hash to the recorded model hash and, where the GPU agreed on every dot, to
the recorded GPU hash. The held-out sample (``2026-12-01/heldout``), which no fit has read, is
replayed bit for bit. The older files (``h200_*.npz``, ``probe_fp8*.npz``,
``triton_operand_map.npz``) are the samples the presets were fitted on. The ``gpu``-marked test
runs a comparison live where a GPU is present.
"""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from gpu.runs import figures, records, validate
from gpu.runs.sets import load_bundle
from mxsim import formats, presets, vectors
from mxsim.engine import fast
from mxsim.errors import UnitError

DATA = Path(__file__).parents[1] / "data" / "h200"
RUN = DATA / "2026-12-01"
#: Salts of the runs before the seed fix (their seeds all collided): no new run may reuse one.
OLD_SALTS = {"", "validation-2", "validation-3", "validation-4", "validation-6",
             "validation-7", "validation-8", "validation-9", "shapes-1"}


def test_gpu_collect_seed_hashes_every_part():
    """Distinct parts and salts give distinct seeds (the old seed kept the JSON's first 7
    bytes, so every set of a run, and every salt, shared one), and the same parts the same."""
    from gpu.runs.sets import seed
    parts = [("validation-4", "k32", "e4m3", "e4m3", "normal"),
             ("validation-8", "k32", "e4m3", "e4m3", "normal"),
             ("validation-4", "k32", "e4m3", "e5m2", "normal"),
             ("validation-4", "k32", "e4m3", "e4m3", "llm"),
             ("validation-4", "long", "e4m3", "e4m3", "normal", 64),
             ("validation-4", "long", "e4m3", "e4m3", "normal", 4096),
             ("", "cublas", {"k": 256, "m": 128}), ("", "cublas", {"k": 1024, "m": 128})]
    seeds = [seed(*p) for p in parts]
    assert len(set(seeds)) == len(seeds)
    assert all(0 <= s < 2 ** 63 for s in seeds)
    assert seed(*parts[0]) == seeds[0]
    assert seed("", "x", {"a": 1, "b": 2}) == seed("", "x", {"b": 2, "a": 1})


def _bundle(name):
    return load_bundle(DATA / f"{name}.npz")


def _agree(vs, preset) -> int:
    d = fast.dot(presets.get(preset).spec_for(vs), vs)
    return int((d == vs.d).sum())


@pytest.mark.parametrize("pair", ["e4m3_e4m3", "e4m3_e5m2", "e5m2_e4m3"])
def test_gpu_data_wgmma_k32_is_hopper_wgmma(pair):
    vs = _bundle("h200_wgmma_k32")[f"wgmma_k32_{pair}"]
    assert vs.k == 32 and vs.extra["device"]["gpu"] == "NVIDIA H200"
    assert sorted(set(vs.extra["families"])) == sorted(f for f in vectors.FAMILIES
                                                       if f != "nan-scale")
    assert _agree(vs, "hopper-wgmma") == vs.d.size == 12 * 16 * 16


def test_gpu_data_cublas_fast_accum_is_hopper_cublas_fast():
    sets = _bundle("h200_cublas_fast")
    assert len(sets) == 8 and max(vs.k for vs in sets.values()) == 4096
    for key, vs in sets.items():
        assert vs.extra["use_fast_accum"] is True
        assert _agree(vs, "hopper-cublas-fast") == vs.d.size, key


# How far cuBLASLt without fast accumulation is from the chained-wgmma model: it promotes
# partial sums to FP32 every 128 of K (hopper-cublas). Pinned so a change is noticed.
NOACC_EQUAL_TO_CHAIN = {
    "noacc_k1024_e4m3_e4m3_normal": 1, "noacc_k1024_e4m3_e4m3_cancellation": 0,
    "noacc_k4096_e4m3_e4m3_normal": 0, "noacc_k4096_e4m3_e4m3_llm": 0,
    "noacc_k1024_e4m3_e5m2_normal": 1, "noacc_k1024_e4m3_e5m2_cancellation": 0,
    "noacc_k1024_e5m2_e4m3_normal": 3, "noacc_k1024_e5m2_e4m3_cancellation": 2,
}


def test_gpu_data_cublas_without_fast_accum_is_not_the_chain():
    sets = _bundle("h200_cublas_noacc")
    assert {k: _agree(vs, "hopper-cublas-fast") for k, vs in sets.items()} == \
        NOACC_EQUAL_TO_CHAIN
    # Same inputs as the fast-accumulation samples, different results.
    fast_sets = _bundle("h200_cublas_fast")
    for key, vs in sets.items():
        twin = fast_sets[key.replace("noacc", "fast")]
        assert twin.inputs_equal(vs) and not np.array_equal(twin.d, vs.d)


def test_gpu_data_cublas_without_fast_accum_is_hopper_cublas():
    for key, vs in _bundle("h200_cublas_noacc").items():
        assert _agree(vs, "hopper-cublas") == vs.d.size, key


@pytest.mark.gpu
def test_gpu_live_scaled_mm_matches_presets():
    from gpu.hopper import cublas

    reason = cublas.unavailable_reason()
    if reason is not None:
        pytest.skip(f"cublas path unavailable here: {reason}")
    for k, preset in ((32, "hopper-wgmma"), (512, "hopper-cublas-fast")):
        vs = vectors.generate("normal", a_format="e4m3", b_format="e5m2", m=64, n=64, k=k,
                              with_c=False, seed=k)
        res = cublas.scaled_mm(vs, fast_accum=True)
        assert _agree(res, preset) == res.d.size


# -- every Hopper path (tests/data/h200/h200_paths.npz, `gpu.runs.collect --what paths`)
# ------------

def _paths():
    return _bundle("h200_paths")


@pytest.mark.parametrize("pair", ["e4m3_e4m3", "e4m3_e5m2", "e5m2_e4m3"])
def test_gpu_data_triton_dot_is_the_wgmma_chain(pair):
    """Triton's tl.dot on FP8, accumulator chained over K, is hopper-wgmma / -cublas-fast."""
    vs = _paths()[f"triton-dot_{pair}_fp32_k32_none"]
    assert vs.extra["path"] == "triton-dot" and vs.extra["triton"]
    assert _agree(vs, "hopper-wgmma") == vs.d.size == 768


def test_gpu_data_cublas_blockwise_scales():
    """DeepSeek-style block-wise FP32 scales: each 128-K partial scaled by an FMA."""
    vs = _paths()["cublas_e4m3_e4m3_fp32_k512_block"]
    assert vs.block == 128 and vs.a_scale.shape[-1] == 4
    assert _agree(vs, "hopper-cublas-blockwise") == vs.d.size == 1024
    assert _agree(vs, "exact") == 0
    for pair in ("e4m3_e5m2", "e5m2_e4m3"):
        vs = _paths()[f"cublas_{pair}_fp32_k512_block"]
        assert _agree(vs, "hopper-cublas-blockwise") == vs.d.size == 1024


def test_gpu_data_cublas_blockwise_order_is_decided():
    """The evidence of docs/findings.md §7: only the FMA of fl(sa*sb) reproduces the sample."""
    scores = figures.blockwise_order_scores()
    fma = scores.pop("`fma(P, fl(sa·sb), total)`")
    assert fma == 1024 and len(scores) == 5 and max(scores.values()) < fma * 0.8


@pytest.mark.parametrize("key", ["mma-sync_e4m3_e4m3_fp32_k32_none",
                                 "mma-sync_e4m3_e4m3_fp32_k256_none",
                                 "mma-sync_e4m3_e4m3_fp16_k32_none",
                                 "mma-sync_e4m3_e5m2_fp32_k32_none",
                                 "mma-sync_e4m3_e5m2_fp16_k32_none",
                                 "mma-sync_e5m2_e4m3_fp32_k32_none",
                                 "mma-sync_e5m2_e4m3_fp16_k32_none",
                                 "mma-sync_e5m2_e5m2_fp32_k32_none",
                                 "mma-sync_e5m2_e5m2_fp16_k32_none"])
def test_gpu_data_mma_sync_is_hopper_mma_sync(key):
    """sm_90's emulated FP8 mma.sync: the fitted preset reproduces every sample output."""
    vs = _paths()[key]
    assert vs.extra["instruction"].startswith("mma.sync.aligned.m16n8k32")
    assert _agree(vs, "hopper-mma-sync") == vs.d.size
    assert _agree(vs, "hopper-wgmma") < vs.d.size                # and it is not wgmma


def test_gpu_data_triton_dot_scaled_hopper():
    """tl.dot_scaled on Hopper: the preset reproduces every sample, and the two upcast rules
    (scales folded into bf16 operands, E5M2 Inf/NaN read as numbers) are what it takes."""
    sets = _paths()
    plain = {"fold_scales": False, "upcast_specials": "ieee"}
    for fmt in ("e4m3", "e5m2", "e2m1"):
        vs = sets[f"triton-dot-scaled_{fmt}_{fmt}_fp32_k128_none"]
        assert vs.extra["families"] == ["normal", "specials", "scale-extremes"]
        assert _agree(vs, "triton-dot-scaled-hopper") == vs.d.size == 768
        spec = presets.get("triton-dot-scaled-hopper").spec_for(vs)
        d = fast.dot(spec.replace(**plain), vs)
        assert (d[2] == vs.d[2]).sum() < 256 // 2                   # scale extremes need fold
        if fmt == "e5m2":
            d = fast.dot(spec.replace(upcast_specials="ieee"), vs)
            assert (d[1] == vs.d[1]).sum() < 256 // 2               # Inf/NaN read as numbers


def test_gpu_collect_paths_plans_run_registered_paths():
    """The paths mode's plans (gpu.runs.collect --what paths) name registered runners, and its
    filters keep what they say."""
    from collections import Counter

    from gpu.paths import PATHS
    from gpu.runs.collect import paths_plans
    plans = paths_plans()
    assert Counter(p for p, _ in plans) == {"cublas": 21, "mma-sync": 16,
                                            "triton-dot-scaled": 12, "cublas-fast": 9,
                                            "triton-dot": 6}
    assert {p for p, _ in plans} <= set(PATHS)
    assert paths_plans(only="cublas:row", pairs=["e4m3xe5m2"]) == [
        ("cublas", {"a_format": "e4m3", "b_format": "e5m2", "k": 256, "with_c": False,
                    "scale_format": "fp32", "scale_granularity": "row"})]


def test_gpu_validation_plans_agree_with_their_runners_presets():
    """Where a runner names the preset that reproduces it, its validation compares with that
    preset; every plan's path is a registered runner."""
    from gpu.paths import PATHS
    for plan in validate.plans(validate.DRY_SIZES):
        assert PATHS[plan.path].preset in (None, plan.preset), plan


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e2m1"])
def test_gpu_data_triton_operand_map(fmt):
    """Every element code under every E8M0 scale, as tl.dot_scaled's emulation feeds it to
    the tensor core (gpu.runs.collect --what operand-map): the model gives every output bit."""
    from gpu.runs.sets import operand_map_sets
    with np.load(DATA / "triton_operand_map.npz") as z:
        maps = {k: z[k] for k in z.files}
    for side, vs in operand_map_sets(fmt).items():
        vs = vs.subset(slice(0, 1), slice(None)) if side == "b" else \
            vs.subset(slice(None), slice(0, 1))
        spec = presets.get("triton-dot-scaled-hopper").spec_for(vs)
        d = fast.dot(spec, vs)
        got = maps[f"{fmt}/{side}"]
        want = d[:, 0, :] if side == "b" else d[:, :, 0]
        assert np.array_equal(want, got), side
    got = maps[f"{fmt}/a"].view(np.float32)
    finite = np.isfinite(formats.get(fmt).decode(np.arange(256) % (1 << formats.get(fmt).bits)))
    assert (got[0][finite] == 0).all()                              # scale 0x00 reads as 0
    assert np.isnan(got[255]).all()                                 # 0xFF is NaN
    if fmt == "e5m2":                                               # Inf and NaN are numbers
        assert got[127][[0x7C, 0x7D, 0xFC]].tolist() == [65536.0, 81920.0, -65536.0]


def test_gpu_data_cublas_rowwise_scales():
    """Per-tensor and row-wise FP32 scales: cuBLASLt's epilogue on the promoted chain."""
    sets = _paths()
    for gran in ("tensor", "row"):
        for pair in ("e4m3_e4m3", "e4m3_e5m2", "e5m2_e4m3"):
            vs = sets[f"cublas_{pair}_fp32_k256_{gran}"]
            assert _agree(vs, "hopper-cublas-rowwise") == vs.d.size


# -- the 2026-12-01 run: records, re-derivation, held-out replay, figures ------------------------

def _runs():
    """The 2026-12-01 runs (the Hopper 16-bit runs have their own tests:
    tests/gpu/test_gpu_hopper_dtypes.py)."""
    return {run.name: run for run in records.runs() if run.name.startswith("2026-12-01/")}


def test_gpu_records_header_versions_and_footer():
    """Every run says what it ran on and with what, and that it ran every set it planned."""
    runs = _runs()
    assert set(runs) == {"2026-12-01/validate", "2026-12-01/heldout"}
    for run in runs.values():
        v = run.header["versions"]
        assert v["device"]["gpu"] == "NVIDIA H200" and v["device"]["capability"] == "9.0"
        for name in ("torch", "triton", "numpy", "ml_dtypes", "numba", "git_commit"):
            assert v[name], name
        assert v["device"]["cublas"] and v["device"]["driver"] and v["engine"] == "numba"
        assert run.footer["ran"] == len(run.sets) == run.header["planned"]
        assert run.footer["errors"] == len(run.errors) == 0
        assert not run.footer["stopped_by_deadline"]


def test_gpu_records_salts_and_seeds_are_fresh():
    """Each run has a new salt; every set's seed is the hash of its salt and parts, and no two
    sets of any run share one (the old seed gave all of them the same)."""
    runs = _runs()
    salts = [run.header["salt"] for run in runs.values()]
    assert len(set(salts)) == len(salts) and not set(salts) & OLD_SALTS
    seeds = []
    for run in runs.values():
        for rec in run.sets:
            plan = validate.Plan(rec["group"], rec["path"], rec["preset"], rec["gen"])
            if "operand_map" in rec["gen"]:           # a fixed table, no seed
                assert rec["seed"] is None and rec["salt"] is None
                continue
            assert rec["salt"] == run.header["salt"]
            assert rec["seed"] == plan.seed(run.header["salt"])
            seeds.append(rec["seed"])
    assert len(set(seeds)) == len(seeds) == 882 - 9 + 55


def test_gpu_records_cover_every_plan():
    """The run holds exactly the plans gpu.runs.validate makes (every validation the docs cite)."""
    runs = _runs()
    run = runs["2026-12-01/validate"]
    sizes = dict(run.header["sizes"])
    sizes["shapes"] = [tuple(s) for s in sizes["shapes"]]
    want = [(p.group, p.path, p.preset, p.gen) for p in validate.plans(sizes)]
    assert [(r["group"], r["path"], r["preset"], r["gen"]) for r in run.sets] == want
    held = [(p.group, p.path, p.preset, p.gen) for p in validate.heldout_plans()]
    assert [(r["group"], r["path"], r["preset"], r["gen"])
            for r in runs["2026-12-01/heldout"].sets] == held


def test_gpu_records_counts_are_consistent():
    for run in _runs().values():
        for rec in run.sets:
            assert rec["dots"] == rec["m"] * rec["n"] * (256 if "operand_map" in rec["gen"]
                                                         else 1)
            assert 0 <= rec["equal"] <= rec["dots"]
            assert sum(rec["histogram"].values()) == rec["dots"] - rec["equal"]
            assert (rec["gpu_sha256"] == rec["model_sha256"]) == (rec["equal"] == rec["dots"])
            assert len(rec["first"]) == min(3, rec["dots"] - rec["equal"])


def _sample():
    """Per validation, its cheapest set and its longest-K set of at most 70 M multiply-adds."""
    out = []
    groups: dict = {}
    for rec in _runs()["2026-12-01/validate"].sets:
        groups.setdefault(rec["group"], []).append(rec)

    def cost(r):
        return r["dots"] * r["k"]

    for group, recs in groups.items():
        cheap = min(recs, key=cost)
        long = max((r for r in recs if cost(r) <= 70e6), key=lambda r: (r["k"], -cost(r)),
                   default=cheap)
        out += [pytest.param(cheap, id=f"{group}-cheapest")]
        if long is not cheap:
            out += [pytest.param(long, id=f"{group}-k{long['k']}")]
    return out


@pytest.mark.parametrize("rec", _sample())
def test_gpu_records_rederive_from_seeds(rec):
    """Regenerated from its seed on this CPU, a set has the recorded inputs; the fast engine's
    output hashes to the recorded model hash, and so to the GPU's where they agreed."""
    vs = records.regenerate(rec)
    assert records.inputs_sha256(vs) == rec["inputs_sha256"]
    d = records.model_d(rec, vs)
    assert records.d_sha256(d) == rec["model_sha256"]
    assert rec["equal"] == rec["dots"] and rec["gpu_sha256"] == rec["model_sha256"]


def test_gpu_heldout_replays_bit_for_bit():
    """The held-out sample (inputs and H200 outputs, never read by a fit) against its presets."""
    run = _runs()["2026-12-01/heldout"]
    sets = load_bundle(RUN / "heldout" / "heldout.npz")
    assert sorted(sets) == [f"{i:03d}" for i in range(len(run.sets))]
    for key, vs in sets.items():
        rec = run.sets[int(key)]
        assert records.inputs_sha256(vs) == rec["inputs_sha256"]
        assert records.inputs_sha256(records.regenerate(rec)) == rec["inputs_sha256"]
        assert records.d_sha256(vs.d) == rec["gpu_sha256"]
        assert vs.extra["device"]["gpu"] == "NVIDIA H200"
        d = records.model_d(rec, vs)
        assert int((d == vs.d).sum()) == rec["equal"] == vs.d.size, key


def test_gpu_records_are_what_came_off_the_device():
    """The committed records are the collector's own gzip, header first, footer last."""
    with gzip.open(RUN / "validate" / "records.jsonl.gz", "rt") as fh:
        lines = fh.read().splitlines()
    head, foot = json.loads(lines[0]), json.loads(lines[-1])
    assert head["kind"] == "header" and foot["kind"] == "footer"
    assert "--what validate --salt validation-2026-12-01" in head["command"]
    assert head["versions"]["git_commit"].startswith("6d7a1c4")


def test_gpu_figures_in_the_docs_are_recomputed():
    """Every hardware figure in the docs equals what gpu.runs.figures computes from the data."""
    assert figures.main(["--check"]) == 0


def test_gpu_figures_check_finds_a_hand_edit(tmp_path, monkeypatch):
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- fig:total:dots -->1,000<!-- /fig --> and "
                   "<!-- fig:preset:hopper-wgmma+hopper-mma-sync:mismatches -->0<!-- /fig -->")
    monkeypatch.setattr(figures, "ROOT", tmp_path)
    monkeypatch.setattr(figures, "DOCS", ("doc.md",))
    assert figures.main(["--check"]) == 1
    assert figures.main([]) == 0 and figures.main(["--check"]) == 0
    assert "1,000" not in doc.read_text()


def test_gpu_presets_claim_no_more_than_the_records():
    """A preset that says it met the H200 with 0 mismatches has records, all bit-equal."""
    sets = [s for run in records.runs("validate") for s in run.sets]
    claimed = [p for p in presets.PRESETS.values() if "0 mismatches" in p.verified]
    assert {p.name for p in claimed} == {s["preset"] for s in sets}
    for p in claimed:
        mine = [s for s in sets if s["preset"] == p.name]
        assert "tests/data/h200/2026-12-01" in p.verified
        assert mine and all(s["equal"] == s["dots"] for s in mine), p.name
    for p in presets.PRESETS.values():             # Blackwell: never on hardware
        if p.name.startswith("blackwell"):
            assert "not verified on hardware" in p.verified


# -- torch._scaled_mm's bias, and C on the scaled presets ----------------------------------------

def test_gpu_bias_is_added_after_the_scales():
    """On the H200, _scaled_mm's bias (bf16 output only) is added to the scaled FP32 result;
    added where C enters the model (before the scales) it reproduces about half."""
    meta = json.loads((RUN / "bias-bf16" / "bias.json").read_text())
    for row in meta["rows"]:
        assert row["bf16_fp32_error"] == "Bias is not supported when out_dtype is set to Float32"
        assert row["bf16_bf16_ran"]
    for gran, hyps in figures.bias_scores().items():
        equal, total = hyps["**bf16(fl(D32 + bias))**"]
        assert equal == total == 4 * 128 * 128, gran
        before = [v for k, v in hyps.items() if "acc + bias" in k]
        assert len(before) == 1 and before[0][0] < 0.7 * total, gran


@pytest.mark.parametrize("preset,gran", [("hopper-cublas-rowwise", "tensor"),
                                         ("hopper-cublas-rowwise", "row"),
                                         ("hopper-cublas-blockwise", "block")])
def test_presets_scaled_cublas_refuse_c(preset, gran, tmp_path, capsys):
    """(A·B + C)·s is not what the H200 does with a bias, and _scaled_mm takes no C: refused in
    one line, by the preset and through the CLI; without C the spec is given."""
    from mxsim.cli import main
    kw = dict(a_format="e4m3", m=16, n=128, k=512, scale_format="fp32", scale_granularity=gran)
    vs = vectors.generate("normal", **kw)
    with pytest.raises(UnitError, match=f"^Unit {preset} takes no C: .*added after the scales"):
        presets.get(preset).spec_for(vs)
    assert presets.get(preset).spec_for(vectors.generate("normal", with_c=False, **kw)).name \
        == preset
    vectors.save(vs, tmp_path / "in.npz")
    rc = main(["run", str(tmp_path / "in.npz"), "--unit", preset, "-o", str(tmp_path / "o.npz")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "takes no C" in err
    assert not (tmp_path / "o.npz").exists()


def test_gpu_validate_writes_records_a_cpu_can_rederive(tmp_path):
    """The collector's record writing, with each preset standing in for the GPU (a dry run):
    the records read back, and a deadline stops the run with what it measured kept."""
    todo = [p for p in validate.plans(validate.DRY_SIZES)
            if p.group in ("hopper-wgmma", "hopper-cublas-blockwise")][:4]
    validate._loop(tmp_path / "a", "validate", "dry-test", todo, None, validate.model_runner)
    run = records.read(tmp_path / "a")
    assert not (tmp_path / "a" / "records.jsonl").exists()
    assert [r["gen"] for r in run.sets] == [p.gen for p in todo]
    for rec, plan in zip(run.sets, todo, strict=True):
        assert rec["seed"] == plan.seed("dry-test") and rec["equal"] == rec["dots"]
        assert records.d_sha256(records.model_d(rec)) == rec["model_sha256"]
    validate._loop(tmp_path / "b", "validate", "dry-test", todo, 0.0, validate.model_runner)
    cut = records.read(tmp_path / "b")
    assert cut.footer["stopped_by_deadline"] and cut.footer["ran"] == len(cut.sets) == 0
