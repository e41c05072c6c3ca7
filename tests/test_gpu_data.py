"""Real H200 outputs (tests/data/h200, made by ``python -m gpu.collect``) against the presets.

These run everywhere: the files hold inputs and the GPU's results. The ``gpu``-marked test at
the end runs the same comparison live where a GPU is present.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from gpu.collect import load_bundle
from mxsim import formats, presets, vectors
from mxsim.engine import fast

DATA = Path(__file__).parent / "data" / "h200"


def test_gpu_collect_seed_hashes_every_part():
    """Distinct parts and salts give distinct seeds (the old seed kept the JSON's first 7
    bytes, so every set of a run, and every salt, shared one), and the same parts the same."""
    from gpu.collect import _seed
    parts = [("validation-4", "k32", "e4m3", "e4m3", "normal"),
             ("validation-8", "k32", "e4m3", "e4m3", "normal"),
             ("validation-4", "k32", "e4m3", "e5m2", "normal"),
             ("validation-4", "k32", "e4m3", "e4m3", "llm"),
             ("validation-4", "long", "e4m3", "e4m3", "normal", 64),
             ("validation-4", "long", "e4m3", "e4m3", "normal", 4096),
             ("", "cublas", {"k": 256, "m": 128}), ("", "cublas", {"k": 1024, "m": 128})]
    seeds = [_seed(*p) for p in parts]
    assert len(set(seeds)) == len(seeds)
    assert all(0 <= s < 2 ** 63 for s in seeds)
    assert _seed(*parts[0]) == seeds[0]
    assert _seed("", "x", {"a": 1, "b": 2}) == _seed("", "x", {"b": 2, "a": 1})


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
    s = json.loads((DATA / "cublas_validation.json").read_text())
    assert sum(r["dots"] for r in s["agreement"]) == 1769472
    assert sum(r["dots"] for r in s["shapes"]) == 14660352
    assert all(r["equal"] == r["dots"] for r in s["agreement"] + s["shapes"])
    assert len({(r["m"], r["n"], r["k"]) for r in s["shapes"]}) == 7


@pytest.mark.parametrize("name,wgmma,fast", [("summary.json", 2359296, 589824),
                                              ("summary_run2.json", 589824, 1327104)])
def test_gpu_data_summary_records_the_full_run(name, wgmma, fast):
    s = json.loads((DATA / name).read_text())
    totals = {}
    for row in s["totals"]:
        d, e = totals.get(row["path"], (0, 0))
        totals[row["path"]] = (d + row["dots"], e + row["equal"])
    assert totals["wgmma-k32"] == (wgmma, wgmma)          # every dot bit-equal
    assert totals["cublas-fast"] == (fast, fast)
    assert s["device"]["gpu"] == "NVIDIA H200" and s["device"]["capability"] == "9.0"


@pytest.mark.gpu
def test_gpu_live_scaled_mm_matches_presets():
    from gpu import cublas

    reason = cublas.unavailable_reason()
    if reason is not None:
        pytest.skip(f"cublas path unavailable here: {reason}")
    for k, preset in ((32, "hopper-wgmma"), (512, "hopper-cublas-fast")):
        vs = vectors.generate("normal", a_format="e4m3", b_format="e5m2", m=64, n=64, k=k,
                              with_c=False, seed=k)
        res = cublas.scaled_mm(vs, fast_accum=True)
        assert _agree(res, preset) == res.d.size


# -- every Hopper path (tests/data/h200/h200_paths.npz, `gpu.collect --what paths`) ------------

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
    s = json.loads((DATA / "cublas_blockwise_validation.json").read_text())
    assert s["device"]["gpu"] == "NVIDIA H200"
    assert sum(r["dots"] for r in s["rows"]) == 3932160
    assert all(r["equal"] == r["dots"] for r in s["rows"])
    for pair in ("e4m3xe4m3", "e4m3xe5m2", "e5m2xe4m3"):     # every family at both K
        for k in (512, 2048):
            assert {r["family"] for r in s["rows"] if (r["pair"], r["k"]) == (pair, k)} == \
                set(vectors.FAMILIES) - {"nan-scale"}, (pair, k)


def test_gpu_data_cublas_blockwise_order_is_decided():
    """The evidence of docs/findings.md §7: only the FMA of fl(sa*sb) reproduces the sample."""
    from mxsim.engine.fast import _block_slices, _fma_fp32, _mul_fp32
    vs = _paths()["cublas_e4m3_e4m3_fp32_k512_block"]
    inner, blocks = _block_slices(presets.get("hopper-cublas-blockwise").spec_for(vs), vs)
    shape = vs.d.shape
    one = np.full(shape, np.float32(1).view(np.uint32))

    def add(x, y):
        return _fma_fp32(x, one, y)                # x + y rounded once

    def scales(kb):
        sa = np.asarray(vs.a_scale, np.float32)[..., kb][..., :, None]
        sb = np.repeat(np.asarray(vs.b_scale, np.float32)[..., kb, :], 128, -1)[..., None, :]
        return (np.broadcast_to(sa, shape).copy().view(np.uint32),
                np.broadcast_to(sb, shape).copy().view(np.uint32))

    hypotheses = {
        "fma(P, fl(sa*sb), t)": lambda p, sa, sb, t: _fma_fp32(p, _mul_fp32(sa, sb), t),
        "fl(t + fl(P*fl(sa*sb)))": lambda p, sa, sb, t: add(t, _mul_fp32(p, _mul_fp32(sa, sb))),
        "fma(fl(P*sb), sa, t)": lambda p, sa, sb, t: _fma_fp32(_mul_fp32(p, sb), sa, t),
        "fma(fl(P*sa), sb, t)": lambda p, sa, sb, t: _fma_fp32(_mul_fp32(p, sa), sb, t),
        "fl(t + fl(fl(P*sb)*sa))": lambda p, sa, sb, t: add(t, _mul_fp32(_mul_fp32(p, sb), sa)),
        "fl(t + fl(fl(P*sa)*sb))": lambda p, sa, sb, t: add(t, _mul_fp32(_mul_fp32(p, sa), sb)),
    }
    parts = [fast.dot(inner, plain) for plain, _ in blocks]
    scores = {}
    for name, h in hypotheses.items():
        t = np.zeros(shape, np.uint32)
        for kb, p in enumerate(parts):
            t = h(p, *scales(kb), t)
        scores[name] = int((t == vs.d).sum())
    assert list(scores.values()) == [1024, 798, 642, 632, 603, 598]


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
    s = json.loads((DATA / "triton_dot_scaled_validation.json").read_text())
    assert s["device"]["gpu"] == "NVIDIA H200"
    assert sum(r["dots"] for r in s["rows"]) == 2555904
    assert all(r["equal"] == r["dots"] for r in s["rows"])
    assert {(r["a_format"], r["b_format"]) for r in s["rows"]} == {
        (a, b) for a in ("e4m3", "e5m2", "e2m1") for b in ("e4m3", "e5m2", "e2m1")}
    assert {r["family"] for r in s["rows"]} == set(vectors.FAMILIES)
    assert {r["k"] for r in s["rows"]} == {128, 1024}


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e2m1"])
def test_gpu_data_triton_operand_map(fmt):
    """Every element code under every E8M0 scale, as tl.dot_scaled's emulation feeds it to
    the tensor core (gpu.collect --what operand-map): the model gives every output bit."""
    from gpu.collect import operand_map_sets
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
    s = json.loads((DATA / "cublas_rowwise_validation.json").read_text())
    assert sum(r["dots"] for r in s["rows"]) == 4718592
    assert all(r["equal"] == r["dots"] for r in s["rows"])
    for pair in ("e4m3xe4m3", "e4m3xe5m2", "e5m2xe4m3"):
        for gran in ("tensor", "row"):
            assert {r["family"] for r in s["rows"] if (r["pair"], r["granularity"]) ==
                    (pair, gran)} == set(vectors.FAMILIES) - {"nan-scale"}, (pair, gran)


def test_gpu_data_mma_sync_validation_run():
    s = json.loads((DATA / "mma_sync_validation.json").read_text())
    assert len(s["families"]) == 12             # nan-scale needs block scales
    assert sum(r["dots"] for r in s["agreement"]) == 3145728
    assert all(r["equal"] == r["dots"] for r in s["agreement"])


def test_gpu_data_paths_summary_records_the_full_run():
    s = json.loads((DATA / "paths_summary.json").read_text())
    tally = {}
    for row in s["agreement"]:
        key = (row["path"], row["preset"])
        d, e = tally.get(key, (0, 0))
        tally[key] = (d + row["dots"], e + row["equal"])
    assert tally[("triton-dot", "hopper-wgmma")] == (589824, 589824)
    assert tally[("triton-dot", "hopper-cublas-fast")] == (589824, 589824)
    assert tally[("cublas", "exact")][0] == 3 * 196608          # tensor, row and block-wise
    assert s["refused"] == [["cublas-fast", "block", "UnitError: torch._scaled_mm refused this "
                             "set: scaled_gemm doesn't support fast accum with 128x128 "
                             "blockwise scaling"]]
