"""The GPU engine (H1 owns this module; a minimal placeholder on the cuda branch)."""

from __future__ import annotations

__all__ = ["available"]


def available() -> bool:
    """True when CuPy imports and sees a CUDA device."""
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no device: all mean unavailable
        return False
