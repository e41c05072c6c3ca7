"""The failing sets of a verification run: one per class of its census, shrunk and replayable.

For each class of the census (:class:`testbenches.sim.census.Census`) that counts against the
verdict, in the order the classes first showed:

1. **The set.** A class of single results (a value or flags mismatch) starts from one failing
   dot, the first of the chunk where the class first showed; any other class (timing, missing
   results, a conformance envelope) from the dots its mismatches name in that chunk (at most
   :data:`~testbenches.sim.census.KEPT_DOTS`; none named: the chunk's first four).
2. **Shrinking**, for the first ``census.detailed`` value classes, on backends whose reruns
   are cheap (the bulk harnesses, Amaranth's simulator; not cocotb, whose every rerun costs a
   simulator start-up, nor a class with no single dot). The one dot is run alone: if it shows
   the class again, it is reduced in rounds (at most :data:`SHRINK_ROUNDS`), each round one
   backend run of every candidate at once: the dot with one aligned run of elements (all of
   K, half, a quarter, ..., one element) set to zero in both A and B, or with C set to +0, each
   inside the port map's ``[domain]``; the candidate that still shows the same class (family,
   formats and ulp bucket) with the most zero elements is kept. The result is confirmed
   alone. A dot that does not show its class alone (the design's state mattered) gives way to
   the class's kept dots, rerun once to say whether they show it. On cocotb the set is the one
   failing dot as it was; its waveform rerun, where there is one, says whether it shows the
   class alone.
3. **A replay line**, and for the first ``census.detailed`` classes **a waveform**: the set
   rerun through the backend's waveform twin (``with_waves()``, built once for all classes)
   or, where the backend writes waveforms itself, through it; each copied to a name of its
   own (a simulator writes every run's waveform to one file). Past ``detailed`` classes, no
   shrinking and no waveform (the report says so).

Each waiver that matched something gets a set of its first waived dot (or dots), unshrunk,
with a replay line.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

from mxsim import vectors
from mxsim.engine import fast
from mxsim.microarch import MicroArch
from mxsim.progress import Progress, Step
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

from ..sim.backend import Backend, Run, Stimulus, build_message
from ..sim.census import Census, ClassKey, Entry, observe

__all__ = ["keep_sets", "replay_stimulus", "shows", "SHRINK_ROUNDS", "VERDICT_KINDS"]

#: Rounds of shrinking per class (each one backend run of every candidate).
SHRINK_ROUNDS = 8
#: The kinds of class that fail a run; with a conformance check the envelope judges values.
VERDICT_KINDS = {False: ("value", "flags", "missing", "cycle"), True: ("cycle", "envelope")}


def replay_stimulus(seed: int = 0) -> Stimulus:
    """The handshake stimulus of ``verify --replay`` (run with ``seed``): what a failing
    set's replay line reruns it with."""
    return Stimulus.mixed(seed * 100003, start=1)


def shows(spec: UnitSpec, vs: VectorSet, run: Run, key: ClassKey) -> np.ndarray:
    """Which dots of ``run`` (of ``vs``) show a mismatch of class ``key``."""
    want = run.want if run.want is not None else fast.dot(spec, vs).reshape(-1)
    rec = observe(spec, vs, run, want)
    out = np.zeros(vs.num_dots, bool)
    if key in rec.keys:
        dots = rec.dot[rec.key == rec.keys.index(key)]
        out[dots[(dots >= 0) & (dots < vs.num_dots)]] = True
    return out


def keep_sets(census: Census, *, out: Path, tag: str, backend: Backend, spec: UnitSpec,
              microarch: MicroArch, fault: str | None, conformance: bool,
              replay_line: Callable[[Path], str], writes_waves: bool, show: bool,
              bar: Progress) -> None:
    """Write every failing class's set, replay line and waveform, and every waiver's set,
    into the census's entries (see the module docstring)."""
    stim = replay_stimulus()
    cheap = backend.mode != "cocotb"
    failing = [(k, e) for k, e in census.ordered() if k.kind in VERDICT_KINDS[conformance]]
    twin = _Twin(backend, writes_waves, spec, microarch, fault, out, show, bar)
    for n, (key, entry) in enumerate(failing, 1):
        detailed = n <= census.detailed
        if detailed and cheap and key.kind == "value" and entry.pick is not None:
            vs = _shrunk(backend, spec, key, entry, stim)
        else:
            vs = entry.pick or entry.kept
            entry.how = (f"{vs.num_dots} dot{'s' if vs.num_dots != 1 else ''} of chunk "
                         f"{entry.chunk}" + ("" if cheap or entry.pick is None else
                                             ", not shrunk (cocotb)"))
        _write(entry, vs, out / f"failing-{tag}-{n}-{key.slug}.npz", replay_line)
        if detailed:
            run = twin.run(vs, stim, f"class{n}")
            if run is not None:
                entry.waveform = _copy_wave(run.waveform, out / f"waves-{tag}-{n}-{key.slug}")
                if entry.reproduced is None and key.kind != "envelope":
                    entry.reproduced = bool(shows(spec, vs, run, key).any())
                    entry.how += "; shows the class alone" if entry.reproduced else \
                        "; does not show the class alone"
    for i, (w, entry) in enumerate(census.waivers, 1):
        if entry.count:
            vs = entry.pick or entry.kept
            entry.how = f"{vs.num_dots} dot{'s' if vs.num_dots != 1 else ''} of chunk " \
                        f"{entry.chunk}"
            slug = re.sub(r"[^a-z0-9]+", "-", w.name.lower()).strip("-")[:40] or "waiver"
            _write(entry, vs, out / f"waived-{tag}-{i}-{slug}.npz", replay_line)
    more = len(failing) - census.detailed
    census.sets_note = (
        ("sets shrunk by reruns" if cheap else "sets of one failing dot, not shrunk (cocotb "
                                               "reruns cost a simulator start-up each)")
        + (f"; waveforms of the first {census.detailed}" if twin.possible else "")
        + (f"; the {more} later class{'es' if more != 1 else ''} not shrunk"
           + (" and without waveforms" if twin.possible else "") if more > 0 else ""))


def _write(entry: Entry, vs: VectorSet, path: Path, replay_line: Callable[[Path], str]) -> None:
    vectors.save(vs, path)
    entry.set, entry.set_dots, entry.replay = str(path), vs.num_dots, replay_line(path)


def _copy_wave(wave: str | None, stem: Path) -> str | None:
    """The waveform a run wrote, copied to ``stem`` with its suffix (None: none written)."""
    if wave is None or not Path(wave).is_file():
        return wave
    dest = stem.with_suffix(Path(wave).suffix)
    shutil.copyfile(wave, dest)
    return str(dest)


class _Twin:
    """The backend that reruns a set with a waveform: ``with_waves()`` (built on first use),
    or the backend itself where its runs write waveforms; none otherwise."""

    def __init__(self, backend: Backend, writes_waves: bool, spec: UnitSpec,
                 microarch: MicroArch, fault: str | None, out: Path, show: bool, bar: Progress):
        self.waves = backend.with_waves()
        self.ready = self.waves is None
        if self.waves is None and writes_waves:
            self.waves = backend
        self.possible = self.waves is not None
        self._build = (spec, microarch, fault, out, show, bar)

    def run(self, vs: VectorSet, stim: Stimulus, name: str) -> Run | None:
        if self.waves is None:
            return None
        if not self.ready:
            spec, microarch, fault, out, show, bar = self._build
            bar.close()
            with Step(build_message(self.waves, microarch), show,
                      expect=self.waves.build_seconds):
                self.waves.build(spec, microarch, out, fault=fault)
            self.ready = True
        return self.waves.run(vs, stim, name=name)


def _shrunk(backend: Backend, spec: UnitSpec, key: ClassKey, entry: Entry, stim: Stimulus
            ) -> VectorSet:
    """The class's one dot shrunk (see the module docstring); ``entry.how`` and
    ``entry.reproduced`` say what came of it."""
    one = entry.pick
    if not shows(spec, one, backend.run(one, stim, name="shrink"), key)[0]:
        kept = entry.kept
        entry.reproduced = bool(shows(spec, kept, backend.run(kept, stim, name="shrink"),
                                      key).any())
        if kept.num_dots == 1:
            entry.how = (f"1 dot of chunk {entry.chunk}; it does not show the class alone "
                         f"(the run before it mattered)")
        else:
            entry.how = (f"{kept.num_dots} dots of chunk {entry.chunk}: the first does not "
                         f"show the class alone; these " + (
                             "do" if entry.reproduced else "do not either (the run before "
                                                           "them mattered)"))
        return kept
    domain = getattr(getattr(backend, "pm", None), "domain", None)
    cur = one
    for _ in range(SHRINK_ROUNDS):
        batch = _candidates(cur)
        if batch is None:
            break
        if domain is not None:
            inside = ~domain.violations(batch)[0]
            if not inside.any():
                break
            batch = batch.take_dots(np.flatnonzero(inside))
        hit = shows(spec, batch, backend.run(batch, stim, name="shrink"), key)
        if not hit.any():
            break
        best = int(np.flatnonzero(hit)[np.argmax(_zeros(batch)[hit])])
        cur = batch.take_dots([best])
    if cur is not one and not shows(spec, cur, backend.run(cur, stim, name="shrink"), key)[0]:
        cur = one                                    # the pieces disagreed: keep the dot
    entry.reproduced = True
    k = one.k
    zeroed = int(_zeros(cur)[0] - _zeros(one)[0])
    c_zeroed = cur.c is not None and one.c is not None and \
        int(np.asarray(cur.c).reshape(-1)[0]) == 0 != int(np.asarray(one.c).reshape(-1)[0])
    what = ", ".join(x for x in (f"{zeroed - c_zeroed} of {k} element pairs zeroed"
                                 if zeroed - c_zeroed else "", "C set to +0" if c_zeroed
                                 else "") if x)
    entry.how = f"1 dot, {'shrunk: ' + what if what else 'as found'}; shows the class alone"
    return cur.replace(extra={"dots": list(one.extra.get("dots", [])),
                              "chunk": entry.chunk})


def _zeros(vs: VectorSet) -> np.ndarray:
    """Zero positions (A and B both zero) of each dot of a set of 1 x 1 dots, and a zero C."""
    both = (vs.a[:, 0, :] == 0) & (vs.b[:, :, 0] == 0)
    c = np.zeros(len(both), int) if vs.c is None else (
        np.asarray(vs.c).reshape(len(both)) == 0).astype(int)
    return both.sum(axis=1) + c


def _candidates(cur: VectorSet) -> VectorSet | None:
    """Every one-step reduction of the one dot ``cur``: an aligned run of elements set to
    zero in A and B (all K, K/2, K/4, ..., 1 elements; only runs with a non-zero element), or
    C set to +0; None when nothing is left to reduce."""
    a, b = cur.a[0, 0], cur.b[0, :, 0]
    k = len(a)
    live = (a != 0) | (b != 0)
    runs = []
    for size in sorted({k >> i for i in range(k.bit_length())}, reverse=True):
        runs += [(j, j + size) for j in range(0, k, size) if live[j:j + size].any()]
    zero_c = cur.c is not None and int(np.asarray(cur.c).reshape(-1)[0]) != 0
    n = len(runs) + zero_c
    if n == 0:
        return None
    batch = {"a": np.repeat(cur.a, n, axis=0), "b": np.repeat(cur.b, n, axis=0)}
    for i, (lo, hi) in enumerate(runs):
        batch["a"][i, 0, lo:hi] = 0
        batch["b"][i, lo:hi, 0] = 0
    for name in ("c", "a_scale", "b_scale"):
        x = getattr(cur, name)
        if x is not None and np.ndim(x) == cur.a.ndim:
            batch[name] = np.repeat(x, n, axis=0)
    if zero_c:
        batch["c"][-1] = 0
    return cur.replace(**batch, extra={})
