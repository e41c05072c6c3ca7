"""Where the GPU engine's time goes (on the GPU machine): ``gpu.dot`` end to end against its
kernel alone (CUDA events around every whole-dot kernel launch) and the operand preparation,
for hopper-wgmma at K = 32 and K = 4,096; and which call first imports ``cupyx.scipy`` (the
cost ``mxsim run --engine gpu`` pays at start-up).

    PYTHONPATH=. python3 benchmarks/profile_gpu_engine.py [--log2-dots 26]

Prints one line per measurement. Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import importlib.abc
import sys
import time
import traceback

_FIRST_SCIPY: list[str] = []


class _Watch(importlib.abc.MetaPathFinder):
    """Records the stack of the first import of cupyx.scipy (finds nothing itself)."""

    def find_spec(self, name, path=None, target=None):
        if name == "cupyx.scipy" and not _FIRST_SCIPY:
            _FIRST_SCIPY.append("".join(f for f in traceback.format_stack()[:-1]
                                        if "<frozen" not in f))
        return None


def timed_kernels(kernels, log: list[float]) -> None:
    """Wrap every whole-dot kernel handle so each launch is timed by CUDA events."""
    import cupy
    get = kernels._chain_kernel

    def wrapped(name, device):
        fn = get(name, device)

        def call(*args, **kw):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            fn(*args, **kw)
            end.record()
            end.synchronize()
            log.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
        return call
    kernels._chain_kernel = wrapped


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--log2-dots", type=int, default=26)
    args = p.parse_args()
    sys.meta_path.insert(0, _Watch())
    t0 = time.perf_counter()
    import cupy
    print(f"import cupy: {time.perf_counter() - t0:.3f} s", flush=True)
    from mxsim import presets, vectors
    from mxsim.engine import gpu
    from mxsim.engine.fast.operands import Operands
    from mxsim.engine.gpu import kernels
    from mxsim.engine.gpu.array import to_device
    side = 1 << (args.log2_dots // 2)
    for k, m in ((32, side), (4096, 2048)):
        vs = vectors.generate("normal", a_format="e4m3", m=m, n=m, k=k, with_c=False, seed=k)
        spec = presets.get("hopper-wgmma").spec_for(vs)
        t0 = time.perf_counter()
        gpu.dot(spec, vs.subset(slice(0, 8), slice(0, 8)))
        cupy.cuda.Device().synchronize()
        print(f"K={k}: first call (compile or load): {time.perf_counter() - t0:.3f} s")
        if _FIRST_SCIPY:
            print("cupyx.scipy first imported from:\n" + _FIRST_SCIPY[0])
        dvs = to_device(vs)
        best = 1e9
        for _ in range(3):
            t0 = time.perf_counter()
            gpu.dot(spec, vs, device_out=True)
            cupy.cuda.Device().synchronize()
            best = min(best, time.perf_counter() - t0)
        log: list[float] = []
        get = kernels._chain_kernel
        timed_kernels(kernels, log)
        gpu.dot(spec, vs, device_out=True)
        kernels._chain_kernel = get
        t_ops = 1e9
        for _ in range(3):
            t0 = time.perf_counter()
            ops = Operands.of(spec, dvs)
            a = kernels._side(ops.a.take(0), None, False)
            b = kernels._side(ops.b.take(0), None, True)
            kernels.plain_path(spec, a, b)
            cupy.cuda.Device().synchronize()
            t_ops = min(t_ops, time.perf_counter() - t0)
        print(f"K={k} {m}x{m}: gpu.dot {best * 1e3:.2f} ms ({vs.num_dots / best:.3e} dots/s); "
              f"kernel {sum(log) * 1e3:.2f} ms ({vs.num_dots / sum(log):.3e} dots/s, "
              f"{len(log)} launches); operands on device {t_ops * 1e3:.2f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
