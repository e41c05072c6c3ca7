"""Throughput of mxsim's encode and decode against ml_dtypes casts on the same input.

Usage: ``python benchmarks/bench_formats.py [--n N] [--repeat R] [--seed S]``

For each format, the same ``N`` float32 values (standard normal, so nothing overflows) are
encoded with ``Format.encode(x, "rne", saturate=True)`` and cast with ``x.astype(ml_dtype)``;
the codes are then decoded to float64 and to float32 (mxsim: ``decode`` then ``astype``, as
mxsim decodes to float64 only). Each timing is the best of ``R`` runs. The ``agree`` column
checks that both sides gave the same codes and the same decoded bits, so the two are timed
doing the same work.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys

import ml_dtypes
import numpy as np
from _timing import best_of  # benchmarks/ is on sys.path when a script runs

from mxsim import formats

FORMATS = ["e4m3", "e5m2", "e2m1", "bf16"]


def bench(name: str, x: np.ndarray, repeat: int) -> list[tuple[str, str, float, float, bool]]:
    fmt = formats.get(name)
    dt = np.dtype(getattr(ml_dtypes, fmt.ml_dtypes_name))
    raw = np.dtype(f"u{dt.itemsize}")
    n = x.size
    rows = []

    t_ours, codes = best_of(repeat, lambda: fmt.encode(x, "rne", saturate=True))
    t_ml, peer = best_of(repeat, lambda: x.astype(dt))
    agree = bool(np.array_equal(codes, peer.view(raw)))
    rows.append(("encode f32->codes", name, n / t_ours, n / t_ml, agree))

    t_ours, v64 = best_of(repeat, lambda: fmt.decode(codes))
    t_ml, p64 = best_of(repeat, lambda: peer.astype(np.float64))
    agree = bool(np.array_equal(v64.view(np.uint64), p64.view(np.uint64)))
    rows.append(("decode codes->f64", name, n / t_ours, n / t_ml, agree))

    t_ours, v32 = best_of(repeat, lambda: fmt.decode(codes).astype(np.float32))
    t_ml, p32 = best_of(repeat, lambda: peer.astype(np.float32))
    agree = bool(np.array_equal(v32.view(np.uint32), p32.view(np.uint32)))
    rows.append(("decode codes->f32", name, n / t_ours, n / t_ml, agree))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 24, metavar="N",
                        help="elements per array (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, metavar="R",
                        help="runs per timing; the best is kept (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, metavar="S",
                        help="seed of the input (default: %(default)s)")
    args = parser.parse_args(argv)

    x = np.random.default_rng(args.seed).standard_normal(args.n, dtype=np.float32)
    print(f"# mxsim formats benchmark, {datetime.date.today().isoformat()}")
    print(f"# command: python benchmarks/bench_formats.py --n {args.n} --repeat {args.repeat} "
          f"--seed {args.seed}")
    print(f"# python {platform.python_version()}, numpy {np.__version__}, "
          f"ml_dtypes {ml_dtypes.__version__}, {platform.machine()}, "
          f"{os.cpu_count()} CPUs")
    print(f"# input: {args.n} float32 standard normals; best of {args.repeat}")
    print()
    header = ("operation", "format", "mxsim M/s", "ml_dtypes M/s", "mxsim/ml_dtypes", "agree")
    print(f"| {header[0]:<18} | {header[1]:<6} | {header[2]:>9} | {header[3]:>13} | "
          f"{header[4]:>15} | {header[5]:<5} |")
    print(f"|{'-' * 20}|{'-' * 8}|{'-' * 10}:|{'-' * 14}:|{'-' * 16}:|{'-' * 7}|")
    ok = True
    for name in FORMATS:
        for op, fmt, ours, peer, agree in bench(name, x, args.repeat):
            ok &= agree
            print(f"| {op:<18} | {fmt:<6} | {ours / 1e6:>9.1f} | {peer / 1e6:>13.1f} | "
                  f"{ours / peer:>15.3f} | {'yes' if agree else 'NO':<5} |", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
