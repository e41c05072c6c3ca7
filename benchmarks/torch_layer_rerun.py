"""Run some configurations of the Llama layer again (on the GPU machine), after a warm-up in
the same process, keeping the others from an earlier summary: what a change to one path (the
block-wise scales, say) needs without the whole run's device time.

    PYTHONPATH=. python3 benchmarks/torch_layer_rerun.py --from DIR --out DIR --scales block

The earlier summary's configurations of the other scale granularities are kept as they are
(``gpu.engine.torch_layer --resume``; the summary lists them under ``resumed``); the warm-up
(torch._scaled_mm and mxsim.torch.scaled_mm on a 256 x 1024 x 512 draw of the same scales)
keeps CUDA's, cuBLAS's and the kernels' start-up out of the first configuration's seconds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--from", dest="src", type=Path, required=True, help="earlier summary's DIR")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--scales", required=True, help="the granularity to run again")
    p.add_argument("--budget", type=float, default=200.0)
    p.add_argument("--device", default="cuda", help="torch device (cpu: a dry run)")
    p.add_argument("--engine", default="gpu", help="mxsim engine (fast: a dry run)")
    p.add_argument("--quick", action="store_true", help="the layer's quick shape (a dry run)")
    args = p.parse_args()
    import torch

    import mxsim.torch as mt
    from gpu.engine import torch_layer as tl
    args.out.mkdir(parents=True, exist_ok=True)
    old = json.loads((args.src / "torch_layer.json").read_text())
    old["configs"] = [c for c in old["configs"] if c["scales"] != args.scales]
    (args.out / "torch_layer.json").write_text(json.dumps(old))
    shutil.copy(args.src / "torch_layer.npz", args.out / "torch_layer.npz")
    m, k, n = tl.QUICK
    x, b = tl.activations(1, range(m), k), tl.weights(1, k, range(n // tl.TILE))
    ops = tl.torch_operands(torch, *tl.quantise(x, b, args.scales), args.scales, args.device)
    if args.device == "cuda":
        tl.real_scaled_mm(torch, *ops, torch.float32, False)
    mt.scaled_mm(*ops, out_dtype=torch.float32, engine=args.engine)
    if args.device == "cuda":
        torch.cuda.synchronize()
    return tl.main(["--out", str(args.out), "--resume", "--budget", str(args.budget),
                    "--device", args.device, "--engine", args.engine]
                   + (["--quick"] if args.quick else []))


if __name__ == "__main__":
    sys.exit(main())
