"""On the GPU machine: the whole-dot kernel (chain.cu) == the step kernel == the CPU fast engine,
bit for bit, on a few units of every kind it takes (a smoke test before the full
``python -m gpu.engine.check``). Prints one line per case; exit 1 on a difference.

    PYTHONPATH=. python3 benchmarks/gpu_whole_smoke.py
"""

from __future__ import annotations

import sys
import time

import numpy as np

from mxsim import presets, vectors
from mxsim.engine import fast, gpu
from mxsim.engine.fast import fused

CASES = [
    ("hopper-wgmma", dict(a_format="e4m3"), 32 * 3, True),
    ("hopper-wgmma", dict(a_format="e5m2", b_format="e4m3", c_format="fp16"), 64, True),
    ("hopper-cublas", dict(a_format="e4m3"), 32 * 9, True),
    ("hopper-cublas-fast", dict(a_format="e4m3"), 32 * 5, False),
    ("blackwell-mxf8f6f4", dict(a_format="e2m1", scale_format="e8m0", block=32), 64, True),
    ("blackwell-mxf8f6f4", dict(a_format="e4m3", scale_format="e8m0", block=32), 96, False),
    ("ada-mma-f8", dict(a_format="e4m3"), 64, True),
    ("hopper-mma-f16", dict(a_format="fp16"), 64, True),
]


def main() -> int:
    bad = 0
    for family in ("normal", "specials", "cancellation"):
        for name, opts, k, with_c in CASES:
            fam = "nan-scale" if family == "specials" and "scale_format" in opts else family
            vs = vectors.generate(fam, m=37, n=70, k=k, with_c=with_c, seed=k, **opts)
            spec = presets.get(name).spec_for(vs)
            t0 = time.perf_counter()
            whole = gpu.dot(spec, vs)
            dt = time.perf_counter() - t0
            step = gpu.dot(spec, vs, whole=False)
            cpu = fast.dot(spec, vs)
            ok = np.array_equal(whole, cpu) and np.array_equal(step, cpu)
            bad += not ok
            print(f"{'ok ' if ok else 'BAD'} {name:20} {family:12} {vs.a_format}x{vs.b_format} "
                  f"K={k} C={with_c} fused={fused.applies(spec)} {dt:.3f} s", flush=True)
    print("smoke:", "PASS" if not bad else f"{bad} FAILED")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
