"""Bulk mode for a foreign design: a C++ Verilator harness generated from its port map.

The harness (``foreign_harness.cpp``, with a port-specific part :func:`harness_text`
generates) drives the map's handshake exactly as the cocotb test (:mod:`testbenches.foreign.tb`)
does, with no Python per cycle: every instruction's port words are copied whole into the
Verilated model's members (scalar ports ``CData``/``SData``/``IData``/``QData``, ports over 64
bits ``VlWide`` arrays of 32-bit words, unpacked array ports ``VlUnpacked``; C++ overloads pick
the copy, so no widths are generated). It writes the trace record
(:meth:`mxsim.microarch.cycle.Trace.from_bytes`) and the results file
(:func:`testbenches.foreign.backend.read_results`); :func:`testbenches.foreign.backend.finish`
checks both,
the values against the numerics engine and the cycles against the timing the map declares.
Registers start random (``Verilated::randReset(2)``), so only the reset gives them a value.
With the map's ``[probes]`` (and ``probes=True``, the default) the model is built with a
Verilator configuration file that makes the probed signals readable, and the harness samples
them into a probes file (:mod:`testbenches.foreign.probing`); without, the model and harness
are those of a map without probes. The harness times itself (``Run.phases``), and
:meth:`ForeignBulkBackend.ceiling` runs the same executable with no harness: Verilator's own
speed on the design (``benchmarks/bench_foreign.py`` measures the harness against it).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from mxsim.errors import MxsimError
from mxsim.microarch import MicroArch
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

from ..sim.backend import Stimulus
from ..unit.bulk import execute, read_trace
from .backend import (
    VERILATOR_ARGS,
    ForeignRun,
    MapDesign,
    Plan,
    Recorded,
    check_ports,
    design_key,
    finish,
    plan_of,
    read_results,
    stimulus_arrays,
)
from .probing import channels, collect, harness_lines, read_probes, vlt_text

__all__ = ["ForeignBulkBackend", "harness_text", "cxx_name"]

TEMPLATE = Path(__file__).with_name("harness.cpp")
STIMULUS_MAGIC = 0x3146584D
#: A first build: Verilator and g++ -O3 over the design and the harness (the 32-lane
#: generated unit takes about as long as its native bulk build).
BUILD_SECONDS = 60


def cxx_name(port: str) -> str:
    """The member a Verilated model gives port ``port`` (Verilator writes "__" as
    "___05F")."""
    return port.replace("__", "___05F")


def harness_text(plan: Plan, inputs: list[str], probes: list[str] | None = None) -> str:
    """The harness for a design with ``plan`` whose instructions drive the ports ``inputs``
    (in this order, as the stimulus file holds them); ``probes``: the lines that name its
    probe channels (:func:`testbenches.foreign.probing.harness_lines`; None: none)."""
    def member(port: str | None) -> str | None:
        return f"t->{cxx_name(port)}" if port else None

    def setter(port: str | None) -> str:
        return f"({member(port)} = (v))" if port else "((void)(v))"

    def getter(port: str | None) -> str:
        return f"((bool){member(port)})" if port else "(false)"

    kind = plan.kind
    lines = [f'#include "V{plan.top}.h"', f"typedef V{plan.top} Top;",
             f"#define KIND_VALID_READY {int(kind == 'valid-ready')}",
             f"#define KIND_PIPELINE {int(kind == 'pipeline')}",
             f"#define KIND_START_DONE {int(kind == 'start-done')}",
             f"#define HAS_OUT_VALID {int(plan.out_valid is not None)}",
             f"#define N_INPUTS {len(inputs)}", f"#define N_RESULTS {len(plan.results)}",
             f"#define CLK(v) {setter(plan.clock)}", f"#define RESET(v) {setter(plan.reset)}",
             f"#define IN_VALID(v) {setter(plan.in_valid)}",
             f"#define OUT_READY(v) {setter(plan.out_ready)}",
             f"#define IN_READY() {getter(plan.in_ready)}",
             f"#define OUT_VALID() {getter(plan.out_valid)}",
             f"#define RESULT_LOW32() low32({member(plan.results[0])})",
             *(probes or ["#define N_PROBES 0"]),
             "static inline void set_inputs(Top* t, const uint32_t* const* in, uint32_t n) {"]
    lines += [f"    put({member(p)}, in[{j}] + (size_t)n * words_of({member(p)}));"
              for j, p in enumerate(inputs)]
    lines += ["}", "static uint32_t input_words(Top* t, uint32_t j) {", "    switch (j) {"]
    lines += [f"    case {j}: return words_of({member(p)});" for j, p in enumerate(inputs)]
    lines += ["    }", "    return 0;", "}", "static uint32_t result_words(Top* t, int j) {",
              "    switch (j) {"]
    lines += [f"    case {j}: return words_of({member(p)});" for j, p in enumerate(plan.results)]
    lines += ["    }", "    return 0;", "}",
              "static inline void read_result(Top* t, int j, uint32_t* w) {", "    switch (j) {"]
    lines += [f"    case {j}: get({member(p)}, w); return;" for j, p in enumerate(plan.results)]
    lines += ["    }", "}"]
    return TEMPLATE.read_text().replace("// @GENERATED@", "\n".join(lines))


def _cflags() -> list[str]:
    """C++ optimisation: -O2, unless ``MAKEFLAGS`` sets Verilator's ``OPT_FAST`` (quicker
    builds for short runs, e.g. ``OPT_FAST=-O0 OPT_SLOW=-O0 OPT_GLOBAL=-O0``)."""
    return [] if "OPT_FAST" in os.environ.get("MAKEFLAGS", "") else ["-CFLAGS", "-O2"]


def _verilate(pm: Any, parameters: dict, out: Path, harness: Path, vlt: Path | None = None
              ) -> Path:
    from ..sim.toolchain import verilate
    d = pm.design
    base = Path(pm.path).resolve().parent
    flags = ["-O3", "--x-assign", "unique", "--x-initial", "unique", *VERILATOR_ARGS, "-j",
             str(os.cpu_count() or 2), *_cflags()]
    flags += [f"-D{k}={v}" for k, v in d.defines.items()]
    flags += [f'-G{k}="{v}"' if isinstance(v, str) else f"-G{k}={v}"
              for k, v in parameters.items()]
    verilate(out / "obj", [*([vlt] if vlt else []), *((base / s).resolve() for s in d.sources),
                           harness], top=d.top,
             log=out / "build.log", what=f"{d.top} with the bulk harness", flags=flags,
             includes=[(base / p).resolve() for p in d.include_dirs])
    exe = out / "obj" / f"V{d.top}"
    if not exe.exists():
        raise MxsimError(f"Verilator failed to build {d.top} with the bulk harness; see "
                         f"{out / 'build.log'}")
    return exe


class ForeignBulkBackend(MapDesign):
    """The generated bulk C++ harness on a port map's design, as a
    :class:`testbenches.sim.backend.Backend` (see the module docstring). It writes no
    waveforms."""
    mode = "bulk C++ harness"
    build_seconds = BUILD_SECONDS

    def __init__(self, pm: Any, *, probes: bool = True):
        self.pm, self.probes = pm, probes
        self.plan = plan_of(pm)
        self._exe: Path | None = None
        self._spec: UnitSpec | None = None

    @property
    def what(self) -> str:
        return f"{self.plan.top} with the bulk C++ harness (Verilator)"

    @property
    def executable(self) -> Path | None:
        """The harness the last build made (one per design and harness; None before one)."""
        return self._exe

    def build(self, spec: UnitSpec, microarch: MicroArch | None, out_dir: Path, *,
              fault: str | None = None) -> None:
        parameters = self.prepare(spec, fault)
        probing, config = self.probing, None
        key = design_key(self.pm, parameters, "bulk")
        if probing:              # another model: the probed signals are public in it
            check_ports(self.pm, Path(out_dir), spec, probes=True)
            config = vlt_text(self.pm)
            key = design_key(self.pm, parameters, "bulk", config)
        out = (Path(out_dir) / f"foreign-bulk-{self.plan.top}-{key}").resolve()
        out.mkdir(parents=True, exist_ok=True)
        if not probing:
            check_ports(self.pm, out, spec)
        self._inputs = [p for p in self.pm.data_ports() if p not in self.plan.handshake_ports()]
        text = harness_text(self.plan, self._inputs, harness_lines(self.pm) if probing else None)
        # One Verilated model per design; one executable per harness (maps of one design
        # differ in their harness only: make recompiles the harness alone).
        exe = out / f"V{self.plan.top}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
        if not exe.exists():
            harness = out / "harness.cpp"
            harness.write_text(text)
            vlt = None
            if config is not None:
                vlt = out / "probes.vlt"
                vlt.write_text(config)
            shutil.copy(_verilate(self.pm, parameters, out, harness, vlt), exe)
        self._exe = exe
        self._channels = len(channels(self.pm)) if probing else 0

    def run(self, vs: VectorSet, stimulus: Stimulus, *, name: str = "run") -> ForeignRun:
        if self._exe is None or self._spec is None:
            raise RuntimeError("ForeignBulkBackend.run needs a build() first")
        beats = self.pm.pack(self._spec, vs)
        work = self._exe.parent
        stim, trace_path, results_path = (work / f"{name}.stim", work / f"{name}_trace.bin",
                                          work / f"{name}_results.bin")
        outputs = [trace_path, results_path] + (
            [work / f"{name}_probes.bin"] if self._channels else [])
        self._write_stimulus(stim, beats, stimulus)
        for path in outputs:
            path.unlink(missing_ok=True)
        timings: dict = {}
        seconds = execute([self._exe, stim, *outputs], outputs, timings=timings)
        trace = read_trace(trace_path, work)
        cycles, raw = read_results(results_path, self.plan.results)
        probes = collect(self.pm, read_probes(outputs[2], self._channels)) \
            if self._channels else {}
        run = finish(self.pm, self.plan, self._spec, vs, beats,
                     Recorded(trace, cycles, raw, seconds, seconds, probes=probes))
        run.phases = timings
        return run

    def ceiling(self, vs: VectorSet, *, cycles: int | None = None) -> dict:
        """Verilator's own speed on the design built last: ``cycles`` cycles (None: one per
        instruction of ``vs``) at full throughput, the instructions of ``vs`` from memory,
        nothing recorded or checked (``harness.cpp --ceiling``). The harness's timings
        (``cycles``, ``loop_s``, ...) with ``cycles_per_s``, the clocked loop's rate."""
        if self._exe is None or self._spec is None:
            raise RuntimeError("ForeignBulkBackend.ceiling needs a build() first")
        ones = np.ones(1, bool)
        stim = self._exe.parent / "ceiling.stim"
        self._write_stimulus(stim, self.pm.pack(self._spec, vs), Stimulus(ones, ones))
        timings: dict = {}
        execute([self._exe, "--ceiling", stim, *([cycles] if cycles is not None else [])], [],
                timings=timings)
        return {**timings, "cycles_per_s": timings["cycles"] / timings["loop_s"]}

    def _write_stimulus(self, path: Path, beats: Any, stimulus: Stimulus) -> None:
        arrays = stimulus_arrays(self.plan, beats, stimulus)
        ports = [a for k, a in arrays.items() if k.startswith("in:")]
        if [k[3:] for k in arrays if k.startswith("in:")] != self._inputs:
            raise MxsimError(f"the port map packs ports {list(beats.ports)}, the harness was "
                             f"built for {self._inputs}; rebuild")
        n = beats.instructions
        words = [int(np.prod(a.shape[1:])) for a in ports]
        plan = self.plan
        head = [STIMULUS_MAGIC, n, len(ports), len(arrays["gaps"]), len(arrays["ready"]),
                stimulus.seed & 0xFFFFFFFF, beats.per_dot, plan.latency, plan.interval,
                plan.idle_limit, plan.reset_cycles, plan.reset_level]
        with open(path, "wb") as f:
            f.write(np.array(head + words, "<u4").tobytes())
            f.write(arrays["gaps"].astype(np.uint8).tobytes())
            f.write(arrays["ready"].astype(np.uint8).tobytes())
            for a in ports:
                f.write(np.ascontiguousarray(a, "<u4").tobytes())

    def with_waves(self) -> None:
        return None
