"""cuBLASLt FP8 GEMMs through ``torch._scaled_mm`` (Hopper, sm_90).

``scaled_mm(vs, fast_accum=...)`` runs an unscaled FP8 vector set as
``torch._scaled_mm(a, b_colmajor, 1.0, 1.0, out_dtype=torch.float32, use_fast_accum=...)``.
cuBLASLt runs Hopper's ``wgmma.mma_async...k32.f32.e4m3|e5m2`` instructions; with K = 32 each
output is exactly one wgmma k-step (there is nothing to chain or promote), which is why the
``wgmma`` path is this call with K = 32. ``_scaled_mm`` takes no C, so vector sets for it have
none (an absent C is +0 in the model, which is what a zeroed accumulator holds). The per-tensor
scales are exactly 1.0, so the epilogue multiplies by 1.0 and changes no bit.
"""

from __future__ import annotations

import numpy as np

from mxsim.errors import UnitError
from mxsim.vectors import VectorSet

from .device import capability, device_info, torch_unavailable_reason

__all__ = ["unavailable_reason", "scaled_mm", "PAIRS"]

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


def scaled_mm(vs: VectorSet, *, fast_accum: bool = True) -> VectorSet:
    """D = A·B of an unscaled FP8 vector set on the local GPU; FP32 bit patterns in ``d``."""
    reason = unavailable_reason()
    if reason is not None:
        raise UnitError(f"cublas path unavailable: {reason}")
    if (vs.a_format, vs.b_format) not in PAIRS:
        raise UnitError(f"cuBLASLt FP8 GEMM takes {', '.join(f'{a}x{b}' for a, b in PAIRS)}, "
                        f"not {vs.a_format}x{vs.b_format}")
    if vs.scale_format is not None or vs.c is not None:
        raise UnitError("the cublas path runs unscaled sets without C (generate with --no-c)")
    if vs.m % 16 or vs.n % 16 or vs.k % 16:
        raise UnitError(f"cuBLASLt FP8 needs M, N and K multiples of 16, not {vs.m}, {vs.n}, "
                        f"{vs.k}")
    import torch
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    a_all = torch.from_numpy(vs.a.reshape(nb, vs.m, vs.k)).cuda()
    b_all = torch.from_numpy(np.ascontiguousarray(
        np.swapaxes(vs.b.reshape(nb, vs.k, vs.n), 1, 2))).cuda()
    one = torch.ones((), dtype=torch.float32, device="cuda")
    ta, tb = _torch_dtype(torch, vs.a_format), _torch_dtype(torch, vs.b_format)
    out = torch.empty((nb, vs.m, vs.n), dtype=torch.float32, device="cuda")
    for i in range(nb):
        a = a_all[i].view(ta)
        b = b_all[i].view(tb).t()                  # column-major (K, N), as cuBLASLt wants
        out[i] = torch._scaled_mm(a, b, one, one, out_dtype=torch.float32,
                                  use_fast_accum=fast_accum)
    d = out.view(torch.int32).cpu().numpy().view(np.uint32).reshape(vs.batch_shape
                                                                    + (vs.m, vs.n))
    return vs.with_result(d, producer="gpu cublas torch._scaled_mm",
                          path="cublas-fast" if fast_accum else "cublas",
                          use_fast_accum=fast_accum, device=device_info())
