"""Where ``mxsim.torch.scaled_mm`` spends its time on the Llama-3-8B down projection (on the GPU
machine): one warm call per scale granularity under cProfile, with every whole-dot kernel
launch timed by CUDA events, so the kernels' share and the rest (operand preparation, the
epilogue, conversions) can be told apart.

    PYTHONPATH=. python3 benchmarks/profile_torch_layer.py [--out FILE] [--quick]

Prints, per granularity, the call's seconds, the kernels' seconds and the cProfile lines that
take the most cumulative time. Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time

from profile_gpu_engine import timed_kernels  # benchmarks/ is on sys.path as a script


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", help="also write the report here")
    p.add_argument("--quick", action="store_true", help="the layer's quick shape")
    args = p.parse_args()
    import torch

    import mxsim.torch as mt
    from gpu.engine import torch_layer as tl
    from mxsim.engine.gpu import kernels
    m, k, n = tl.QUICK if args.quick else tl.SHAPE
    seed = 20261206
    x = tl.activations(seed, range(m), k)
    b = tl.weights(seed, k, range(n // tl.TILE))
    lines = [f"{torch.cuda.get_device_name()}; shape M={m} K={k} N={n}"]
    for gran in tl.GRANULARITIES:
        ops = tl.torch_operands(torch, *tl.quantise(x, b, gran), gran, "cuda")
        mt.scaled_mm(*ops, out_dtype=torch.float32, engine="gpu")        # warm
        torch.cuda.synchronize()
        log: list[float] = []
        get = kernels._chain_kernel
        timed_kernels(kernels, log)
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        mt.scaled_mm(*ops, out_dtype=torch.float32, engine="gpu")
        torch.cuda.synchronize()
        prof.disable()
        secs = time.perf_counter() - t0
        kernels._chain_kernel = get
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(28)
        lines += [f"\n== {gran}: {secs:.3f} s (under cProfile), whole-dot kernels "
                  f"{sum(log):.3f} s in {len(log)} launches", text.getvalue()]
    report = "\n".join(lines)
    print(report)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
