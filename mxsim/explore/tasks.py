"""Running a sweep's points: one area per distinct RTL, one accuracy per distinct (spec,
workload), cached in ``OUT/cache`` and run in a process pool.

The area cost comes in as functions (:class:`AreaCost`): the CLI passes the RTL generator's and
Yosys's, so this package never imports ``hdl``. Areas are cached by the hash of the Verilog text
(``cache/area/HASH-FPGA.json``; points that differ only in workload share it, and each Verilog is
kept as ``cache/rtl/HASH.v``), with an index from a design's RTL key to that hash
(``cache/index/``) that spares regenerating it on resume; accuracies by the hash of the spec and
the workload (``cache/accuracy/``). A sweep that is stopped (Ctrl-C) keeps what it finished; the
same command resumes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..errors import MxsimError
from ..microarch import MicroArch
from ..output import write_text
from ..progress import Progress
from ..spec import UnitSpec
from . import metrics
from .designs import CACHE_VERSION, stable_hash
from .sweep import Sweep
from .workloads import Workload

__all__ = ["Interrupted", "Synthesis", "AreaCost", "Results", "measure_area", "run"]


class Interrupted(MxsimError):
    """The sweep was stopped; what finished is cached and the same command resumes it."""


class Synthesis(Protocol):
    """What a synthesis of one Verilog reports (``hdl.verilog.Stats``)."""
    cells: dict[str, int]          #: generic cells by type
    total_cells: int
    flip_flops: int
    depth: int                     #: the longest topological path, in cells
    gate_equivalents: float        #: NAND2 gate equivalents
    luts: int                      #: iCE40 LUT4s (``synth_ice40``)
    lut4: int | None               #: 4-input LUTs (``abc -lut 4``)
    ice40: dict[str, int] | None   #: iCE40 cells by type


@dataclass(frozen=True)
class AreaCost:
    """How a design is sized: ``verilog(unit_spec, microarch)`` is its Verilog text, and
    ``synthesise(unit_spec, microarch, text, fpga)`` Yosys's figures for that text, mapped to
    ``fpga`` (one of :data:`~mxsim.explore.sweep.FPGAS`). Both run in the pool's workers: they
    must be module-level functions (picklable)."""
    verilog: Callable[[UnitSpec, MicroArch], str]
    synthesise: Callable[[UnitSpec, MicroArch, str, str], Synthesis]


@dataclass
class Results:
    """A finished sweep: one row per point, the references' accuracies, what ran."""
    sweep: Sweep
    out: Path
    rows: list[dict[str, Any]]
    references: list[dict[str, Any]]
    computed: dict[str, int]          #: tasks run this time, by kind
    reused: dict[str, int]            #: tasks taken from the cache, by kind
    seconds: float
    files: list[str] = field(default_factory=list)


def measure_area(cost: AreaCost, unit_spec: UnitSpec, microarch: MicroArch, fpga: str,
                 cache_dir: str | None = None) -> dict[str, Any]:
    """Synthesis figures of ``cost.verilog(unit_spec, microarch)``, with the Verilog's hash.

    With ``cache_dir``, the Verilog is kept as ``rtl/HASH.v`` and a synthesis already in
    ``area/HASH-FPGA.json`` (the same Verilog text) is reused instead of run again.
    """
    t0 = time.perf_counter()
    text = cost.verilog(unit_spec, microarch)
    rtl_hash = hashlib.sha256(text.encode()).hexdigest()[:16]
    if cache_dir is not None:
        _write(Path(cache_dir) / "rtl" / f"{rtl_hash}.v", text)
        got = _read(Path(cache_dir) / "area" / f"{rtl_hash}-{fpga}.json")
        if got is not None:
            return {**got, "reused": True}           # this Verilog was synthesised already
    st = cost.synthesise(unit_spec, microarch, text, fpga)
    luts = st.luts if fpga == "ice40" else st.lut4 if fpga == "lut4" else None
    return {"rtl_hash": rtl_hash, "spec_digest": unit_spec.digest(), "cells": st.cells,
            "total_cells": st.total_cells, "flip_flops": st.flip_flops, "depth": st.depth,
            "gate_equivalents": st.gate_equivalents, "luts": luts, "fpga": fpga,
            "fpga_cells": st.ice40, "seconds": round(time.perf_counter() - t0, 1)}


def _accuracy_key(spec: UnitSpec, w: Workload) -> str:
    d = spec.to_dict()
    for k in ("name", "instruction", "provenance"):
        d.pop(k, None)
    return stable_hash({"spec": d, "w": w.inputs_dict(), "v": CACHE_VERSION})


def _write(path: Path, text: str) -> None:
    """Write atomically (a reader, or a resumed sweep, sees the whole file or none), making
    the cache's folders as needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, text)


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _worker_init() -> None:
    """A worker leads its own process group and ignores SIGINT: Ctrl-C reaches only the
    sweep, which then stops each worker together with its Yosys child (SIGKILL to the
    group), and no worker prints a traceback of its own."""
    os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


#: A task's key, ("area", RTL key) or ("accuracy", accuracy key).
_Key = tuple[str, str]


@dataclass
class _Task:
    fn: Callable[..., dict[str, Any]]
    args: tuple
    path: Path                        #: where its result (or, for an area, its index) is kept
    weight: int                       #: a synthesis takes about 40 accuracy runs' time


def _tasks(sweep: Sweep, cache: Path, cost: AreaCost) -> dict[_Key, _Task]:
    """One area per distinct RTL, one accuracy per distinct (spec, workload)."""
    tasks: dict[_Key, _Task] = {}
    for d in sweep.designs:
        tasks.setdefault(("area", d.rtl_key), _Task(
            measure_area, (cost, d.unit_spec, d.microarch, sweep.fpga, str(cache)),
            cache / "index" / f"{d.rtl_key}-{sweep.fpga}.json", 40))
    specs = [d.spec for d in sweep.designs] + [r.spec for r in sweep.references]
    for w in sweep.workloads:               # workload by workload: they share inputs
        for s in specs:
            key = _accuracy_key(s, w)
            tasks.setdefault(("accuracy", key), _Task(
                metrics.accuracy, (s, w), cache / "accuracy" / f"{key}.json", 1))
    return tasks


def _cached(tasks: dict[_Key, _Task], cache: Path, fpga: str) -> dict[_Key, Any]:
    """The tasks' results already in the cache (an area through its index)."""
    found: dict[_Key, Any] = {}
    for tk, task in tasks.items():
        got = _read(task.path)
        if got is not None and tk[0] == "area":
            got = _read(cache / "area" / f"{got['rtl_hash']}-{fpga}.json")
        if got is not None:
            found[tk] = got
    return found


class _Runner:
    """Runs the pending tasks, storing each result as it finishes and counting them."""

    def __init__(self, sweep: Sweep, cache: Path, tasks: dict[_Key, _Task],
                 found: dict[_Key, Any], progress: bool | None,
                 on_done: Callable[[int], None] | None):
        self.sweep, self.cache, self.tasks, self.found = sweep, cache, tasks, found
        self.pending = sorted((tk for tk in tasks if tk not in found),
                              key=lambda tk: -tasks[tk].weight)     # the long syntheses first
        self.reused = {kind: sum(1 for k in found if k[0] == kind)
                       for kind in ("area", "accuracy")}
        self.computed = {"area": 0, "accuracy": 0}
        self.total_w = sum(tasks[tk].weight for tk in self.pending) or 1
        self.bar = Progress(len(self.pending), progress, what="tasks")  # None: on for a tty
        self.done_w = 0
        self.n_done = 0
        self.on_done = on_done

    def finish(self, tk: _Key, result: dict[str, Any]) -> None:
        hit = result.pop("reused", False)
        if tk[0] == "area":
            if not hit:
                _write(self.cache / "area" / f"{result['rtl_hash']}-{self.sweep.fpga}.json",
                       json.dumps(result, indent=1))
            _write(self.tasks[tk].path, json.dumps({"rtl_hash": result["rtl_hash"]}))
        else:
            _write(self.tasks[tk].path, json.dumps(result, indent=1))
        self.found[tk] = result
        (self.reused if hit else self.computed)[tk[0]] += 1
        self.done_w += self.tasks[tk].weight
        self.n_done += 1
        self.bar.update(self.n_done, f"(area {self.computed['area']}, accuracy "
                                     f"{self.computed['accuracy']})",
                        frac=self.done_w / self.total_w)
        if self.on_done is not None:
            self.on_done(self.n_done)

    def run(self, jobs: int) -> None:
        """Run every pending task (in ``jobs`` processes); raise Interrupted on Ctrl-C."""
        self.bar.update(0, frac=0.0)
        try:
            if jobs == 1 or len(self.pending) <= 1:
                for tk in self.pending:
                    self.finish(tk, self.tasks[tk].fn(*self.tasks[tk].args))
            else:
                self._pool(jobs)
        except KeyboardInterrupt:
            self.bar.close()
            raise Interrupted(f"interrupted: {self.n_done} of {len(self.pending)} tasks "
                              f"finished this run and are cached in {self.cache}; run the same "
                              f"command to resume") from None
        self.bar.close()

    def _pool(self, jobs: int) -> None:
        with ProcessPoolExecutor(max_workers=jobs, initializer=_worker_init) as pool:
            futures = {pool.submit(self.tasks[tk].fn, *self.tasks[tk].args): tk
                       for tk in self.pending}
            try:
                remaining = set(futures)
                while remaining:
                    ready, remaining = wait(remaining, return_when=FIRST_COMPLETED)
                    for f in ready:
                        self.finish(futures[f], f.result())
            except BaseException:
                # Stop the workers and their Yosys runs now (each is its own process
                # group); ``_processes`` is private, but the only handle on them.
                for proc in list((pool._processes or {}).values()):
                    with contextlib.suppress(OSError):
                        os.killpg(proc.pid, signal.SIGKILL)
                pool.shutdown(wait=False, cancel_futures=True)
                raise


def run(sweep: Sweep, out: str | os.PathLike, *, area: AreaCost, jobs: int | None = None,
        progress: bool | None = None, fresh: bool = False,
        on_done: Callable[[int], None] | None = None) -> Results:
    """Run every point of ``sweep`` not already in ``out/cache`` and gather the rows, the
    Pareto front marked (no report written). ``on_done(n)`` is called after the n-th task
    finishes (tests use it to interrupt a sweep)."""
    t0 = time.perf_counter()
    out = Path(out)
    cache = out / "cache"
    jobs = max(1, jobs or os.cpu_count() or 1)
    if fresh and cache.exists():
        shutil.rmtree(cache)
    for stale in cache.glob("**/.*.tmp"):           # left by a worker that was stopped
        stale.unlink(missing_ok=True)
    tasks = _tasks(sweep, cache, area)
    runner = _Runner(sweep, cache, tasks, _cached(tasks, cache, sweep.fpga), progress, on_done)
    runner.run(jobs)
    found = runner.found
    rows = []
    for d in sweep.designs:
        cost = found[("area", d.rtl_key)]
        for w in sweep.workloads:
            acc = found[("accuracy", _accuracy_key(d.spec, w))]
            rows.append(metrics.row(sweep.error, d, w, acc, cost, metrics.throughput(
                d, w, sweep.rows, sweep.cols, sweep.bandwidth)))
    metrics.mark_pareto(rows)
    refs = [{"label": r.label, "workload": w.name, "spec": r.spec.name,
             "spec_digest": r.spec.digest(),
             **found[("accuracy", _accuracy_key(r.spec, w))]}
            for r in sweep.references for w in sweep.workloads]
    return Results(sweep, out, rows, refs, runner.computed, runner.reused,
                   time.perf_counter() - t0)
