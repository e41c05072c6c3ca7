"""The executor without Dask: a pool of worker processes on this machine.

``auto`` and ``local`` run a campaign here when Dask (the ``cluster`` extra) is not installed,
so that a campaign on one machine needs nothing beyond mxsim (``make demo`` installs no Dask);
``executor="pool"`` asks for it by name. It is the standard library's
``concurrent.futures.ProcessPoolExecutor`` with the spawn start method (a fresh interpreter per
worker: nothing of this process's threads or state is forked), one task at a time per worker,
running the worker function Dask runs (:func:`.worker.execute`), so the results are the same.

- **A worker that dies** (SIGKILL, the out-of-memory killer) breaks the pool: the tasks it had
  not finished run again on a new one; after :data:`.executors.ALLOWED_FAILURES` broken pools
  in one campaign the tasks left are reported as failed, rather than rerun forever.
- **Stopped** (Ctrl-C, SIGTERM, an error in this process), it cancels the tasks not started
  and sends its workers SIGTERM, which unwinds the task each runs (:mod:`mxsim.children`):
  its programs (Yosys, a Verilator build) are stopped and its temporary files removed; a worker
  still alive after the grace period is killed. Workers ignore the terminal's SIGINT, and get
  SIGTERM from the kernel if this process dies.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import suppress
from typing import Any

from .. import children
from .executors import ALLOWED_FAILURES
from .task import Task
from .worker import execute

__all__ = ["run_pool"]


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started; SIGTERM every worker, SIGKILL what is left after the grace
    period."""
    # The pool's processes: ProcessPoolExecutor has no public handle on them before Python
    # 3.14 (terminate_workers), and shutdown() forgets them.
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        with suppress(OSError, ValueError):
            p.terminate()
    deadline = time.monotonic() + children.GRACE + 3.0
    for p in procs:
        with suppress(ValueError):
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join()


def run_pool(pending: Sequence[Task], workers: int | None, paths: list[str],
             record: Callable[[Task, dict[str, Any]], None]) -> int:
    """Run ``pending`` on a pool of ``workers`` processes (default: one per core, at most one
    per task), calling ``record(task, outcome)`` as each finishes; the number of workers."""
    n = max(1, min(workers or os.cpu_count() or 1, len(pending)))
    todo, broken = list(pending), 0
    while todo:
        pool = ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=children.worker_init, initargs=(os.getpid(),))
        again = []
        try:
            futures = {pool.submit(children.run_in_worker, execute, t.fn, dict(t.args), paths): t
                       for t in todo}
            for future in as_completed(futures):
                try:
                    outcome = future.result()
                except BrokenProcessPool:
                    again.append(futures[future])
                    continue
                record(futures[future], outcome)
        except BaseException:
            _stop(pool)
            raise
        pool.shutdown()
        broken += bool(again)
        if again and broken >= ALLOWED_FAILURES:
            for task in again:
                record(task, {"ok": False, "error": f"BrokenProcessPool: worker processes died "
                              f"{broken} times while it was pending (killed, or out of memory)"})
            again = []
        todo = again
    return n
