"""Scaling of mxsim.campaign: the same campaign on 1, 2 and N local Dask workers.

    python benchmarks/bench_campaign.py [--workers 1,2,16] [--tasks 64] [--workload spin]
                                        [--rounds 400000] [--dots 1048576] [--json]

Workloads (CPU-bound, no RTL toolchain: the script needs mxsim, numpy and the ``cluster`` extra):

* ``spin`` (default): :func:`mxsim.campaign.demo.spin`, a pure-Python SHA-256 chain of
  ``--rounds`` rounds per task (400,000 is about 0.4 s here): a synthetic task with the shape
  of a verification chunk (a seed in; counts and a digest out) and no dependency.
* ``engine``: a fast-engine chunk (:func:`engine_chunk`): ``--dots`` seeded e4m3 dot products
  with E8M0 block scales through ``blackwell-mxf8f6f4`` on the fast engine, the model half of a
  verification chunk (the RTL half needs Verilator), digest of the outputs returned.

For each worker count: a ``LocalCluster`` of that many single-threaded worker processes is
started and warmed (one small task per worker: imports, numba's compile), then the campaign runs
into an empty store through ``mxsim.campaign.run(scheduler=...)``. Wall time is the campaign's
alone (cluster start-up is listed apart); tasks/s = tasks / wall; speed-up = wall on 1 worker /
wall on N; busy = sum of task seconds / wall (how many workers were busy on average). All runs
must give the same results (checked). Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _timing import versions_line  # benchmarks/ is on sys.path when run as a script

from mxsim.campaign import Task, run
from mxsim.campaign.demo import demo_tasks


def engine_chunk(args: dict[str, Any]) -> dict[str, Any]:
    """One fast-engine chunk: ``args['dots']`` e4m3 MX dot products (K=32) of seed
    ``args['seed']`` through blackwell-mxf8f6f4; the digest of the outputs."""
    import numpy as np

    from mxsim import presets, vectors
    from mxsim.engine import fast
    side = max(1, int(round(int(args["dots"]) ** 0.5)))
    vs = vectors.generate("normal", a_format="e4m3", scale_format="e8m0", m=side, n=side,
                          k=32, seed=int(args["seed"]), allow_large=True)
    d = fast.dot(presets.get("blackwell-mxf8f6f4").spec_for(vs), vs)
    digest = hashlib.sha256(np.ascontiguousarray(d).tobytes()).hexdigest()
    return {"seed": int(args["seed"]), "dots": side * side, "digest": digest}


def _tasks(workload: str, n: int, rounds: int, dots: int, first: int = 0) -> list[Task]:
    if workload == "spin":
        return demo_tasks(n, rounds, first=first)
    return [Task("bench_campaign:engine_chunk", {"seed": s, "dots": dots}, label=f"engine#{s}")
            for s in range(first, first + n)]


def _measure(workers: int, tasks: list[Task], warm: list[Task]) -> dict[str, Any]:
    from distributed import LocalCluster
    t0 = time.perf_counter()
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      host="127.0.0.1", dashboard_address=None) as cluster:
        start = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as tmp:
            run(warm[:workers], Path(tmp) / "warm", scheduler=cluster.scheduler_address,
                progress=False)
            report = run(tasks, Path(tmp) / "store", scheduler=cluster.scheduler_address,
                         progress=False)
    assert not report.failed, report.failed
    return {"workers": workers, "tasks": report.tasks, "startup_s": round(start, 2),
            "wall_s": round(report.seconds, 3), "task_s": round(report.task_seconds, 3),
            "tasks_per_s": round(report.tasks / report.seconds, 3),
            "busy": round(report.speedup, 2), "results": report.results}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workers", default=f"1,2,{os.cpu_count() or 1}",
                   help="comma-separated worker counts (default: %(default)s)")
    p.add_argument("--tasks", type=int, default=64)
    p.add_argument("--workload", choices=("spin", "engine"), default="spin")
    p.add_argument("--rounds", type=int, default=400_000, help="spin: hash rounds per task")
    p.add_argument("--dots", type=int, default=1 << 20, help="engine: dot products per task")
    p.add_argument("--json", action="store_true", help="rows as JSON on stdout")
    args = p.parse_args()
    counts = sorted({int(w) for w in args.workers.split(",") if w.strip()})
    tasks = _tasks(args.workload, args.tasks, args.rounds, args.dots)
    warm = _tasks(args.workload, max(counts), 1000, 4096, first=10_000_000)
    rows = [_measure(w, tasks, warm) for w in counts]
    base = next((r["wall_s"] for r in rows if r["workers"] == 1), None)
    results = [r.pop("results") for r in rows]
    same = all(res == results[0] for res in results)
    for r in rows:
        r["speedup"] = round(base / r["wall_s"], 2) if base else None
    meta = {"workload": args.workload, "tasks": args.tasks, "rounds": args.rounds,
            "dots": args.dots, "cpus": os.cpu_count(), "identical_results": same,
            "versions": versions_line()}
    if args.json:
        print(json.dumps({"meta": meta, "rows": rows}, indent=1))
        return 0
    print(f"{versions_line()}\n# workload {args.workload}, {args.tasks} tasks, "
          f"{os.cpu_count()} CPUs; identical results on every worker count: {same}")
    print("| workers | start-up | wall | tasks/s | speed-up | busy workers |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        sp = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
        print(f"| {r['workers']} | {r['startup_s']:.1f} s | {r['wall_s']:.2f} s "
              f"| {r['tasks_per_s']:.2f} | {sp} | {r['busy']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
