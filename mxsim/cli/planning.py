"""The ``invariance`` verb: which batch sizes M change a row's bits, from plans alone."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_verb, emit, int_range
from .verbs import Verb

__all__ = ["cmd_invariance", "VERBS"]

#: The M values asked by default: decode steps, odd batch sizes, prefill.
DEFAULT_MS = (1, 2, 3, 8, 17, 33, 128, 257, 1024)


def cmd_invariance(args: argparse.Namespace) -> int:
    from ..errors import MxsimError
    from ..plans.invariance import LLAMA3_8B, OPERAND_FORMAT, batch_invariance
    from ..plans.table import lookup

    if args.llama3_8b and (args.n is not None or args.k is not None):
        raise MxsimError("invariance takes -n N -k K (a layer) or --llama3-8b, not both")
    if args.llama3_8b:
        layers = LLAMA3_8B
    elif args.n is None or args.k is None:
        raise MxsimError("invariance needs a layer: -n N and -k K, or --llama3-8b")
    else:
        layers = {f"{args.n}x{args.k}": (args.n, args.k)}
    paths = list(OPERAND_FORMAT) if args.path == "all" else [args.path]
    ms = sorted(set(args.m or DEFAULT_MS) | {1})
    lines, data = [], []
    for path in paths:
        for name, (n, k) in layers.items():
            rows = batch_invariance(path, n, k, ms, rows=args.rows, cols=args.cols,
                                    seed=args.seed)
            note = lookup(path, 1, n, k).note
            lines.append(f"{path}, layer {name} (N = {n}, K = {k}); M = 1: {note}")
            for r in rows:
                what = "same bits as M = 1" if r.differ == 0 else \
                    f"{r.differ} of {r.outputs} outputs differ, median {r.median_ulp:g} ulp, " \
                    f"up to {r.max_ulp}"
                lines.append(f"  M = {r.m:<5} {r.source:<6} {r.plan}: {what}")
            data.append({"path": path, "layer": name, "n": n, "k": k,
                         "rows": [r.to_dict() for r in rows]})
    lines.append("(record: the plan table has this shape; rule: the nearest recorded shape's "
                 "plan, see docs/plans.md)")
    emit(args, "\n".join(lines), data)
    return 0


def _add(sub: Any) -> argparse.ArgumentParser:
    p = add_verb(sub, "invariance", cmd_invariance,
                 "which batch sizes M give a row other bits than M = 1, from GEMM plans alone")
    p.add_argument("--path", default="cublas-bf16",
                   help="library path: cublas-bf16, cublas-fp16, cublas-tf32, cublas-fast, "
                        "cublas, or all (default: %(default)s)")
    p.add_argument("-n", type=int_range(1), default=None, help="the layer's N (out features)")
    p.add_argument("-k", type=int_range(1), default=None, help="the layer's K (in features)")
    p.add_argument("--llama3-8b", action="store_true",
                   help="Llama-3-8B's four linear layer shapes instead of -n/-k")
    p.add_argument("-m", type=int_range(1), nargs="+", default=None, metavar="M",
                   help=f"batch sizes (default: {' '.join(map(str, DEFAULT_MS))})")
    p.add_argument("--rows", type=int_range(1, 64), default=4,
                   help="activation rows computed (default: %(default)s)")
    p.add_argument("--cols", type=int_range(1, 4096), default=64,
                   help="weight columns computed (default: %(default)s)")
    p.add_argument("--seed", type=int_range(0), default=0, help="seed of the llm values")
    return p


VERBS = (Verb(name="invariance", rank=85, add=_add),)
