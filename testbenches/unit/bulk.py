"""Bulk mode: millions of dot products through the Verilog with no Python per cycle.

A small C++ harness (``harness.cpp``) is built with the Verilated model. Everything is prepared
with numpy before it runs: the packed payload of every beat (:mod:`hdl.payload`, one row of
32-bit words), the valid-gap and ready patterns. The harness drives the testbenches' protocol
and writes the whole trace (every cycle's valid and ready bits and output payload) as the
record :meth:`mxsim.microarch.cycle.Trace.from_bytes` reads. Python then checks the values against
the
numerics engine bit for bit, and every handshake's cycle and every cycle of the trace against
the cycle model (:func:`testbenches.sim.backend.check`); the trace also gives the handshake
coverage. :class:`BulkBackend` is this as a verification backend.
Registers start random (``Verilated::randReset(2)``) with their initial values stripped from
the Verilog, so only the reset gives them a value.

The harness times itself (reading the stimulus, the clocked loop, writing the trace:
:attr:`testbenches.sim.backend.Run.phases`), and :func:`ceiling` runs the same executable with
no harness: Verilator's own speed on the model, stimulus in memory and nothing recorded or
checked, against which ``benchmarks/bench_verify.py`` measures the harness.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np

from mxsim.engine import fast
from mxsim.errors import MxsimError
from mxsim.microarch import MicroArch, cycle
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

from ..sim.backend import Run, Stimulus, check, design_tag
from ..sim.toolchain import run_tool

__all__ = ["BulkBackend", "build", "run", "ceiling", "execute", "read_trace"]

HARNESS = Path(__file__).with_name("harness.cpp")
MAGIC = 0x3142584D


def build(spec: UnitSpec, microarch: MicroArch, build_dir: str | Path, *,
          fault: str | None = None) -> Path:
    """Verilate a design the RTL builds (as :func:`mxsim.design.resolve_design` checks it)
    with the bulk harness; the executable (``fault``: a mutant)."""
    from ..sim.toolchain import verilate
    from .faults import verilog_text
    from .runner import strip_initial_values

    out = Path(build_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    src = out / "mx_dot.v"
    text = strip_initial_values(verilog_text(spec, microarch, fault))
    exe = out / "obj" / "Vmx_dot"
    if exe.exists() and src.exists() and src.read_text() == text and \
            (out / "harness.cpp").read_text() == HARNESS.read_text():
        return exe                                   # built from this very Verilog already
    src.write_text(text)
    shutil.copy(HARNESS, out / "harness.cpp")
    verilate(out / "obj", [src, out / "harness.cpp"], top="mx_dot", log=out / "build.log",
             what="the bulk harness",
             flags=["-O3", "--x-assign", "unique", "--x-initial", "unique", "-Wno-fatal",
                    "-Wno-lint", "-Wno-style", "-j", str(os.cpu_count() or 2), "-CFLAGS", "-O2"])
    if not exe.exists():
        raise MxsimError(f"Verilator failed to build the bulk harness; see {out / 'build.log'}")
    return exe


def run(exe: str | Path, spec: UnitSpec, microarch: MicroArch, vs: VectorSet,
        stimulus: Stimulus, *, check_timing: bool = True) -> Run:
    """Simulate every dot product of ``vs`` on the bulk executable; every result checked
    (:func:`testbenches.sim.backend.check`, with ``check_timing`` every cycle too)."""
    from hdl.payload import payload_words

    exe = Path(exe)
    work = exe.parent
    words = payload_words(spec, vs)
    stim = _write_stimulus(work / "stimulus.bin", words, stimulus)
    want = fast.dot(spec, vs).reshape(-1)
    result = work / "result.bin"
    result.unlink(missing_ok=True)
    phases: dict = {}
    sim_s = execute([exe, stim, result, len(want)], [result], ok=(0, 1), timings=phases)
    trace = read_trace(result, work.parent)
    mismatches = check(spec, microarch, vs, trace, stimulus, timing=check_timing, want=want)
    return Run(len(want), words.shape[0], trace.cycles, trace, mismatches, sim_s, sim_s,
               want=want, phases=phases)


def _write_stimulus(path: Path, words: np.ndarray, stimulus: Stimulus) -> Path:
    """The stimulus file the harness reads (its header comment spells the record)."""
    gaps, ready = stimulus.gaps, stimulus.ready
    with open(path, "wb") as f:
        np.array([MAGIC, words.shape[0], words.shape[1], len(gaps), stimulus.seed],
                 "<u4").tofile(f)
        gaps.astype(np.uint8).tofile(f)
        ready.astype(np.uint8).tofile(f)
        np.ascontiguousarray(words, "<u4").tofile(f)
    return path


def ceiling(exe: str | Path, spec: UnitSpec, vs: VectorSet, *, cycles: int | None = None
            ) -> dict:
    """Verilator's own speed on the bulk executable's model: ``cycles`` cycles (None: one per
    beat of ``vs``) at full throughput, the beats of ``vs`` from memory, nothing recorded or
    checked (``harness.cpp --ceiling``). The harness's timings (``cycles``, ``loop_s``, ...)
    with ``cycles_per_s``, the clocked loop's rate."""
    from hdl.payload import payload_words

    exe = Path(exe)
    stim = _write_stimulus(exe.parent / "ceiling.bin", payload_words(spec, vs),
                           Stimulus(np.ones(1, bool), np.ones(1, bool)))
    timings: dict = {}
    execute([exe, "--ceiling", stim, *([cycles] if cycles is not None else [])], [],
            timings=timings)
    return {**timings, "cycles_per_s": timings["cycles"] / timings["loop_s"]}


def execute(cmd: list, outputs: list[Path], *, ok: tuple[int, ...] = (0,),
            timings: dict | None = None) -> float:
    """Run a bulk harness (``cmd``, each part as a string); the seconds it took, and in
    ``timings`` (when given) the harness's own, from the JSON line it prints last. Raises
    MxsimError (its stderr, cut) unless it exits with a code in ``ok`` having written every
    file of ``outputs``."""
    t0 = time.perf_counter()
    p = run_tool(cmd)
    seconds = time.perf_counter() - t0
    if p.returncode not in ok or not all(path.exists() for path in outputs):
        raise MxsimError(f"the bulk harness failed: {p.stderr.strip()[:300]}")
    if timings is not None:
        lines = p.stdout.strip().splitlines()
        timings.update(json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {})
    return seconds


def read_trace(path: Path, build: Path) -> cycle.Trace:
    """The trace record a bulk harness wrote at ``path``; MxsimError naming the ``build`` to
    delete when it is not one (a harness built before the record changed)."""
    try:
        return cycle.Trace.from_bytes(path.read_bytes())
    except ValueError as exc:
        raise MxsimError(f"the bulk harness wrote no trace record ({exc}); rebuild it (delete "
                         f"{build})") from None


#: How long a first build takes on a 2-core machine, for the progress line (later runs reuse
#: the build): the 32-lane MXFP8 unit of `make demo` took 49 s as the bulk harness on
#: 2026-12-01 (a machine shared with other jobs).
BUILD_SECONDS = 60


class BulkBackend:
    """The bulk C++ harness as a :class:`testbenches.sim.backend.Backend`: built by :func:`build`,
    run by :func:`run`. It writes no waveforms."""
    mode = "bulk C++ harness"
    what = "the bulk C++ harness with Verilator"
    build_seconds = BUILD_SECONDS
    design, max_blocks, takes_c, backpressure = None, None, True, True

    def __init__(self) -> None:
        self._exe: Path | None = None

    def build(self, spec: UnitSpec, microarch: MicroArch, out_dir: Path, *,
              fault: str | None = None) -> None:
        self._spec, self._microarch = spec, microarch
        folder = Path(out_dir) / f"bulk-{design_tag(spec, microarch, fault)}"
        self._exe = build(spec, microarch, folder, fault=fault)

    @property
    def executable(self) -> Path | None:
        """The harness the last build made (None before one)."""
        return self._exe

    def run(self, vs: VectorSet, stimulus: Stimulus, *, name: str = "run") -> Run:
        if self._exe is None:
            raise RuntimeError("BulkBackend.run needs a build() first")
        return run(self._exe, self._spec, self._microarch, vs, stimulus)

    def ceiling(self, vs: VectorSet, *, cycles: int | None = None) -> dict:
        """:func:`ceiling` on the harness built last."""
        if self._exe is None:
            raise RuntimeError("BulkBackend.ceiling needs a build() first")
        return ceiling(self._exe, self._spec, vs, cycles=cycles)

    def with_waves(self) -> None:
        return None
