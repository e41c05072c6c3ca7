"""What GPU is here, and why a path cannot run when it cannot."""

from __future__ import annotations

import platform
from typing import Any

__all__ = ["device_info", "torch_unavailable_reason", "capability", "needs"]


def torch_unavailable_reason() -> str | None:
    """None when torch sees a CUDA GPU; otherwise one line saying why not."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA GPU"
    return None


def needs(module: str, min_capability: tuple[int, int], what: str) -> str | None:
    """None when ``module`` imports and GPU 0 has at least ``min_capability``; else why not."""
    import importlib

    try:
        importlib.import_module(module)
    except ImportError:
        return f"{module} is not installed"
    cap = capability()
    if cap is None:
        return torch_unavailable_reason() or "no CUDA GPU"
    if cap < min_capability:
        return (f"{what} needs compute capability {min_capability[0]}.{min_capability[1]} or "
                f"newer, not {cap[0]}.{cap[1]}")
    return None


def capability() -> tuple[int, int] | None:
    """Compute capability of GPU 0, or None without one."""
    if torch_unavailable_reason() is not None:
        return None
    import torch
    return torch.cuda.get_device_capability(0)


def device_info() -> dict[str, Any]:
    """Provenance of results: GPU, capability, driver, CUDA, torch and cuBLAS versions."""
    info: dict[str, Any] = {"host": platform.node(), "python": platform.python_version()}
    reason = torch_unavailable_reason()
    if reason is not None:
        info["gpu"] = None
        info["reason"] = reason
        return info
    import torch
    props = torch.cuda.get_device_properties(0)
    info.update(gpu=props.name, capability=".".join(map(str, capability())),
                multiprocessors=props.multi_processor_count, torch=torch.__version__,
                cuda=torch.version.cuda, cublas=_cublas_version())
    try:
        import subprocess
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=False)
        info["driver"] = out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        info["driver"] = None
    return info


def _cublas_version() -> str | None:
    """cuBLAS's version, read from the library torch has loaded (None if it cannot be)."""
    import ctypes

    for soname in ("libcublas.so.13", "libcublas.so.12", "libcublas.so"):
        try:
            lib = ctypes.CDLL(soname, mode=1)
        except OSError:
            continue
        parts = []
        for prop in (0, 1, 2):                 # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
            value = ctypes.c_int()
            if lib.cublasGetProperty(prop, ctypes.byref(value)) != 0:
                return None
            parts.append(str(value.value))
        return ".".join(parts)
    return None
