"""A foreign design (any MX dot-product RTL a port map describes) as a verification backend.

:class:`ForeignBackend` builds the map's sources with cocotb's runner (Verilator by default,
``-Wno-fatal -Wno-lint -Wno-style`` and x-initial unique, so only the reset gives the
registers a value; Icarus where asked and installed) and runs the generic cocotb test
:mod:`testbenches.foreign.tb`. Everything is prepared with numpy before the simulator starts:
the port values of every instruction (``PortMap.pack``) and the stimulus's valid-gap and ready
patterns. The test drives the map's handshake (valid-ready, start-done, fixed-latency
pipeline or combinational), records the trace (:class:`mxsim.microarch.cycle.Trace`) and the raw
words of
every result port of every result, and :func:`finish` checks them: values with
``PortMap.compare`` against the numerics engine, cycles with :mod:`testbenches.foreign.timing`
against
what the map declares. :mod:`testbenches.foreign.bulk` runs the same protocol in generated C++.

With the map's ``[probes]`` (unless a backend is made with ``probes=False``) both harnesses
also sample internal signals (:mod:`testbenches.foreign.probing`) and the run carries them
(``ForeignRun.probes``), for :func:`testbenches.foreign.localise.localise`.

A run's results file (written by both harnesses, read by :func:`read_results`): u32 magic
``MXR1``, u32 ports, u64 results, u32 words per port, u64 cycle of each result, then per
port its words, result by result (least significant word first); little-endian.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mxsim.errors import MxsimError
from mxsim.microarch import MicroArch, cycle
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

from ..sim.backend import Mismatch, MismatchKind, Run, Stimulus
from ..sim.toolchain import (
    SIMULATORS,
    cocotb_build,
    cocotb_runner,
    icarus_available,
    last_waveform,
    simulator_env,
)
from . import timing
from .localise import localise
from .probing import channels, collect, read_probes

__all__ = ["Plan", "plan_of", "MapDesign", "ForeignBackend", "ForeignRun", "read_results",
           "write_results", "finish", "Recorded", "design_key", "stimulus_arrays", "array_lows",
           "check_ports", "RESULTS_MAGIC"]

RESULTS_MAGIC = 0x3152584D
#: Verilator's arguments for a foreign design's build (warnings are the design's business).
VERILATOR_ARGS = ("-Wno-fatal", "-Wno-lint", "-Wno-style")


@dataclass(frozen=True)
class Plan:
    """What a harness needs of a port map, as plain data (JSON for the cocotb test): the top
    module, clock and reset (``reset_level``: the active level), the handshake ports (None
    where the map names none; start-done's ``start``/``done`` are ``in_valid``/``out_valid``),
    its latency and interval, and the result ports in the order ``PortMap.decode`` reads."""
    kind: str
    top: str
    clock: str | None
    reset: str | None
    reset_level: int
    reset_cycles: int
    in_valid: str | None
    in_ready: str | None
    out_valid: str | None
    out_ready: str | None
    latency: int
    interval: int
    latency_exact: bool
    results: tuple[str, ...]

    @property
    def idle_limit(self) -> int:
        """Cycles without a handshake after which a run stops (the design hangs)."""
        return 16 * (self.latency + self.interval) + 256

    def declared(self, per_dot: int) -> timing.Declared:
        return timing.Declared(self.kind, self.latency, self.interval, self.latency_exact,
                               self.out_valid is not None, self.out_ready is not None, per_dot)

    def handshake_ports(self) -> set[str]:
        return {p for p in (self.clock, self.reset, self.in_valid, self.in_ready,
                            self.out_valid, self.out_ready) if p}


def plan_of(pm: Any) -> Plan:
    """The :class:`Plan` of a :class:`testbenches.foreign.portmap.PortMap`."""
    hs, reset = pm.handshake, pm.reset
    start_done = hs.kind == "start-done"
    return Plan(
        kind=hs.kind, top=pm.design.top, clock=pm.clock.port if pm.clock else None,
        reset=reset.port if reset else None,
        reset_level=int(reset.active == "high") if reset else 1,
        reset_cycles=reset.cycles if reset else 0,
        in_valid=hs.start if start_done else hs.in_valid, in_ready=hs.in_ready,
        out_valid=hs.done if start_done else hs.out_valid, out_ready=hs.out_ready,
        latency=hs.latency or 0, interval=hs.interval or 1,
        latency_exact=hs.latency_is != "max",
        results=tuple(dict.fromkeys(f.port for f in pm.output_fields())))


def _resolve(pm: Any, paths) -> list[Path]:
    base = Path(pm.path).resolve().parent
    return [(base / p).resolve() for p in paths]


def design_key(pm: Any, parameters: dict, *extra: str) -> str:
    """A digest of everything a build of ``pm``'s design depends on: the sources' and
    included files' contents, defines, ``parameters``, top module (and ``extra``)."""
    d = pm.design
    h = hashlib.sha256()
    for src in _resolve(pm, d.sources):
        h.update(str(src).encode() + b"\0" + src.read_bytes() + b"\0")
    for inc in _resolve(pm, d.include_dirs):
        for f in sorted(p for p in inc.rglob("*") if p.is_file()):
            h.update(str(f).encode() + b"\0" + f.read_bytes() + b"\0")
    h.update(json.dumps([dict(d.defines), parameters, d.top, *extra],
                        sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


# ---- the results file -------------------------------------------------------------------

def write_results(path: str | Path, cycles: npt.ArrayLike,
                  raw: dict[str, npt.NDArray[np.uint32]]) -> None:
    """Write a results file (layout in the module docstring); ``raw[port]``: (results, words)."""
    cyc = np.asarray(cycles, "<u8")
    with open(path, "wb") as f:
        f.write(np.array([RESULTS_MAGIC, len(raw)], "<u4").tobytes())
        f.write(np.uint64(len(cyc)).tobytes())
        f.write(np.array([a.shape[1] for a in raw.values()], "<u4").tobytes())
        f.write(cyc.tobytes())
        for a in raw.values():
            f.write(np.ascontiguousarray(a, "<u4").tobytes())


def read_results(path: str | Path, ports: tuple[str, ...]
                 ) -> tuple[npt.NDArray[np.int64], dict[str, npt.NDArray[np.uint32]]]:
    """The cycle of each result and each port's raw words, ``(results, words)``, of a results
    file whose ports are ``ports`` in order.

    Raises
    ------
    MxsimError
        If the file is not one whole results file for ``ports``.
    """
    raw = Path(path).read_bytes()
    head = np.frombuffer(raw, "<u4", 2) if len(raw) >= 16 else None
    if head is None or int(head[0]) != RESULTS_MAGIC or int(head[1]) != len(ports):
        raise MxsimError(f"{path} is not a results file of {len(ports)} ports; rerun")
    n = int(np.frombuffer(raw, "<u8", 1, 8)[0])
    words = np.frombuffer(raw, "<u4", len(ports), 16).astype(int)
    off = 16 + 4 * len(ports)
    if len(raw) != off + 8 * n + 4 * n * int(words.sum()):
        raise MxsimError(f"{path} is cut short ({len(raw)} bytes for {n} results); rerun")
    cycles = np.frombuffer(raw, "<u8", n, off).astype(np.int64)
    off += 8 * n
    out = {}
    for port, w in zip(ports, words.tolist(), strict=True):
        out[port] = np.frombuffer(raw, "<u4", n * w, off).reshape(n, w).astype(np.uint32)
        off += 4 * n * w
    return cycles, out


# ---- checking a run ---------------------------------------------------------------------

@dataclass
class ForeignRun(Run):
    """A :class:`~testbenches.sim.backend.Run` of a foreign design, with the cycle each result was
    read, the raw words of every result port (``raw[port]``: (results, words)) and the
    results as ``PortMap.decode`` reads them."""
    result_cycles: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    raw: dict[str, npt.NDArray[np.uint32]] = field(default_factory=dict)
    results: Any = None
    #: the map's [probes] as sampled, by probe name (:class:`~.probing.Samples`: per
    #: instruction, in issue order); empty where the map has none or probes were off
    probes: dict[str, Any] = field(default_factory=dict)


@dataclass
class Recorded:
    """What a harness recorded in one run: the trace, the cycle of each result, each result
    port's raw words, and the time taken (the run, and its clocked loop alone)."""
    trace: cycle.Trace
    result_cycles: npt.NDArray[np.int64]
    raw: dict[str, npt.NDArray[np.uint32]]
    seconds: float
    loop_seconds: float
    waveform: str | None = None
    probes: dict[str, Any] = field(default_factory=dict)


def finish(pm: Any, plan: Plan, spec: UnitSpec, vs: VectorSet, beats: Any,
           rec: Recorded) -> ForeignRun:
    """Check a recorded run of ``beats`` (``pm.pack(spec, vs)``): values
    (``PortMap.compare`` of the decoded results against the engine's), every instruction
    taken, and the declared timing; the run."""
    from mxsim.engine import fast
    pm = pm.resolve(spec)
    want = fast.dot(spec, vs).reshape(-1)
    trace, raw = rec.trace, rec.raw
    results = pm.decode(raw)
    trace.results = results.fp32_codes().tolist()
    mismatches: list[Mismatch] = list(pm.compare(results, want, d_format=spec.d_format))
    if pm.status is not None:
        from mxsim.engine.flags import status_flags

        from .portmap.codec import compare_flags
        mismatches += compare_flags(results, status_flags(spec, vs))
    taken, instructions = int((trace.in_valid & trace.in_ready).sum()), beats.instructions
    if taken != instructions:
        mismatches.append(Mismatch(MismatchKind.CYCLE, note=f"{taken} of {instructions} "
                                                            f"instructions taken in "
                                                            f"{trace.cycles} cycles"))
    mismatches += timing.check(plan.declared(beats.per_dot), trace, rec.result_cycles)
    return ForeignRun(vs.num_dots, taken, trace.cycles, trace, mismatches, rec.seconds,
                      rec.loop_seconds, rec.waveform, want, result_cycles=rec.result_cycles,
                      raw=raw, results=results, probes=rec.probes)


def stimulus_arrays(plan: Plan, beats: Any, stimulus: Stimulus) -> dict[str, npt.NDArray]:
    """The inputs of one run as named arrays: each driven port's words (``in:PORT``), the
    valid-gap and ready patterns (all ready without an ``out_ready`` port), per_dot."""
    ready = stimulus.ready if plan.out_ready is not None else np.ones(1, bool)
    out = {"gaps": np.asarray(stimulus.gaps, bool), "ready": np.asarray(ready, bool),
           "per_dot": np.int64(beats.per_dot)}
    for port, words in beats.ports.items():
        if port not in plan.handshake_ports():
            out[f"in:{port}"] = np.ascontiguousarray(words, np.uint32)
    return out


def array_lows(pm: Any, beats: Any) -> dict[str, npt.NDArray]:
    """``low:PORT``: the lowest index of each unpacked array port (lane i is index low + i)."""
    return {f"low:{port}": np.int64(getattr(pm.ports.get(port), "low", 0))
            for port, words in beats.ports.items() if words.ndim == 3}


# ---- the cocotb backend -----------------------------------------------------------------

#: A first build of a foreign design is one Verilator run of its sources with cocotb: the
#: 32-lane generated unit through its port map takes about as long as its native build.
BUILD_SECONDS = {"verilator": 120}


class MapDesign:
    """What :func:`testbenches.unit.verify.verify` asks of a backend about the design behind its
    port map ``pm`` (the :class:`testbenches.sim.backend.Backend` attributes): its name (the
    map's file name), whether it chains instructions (first/last/clear controls), whether it
    takes C, and whether it has a valid/ready output handshake."""
    pm: Any

    @property
    def design(self) -> str:
        return Path(self.pm.path).stem

    @property
    def max_blocks(self) -> int | None:
        acc = self.pm.accumulator
        chains = acc.kind == "internal" or acc.first is not None or acc.last is not None
        return None if chains else 1

    @property
    def takes_c(self) -> bool:
        return self.pm.accumulator.c is not None

    @property
    def backpressure(self) -> bool:
        hs = self.pm.handshake
        return hs.kind == "valid-ready" and hs.out_ready is not None

    def adapt(self, spec: UnitSpec, vs: VectorSet, seed: int) -> VectorSet:
        """Stimulus ``vs`` (its C already in the spec's d_format:
        :func:`testbenches.unit.stimulus.stimulus`) with every dot product inside the map's
        ``[domain]`` (see :meth:`testbenches.foreign.portmap.domain.Domain.constrain`)."""
        pm = self.pm.resolve(spec)
        if pm.domain is not None:
            vs = pm.domain.constrain(vs, seed)
        return vs

    def localise(self, spec: UnitSpec, vs: VectorSet, run: Run, dots: list[int], *,
                 diagnose: bool = True) -> list[dict[str, Any]]:
        """Where each failing dot first goes wrong (:func:`.localise.localise`: the first
        probed node that differs, else, with ``diagnose``, what the result is consistent
        with)."""
        return localise(self.pm, spec, vs, run, dots, diagnose=diagnose)

    def unreachable(self) -> dict[str, set[str]]:
        """Coverage bins no input inside the map's ``[domain]`` can hit (not holes)."""
        if self.pm.domain is None:
            return {}
        return self.pm.domain.unreachable(self._spec, takes_c=self.takes_c)

    @property
    def probing(self) -> bool:
        """Whether runs sample the map's ``[probes]`` (it has some, and they are not off)."""
        return bool(self.pm.probes) and getattr(self, "probes", True)

    def prepare(self, spec: UnitSpec, fault: str | None) -> dict[str, int | str]:
        """The start of every build: no mutants (a foreign design injects its bugs with a
        define), the map checked against ``spec`` (and its probes' nodes against the spec's,
        when probing); the design's parameters for it."""
        if fault is not None:
            raise MxsimError(f"A foreign design has no mutants ({fault!r}); inject a bug with a "
                             f"define in its port map instead")
        self.pm.check_spec(spec)
        if self.probing:
            from .localise import unit_nodes
            from .portmap.probes import check_nodes
            nodes = unit_nodes(spec)
            if nodes is not None:
                check_nodes(self.pm, nodes, spec.name)
        self._spec = spec
        return self.pm.parameters(spec)


class ForeignBackend(MapDesign):
    """The generic cocotb test (:mod:`testbenches.foreign.tb`) on a port map's design, as a
    :class:`testbenches.sim.backend.Backend` (see the module docstring). ``build`` checks the map
    against the spec and the design's ports, then builds in a folder named by the design's
    digest (reused when the sources are unchanged)."""
    mode = "cocotb"

    def __init__(self, pm: Any, *, sim: str = "verilator", waves: bool = False,
                 probes: bool = True):
        if sim not in SIMULATORS:
            raise MxsimError(f"Simulator must be one of {', '.join(SIMULATORS)}, not {sim!r}")
        self.pm, self.sim, self.waves, self.probes = pm, sim, waves, probes
        self.plan = plan_of(pm)
        self._dir: Path | None = None
        self._spec: UnitSpec | None = None

    @property
    def what(self) -> str:
        return (f"{self.plan.top} with {'Verilator' if self.sim == 'verilator' else 'Icarus'}"
                + (" (with waveforms)" if self.waves else ""))

    @property
    def build_seconds(self) -> float | None:
        return BUILD_SECONDS.get(self.sim)

    @property
    def build_dir(self) -> Path | None:
        """The folder of the last build (a cocotb build of the design; None before one)."""
        return self._dir

    def build(self, spec: UnitSpec, microarch: MicroArch | None, out_dir: Path, *,
              fault: str | None = None) -> None:
        parameters = self.prepare(spec, fault)
        x_initial = self.sim == "verilator"
        key = design_key(self.pm, parameters, self.sim, str(self.waves), str(x_initial))
        out = (Path(out_dir) / f"foreign-{self.sim}-{self.plan.top}-{key}").resolve()
        out.mkdir(parents=True, exist_ok=True)
        check_ports(self.pm, out, spec, probes=self.probing)
        if (out / ".built").exists() and (out / ".built").read_text() == key:
            self._dir = out
            return
        (out / ".built").unlink(missing_ok=True)
        self._build(out, x_initial, parameters)
        (out / ".built").write_text(key)
        self._dir = out

    def _build(self, out: Path, x_initial: bool, parameters: dict) -> None:
        if self.sim == "icarus" and not icarus_available():
            raise MxsimError("Icarus Verilog is not installed (iverilog and vvp on PATH); use "
                             "--sim verilator")
        d = self.pm.design
        args = list(VERILATOR_ARGS) if self.sim == "verilator" else []
        if x_initial:
            args += ["--x-assign", "unique", "--x-initial", "unique"]
        cocotb_build(self.sim, sources=_resolve(self.pm, d.sources), top=d.top, build_dir=out,
                     log=out / "build.log", what=d.top, flags=args,
                     includes=_resolve(self.pm, d.include_dirs), defines=dict(d.defines),
                     parameters=parameters, waves=self.waves)

    def run(self, vs: VectorSet, stimulus: Stimulus, *, name: str = "run") -> ForeignRun:
        if self._dir is None or self._spec is None:
            raise RuntimeError("ForeignBackend.run needs a build() first")
        beats = self.pm.pack(self._spec, vs)
        out = self._dir
        tb = out / f"{name}.npz"
        chans = channels(self.pm) if self.probing else []
        plan = {**self.plan.__dict__, "idle": self.plan.idle_limit, "probes": chans}
        np.savez(tb, plan=np.array(json.dumps(plan)), seed=np.int64(stimulus.seed),
                 **stimulus_arrays(self.plan, beats, stimulus), **array_lows(self.pm, beats))
        paths = {"MXSIM_FTB": tb, "MXSIM_FTB_TRACE": out / f"{name}_trace.bin",
                 "MXSIM_FTB_RESULTS": out / f"{name}_results.bin",
                 "MXSIM_FTB_OUT": out / f"{name}_out.json"}
        if chans:
            paths["MXSIM_FTB_PROBES"] = out / f"{name}_probes.bin"
        for p in list(paths.values())[1:]:
            p.unlink(missing_ok=True)
        t0 = time.perf_counter()
        self._simulate(name, {k: str(v) for k, v in paths.items()}, stimulus.seed)
        seconds = time.perf_counter() - t0
        if not all(p.exists() for p in paths.values()):
            raise MxsimError(f"the simulation wrote no results; see {out / (name + '.log')}")
        summary = json.loads(paths["MXSIM_FTB_OUT"].read_text())
        trace = cycle.Trace.from_bytes(paths["MXSIM_FTB_TRACE"].read_bytes())
        cycles, raw = read_results(paths["MXSIM_FTB_RESULTS"], self.plan.results)
        probes = collect(self.pm, read_probes(paths["MXSIM_FTB_PROBES"], len(chans))) \
            if chans else {}
        return finish(self.pm, self.plan, self._spec, vs, beats,
                      Recorded(trace, cycles, raw, seconds, summary["loop_seconds"],
                               last_waveform(out) if self.waves else None, probes))

    def _simulate(self, name: str, env: dict[str, str], seed: int) -> None:
        out = self._dir
        plusargs = ([f"+verilator+seed+{seed + 1}", "+verilator+rand+reset+2"]
                    if self.sim == "verilator" else [])
        try:
            with simulator_env(self.sim) as pythonpath:
                cocotb_runner(self.sim).test(
                    test_module="testbenches.foreign.tb", hdl_toplevel=self.plan.top,
                    hdl_toplevel_lang="verilog", build_dir=out, test_dir=out,
                    plusargs=plusargs, waves=self.waves,
                    extra_env={**env, "PYTHONPATH": pythonpath},
                    results_xml=str(out / f"{name}.xml"), log_file=out / f"{name}.log")
        except SystemExit:
            pass              # under pytest the runner exits on a failed test: the files say

    def with_waves(self) -> ForeignBackend | None:
        return None if self.waves else ForeignBackend(self.pm, sim=self.sim, waves=True,
                                                      probes=self.probes)


def check_ports(pm: Any, work_dir: Path, spec: UnitSpec, *, probes: bool = False) -> None:
    """Refuse a map whose ports the design (elaborated for ``spec``) lacks or whose widths
    differ (``MapError``); after it the map knows the design's port widths. With ``probes``,
    its ``[probes]`` signals too (:func:`~.portmap.probes.check_signals`)."""
    from .portmap.ports import Hierarchy, design_tree, ports_of
    from .portmap.probes import check_signals
    tree = design_tree(pm, work_dir, spec)
    pm.check_ports(ports_of(pm, tree))
    if probes and pm.probes:
        check_signals(pm, Hierarchy(pm, tree).find)
