"""GEMM plans (mxsim.plans): the language, the engines held bit-equal, the H200 library results
reproduced by the plans `mxsim fit --plan` found from each file alone."""

import itertools
from pathlib import Path

import numpy as np
import pytest

from mxsim import vectors
from mxsim.engine import gpu as gpu_engine
from mxsim.plans import Merge, Plan, PlanError, chunk_bounds, from_dict, load, loads
from mxsim.plans.run import reduce_fast, reduce_reference, run

DATA = Path(__file__).resolve().parents[2] / "data"
LIB = DATA / "h200_library_gemms"
FILES = ("cublas-bf16.128.128.8192", "cublas-fast.128.128.8192", "cublas-tf32.64.64.64")


# -- the language ---------------------------------------------------------------------------

def test_chunk_bounds_follow_cublaslt_rule():
    sizes = lambda b: [k1 - k0 for k0, k1 in b]                       # noqa: E731
    assert sizes(chunk_bounds(8192, 6, 64)) == [1408] * 5 + [1152]
    assert sizes(chunk_bounds(8192, 3, 128)) == [2816, 2816, 2560]
    assert sizes(chunk_bounds(64, 2, 16)) == [32, 32]
    assert sizes(chunk_bounds(100, 3, 16)) == [48, 48, 4]
    assert sizes(chunk_bounds(64, 8, 32)) == [32, 32]                 # fewer than asked
    assert sizes(chunk_bounds(64, 1, 16)) == [64]


def test_plan_round_trips_through_toml_and_json():
    plan = Plan(name="x", unit="hopper-mma-bf16", split=6, granule=64, partial_format="bf16",
                merge="tree", sum_format="fp32", alpha=0.5, out_format="bf16",
                kernels=("nvjet_sm90_tst_64x32_splitK",), provenance="here")
    assert loads(plan.dumps()) == plan
    assert loads(plan.dumps("json")) == plan
    assert plan.merge is Merge.TREE and len(plan.digest()) == 16


@pytest.mark.parametrize("bad, words", [
    (dict(split=0), "split must be a positive whole number"),
    (dict(split=True), "split must be a positive whole number"),
    (dict(granule=2.5), "granule must be a positive whole number"),
    (dict(merge="sideways"), "merge must be one of forward, tree, serial"),
    (dict(partial_format="e4m3"), "partial_format must be one of fp32, bf16, fp16"),
    (dict(out_format="tf32"), "out_format must be one of"),
    (dict(alpha=0.1), "alpha must be a finite FP32 value"),
    (dict(beta="1"), "beta must be a number"),
    (dict(unit=""), "a plan needs a unit"),
])
def test_bad_plans_are_one_line_errors(bad, words):
    with pytest.raises(PlanError, match=words) as exc:
        Plan(**bad)
    assert "\n" not in str(exc.value)


def test_plan_files_are_checked(tmp_path):
    with pytest.raises(PlanError, match="unknown key.*splitk"):
        from_dict({"unit": "hopper-wgmma", "splitk": 2})
    bad = tmp_path / "bad.toml"
    bad.write_text("unit = ")
    with pytest.raises(PlanError, match="not a valid plan file"):
        load(bad)
    with pytest.raises(PlanError, match="no such plan file"):
        load(tmp_path / "missing.toml")
    bad.write_bytes(b"unit = \"\xff\"")
    with pytest.raises(PlanError, match="UTF-8"):
        load(bad)


# -- the reduction: vectorised and reference twins ------------------------------------------

def _adversarial_fp32(rng, shape):
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7FFFFFFF,
                        0x00000001, 0x80000001, 0x007FFFFF, 0x7F7FFFFF, 0xFF7FFFFF,
                        0x3F800000, 0xBF800000, 0x33800000, 0x3F800001, 0x477FE000,
                        0x477FF000, 0x47800000, 0x3F808000, 0x3F818000], np.uint32)
    x = rng.integers(0, 1 << 32, size=shape, dtype=np.uint64).astype(np.uint32)
    small = (rng.normal(size=shape) * 4).astype(np.float32).view(np.uint32)
    pick = rng.integers(0, 3, size=shape)
    out = np.where(pick == 0, special[rng.integers(0, len(special), size=shape)],
                   np.where(pick == 1, small, x))
    return out.astype(np.uint32)


REDUCTIONS = [dict(partial_format=p, merge=m, sum_format=s, out_format=o)
              for p, m, s, o in itertools.product(("fp32", "bf16", "fp16"),
                                                  (Merge.FORWARD, Merge.TREE),
                                                  ("fp32", "bf16", "fp16"),
                                                  ("fp32", "bf16", "fp16"))]


@pytest.mark.parametrize("chunks", [1, 2, 3, 5])
def test_reduction_fast_equals_reference(chunks):
    rng = np.random.default_rng(chunks)
    parts = [_adversarial_fp32(rng, (6, 5)) for _ in range(chunks)]
    c = _adversarial_fp32(rng, (6, 5))
    bias = _adversarial_fp32(rng, (5,))
    for red in REDUCTIONS:
        for alpha, beta, with_c, with_bias in ((1.0, 1.0, False, False), (0.5, 1.0, True, True),
                                               (-3.0, 0.25, True, False)):
            plan = Plan(unit="hopper-wgmma", split=chunks, alpha=alpha, beta=beta, **red)
            args = (plan, c if with_c else None, bias if with_bias else None)
            fast_d = reduce_fast(parts, *args)
            ref_d = reduce_reference(parts, *args)
            assert fast_d.dtype == ref_d.dtype
            assert np.array_equal(fast_d, ref_d), (red, alpha, beta)


def test_reduction_rounds_once_per_add_and_writes_cuda_nan():
    one, tiny = np.uint32(0x3F800000), np.uint32(0x33800000)      # 1, 2^-24
    plan = Plan(unit="hopper-wgmma", split=3)
    # (1 + 2^-24) + 2^-24 rounds to 1 twice (ties to even); 1 + (2^-24 + 2^-24) would not
    got = reduce_fast([np.array([one]), np.array([tiny]), np.array([tiny])], plan, None, None)
    assert got[0] == one
    tree = plan.replace(split=4, merge=Merge.TREE)
    got = reduce_fast([np.array([one]), np.array([0], np.uint32), np.array([tiny]),
                       np.array([tiny])], tree, None, None)
    assert got[0] == 0x3F800001
    inf, ninf = np.uint32(0x7F800000), np.uint32(0xFF800000)
    got = reduce_fast([np.array([inf]), np.array([ninf])], plan.replace(split=2), None, None)
    assert got[0] == 0x7FFFFFFF
    bf = reduce_fast([np.array([inf]), np.array([ninf])],
                     plan.replace(split=2, out_format="bf16"), None, None)
    assert bf[0] == 0x7FFF and bf.dtype == np.uint16


# -- plans through the engines --------------------------------------------------------------

CASES = [
    ("bf16", 96, Plan(unit="hopper-wgmma-bf16", split=3, granule=32)),
    ("bf16", 40, Plan(unit="hopper-wgmma-bf16", split=2, granule=16, merge="tree")),
    ("bf16", 64, Plan(unit="hopper-mma-bf16", split=3, granule=16, partial_format="bf16",
                      out_format="bf16")),
    ("fp16", 64, Plan(unit="hopper-mma-f16", split=4, granule=16, merge="serial",
                      sum_format="fp16", out_format="fp16")),
    ("fp16", 48, Plan(unit="hopper-mma-f16", out_format="fp16", alpha=2.0)),
    ("tf32", 24, Plan(unit="hopper-mma-tf32", split=2, granule=8)),
    ("e4m3", 96, Plan(unit="hopper-cublas-fast", split=3, granule=32, merge="tree")),
    ("e5m2", 64, Plan(unit="hopper-wgmma", split=2, granule=32, beta=0.5)),
]


@pytest.mark.parametrize("fmt, k, plan", CASES, ids=[f"{f}-{k}-{p.describe()}"
                                                     for f, k, p in CASES])
@pytest.mark.parametrize("family", ["llm", "specials", "cancellation", "max"])
def test_fast_equals_reference(fmt, k, plan, family):
    vs = vectors.generate(family, a_format=fmt, m=3, n=2, k=k, seed=k, with_c=True)
    assert np.array_equal(run(plan, vs, "fast"), run(plan, vs, "reference"))


def test_block_scaled_sets_run_in_whole_blocks():
    vs = vectors.generate("llm", a_format="e4m3", m=2, n=2, k=128, scale_format="e8m0",
                          block=32, seed=3, with_c=False)
    plan = Plan(unit="ocp-fp32", split=2, granule=32)
    assert np.array_equal(run(plan, vs, "fast"), run(plan, vs, "reference"))
    with pytest.raises(PlanError, match="cuts a scale block of 32"):
        run(Plan(unit="ocp-fp32", split=3, granule=16), vs)


def test_split_one_is_the_unit():
    vs = vectors.generate("llm", a_format="bf16", m=4, n=4, k=64, seed=1, with_c=False)
    from mxsim import presets
    from mxsim.engine import fast
    spec = presets.get("hopper-wgmma-bf16").spec_for(vs)
    assert np.array_equal(run(Plan(unit="hopper-wgmma-bf16"), vs), fast.dot(spec, vs))


def test_bad_runs_are_one_line_errors():
    vs = vectors.generate("llm", a_format="e4m3", m=2, n=2, k=256, scale_format="fp32",
                          scale_granularity="tensor", seed=1)
    with pytest.raises(PlanError, match="FP32 scales"):
        run(Plan(unit="hopper-cublas-rowwise", split=2, granule=128), vs)
    plain = vectors.generate("llm", a_format="bf16", m=2, n=2, k=32, seed=1)
    with pytest.raises(PlanError, match="unknown engine"):
        run(Plan(unit="hopper-wgmma-bf16"), plain, "tpu")
    with pytest.raises(PlanError, match=r"bias must be FP32 codes \(uint32\) of shape \(2,\)"):
        run(Plan(unit="hopper-wgmma-bf16"), plain, bias=np.zeros(3, np.uint32))
    with pytest.raises(Exception, match="Unknown unit|unknown unit|not a preset|No preset"):
        run(Plan(unit="no-such-unit"), plain)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_engine.available(), reason="no GPU engine (needs CuPy and a GPU)")
@pytest.mark.parametrize("fmt, k, plan", CASES)
def test_gpu_equals_fast(fmt, k, plan):
    vs = vectors.generate("llm", a_format=fmt, m=64, n=32, k=k, seed=5, with_c=True)
    assert np.array_equal(run(plan, vs, "gpu"), run(plan, vs, "fast"))


# -- the H200 library results ---------------------------------------------------------------

@pytest.mark.parametrize("name", FILES)
def test_fitted_plans_replay_h200_results(name):
    plan = load(DATA / "plans" / f"h200-{name}.toml")
    vs = vectors.load(LIB / f"{name}.out.npz")
    d = run(plan, vs)
    assert d.dtype == vs.d.dtype and np.array_equal(d, vs.d), name
    assert f"{vs.d.size:,} of {vs.d.size:,}" in plan.verified


@pytest.mark.parametrize("name", FILES)
def test_fit_finds_the_plan_from_the_file_alone(name):
    from mxsim.probe.planfit import fit_plan
    want = load(DATA / "plans" / f"h200-{name}.toml")
    vs = vectors.load(LIB / f"{name}.out.npz")
    # CI: the committed plan's unit, splits up to 8 (the whole search: tests/data/plans/*.json)
    fit = fit_plan(vs, units=None if vs.k <= 64 else [want.unit], max_split=8)
    assert fit.exact and (fit.plan.unit, fit.plan.split, fit.plan.granule) == (
        want.unit, want.split, want.granule)


def test_the_instruction_preset_alone_does_not_explain_them():
    for name, unit in zip(FILES, ("hopper-wgmma-bf16", "hopper-cublas-fast",
                                  "hopper-wgmma-tf32"), strict=True):
        vs = vectors.load(LIB / f"{name}.out.npz")
        equal = int((run(Plan(unit=unit), vs) == vs.d).sum())
        assert equal < vs.d.size // 4, name


def test_fit_names_a_dropped_k_tail():
    from mxsim.probe.planfit import fit_plan
    vs = vectors.generate("llm", a_format="bf16", m=8, n=8, k=256, seed=11, with_c=False)
    cut = vs.replace(a=vs.a[:, :192], b=vs.b[:192])
    lost = vs.with_result(run(Plan(unit="hopper-wgmma-bf16", split=3, granule=64), cut),
                          producer="a library that lost its tail")
    fit = fit_plan(lost, units=["hopper-wgmma-bf16"], max_split=8)
    assert not fit.exact
    assert "without K range [192, 256)" in fit.missing and "dropped" in fit.report()
