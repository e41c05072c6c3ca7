"""Where quantisation's time goes: each stage of the compiled pipelines on one thread.

Usage: ``python benchmarks/profile_quantize.py [--n N] [--repeat R]``

The compiled loops are opaque to cProfile, so each stage is timed alone (best of ``R``) on the
benchmark's input (``N`` float32 standard normals, 4096 wide), on one thread, whole-array: MX
(e4m3, blocks of 32) block maxima, the scale rule (numpy, per rule), the element encoder; NVFP4
block maxima, its FP32 scale arithmetic (numpy) and element encoder; dequantisation. The last
lines time the whole calls on every core.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys

import numpy as np
from _timing import best_of  # benchmarks/ is on sys.path when a script runs

from mxsim import formats, quantize
from mxsim.quantize import _kernel, blocks, nvfp4, rules


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 24, metavar="N",
                        help="elements, a multiple of 4096 (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=5, metavar="R",
                        help="runs per timing; the best is kept (default: %(default)s)")
    args = parser.parse_args(argv)
    n, r = args.n, args.repeat
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32).reshape(-1, 4096)
    print(f"# mxsim quantize profile, {datetime.date.today().isoformat()}, {os.cpu_count()} CPUs")
    print(f"# command: flock /tmp/mxsim-bench.lock python benchmarks/profile_quantize.py --n {n} "
          f"--repeat {r}")
    print(f"# ms per {n} elements (and M elements/s), one thread unless stated; best of {r}")

    def line(what: str, fn) -> float:
        t, _ = best_of(r, fn)
        print(f"{what:<44} {t * 1e3:8.2f} ms {n / t / 1e6:9.1f} M/s", flush=True)
        return t

    amax_loop, _, mul_loop, enc_loop, _ = _kernel._build()
    e4m3, e2m1 = formats.get("e4m3"), formats.get("e2m1")
    b32 = x.view(np.uint32).reshape(-1, 32)
    am = np.empty(len(b32), np.uint32)
    line("mx: block maxima (compiled)", lambda: amax_loop(b32, am))
    for rule in rules.ScaleRule:
        line(f"mx: scale rule {rule.value} (numpy)",
             lambda rule=rule: rules.scale_finite(rule, e4m3, am))
    _, k = rules.scale_finite(rules.ScaleRule.FLOOR, e4m3, am)
    out = np.empty(b32.shape, np.uint8)
    mult, p = _kernel._multipliers(k), _kernel._params(e4m3, "rne", False)
    line("mx: 2**-k multipliers (numpy)", lambda: _kernel._multipliers(k))
    line("mx: element encoder, arithmetic (compiled)", lambda: enc_loop(b32, k, mult, p, out))
    table = quantize.elements.lut("e4m3", "rne", "zero")
    line("mx: element encoder, table gather (compiled)", lambda: _kernel.encode(b32, k, table))
    b16 = x.view(np.uint32).reshape(-1, 16)
    am16 = np.empty(len(b16), np.uint32)
    line("nvfp4: block maxima (compiled)", lambda: amax_loop(b16, am16))
    pts = nvfp4._pts(None, am16)
    line("nvfp4: scales and multipliers (numpy)", lambda: nvfp4._scales(am16, pts))
    _, mul = nvfp4._scales(am16, pts)
    out16 = np.empty(b16.shape, np.uint8)
    p4 = _kernel._params(e2m1, "rne", True)
    line("nvfp4: element encoder (compiled)", lambda: mul_loop(b16, mul, p4, out16))
    s, e = quantize.to_mx(x, "e4m3", 32, "floor")
    stab = blocks.fp32_table("e8m0")
    dq = _kernel._build()[4]
    o32 = np.empty(e.reshape(-1, 32).shape, np.uint32)
    line("dq mx: decode loop (compiled)", lambda: dq(
        s.reshape(-1), e.reshape(-1, 32), blocks.fp32_table("e4m3"), stab, np.float32(1),
        o32))
    print("# whole calls, on every core")
    for rule in ("floor", "rceil"):
        line(f"to_mx e4m3 {rule}", lambda rule=rule: quantize.to_mx(x, "e4m3", 32, rule))
    line("to_nvfp4", lambda: quantize.to_nvfp4(x))
    line("from_mx e4m3 float32", lambda: quantize.from_mx(s, e, "e4m3", dtype=np.float32))
    return 0


if __name__ == "__main__":
    sys.exit(main())
