"""numba for the compiled kernels, with an on-disk cache that works from any checkout.

The kernels are compiled once and cached (``cache=True``): numba writes the cache beside the
source, in ``__pycache__``. Where that folder cannot be written (a read-only checkout or
install) and no ``NUMBA_CACHE_DIR`` is set, the cache goes to ``$XDG_CACHE_HOME/mxsim/numba``
(``~/.cache/mxsim/numba``), or failing that to a folder in the temporary directory; only when
none can be written are the kernels compiled in every process (:func:`cache` is False).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["load", "cache"]

_PACKAGE = Path(__file__).resolve().parent
_cache_ok: bool | None = None


def _writable(folder: Path) -> bool:
    """Whether files can be created in ``folder`` (made if missing), as numba checks."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError:
        return False
    return True


def _fallback_dirs() -> list[Path]:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return [Path(base) / "mxsim" / "numba", Path(tempfile.gettempdir()) / f"mxsim-numba-{uid}"]


def load():
    """The numba module, its cache folder chosen (raises ImportError without numba)."""
    global _cache_ok
    import numba

    if _cache_ok is None:
        if numba.config.CACHE_DIR or all(
                _writable(_PACKAGE / sub / "__pycache__") for sub in ("", "engine")):
            _cache_ok = True
        else:
            for folder in _fallback_dirs():
                if _writable(folder):
                    numba.config.CACHE_DIR = str(folder)
                    _cache_ok = True
                    break
            else:
                _cache_ok = False
    return numba


def cache() -> bool:
    """Whether compiled kernels can be cached on disk (call after :func:`load`)."""
    return bool(_cache_ok)
