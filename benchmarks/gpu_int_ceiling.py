"""The GPU's integer ceiling, measured: 32-bit multiply-adds per second on every SM (issue 39).

    PYTHONPATH=. python3 benchmarks/gpu_int_ceiling.py [--json PATH]

A CuPy kernel runs, in each of enough threads to fill the GPU, eight independent chains of
``x = x * a + b`` on int32 (one IMAD instruction each, the engine kernels' commonest), and
writes the results so that nothing is optimised away. IMADs per second = threads x iterations x
8 / seconds (CUDA events, best of three). The GPU engine's products per second divided by this
rate is how many integer instructions each product may take at the ceiling. Without CuPy or a
GPU it exits 2 with one line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SOURCE = r"""
extern "C" __global__ void imad_chains(const int *seed, int iters, int *out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int a = seed[0] | 1, b = seed[1];
    int x0 = t, x1 = t + 1, x2 = t + 2, x3 = t + 3, x4 = t + 4, x5 = t + 5, x6 = t + 6,
        x7 = t + 7;
    for (int i = 0; i < iters; ++i) {
        x0 = x0 * a + b; x1 = x1 * a + b; x2 = x2 * a + b; x3 = x3 * a + b;
        x4 = x4 * a + b; x5 = x5 * a + b; x6 = x6 * a + b; x7 = x7 * a + b;
    }
    out[t] = x0 ^ x1 ^ x2 ^ x3 ^ x4 ^ x5 ^ x6 ^ x7;
}
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", type=Path, help="write the figure here")
    args = p.parse_args()
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:                  # no CuPy, or no device
        print(f"gpu_int_ceiling: no CUDA device or CuPy here ({type(exc).__name__})",
              file=sys.stderr)
        return 2
    kernel = cupy.RawKernel(SOURCE, "imad_chains")
    props = cupy.cuda.runtime.getDeviceProperties(0)
    sms = props["multiProcessorCount"]
    threads, blocks, iters = 256, sms * 32, 1 << 14
    seed = cupy.asarray([3, 7], cupy.int32)
    out = cupy.empty(threads * blocks, cupy.int32)
    kernel((blocks,), (threads,), (seed, cupy.int32(16), out))
    best = None
    for _ in range(3):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        kernel((blocks,), (threads,), (seed, cupy.int32(iters), out))
        stop.record()
        stop.synchronize()
        ms = cupy.cuda.get_elapsed_time(start, stop)
        best = ms if best is None else min(best, ms)
    rate = threads * blocks * iters * 8 / (best / 1e3)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    record = dict(command="PYTHONPATH=. python3 benchmarks/gpu_int_ceiling.py --json PATH",
                  device=name, sms=sms, threads=threads * blocks, iterations=iters,
                  seconds=best / 1e3, imad_per_s=rate, checksum=int(out[:64].sum()))
    print(f"{name}: {sms} SMs, {rate:.3e} int32 multiply-adds/s ({best:.2f} ms)")
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
