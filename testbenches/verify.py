"""``mxsim verify``: build a unit's RTL, simulate constrained-random stimulus, check every
output bit against the engine and every cycle against the cycle model, measure coverage.

The stimulus runs in chunks (one simulator build, one cocotb run per chunk): chunk ``i`` has
``1 + i % 3`` blocks per dot product and cycles through valid/ready probabilities, so chains,
single blocks, bursts and back-pressure all occur. On a mismatch the failing dot products are
written as a minimal vector set, rerun alone with waveforms, and a one-line replay command is
printed. ``bulk=True`` runs the same stimulus through the C++ harness instead
(:mod:`testbenches.bulk`) for millions of vectors.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mxsim import vectors
from mxsim.microarch import MicroArch
from mxsim.progress import Progress, Step, wanted
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

from . import coverage

__all__ = ["Report", "verify", "minimal_set"]

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
    mismatches: list = field(default_factory=list)
    coverage: coverage.Coverage = field(default_factory=coverage.Coverage)
    sim_seconds: float = 0.0       #: simulator runs, start-up included
    loop_seconds: float = 0.0      #: the clocked loop alone (cocotb) or the harness (bulk)
    seconds: float = 0.0
    failing: str | None = None
    replay: str | None = None
    waveform: str | None = None

    @property
    def passed(self) -> bool:
        """No mismatches (the exit code is 0); coverage holes are reported by ``result``."""
        return not self.mismatches

    def _count(self, kind: str) -> int:
        return sum(1 for m in self.mismatches if m.get("kind") == kind)

    @property
    def value_mismatches(self) -> int:
        """Mismatches of an output value (or a result that never left)."""
        return self._count("value")

    @property
    def cycle_mismatches(self) -> int:
        """Mismatches of a handshake or a cycle of the trace against the cycle model."""
        return self._count("cycle")

    @property
    def result(self) -> str:
        """``PASS``, ``PASS with holes`` (no mismatch, coverage incomplete) or ``FAIL``."""
        if self.mismatches:
            return "FAIL"
        return "PASS with holes" if self.coverage.holes() else "PASS"

    def format(self) -> str:
        rate = self.dots / self.sim_seconds if self.sim_seconds else 0
        loop = self.dots / self.loop_seconds if self.loop_seconds else 0
        cps = self.cycles / self.loop_seconds if self.loop_seconds else 0
        holes = len(self.coverage.holes())
        lines = [f"mxsim verify: {self.unit} on {self.sim} ({self.mode})",
                 f"  vectors     {self.dots:,} dot products, {self.beats:,} blocks, "
                 f"{self.cycles:,} cycles",
                 f"  mismatches  {self.value_mismatches} value, {self.cycle_mismatches} cycle"
                 + ("" if self.passed else f" (first: {self.mismatches[0]})"),
                 f"  speed       {loop:,.0f} dot products/s ({cps:,.0f} cycles/s) in the "
                 f"simulation loop ({self.loop_seconds:.1f} s); {rate:,.0f}/s with simulator "
                 f"start-up ({self.sim_seconds:.1f} s); {self.seconds:.1f} s in all",
                 "  coverage", self.coverage.summary()]
        if self.failing:
            lines += [f"  failing     {self.failing}", f"  waveform    {self.waveform}",
                      f"  replay      {self.replay}"]
        result = self.result
        if result == "PASS with holes":
            result += f" ({holes} coverage hole{'s' if holes != 1 else ''}: 0 mismatches, "\
                      f"but not every coverpoint was reached)"
        lines.append("  result      " + result)
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"unit": self.unit, "sim": self.sim, "mode": self.mode, "dots": self.dots,
                "beats": self.beats, "cycles": self.cycles, "result": self.result,
                "value_mismatches": self.value_mismatches,
                "cycle_mismatches": self.cycle_mismatches, "mismatches": self.mismatches,
                "holes": len(self.coverage.holes()),
                "coverage": self.coverage.to_dict(), "sim_seconds": self.sim_seconds,
                "loop_seconds": self.loop_seconds,
                "seconds": self.seconds, "failing": self.failing, "replay": self.replay,
                "passed": self.passed}


def minimal_set(vs: VectorSet, dots: list[int]) -> VectorSet:
    """The dot products ``dots`` (flat indices in batch, row, column order) of ``vs`` as a
    vector set of their own: batch entry ``i`` is one 1 x 1 dot product."""
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n = vs.m, vs.n
    idx = [(d // (m * n), (d // n) % m, d % n) for d in dots]
    a = np.stack([vs.a.reshape(nb, m, -1)[t, i][None] for t, i, _ in idx])
    b = np.stack([vs.b.reshape(nb, vs.k, n)[t, :, j][:, None] for t, _, j in idx])
    c = (np.stack([vs.c.reshape(nb, m, n)[t, i, j][None, None] for t, i, j in idx])
         if vs.c is not None else None)
    sa = sb = None
    if vs.a_scale is not None:
        sa = np.stack([vs.a_scale.reshape(nb, m, -1)[t, i][None] for t, i, _ in idx])
        sb = np.stack([vs.b_scale.reshape(nb, -1, n)[t, :, j][:, None] for t, _, j in idx])
    return VectorSet(a=a, b=b, a_format=vs.a_format, b_format=vs.b_format, c=c, a_scale=sa,
                     b_scale=sb, scale_format=vs.scale_format, block=vs.block,
                     c_format=vs.c_format, producer="mxsim verify (failing dot products)",
                     extra={"dots": [int(d) for d in dots]})


def _classified(m: dict) -> dict:
    """A cocotb scoreboard mismatch (``rtl``/``model``: i.ready, o.valid, o.payload) with its
    kind: ``cycle`` when a handshake bit differs, ``value`` when only the payload does."""
    if "rtl" in m and "model" in m:
        same_bits = list(m["rtl"][:2]) == list(m["model"][:2])
        return {**m, "kind": "value" if same_bits else "cycle"}
    return {**m, "kind": m.get("kind", "value")}


def _failing_dots(mismatches: list, beats_per_dot: int) -> list[int]:
    dots = set()
    for m in mismatches:
        if isinstance(m, dict) and "beat" in m:
            dots.add(int(m["beat"]) // beats_per_dot)
        if isinstance(m, dict) and "dot" in m:
            dots.add(int(m["dot"]))
    return sorted(dots)


#: How long a first build takes on a 2-core machine, for the progress line (later runs reuse
#: the build): the 32-lane MXFP8 unit of `make demo` took 133 s through cocotb and 49 s as the
#: bulk harness on 2026-12-01 (a machine shared with other jobs).
_BUILD_SECONDS = {("verilator", False): 120, ("verilator", True): 60}


def _build_seconds(sim: str, bulk: bool) -> float | None:
    return _BUILD_SECONDS.get(("verilator" if bulk else sim, bulk))


def _build_message(sim: str, bulk: bool, microarch: MicroArch, waves: bool = False) -> str:
    what = ("the bulk C++ harness with Verilator" if bulk else
            f"RTL with {'Verilator' if sim == 'verilator' else 'Icarus'}"
            + (" (with waveforms)" if waves else ""))
    first = _build_seconds(sim, bulk)
    took = f"a first build takes ~{first / 60:.0f} min; " if first else ""
    return f"building {what}, {microarch.lanes} lanes ({took}later runs reuse it)"


def verify(spec: UnitSpec, microarch: MicroArch, *, unit_name: str | None = None,
           sim: str = "verilator", dots: int = 20000, seed: int = 0, chunk: int = 4000,
           out_dir: str | Path = "mxsim-verify", bulk: bool = False,
           progress: bool | None = None, replay: VectorSet | None = None,
           waves: bool = False, fault: str | None = None, keep_failing: bool = True
           ) -> Report:
    """Verify the RTL of ``spec`` built as ``microarch`` (see the module docstring).

    ``fault`` builds a mutant instead (testbenches.mutants); ``keep_failing=False`` skips
    writing the failing set and its waveform."""
    from . import bulk as bulk_mod
    from . import runner

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = unit_name or spec.name
    rep = Report(name, sim, "bulk C++ harness" if bulk else "cocotb")
    t0 = time.perf_counter()
    tag = f"{spec.digest()}-l{microarch.lanes}-s{microarch.stages}" + (
        f"-{fault}" if fault else "")
    show = wanted(progress)
    # Shown only when the build outlasts a second: a build reused from out_dir says nothing.
    with Step(_build_message(sim, bulk, microarch), show, expect=_build_seconds(sim, bulk)):
        if bulk:
            exe = bulk_mod.build(spec, microarch, out / f"bulk-{tag}", fault=fault)
        else:
            b = runner.build(spec, microarch, out / f"{sim}-{tag}{'-waves' if waves else ''}",
                             sim=sim, waves=waves, fault=fault)
    bar = Progress(dots if replay is None else replay.num_dots, show, label="verify")
    bar.update(0)
    chunks = [replay] if replay is not None else None
    i, done = 0, 0
    while True:
        if chunks is not None:
            if i >= len(chunks):
                break
            vs = chunks[i]
            valid_p, ready_p = PRESSURE[1]
        else:
            if done >= dots:
                break
            blocks = 1 + i % 3
            vs = coverage.stimulus(spec, min(chunk, dots - done), blocks=blocks,
                                   seed=seed * 100003 + i)
            valid_p, ready_p = PRESSURE[i % len(PRESSURE)]
        s = seed * 100003 + i
        if bulk:
            r = bulk_mod.run(exe, spec, microarch, vs, seed=s, valid_p=valid_p,
                             ready_p=ready_p)
            mism = [{**(m if isinstance(m, dict) else {"note": m}), "kind": kind}
                    for kind, ms in (("value", r.value_mismatches),
                                     ("cycle", r.timing_mismatches)) for m in ms]
            trace = r.trace
            rep.cycles += r.cycles
            rep.sim_seconds += r.sim_seconds
            rep.loop_seconds += r.sim_seconds
            rep.beats += r.beats
        else:
            r = runner.test(b, vs, seed=s, valid_p=valid_p, ready_p=ready_p, name=f"chunk{i}")
            mism, trace = [_classified(m) for m in r.mismatches], r.trace
            rep.cycles += r.cycles
            rep.sim_seconds += r.seconds
            rep.loop_seconds += r.loop_seconds
            rep.beats += r.beats
        rep.dots += vs.num_dots
        rep.coverage.merge(coverage.measure(spec, vs, trace, microarch.lanes))
        if mism:
            rep.mismatches += [{**m, "chunk": i} for m in mism]
            if not keep_failing:
                break
            beats_per_dot = vs.k // spec.k
            failing = _failing_dots(mism, beats_per_dot) or list(range(min(4, vs.num_dots)))
            fail_set = minimal_set(vs, failing)
            path = out / f"failing-{tag}-chunk{i}.npz"
            vectors.save(fail_set, path)
            rep.failing = str(path)
            a, bf = spec.a_format, spec.b_format
            rep.replay = (f"mxsim verify --unit {name} --a-format {a} --b-format {bf} "
                          f"--lanes {microarch.lanes} --stages {microarch.stages} --sim {sim} "
                          f"--replay {path} --waves")
            if not bulk and not waves:
                bar.close()
                with Step(_build_message(sim, False, microarch, waves=True), show,
                          expect=_build_seconds(sim, False)):
                    wb = runner.build(spec, microarch, out / f"{sim}-{tag}-waves", sim=sim,
                                      waves=True, fault=fault)
                runner.test(wb, fail_set, seed=s, valid_p=valid_p, ready_p=ready_p,
                            name="failing")
                found = sorted(wb.build_dir.glob("*.fst")) + sorted(
                    wb.build_dir.glob("*.vcd"))
                rep.waveform = str(found[-1]) if found else f"(none written in {wb.build_dir})"
            break
        done += vs.num_dots
        i += 1
        bar.update(done)
    bar.close()
    rep.seconds = time.perf_counter() - t0
    (out / f"report-{tag}.json").write_text(json.dumps(rep.to_dict(), indent=1, default=str))
    return rep
