"""Throughput of mxsim's MX quantisation against torchao's ``to_mx`` on the same input.

Usage: ``python benchmarks/bench_quantize.py [--n N] [--elem FMT] [--repeat R] [--seed S]``

The last row is NVFP4 (E2M1 elements, UE4M3 scales in blocks of 16, the input's own per-tensor
scale) beside torchao's ``nvfp4_quantize`` given the same per-tensor scale.

The same ``N`` float32 values (standard normal, a 4096-wide matrix) are quantised to MX
(``FMT`` elements, blocks of 32) by ``mxsim.quantize.to_mx`` with each scale rule, and by
torchao 0.18's ``to_mx`` (CPU, eager) with its matching rule: the torchao rule of the same name,
FLOOR for ``ocp`` and RCEIL for ``rceil-sat``. Each timing is the best of ``R`` runs, both
sides in the same process (all mxsim timings first, then all torchao ones). The ``agree``
column compares scale and element codes where the rules are the same (``yes``/``NO``), and
otherwise counts the blocks whose scales differ.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys

import numpy as np
from _timing import best_of  # benchmarks/ is on sys.path when a script runs

from mxsim import quantize

RULES = ["floor", "ceil", "even", "rceil", "ocp", "rceil-sat"]
PEER_RULE = {"floor": "floor", "ceil": "ceil", "even": "even", "rceil": "rceil",
             "ocp": "floor", "rceil-sat": "rceil"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 24, metavar="N",
                        help="elements, a multiple of 4096 (default: %(default)s)")
    parser.add_argument("--elem", default="e4m3", choices=["e4m3", "e5m2"],
                        help="element format (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, metavar="R",
                        help="runs per timing; the best is kept (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, metavar="S",
                        help="seed of the input (default: %(default)s)")
    args = parser.parse_args(argv)

    import torch
    import torchao
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import to_mx

    dtype = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[args.elem]
    x = np.random.default_rng(args.seed).standard_normal(args.n, dtype=np.float32)
    x = x.reshape(-1, 4096)
    t = torch.from_numpy(x)
    print(f"# mxsim quantize benchmark, {datetime.date.today().isoformat()}")
    print(f"# command: python benchmarks/bench_quantize.py --n {args.n} --elem {args.elem} "
          f"--repeat {args.repeat} --seed {args.seed}")
    print(f"# python {platform.python_version()}, numpy {np.__version__}, torch "
          f"{torch.__version__} ({torch.get_num_threads()} threads), torchao "
          f"{torchao.__version__}, {platform.machine()}, {os.cpu_count()} CPUs")
    print(f"# input: {args.n} float32 standard normals as {x.shape}; MX{args.elem}, blocks of "
          f"32; best of {args.repeat}")
    print()
    header = ("rule", "mxsim M/s", "torchao rule", "torchao M/s", "mxsim/torchao", "agree")
    print(f"| {header[0]:<9} | {header[1]:>9} | {header[2]:<12} | {header[3]:>11} | "
          f"{header[4]:>13} | {header[5]:<17} |")
    print(f"|{'-' * 11}|{'-' * 10}:|{'-' * 14}|{'-' * 12}:|{'-' * 14}:|{'-' * 19}|")
    # mxsim first, then torchao: torch's worker threads keep spinning for a while after each
    # parallel op, which would slow whatever runs right after them.
    ours = {r: best_of(args.repeat, lambda r=r: quantize.to_mx(x, args.elem, 32, r))
            for r in RULES}
    peers = {}
    for peer in dict.fromkeys(PEER_RULE.values()):
        mode = ScaleCalculationMode(peer)
        t_peer, (ps, pe) = best_of(args.repeat, lambda m=mode: to_mx(t, dtype, 32, m))
        peers[peer] = (t_peer, (ps.view(torch.uint8).numpy(), pe.view(torch.uint8).numpy()))
    ok = True
    for rule in RULES:
        peer = PEER_RULE[rule]
        t_ours, (s, e) = ours[rule]
        t_peer, (ps, pe) = peers[peer]
        if peer == rule:
            same = bool(np.array_equal(s, ps) and np.array_equal(e, pe))
            ok &= same
            agree = "yes" if same else "NO"
        else:
            agree = f"{int((s != ps).sum())} scales differ"
        print(f"| {rule:<9} | {x.size / t_ours / 1e6:>9.1f} | {peer:<12} | "
              f"{x.size / t_peer / 1e6:>11.1f} | {t_peer / t_ours:>13.2f} | {agree:<17} |",
              flush=True)
    ok &= _nvfp4_row(x, args.repeat)
    return 0 if ok else 1


def _nvfp4_row(x: np.ndarray, repeat: int) -> bool:
    """NVFP4 (E2M1, UE4M3 blocks of 16, the tensor's own per-tensor scale) beside torchao's
    ``nvfp4_quantize`` with the same per-tensor scale; codes compared."""
    import torch
    from torchao.prototype.mx_formats.kernels import unpack_uint4
    from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize
    t = torch.from_numpy(x)
    t_ours, (s, e, p) = best_of(repeat, lambda: quantize.to_nvfp4(x))
    pts = torch.tensor(float(p), dtype=torch.float32)
    t_peer, (ps, pe) = best_of(repeat, lambda: nvfp4_quantize(t, 16, pts))
    same = bool(np.array_equal(s, ps.view(torch.uint8).numpy()) and np.array_equal(
        e, unpack_uint4(pe).numpy().reshape(x.shape)))
    print(f"| {'nvfp4':<9} | {x.size / t_ours / 1e6:>9.1f} | {'nvfp4':<12} | "
          f"{x.size / t_peer / 1e6:>11.1f} | {t_peer / t_ours:>13.2f} | "
          f"{'yes' if same else 'NO':<17} |", flush=True)
    return same


if __name__ == "__main__":
    sys.exit(main())
