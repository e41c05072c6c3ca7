"""gpu/engine/torch_layer.py: the Llama-layer check of torch._scaled_mm against mxsim.torch.

Without a GPU the script's whole path runs on the CPU at a small shape, with an api-level
stand-in (``mxsim.matmul`` on the codes, the epilogue in numpy FP32, torch's own bf16 cast) in
place of ``torch._scaled_mm``; the replay that CI runs on the committed H200 sample is the same
:func:`gpu.engine.torch_layer.replay`. Once the device run's files are committed
(tests/data/h200/2026-12-02-torch/), the replay holds mxsim.torch equal to the real rows.
"""

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import mxsim  # noqa: E402
from gpu.engine import torch_layer as tl  # noqa: E402

REAL = Path(__file__).parents[1] / "data" / "h200" / "2026-12-02-torch"
SMALL = ["--shape", "4", "512", "256", "--engine", "fast", "--device", "cpu", "--seed", "7"]


def _stand_in(torch_mod, a, b, sa, sb, out_dtype, fast, flip=False):
    """torch._scaled_mm's stand-in on a CPU: api-level mxsim on the codes, no mxsim.torch."""
    sa_n = np.ascontiguousarray(sa.numpy())
    sb_n = np.ascontiguousarray(sb.numpy())
    block = sa_n.ndim == 2 and sa_n.shape[1] != 1
    if block and fast:
        raise RuntimeError("scaled_gemm doesn't support fast accum with 128x128 blockwise scaling")
    ca = a.view(torch.uint8).numpy()
    cb = np.ascontiguousarray(b.view(torch.uint8).numpy())
    if sa_n.size == 1:
        sa_n, sb_n = sa_n.reshape(()), sb_n.reshape(())
    if fast:
        d = mxsim.matmul(ca, cb, unit="hopper-cublas-fast").view(np.float32)
        d = ((sa_n * sb_n) * d + np.float32(0)) if sa_n.ndim == 0 else (d * sb_n) * sa_n
        bits = d.astype(np.float32).view(np.uint32)
    else:
        unit = "hopper-cublas-blockwise" if block else "hopper-cublas-rowwise"
        bits = mxsim.matmul(ca, cb, unit=unit, a_scale=sa_n, b_scale=sb_n, scale_format="fp32",
                            block=128 if block else None)
    if flip:
        bits = bits.copy()
        bits[1, 2] ^= np.uint32(1 << 20)
    out = torch.from_numpy(bits.view(np.int32).copy()).view(torch.float32)
    return out.to(out_dtype)


def test_torch_layer_runs_every_configuration_on_cpu(tmp_path, monkeypatch):
    monkeypatch.setattr(tl, "real_scaled_mm", _stand_in)
    assert tl.main(SMALL + ["--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "torch_layer.json").read_text())
    arrays = np.load(tmp_path / "torch_layer.npz")
    recs = {c["key"]: c for c in summary["configs"]}
    assert list(recs) == [tl.key(*c) for c in tl.configs()]
    assert summary["shape"] == {"m": 4, "k": 512, "n": 256} and summary["rows"][0] == 0
    for name, rec in recs.items():
        if name.startswith("block-fast"):
            assert "fast accum" in rec["torch_refused"]
            assert "refuses fast accumulation" in rec["mxsim_refused"]
            continue
        assert rec["mismatches"] == 0 and rec["dots"] == 4 * 256, name
        assert rec["torch_sha256"] == rec["mxsim_sha256"] and rec["torch_repeat_equal"]
        assert arrays[f"{name}/real"].shape == (4, 256)
    assert recs["row-fast-bf16"]["mxsim_unit"] == "hopper-cublas-fast+col-row"
    assert recs["tensor-nofast-fp32"]["mxsim_unit"] == "hopper-cublas-rowwise"
    replayed = tl.replay(summary, arrays)
    assert len(replayed) == 10 and all(e == t == 2 * 256 for e, t in replayed.values())
    table = tl.figures(tmp_path)["torch:layer"].splitlines()
    assert len(table) == 2 + 12 and "| row | on | bf16 | ran | `hopper-cublas-fast+col-row` | " \
        "1,024 | 0 |" in table[5]
    assert "refused: scaled_gemm doesn't support fast accum" in table[7]


def test_torch_layer_figures_in_the_doc_are_current():
    """docs/torch.md's table is what the committed run gives (or says it has not run)."""
    assert tl.render_doc(check=True) == 0


def test_torch_layer_reports_a_mismatch_and_replay_finds_it(tmp_path, monkeypatch):
    def flipped(*args):
        return _stand_in(*args, flip=True)
    monkeypatch.setattr(tl, "real_scaled_mm", flipped)
    assert tl.main(SMALL + ["--out", str(tmp_path)]) == 1
    summary = json.loads((tmp_path / "torch_layer.json").read_text())
    rec = next(c for c in summary["configs"] if c["key"] == "row-nofast-fp32")
    assert rec["mismatches"] == 1 and rec["first_mismatches"][0][:2] == [1, 2]
    assert rec["torch_sha256"] != rec["mxsim_sha256"]
    replayed = tl.replay(summary, np.load(tmp_path / "torch_layer.npz"),
                         keys={"row-nofast-fp32"})
    equal, total = replayed["row-nofast-fp32"]
    assert total - equal == 1


def test_torch_layer_one_failing_configuration_keeps_the_others(tmp_path, monkeypatch):
    def broken(torch_mod, a, b, sa, sb, out_dtype, fast):
        if out_dtype == torch.float32:
            raise ValueError("boom")
        return _stand_in(torch_mod, a, b, sa, sb, out_dtype, fast)
    monkeypatch.setattr(tl, "real_scaled_mm", broken)
    assert tl.main(SMALL + ["--out", str(tmp_path)]) == 0
    recs = json.loads((tmp_path / "torch_layer.json").read_text())["configs"]
    assert sum("error" in r for r in recs) == 6 and sum(r.get("mismatches") == 0
                                                        for r in recs) == 5
    monkeypatch.setattr(tl, "real_scaled_mm", _stand_in)       # --resume runs the rest only
    assert tl.main(SMALL + ["--out", str(tmp_path), "--resume"]) == 0
    summary = json.loads((tmp_path / "torch_layer.json").read_text())
    assert len(summary["resumed"]) == 6 and all("error" not in r for r in summary["configs"])
    arrays = np.load(tmp_path / "torch_layer.npz")
    assert all(e == t for e, t in tl.replay(summary, arrays).values())


def test_torch_layer_sample_redraws_what_the_full_draw_gives():
    """Rows and column tiles drawn alone equal the full draw, and quantising the sample (row 0
    and tile 0 included) gives the full tensor's codes and scales at those places."""
    seed, m, k, n = 11, 16, 512, 512
    rows, tiles = tl.sample(seed, m, n)
    x, b = tl.activations(seed, range(m), k), tl.weights(seed, k, range(n // tl.TILE))
    xs, bs = tl.activations(seed, rows, k), tl.weights(seed, k, tiles)
    cols = np.concatenate([np.arange(t * tl.TILE, (t + 1) * tl.TILE) for t in tiles])
    np.testing.assert_array_equal(xs, x[rows])
    np.testing.assert_array_equal(bs, b[:, cols])
    for gran in tl.GRANULARITIES:
        ca, sa, cb, sb = tl.quantise(x, b, gran)
        ca2, sa2, cb2, sb2 = tl.quantise(xs, bs, gran)
        np.testing.assert_array_equal(ca2, ca[rows])
        np.testing.assert_array_equal(cb2, cb[:, cols])
        if gran == "tensor":
            assert sa2 == sa and sb2 == sb
    assert np.abs(x).max() == tl.X_PLANT and np.abs(b).max() == np.float32(tl.W_PLANT)


def test_torch_layer_bad_shape_is_refused(capsys):
    assert tl.main(["--out", "/nonexistent", "--shape", "4", "500", "256"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_torch_layer_h200_sample_replays_bit_for_bit():
    """The H200 run (python -m gpu.engine.torch_layer on the Llama layer): mxsim.torch equals
    torch._scaled_mm on every configuration torch ran, and the CPU replay of the sample agrees
    with the recorded rows."""
    if not (REAL / "torch_layer.json").exists():
        pytest.skip("the H200 run of gpu/engine/torch_layer.py is not committed yet")
    summary = json.loads((REAL / "torch_layer.json").read_text())
    ran = [c for c in summary["configs"] if "torch_sha256" in c]
    assert ran and all(c["mismatches"] == 0 and c["mxsim_sha256"] == c["torch_sha256"]
                       for c in ran)
    replayed = tl.replay(summary, np.load(REAL / "torch_layer.npz"))
    assert set(replayed) == {c["key"] for c in ran}
    assert all(e == t for e, t in replayed.values())


@pytest.mark.parametrize("run", ["2026-12-06-torch", "2026-12-06-torch-pack",
                                 "2026-12-06-torch-block", "2026-12-06-torch-warm"])
def test_torch_layer_h100_whole_dot_run_replays_bit_for_bit(run):
    """The H100 runs with the whole-dot kernels (issue 39; the second with the sides packed on
    the device; the third the block-wise configurations again with fma.cu, the others resumed
    from the second; the fourth all of them after the tool's warm-up): the same
    configurations, the same output hashes as the H200 run, and the sample replays on the
    CPU."""
    h100 = REAL.parents[1] / "h100" / run
    summary = json.loads((h100 / "torch_layer.json").read_text())
    old = json.loads((REAL / "torch_layer.json").read_text())
    ran = [c for c in summary["configs"] if "torch_sha256" in c]
    assert len(ran) == 10 and all(c["mismatches"] == 0 for c in ran)
    assert {c["key"]: c["mxsim_sha256"] for c in ran} == {
        c["key"]: c["mxsim_sha256"] for c in old["configs"] if "torch_sha256" in c}
    replayed = tl.replay(summary, np.load(h100 / "torch_layer.npz"))
    assert all(e == t for e, t in replayed.values())
