"""Throughput of mxsim's quantisation and dequantisation against torchao and the machine's ceiling.

Usage: ``python benchmarks/bench_quantize.py [--n N] [--repeat R] [--seed S]``

The same ``N`` float32 values (standard normal, a 4096-wide matrix) go through every path,
one row each:

- ``q mxfp8 <rule>``: ``to_mx`` to e4m3 in blocks of 32 by each scale rule, beside torchao
  0.18's ``to_mx`` (CPU, eager) with its matching rule (FLOOR for ``ocp``, RCEIL for
  ``rceil-sat``);
- ``q mxfp6``/``q mxfp4``: e3m2, e2m3 and e2m1 by ``floor``, beside torchao's FLOOR;
- ``q nvfp4``: ``to_nvfp4`` with the input's own per-tensor scale, beside ``nvfp4_quantize``
  given the same scale;
- ``dq <format>``: ``from_mx``/``from_nvfp4`` with ``dtype=np.float32`` of those codes, beside
  torchao's ``to_dtype`` (MX; torchao has no MXINT8) and ``NVFP4Tensor.dequantize``.

Each timing is the best of ``R`` runs; all mxsim timings of a kind run before torchao's (torch's
worker threads keep spinning after each call and slow whatever runs next). ``agree``: codes or
FP32 bit patterns equal (``yes``/``NO``; NaN payloads aside for dequantisation, where torch
casts an FP8 NaN to 0x7FF00000); where the peer's rule differs, the count of blocks whose
scales differ; for two-level NVFP4 dequantisation, the count of elements that differ, because
torchao rounds ``per_tensor_scale * ue4m3`` to FP32 before multiplying (mxsim rounds once).

The ceiling of each direction is measured in the same run on every core (numba loops,
chunks of 2**18 elements): a pass that reads the FP32 input and writes one byte per element
(quantisation), and one that reads one byte and writes FP32 (dequantisation); ``ceiling`` is
mxsim's rate over it. numpy's copy of the FP32 input (one thread) is printed for reference.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from _timing import best_of  # benchmarks/ is on sys.path when a script runs

from mxsim import formats, quantize

RULES = ["floor", "ceil", "even", "rceil", "ocp", "rceil-sat"]
PEER_RULE = {"floor": "floor", "ceil": "ceil", "even": "even", "rceil": "rceil",
             "ocp": "floor", "rceil-sat": "rceil"}
NARROW = {"mxfp6 e3m2": "e3m2", "mxfp6 e2m3": "e2m3", "mxfp4 e2m1": "e2m1"}
HEADER = ("path", "mxsim M/s", "torchao M/s", "mxsim/torchao", "ceiling M/s", "of ceiling",
          "agree")


def ceilings(x: np.ndarray, repeat: int) -> dict[str, float]:
    """Elements/s of the bare passes on every core, and numpy's one-thread copy."""
    import numba

    @numba.njit(nogil=True)
    def narrow(src, out):
        for i in range(src.size):
            out[i] = np.uint8(src[i] >> np.uint32(24))

    @numba.njit(nogil=True)
    def widen(src, out):
        for i in range(src.size):
            out[i] = np.uint32(src[i]) << np.uint32(24)

    flat = x.reshape(-1).view(np.uint32)
    o8, o32 = np.empty(flat.size, np.uint8), np.empty(flat.size, np.uint32)
    chunks = [slice(s, s + (1 << 18)) for s in range(0, flat.size, 1 << 18)]
    narrow(flat[:8], o8[:8])
    widen(o8[:8], o32[:8])
    pool = ThreadPoolExecutor(os.cpu_count())
    t_q, _ = best_of(repeat, lambda: list(pool.map(lambda s: narrow(flat[s], o8[s]), chunks)))
    t_d, _ = best_of(repeat, lambda: list(pool.map(lambda s: widen(o8[s], o32[s]), chunks)))
    pool.shutdown()
    dst = np.empty_like(x)
    t_c, _ = best_of(repeat, lambda: np.copyto(dst, x))
    return {"q": flat.size / t_q, "dq": flat.size / t_d, "copy": flat.size / t_c}


def row(path: str, n: int, t_ours: float, t_peer: float | None, ceiling: float,
        agree: str) -> str:
    peer = f"{n / t_peer / 1e6:>11.1f}" if t_peer else f"{'-':>11}"
    ratio = f"{t_peer / t_ours:>13.2f}" if t_peer else f"{'-':>13}"
    return (f"| {path:<19} | {n / t_ours / 1e6:>9.1f} | {peer} | {ratio} | "
            f"{ceiling / 1e6:>11.1f} | {n / t_ours / ceiling:>10.2f} | {agree:<17} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 24, metavar="N",
                        help="elements, a multiple of 4096 (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, metavar="R",
                        help="runs per timing; the best is kept (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, metavar="S",
                        help="seed of the input (default: %(default)s)")
    args = parser.parse_args(argv)

    import torch
    import torchao

    x = np.random.default_rng(args.seed).standard_normal(args.n, dtype=np.float32)
    x = x.reshape(-1, 4096)
    print(f"# mxsim quantize benchmark, {datetime.date.today().isoformat()}")
    print(f"# command: flock /tmp/mxsim-bench.lock python benchmarks/bench_quantize.py --n "
          f"{args.n} --repeat {args.repeat} --seed {args.seed}")
    print(f"# python {platform.python_version()}, numpy {np.__version__}, torch "
          f"{torch.__version__} ({torch.get_num_threads()} threads), torchao "
          f"{torchao.__version__}, {platform.machine()}, {os.cpu_count()} CPUs")
    print(f"# input: {args.n} float32 standard normals as {x.shape}; MX blocks of 32, NVFP4 "
          f"blocks of 16; best of {args.repeat}")
    top = ceilings(x, args.repeat)
    print(f"# ceilings on {os.cpu_count()} cores: read FP32 + write 1 byte "
          f"{top['q'] / 1e6:.1f} M elements/s ({top['q'] * 5 / 1e9:.1f} GB/s); read 1 byte + "
          f"write FP32 {top['dq'] / 1e6:.1f} M elements/s ({top['dq'] * 5 / 1e9:.1f} GB/s); "
          f"numpy copy of the FP32 input, one thread: {top['copy'] / 1e6:.1f} M elements/s "
          f"({top['copy'] * 8 / 1e9:.1f} GB/s)")
    print()
    print(f"| {HEADER[0]:<19} | {HEADER[1]:>9} | {HEADER[2]:>11} | {HEADER[3]:>13} | "
          f"{HEADER[4]:>11} | {HEADER[5]:>10} | {HEADER[6]:<17} |")
    print("|" + "|".join(["-" * 21, "-" * 10 + ":", "-" * 12 + ":", "-" * 14 + ":",
                          "-" * 12 + ":", "-" * 11 + ":", "-" * 19]) + "|")
    ok = True
    ok &= _quantise_rows(x, args.repeat, top["q"])
    ok &= _dequantise_rows(x, args.repeat, top["dq"])
    return 0 if ok else 1


def _quantise_rows(x: np.ndarray, repeat: int, ceiling: float) -> bool:
    import torch
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.kernels import unpack_uint4
    from torchao.prototype.mx_formats.mx_tensor import to_mx
    from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize

    t = torch.from_numpy(x)
    dtypes = {"e4m3": torch.float8_e4m3fn, "e3m2": "fp6_e3m2", "e2m3": "fp6_e2m3",
              "e2m1": torch.float4_e2m1fn_x2}
    jobs = [(f"q mxfp8 {r}", "e4m3", r, PEER_RULE[r]) for r in RULES]
    jobs += [(f"q {name}", fmt, "floor", "floor") for name, fmt in NARROW.items()]
    ours = {path: best_of(repeat, lambda f=fmt, r=rule: quantize.to_mx(x, f, 32, r))
            for path, fmt, rule, _ in jobs}
    t_nv, (s_nv, e_nv, p) = best_of(repeat, lambda: quantize.to_nvfp4(x))
    peers = {}
    for _, fmt, _, peer in jobs:
        if (fmt, peer) not in peers:
            mode = ScaleCalculationMode(peer)
            tp, (ps, pe) = best_of(repeat, lambda f=fmt, m=mode: to_mx(t, dtypes[f], 32, m))
            pe = pe.view(torch.uint8)
            peers[fmt, peer] = (tp, ps.view(torch.uint8).numpy(),
                                (unpack_uint4(pe) if fmt == "e2m1" else pe).numpy())
    pts = torch.tensor(float(p), dtype=torch.float32)
    tp_nv, (ps, pe) = best_of(repeat, lambda: nvfp4_quantize(t, 16, pts))
    ok = True
    for path, fmt, rule, peer in jobs:
        t_ours, (s, e) = ours[path]
        tp, ps_, pe_ = peers[fmt, peer]
        if peer == rule:
            same = bool(np.array_equal(s, ps_) and np.array_equal(e, pe_.reshape(e.shape)))
            ok &= same
            agree = "yes" if same else "NO"
        else:
            agree = f"{int((s != ps_).sum())} scales differ"
        print(row(path, x.size, t_ours, tp, ceiling, agree), flush=True)
    same = bool(np.array_equal(s_nv, ps.view(torch.uint8).numpy()) and np.array_equal(
        e_nv, unpack_uint4(pe).numpy().reshape(x.shape)))
    print(row("q nvfp4", x.size, t_nv, tp_nv, ceiling, "yes" if same else "NO"), flush=True)
    return ok and same


def _agree(ours: np.ndarray, peer: np.ndarray) -> tuple[bool, int]:
    """(equal bit for bit with NaN payloads aside, count of differing elements)."""
    nan = np.isnan(ours)
    same_nan = np.array_equal(nan, np.isnan(peer))
    differ = int((ours.view(np.uint32)[~nan] != peer.view(np.uint32)[~nan]).sum())
    return same_nan and differ == 0, differ


def _dequantise_rows(x: np.ndarray, repeat: int, ceiling: float) -> bool:
    import torch
    from torchao.prototype.mx_formats.mx_tensor import to_dtype
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor

    dtypes = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "e3m2": "fp6_e3m2",
              "e2m3": "fp6_e2m3", "e2m1": torch.float4_e2m1fn_x2}
    names = {"e4m3": "mxfp8 e4m3", "e5m2": "mxfp8 e5m2", "e3m2": "mxfp6 e3m2",
             "e2m3": "mxfp6 e2m3", "e2m1": "mxfp4 e2m1", "int8": "mxint8"}
    ok = True
    for fmt, name in names.items():
        s, e = quantize.to_mx(x, fmt, 32, "ocp" if fmt == "int8" else "floor")
        t_ours, got = best_of(repeat, lambda s=s, e=e, f=fmt: quantize.from_mx(
            s, e, f, dtype=np.float32))
        tp, agree = None, "no peer"
        if fmt in dtypes:
            d = torch.from_numpy(formats.pack_fp4(e) if fmt == "e2m1" else e)
            d = d.view(dtypes[fmt]) if fmt in ("e4m3", "e5m2") else d
            sc = torch.from_numpy(s).view(torch.float8_e8m0fnu)
            tp, peer = best_of(repeat, lambda d=d, sc=sc, f=fmt: to_dtype(
                d, sc, dtypes[f], 32, torch.float32))
            same, _ = _agree(got, peer.numpy())
            ok &= same
            agree = "yes" if same else "NO"
        print(row(f"dq {name}", x.size, t_ours, tp, ceiling, agree), flush=True)
    s, e, p = quantize.to_nvfp4(x)
    packed = torch.from_numpy(formats.pack_fp4(e))
    scale = torch.from_numpy(s).view(torch.float8_e4m3fn)
    for path, pts in (("dq nvfp4 1-level", None), ("dq nvfp4 2-level", p)):
        t_ours, got = best_of(repeat, lambda pts=pts: quantize.from_nvfp4(
            s, e, 1.0 if pts is None else pts, dtype=np.float32))
        nv = NVFP4Tensor(packed, scale, 16, torch.float32, per_tensor_scale=None
                         if pts is None else torch.tensor(float(pts), dtype=torch.float32))
        tp, peer = best_of(repeat, lambda nv=nv: nv.dequantize(torch.float32))
        same, differ = _agree(got, peer.numpy())
        if pts is None:
            ok &= same
            agree = "yes" if same else "NO"
        else:
            agree = f"{differ} differ (rounding)"
        print(row(path, x.size, t_ours, tp, ceiling, agree), flush=True)
    return ok


if __name__ == "__main__":
    sys.exit(main())
