"""mxsim.torch on CUDA tensors (the GPU engine, H200) == on CPU tensors (the fast engine).

tests/data/h200/2026-12-02-torch-cuda/ holds what ``python -m gpu.engine.torch_cuda --out DIR``
wrote
on the H200: per unit and recipe, the sha256 of every nn.Linear output of the tiny Llama run
under ``mxsim.torch.emulate`` with CUDA tensors, and each layer's input. Here each layer is
recomputed on the CPU from that input and must hash the same.
"""

import json
from pathlib import Path

from gpu.engine import torch_cuda

DATA = Path(__file__).parents[1] / "data" / "h200" / "2026-12-02-torch-cuda" / "torch_cuda.json"


def test_the_h200_run_covers_the_units_and_agreed_there():
    summary = json.loads(DATA.read_text())
    assert summary["gpu"] == "NVIDIA H200"
    assert [(r["unit"], r["recipe"]) for r in summary["units"]] == list(torch_cuda.UNITS)
    assert all(r["equal"] and len(r["layers"]) == 15 for r in summary["units"])


def test_cpu_recomputation_equals_the_cuda_outputs():
    assert torch_cuda.check(DATA) == []


def test_a_changed_hash_is_found(tmp_path):
    summary = json.loads(DATA.read_text())
    summary["units"][1]["cuda_sha256"] = "0" * 64
    bad = tmp_path / "torch_cuda.json"
    bad.write_text(json.dumps(summary))
    bad.with_suffix(".npz").write_bytes(DATA.with_suffix(".npz").read_bytes())
    (line,) = torch_cuda.check(bad)
    assert line.startswith("hopper-cublas fp8-tensor")
