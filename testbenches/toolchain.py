"""Locate the simulators the testbenches run: the ``rtl`` extra's Verilator (located by
:mod:`hdl.toolchain`, whose helpers are re-exported here) and, when installed, Icarus."""

from __future__ import annotations

import shutil

from hdl.toolchain import verilator_env, verilator_root, verilator_version, yosys_command

__all__ = ["verilator_root", "verilator_version", "verilator_env", "yosys_command",
           "icarus_available"]


def icarus_available() -> bool:
    """True when Icarus Verilog (``iverilog`` and ``vvp``) is on ``PATH``."""
    return shutil.which("iverilog") is not None and shutil.which("vvp") is not None
