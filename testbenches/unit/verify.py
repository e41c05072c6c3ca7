"""``mxsim verify``: build a unit's RTL, simulate constrained-random stimulus, check every
output bit against the engine and every cycle against the cycle model, measure coverage.

The stimulus runs in chunks (one build, one backend run per chunk): chunk ``i`` has
``1 + i % 3`` blocks per dot product and cycles through valid/ready probabilities, so chains,
single blocks, bursts and back-pressure all occur. On a mismatch the failing dot products are
written as a minimal vector set, rerun alone with waveforms (where the backend writes them), and
a one-line replay command is printed. Any :class:`testbenches.sim.backend.Backend` runs the chunks
the same way: the cocotb testbench by default, the C++ harness with ``bulk=True``
(:mod:`testbenches.unit.bulk`) for millions of vectors, or Amaranth's simulator.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from mxsim import vectors
from mxsim.engine import conformance as envelopes
from mxsim.microarch import MicroArch
from mxsim.progress import Progress, Step, wanted
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

from ..sim.backend import (
    AmaranthBackend,
    Backend,
    Mismatch,
    MismatchKind,
    Run,
    Stimulus,
    build_message,
    count,
    design_tag,
)
from . import coverage

__all__ = ["Report", "verify", "backend_for", "minimal_set", "failing_dots", "chunk_plan"]

#: (valid probability, ready probability) per chunk, in turn.
PRESSURE = ((1.0, 1.0), (0.8, 0.7), (0.4, 0.3), (0.9, 0.5), (0.5, 0.9))


@dataclass
class Report:
    """What a verification run checked and found."""
    unit: str
    sim: str
    mode: str
    dots: int = 0
    beats: int = 0
    cycles: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    coverage: coverage.Coverage = field(default_factory=coverage.Coverage)
    sim_seconds: float = 0.0       #: simulator runs, start-up included
    loop_seconds: float = 0.0      #: the clocked loop alone (cocotb) or the harness (bulk)
    seconds: float = 0.0
    failing: str | None = None
    replay: str | None = None
    waveform: str | None = None
    #: With a conformance check (``verify(conformance=...)``): every result judged against
    #: the envelope, added up.
    conformance: envelopes.Summary | None = None

    @property
    def passed(self) -> bool:
        """No mismatches (the exit code is 0); coverage holes are reported by ``result``. With
        a conformance check, the envelope judges the values instead: no cycle mismatch and
        every result inside the envelope (value mismatches against the spec are reported)."""
        if self.conformance is None:
            return not self.mismatches
        return not self.cycle_mismatches and self.conformance.all_inside

    def add(self, run: Run) -> None:
        """Count a backend's run of one chunk in (its mismatches are added apart)."""
        self.dots += run.dots
        self.beats += run.beats
        self.cycles += run.cycles
        self.sim_seconds += run.seconds
        self.loop_seconds += run.loop_seconds

    @property
    def value_mismatches(self) -> int:
        """Mismatches of an output value (or a result that never left), every one counted
        (the list ``mismatches`` is capped: :func:`testbenches.sim.backend.count`)."""
        return count(self.mismatches, MismatchKind.VALUE)

    @property
    def cycle_mismatches(self) -> int:
        """Mismatches of a handshake or a cycle of the trace against the cycle model, every
        one counted."""
        return count(self.mismatches, MismatchKind.CYCLE)

    def _first(self) -> str:
        """The first mismatch, and how many of them all the JSON report lists."""
        listed = sum(m.unlisted is None for m in self.mismatches)
        total = count(self.mismatches)
        return f" (first: {self.mismatches[0]}" + (
            f"; the JSON report lists {listed} of the {total})" if listed < total else ")")

    @property
    def result(self) -> str:
        """``PASS``, ``PASS with holes`` (no mismatch, coverage incomplete) or ``FAIL``; with a
        conformance check, ``CONFORMANT`` (or ``CONFORMANT with holes``) where values differ
        from the spec but every result lies inside the envelope (it passes)."""
        if not self.passed:
            return "FAIL"
        word = "CONFORMANT" if self.mismatches else "PASS"
        return word + " with holes" if self.coverage.holes() else word

    def _why(self) -> str:
        """What a conformance check adds to the result line (nothing without one)."""
        conf, values = self.conformance, self.value_mismatches
        if conf is None or (conf.all_inside and not values):
            return ""
        if self.passed:
            holes = len(self.coverage.holes())
            return (f" (exact FAIL: {values:,} value mismatch{'es' if values != 1 else ''} "
                    f"against the spec, but every result inside the OCP MX dot-product "
                    f"envelope" + (f"; {holes} coverage hole{'s' if holes != 1 else ''}"
                                   if holes else "") + ")")
        if not values and not self.cycle_mismatches:
            return (f" (exact PASS against the spec, but {conf.outside:,} result"
                    f"{'s' if conf.outside != 1 else ''} outside the OCP MX dot-product "
                    f"envelope)")
        return ""

    def format(self) -> str:
        rate = self.dots / self.sim_seconds if self.sim_seconds else 0
        loop = self.dots / self.loop_seconds if self.loop_seconds else 0
        cps = self.cycles / self.loop_seconds if self.loop_seconds else 0
        holes = len(self.coverage.holes())
        lines = [f"mxsim verify: {self.unit} on {self.sim} ({self.mode})",
                 f"  vectors     {self.dots:,} dot products, {self.beats:,} blocks, "
                 f"{self.cycles:,} cycles",
                 f"  mismatches  {self.value_mismatches} value, {self.cycle_mismatches} cycle"
                 + ("" if not self.mismatches else self._first()),
                 f"  speed       {loop:,.0f} dot products/s ({cps:,.0f} cycles/s) in the "
                 f"simulation loop ({self.loop_seconds:.1f} s); {rate:,.0f}/s with simulator "
                 f"start-up ({self.sim_seconds:.1f} s); {self.seconds:.1f} s in all",
                 "  coverage", self.coverage.summary()]
        if self.failing:
            waves = self.waveform or "none (this backend writes none; the replay line " \
                                     "reruns the set through cocotb with --waves)"
            lines += [f"  failing     {self.failing}", f"  waveform    {waves}",
                      f"  replay      {self.replay}"]
        if self.conformance is not None:
            lines.append(f"  conformance {self.conformance.line()}")
        result = self.result
        if result == "PASS with holes":
            result += f" ({holes} coverage hole{'s' if holes != 1 else ''}: 0 mismatches, "\
                      f"but not every coverpoint was reached)"
        lines.append("  result      " + result + self._why())
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"unit": self.unit, "sim": self.sim, "mode": self.mode, "dots": self.dots,
                "beats": self.beats, "cycles": self.cycles, "result": self.result,
                "value_mismatches": self.value_mismatches,
                "cycle_mismatches": self.cycle_mismatches,
                "mismatches": [m.to_dict() for m in self.mismatches],
                "holes": len(self.coverage.holes()),
                "coverage": self.coverage.to_dict(), "sim_seconds": self.sim_seconds,
                "loop_seconds": self.loop_seconds,
                "seconds": self.seconds, "failing": self.failing, "replay": self.replay,
                "waveform": self.waveform, "passed": self.passed,
                **({} if self.conformance is None
                   else {"conformance": self.conformance.to_dict()})}


def minimal_set(vs: VectorSet, dots: list[int]) -> VectorSet:
    """The dot products ``dots`` (flat indices in batch, row, column order) of ``vs`` as a
    vector set of their own: batch entry ``i`` is one 1 x 1 dot product (its C, scales and
    tensor scale kept; no result)."""
    return vs.take_dots(dots).replace(d=None, producer="mxsim verify (failing dot products)")


def failing_dots(mismatches: list[Mismatch], beats_per_dot: int) -> list[int]:
    """The dot products (flat indices) that ``mismatches`` name, by their beat or dot."""
    dots = {m.beat // beats_per_dot for m in mismatches if m.beat is not None}
    return sorted(dots | {m.dot for m in mismatches if m.dot is not None})


def backend_for(sim: str = "verilator", *, bulk: bool = False, waves: bool = False) -> Backend:
    """The backend ``mxsim verify`` options name: the bulk harness, Amaranth's simulator
    (``sim="amaranth"``), or the cocotb testbench on ``sim``."""
    from . import bulk as bulk_mod
    from . import runner
    if bulk:
        return bulk_mod.BulkBackend()
    if sim == "amaranth":
        return AmaranthBackend()
    return runner.CocotbBackend(sim, waves=waves)


def _chunks(spec: UnitSpec, dots: int, chunk: int, seed: int, replay: VectorSet | None,
            backend: Backend, only: range | None = None):
    """``(index, vector set, stimulus)`` of every chunk (of those ``only`` names; see the
    module docstring); a backend whose design chains no instructions gets one block per dot
    product, and one that takes no C a C of +0."""
    if replay is not None:
        valid_p, ready_p = PRESSURE[1]
        yield 0, replay, Stimulus.random(seed * 100003, valid_p=valid_p, ready_p=ready_p)
        return
    most = backend.max_blocks or 3
    for i, asked in enumerate(chunk_plan(spec, dots, chunk)):
        if only is not None and i not in only:
            continue
        s = seed * 100003 + i
        vs = coverage.stimulus(spec, asked, blocks=1 + i % most, seed=s,
                               with_c=backend.takes_c)
        adapt = getattr(backend, "adapt", None)      # a foreign design's C format and domain
        if adapt is not None:
            vs = adapt(spec, vs, s)
        valid_p, ready_p = PRESSURE[i % len(PRESSURE)]
        yield i, vs, Stimulus.random(s, valid_p=valid_p, ready_p=ready_p)


def chunk_plan(spec: UnitSpec, dots: int, chunk: int) -> list[int]:
    """The dot products asked of each chunk of a run of ``dots`` in chunks of ``chunk`` (a
    chunk makes :func:`testbenches.unit.stimulus.stimulus_dots` of them, so the last one asks for
    what the others left): a campaign splits a run by chunk index with the same stimulus."""
    from .stimulus import stimulus_dots
    out, done = [], 0
    while done < dots:
        out.append(min(chunk, dots - done))
        done += stimulus_dots(spec, out[-1])
    return out


def verify(spec: UnitSpec, microarch: MicroArch, *, unit_name: str | None = None,
           sim: str = "verilator", dots: int = 20000, seed: int = 0, chunk: int = 4000,
           out_dir: str | Path = "mxsim-verify", bulk: bool = False,
           progress: bool | None = None, replay: VectorSet | None = None,
           waves: bool = False, fault: str | None = None, keep_failing: bool = True,
           backend: Backend | None = None, replay_command: str | None = None,
           chunks: range | None = None, conformance: str | None = None) -> Report:
    """Verify the RTL of ``spec`` built as ``microarch``, a design the RTL builds (as
    :func:`mxsim.design.resolve_design` resolves and checks it; see the module docstring).

    The backend is ``backend``, or the one ``sim``, ``bulk`` and ``waves`` name
    (:func:`backend_for`). ``fault`` builds a mutant instead (testbenches.unit.mutants);
    ``keep_failing=False`` skips writing the failing set and its waveform. A foreign design
    (a backend with a ``design`` name) is named by it in file names, and its replay line is
    ``replay_command`` (the command that names the design) with ``--replay FILE --waves``.
    ``chunks``: run only the chunks of these indices (of the run of ``dots``, each with its own
    stimulus, as a campaign task does). ``conformance`` (an envelope of
    :data:`mxsim.engine.conformance.ENVELOPES`): every result is also judged against it, and
    the envelope decides the values' verdict (:attr:`Report.passed`): a chunk whose value
    mismatches all lie inside it does not stop the run."""
    backend = backend or backend_for(sim, bulk=bulk, waves=waves)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rep = Report(unit_name or spec.name, sim, backend.mode)
    if conformance is not None:
        rep.conformance = envelopes.Summary(conformance, spec.d_format)
    tag = (f"{backend.design}-{spec.digest()}" if backend.design
           else design_tag(spec, microarch, fault))
    t0 = time.perf_counter()
    show = wanted(progress)
    # Shown only when the build outlasts a second: a build reused from out_dir says nothing.
    with Step(build_message(backend, microarch), show, expect=backend.build_seconds):
        backend.build(spec, microarch, out, fault=fault)
    bar = Progress(dots if replay is None else replay.num_dots, show, label="verify")
    bar.update(0)
    for i, vs, stimulus in _chunks(spec, dots, chunk, seed, replay, backend, chunks):
        run = backend.run(vs, stimulus, name=f"chunk{i}")
        rep.add(run)
        cov = coverage.measure(spec, vs, run.trace, microarch.lanes,
                               backpressure=backend.backpressure, want=run.want)
        unreachable = getattr(backend, "unreachable", None)
        if unreachable is not None:
            coverage.drop_bins(cov, unreachable())
        rep.coverage.merge(cov)
        outside: list[int] = []
        if rep.conformance is not None:
            verdicts = envelopes.check(spec, vs, _values(run, spec), rep.conformance.envelope)
            rep.conformance.add(verdicts, chunk=i)
            outside = verdicts.outside[:envelopes.LISTED].tolist()
        rep.mismatches += [replace(m, chunk=i) for m in run.mismatches]
        if not rep.passed:
            if keep_failing:
                failing = sorted(set(failing_dots(run.mismatches, vs.k // spec.k)) | set(outside))
                fail_set = minimal_set(vs, failing or list(range(min(4, vs.num_dots))))
                _keep(rep, fail_set, stimulus, out / f"failing-{tag}-chunk{i}.npz", backend,
                      spec, microarch, fault, bar, show, replay_command, run)
            break
        bar.update(rep.dots)
    bar.close()
    rep.seconds = time.perf_counter() - t0
    (out / f"report-{tag}.json").write_text(json.dumps(rep.to_dict(), indent=1, default=str))
    return rep


def _values(run: Run, spec: UnitSpec) -> envelopes.Values:
    """A run's results as exact values: a foreign design's decoded results (codes, or a
    fixed-point mantissa and exponent), else the output codes of ``spec.d_format``."""
    res = getattr(run, "results", None)
    if res is None:
        return envelopes.Values.of_codes(spec.d_format, run.outputs)
    if res.encoding == "fixed":
        return envelopes.Values.of_fixed(res.mant, res.exp, res.nan)
    return envelopes.Values.of_codes(res.encoding, res.codes)


def _keep(rep: Report, fail_set: VectorSet, stimulus: Stimulus, path: Path, backend: Backend,
          spec: UnitSpec, microarch: MicroArch, fault: str | None, bar: Progress,
          show: bool, replay_command: str | None, failed: Run) -> None:
    """Write the failing set, the command that replays it, and its waveform: the one the
    failed run ``failed`` wrote (a backend that writes waveforms, as ``--replay --waves``
    asks), else one from a rerun of the set where the backend can write one."""
    vectors.save(fail_set, path)
    rep.failing = str(path)
    # A line to paste into a shell: paths with spaces or quotes are quoted.
    conform = "" if rep.conformance is None else f" --conformance {rep.conformance.envelope}"
    rep.replay = (replay_command or
                  f"mxsim verify --unit {shlex.quote(rep.unit)} --a-format {spec.a_format} "
                  f"--b-format {spec.b_format} --lanes {microarch.lanes} --stages "
                  f"{microarch.stages} --sim {rep.sim}{conform}") + \
        f" --replay {shlex.quote(str(path))} --waves"
    waves = backend.with_waves()
    if waves is None:
        rep.waveform = failed.waveform
    else:
        bar.close()
        with Step(build_message(waves, microarch), show, expect=waves.build_seconds):
            waves.build(spec, microarch, path.parent, fault=fault)
        rep.waveform = waves.run(fail_set, stimulus, name="failing").waveform
