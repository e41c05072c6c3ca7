"""Loading generated PTX on the local GPU: the driver JIT-compiles it through CuPy.

The text goes to a file and is loaded with ``cupy.RawModule(path=...)`` (the driver's
``cuModuleLoad`` compiles PTX; no NVRTC, no CUDA C). Arch-specific (``a``) PTX only compiles on
exactly that architecture, so the runners pick the target from the device first.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile

__all__ = ["load_kernel", "cupy_unavailable_reason"]


def cupy_unavailable_reason() -> str | None:
    """None when CuPy imports; otherwise why the PTX kernels cannot load."""
    try:
        import cupy  # noqa: F401
    except ImportError:
        return "cupy is not installed (the PTX kernels load through cupy.RawModule)"
    return None


@functools.lru_cache(maxsize=64)
def load_kernel(ptx: str):
    """The kernel of a PTX module, JIT-compiled by the driver for the local GPU; cached.

    The text goes to a file that lives as long as the process and is loaded with
    ``cupy.RawModule(path=...)`` (the driver's ``cuModuleLoad`` compiles PTX); fetching the
    function forces the load while the file exists.
    """
    import cupy
    path = os.path.join(_ptx_dir(), f"{_entry(ptx)}_{abs(hash(ptx)):x}.ptx")
    with open(path, "w") as f:
        f.write(ptx)
    return cupy.RawModule(path=path).get_function(_entry(ptx))


@functools.cache
def _ptx_dir() -> str:
    path = tempfile.mkdtemp(prefix="mxsim_ptx_")
    atexit.register(shutil.rmtree, path, True)
    return path


def _entry(ptx: str) -> str:
    return ptx.split(".visible .entry ", 1)[1].split("(", 1)[0]

