"""mxsim.torch on CUDA tensors equals mxsim.torch on CPU tensors: a whole model, bit for bit.

    python -m gpu.engine.torch_cuda --out DIR            # on the GPU machine: DIR/torch_cuda.json
    python -m gpu.engine.torch_cuda --check FILE         # on any CPU: replay the CPU side, compare

The tiny Llama of ``mxsim torch-eval`` (``mxsim.torch_eval.models.load("tiny")``: 2 blocks,
width 64, fixed random weights) runs a fixed token sample under :func:`mxsim.torch.emulate`
for a few units and recipes with the model and its inputs on the GPU (CUDA tensors, the GPU
engine). Every nn.Linear's input and output is kept; each layer is then recomputed on the CPU
(CPU tensors, the fast engine, :func:`mxsim.torch.linear`) from the input it saw, and the
outputs of both sides are hashed as bit patterns (sha256). Layer by layer, because the rest of
the model (attention, norms) is torch's own arithmetic, whose bits differ between CUDA and the
CPU. ``--check`` recomputes the CPU side here from the committed inputs and compares it with
the committed CUDA hashes, so CI holds the CUDA-tensor route to the CPU engines without a GPU.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from mxsim import versions

__all__ = ["UNITS", "TOKENS", "forward", "cpu_outputs", "run", "check", "main"]

#: (unit, recipe) pairs run on both devices.
UNITS = (("exact", "none"), ("hopper-cublas", "fp8-tensor"), ("hopper-cublas-fast", "fp8-row"),
         ("blackwell-mxf8f6f4", "mxfp8"), ("blackwell-mxf4nvf4", "nvfp4"))
TOKENS = 24


def _bits(t: Any) -> bytes:
    import torch
    return t.detach().contiguous().cpu().view(
        torch.int32 if t.element_size() == 4 else torch.int16).numpy().tobytes()


def forward(unit: str, recipe: str, device: str, engine: str) -> dict[str, Any]:
    """One emulated forward pass of the tiny model on ``device``: every nn.Linear's input and
    output (CPU copies), the hash of the outputs' bits, routed calls, seconds."""
    import torch

    from mxsim import torch as mtorch
    from mxsim.torch_eval import models

    net, ids, _ = models.load("tiny", tokens=TOKENS)
    net = net.to(device)
    seen: list[tuple[str, Any, Any]] = []
    names = {m: n for n, m in net.named_modules()}

    def hook(module, inp, out):
        seen.append((names[module], inp[0].detach().cpu(), out.detach().cpu()))

    handles = [m.register_forward_hook(hook) for m in net.modules()
               if isinstance(m, torch.nn.Linear)]
    t0 = time.perf_counter()
    with torch.no_grad(), mtorch.emulate(unit=unit, recipe=recipe, engine=engine) as mode:
        net(torch.tensor(ids, dtype=torch.int64, device=device))
    seconds = time.perf_counter() - t0
    for hd in handles:
        hd.remove()
    h = hashlib.sha256()
    for _, _, out in seen:
        h.update(_bits(out))
    return {"sha256": h.hexdigest(), "layers": seen, "net": net.cpu(),
            "calls": dict(getattr(mode, "calls", {})), "seconds": round(seconds, 3),
            "device": device, "engine": engine}


def cpu_outputs(net: Any, layers: list, unit: str, recipe: str) -> str:
    """The sha256 of every layer's output recomputed on the CPU (fast engine) from the
    inputs that layer saw: the same hash as the GPU side when the routes agree."""
    from mxsim import torch as mtorch
    mods = dict(net.named_modules())
    h = hashlib.sha256()
    for name, inp, _ in layers:
        m = mods[name]
        y = mtorch.linear(inp, m.weight.detach(), None if m.bias is None else m.bias.detach(),
                          unit=unit, recipe=recipe, engine="fast")
        h.update(_bits(y))
    return h.hexdigest()


def run(out: Path) -> dict[str, Any]:
    """Every unit on the GPU, each layer recomputed on the CPU from its inputs; the summary
    and the layers' inputs (``torch_cuda.npz``), also written."""
    import numpy as np
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("gpu.engine.torch_cuda: no CUDA device here (use --check on a CPU)")
    rows, arrays = [], {}
    for ui, (unit, recipe) in enumerate(UNITS):
        gpu = forward(unit, recipe, "cuda", "gpu")
        t0 = time.perf_counter()
        cpu = cpu_outputs(gpu["net"], gpu["layers"], unit, recipe)
        rows.append({"unit": unit, "recipe": recipe, "cuda_sha256": gpu["sha256"],
                     "cpu_sha256": cpu, "equal": gpu["sha256"] == cpu,
                     "layers": [n for n, _, _ in gpu["layers"]], "calls": gpu["calls"],
                     "cuda_seconds": gpu["seconds"],
                     "cpu_seconds": round(time.perf_counter() - t0, 3)})
        for li, (_, inp, _) in enumerate(gpu["layers"]):
            arrays[f"u{ui}_l{li}"] = inp.numpy()
        print(f"{unit:22} {recipe:11} {len(gpu['layers'])} layers  cuda/gpu "
              f"{gpu['seconds']:7.3f} s  equal={rows[-1]['equal']}", flush=True)
    summary = {"tool": "gpu/engine/torch_cuda.py", "model": "tiny", "tokens": TOKENS,
               "gpu": torch.cuda.get_device_name(0), "versions": versions.describe(),
               "units": rows}
    out.mkdir(parents=True, exist_ok=True)
    (out / "torch_cuda.json").write_text(json.dumps(summary, indent=1) + "\n")
    np.savez_compressed(out / "torch_cuda.npz", **arrays)
    return summary


def check(path: Path) -> list[str]:
    """Differences between the committed CUDA hashes and the CPU side recomputed here from
    the committed layer inputs (``torch_cuda.npz`` beside ``path``)."""
    import numpy as np
    import torch

    from mxsim.torch_eval import models
    summary = json.loads(path.read_text())
    net = models.load("tiny", tokens=TOKENS)[0]
    bad = []
    with np.load(path.with_suffix(".npz")) as z:
        for ui, row in enumerate(summary["units"]):
            layers = [(n, torch.from_numpy(z[f"u{ui}_l{li}"]), None)
                      for li, n in enumerate(row["layers"])]
            cpu = cpu_outputs(net, layers, row["unit"], row["recipe"])
            if cpu != row["cuda_sha256"]:
                bad.append(f"{row['unit']} {row['recipe']}: CPU {cpu[:12]} != CUDA "
                           f"{row['cuda_sha256'][:12]}")
    return bad


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpu.engine.torch_cuda",
                                description=__doc__.split("\n")[0])
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--out", type=Path, help="run on the GPU machine; write DIR/torch_cuda.json")
    what.add_argument("--check", type=Path, help="replay a committed torch_cuda.json on the CPU")
    args = p.parse_args(argv)
    if args.out:
        summary = run(args.out)
        return 0 if all(r["equal"] for r in summary["units"]) else 1
    bad = check(args.check)
    for line in bad:
        print(line, file=sys.stderr)
    print(f"{args.check}: {'agrees' if not bad else f'{len(bad)} units differ'}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
