"""What cuBLASLt's heuristic picks for a GEMM: ``cublasLtMatmulAlgoGetHeuristic`` through the
libcublasLt that torch has loaded (ctypes; no other package).

:func:`query` describes the call as torch hands it to cuBLAS (row-major torch tensors are
column-major transposes: D^T = B^T A^T, so cuBLAS's m, n are torch's N, M; FP8 wants A
transposed, "TN") and returns the first algorithm's attributes: algo id, tile, split-K count,
reduction scheme, CTA swizzling, custom option, stages, the workspace it needs and its waves
count. cuBLAS(Lt) may still launch another algorithm than the heuristic's first (torch's own
heuristic call differs in workspace or alignment); the record keeps both this answer and the
kernels the profiler saw, and says what was assumed. Any failure is recorded as text, never
raised: a record without a heuristic is still a record.
"""

from __future__ import annotations

import ctypes
import glob
import os
from typing import Any

__all__ = ["query", "ATTRIBUTES", "REDUCTION_SCHEMES", "WORKSPACE_BYTES"]

#: cublasLtMatmulAlgoConfigAttributes_t values read back, by name.
ATTRIBUTES = {"algo_id": 0, "tile_id": 1, "splitk_num": 2, "reduction_scheme": 3,
              "cta_swizzling": 4, "custom_option": 5, "stages_id": 6}
#: cublasLtReductionScheme_t.
REDUCTION_SCHEMES = {0: "none", 1: "inplace", 2: "compute_type", 4: "output_type"}
#: The workspace offered to the heuristic: torch's default for cuBLASLt on Hopper (32 MiB,
#: unless CUBLASLT_WORKSPACE_SIZE, in KiB, says otherwise).
WORKSPACE_BYTES = 32 << 20

_CUDA_R = {"fp32": 0, "tf32": 0, "fp16": 2, "bf16": 14, "e4m3": 28, "e5m2": 29}
_COMPUTE_32F, _COMPUTE_32F_FAST_TF32 = 68, 77
_DESC_TRANSA, _DESC_TRANSB = 3, 4
_PREF_MAX_WORKSPACE = 1


class _Algo(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64 * 8)]


class _Result(ctypes.Structure):
    _fields_ = [("algo", _Algo), ("workspaceSize", ctypes.c_size_t), ("state", ctypes.c_int),
                ("wavesCount", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


def _library() -> ctypes.CDLL:
    """libcublasLt as torch loaded it (already in the process), else the first on disk."""
    try:
        return ctypes.CDLL("libcublasLt.so.13", mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
    except OSError:
        pass
    import torch
    base = os.path.dirname(torch.__file__)
    for pattern in (os.path.join(base, "..", "nvidia", "*", "lib", "libcublasLt.so*"),
                    os.path.join(base, "lib", "libcublasLt.so*")):
        for path in sorted(glob.glob(pattern)):
            return ctypes.CDLL(path)
    return ctypes.CDLL("libcublasLt.so")


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what} returned cuBLAS status {status}")


def query(torch, vs, call) -> dict[str, Any]:
    """The heuristic's first algorithm for ``call`` on ``vs``'s shape, or ``{"error": ...}``."""
    try:
        return _query(vs, call)
    except Exception as exc:                      # recorded, not raised: see the docstring
        return {"error": f"{type(exc).__name__}: {exc}"}


def _query(vs, call) -> dict[str, Any]:
    lt = _library()
    fmt = vs.a_format
    m, n, k = vs.m, vs.n, vs.k
    workspace = int(os.environ.get("CUBLASLT_WORKSPACE_SIZE", WORKSPACE_BYTES >> 10)) << 10
    out_fmt = {"own": fmt if fmt in ("bf16", "fp16") else "fp32", "fp32": "fp32",
               "bf16": "bf16"}[call.out]
    compute = _COMPUTE_32F_FAST_TF32 if fmt == "tf32" or (fmt == "fp32" and call.tf32) else \
        _COMPUTE_32F
    fp8 = fmt in ("e4m3", "e5m2")
    handle = ctypes.c_void_p()
    _check(lt.cublasLtCreate(ctypes.byref(handle)), "cublasLtCreate")
    desc, pref = ctypes.c_void_p(), ctypes.c_void_p()
    layouts = [ctypes.c_void_p() for _ in range(4)]
    try:
        _check(lt.cublasLtMatmulDescCreate(ctypes.byref(desc), ctypes.c_int(compute),
                                           ctypes.c_int(0)),
               "cublasLtMatmulDescCreate")
        # torch: D^T (N x M, col-major) = B^T (N x K) . A^T (K x M); FP8 wants "TN"
        op_t, op_n = ctypes.c_int(1), ctypes.c_int(0)
        trans_a = op_t if fp8 else op_n
        four, eight = ctypes.c_size_t(4), ctypes.c_size_t(8)     # size_t, never a bare int
        _check(lt.cublasLtMatmulDescSetAttribute(desc, _DESC_TRANSA, ctypes.byref(trans_a),
                                                 four), "set TRANSA")
        _check(lt.cublasLtMatmulDescSetAttribute(desc, _DESC_TRANSB, ctypes.byref(op_n), four),
               "set TRANSB")
        shapes = [((k, n, k) if fp8 else (n, k, n), _CUDA_R[vs.b_format]),   # A = B^T
                  ((k, m, k), _CUDA_R[fmt]),                                 # B = A^T
                  ((n, m, n), _CUDA_R[out_fmt]), ((n, m, n), _CUDA_R[out_fmt])]
        for lay, ((rows, cols, ld), dtype) in zip(layouts, shapes, strict=True):
            _check(lt.cublasLtMatrixLayoutCreate(ctypes.byref(lay), ctypes.c_int(dtype),
                                                 ctypes.c_uint64(rows),
                                                 ctypes.c_uint64(cols), ctypes.c_int64(ld)),
                   "cublasLtMatrixLayoutCreate")
        _check(lt.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)),
               "cublasLtMatmulPreferenceCreate")
        ws = ctypes.c_uint64(workspace)
        _check(lt.cublasLtMatmulPreferenceSetAttribute(pref, _PREF_MAX_WORKSPACE,
                                                       ctypes.byref(ws), eight),
               "set MAX_WORKSPACE_BYTES")
        results = (_Result * 1)()
        count = ctypes.c_int(0)
        _check(lt.cublasLtMatmulAlgoGetHeuristic(handle, desc, *layouts, pref, ctypes.c_int(1),
                                                 results, ctypes.byref(count)),
               "cublasLtMatmulAlgoGetHeuristic")
        if count.value < 1:
            return {"error": "the heuristic returned no algorithm"}
        best = results[0]
        out: dict[str, Any] = {}
        for name, attr in ATTRIBUTES.items():
            value, written = ctypes.c_int32(0), ctypes.c_size_t(0)
            _check(lt.cublasLtMatmulAlgoConfigGetAttribute(ctypes.byref(best.algo), attr,
                                                           ctypes.byref(value), four,
                                                           ctypes.byref(written)),
                   f"read {name}")
            out[name] = int(value.value)
        out["reduction_scheme_name"] = REDUCTION_SCHEMES.get(out["reduction_scheme"],
                                                             str(out["reduction_scheme"]))
        out["workspace_needed"] = int(best.workspaceSize)
        out["waves"] = float(best.wavesCount)
        out["assumed"] = {"workspace_bytes": workspace, "compute_type": compute,
                          "layout": "TN" if fp8 else "NN", "out": out_fmt,
                          "not_set": "fast accumulation, scale pointers, epilogue (bias)"}
        return out
    finally:
        if pref.value:
            lt.cublasLtMatmulPreferenceDestroy(pref)
        for lay in layouts:
            if lay.value:
                lt.cublasLtMatrixLayoutDestroy(lay)
        if desc.value:
            lt.cublasLtMatmulDescDestroy(desc)
        lt.cublasLtDestroy(handle)
