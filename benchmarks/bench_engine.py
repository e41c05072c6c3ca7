"""Throughput of the numerics engine against MMA-Sim (PyPI ``mmasim``), same inputs, same run.

    python benchmarks/bench_engine.py [--m 4096] [--n 4096] [--mmasim-tile 128]

1. ``hopper-wgmma`` on M x N K=32 e4m3 dot products (16.8 M by default), in-process, and
   MMA-Sim's ``WGMMA("Hopper", "m64n8k32.f32.e4m3.e4m3")`` on the very same operands (in tiles,
   since MMA-Sim materialises every (m, n, k) product, with the faster of 1 and torch's default
   thread count on a sample); the outputs are compared bit for bit.
2. The same through the command line (``mxsim run``), start-up and file I/O included (best of
   two runs, after one that fills numba's on-disk cache), and the CLI's fixed cost (``mxsim
   run`` on 64 dots).
3. ``exact`` and ``blackwell-mxf8f6f4`` (a block-scaled preset) throughput, and
   ``hopper-wgmma`` on the numpy fallback (no numba) against the compiled kernel.

Prints a table with dots/s and the ratio mxsim / MMA-Sim. Speed is measured here, never
asserted in tests.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _timing import best_of, versions_line  # benchmarks/ is on sys.path when run as a script

from mxsim import presets, vectors
from mxsim.engine import fast


def _mmasim(vs, tile: int):
    import torch
    from mmasim.nv_ptx import sim

    op = sim.WGMMA("Hopper", "m64n8k32.f32.e4m3.e4m3")
    a = torch.from_numpy(vs.a).view(torch.float8_e4m3fn)
    b = torch.from_numpy(vs.b).view(torch.float8_e4m3fn)
    out = np.empty((vs.m, vs.n), np.uint32)
    for i in range(0, vs.m, tile):
        for j in range(0, vs.n, tile):
            c = torch.zeros((min(tile, vs.m - i), min(tile, vs.n - j)))
            d = op(a[i:i + tile], b[:, j:j + tile], c)
            out[i:i + tile, j:j + tile] = d.view(torch.int32).numpy().view(np.uint32)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--m", type=int, default=4096)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--mmasim-tile", type=int, default=128,
                   help="MMA-Sim call size; 128 was its fastest here (default: %(default)s)")
    args = p.parse_args()
    import torch
    rows = []
    vs = vectors.generate("normal", a_format="e4m3", m=args.m, n=args.n, k=32, with_c=False,
                          seed=1)
    spec = presets.get("hopper-wgmma").spec_for(vs)
    # MMA-Sim gets its faster torch thread count here: on a machine shared with other work,
    # torch's default threads can run it many times slower than one thread does.
    sample = vs.subset(slice(0, min(vs.m, 2 * args.mmasim_tile)))
    speeds = {}
    for threads in sorted({1, torch.get_num_threads()}):
        torch.set_num_threads(threads)
        speeds[threads] = best_of(1, lambda: _mmasim(sample, args.mmasim_tile))[0]
    torch.set_num_threads(min(speeds, key=speeds.get))
    print(versions_line())
    print(f"numba kernel: {'yes' if fast.kernel_available() else 'no (numpy path)'}; "
          f"MMA-Sim on torch threads: {torch.get_num_threads()} (of "
          + ", ".join(f"{t}: {sample.num_dots / s:.3g} dots/s" for t, s in speeds.items())
          + f" on {sample.num_dots:,} dots)", flush=True)
    fast.dot(spec, vs.subset(slice(0, 8), slice(0, 8)))              # compile / warm up
    t_ours, d_ours = best_of(2, lambda: fast.dot(spec, vs))
    t_theirs, d_theirs = best_of(1, lambda: _mmasim(vs, args.mmasim_tile))
    agree = np.array_equal(d_ours, d_theirs)
    rows.append(("hopper-wgmma, in-process", vs.num_dots, t_ours, t_theirs, agree))

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        tiny_src, tiny_dst = Path(tmp) / "tiny.npz", Path(tmp) / "tiny_out.npz"
        vectors.save(vs, src)
        vectors.save(vs.subset(slice(0, 8), slice(0, 8)), tiny_src)

        def cli(a, b):
            cmd = [sys.executable, "-m", "mxsim", "run", "--unit", "hopper-wgmma", str(a),
                   "-o", str(b)]
            return subprocess.run(cmd, check=True, capture_output=True)
        cli(tiny_src, tiny_dst)                        # numba's on-disk cache filled
        t_start, _ = best_of(3, lambda: cli(tiny_src, tiny_dst))
        t_cli, _ = best_of(2, lambda: cli(src, dst))
        cli_ok = np.array_equal(vectors.load(dst).d, d_ours)
    rows.append(("hopper-wgmma, `mxsim run` (CLI)", vs.num_dots, t_cli, t_theirs, cli_ok))

    for name, kw in (("exact", dict(a_format="e4m3", scale_format="e8m0")),
                     ("blackwell-mxf8f6f4", dict(a_format="e4m3", scale_format="e8m0"))):
        vs2 = vectors.generate("normal", m=1024, n=1024, k=32, seed=2, **kw)
        spec2 = presets.get(name).spec_for(vs2)
        fast.dot(spec2, vs2.subset(slice(0, 8), slice(0, 8)))
        t2, _ = best_of(2, lambda s=spec2, v=vs2: fast.dot(s, v))
        rows.append((f"{name}, in-process (K=32, MX scales)", vs2.num_dots, t2, None, None))

    # The numpy fallback (what runs without numba) against the kernel, on the same 1M dots.
    vs3 = vs.subset(slice(0, max(1, (1 << 20) // args.n)))
    t_kernel, d_kernel = best_of(2, lambda: fast.dot(spec, vs3))
    t_numpy, d_numpy = best_of(1, lambda: fast.dot(spec, vs3, kernel=False))
    rows.append(("hopper-wgmma, numpy fallback (no numba)", vs3.num_dots, t_numpy, None,
                 np.array_equal(d_numpy, d_kernel)))

    print(f"\n{'what':48} {'dots':>10} {'mxsim dots/s':>14} {'MMA-Sim dots/s':>15} "
          f"{'ratio':>7}  bit-equal")
    for what, dots, t, t_peer, ok in rows:
        peer = f"{dots / t_peer:15.3e}" if t_peer else f"{'-':>15}"
        ratio = f"{t_peer / t:7.1f}" if t_peer else f"{'-':>7}"
        print(f"{what:48} {dots:>10} {dots / t:14.3e} {peer} {ratio}  "
              f"{'-' if ok is None else ok}")
    print(f"\nCLI start-up (`mxsim run` on 64 dots, numba's cache warm): {t_start:.2f} s; "
          f"CLI / MMA-Sim on {vs.num_dots:,} dots: {t_theirs / t_cli:.1f}x; numpy fallback "
          f"{t_numpy / t_kernel:.1f}x slower than the kernel")
    return 0


if __name__ == "__main__":
    sys.exit(main())
