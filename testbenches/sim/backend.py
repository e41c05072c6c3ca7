"""The verification backend protocol: a way to run a unit's RTL on vector sets, cycle by cycle.

A :class:`Backend` builds one design (a ``UnitSpec`` built as a ``MicroArch``) once, then runs
vector sets under a handshake :class:`Stimulus`. Each :class:`Run` gives the design's output
codes and its per-cycle handshake trace (an :class:`mxsim.microarch.cycle.Trace`, recorded by the
testbenches' one protocol), and every :class:`Mismatch` against the numerics engine (values)
and the cycle model (handshakes and cycles). :func:`testbenches.unit.verify.verify` drives any
backend the same way; coverage is measured from the run's trace.

Backends: the cocotb testbench (``testbenches.unit.runner.CocotbBackend``; mismatches found by its
in-simulator scoreboard), the bulk C++ harness (``testbenches.unit.bulk.BulkBackend``) and
Amaranth's simulator (:class:`AmaranthBackend`); the last two are checked after the run by
:func:`check`, as a backend for another design (foreign RTL behind a port map) would be.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from mxsim.microarch import MicroArch, cycle
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

__all__ = ["Backend", "Run", "Stimulus", "Mismatch", "MismatchKind", "AmaranthBackend",
           "check", "design_tag", "build_message", "not_listed", "count", "mixed_patterns",
           "PRESSURE", "SEGMENT"]

#: Value mismatches listed per run (one more entry stands for the rest: :func:`not_listed`).
VALUE_LIMIT = 20
#: Handshake mismatches listed per run and direction.
HANDSHAKE_LIMIT = 10
#: (valid probability, ready probability) of the segments of a :func:`mixed_patterns`
#: pattern, in turn: full throughput, light and heavy gaps with back-pressure, gaps alone
#: (mostly), back-pressure alone (mostly).
PRESSURE = ((1.0, 1.0), (0.8, 0.7), (0.4, 0.3), (0.9, 0.5), (0.5, 0.9))
#: Cycles of one segment of a :func:`mixed_patterns` pattern (long enough to fill and drain
#: a pipeline, short enough that a chunk of a few hundred beats meets several kinds).
SEGMENT = 128


class MismatchKind(enum.Enum):
    """What differs: an output value, or timing (a handshake or a cycle of the trace)."""
    VALUE = "value"
    CYCLE = "cycle"


@dataclass(frozen=True)
class Mismatch:
    """One difference between a design and the model, as reports and JSON show it.

    A scoreboard's cycle mismatch has ``cycle``, ``beat`` (beats taken before that cycle) and
    ``rtl``/``model`` as ``[i.ready, o.valid, o.payload]``; a value mismatch of one dot
    product has ``dot`` and the two FP32 codes; anything else is a ``note``. ``chunk`` is the
    verification chunk it was found in. The entry that closes a capped list
    (:func:`not_listed`) stands for the ``unlisted`` mismatches it does not list, so
    :func:`count` of a list is the true count. :meth:`to_dict` (and ``str``) give the set
    fields in one fixed order.
    """
    kind: MismatchKind
    cycle: int | None = None
    beat: int | None = None
    dot: int | None = None
    note: str | None = None
    rtl: Any = None
    model: Any = None
    chunk: int | None = None
    unlisted: int | None = None

    _ORDER = ("cycle", "beat", "dot", "note", "rtl", "model", "kind", "chunk", "unlisted")

    def to_dict(self) -> dict:
        out = {}
        for name in self._ORDER:
            value = getattr(self, name)
            if value is not None:
                out[name] = value.value if name == "kind" else value
        return out

    @classmethod
    def from_dict(cls, d: dict) -> Mismatch:
        """The mismatch of a :meth:`to_dict` dictionary (e.g. read back from JSON)."""
        return cls(**{**d, "kind": MismatchKind(d["kind"])})

    def __str__(self) -> str:
        return str(self.to_dict())


def not_listed(kind: MismatchKind, total: int, listed: int, what: str = "") -> Mismatch:
    """The entry that closes a list of ``listed`` of ``total`` mismatches (``what``: the rule
    they break, where lists are capped per rule): it says so and stands for the rest."""
    return Mismatch(kind, note=f"{what}... {total - listed} more, not listed ({total} in all)",
                    unlisted=total - listed)


def count(mismatches: list[Mismatch], kind: MismatchKind | None = None) -> int:
    """How many mismatches (of ``kind``; None: of either) ``mismatches`` stands for: one per
    entry, and for the entry that closes a capped list, those it does not list."""
    return sum(1 if m.unlisted is None else m.unlisted for m in mismatches
               if kind is None or m.kind is kind)


@dataclass(frozen=True)
class Stimulus:
    """The handshake side of one run: the valid-gap and ready patterns (repeated) and the seed
    that made them (simulators also seed the registers' random initial values from it)."""
    gaps: npt.NDArray[np.bool_]
    ready: npt.NDArray[np.bool_]
    seed: int = 0

    @classmethod
    def random(cls, seed: int, *, valid_p: float = 1.0, ready_p: float = 1.0) -> Stimulus:
        """Seeded random patterns (:func:`mxsim.microarch.cycle.patterns`, 4096 cycles)."""
        gaps, ready = cycle.patterns(4096, valid_p=valid_p, ready_p=ready_p, seed=seed)
        return cls(gaps, ready, seed)

    @classmethod
    def mixed(cls, seed: int, *, start: int = 0) -> Stimulus:
        """Seeded piecewise patterns (:func:`mixed_patterns`): every run meets full throughput,
        gaps, back-pressure and both, whatever its index."""
        gaps, ready = mixed_patterns(seed, start=start)
        return cls(gaps, ready, seed)


def mixed_patterns(seed: int, *, start: int = 0, segments: int = 32, segment: int = SEGMENT
                   ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Valid-gap and ready patterns of ``segments`` segments of ``segment`` cycles each (4096
    in all, repeated by every harness as one pattern), segment ``j`` drawn with the
    probabilities ``PRESSURE[(start + j) % len(PRESSURE)]``: within one run the handshake
    goes from full throughput to gaps, back-pressure and both, and ``start`` (a chunk's
    index) picks the kind it begins with. Seeded: the same arguments give the same bits."""
    rng = np.random.default_rng([seed, 7, start])
    gaps, ready = [], []
    for j in range(segments):
        valid_p, ready_p = PRESSURE[(start + j) % len(PRESSURE)]
        gaps.append(rng.random(segment) < valid_p)
        ready.append(rng.random(segment) < ready_p)
    return np.concatenate(gaps), np.concatenate(ready)


@dataclass
class Run:
    """One run of a vector set: what went in, the design's trace (its output codes are
    ``trace.results``), every mismatch found, and the time taken."""
    dots: int
    beats: int                     #: input beats driven (cocotb: taken before a stop)
    cycles: int
    trace: cycle.Trace
    mismatches: list[Mismatch] = field(default_factory=list)
    seconds: float = 0.0           #: the run, simulator start-up included
    loop_seconds: float = 0.0      #: the clocked loop alone
    waveform: str | None = None    #: where a backend that writes waveforms wrote this run's
    #: The engine's result of every dot (codes of the spec's d_format) where the backend
    #: computed them to check its outputs: coverage takes them instead of computing them again.
    want: npt.NDArray | None = None
    #: The backend's own split of its run, in seconds, where it times itself (the bulk
    #: harnesses: ``load_s`` reading the stimulus, ``loop_s`` the clocked loop, ``write_s``
    #: writing the trace, and ``cycles``); None where it does not.
    phases: dict | None = None

    @property
    def passed(self) -> bool:
        return not self.mismatches

    @property
    def outputs(self) -> npt.NDArray[np.uint32]:
        """The output codes, in the order they left."""
        return np.array(self.trace.results, np.uint32)


class Backend(Protocol):
    """Builds one design, then runs vector sets on it (see the module docstring)."""

    #: How reports name the backend ("cocotb", "bulk C++ harness").
    mode: str
    #: What a build makes, for the progress line ("RTL with Verilator").
    what: str
    #: How long a first build usually takes, in seconds (None: not measured).
    build_seconds: float | None
    #: The design's name in file names and reports (None: mxsim's generated unit, named by
    #: :func:`design_tag`).
    design: str | None
    #: Instructions one dot product may chain (None: any number; 1: the design has no
    #: accumulator that carries a dot product from one instruction to the next).
    max_blocks: int | None
    #: Whether C reaches the design (False: the stimulus's C is +0).
    takes_c: bool
    #: Whether the design has a valid/ready output handshake (coverage's back-pressure bins).
    backpressure: bool

    def build(self, spec: UnitSpec, microarch: MicroArch, out_dir: Path, *,
              fault: str | None = None) -> None:
        """Build the design in a folder of its own under ``out_dir`` (a build made there
        before from the same sources is reused); ``fault``: a mutant."""

    def run(self, vs: VectorSet, stimulus: Stimulus, *, name: str = "run") -> Run:
        """Every dot product of ``vs`` through the design built last, checked."""

    def with_waves(self) -> Backend | None:
        """A backend like this one that writes waveforms, to rerun a failing set (None when
        this one already does, or none can)."""


def design_tag(spec: UnitSpec, microarch: MicroArch, fault: str | None = None) -> str:
    """The name of a design in file names: spec digest, lanes, stages (and the mutant)."""
    return f"{spec.digest()}-l{microarch.lanes}-s{microarch.stages}" + (
        f"-{fault}" if fault else "")


def build_message(backend: Backend, microarch: MicroArch) -> str:
    """The progress line of a backend's build."""
    first = backend.build_seconds
    took = f"a first build takes ~{first / 60:.0f} min; " if first else ""
    return f"building {backend.what}, {microarch.lanes} lanes ({took}later runs reuse it)"


def check(spec: UnitSpec, microarch: MicroArch, vs: VectorSet, trace: cycle.Trace,
          stimulus: Stimulus, *, timing: bool = True,
          want: npt.NDArray[np.uint32] | None = None) -> list[Mismatch]:
    """Every difference of a design's ``trace`` on ``vs`` from the model: the values against
    the numerics engine (``want``, default ``fast.dot``), bit for bit; with ``timing``, every
    input and output handshake's cycle and every cycle of the trace (``i.ready``, ``o.valid``,
    and ``o.payload`` while held) against the cycle model under the same ``stimulus``.
    Value mismatches come first, then the count of beats taken, then timing."""
    if want is None:
        from mxsim.engine import fast
        want = fast.dot(spec, vs).reshape(-1)
    out = _value_mismatches(trace, want)
    beats, n_in = vs.num_dots * (vs.k // spec.k), int((trace.in_valid & trace.in_ready).sum())
    if n_in != beats:
        out.append(Mismatch(MismatchKind.CYCLE, note=f"{n_in} of {beats} beats taken in "
                                                     f"{trace.cycles} cycles"))
    if timing:
        model = cycle.run(cycle.UnitModel(spec, microarch), cycle.beats_of(spec, vs, want),
                          stimulus.gaps, stimulus.ready)
        out += _cycle_mismatches(trace, model)
    return out


def _value_mismatches(trace: cycle.Trace, want: npt.NDArray) -> list[Mismatch]:
    got = np.array(trace.results, np.uint32)
    kind = MismatchKind.VALUE
    out = []
    if len(got) != len(want):
        out.append(Mismatch(kind, note=f"{len(got)} of {len(want)} results left in "
                                       f"{trace.cycles} cycles"))
    got = got[:len(want)]
    bad = np.nonzero(got != want[:len(got)])[0]
    out += [Mismatch(kind, dot=int(i), rtl=f"{int(got[i]):#010x}", model=f"{int(want[i]):#010x}")
            for i in bad[:VALUE_LIMIT]]
    if len(bad) > VALUE_LIMIT:
        out.append(not_listed(kind, len(bad), VALUE_LIMIT))
    return out


def _cycle_mismatches(trace: cycle.Trace, model: cycle.Trace) -> list[Mismatch]:
    out = []
    cyc = MismatchKind.CYCLE
    for name, rtl, mod in (
            ("input handshake", np.nonzero(trace.in_valid & trace.in_ready)[0],
             np.nonzero(model.in_valid & model.in_ready)[0]),
            ("output handshake", np.nonzero(trace.out_valid & trace.out_ready)[0],
             np.nonzero(model.out_valid & model.out_ready)[0])):
        n = min(len(rtl), len(mod))
        diff = np.nonzero(rtl[:n] != mod[:n])[0]
        if len(rtl) != len(mod):
            out.append(Mismatch(cyc, note=f"{name}s: {len(rtl)} in RTL, {len(mod)} in the "
                                          f"model"))
        out += [Mismatch(cyc, note=f"{name} {int(i)}: RTL cycle {int(rtl[i])}, model "
                                   f"{int(mod[i])}") for i in diff[:HANDSHAKE_LIMIT]]
        if len(diff) > HANDSHAKE_LIMIT:
            out.append(not_listed(cyc, len(diff), HANDSHAKE_LIMIT, f"{name}: "))
    # Every cycle, as the cocotb scoreboard checks it: i.ready, o.valid, and o.payload held
    # while o.ready is low (the values that leave are checked apart).
    n = min(trace.cycles, model.cycles)
    if trace.cycles != model.cycles:
        out.append(Mismatch(cyc, note=f"trace: {trace.cycles} cycles in RTL, {model.cycles} in "
                                      f"the model"))
    held = trace.out_valid[:n] & model.out_valid[:n] & ~trace.out_ready[:n]
    for name in ("in_ready", "out_valid", "out_payload"):
        rtl, mod = getattr(trace, name)[:n], getattr(model, name)[:n]
        diff = np.nonzero((rtl != mod) & (held if name == "out_payload" else True))[0]
        if len(diff):
            i = int(diff[0])
            out.append(Mismatch(cyc, note=f"{name} differs on {len(diff)} cycles, first {i}: "
                                          f"RTL {int(rtl[i]):#x}, model {int(mod[i]):#x}"))
    return out


class AmaranthBackend:
    """The unit in Amaranth's simulator (``hdl.sim.simulate``), checked by :func:`check`.

    No Verilog and no C++ build: the slowest backend per cycle, the quickest to start, and
    the only one that needs nothing but Python.
    """
    mode = "Amaranth simulator"
    what = "the unit for Amaranth's simulator"
    build_seconds = None
    design, max_blocks, takes_c, backpressure = None, None, True, True

    def __init__(self, *, vcd_dir: Path | None = None):
        self._vcd_dir = vcd_dir
        self._dut = None

    def build(self, spec: UnitSpec, microarch: MicroArch, out_dir: Path, *,
              fault: str | None = None) -> None:
        from hdl.unit import DotProductUnit
        if fault is not None:
            raise ValueError(f"The Amaranth backend builds the unit itself, not mutant {fault!r}")
        self._spec, self._microarch = spec, microarch
        self._dut = DotProductUnit(spec, microarch)

    def run(self, vs: VectorSet, stimulus: Stimulus, *, name: str = "run") -> Run:
        import time

        from hdl.sim import simulate
        vcd = self._vcd_dir / f"{name}.vcd" if self._vcd_dir is not None else None
        t0 = time.perf_counter()
        trace = simulate(self._dut, vs, stimulus.gaps, stimulus.ready, vcd=vcd)
        seconds = time.perf_counter() - t0
        beats = vs.num_dots * (vs.k // self._spec.k)
        return Run(vs.num_dots, beats, trace.cycles, trace,
                   check(self._spec, self._microarch, vs, trace, stimulus), seconds, seconds,
                   str(vcd) if vcd is not None else None)

    def with_waves(self) -> Backend | None:
        return None
