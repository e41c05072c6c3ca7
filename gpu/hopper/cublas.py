"""cuBLASLt FP8 GEMMs through ``torch._scaled_mm`` (Hopper, sm_90).

``scaled_mm(vs, fast_accum=...)`` runs an unscaled FP8 vector set as
``torch._scaled_mm(a, b_colmajor, 1.0, 1.0, out_dtype=torch.float32, use_fast_accum=...)``.
cuBLASLt runs Hopper's ``wgmma.mma_async...k32.f32.e4m3|e5m2`` instructions; with K = 32 each
output is exactly one wgmma k-step (there is nothing to chain or promote), which is why the
``wgmma`` path is this call with K = 32. ``_scaled_mm`` takes no C, so vector sets for it have
none (an absent C is +0 in the model, which is what a zeroed accumulator holds). The per-tensor
scales are exactly 1.0, so the epilogue multiplies by 1.0 and changes no bit.

``matmul16(vs)`` runs fp16, bf16 and tf32 sets (no C) through ``torch.mm`` with an FP32
result: the ``cublas-{fp16,bf16,tf32}`` paths.
"""

from __future__ import annotations

import numpy as np

from mxsim.errors import UnitError
from mxsim.vectors import VectorSet

from ..device import capability, device_info, torch_unavailable_reason
from ..runner import require, require_operands

__all__ = ["unavailable_reason", "scaled_mm", "scale_tensors", "matmul16", "kernel_names", "PAIRS",
           "MM16_FORMATS", "ScaledMm", "Wgmma", "Cublas16"]

#: cuBLASLt refuses e5m2 x e5m2 FP8 GEMMs.
PAIRS = (("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3"))


def unavailable_reason() -> str | None:
    reason = torch_unavailable_reason()
    if reason is not None:
        return reason
    cap = capability()
    if cap < (8, 9):
        return f"FP8 _scaled_mm needs compute capability 8.9 or newer, not {cap[0]}.{cap[1]}"
    return None


def _torch_dtype(torch, fmt: str):
    return {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[fmt]


def scaled_mm(vs: VectorSet, *, fast_accum: bool = True, out_format: str = "fp32"
              ) -> VectorSet:
    """D = A·B of an FP8 vector set on the local GPU; ``d`` in ``out_format`` (fp32 or bf16).

    Unscaled sets run with per-tensor scales of exactly 1.0. FP32 scales are passed as the
    set holds them: per tensor (shape ()), row-wise ((M, 1) and (1, N)) or DeepSeek-style
    block-wise ((M, K/128) for A, (K/128, N/128) for B; cuBLASLt applies these inside its
    main loop, needs K/128 a multiple of 4 and refuses fast accumulation). A refusal by
    torch/cuBLAS comes back as one UnitError line.
    """
    reason = unavailable_reason()
    if reason is not None:
        raise UnitError(f"cublas path unavailable: {reason}")
    if (vs.a_format, vs.b_format) not in PAIRS:
        raise UnitError(f"cuBLASLt FP8 GEMM takes {', '.join(f'{a}x{b}' for a, b in PAIRS)}, "
                        f"not {vs.a_format}x{vs.b_format}")
    if vs.scale_format not in (None, "fp32") or vs.c is not None:
        raise UnitError("the cublas path takes unscaled or FP32-scaled sets without C "
                        "(generate with --no-c)")
    if vs.m % 16 or vs.n % 16 or vs.k % 16:
        raise UnitError(f"cuBLASLt FP8 needs M, N and K multiples of 16, not {vs.m}, {vs.n}, "
                        f"{vs.k}")
    if out_format not in ("fp32", "bf16"):
        raise UnitError(f"out_format must be fp32 or bf16, not {out_format!r}")
    import torch
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n, k = vs.m, vs.n, vs.k
    a_all = torch.from_numpy(vs.a.reshape(nb, m, k)).cuda()
    b_all = torch.from_numpy(np.ascontiguousarray(np.swapaxes(vs.b.reshape(nb, k, n), 1, 2))
                             ).cuda()
    out_dtype = torch.float32 if out_format == "fp32" else torch.bfloat16
    ta, tb = _torch_dtype(torch, vs.a_format), _torch_dtype(torch, vs.b_format)
    out = torch.empty((nb, m, n), dtype=out_dtype, device="cuda")
    for i in range(nb):
        sa, sb = scale_tensors(torch, vs, nb, i)
        a = a_all[i].view(ta)
        b = b_all[i].view(tb).t()                  # column-major (K, N), as cuBLASLt wants
        try:
            out[i] = torch._scaled_mm(a, b, sa, sb, out_dtype=out_dtype,
                                      use_fast_accum=fast_accum)
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            raise UnitError(f"torch._scaled_mm refused this set: {first}") from None
    raw = torch.int32 if out_format == "fp32" else torch.int16
    d = out.view(raw).cpu().numpy().view(np.uint32 if out_format == "fp32" else np.uint16)
    granularity = ("none" if vs.scale_format is None else "tensor" if vs.a_scale.ndim == 0
                   else "block" if vs.block == 128 else "row")
    return vs.with_result(d.reshape(vs.batch_shape + (m, n)), d_format=out_format,
                          producer="gpu cublas torch._scaled_mm",
                          path="cublas-fast" if fast_accum else "cublas",
                          use_fast_accum=fast_accum, scale_granularity=granularity,
                          device=device_info())


def scale_tensors(torch, vs: VectorSet, nb: int, i: int):
    """The CUDA scale tensors ``torch._scaled_mm`` takes for batch entry ``i`` of ``nb`` (1.0
    for unscaled sets; block-wise FP32 scales outer-dim-major, as cuBLASLt reads them)."""
    if vs.scale_format is None:
        one = torch.ones((), dtype=torch.float32, device="cuda")
        return one, one
    sa, sb = vs.a_scale, vs.b_scale
    if sa.ndim > 2:
        sa = sa.reshape((nb,) + sa.shape[-2:])[i]
        sb = sb.reshape((nb,) + sb.shape[-2:])[i]
    if vs.block == 128:
        # cuBLASLt's VEC128 / BLK128x128 modes read both scale tensors outer-dim-major:
        # shapes (M, K/128) and (K/128, N/128) with stride 1 along their first axis
        # (PyTorch's own tests build them with .t().contiguous().t()).
        return (torch.from_numpy(np.ascontiguousarray(sa.T)).cuda().t(),
                torch.from_numpy(np.ascontiguousarray(sb.T)).cuda().t())
    return (torch.from_numpy(np.ascontiguousarray(sa)).cuda(),
            torch.from_numpy(np.ascontiguousarray(sb)).cuda())


#: Operand formats of :func:`matmul16` and the K of one Hopper wgmma instruction on them.
MM16_FORMATS = {"fp16": 16, "bf16": 16, "tf32": 8}


def matmul16(vs: VectorSet) -> VectorSet:
    """D = A·B of an fp16, bf16 or tf32 set without C through cuBLAS; ``d`` in FP32.

    fp16/bf16: ``torch.mm(a, b, out_dtype=torch.float32)`` (FP32 accumulation and output).
    tf32: ``torch.mm`` on FP32 words whose low 13 bits are zero with TF32 allowed
    (``torch.backends.cuda.matmul.allow_tf32``), restored afterwards. A refusal by torch comes
    back as one UnitError line.
    """
    reason = torch_unavailable_reason()
    if reason is not None:
        raise UnitError(f"cublas path unavailable: {reason}")
    if vs.a_format != vs.b_format or vs.a_format not in MM16_FORMATS:
        raise UnitError(f"cuBLAS 16-bit GEMM here takes fp16, bf16 or tf32 operands of one "
                        f"format, not {vs.a_format} x {vs.b_format}")
    if vs.scale_format is not None or vs.c is not None:
        raise UnitError("the cuBLAS 16-bit path takes unscaled sets without C (generate with "
                        "--no-c)")
    if vs.m % 16 or vs.n % 16 or vs.k % MM16_FORMATS[vs.a_format]:
        raise UnitError(f"the cuBLAS 16-bit path needs M and N multiples of 16 and K of "
                        f"{MM16_FORMATS[vs.a_format]}, not {vs.m}, {vs.n}, {vs.k}")
    import torch
    fmt = vs.a_format
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n, k = vs.m, vs.n, vs.k

    def operand(x):
        if fmt == "tf32":
            words = (x.astype(np.uint32) << np.uint32(13)).view(np.int32)
            return torch.from_numpy(words).cuda().view(torch.float32)
        dt = torch.float16 if fmt == "fp16" else torch.bfloat16
        return torch.from_numpy(x.astype(np.uint16).view(np.int16)).cuda().view(dt)

    a_all = operand(np.ascontiguousarray(vs.a.reshape(nb, m, k)))
    b_all = operand(np.ascontiguousarray(vs.b.reshape(nb, k, n)))
    out = torch.empty((nb, m, n), dtype=torch.float32, device="cuda")
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = fmt == "tf32"
        for i in range(nb):
            if fmt == "tf32":
                out[i] = torch.mm(a_all[i], b_all[i])
            else:
                out[i] = torch.mm(a_all[i], b_all[i], out_dtype=torch.float32)
        torch.cuda.synchronize()
    except (RuntimeError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        raise UnitError(f"torch.mm refused this set: {first}") from None
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    d = out.view(torch.int32).cpu().numpy().view(np.uint32)
    return vs.with_result(d.reshape(vs.batch_shape + (m, n)), d_format="fp32",
                          producer="gpu cublas torch.mm", path=f"cublas-{fmt}",
                          call="torch.mm(a, b, out_dtype=torch.float32)" if fmt != "tf32"
                          else "torch.mm(a, b) with allow_tf32", device=device_info())


class Cublas16:
    """The ``cublas-{fp16,bf16,tf32}`` paths (:class:`gpu.runner.Runner`): :func:`matmul16`."""

    def __init__(self, fmt: str):
        self.fmt = fmt
        self.name = f"cublas-{fmt}"
        self.summary = (f"cuBLAS GEMM on {fmt} through torch.mm, FP32 output, no C "
                        f"(wgmma on Hopper)")
        self.instruction = ("torch.mm(..., out_dtype=torch.float32)" if fmt != "tf32" else
                            "torch.mm with allow_tf32")
        #: The preset the H200 run compares it with (docs/gpu.md, Hopper 16-bit section).
        self.preset = "hopper-wgmma-" + ("f16" if fmt == "fp16" else fmt)

    def __repr__(self) -> str:
        return f"Cublas16({self.fmt!r})"

    def unavailable_reason(self) -> str | None:
        return torch_unavailable_reason()

    def run(self, vs: VectorSet, call=None) -> VectorSet:
        """``torch.mm`` with FP32 output at any shape torch accepts (or ``call``, a
        :class:`gpu.hopper.library.Call`), with the record of what ran."""
        from .library import Call, run_call
        require_operands(self, vs, self.fmt)
        return run_call(vs, self.name, call or Call("mm", out="fp32"))


class ScaledMm:
    """The ``cublas-fast`` and ``cublas`` paths (:class:`gpu.runner.Runner`): :func:`scaled_mm`."""

    instruction = "torch._scaled_mm (cuBLASLt FP8 GEMM)"

    def __init__(self, fast_accum: bool):
        self.fast_accum = fast_accum
        self.name = "cublas-fast" if fast_accum else "cublas"
        self.summary = ("torch._scaled_mm FP8, use_fast_accum=True, per-tensor/row-wise/"
                        "block-wise FP32 scales" if fast_accum else
                        "torch._scaled_mm FP8, use_fast_accum=False (promoted accumulation)")
        self.preset = "hopper-cublas-fast" if fast_accum else None

    def __repr__(self) -> str:
        return f"ScaledMm(fast_accum={self.fast_accum})"

    def unavailable_reason(self) -> str | None:
        return unavailable_reason()

    def run(self, vs: VectorSet, call=None) -> VectorSet:
        """``torch._scaled_mm`` at any shape torch accepts (or ``call``), with the record of
        what ran; block-wise scales go through :func:`scaled_mm`."""
        from .library import Call, run_call
        require(self)
        if vs.scale_format == "fp32" and vs.block == 128:
            if call is not None:
                raise UnitError("block-wise scaled sets run as the plain cublas call only")
            return scaled_mm(vs, fast_accum=self.fast_accum)
        call = call or Call("scaled_mm", out="fp32", fast_accum=self.fast_accum)
        if call.fn != "scaled_mm" or call.fast_accum != self.fast_accum:
            raise UnitError(f"GPU path {self.name} is torch._scaled_mm with use_fast_accum="
                            f"{self.fast_accum}; give --call scaled_mm and "
                            f"{'--fast-accum' if self.fast_accum else 'no --fast-accum'}")
        return run_call(vs, self.name, call)


class Wgmma:
    """The ``wgmma`` path: cuBLASLt with K = 32, one wgmma k32 step per output."""

    name = "wgmma"
    summary = "cuBLASLt FP8 via torch._scaled_mm with K = 32: one wgmma k32 step per output"
    instruction = "wgmma.mma_async.sync.aligned.m64nNk32.f32.{e4m3,e5m2}.{e4m3,e5m2}"
    preset = "hopper-wgmma"

    def unavailable_reason(self) -> str | None:
        return unavailable_reason()

    def run(self, vs: VectorSet) -> VectorSet:
        require(self)
        if vs.k != 32:
            raise UnitError(f"The wgmma path runs K = 32 sets only (one wgmma k-step per output "
                            f"through cuBLASLt), not K = {vs.k}")
        res = scaled_mm(vs, fast_accum=True)
        return res.with_result(res.d, producer=res.producer, path="wgmma")


def kernel_names(fmt: str, m: int, n: int, k: int) -> list[str]:
    """The CUDA kernels cuBLAS ran for one :func:`matmul16` of ``fmt`` (torch's profiler)."""
    from torch.profiler import ProfilerActivity, profile

    codes = np.zeros((m, k), np.uint32 if fmt == "tf32" else np.uint16)
    vs = VectorSet(a=codes, b=np.zeros((k, n), codes.dtype), a_format=fmt, b_format=fmt)
    matmul16(vs)                                                  # warm-up: handles, heuristics
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        matmul16(vs)
    return sorted({e.key for e in prof.key_averages() if "memcpy" not in e.key.lower()
                   and "memset" not in e.key.lower()})
