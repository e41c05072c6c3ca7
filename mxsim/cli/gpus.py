"""The ``gpu`` verbs: the local GPU's paths."""

from __future__ import annotations

import argparse
import time

from .. import vectors
from ..output import check_output
from .common import emit

__all__ = ["cmd_gpu_info", "cmd_gpu_run"]


def cmd_gpu_info(args: argparse.Namespace) -> int:
    """The local GPU and, for every path, whether it runs here and why not."""
    from gpu import device_info
    from gpu.paths import PATHS

    info = device_info()
    rows = []
    for p in PATHS.values():
        reason = p.unavailable_reason()
        rows.append({"path": p.name, "available": reason is None, "reason": reason,
                     "summary": p.summary, "preset": p.preset})
    gpu = info.get("gpu")
    lines = [f"device: {gpu} (compute capability {info.get('capability')}, driver "
             f"{info.get('driver')}, CUDA {info.get('cuda')}, torch {info.get('torch')}, "
             f"cuBLAS {info.get('cublas')})" if gpu else f"device: none ({info.get('reason')})"]
    width = max(len(r["path"]) for r in rows)
    for r in rows:
        state = "available" if r["available"] else f"unavailable: {r['reason']}"
        lines.append(f"  {r['path']:{width}}  {state}")
    emit(args, "\n".join(lines), {"device": info, "paths": rows})
    return 0


def cmd_gpu_run(args: argparse.Namespace) -> int:
    from gpu.paths import for_set

    check_output(args.output)
    vs = vectors.load(args.input, allow_large=args.allow_large)
    path = for_set(vs, args.path)
    t0 = time.perf_counter()
    res = path.run(vs)
    dt = time.perf_counter() - t0
    vectors.save(res, args.output)
    info = {"path": path.name, "dots": vs.num_dots, "seconds": dt, "output": str(args.output)}
    emit(args, f"wrote {args.output}: {vs.num_dots} dot products through GPU path {path.name} "
               f"in {dt:.3f} s", info)
    return 0
