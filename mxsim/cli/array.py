"""The ``array`` verb: a GEMM on an array of units, its output bits beside its timing."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from .common import emit, int_range

__all__ = ["add_parser", "main"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """``mxsim array``: its options, on the verbs' subparsers."""
    desc = ("run an M x N x K GEMM on an array of dot-product units (an ArraySpec file, or a "
            "unit and the array's fields): cycles, utilisation, stalls by cause and buffer "
            "traffic from the cycle model (small GEMMs) or the closed form, and with "
            "--operands D's bits from the engine in the dataflow's order of K")
    sp = sub.add_parser("array", help="a GEMM on an array of units: timing and bits",
                        description=desc)
    sp.set_defaults(func=main)
    # Three positionals, not one of nargs=3 with a tuple metavar: Python 3.11's argparse
    # cannot format the help of that one (`mxsim array --help` was a traceback).
    for dim, what in (("M", "rows of A and D"), ("N", "columns of B and D"),
                      ("K", "reduction length")):
        sp.add_argument(dim.lower(), type=int_range(1), metavar=dim, help=what)
    sp.add_argument("--array", default=None, metavar="ARRAY.toml",
                    help="an ArraySpec file (docs/array.md); the options below override it")
    sp.add_argument("--unit", default=None,
                    help="preset or spec file (default: the file's, else blackwell-mxf8f6f4)")
    sp.add_argument("--a-format", default=None, help="A's element format (default: e4m3)")
    sp.add_argument("--b-format", default=None, help="B's element format (default: A's)")
    for name, kind, what in [("rows", int_range(1), "array rows"),
                             ("cols", int_range(1), "array columns"),
                             ("lanes", int_range(1), "products per cycle of a unit"),
                             ("stages", int_range(1), "register stages after the accumulator"),
                             ("interleave", int_range(1), "outputs in flight per unit (os)"),
                             ("bandwidth", int_range(1), "bytes per cycle of each operand "
                                                         "buffer")]:
        sp.add_argument(f"--{name}", type=kind, default=None, help=what)
    sp.add_argument("--dataflow", default=None, choices=("os", "ws", "is"))
    sp.add_argument("--accumulators", default=None, choices=("registers", "tmem"))
    sp.add_argument("--view", default="auto", choices=("auto", "cycle", "analytic"),
                    help="timing from the cycle model, the closed form, or auto (the cycle "
                         "model up to 65,536 beats) (default: %(default)s)")
    sp.add_argument("--operands", default=None, metavar="FAMILY",
                    help="draw seeded operands of this generator family (normal, llm, ...) "
                         "and compute D's bits")
    sp.add_argument("--seed", type=int_range(0), default=0)
    sp.add_argument("--json", action="store_true", help="print JSON instead of text")
    return sp


def _array(args: argparse.Namespace):
    from ..array import ArraySpec, Buffer, load
    from ..design import resolve_design

    arr = load(args.array) if args.array else None
    if arr is None or args.unit or args.a_format or args.b_format:
        unit = args.unit or (arr.unit if arr is not None else "blackwell-mxf8f6f4")
        fmt = args.a_format or (None if arr is not None else "e4m3")
        spec, _ = resolve_design(unit, fmt, args.b_format)
        arr = (arr or ArraySpec(unit=spec)).replace(unit=spec, microarch=None)
    ua = arr.microarch
    if args.lanes or args.stages:
        from ..microarch import MicroArch
        arr = arr.replace(microarch=MicroArch(args.lanes or ua.lanes, args.stages or ua.stages))
    changes = {k: getattr(args, k) for k in ("rows", "cols", "interleave", "dataflow")
               if getattr(args, k) is not None}
    if args.accumulators:
        changes["accumulators"] = {**arr.accumulators.to_dict(), "kind": args.accumulators}
    if args.bandwidth:
        changes["a_buffer"] = Buffer(bytes=arr.a_buffer.bytes, bandwidth=args.bandwidth)
        changes["b_buffer"] = Buffer(bytes=arr.b_buffer.bytes, bandwidth=args.bandwidth)
    return arr.replace(**changes) if changes else arr


def main(args: argparse.Namespace) -> int:
    from ..array import gemm

    arr = _array(args)
    m, n, k = args.m, args.n, args.k
    gemm.analytic.check(arr, m, n, k)
    vs = None
    if args.operands:
        vs = gemm.operands(arr, m, n, k, family=args.operands, seed=args.seed)
    run = gemm.gemm(arr, m, n, k, vs=vs, view=args.view)
    data = run.to_dict()
    if run.d is not None:
        data["d"] = np.asarray(run.d).tolist()
    lines = [f"array     {arr.rows} x {arr.cols} of {arr.unit.name} (lanes "
             f"{arr.microarch.lanes}, stages {arr.microarch.stages}), {arr.dataflow.value}, "
             f"{arr.accumulators.kind.value} accumulators, interleave {arr.interleave}",
             f"GEMM      {m} x {n} x {k}: K summed as {run.order}"
             + (f" (K-tiles of {run.k_tile})" if run.k_tile else ""),
             f"timing    {run.view}" + ("" if run.exact else " (a lower bound)"),
             f"cycles    {run.cycles:,}", f"util      {run.utilisation:.1%}",
             f"MACs/cyc  {run.macs_per_cycle:.1f}", "stalls (unit-cycles)"]
    lines += [f"  {c:22} {v:,}" for c, v in run.stalls.items() if v]
    lines += ["traffic (bytes)"] + [f"  {c:22} {v:,}" for c, v in run.traffic.items()]
    if run.d is not None:
        flat = np.asarray(run.d).reshape(-1)
        lines.append(f"D         {m * n} FP32 codes, first {' '.join(f'{x:08x}' for x in flat[:4])}"
                     + ("" if "cycle_model_d_equal" not in run.extra else
                        f"; equal to the cycle model's: {run.extra['cycle_model_d_equal']}"))
    emit(args, "\n".join(lines), data)
    return 0
