"""The GPU engine: the fast engine's arithmetic on an NVIDIA GPU, through CuPy.

:func:`dot` computes exactly what :func:`mxsim.engine.fast.dot` computes (the same code, run
on CuPy arrays: every array the fast engine creates comes from the module of its inputs,
:mod:`mxsim.engine.xp`); a fused step runs in the CUDA kernel of :mod:`.kernels` where it
applies and that module is there, else in the numpy-style step on the GPU. The operands go to
the GPU once (:mod:`.array`); D comes back as numpy codes unless ``device_out``. Where
``fast.fused.applies``, each dot is computed whole in ``chain.cu`` (codes in, D out).
:func:`available` says whether CuPy and a CUDA device are there. CuPy is imported only when a
function here is called.
"""

from __future__ import annotations

from typing import Any

from ...errors import UnitError
from ...spec import UnitSpec
from ...vectors import VectorSet

__all__ = ["available", "dot", "require", "why_unavailable"]


def why_unavailable() -> str | None:
    """None when the GPU engine can run here, else why not (a few words)."""
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed"
    except Exception as exc:                  # a broken CUDA install fails on import
        return f"CuPy cannot be imported: {type(exc).__name__}"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception:                         # cupy raises its own CUDARuntimeError
        return "no CUDA device"
    return None if count > 0 else "no CUDA device"


def available() -> bool:
    """True when CuPy imports and sees an NVIDIA GPU."""
    return why_unavailable() is None


def require() -> None:
    """Raise the engine's one-line UnitError unless :func:`available`."""
    why = why_unavailable()
    if why is not None:
        raise UnitError(f"engine 'gpu' needs CuPy and an NVIDIA GPU ({why}); use --engine fast")


def dot(spec: UnitSpec, vs: VectorSet, *, device_out: bool = False, kernel: bool = True,
        whole: bool = True) -> Any:
    """D = A·B + C of ``vs`` as ``spec`` computes it, on the GPU: codes of ``spec.d_format``,
    bit-equal to :func:`mxsim.engine.fast.dot`.

    ``vs`` holds numpy arrays (checked here) or CuPy arrays already on the GPU; D is a numpy
    array, or a CuPy array with ``device_out``. ``kernel=False`` keeps every fused step in the
    numpy-style code (the same bits); ``whole=False`` runs the step kernel where the whole-dot
    kernel (``chain.cu``) applies (the same bits). Raises UnitError where the GPU engine cannot
    run or the vectors do not fit the spec."""
    require()
    from .. import fast
    from .array import to_device, to_host
    spec.check_vectors(vs)
    d = fast.dot(spec, to_device(vs), kernel=_kernels() if kernel else False, whole=whole)
    return d if device_out else to_host(d)


def _kernels():
    """The CUDA step kernels (:mod:`.kernels`), or False where that module is missing."""
    try:
        from . import kernels
    except ImportError:
        return False
    return kernels
