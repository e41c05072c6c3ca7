"""Library GEMM calls as users make them, at any shape the library accepts, with a record of
what ran.

:func:`run_call` runs a vector set through one torch call on the local GPU:

- ``mm``, ``matmul``, ``linear`` (``F.linear(a, b.T, bias)``) and ``bmm`` (a set with one batch
  axis) on fp32 (TF32 on or off), tf32 (FP32 words, TF32 on), bf16 and fp16 operands, with the
  operands' own output dtype or FP32 output (``out_dtype=torch.float32``);
- ``scaled_mm``: ``torch._scaled_mm`` on e4m3/e5m2 with per-tensor or row-wise FP32 scales (as
  the set holds them), FP32 or BF16 output, fast accumulation on or off.

A bias (``linear`` only) is the set's C, one row repeated (a set's C whose rows differ is
refused). Nothing here checks the shape: a shape the library refuses comes back as one
UnitError line in the library's own words.

Every result carries ``record`` in its meta (docs/vectors.md, "Library records"): the kernels
torch's profiler saw for the call (GEMM and reduce), the cuBLASLt heuristic's first algorithm
for that call where it can be asked (:func:`gpu.hopper.heuristic.query`), the GPU and its SM
count, the torch/CUDA/cuBLAS versions, and every switch that changes numerics.

``device`` is ``"cuda"`` on a GPU; ``"cpu"`` runs the same calls through torch's CPU kernels
(no profiler kernels, no heuristic): the tests use it to check the calls and conversions.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from mxsim.errors import UnitError
from mxsim.vectors import VectorSet

__all__ = ["Call", "run_call", "CALLS", "OUTS", "numeric_switches", "TORCH_FORMATS"]

#: The calls :func:`run_call` makes.
CALLS = ("mm", "matmul", "linear", "bmm", "scaled_mm")
#: Output choices: the operands' own dtype, FP32, or BF16 (scaled_mm).
OUTS = ("own", "fp32", "bf16")
#: Operand formats by torch dtype name.
TORCH_FORMATS = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16",
                 "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


@dataclass(frozen=True)
class Call:
    """One library call: which function, output dtype, TF32, fast accumulation, bias."""
    fn: str = "mm"
    out: str = "fp32"
    tf32: bool = True             #: FP32/TF32 operands: TF32 allowed
    fast_accum: bool = False      #: scaled_mm only
    bias: bool = False            #: linear only: the set's C (one row) as the bias

    def __post_init__(self) -> None:
        if self.fn not in CALLS:
            raise UnitError(f"call must be one of {', '.join(CALLS)}, not {self.fn!r}")
        if self.out not in OUTS:
            raise UnitError(f"output must be one of {', '.join(OUTS)}, not {self.out!r}")
        if self.bias and self.fn != "linear":
            raise UnitError("a bias goes with the linear call (F.linear) only")

    def text(self, fmt: str) -> str:
        """The call in torch's words."""
        out = "" if self.out == "own" else (", out_dtype=torch.float32" if self.out == "fp32"
                                            else ", out_dtype=torch.bfloat16")
        if self.fn == "scaled_mm":
            return (f"torch._scaled_mm(a, b, scale_a, scale_b{out or ', out_dtype=' + fmt}, "
                    f"use_fast_accum={self.fast_accum})")
        if self.fn == "linear":
            return f"F.linear(a, w{', bias' if self.bias else ''})" + (
                f" on {fmt}" + (" (TF32 on)" if fmt in ("fp32", "tf32") and self.tf32 else ""))
        tf = f" (TF32 {'on' if self.tf32 else 'off'})" if fmt in ("fp32", "tf32") else ""
        return f"torch.{self.fn}(a, b{out}) on {fmt}{tf}"


def numeric_switches(torch) -> dict[str, Any]:
    """Every torch/cuBLAS switch that changes a GEMM's bits, as now set."""
    m = torch.backends.cuda.matmul
    out: dict[str, Any] = {
        "allow_tf32": bool(m.allow_tf32),
        "allow_bf16_reduced_precision_reduction": _plain(
            getattr(m, "allow_bf16_reduced_precision_reduction", None)),
        "allow_fp16_reduced_precision_reduction": _plain(
            getattr(m, "allow_fp16_reduced_precision_reduction", None)),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "CUBLAS_WORKSPACE_CONFIG": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        "CUBLASLT_WORKSPACE_SIZE": os.environ.get("CUBLASLT_WORKSPACE_SIZE"),
        "TORCH_BLAS_PREFER_CUBLASLT": os.environ.get("TORCH_BLAS_PREFER_CUBLASLT"),
    }
    precision = getattr(m, "fp32_precision", None)
    if precision is not None:
        out["fp32_precision"] = str(precision)
    return out


def _plain(x: Any) -> Any:
    return x if isinstance(x, (bool, int, float, str, type(None))) else str(x)


def _operand(torch, x: np.ndarray, fmt: str, device: str):
    """Codes as a torch tensor of the format's dtype (tf32: FP32 words, low 13 bits zero)."""
    if fmt == "tf32":
        words = (x.astype(np.uint32) << np.uint32(13)).view(np.int32)
        return torch.from_numpy(np.ascontiguousarray(words)).to(device).view(torch.float32)
    if fmt == "fp32":
        return torch.from_numpy(np.ascontiguousarray(x.astype(np.uint32).view(np.int32))
                                ).to(device).view(torch.float32)
    if fmt in ("bf16", "fp16"):
        dt = torch.bfloat16 if fmt == "bf16" else torch.float16
        return torch.from_numpy(np.ascontiguousarray(x.astype(np.uint16).view(np.int16))
                                ).to(device).view(dt)
    dt = getattr(torch, TORCH_FORMATS[fmt])
    return torch.from_numpy(np.ascontiguousarray(x.astype(np.uint8))).to(device).view(dt)


def _codes(torch, t) -> tuple[np.ndarray, str]:
    """A result tensor as codes and their format."""
    if t.dtype == torch.float32:
        return t.contiguous().view(torch.int32).cpu().numpy().view(np.uint32), "fp32"
    fmt = {torch.bfloat16: "bf16", torch.float16: "fp16"}[t.dtype]
    return t.contiguous().view(torch.int16).cpu().numpy().view(np.uint16), fmt


def _bias(vs: VectorSet) -> np.ndarray:
    c = np.asarray(vs.c)
    rows = c.reshape(-1, c.shape[-1])
    if not (rows == rows[:1]).all():
        raise UnitError("a bias is the set's C with every row the same (a row vector "
                        "broadcast over M); this set's C rows differ")
    return rows[0]


def _launch(torch, call: Call, vs: VectorSet, device: str):
    """The torch call on the set's operands (the result tensor)."""
    fmt = vs.a_format
    a = _operand(torch, vs.a, fmt, device)
    b = _operand(torch, vs.b, vs.b_format, device)
    if call.fn == "scaled_mm":
        return _scaled(torch, call, vs, a, b, device)
    own = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(fmt, torch.float32)
    kw = {} if call.out == "own" or own == torch.float32 else {"out_dtype": torch.float32}
    if call.out == "bf16":
        raise UnitError("out bf16 is for scaled_mm; torch.mm writes its own dtype or FP32")
    if call.fn == "bmm":
        if a.dim() != 3:
            raise UnitError(f"bmm takes a set with one batch axis, not {vs.batch_shape}")
        return torch.bmm(a, b, **kw)
    if a.dim() != 2:
        raise UnitError(f"{call.fn} takes a set without batch axes here (use bmm), not "
                        f"{vs.batch_shape}")
    if call.fn == "mm":
        return torch.mm(a, b, **kw)
    if call.fn == "matmul":
        if kw:
            raise UnitError("torch.matmul has no out_dtype; use --out own or the mm call")
        return torch.matmul(a, b)
    bias = None
    if call.bias:
        bias = _operand(torch, _bias(vs), vs.c_format if vs.c_format != "fp32" else "fp32",
                        device)
        if bias.dtype != a.dtype:
            raise UnitError(f"F.linear wants a bias of the operands' dtype ({fmt}); generate "
                            f"the set with --c-format {fmt}")
    if kw:
        raise UnitError("F.linear has no out_dtype; use --out own")
    return torch.nn.functional.linear(a, b.t(), bias)


def _scaled(torch, call: Call, vs: VectorSet, a, b, device: str):
    if a.dim() != 2:
        raise UnitError(f"scaled_mm takes a set without batch axes, not {vs.batch_shape}")
    if vs.scale_format is None:
        sa = sb = torch.ones((), dtype=torch.float32, device=device)
    elif vs.scale_format == "fp32" and vs.block != 128:
        sa = torch.from_numpy(np.ascontiguousarray(vs.a_scale, np.float32)).to(device)
        sb = torch.from_numpy(np.ascontiguousarray(vs.b_scale, np.float32)).to(device)
    else:
        raise UnitError("scaled_mm here takes unscaled sets or FP32 per-tensor / row-wise "
                        "scales (block-wise ones: the cublas path)")
    out_dtype = torch.bfloat16 if call.out == "bf16" else torch.float32
    bt = b.t().contiguous().t()                       # column-major, as cuBLASLt wants
    return torch._scaled_mm(a, bt, sa, sb, out_dtype=out_dtype,
                            use_fast_accum=call.fast_accum)


def _first(exc: BaseException) -> str:
    """The library's own words, first line, first sentence when the line runs long."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else repr(exc)
    if len(first) > 200 and ". " in first:
        first = first[:first.index(". ") + 1]
    return first


def _kernels(torch, fn) -> list[str]:
    """The CUDA kernels one call of ``fn`` launched (torch's profiler), memcpy/memset left
    out, in launch order."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = []
    for e in prof.events():
        key = getattr(e, "name", "")
        if getattr(e, "device_type", None) is not None and "cuda" in str(e.device_type).lower() \
                and "memcpy" not in key.lower() and "memset" not in key.lower() \
                and key not in names:
            names.append(key)
    return names


def run_call(vs: VectorSet, path: str, call: Call, *, device: str = "cuda",
             heuristic: bool = True) -> VectorSet:
    """``vs`` with ``d`` from ``call`` on ``device`` and its record in the meta."""
    import torch

    if vs.scale_format not in (None, "fp32"):
        raise UnitError(f"the library calls take unscaled or FP32-scaled sets, not "
                        f"{vs.scale_format} block scales (Blackwell: the scaled-mm-mx path)")
    if vs.c is not None and not call.bias:
        raise UnitError("this call takes no C (generate the set with --no-c), except "
                        "F.linear's bias (--call linear --bias)")
    if call.bias and vs.c is None:
        raise UnitError("--bias takes the set's C as the bias: generate the set with C")
    fmt = vs.a_format
    if (call.fn == "scaled_mm") != (fmt in ("e4m3", "e5m2")):
        raise UnitError(f"{call.fn} does not take {fmt} operands (scaled_mm: e4m3/e5m2; the "
                        f"others: fp32, tf32, bf16, fp16)")
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        if fmt in ("tf32", "fp32"):
            torch.backends.cuda.matmul.allow_tf32 = call.tf32
        try:
            out = _launch(torch, call, vs, device)
            if device == "cuda":
                torch.cuda.synchronize()
        except (RuntimeError, TypeError, ValueError) as exc:
            raise UnitError(f"{call.text(fmt)} refused this set: {_first(exc)}") from None
        record: dict[str, Any] = {"call": call.text(fmt), "switches": numeric_switches(torch),
                                  "shape": [vs.m, vs.n, vs.k], "batch": list(vs.batch_shape)}
        if device == "cuda":
            from ..device import device_info
            record["kernels"] = _kernels(torch, lambda: _launch(torch, call, vs, device))
            record["device"] = device_info()
            if heuristic:
                from .heuristic import query
                record["heuristic"] = query(torch, vs, call)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    d, d_format = _codes(torch, out)
    if fmt == "tf32" and not call.tf32:
        path = "cublas-fp32"                # an FP32 GEMM: no TF32 plan models it
    return vs.with_result(d.reshape(vs.batch_shape + (vs.m, vs.n)), d_format=d_format,
                          producer=f"gpu {call.text(fmt)}", path=path, call=call.text(fmt),
                          record=record, **({"device": record["device"]}
                                            if "device" in record else {}))
