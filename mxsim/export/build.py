"""Compile an exported unit and run it on vector sets through ctypes.

:func:`compilers` finds gcc and clang; :func:`compile_library` builds a shared library from an
export folder with ``-std=c99 -Wall -Wextra -Werror`` (a warning is a failure, said in one
line); :class:`Library` runs a vector set through the library's ``PREFIX_dot_batch``, laying
each dot's row, column, scales and C out as the C API takes them, so its D can be held equal,
code for code, to the engines'.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ..errors import MxsimError
from ..spec import UnitSpec
from ..vectors import VectorSet

__all__ = ["compilers", "compile_library", "ZIG_CLANG", "Library", "STRICT", "batch_layout",
           "Trace", "StepTrace", "Val"]

#: The flags every exported file must compile under without a diagnostic.
STRICT = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic")


#: The clang that the ziglang wheel (PyPI) carries, run as ``python -m ziglang cc``.
ZIG_CLANG = "clang (zig cc)"


def compilers() -> dict[str, list[str]]:
    """The C compilers the export is checked with, name -> command: gcc and clang on PATH, and
    where no clang is, the clang of the ziglang wheel (``make test`` installs it)."""
    out = {c: [c] for c in ("gcc", "clang") if shutil.which(c)}
    if "clang" not in out and find_spec("ziglang") is not None:
        out[ZIG_CLANG] = [sys.executable, "-m", "ziglang", "cc"]
    return out


def compile_library(folder: Path, out: Path, *, cc: str | list[str] = "gcc", opt: str = "-O2",
                    extra: tuple[str, ...] = ()) -> Path:
    """``out``, a shared library of every ``.c`` in ``folder`` but the DPI glue (which needs a
    simulator's ``svdpi.h``), compiled with :data:`STRICT` by ``cc`` (a name on PATH, or a
    command); MxsimError with the compiler's first diagnostic on failure."""
    cmd0 = [cc] if isinstance(cc, str) else list(cc)
    name = " ".join(cmd0)
    if shutil.which(cmd0[0]) is None:
        raise MxsimError(f"{cmd0[0]}: not found on PATH; install a C compiler to build the "
                         f"export")
    sources = sorted(str(p) for p in Path(folder).glob("*.c") if not p.name.endswith("_dpi.c"))
    cmd = [*cmd0, *STRICT, opt, "-fPIC", "-shared", *extra, "-o", str(out), *sources]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0 or proc.stderr.strip():
        first = next((ln for ln in proc.stderr.splitlines() if ln.strip()), "no output")
        raise MxsimError(f"{name} failed on the export in {folder}: {first}")
    return out


def batch_layout(spec: UnitSpec, vs: VectorSet) -> dict[str, npt.NDArray | None]:
    """The arrays ``PREFIX_dot_batch`` takes for every dot of ``vs`` in the engines' order
    (batch, row, column): ``a`` and ``b`` (n, K), scales (n, per dot), ``c`` (n,)."""
    a = np.ascontiguousarray(np.broadcast_to(vs.a[..., :, None, :], vs.batch_shape + (
        vs.m, vs.n, vs.k)).reshape(-1, vs.k))
    bt = np.swapaxes(vs.b, -1, -2)                                  # (..., N, K)
    b = np.ascontiguousarray(np.broadcast_to(bt[..., None, :, :], vs.batch_shape + (
        vs.m, vs.n, vs.k)).reshape(-1, vs.k))
    out: dict[str, npt.NDArray | None] = {"a": a, "b": b, "a_scale": None, "b_scale": None,
                                          "c": None, "tensor_scale": None}
    shape = vs.batch_shape + (vs.m, vs.n)
    if vs.scale_format in ("e8m0", "ue4m3"):
        nb = vs.k // vs.block
        out["a_scale"] = np.ascontiguousarray(np.broadcast_to(
            vs.a_scale[..., :, None, :], shape + (nb,)).reshape(-1, nb)).astype(np.uint8)
        sbt = np.swapaxes(vs.b_scale, -1, -2)
        out["b_scale"] = np.ascontiguousarray(np.broadcast_to(
            sbt[..., None, :, :], shape + (nb,)).reshape(-1, nb)).astype(np.uint8)
    elif vs.scale_format == "fp32":
        out["a_scale"], out["b_scale"] = _fp32_scales(vs, shape)
    if vs.c is not None:
        out["c"] = np.ascontiguousarray(vs.c.reshape(-1).astype(np.uint32))
    if vs.tensor_scale is not None:
        out["tensor_scale"] = np.float32(vs.tensor_scale).view(np.uint32)
    return out


def _fp32_scales(vs: VectorSet, shape: tuple[int, ...]) -> tuple[npt.NDArray, npt.NDArray]:
    """FP32 scales per dot, as bits: one per operand (per tensor, row-wise) or K/128 each."""
    sa = np.asarray(vs.a_scale, np.float32).view(np.uint32)
    sb = np.asarray(vs.b_scale, np.float32).view(np.uint32)
    n = int(np.prod(shape))
    if sa.ndim == 0:
        return np.full((n, 1), sa, np.uint32), np.full((n, 1), sb, np.uint32)
    if vs.block == 128:
        nb = vs.k // 128
        a = np.broadcast_to(sa[..., :, None, :], shape + (nb,)).reshape(n, nb)
        cols = np.arange(vs.n) // 128
        sbt = np.swapaxes(sb, -1, -2)[..., cols, :]                   # (..., N, K/128)
        b = np.broadcast_to(sbt[..., None, :, :], shape + (nb,)).reshape(n, nb)
        return np.ascontiguousarray(a), np.ascontiguousarray(b)
    a = np.broadcast_to(sa, shape).reshape(n, 1)              # (..., M, 1) row-wise
    b = np.broadcast_to(sb, shape).reshape(n, 1)              # (..., 1, N)
    return np.ascontiguousarray(a), np.ascontiguousarray(b)


TRACE_TERMS, TRACE_STEPS = 256, 8          # MXSIM_TRACE_TERMS, MXSIM_TRACE_STEPS


class Val(ctypes.Structure):
    """``mxsim_val``: (-1)**neg * sig * 2**exp, or Inf/NaN (kind 1, 2)."""
    _fields_ = [("kind", ctypes.c_int32), ("neg", ctypes.c_int32), ("sig", ctypes.c_uint64),
                ("exp", ctypes.c_int32)]

    def value(self):
        """The exact value: a Fraction, or the string 'inf', '-inf' or 'nan'."""
        from fractions import Fraction
        if self.kind == 2:
            return "nan"
        if self.kind == 1:
            return "-inf" if self.neg else "inf"
        q = self.sig * Fraction(2) ** self.exp
        return -q if self.neg else q


class StepTrace(ctypes.Structure):
    """``mxsim_step_trace``: one fused step's terms, alignment, sum and result."""
    _fields_ = [("n_terms", ctypes.c_int32), ("has_acc", ctypes.c_int32),
                ("max_exp", ctypes.c_int32), ("lsb_exp", ctypes.c_int32),
                ("aligned_valid", ctypes.c_int32),
                ("term_exp", ctypes.c_int32 * (TRACE_TERMS + 1)),
                ("term", Val * (TRACE_TERMS + 1)), ("aligned", ctypes.c_int64 * (TRACE_TERMS + 1)),
                ("sum", ctypes.c_int64), ("result", Val)]


class Trace(ctypes.Structure):
    """``mxsim_trace``: an instruction's intermediates."""
    _fields_ = [("n_blocks", ctypes.c_int32), ("scale_exp_sum", ctypes.c_int32 * TRACE_TERMS),
                ("n_steps", ctypes.c_int32), ("step", StepTrace * TRACE_STEPS),
                ("n_nodes", ctypes.c_int32), ("node", Val * TRACE_TERMS), ("to_d", Val),
                ("result", Val), ("d", ctypes.c_uint32)]


class Library:
    """A compiled export, loaded with ctypes: ``dot(vs)`` gives D's codes for a vector set."""

    def __init__(self, path: Path, prefix: str, spec: UnitSpec):
        self.path, self.prefix, self.spec = Path(path), prefix, spec
        self._lib = ctypes.CDLL(str(path))
        p = ctypes.c_void_p
        self._batch = getattr(self._lib, f"{prefix}_dot_batch")
        self._batch.restype = None
        self._batch.argtypes = [ctypes.c_size_t, ctypes.c_size_t, p, p, p, p, p, p]
        self._ts = getattr(self._lib, f"{prefix}_dot_tensor_scaled", None)
        if self._ts is not None:
            self._ts.restype = ctypes.c_uint32
            self._ts.argtypes = [ctypes.c_size_t, p, p, p, p, ctypes.c_uint32, ctypes.c_uint32]

    def instruction_trace(self, a: npt.NDArray, b: npt.NDArray, a_scale: npt.NDArray | None,
                          b_scale: npt.NDArray | None, c: int) -> Trace:
        """One instruction through ``PREFIX_instr_trace``: its :class:`Trace` (``trace.d`` is
        D's code). ``a``, ``b``: one row's and one column's codes, in the API's dtypes."""
        f = getattr(self._lib, f"{self.prefix}_instr_trace")
        f.restype = ctypes.c_uint32
        p = ctypes.c_void_p
        f.argtypes = [p, p, p, p, ctypes.c_uint32, ctypes.POINTER(Trace)]
        t = Trace()
        keep = [np.ascontiguousarray(x) if x is not None else None
                for x in (a, b, a_scale, b_scale)]
        ptrs = [None if x is None else x.ctypes.data_as(p) for x in keep]
        f(*ptrs, c, ctypes.byref(t))
        return t

    def dot(self, vs: VectorSet) -> npt.NDArray:
        """D of every dot of ``vs`` (codes of the unit's d_format), shaped as the engines'."""
        lay = batch_layout(self.spec, vs)
        n = lay["a"].shape[0]
        d = np.zeros(n, np.uint32)

        def ptr(x):
            return None if x is None else x.ctypes.data_as(ctypes.c_void_p)

        if lay["tensor_scale"] is not None:
            self._tensor_scaled(lay, d, ptr)
        else:
            self._batch(n, vs.k, ptr(lay["a"]), ptr(lay["b"]), ptr(lay["a_scale"]),
                        ptr(lay["b_scale"]), ptr(lay["c"]), ptr(d))
        dtype = np.uint16 if self.spec.d_format in ("fp16", "bf16") else np.uint32
        return d.astype(dtype).reshape(vs.batch_shape + (vs.m, vs.n))

    def _tensor_scaled(self, lay, d, ptr) -> None:
        """One call per dot: ``PREFIX_dot_tensor_scaled`` (the exact unit's NVFP4 form)."""
        if self._ts is None:
            raise MxsimError(f"Unit {self.spec.name} does not apply a tensor_scale")
        k = lay["a"].shape[1]
        ts = int(lay["tensor_scale"])
        for i in range(d.size):
            rows = [None if lay[x] is None else lay[x][i]
                    for x in ("a", "b", "a_scale", "b_scale")]
            c = 0 if lay["c"] is None else int(lay["c"][i])
            d[i] = self._ts(k, *map(ptr, rows), c, ts)
