"""Scaling of mxsim.campaign: the same campaign on 1, 2 and N local Dask workers.

    python benchmarks/bench_campaign.py [--workers 1,2,16] [--tasks 64] [--workload spin]
                                        [--rounds 400000] [--dots 1048576] [--json]

Workloads (CPU-bound; spin and engine need no RTL toolchain, only mxsim, numpy and the
``cluster`` extra):

* ``spin`` (default): :func:`mxsim.campaign.demo.spin`, a pure-Python SHA-256 chain of
  ``--rounds`` rounds per task (400,000 is about 0.4 s here): a synthetic task with the shape
  of a verification chunk (a seed in; counts and a digest out) and no dependency.
* ``engine``: a fast-engine chunk (:func:`engine_chunk`): ``--dots`` seeded e4m3 dot products
  with E8M0 block scales through ``blackwell-mxf8f6f4`` on the fast engine, the model half of a
  verification chunk (the RTL half needs Verilator), digest of the outputs returned.
* ``verify``: the real thing, the first ``--tasks`` format pairs of the 36-pair campaign
  (:mod:`testbenches.campaigns.pairs`), ``--dots`` vectors per pair through the RTL's bulk harness
  in tasks of one 100,000-vector chunk (needs the ``rtl`` extra and g++). The warm-up builds every
  design's Verilated model into the build cache, so the timed runs simulate and check only.
  Results are compared without their timings.

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
import re
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


def _verify_tasks(pairs: int, dots: int) -> list[Task]:
    """The first ``pairs`` format pairs of the 36-pair campaign (testbenches.campaigns.pairs),
    ``dots``
    vectors each through the bulk harness, in tasks of one 100,000-vector chunk."""
    from testbenches.campaigns import pairs as campaign
    chosen = campaign.parse_pairs(None)[:pairs]
    return campaign.tasks_for(chosen, dots=dots, chunk=100_000, lanes=32, stages=1,
                              sim="verilator", bulk=True, seed=campaign.SEED)


#: What a verification task's result holds that depends on the machine, not the arithmetic.
_TIMING = ("seconds", "sim_seconds", "loop_seconds", "build", "build_seconds", "host")


def _comparable(result: Any) -> Any:
    if isinstance(result, dict):
        return {k: v for k, v in result.items() if k not in _TIMING}
    return result


def _tasks(workload: str, n: int, rounds: int, dots: int, first: int = 0) -> list[Task]:
    if workload == "verify":
        return _verify_tasks(n, dots)
    if workload == "spin":
        return demo_tasks(n, rounds, first=first)
    return [Task("bench_campaign:engine_chunk", {"seed": s, "dots": dots}, label=f"engine#{s}")
            for s in range(first, first + n)]


def _dask_version() -> str:
    import dask
    import distributed
    return f"dask {dask.__version__}, distributed {distributed.__version__}"


def _measure(workers: int, tasks: list[Task], warm: list[Task], warm_all: bool = False
             ) -> dict[str, Any]:
    from distributed import LocalCluster
    t0 = time.perf_counter()
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      host="127.0.0.1", dashboard_address=":0",
                      scheduler_kwargs={"dashboard": False}) as cluster:
        start = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as tmp:
            # Imports and numba's compile in every worker; for verify, every design's
            # Verilated model into the build cache (the timed run reuses it).
            run(warm if warm_all else warm[:workers], Path(tmp) / "warm",
                scheduler=cluster.scheduler_address, progress=False)
            report = run(tasks, Path(tmp) / "store", scheduler=cluster.scheduler_address,
                         progress=False)
    assert not report.failed, report.failed
    return {"workers": workers, "tasks": report.tasks, "startup_s": round(start, 2),
            "wall_s": round(report.seconds, 3), "task_s": round(report.task_seconds, 3),
            "tasks_per_s": round(report.tasks / report.seconds, 3),
            "busy": round(report.speedup, 2),
            "results": {k: _comparable(v) for k, v in report.results.items()}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workers", default=f"1,2,{os.cpu_count() or 1}",
                   help="comma-separated worker counts (default: %(default)s)")
    p.add_argument("--tasks", type=int, default=64)
    p.add_argument("--workload", choices=("spin", "engine", "verify"), default="spin",
                   help="verify: --tasks is the number of format pairs, --dots per pair")
    p.add_argument("--rounds", type=int, default=400_000, help="spin: hash rounds per task")
    p.add_argument("--dots", type=int, default=1 << 20,
                   help="engine: dot products per task; verify: per pair")
    p.add_argument("--json", action="store_true", help="rows as JSON on stdout")
    p.add_argument("--render", metavar="DOC", help="refill DOC's bench_campaign blocks from "
                   "the JSON files they name, and exit")
    args = p.parse_args()
    if args.render:
        path = Path(args.render)
        path.write_text(render(path.read_text(), path.parent.parent))
        return 0
    counts = sorted({int(w) for w in args.workers.split(",") if w.strip()})
    tasks = _tasks(args.workload, args.tasks, args.rounds, args.dots)
    warm = (_verify_tasks(args.tasks, 1000) if args.workload == "verify" else
            _tasks(args.workload, max(counts), 1000, 4096, first=10_000_000))
    load_before = os.getloadavg()[0]
    rows = [_measure(w, tasks, warm, warm_all=args.workload == "verify") for w in counts]
    base = next((r["wall_s"] for r in rows if r["workers"] == 1), None)
    results = [r.pop("results") for r in rows]
    same = all(res == results[0] for res in results)
    for r in rows:
        r["speedup"] = round(base / r["wall_s"], 2) if base else None
    meta = {"workload": args.workload, "tasks": len(tasks), "rounds": args.rounds,
            "dots": args.dots, "cpus": os.cpu_count(), "identical_results": same,
            **({"pairs": args.tasks} if args.workload == "verify" else {}),
            "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            "dask": _dask_version(), "versions": versions_line()}
    if args.json:
        print(json.dumps({"meta": meta, "rows": rows}, indent=1))
        return 0
    print(meta["versions"])
    print(table({"meta": meta, "rows": rows}), end="")
    return 0


_BLOCK = re.compile(r"(<!-- bench_campaign: (\S+) -->\n)(.*?)(<!-- bench_campaign: end -->)",
                    re.S)


def render(doc: str, root: Path) -> str:
    """``doc`` with each ``<!-- bench_campaign: FILE -->`` block refilled from FILE (a
    ``--json`` output, relative to ``root``)."""
    return _BLOCK.sub(lambda m: m[1] + table(json.loads((root / m[2]).read_text())) + m[4], doc)


def table(run: dict[str, Any]) -> str:
    """A markdown table of one ``--json`` output (docs/campaigns.md renders committed runs)."""
    m = run["meta"]
    lines = [f"{m['workload']}, {m['tasks']} tasks, {m['cpus']} CPUs ({m['dask']}), load average "
             f"{m['load_average'][0]:.1f} before / {m['load_average'][1]:.1f} after; identical "
             f"results on every worker count: {'yes' if m['identical_results'] else 'NO'}", "",
             "| workers | start-up | wall | tasks/s | speed-up | busy workers "
             "| time per task |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    one = next((r["task_s"] / r["tasks"] for r in run["rows"] if r["workers"] == 1), None)
    for r in run["rows"]:
        sp = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
        per = r["task_s"] / r["tasks"]
        rel = f" ({per / one:.2f}x)" if one else ""
        lines.append(f"| {r['workers']} | {r['startup_s']:.1f} s | {r['wall_s']:.2f} s "
                     f"| {r['tasks_per_s']:.2f} | {sp} | {r['busy']:.2f} | {per:.2f} s{rel} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
