"""The ``gpu`` verb of ``mxsim``: the local GPU, which paths run on it, and a vector set
through one of them.

Registered with the command through the ``mxsim.verbs`` entry points (pyproject.toml), which
name :data:`GPU`; in a plain checkout (``PYTHONPATH=.``, no install) the command reads them
from pyproject.toml. The module imports argparse and the mxsim core only; torch is imported by
the runners, inside the verb, and ``gpu info`` says which paths cannot run without it.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from mxsim import vectors
from mxsim.cli.common import add_allow_large, emit
from mxsim.cli.verbs import Verb
from mxsim.output import check_output

__all__ = ["GPU", "cmd_gpu_info", "cmd_gpu_run"]


def _add_gpu(sub: Any) -> argparse.ArgumentParser:
    gp = sub.add_parser("gpu", help="run vector sets on the local NVIDIA GPU",
                        description="run vector sets on the local NVIDIA GPU, path by path")
    gsub = gp.add_subparsers(dest="gpu_command", metavar="ACTION", required=True)
    gi = gsub.add_parser("info", help="the device and which paths run here (and why not)")
    gi.set_defaults(func=cmd_gpu_info)
    gi.add_argument("--json", action="store_true", help="print JSON instead of text")
    gr = gsub.add_parser("run", help="run a vector set through one GPU path")
    gr.set_defaults(func=cmd_gpu_run)
    gr.add_argument("input", metavar="IN.npz")
    gr.add_argument("--path", default=None, metavar="PATH",
                    help="GPU path (see `mxsim gpu info`; default: the one a probe set names)")
    gr.add_argument("-o", "--output", required=True, metavar="OUT.npz", help="file to write")
    lib = gr.add_argument_group("library calls (paths cublas, cublas-fast, cublas-{fp16,bf16,"
                                "tf32}; docs/plans.md)")
    lib.add_argument("--call", default=None, choices=("mm", "matmul", "linear", "bmm",
                                                      "scaled_mm"),
                     help="the torch call (default: mm; scaled_mm for the FP8 paths)")
    lib.add_argument("--out", default=None, choices=("own", "fp32", "bf16"),
                     help="output dtype: the operands' own, FP32 (out_dtype=torch.float32), "
                          "or BF16 (scaled_mm) (default: fp32)")
    lib.add_argument("--bias", action="store_true",
                     help="linear: the set's C (one row repeated) as F.linear's bias")
    lib.add_argument("--no-tf32", action="store_true",
                     help="tf32 sets: run them with TF32 off (an FP32 GEMM)")
    add_allow_large(gr)
    gr.add_argument("--json", action="store_true", help="print JSON instead of text")
    return gp


def cmd_gpu_info(args: argparse.Namespace) -> int:
    """The local GPU and, for every path, whether it runs here and why not."""
    from .device import device_info
    from .paths import PATHS

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
    from .paths import for_set

    check_output(args.output)
    vs = vectors.load(args.input, allow_large=args.allow_large)
    path = for_set(vs, args.path)
    call = _library_call(args, path)
    t0 = time.perf_counter()
    res = path.run(vs) if call is None else path.run(vs, call=call)
    dt = time.perf_counter() - t0
    vectors.save(res, args.output)
    info = {"path": path.name, "dots": vs.num_dots, "seconds": dt, "output": str(args.output)}
    emit(args, f"wrote {args.output}: {vs.num_dots} dot products through GPU path {path.name} "
               f"in {dt:.3f} s", info)
    return 0


def _library_call(args: argparse.Namespace, path):
    """The :class:`gpu.hopper.library.Call` the options ask for, or None for none."""
    if args.call is None and args.out is None and not args.bias and not args.no_tf32:
        return None
    from mxsim.errors import MxsimError

    from .hopper.library import Call
    if path.name not in ("cublas", "cublas-fast", "cublas-fp16", "cublas-bf16", "cublas-tf32"):
        raise MxsimError(f"--call, --out, --bias and --no-tf32 are for the library paths "
                         f"(cublas, cublas-fast, cublas-fp16, cublas-bf16, cublas-tf32), not "
                         f"{path.name}")
    fp8 = path.name in ("cublas", "cublas-fast")
    return Call(fn=args.call or ("scaled_mm" if fp8 else "mm"), out=args.out or "fp32",
                tf32=not args.no_tf32, fast_accum=path.name == "cublas-fast", bias=args.bias)


#: The verb this package registers (pyproject.toml's ``mxsim.verbs`` entry points), at its
#: place in ``mxsim --help``. It needs no extra: a path that cannot run here says why.
GPU = Verb(name="gpu", rank=140, add=_add_gpu)
