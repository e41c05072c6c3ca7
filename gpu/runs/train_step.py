"""Training through exact units on a GPU: the device quantisation against the host's, and a
step's time through exact units beside the same step in plain BF16 (docs/training.md).

    PYTHONPATH=. python3 -m gpu.runs.train_step --out OUT [--model small] [--steps 3]

1. Every operand kind :mod:`mxsim.torch.quantise` takes (MX floor and round-up, NVFP4 1-D and
   2-D, both roles) on CUDA tensors against :func:`mxsim.quantize.training.quantise` on the
   host, on fresh random tensors over 80 binades (seeds from ``--salt``): codes, scales and
   tensor scales compared byte for byte; the random Hadamard transform's FP32 bits likewise.
2. A training step of the model (forward, backward, AdamW) on the GPU: in plain BF16
   (``torch.autocast``), and through the NVFP4 recipe's exact units on the GPU engine; the
   median of ``--steps`` steps after one warm-up step each, and their ratio.

Writes ``OUT/train_step.json`` and prints it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np


def _quantise_checks(salt: int) -> list[dict]:
    import torch

    from mxsim.quantize import training as tr
    from mxsim.torch import quantise as tq
    ops = {"mxfp8": tr.training_recipe("mxfp8").fprop[0],
           "mxfp8-floor": tr.training_recipe("mxfp8-floor").fprop[0],
           "mxfp4": tr.training_recipe("mxfp4").fprop[0],
           "nvfp4": tr.training_recipe("nvfp4").fprop[0],
           "nvfp4-2d": tr.training_recipe("nvfp4").fprop[1]}
    rows = []
    for name, op in ops.items():
        for role in ("a", "b"):
            rng = np.random.default_rng([salt, len(rows)])
            x = (rng.standard_normal((256, 512)) *
                 np.exp2(rng.integers(-40, 40, (256, 1)))).astype(np.float32)
            x = x if role == "a" else np.ascontiguousarray(x.T)
            host = tr.quantise(x, op, role)
            dev = tq.quantise(torch.from_numpy(x).cuda(), op, role)
            same = (dev is not None and np.array_equal(dev.codes, host.codes)
                    and np.array_equal(dev.scale, host.scale)
                    and (host.tensor_scale is None or np.float32(dev.tensor_scale).view(
                        np.uint32) == np.float32(host.tensor_scale).view(np.uint32)))
            rows.append({"op": name, "role": role, "elements": int(x.size),
                         "equal": bool(same)})
    signs = tr.rht_signs(np.random.default_rng([salt, 99]))
    x = np.random.default_rng([salt, 100]).standard_normal((512, 256)).astype(np.float32)
    got = tq.rht(torch.from_numpy(x).cuda(), signs, 0).cpu().numpy()
    rows.append({"op": "rht", "role": "axis 0", "elements": int(x.size),
                 "equal": bool(np.array_equal(got.view(np.uint32),
                                              tr.rht(x, signs, 0).view(np.uint32)))})
    return rows


def _step_seconds(net, ids, steps: int, bf16: bool) -> list[float]:
    import torch
    from torch.nn import functional as F
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3)
    times = []
    for _ in range(steps + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            logits = net(ids[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                                   ids[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times[1:]


def main(argv: list[str] | None = None) -> int:
    import torch

    from mxsim import versions
    from mxsim.torch import training as mt
    from mxsim.train import MODELS, build
    ap = argparse.ArgumentParser(prog="python -m gpu.runs.train_step")
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="small", choices=sorted(MODELS))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--salt", type=int, default=20261206)
    args = ap.parse_args(argv)
    cfg = MODELS[args.model]
    rec = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "versions": versions.describe(), "salt": args.salt,
           "quantise": _quantise_checks(args.salt)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train_step.json").write_text(json.dumps(rec, indent=1) + "\n")   # if cut short
    ids = torch.from_numpy(np.random.default_rng(args.salt).integers(
        0, 80, (cfg.batch, cfg.context + 1))).cuda()
    plain = _step_seconds(build(cfg, 0).cuda(), ids, args.steps, True)
    net = mt.convert(build(cfg, 0).cuda(), "nvfp4", engine="gpu")
    exact = _step_seconds(net, ids, args.steps, False)
    rec["step"] = {"model": cfg.as_dict(), "steps_timed": args.steps,
                   "bf16_s": plain, "nvfp4_units_gpu_s": exact,
                   "ratio": statistics.median(exact) / statistics.median(plain)}
    (out / "train_step.json").write_text(json.dumps(rec, indent=1) + "\n")
    print(json.dumps(rec, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
