"""Throughput of the numerics engine against MMA-Sim (PyPI ``mmasim``), same inputs, same run.

    python benchmarks/bench_engine.py [--m 4096] [--n 4096] [--mmasim-tile 128]

1. ``hopper-wgmma`` on M x N K=32 e4m3 dot products (16.8 M by default), in-process, and
   MMA-Sim's ``WGMMA("Hopper", "m64n8k32.f32.e4m3.e4m3")`` on the very same operands (in tiles,
   since MMA-Sim materialises every (m, n, k) product, with the faster of 1 and torch's default
   thread count on a sample); the outputs are compared bit for bit.
2. The same through the command line (``mxsim run``), start-up and file I/O included (best of
   two runs, after one that fills numba's on-disk cache; the files in /dev/shm where there is
   one), and the CLI's fixed cost (``mxsim run`` on 64 dots) beside numba's own (its import
   and the first call of a trivial cached function, in a fresh process); then ``mxsim run``
   on 8192 x 8192 dots (``--cli-big``), with the output in /dev/shm and on the disk, against
   MMA-Sim's rate measured in step 1.
3. ``exact`` and ``blackwell-mxf8f6f4`` (a block-scaled preset) throughput, and
   ``hopper-wgmma`` on the numpy fallback (a process without numba: numpy's float64 step,
   ``engine.wide``), on numpy's integer step (the fallback before it) and on the step kernel with
   its numpy passes (the engine before the whole-dot kernel), against the whole-dot kernel.
4. The ceiling: the step's arithmetic alone (products, maximum, alignment, exact sum; no
   rounding, no special values, no I/O) in a bare numba loop on the same operands and cores.
5. Products/s in-process at K = 16 .. 4096 (``--json`` writes every row and the sweep).

Prints a table with dots/s and the ratio mxsim / MMA-Sim. Speed is measured here, never
asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _timing import best_of, memory_dir, versions_line  # benchmarks/ is on sys.path

from mxsim import presets, vectors
from mxsim.engine import fast
from mxsim.engine.fast.paths import INTEGER_STEP


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
    p.add_argument("--json", type=Path, help="also write the rows here (a record)")
    p.add_argument("--cli-big", type=int, default=8192, metavar="SIDE",
                   help="also `mxsim run` on SIDE x SIDE dots, 0: not (default: %(default)s)")
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
    t_ours, d_ours = best_of(3, lambda: fast.dot(spec, vs))
    t_theirs, d_theirs = best_of(1, lambda: _mmasim(vs, args.mmasim_tile))
    agree = np.array_equal(d_ours, d_theirs)
    rows.append(("hopper-wgmma, in-process", vs.num_dots, t_ours, t_theirs, agree))

    shm = memory_dir()
    with tempfile.TemporaryDirectory(dir=shm) as tmp:
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
        t_numba = _numba_floor()
        t_cli, _ = best_of(2, lambda: cli(src, dst))
        cli_ok = np.array_equal(vectors.load(dst).d, d_ours)
        rows.append(("hopper-wgmma, `mxsim run` (CLI)", vs.num_dots, t_cli, t_theirs, cli_ok))
        if args.cli_big:
            # A larger job through the command line: start-up is a smaller share. MMA-Sim's
            # time is its rate measured above, on these dots (it is not run again).
            big = vectors.generate("normal", a_format="e4m3", m=args.cli_big, n=args.cli_big,
                                   k=32, with_c=False, seed=3)
            vectors.save(big, src)
            t_big, _ = best_of(2, lambda: cli(src, dst))
            d_big = fast.dot(spec, big)
            big_ok = np.array_equal(vectors.load(dst, allow_large=True).d, d_big)
            where = "tmpfs" if shm else "disk"
            rows.append((f"hopper-wgmma, `mxsim run` (CLI), {args.cli_big} x {args.cli_big}, "
                         f"files on {where}", big.num_dots, t_big,
                         t_theirs * big.num_dots / vs.num_dots, big_ok))
            with tempfile.TemporaryDirectory() as disk:
                out_disk = Path(disk) / "out.npz"
                t_disk, _ = best_of(2, lambda: cli(src, out_disk))
                disk_ok = np.array_equal(vectors.load(out_disk, allow_large=True).d, d_big)
            rows.append((f"hopper-wgmma, `mxsim run` (CLI), {args.cli_big} x {args.cli_big}, "
                         "output on disk", big.num_dots, t_disk,
                         t_theirs * big.num_dots / vs.num_dots, disk_ok))

    for name, kw in (("exact", dict(a_format="e4m3", scale_format="e8m0")),
                     ("blackwell-mxf8f6f4", dict(a_format="e4m3", scale_format="e8m0"))):
        vs2 = vectors.generate("normal", m=1024, n=1024, k=32, seed=2, **kw)
        spec2 = presets.get(name).spec_for(vs2)
        fast.dot(spec2, vs2.subset(slice(0, 8), slice(0, 8)))
        t2, _ = best_of(2, lambda s=spec2, v=vs2: fast.dot(s, v))
        rows.append((f"{name}, in-process (K=32, MX scales)", vs2.num_dots, t2, None, None))

    # The numpy fallback (what runs without numba: a process that cannot import it) against
    # the kernel, on the same 1M dots; and numpy's integer step, the fallback before engine.wide.
    vs3 = vs.subset(slice(0, max(1, (1 << 20) // args.n)))
    t_kernel, d_kernel = best_of(3, lambda: fast.dot(spec, vs3))
    t_numpy, d_numpy = _without_numba(vs3)
    rows.append(("hopper-wgmma, numpy fallback (no numba)", vs3.num_dots, t_numpy, None,
                 np.array_equal(d_numpy, d_kernel)))
    t_int, d_int = best_of(1, lambda: fast.dot(spec, vs3, kernel=INTEGER_STEP))
    rows.append(("hopper-wgmma, numpy integer step (before)", vs3.num_dots, t_int, None,
                 np.array_equal(d_int, d_kernel)))
    t_step, d_step = best_of(2, lambda: fast.dot(spec, vs, whole=False))
    rows.append(("hopper-wgmma, step kernel + numpy passes (before)", vs.num_dots, t_step, None,
                 np.array_equal(d_step, d_ours)))
    t_ceiling = _ceiling(vs)
    rows.append(("ceiling: the bare step loop (no rounding, no I/O)", vs.num_dots, t_ceiling,
                 None, None))
    sweep = _k_sweep()

    print(f"\n{'what':48} {'dots':>10} {'mxsim dots/s':>14} {'MMA-Sim dots/s':>15} "
          f"{'ratio':>7}  bit-equal")
    for what, dots, t, t_peer, ok in rows:
        peer = f"{dots / t_peer:15.3e}" if t_peer else f"{'-':>15}"
        ratio = f"{t_peer / t:7.1f}" if t_peer else f"{'-':>7}"
        print(f"{what:48} {dots:>10} {dots / t:14.3e} {peer} {ratio}  "
              f"{'-' if ok is None else ok}")
    print(f"\nCLI start-up (`mxsim run` on 64 dots, numba's cache warm): {t_start:.2f} s, "
          f"of which numba's own import and first cached call {t_numba:.2f} s; "
          f"CLI / MMA-Sim on {vs.num_dots:,} dots: {t_theirs / t_cli:.1f}x; numpy fallback "
          f"{t_numpy / t_kernel:.1f}x slower than the kernel; in-process / ceiling "
          f"{t_ceiling / t_ours:.2f}")
    print(f"\n{'K sweep (in-process)':40} {'K':>5} {'dots':>10} {'products/s':>12}")
    for r in sweep:
        print(f"{r['unit']:40} {r['k']:>5} {r['dots']:>10} {r['products_per_s']:12.3e}")
    if args.json:
        out = dict(command="python benchmarks/bench_engine.py --json " + str(args.json),
                   versions=versions_line().lstrip("# "), cpus=os.cpu_count(),
                   mmasim_threads=torch.get_num_threads(), cli_startup_s=t_start,
                   numba_floor_s=t_numba,
                   numpy_slowdown=t_numpy / t_kernel, numpy_dots=vs3.num_dots,
                   rows=[dict(what=w, dots=d, seconds=t, dots_per_s=d / t,
                              mmasim_dots_per_s=None if tp is None else d / tp,
                              ratio=None if tp is None else tp / t, equal=ok)
                         for w, d, t, tp, ok in rows], k_sweep=sweep)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


_NO_NUMBA = """
import sys, time
sys.modules["numba"] = None              # as where numba is not installed
from mxsim import presets, vectors
from mxsim.engine import fast
vs = vectors.load(sys.argv[1], allow_large=True)
spec = presets.get("hopper-wgmma").spec_for(vs)
assert fast.path(spec)["path"] == "numpy"
fast.dot(spec, vs.subset(slice(0, 8)))
best = None
for _ in range(3):
    t = time.perf_counter()
    d = fast.dot(spec, vs)
    best = min(best or 1e9, time.perf_counter() - t)
vectors.save(vs.with_result(d, d_format="fp32", producer="bench"), sys.argv[2])
print(best)
"""


def _without_numba(vs) -> tuple[float, np.ndarray]:
    """Seconds (best of three, as the kernel's) and D of ``hopper-wgmma`` on ``vs`` in a
    process without numba."""
    with tempfile.TemporaryDirectory(dir=memory_dir()) as tmp:
        src, dst = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        vectors.save(vs, src)
        done = subprocess.run([sys.executable, "-c", _NO_NUMBA, str(src), str(dst)],
                              check=True, capture_output=True, text=True)
        return float(done.stdout.split()[-1]), vectors.load(dst, allow_large=True).d


_NUMBA_FLOOR = """
import time
t = time.perf_counter()
import numba
@numba.njit(cache=True)
def one(x):
    return x + 1
one(1)
print(time.perf_counter() - t)
"""


def _numba_floor() -> float:
    """Seconds (best of three fresh processes) that numba itself costs any command that
    uses a compiled kernel: its import and the first call of a trivial function from its
    on-disk cache (which starts its compiler), measured apart from mxsim."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "floor.py").write_text(_NUMBA_FLOOR)
        runs = [float(subprocess.run([sys.executable, "floor.py"], cwd=tmp, check=True,
                                     capture_output=True, text=True).stdout)
                for _ in range(4)]
    return min(runs[1:])                  # the first fills the cache


def _bare_loop(a_sig, a_lsb, a_e, b_sig, b_lsb, b_e, out):
    # The step's arithmetic alone (products, maximum, RZ alignment, exact sum), as the kernel
    # does it, without rounding, conversion or special values: this engine's ceiling.
    m, k = a_sig.shape
    n = b_sig.shape[0]
    for j0 in range(0, n, 128):
        for i in range(m):
            for j in range(j0, min(n, j0 + 128)):
                emax = -(1 << 40)
                for t in range(k):
                    p = np.int64(a_sig[i, t]) * b_sig[j, t]
                    emax = max(emax, -133 if p == 0 else a_e[i, t] + b_e[j, t])
                total = 0
                for t in range(k):
                    p = np.int64(a_sig[i, t]) * b_sig[j, t]
                    shift = emax - 13 - (a_lsb[i, t] + b_lsb[j, t])
                    mag = abs(p)
                    if shift <= 0:
                        v = mag << (-shift)
                    elif shift >= 63:
                        v = 0
                    else:
                        v = mag >> shift
                    total += -v if p < 0 else v
                out[i, j] = total


def _ceiling(vs) -> float:
    """Seconds of :func:`_bare_loop` on ``vs``'s operands (every core, row chunks)."""
    from concurrent.futures import ThreadPoolExecutor

    import numba

    from mxsim.engine.fast.fused import sides
    from mxsim.engine.fast.operands import Operands
    loop = numba.njit(nogil=True)(_bare_loop)
    spec = presets.get("hopper-wgmma").spec_for(vs)
    a, b = sides(Operands.of(spec, vs), 0)
    a = [np.ascontiguousarray(x) for x in (a[1] * np.where(a[0] == 1, -1, 1), a[2], a[3])]
    b = [np.ascontiguousarray(x) for x in (b[1] * np.where(b[0] == 1, -1, 1), b[2], b[3])]
    out = np.empty((vs.m, vs.n), np.int64)
    loop(*(x[:8] for x in a), *(x[:8] for x in b), out[:8, :8])
    rows = max(1, vs.m // (4 * (os.cpu_count() or 1)))

    def run():
        with ThreadPoolExecutor(os.cpu_count()) as pool:
            list(pool.map(lambda r: loop(*(x[r:r + rows] for x in a), *b, out[r:r + rows]),
                          range(0, vs.m, rows)))
    return best_of(2, run)[0]


def _k_sweep() -> list[dict]:
    """In-process products/s at K = 16 (hopper-mma-f16, its smallest instruction) and K = 32
    .. 4096 (hopper-wgmma chained, blackwell-mxf8f6f4 with E8M0 blocks), about 2**27 products
    each."""
    out = []
    cases = [("hopper-mma-f16", dict(a_format="fp16"), 16)]
    cases += [("hopper-wgmma", dict(a_format="e4m3"), k) for k in (32, 128, 512, 4096)]
    cases += [("blackwell-mxf8f6f4", dict(a_format="e4m3", scale_format="e8m0", block=32), k)
              for k in (32, 512, 4096)]
    for unit, kw, k in cases:
        side = int(np.sqrt((1 << 27) // k))
        vs = vectors.generate("normal", m=side, n=side, k=k, with_c=False, seed=k, **kw)
        spec = presets.get(unit).spec_for(vs)
        fast.dot(spec, vs.subset(slice(0, 8), slice(0, 8)))
        t, _ = best_of(2, lambda s=spec, v=vs: fast.dot(s, v))
        out.append(dict(unit=unit, k=k, dots=vs.num_dots, seconds=t,
                        products_per_s=vs.num_dots * k / t, dots_per_s=vs.num_dots / t))
    return out


if __name__ == "__main__":
    sys.exit(main())
