"""Throughput of the GPU engine against the CPU fast engine and MMA-Sim, same inputs, same run.

    python benchmarks/bench_gpu_engine.py [--json PATH] [--log2-dots 26] [--quick]

On a machine with CuPy and an NVIDIA GPU (the H200 of issue 18):

1. ``hopper-wgmma``, K = 32, e4m3: the GPU engine on 2**26 dots (8192 x 8192 by default); the
   CPU fast engine (numba, every core) on 2**22 of them; MMA-Sim's ``WGMMA("Hopper",
   "m64n8k32.f32.e4m3.e4m3")`` on 128 x 128 (PyPI ``mmasim``, if installed: it is not on the
   device image; the lead carries its wheel). Outputs are compared bit for bit on the dots both
   computed.
2. ``hopper-wgmma`` chained to K = 4,096 (C fed back every 32): GPU 2048 x 2048, CPU 128 x 128,
   MMA-Sim 16 x 16 (its instruction called 128 times, C fed back).
3. A 4096 x 4096 x 4096 ``hopper-cublas`` GEMM (e4m3, no C) on the GPU engine; the CPU's time
   extrapolated from 16 rows (said so in the row).

Each GPU row is measured twice: with the whole-dot kernel (``chain.cu``, the engine now) and
with the step kernel and CuPy passes (the engine before, ``whole=False``), compared bit for
bit. 4. ``mxsim run`` in a fresh process with ``--engine gpu`` and ``--engine fast`` on 10**5,
10**6 and 10**7 dots (start-up and file I/O included).

GPU times include the operands' upload and the kernels, synchronised (``device_out=True``:
D stays on the GPU; its download is timed apart). Prints a table; ``--json`` writes the rows.
Speed is measured here, never asserted in tests. Without a GPU it exits 2 with one line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from _timing import best_of, versions_line  # benchmarks/ is on sys.path when run as a script

from mxsim import presets, vectors
from mxsim.engine import fast


def _gpu(spec, vs, repeat: int = 2, whole: bool = True):
    """Seconds of the GPU engine on ``vs`` (synchronised) and D as numpy codes; ``whole``:
    the whole-dot kernel where it applies, else the step kernel and CuPy passes."""
    import cupy

    from mxsim.engine import gpu
    gpu.dot(spec, vs.subset(slice(0, 8), slice(0, 8)), whole=whole)   # compile / warm up
    cupy.cuda.Device().synchronize()

    def once():
        d = gpu.dot(spec, vs, device_out=True, whole=whole)
        cupy.cuda.Device().synchronize()
        return d
    t, d = best_of(repeat, once)
    t0 = time.perf_counter()
    host = cupy.asnumpy(d)
    return t, host, time.perf_counter() - t0


def _mmasim_available() -> str | None:
    try:
        import mmasim  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        return f"MMA-Sim not measured: {exc.name} is not installed"
    return None


def _mmasim(vs, tile: int = 128) -> np.ndarray:
    """MMA-Sim's Hopper WGMMA on ``vs``: K = 32 per call, the FP32 D fed back as C."""
    import torch
    from mmasim.nv_ptx import sim

    op = sim.WGMMA("Hopper", "m64n8k32.f32.e4m3.e4m3")
    a = torch.from_numpy(vs.a).view(torch.float8_e4m3fn)
    b = torch.from_numpy(vs.b).view(torch.float8_e4m3fn)
    out = np.empty((vs.m, vs.n), np.uint32)
    for i in range(0, vs.m, tile):
        for j in range(0, vs.n, tile):
            c = torch.zeros((min(tile, vs.m - i), min(tile, vs.n - j)))
            for k0 in range(0, vs.k, 32):
                c = op(a[i:i + tile, k0:k0 + 32], b[k0:k0 + 32, j:j + tile], c)
            out[i:i + tile, j:j + tile] = c.view(torch.int32).numpy().view(np.uint32)
    return out


def _row(what, dots, seconds, ratio=None, equal=None) -> dict:
    return dict(what=what, dots=int(dots), seconds=seconds, dots_per_s=dots / seconds,
                ratio=ratio, equal=equal)


def _compare(name: str, vs, cpu_rows: int, peer_rows: int, no_peer: str | None) -> list[dict]:
    """GPU on ``vs``; CPU on its first ``cpu_rows`` rows; MMA-Sim on a peer_rows corner."""
    spec = presets.get(name).spec_for(vs)
    t_gpu, d_gpu, t_down = _gpu(spec, vs)
    cpu_vs = vs.subset(slice(0, cpu_rows))
    fast.dot(spec, cpu_vs.subset(slice(0, 8), slice(0, 8)))
    t_cpu, d_cpu = best_of(1, lambda: fast.dot(spec, cpu_vs))
    r_gpu, r_cpu = vs.num_dots / t_gpu, cpu_vs.num_dots / t_cpu
    rows = [_row(f"{name} K={vs.k}, gpu engine", vs.num_dots, t_gpu,
                 f"gpu/fast {r_gpu / r_cpu:.1f}x", bool(np.array_equal(d_gpu[:cpu_rows], d_cpu))),
            _row(f"{name} K={vs.k}, fast engine (CPU, {os.cpu_count()} cores)", cpu_vs.num_dots,
                 t_cpu)]
    rows[0]["download_s"] = t_down
    t_step, d_step, _ = _gpu(spec, vs, whole=False)
    rows.insert(1, _row(f"{name} K={vs.k}, gpu engine, step kernel (before)", vs.num_dots,
                        t_step, f"whole/step {t_step / t_gpu:.1f}x",
                        bool(np.array_equal(d_step, d_gpu))))
    if no_peer is None:
        peer_vs = vs.subset(slice(0, peer_rows), slice(0, peer_rows))
        t_peer, d_peer = best_of(1, lambda: _mmasim(peer_vs))
        rows[0]["ratio"] += f"; gpu/MMA-Sim {r_gpu / (peer_vs.num_dots / t_peer):.0f}x"
        rows.append(_row(f"{name} K={vs.k}, MMA-Sim (CPU)", peer_vs.num_dots, t_peer,
                         equal=bool(np.array_equal(d_peer, d_gpu[:peer_rows, :peer_rows]))))
    return rows


def _cli_rows(quick: bool) -> list[dict]:
    """``mxsim run`` (a fresh process each: start-up, file I/O, upload included) with
    ``--engine gpu`` and ``--engine fast`` on 10**5 .. 10**7 hopper-wgmma K=32 dots; the
    outputs compared bit for bit. Best of two runs after one that fills the caches."""
    import subprocess
    import tempfile
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for log10 in (4, 5) if quick else (5, 6, 7):
            side = int(round(10 ** (log10 / 2)))
            vs = vectors.generate("normal", a_format="e4m3", m=side, n=side, k=32,
                                  with_c=False, seed=10 + log10, allow_large=True)
            src = Path(tmp) / f"in{log10}.npz"
            vectors.save(vs, src)
            outs, secs = {}, {}
            for engine in ("gpu", "fast"):
                dst = Path(tmp) / f"{engine}{log10}.npz"
                cmd = [sys.executable, "-m", "mxsim", "run", "--unit", "hopper-wgmma",
                       "--engine", engine, "--allow-large", str(src), "-o", str(dst)]
                subprocess.run(cmd, check=True, capture_output=True)

                def once(cmd=cmd):
                    subprocess.run(cmd, check=True, capture_output=True)
                secs[engine], _ = best_of(2, once)
                outs[engine] = vectors.load(dst, allow_large=True).d
            equal = bool(np.array_equal(outs["gpu"], outs["fast"]))
            rows.append(_row("`mxsim run` K=32, --engine gpu (process)", vs.num_dots,
                             secs["gpu"], f"gpu/fast {secs['fast'] / secs['gpu']:.2f}x", equal))
            rows.append(_row("`mxsim run` K=32, --engine fast (process)", vs.num_dots,
                             secs["fast"]))
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", type=Path, help="write the rows here")
    p.add_argument("--log2-dots", type=int, default=26, help="K=32 batch: 2**N dots")
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    args = p.parse_args()
    from mxsim.engine import gpu
    if not gpu.available():
        print("bench_gpu_engine: no CUDA device or CuPy here; run it on the GPU machine",
              file=sys.stderr)
        return 2
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(0)
    device = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    no_peer = _mmasim_available()
    q = args.quick
    log2 = 12 if q else args.log2_dots
    vs = vectors.generate("normal", a_format="e4m3", m=1 << (log2 // 2), n=1 << (log2 - log2 // 2),
                          k=32, with_c=False, seed=1, allow_large=True)
    rows = _compare("hopper-wgmma", vs, 64 if q else (1 << 22) // vs.n, 64 if q else 128,
                    no_peer)
    print(rows[0], flush=True)
    chain = vectors.generate("normal", a_format="e4m3", m=128 if q else 2048,
                             n=128 if q else 2048, k=4096, with_c=False, seed=2,
                             allow_large=True)
    rows += _compare("hopper-wgmma", chain, 16 if q else 128, 16, no_peer)
    print(rows[-1], flush=True)
    n = 512 if q else 4096
    gemm = vectors.generate("normal", a_format="e4m3", m=n, n=n, k=n, with_c=False, seed=3,
                            allow_large=True)
    spec = presets.get("hopper-cublas").spec_for(gemm)
    t_gemm, d_gemm, _ = _gpu(spec, gemm, repeat=1)
    part = gemm.subset(slice(0, 16))
    t_part, d_part = best_of(1, lambda: fast.dot(spec, part))
    rows.append(_row(f"hopper-cublas {n}x{n}x{n} GEMM, gpu engine", gemm.num_dots, t_gemm,
                     f"fast (CPU) extrapolated from 16 rows: {t_part * n / 16:.0f} s",
                     bool(np.array_equal(d_gemm[:16], d_part))))
    rows += _cli_rows(q)
    out = dict(device=device, versions=versions_line().lstrip("# "),
               note=no_peer or "MMA-Sim on the CPU of the same machine", rows=rows)
    print(f"\n{device}; {out['versions']}\n{out['note']}")
    print(f"{'what':58} {'dots':>12} {'seconds':>9} {'dots/s':>10}  ratio / bit-equal")
    for r in rows:
        print(f"{r['what']:58} {r['dots']:>12,} {r['seconds']:9.3g} {r['dots_per_s']:10.3g}  "
              f"{r['ratio'] or ''} {'' if r['equal'] is None else 'equal=' + str(r['equal'])}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
