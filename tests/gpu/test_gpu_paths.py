"""GPU paths: live runs where a GPU is present (marked gpu), and what runs everywhere."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gpu.paths import PATHS
from mxsim import presets, vectors
from mxsim.cli import main
from mxsim.engine import fast


def _nvcc() -> str | None:
    return shutil.which("nvcc") or next(
        (str(p) for p in (Path("/usr/local/cuda/bin/nvcc"),) if p.exists()), None)


def test_gpu_paths_mma_sync_source_compiles_for_sm90(tmp_path):
    """The inline-PTX kernels assemble for Hopper (nvcc is on the development machines)."""
    from gpu.hopper import mma_sync

    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("nvcc is not installed here")
    src = tmp_path / "mma.cu"
    src.write_text(mma_sync.source())
    p = subprocess.run([nvcc, "-cubin", "-arch=sm_90", "-o", str(tmp_path / "mma.cubin"),
                        str(src)], capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
    text = mma_sync.source()
    for a in ("e4m3", "e5m2"):
        for b in ("e4m3", "e5m2"):
            for acc in ("f32", "f16"):
                assert f"mma_{a}_{b}_{acc}(" in text
                assert f"mma.sync.aligned.m16n8k32.row.col.{acc}.{a}.{b}.{acc}" in text


def test_gpu_paths_info_without_a_gpu_says_why(capsys):
    rc = main(["gpu", "info", "--json"])
    import json
    info = json.loads(capsys.readouterr().out)
    assert rc == 0 and [r["path"] for r in info["paths"]] == list(PATHS)
    for row in info["paths"]:
        assert row["available"] or (row["reason"] and "\n" not in row["reason"])


def test_gpu_paths_run_unavailable_is_one_line(capsys, tmp_path):
    from gpu import device

    if device.torch_unavailable_reason() is None:
        pytest.skip("a GPU is present: the live tests below cover this machine")
    vin = tmp_path / "in.npz"
    vectors.save(vectors.generate("normal", m=16, n=8, k=32, with_c=False), vin)
    for name in PATHS:
        rc = main(["gpu", "run", "--path", name, str(vin), "-o", str(tmp_path / "o.npz")])
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith(f"mxsim: error: GPU path {name} is unavailable here")
        assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "o.npz").exists()


# -- live, on a GPU ----------------------------------------------------------------------------

def _live(name):
    path = PATHS[name]
    reason = path.unavailable_reason()
    if reason is not None:
        pytest.skip(f"{name} unavailable here: {reason}")
    return path


@pytest.mark.gpu
@pytest.mark.parametrize("name,k,opts", [
    ("wgmma", 32, {}), ("cublas-fast", 256, {}), ("mma-sync", 128, {"c_format": "fp16"}),
    ("triton-dot-scaled", 128, {"scale_format": "e8m0", "block": 32}),
])
def test_gpu_paths_live_match_their_presets(name, k, opts):
    path = _live(name)
    vs = vectors.generate("specials", a_format="e5m2", b_format="e4m3", m=64, n=64, k=k,
                          with_c=bool(opts.get("c_format")), seed=k, **opts)
    res = path.run(vs)
    spec = presets.get(path.preset).spec_for(res)
    np.testing.assert_array_equal(res.d, fast.dot(spec, res))


@pytest.mark.gpu
@pytest.mark.parametrize("name,opts", [
    ("mma-sync", dict(a_format="e5m2", b_format="e5m2", c_format="fp16")),
    ("mma-sync", dict(a_format="e4m3", b_format="e5m2")),
    ("triton-dot", dict(a_format="e4m3", b_format="e4m3")),
    ("triton-dot-scaled", dict(a_format="e2m1", b_format="e2m1", scale_format="e8m0")),
    ("cublas", dict(a_format="e4m3", b_format="e4m3", with_c=False, scale_format="fp32",
                    scale_granularity="row")),
])
def test_gpu_paths_live_run_and_record_provenance(name, opts):
    """Every path runs, repeats bit for bit, and records where it ran."""
    path = _live(name)
    vs = vectors.generate("normal", m=64, n=64, k=128, seed=5, **opts)
    first, second = path.run(vs), path.run(vs)
    np.testing.assert_array_equal(first.d, second.d)
    assert first.extra["path"] == name and first.extra["device"]["gpu"]


@pytest.mark.gpu
@pytest.mark.parametrize("name,fmt,c_format", [
    ("mma-sync-fp16", "fp16", "fp16"), ("mma-sync-bf16", "bf16", "fp32"),
    ("mma-sync-tf32", "tf32", "fp32"), ("triton-dot-fp16", "fp16", "fp16"),
    ("triton-dot-tf32", "tf32", "fp32"), ("cublas-bf16", "bf16", None),
])
def test_gpu_paths_live_16bit_match_their_presets(name, fmt, c_format):
    """The fp16/bf16/tf32 paths against their presets (docs/gpu.md, Hopper 16-bit section)."""
    path = _live(name)
    vs = vectors.generate("specials", a_format=fmt, b_format=fmt, m=64, n=64, k=256, seed=3,
                          with_c=c_format is not None, c_format=c_format or "fp32")
    res = path.run(vs)
    np.testing.assert_array_equal(res.d, fast.dot(presets.get(path.preset).spec_for(res), res))


@pytest.mark.gpu
def test_gpu_paths_live_mma_sync_float_fragment_layouts():
    from gpu.hopper import mma_sync
    _live("mma-sync-fp16")
    rows = mma_sync.layout_check()
    assert rows and all(r["equal"] == r["outputs"] for r in rows)
