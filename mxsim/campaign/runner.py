"""The run loop: skip what the store has, run the rest, store each result as it arrives."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import MxsimError
from ..progress import Progress, wanted
from .executors import (
    ClusterError,
    connect,
    dask_installed,
    executor_names,
    load_cluster_spec,
    scheduler_address,
)
from .pool import run_pool
from .report import Failure, Report
from .store import Store
from .task import Task
from .worker import execute

__all__ = ["run", "Interrupted"]


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, SIGHUP: ``signum``) during a campaign: pending tasks cancelled, the
    workers stopped; the store holds the finished results only (the CLIs exit 130, 143,
    129)."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__()
        self.signum = signum


def _paths() -> list[str]:
    """Folders a worker may need on its ``sys.path`` to import task functions: the folder
    that holds this mxsim and the current directory."""
    root = str(Path(__file__).resolve().parents[2])
    return [root, os.getcwd()]


def _check(executor: str, scheduler: str | None, cluster_spec: Any) -> None:
    """Refuse an executor and cluster that do not go together (before the store is made)."""
    if executor not in executor_names:
        raise MxsimError(f"unknown executor {executor!r}; choose from {', '.join(executor_names)}")
    # A malformed address or spec file: one line now, before Dask is imported or a task runs.
    if scheduler is not None:
        scheduler_address(scheduler)
    if cluster_spec is not None:
        load_cluster_spec(cluster_spec)
    if scheduler is not None and cluster_spec is not None:
        raise MxsimError("give a scheduler address or a cluster spec, not both")
    if scheduler is not None or cluster_spec is not None:
        if executor in ("inprocess", "pool"):
            raise MxsimError(f"the {'in-process' if executor == 'inprocess' else 'pool'} "
                             f"executor takes no scheduler or cluster spec")
        if not dask_installed():
            raise ClusterError("a Dask scheduler or cluster spec needs Dask, which is not "
                               "installed: pip install 'mxsim[cluster]'")


def _pick(executor: str, pending: int, scheduler: str | None, cluster_spec: Any) -> str:
    """What runs the tasks: ``inprocess``, ``pool`` or ``dask``. ``auto`` and ``local`` run
    them on a local Dask cluster, or on the pool when Dask is not installed."""
    if scheduler is not None or cluster_spec is not None:
        return "dask"
    if executor == "auto" and pending <= 1:
        return "inprocess"
    if executor in ("auto", "local"):
        return "dask" if dask_installed() else "pool"
    return executor


class _Loop:
    """Bookkeeping shared by the executors: store, report, progress."""

    def __init__(self, store: Store, report: Report, bar: Progress, by_key: dict[str, Task]):
        self.store, self.report, self.bar, self.by_key = store, report, bar, by_key
        self.finished = report.cached
        self.t0 = time.perf_counter()

    def timed(self) -> None:
        """The computing time so far: from the workers' start to the last result."""
        self.report.compute = time.perf_counter() - self.t0

    def record(self, task: Task, outcome: dict[str, Any]) -> None:
        seconds = float(outcome.get("seconds", 0.0))
        worker = str(outcome.get("worker", ""))
        self.report.timings.append((task.name, seconds, worker))
        self.report.task_seconds += seconds
        if outcome.get("ok"):
            self.store.put(task.key, outcome["result"], label=task.label, fn=task.fn,
                           seconds=round(seconds, 6))
            self.report.results[task.key] = outcome["result"]
            self.report.done += 1
        else:
            self.report.failed.append(Failure(task.name, str(outcome.get("error", "")),
                                              task.replay))
        self.finished += 1
        self.timed()
        failed = len(self.report.failed)
        self.bar.update(self.finished, note=f"{failed} failed" if failed else "")


def _run_inprocess(loop: _Loop, pending: Sequence[Task]) -> None:
    for task in pending:
        loop.record(task, execute(task.fn, task.args))


def _run_pool(loop: _Loop, pending: Sequence[Task], workers: int | None) -> None:
    # No start-up to speak of: the pool starts each worker with its first task (in compute).
    loop.report.executor = "pool"
    loop.t0 = loop.bar.t0 = time.perf_counter()
    loop.report.workers = run_pool(pending, workers, _paths(), loop.record)


def _run_dask(loop: _Loop, pending: Sequence[Task], workers: int | None, scheduler: str | None,
              cluster_spec: Any) -> None:
    from distributed import as_completed
    t0 = time.perf_counter()
    with connect(workers, scheduler, cluster_spec) as conn:
        loop.report.workers, loop.report.dashboard = conn.workers, conn.dashboard
        loop.report.executor = conn.kind
        loop.report.startup = time.perf_counter() - t0
        loop.t0 = loop.bar.t0 = time.perf_counter()   # the ETA from the work, not the start-up
        if conn.dashboard and loop.bar.enabled:
            print(f"\r\x1b[K  Dask dashboard: {conn.dashboard}", file=sys.stderr, flush=True)
        paths = _paths()
        futures = [conn.client.submit(execute, t.fn, dict(t.args), paths, pure=False,
                                      key=f"mxsim-task-{t.key}") for t in pending]
        by_future = {f.key: loop.by_key[f.key.removeprefix("mxsim-task-")] for f in futures}
        try:
            for future in as_completed(futures, loop=conn.client.loop):
                task = by_future[future.key]
                try:
                    outcome = future.result()
                except Exception as exc:         # KilledWorker: it died ALLOWED_FAILURES times
                    outcome = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
                loop.record(task, outcome)
                future.release()
        except BaseException:
            conn.client.cancel(futures)
            raise


def run(tasks: Iterable[Task], store: Store | str | os.PathLike, *, executor: str = "auto",
        workers: int | None = None, scheduler: str | None = None,
        cluster_spec: str | os.PathLike | None = None, progress: bool | None = None) -> Report:
    """Run the tasks not in ``store`` and store their results as they arrive; see
    :mod:`mxsim.campaign`. Raises :class:`Interrupted` on Ctrl-C (and on SIGTERM or SIGHUP
    in a command: :class:`mxsim.errors.Terminated`)."""
    t0 = time.perf_counter()
    _check(executor, scheduler, cluster_spec)
    store = store if isinstance(store, Store) else Store(store)
    by_key: dict[str, Task] = {}
    for task in tasks:
        by_key.setdefault(task.key, task)
    if workers is not None and workers < 1:
        raise MxsimError(f"workers must be at least 1, not {workers}")
    report = Report(tasks=len(by_key))
    pending = []
    for key, task in by_key.items():
        record, damage = store.lookup(key, task.fn)
        if record is None:
            # Checked now, not when the result arrives: a store that cannot take it fails
            # before any work is done.
            store.replaceable(key)
            pending.append(task)
            if damage is not None:
                report.damaged.append(f"{store.path_of(key)} ({damage})")
        else:
            report.results[key] = record["result"]
            report.cached += 1
    kind = _pick(executor, len(pending), scheduler, cluster_spec)
    bar = Progress(len(by_key), enabled=wanted(progress), what="tasks", label="campaign")
    loop = _Loop(store, report, bar, by_key)
    try:
        with bar:
            bar.update(report.cached)
            if pending and kind == "inprocess":
                _run_inprocess(loop, pending)
            elif pending and kind == "pool":
                _run_pool(loop, pending, workers)
            elif pending:
                _run_dask(loop, pending, workers, scheduler, cluster_spec)
    except KeyboardInterrupt as exc:
        raise Interrupted(getattr(exc, "signum", signal.SIGINT)) from None
    # The results in the order the tasks were given (the store's and the workers' order vary).
    report.results = {k: report.results[k] for k in by_key if k in report.results}
    report.seconds = time.perf_counter() - t0
    return report
