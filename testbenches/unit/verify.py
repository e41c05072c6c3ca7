"""``mxsim verify``: build a unit's RTL, simulate constrained-random stimulus, check every
output bit against the engine and every cycle against the cycle model, measure coverage.

The stimulus runs in chunks (one build, one backend run per chunk): chunk ``i`` has
``1 + i % 3`` blocks per dot product, and its handshake patterns go from segment to segment
through full throughput, gaps, back-pressure and both
(:func:`testbenches.sim.backend.mixed_patterns`, starting with the kind ``i`` picks), so
chains, single blocks, bursts and back-pressure all occur in every chunk. Every chunk of the
budget runs (``stop_at_first`` stops after the first chunk with a mismatch, as verify once
did): the report's census (:mod:`testbenches.sim.census`) counts every mismatch by class,
mismatches that a waiver (:mod:`testbenches.sim.waive`) names are counted apart, and each
class gets a failing set, shrunk where reruns are cheap, a waveform and a one-line replay
command (:mod:`testbenches.unit.failing`). Any :class:`testbenches.sim.backend.Backend` runs
the chunks the same way: the cocotb testbench by default, the C++ harness with ``bulk=True``
(:mod:`testbenches.unit.bulk`) for millions of vectors, or Amaranth's simulator.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mxsim.engine import conformance as envelopes
from mxsim.engine import fast
from mxsim.engine.explain import explain
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
from ..sim.census import Census, observe
from ..sim.listed import split_listed
from ..sim.localised import LOCALISED, explained, format_localised, intermediates
from ..sim.waive import Waiver
from . import coverage
from .failing import VERDICT_KINDS, keep_sets, replay_stimulus

__all__ = ["Report", "verify", "backend_for", "minimal_set", "failing_dots", "chunk_plan"]

#: Chunks whose mismatches the report lists (as each run lists them, capped); one entry per
#: kind stands for those of later chunks (every one counted in the census).
LIST_CHUNKS = 5


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
    #: Every mismatch by class, and what each waiver waived (:mod:`testbenches.sim.census`).
    census: Census | None = None
    #: The waived mismatches, listed as ``mismatches`` lists the others.
    waived: list[Mismatch] = field(default_factory=list)
    #: Whether the run stopped after its first chunk with a mismatch (``stop_at_first``).
    stopped: bool = False
    #: The first failing dots (:data:`~testbenches.sim.localised.LOCALISED`), each with where
    #: it goes wrong: the first wrong probed node, or what its result is consistent with.
    localised: list[dict] = field(default_factory=list)
    #: The first localised dot's intermediates through the model
    #: (:meth:`mxsim.engine.explain.Explanation.to_dict`), and its text.
    intermediates: dict | None = None
    intermediates_text: str = ""

    @property
    def passed(self) -> bool:
        """No unwaived mismatch (the exit code is 0); coverage holes are reported by
        ``result``. With a conformance check, the envelope judges the values instead: no
        cycle mismatch and every result inside the envelope (value mismatches against the
        spec are reported)."""
        if self.conformance is None:
            return not (self.value_mismatches or self.cycle_mismatches)
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
        """Unwaived mismatches of an output value, its flags, or a result that never left,
        every one counted: the census's (each dot once), else the list's
        (:func:`testbenches.sim.backend.count`; the list is capped)."""
        if self.census is not None:
            return self.census.total("value", "flags", "missing")
        return count(self.mismatches, MismatchKind.VALUE)

    @property
    def cycle_mismatches(self) -> int:
        """Unwaived mismatches of a handshake or a cycle of the trace against the cycle model
        (or the timing a port map declares), every one counted."""
        if self.census is not None:
            return self.census.total("cycle")
        return count(self.mismatches, MismatchKind.CYCLE)

    @property
    def waived_mismatches(self) -> int:
        """Mismatches a waiver waived (counted apart, never in the verdict)."""
        return 0 if self.census is None else self.census.waived

    @property
    def chunks(self) -> int:
        """Chunks run."""
        return 0 if self.census is None else self.census.chunks

    def _waivers(self) -> str:
        """What the result line says of waived mismatches (nothing without any)."""
        if not self.waived_mismatches:
            return ""
        caught = [f"{e.count:,} {w.name}" for w, e in self.census.waivers if e.count]
        return f" ({self.waived_mismatches:,} waived: {'; '.join(caught)})"

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
        chunks = "" if self.census is None else f" in {self.chunks:,} chunk" + (
            "s" if self.chunks != 1 else "") + (" (stopped at the first with a mismatch)"
                                                if self.stopped else "")
        lines = [f"mxsim verify: {self.unit} on {self.sim} ({self.mode})",
                 f"  vectors     {self.dots:,} dot products, {self.beats:,} blocks, "
                 f"{self.cycles:,} cycles{chunks}",
                 f"  mismatches  {self.value_mismatches} value, {self.cycle_mismatches} cycle"
                 + ("" if not self.mismatches else self._first()),
                 f"  speed       {loop:,.0f} dot products/s ({cps:,.0f} cycles/s) in the "
                 f"simulation loop ({self.loop_seconds:.1f} s); {rate:,.0f}/s with simulator "
                 f"start-up ({self.sim_seconds:.1f} s); {self.seconds:.1f} s in all",
                 "  coverage", self.coverage.summary()]
        if self.failing:                   # the first failing class's (the census has all)
            waves = self.waveform or "none (this backend writes none; the replay line " \
                                     "reruns the set through cocotb with --waves)"
            lines += [f"  failing     {self.failing}", f"  waveform    {waves}",
                      f"  replay      {self.replay}"]
        if self.census is not None:
            lines += self.census.lines()
        if self.localised:
            text = format_localised(self.localised).splitlines()
            lines += [("  localised   " if n == 0 else "              ") + t
                      for n, t in enumerate(text)]
            lines += ["  model       " + t if n == 0 else "              " + t
                      for n, t in enumerate(self.intermediates_text.splitlines())]
            lines.append("              (every node: mxsim explain FAILING.npz --unit SPEC "
                         "--observed CODE; the JSON report's 'intermediates')")
        if self.conformance is not None:
            lines.append(f"  conformance {self.conformance.line()}")
        result = self.result
        if result == "PASS with holes":
            result += f" ({holes} coverage hole{'s' if holes != 1 else ''}: 0 mismatches, "\
                      f"but not every coverpoint was reached)"
        lines.append("  result      " + result + self._why() + self._waivers())
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
                "waived": self.waived_mismatches,
                "waived_mismatches": [m.to_dict() for m in self.waived],
                "chunks": self.chunks, "stopped_at_first": self.stopped,
                "localised": self.localised, "intermediates": self.intermediates,
                **({} if self.census is None else {"census": self.census.to_dict()}),
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
        yield 0, replay, replay_stimulus(seed)
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
        yield i, vs, Stimulus.mixed(s, start=i)


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
           chunks: range | None = None, conformance: str | None = None,
           waivers: Sequence[Waiver] = (), stop_at_first: bool = False,
           detailed: int = 8) -> Report:
    """Verify the RTL of ``spec`` built as ``microarch``, a design the RTL builds (as
    :func:`mxsim.design.resolve_design` resolves and checks it; see the module docstring).

    The backend is ``backend``, or the one ``sim``, ``bulk`` and ``waves`` name
    (:func:`backend_for`). ``fault`` builds a mutant instead (testbenches.unit.mutants);
    ``keep_failing=False`` skips writing the failing sets and their waveforms. A foreign design
    (a backend with a ``design`` name) is named by it in file names, and its replay line is
    ``replay_command`` (the command that names the design) with ``--replay FILE --waves``.
    ``chunks``: run only the chunks of these indices (of the run of ``dots``, each with its own
    stimulus, as a campaign task does). Every chunk runs unless ``stop_at_first``, which stops
    after the first chunk with an unwaived mismatch. ``waivers`` (:mod:`testbenches.sim.waive`)
    name known deviations: what they match is counted apart and never fails the run (none
    with ``conformance``, whose envelope judges the values).
    ``detailed``: how many classes of mismatch get shrunk sets and waveforms (the first, in
    the order they showed). ``conformance`` (an envelope of
    :data:`mxsim.engine.conformance.ENVELOPES`): every result is also judged against it, and
    the envelope decides the values' verdict (:attr:`Report.passed`)."""
    backend = backend or backend_for(sim, bulk=bulk, waves=waves)
    if conformance is not None:
        waivers = ()                  # the envelope judges values: nothing is waived there
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rep = Report(unit_name or spec.name, sim, backend.mode)
    rep.census = Census.of(list(waivers), detailed)
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
    lists = _Lists()
    writes_waves = False
    for i, vs, stimulus in _chunks(spec, dots, chunk, seed, replay, backend, chunks):
        run = backend.run(vs, stimulus, name=f"chunk{i}")
        if run.want is None:
            run.want = fast.dot(spec, vs).reshape(-1)
        writes_waves |= run.waveform is not None
        rep.add(run)
        cov = coverage.measure(spec, vs, run.trace, microarch.lanes,
                               backpressure=backend.backpressure, want=run.want)
        unreachable = getattr(backend, "unreachable", None)
        if unreachable is not None:
            coverage.drop_bins(cov, unreachable())
        rep.coverage.merge(cov)
        _judge(rep, lists, backend, spec, vs, run, i)
        if stop_at_first and not rep.passed:
            rep.stopped = True
            break
        bar.update(rep.dots)
    bar.close()
    rep.mismatches, rep.waived = lists.close()
    _class_bins(rep.census, spec, microarch)
    if keep_failing:
        _sets(rep, out, tag, backend, spec, microarch, fault, replay_command, writes_waves,
              show, bar)
    rep.seconds = time.perf_counter() - t0
    (out / f"report-{tag}.json").write_text(json.dumps(rep.to_dict(), indent=1, default=str))
    return rep


def _judge(rep: Report, lists: _Lists, backend: Backend, spec: UnitSpec, vs: VectorSet,
           run: Run, i: int) -> None:
    """Chunk ``i``'s mismatches into the report: its census (waivers applied), conformance,
    lists, probed nodes, and the first failing dots localised with their intermediates."""
    records = observe(spec, vs, run, run.want)
    waived_by = records.waived_by([w for w, _ in rep.census.waivers])
    rep.census.add(i, vs, records, waived_by)
    if rep.conformance is not None:
        verdicts = envelopes.check(spec, vs, _values(run, spec), rep.conformance.envelope)
        rep.conformance.add(verdicts, chunk=i)
        rep.census.add_outside(i, vs, spec, verdicts.outside, rep.conformance.envelope)
    lists.add(*split_listed(run, records, waived_by, i))
    _probe_nodes(backend, spec, vs, run, records, waived_by, rep.census)
    if not rep.localised:
        rep.localised = _localise(backend, spec, vs, run, records, waived_by)
        if rep.localised:
            ex = explain(spec, vs, rep.localised[0]["dot"])
            rep.intermediates, rep.intermediates_text = ex.to_dict(), intermediates(ex)


#: Dots of each class a run localises through a design's probes (the census's node counts).
NODE_SAMPLE = 32
#: Value coverpoints a class's bins are shown for (not the handshake's: a set has no trace).
CLASS_POINTS = ("output_class", "cancellation", "spread", "carry_out", "round_carry",
                "special_case", "group_case", "group_scale", "scale_class", "a_class",
                "b_class")


def _class_bins(census, spec: UnitSpec, microarch: MicroArch) -> None:
    """Each class's coverage bins, measured on its kept dots (every bin they hit)."""
    for key, entry in census.ordered():
        if entry.kept is None or key.kind not in ("value", "flags"):
            continue
        cov = coverage.measure(spec, entry.kept, None, microarch.lanes, backpressure=False)
        bins: dict[str, dict[str, int]] = {}
        for point, hits in cov.hits.items():
            name = point.split("@")[0]
            if name not in CLASS_POINTS:
                continue
            mine = bins.setdefault(name, {})
            for b, n in hits.items():          # lanes added up: lane3:normal -> normal
                if n:
                    b = b.split(":", 1)[-1]
                    mine[b] = mine.get(b, 0) + n
        entry.bins = {point: bins[point] for point in CLASS_POINTS if bins.get(point)}


def _probe_nodes(backend: Backend, spec: UnitSpec, vs: VectorSet, run: Run, records,
                 waived_by, census) -> None:
    """With a design's probes: the first wrong node of up to :data:`NODE_SAMPLE` dots of
    each value class, counted in the class's census entry."""
    if not getattr(backend, "probing", False) or not getattr(run, "probes", None):
        return
    value = records.of("value") & (waived_by < 0)
    for kid in np.unique(records.key[value]):
        entry = census.classes.get(records.keys[int(kid)])
        room = NODE_SAMPLE - sum(entry.nodes.values()) if entry is not None else 0
        if room <= 0:
            continue
        dots = sorted({int(d) for d in records.dot[value & (records.key == kid)]})[:room]
        for f in backend.localise(spec, vs, run, dots, diagnose=False):
            node = f["node"] or "no probed node differs"
            entry.nodes[node] = entry.nodes.get(node, 0) + 1


def _localise(backend: Backend, spec: UnitSpec, vs: VectorSet, run: Run, records,
              waived_by) -> list[dict]:
    """Where the chunk's first failing dots (an unwaived value mismatch: not flags alone, not
    a missing result) go wrong: the backend's own localisation (a port map's probes) or, for
    the RTL mxsim generates, what each result is consistent with."""
    value = records.of("value") & (waived_by < 0)
    bad = sorted({int(d) for d in records.dot[value] if 0 <= d < vs.num_dots})[:LOCALISED]
    if not bad or spec.exact or spec.epilogue is not None:
        return []
    own = getattr(backend, "localise", None)
    if own is not None:
        return own(spec, vs, run, bad)
    if run.outputs is None:
        return []
    return explained(spec, vs, run.outputs, bad)


class _Lists:
    """The report's listed mismatches and waived mismatches: those of the first
    :data:`LIST_CHUNKS` chunks that have any, as their runs list them (each list closed by an
    entry for the rest: :func:`testbenches.sim.census.split_listed`), then one entry per kind
    for every later one."""

    def __init__(self) -> None:
        self.listed: tuple[list[Mismatch], list[Mismatch]] = ([], [])
        self.later = {(w, k): 0 for w in (0, 1) for k in MismatchKind}
        self.chunks = 0

    def add(self, unwaived: list[Mismatch], waived: list[Mismatch]) -> None:
        if not (unwaived or waived):
            return
        self.chunks += 1
        for w, got in enumerate((unwaived, waived)):
            if self.chunks <= LIST_CHUNKS:
                self.listed[w].extend(got)
            else:
                for kind in MismatchKind:
                    self.later[w, kind] += count(got, kind)

    def close(self) -> tuple[list[Mismatch], list[Mismatch]]:
        for (w, kind), n in self.later.items():
            if n:
                self.listed[w].append(Mismatch(kind, note=f"... {n} more in chunks after the "
                                                          f"first {LIST_CHUNKS} with "
                                                          f"mismatches, not listed",
                                               unlisted=n))
        return self.listed


def _values(run: Run, spec: UnitSpec) -> envelopes.Values:
    """A run's results as exact values: a foreign design's decoded results (codes, or a
    fixed-point mantissa and exponent), else the output codes of ``spec.d_format``."""
    res = getattr(run, "results", None)
    if res is None:
        return envelopes.Values.of_codes(spec.d_format, run.outputs)
    if res.encoding == "fixed":
        return envelopes.Values.of_fixed(res.mant, res.exp, res.nan)
    return envelopes.Values.of_codes(res.encoding, res.codes)


def _sets(rep: Report, out: Path, tag: str, backend: Backend, spec: UnitSpec,
          microarch: MicroArch, fault: str | None, replay_command: str | None,
          writes_waves: bool, show: bool, bar: Progress) -> None:
    """Write the census's failing sets (:func:`testbenches.unit.failing.keep_sets`); the
    report's ``failing``, ``replay`` and ``waveform`` are the first failing class's."""
    census = rep.census
    # A line to paste into a shell: paths with spaces or quotes are quoted.
    conform = "" if rep.conformance is None else f" --conformance {rep.conformance.envelope}"
    given = "".join(f" --waive {shlex.quote(w.option)}" for w, _ in census.waivers
                    if w.option is not None)
    head = (replay_command or
            f"mxsim verify --unit {shlex.quote(rep.unit)} --a-format {spec.a_format} "
            f"--b-format {spec.b_format} --lanes {microarch.lanes} --stages "
            f"{microarch.stages} --sim {rep.sim}{conform}") + given
    keep_sets(census, out=out, tag=tag, backend=backend, spec=spec, microarch=microarch,
              fault=fault, conformance=rep.conformance is not None,
              replay_line=lambda path: f"{head} --replay {shlex.quote(str(path))} --waves",
              writes_waves=writes_waves, show=show, bar=bar)
    failing = [e for k, e in census.ordered()
               if k.kind in VERDICT_KINDS[rep.conformance is not None] and e.set]
    if failing:
        rep.failing, rep.replay, rep.waveform = failing[0].set, failing[0].replay, \
            failing[0].waveform
