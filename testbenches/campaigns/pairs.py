"""The documented verification run: every supported format pair through the bulk harness.

    mxsim verify --campaign [PAIRS] --vectors 1000000 --chunk 100000 --stages 1 --seed 7
    python -m testbenches.campaigns.pairs [--dots 1000000] [--lanes 32 --stages 1] [--json OUT]
                                   [--workers N | --scheduler ADDR | --cluster-spec FILE]
    python -m testbenches.campaigns.pairs --markdown docs/data/campaign.json   # the docs' section

For each of the 36 pairs of E4M3/E5M2/E3M2/E2M3/E2M1/INT8 (A and B independent): the unit is
``blackwell-mxf8f6f4`` (F = 25, RZ FP32, E8M0 blocks of 32) where the preset has the pair, and
the same arithmetic with INT8 operands (MXINT8) otherwise. ``mxsim verify --bulk`` stimulus,
every output checked bit for bit against the engine and every cycle of the RTL's trace against
the cycle model; coverage (the handshake coverpoint from the RTL's trace) merged per pair.

Each pair's run is split by chunk into tasks of :mod:`mxsim.campaign`
(:func:`testbenches.campaigns.tasks.run_chunk`; chunk ``i`` has the stimulus it has in one
``verify`` run), run in this process, on a local Dask cluster or an existing one; finished
tasks are kept in a result store (free on resume), and workers build each design's Verilated
model once into a build cache keyed by its RTL hash. The JSON records the run (command, date,
commit, tool versions, executor, workers, speed-up) and per pair the counts, the value and
cycle mismatches, every coverpoint's hits (added across its tasks) and the holes;
:func:`markdown` renders docs/verification.md's results section from it, so no figure there is
typed by hand.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

from mxsim import children, presets
from mxsim.campaign import Report, Task, run
from mxsim.design import resolve_design
from mxsim.errors import MxsimError
from mxsim.microarch import RTL_FORMATS
from mxsim.output import write_text
from mxsim.spec import UnitSpec
from mxsim.versions import installed

from ..sim import build_cache
from ..unit import coverage
from ..unit.verify import chunk_plan
from . import tasks as campaign_tasks

__all__ = ["spec_for_pair", "main", "markdown", "SEED", "parse_pairs", "tasks_for",
           "tasks_for_specs", "run_campaign", "rows_of", "record_of"]

SEED = 7                     #: the campaign's stimulus seed (every pair, every chunk from it)
TASK_FN = "testbenches.campaigns.tasks:run_chunk"


def spec_for_pair(a: str, b: str) -> UnitSpec:
    p = presets.get("blackwell-mxf8f6f4")
    if (a, b) in p.pairs:
        return p.spec(a, b, scale_format="e8m0", block=32)
    base = p.spec("e4m3", "e4m3", scale_format="e8m0", block=32)
    return base.replace(name="mxint8-f25", a_format=a, b_format=b,
                        instruction=f"{base.instruction} with {a} x {b} operands",
                        provenance="blackwell-mxf8f6f4's arithmetic with INT8 operands "
                                   "(MXINT8); not a hardware preset")


def parse_pairs(text: str | None) -> list[tuple[str, str]]:
    """The pairs ``e4m3xe5m2,int8xint8`` names (every supported pair for None, "" or "all");
    MxsimError naming the first that is not one."""
    every = list(itertools.product(RTL_FORMATS, repeat=2))
    if not text or text == "all":
        return every
    out = []
    for item in text.split(","):
        pair = tuple(item.strip().lower().split("x"))
        if pair not in every:
            raise MxsimError(f"unknown format pair {item.strip()!r}; a pair is AxB with A and B "
                             f"from {', '.join(RTL_FORMATS)} (e.g. e4m3xe5m2)")
        if pair not in out:
            out.append(pair)
    return out


def tasks_for(pairs: list[tuple[str, str]], *, dots: int, chunk: int, lanes: int | None,
              stages: int, sim: str, bulk: bool, seed: int, per_task: int = 1,
              cache: str | None = None, out: str | None = None,
              spec_for: Callable[[str, str], UnitSpec] | None = None) -> list[Task]:
    """The campaign's tasks: each pair's run of ``dots`` split into tasks of ``per_task``
    chunks, ordered chunk by chunk across the pairs (so the first tasks build different
    designs). ``spec_for(a, b)`` is the unit of a pair (default :func:`spec_for_pair`)."""
    designs = [(f"{a}x{b}", (spec_for or spec_for_pair)(a, b)) for a, b in pairs]
    return tasks_for_specs(designs, dots=dots, chunk=chunk, lanes=lanes, stages=stages, sim=sim,
                           bulk=bulk, seed=seed, per_task=per_task, cache=cache, out=out)


def tasks_for_specs(designs: list[tuple[str, UnitSpec]], *, dots: int, chunk: int,
                    lanes: int | None, stages: int, sim: str, bulk: bool, seed: int,
                    per_task: int = 1, cache: str | None = None, out: str | None = None
                    ) -> list[Task]:
    """:func:`tasks_for` over ``(label, spec)`` designs (a label names a row: no ``#``).

    ``cache`` and ``out`` are checked and made absolute here, once: the workers that use them
    do not run in the caller's folder (a relative build cache left every task's model link
    dangling), and a cache that is not a folder is bad input before any task runs."""
    if cache is not None:
        cache = str(build_cache.cache_dir(cache))
    if out is not None:
        out = os.path.abspath(out)
    by_pair = []
    for label, unit_spec in designs:
        spec, ua = resolve_design(unit_spec, lanes=lanes, stages=stages)
        n = len(chunk_plan(spec, dots, chunk))
        base = {"spec": spec.to_dict(), "lanes": ua.lanes, "stages": ua.stages, "sim": sim,
                "bulk": bulk, "dots": dots, "chunk": chunk, "seed": seed}
        by_pair.append([(label, {**base, "chunks": [i, min(i + per_task, n)]})
                        for i in range(0, n, per_task)])
    tasks = []
    for group in itertools.zip_longest(*by_pair):
        for label, args in filter(None, group):
            full = {**args, "cache": cache, "out": out,
                    "sources": campaign_tasks.sources_digest()}
            tasks.append(Task(fn=TASK_FN, args=full,
                              key_parts={"all": True, **campaign_tasks.key_parts(args)},
                              label=f"{label}#{args['chunks'][0]}",
                              replay=f"python -m testbenches.campaigns.tasks "
                                     f"'{json.dumps(full, separators=(',', ':'))}'"))
    return tasks


def rows_of(tasks: list[Task], report: Report) -> list[dict]:
    """One row per pair whose every task finished: its tasks' results added up in chunk order
    (the first 20 mismatches, coverage hits merged)."""
    by_pair: dict[str, list[dict | None]] = {}
    for t in tasks:
        by_pair.setdefault(t.label.split("#")[0], []).append(report.results.get(t.key))
    rows = []
    for pair, results in by_pair.items():
        if any(r is None for r in results):
            continue
        results = sorted(results, key=lambda r: r["chunks"][0])
        cov = coverage.Coverage()
        for r in results:
            hits = {point: dict(bins) for point, bins in r["coverage"]}
            cov.merge(coverage.Coverage(hits, set(r["expected"])))
        mismatches = [m for r in results for m in r["mismatches"]][:20]
        first = results[0]
        row = {"pair": pair, "unit": first["unit"], "spec_digest": first["spec_digest"],
               "rtl_hash": first["rtl_hash"], "tasks": len(results)}
        for name in ("dots", "blocks", "cycles", "value_mismatches", "cycle_mismatches"):
            row[name] = sum(r[name] for r in results)
        holes = cov.holes()
        row.update(result="FAIL" if mismatches else "PASS with holes" if holes else "PASS",
                   mismatches=mismatches, holes=holes, coverage=cov.hits,
                   unmeasured=cov.unmeasured(),
                   sim_seconds=round(sum(r["sim_seconds"] for r in results), 2),
                   seconds=round(sum(r["seconds"] for r in results), 1),
                   builds=sum(r["build"] == "built" for r in results))
        rows.append(row)
    return rows


def run_campaign(pairs: list[tuple[str, str]], *, dots: int, chunk: int, lanes: int | None,
                 stages: int, sim: str = "verilator", bulk: bool = True, seed: int = SEED,
                 store: str | Path, executor: str = "auto", workers: int | None = None,
                 scheduler: str | None = None, cluster_spec: str | None = None,
                 cache: str | None = None, out: str | None = None, per_task: int = 1,
                 progress: bool | None = None, command: str = "",
                 spec_for: Callable[[str, str], UnitSpec] | None = None) -> tuple[dict, Report]:
    """Run the campaign through :func:`mxsim.campaign.run`; the campaign record (the JSON
    :func:`markdown` renders) and the task layer's report."""
    tasks = tasks_for(pairs, dots=dots, chunk=chunk, lanes=lanes, stages=stages, sim=sim,
                      bulk=bulk, seed=seed, per_task=per_task, cache=cache, out=out,
                      spec_for=spec_for)
    try:
        rep = run(tasks, store, executor=executor, workers=workers, scheduler=scheduler,
                  cluster_spec=cluster_spec, progress=progress)
    finally:
        # Builds left half-done by workers stopped with the campaign (Ctrl-C, SIGTERM): the
        # local workers are gone by now, and a build still running elsewhere holds its lock.
        with suppress(OSError):
            build_cache.sweep(build_cache.cache_dir(cache))
    return record_of(tasks, rep, dots=dots, chunk=chunk, lanes=lanes, stages=stages, sim=sim,
                     bulk=bulk, seed=seed, command=command), rep


def record_of(tasks: list[Task], rep: Report, *, dots: int, chunk: int, lanes: int | None,
              stages: int, sim: str, bulk: bool, seed: int, command: str) -> dict:
    """The campaign record (the JSON :func:`markdown` renders) of finished ``tasks``."""
    first = tasks[0].args if tasks else {"lanes": lanes, "stages": stages}
    # The build-cache entries rebuilt by this run's tasks (a cached result's were rebuilt
    # by an earlier run, and said then).
    now = {label for label, _, _ in rep.timings}
    repaired = [r for t in tasks if t.name in now and t.key in rep.results
                for r in rep.results[t.key].get("repaired", [])]
    record = {"command": command, "date": datetime.date.today().isoformat(),
              "commit": _commit(), "dots_asked": dots, "seed": seed, "chunk": chunk,
              "lanes": first["lanes"], "stages": first["stages"], "sim": sim, "bulk": bulk,
              "versions": {name: v or "not installed"
                           for name, v in installed(campaign_tasks.TOOLS).items()},
              "python": platform.python_version(), "cpus": os.cpu_count(),
              "pairs": rows_of(tasks, rep),
              "seconds": round(rep.seconds, 1), "executor": rep.executor,
              "workers": rep.workers, "tasks": rep.tasks, "computed": rep.done,
              "cached": rep.cached, "task_seconds": round(rep.task_seconds, 1),
              "speedup": round(rep.speedup, 2), "dashboard": rep.dashboard,
              "damaged": rep.damaged, "repaired": sorted(set(repaired)),
              "failed": [{"label": f.label, "error": f.error, "replay": f.replay}
                         for f in rep.failed]}
    return record


def pair_line(r: dict) -> str:
    """One line of a pair's row, as the campaign prints it."""
    a, b = r["pair"].split("x")
    return (f"{a}x{b:5} {r['unit']:20} {r['dots']:>9,} dots {r['cycles']:>10,} cycles "
            f"mismatches {r['value_mismatches']} value {r['cycle_mismatches']} cycle  "
            f"holes {len(r['holes'])}  sim {r['sim_seconds']:6.1f} s  tasks {r['seconds']:6.1f} s")


def summary(record: dict, rep: Report) -> str:
    """The campaign's closing lines: every pair, the totals, the task layer's report."""
    rows = record["pairs"]
    bad = sum(r["value_mismatches"] + r["cycle_mismatches"] for r in rows)
    lines = [pair_line(r) for r in rows]
    lines.append(f"{len(rows)} pair{'s' if len(rows) != 1 else ''}, "
                 f"{sum(r['dots'] for r in rows):,} dot products, {bad} mismatches; "
                 f"{rep.tasks} tasks ({rep.done} computed, {rep.cached} from the "
                 f"store, {len(rep.failed)} failed) on {rep.workers} worker"
                 f"{'s' if rep.workers != 1 else ''} ({rep.executor}), {rep.seconds:.0f} s, "
                 f"speed-up {rep.speedup:.1f}x")
    if rep.damaged:
        lines.append(f"  {rep.damage_note()}")
    fixed = record.get("repaired", [])
    if fixed:
        lines.append(f"  {len(fixed)} damaged build-cache entr{'ies' if len(fixed) != 1 else 'y'}"
                     f" rebuilt: {'; '.join(fixed[:3])}{'; ...' if len(fixed) > 3 else ''}")
    lines += [f"  failed {f.label}: {f.error}\n    replay: {f.replay}" for f in rep.failed]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbenches.campaigns.pairs",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--dots", type=int, default=1_000_000)
    ap.add_argument("--lanes", type=int, default=32)
    ap.add_argument("--stages", type=int, default=1)
    ap.add_argument("--sim", default="verilator")
    ap.add_argument("--bulk", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--pairs", default=None, help="e.g. e4m3xe5m2,int8xint8 (default: all)")
    ap.add_argument("--out", default="build/campaign")
    ap.add_argument("--store", default=None, help="result store (default: OUT/store)")
    ap.add_argument("--cache", default=None, help="build cache (default: per user)")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--scheduler", default=None, metavar="ADDR")
    ap.add_argument("--cluster-spec", default=None, metavar="FILE")
    ap.add_argument("--executor", default="auto", choices=("auto", "inprocess", "local"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--markdown", default=None, metavar="JSON",
                    help="print docs/verification.md's results section from a campaign JSON")
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())), end="")
        return 0
    record, rep = run_campaign(
        parse_pairs(args.pairs), dots=args.dots, chunk=100_000 if args.bulk else 20_000,
        lanes=args.lanes, stages=args.stages, sim=args.sim, bulk=args.bulk, seed=SEED,
        store=Path(args.out) / "store" if args.store is None else args.store,
        executor=args.executor,
        workers=args.workers, scheduler=args.scheduler, cluster_spec=args.cluster_spec,
        cache=args.cache, out=args.out,
        command="python -m testbenches.campaigns.pairs " + " ".join(
            argv if argv is not None else sys.argv[1:]))
    print(summary(record, rep), flush=True)
    if args.json:
        write_text(args.json, json.dumps(record, indent=1))
    bad = sum(len(r["mismatches"]) for r in record["pairs"])
    return 1 if bad or rep.failed else 0


def _commit() -> str:
    """HEAD (``+dirty`` with uncommitted changes), or ``MXSIM_COMMIT`` for a copy of the
    checkout whose git folder is not its own (what the device tool sends), when set."""
    if os.environ.get("MXSIM_COMMIT"):
        return os.environ["MXSIM_COMMIT"]
    try:
        out = children.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                           check=True, cwd=Path(__file__).parents[1]).stdout.strip()
        dirty = children.run(["git", "status", "--porcelain", "--untracked-files=no"],
                             capture_output=True, text=True, check=True,
                             cwd=Path(__file__).parents[1]).stdout.strip()
        return out + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _executor_rows(run: dict) -> list[str]:
    """The task layer's line of the run table (records from before mxsim.campaign have none)."""
    if "executor" not in run:
        return []
    return [f"| executor | {run['tasks']} tasks on {run['workers']} {run['executor']} worker"
            f"{'s' if run['workers'] != 1 else ''} ({run.get('cpus', '?')} CPUs), "
            f"{run['computed']} computed, {run['cached']} from the store; "
            f"{run['task_seconds'] / 60:.0f} min of task time in {run['seconds'] / 60:.1f} min "
            f"(cluster start-up included): speed-up {run['speedup']:.1f}x (task time over the "
            f"computing time) |"]


def markdown(run: dict) -> str:
    """docs/verification.md's section on the campaign, every figure from ``run`` (the JSON
    that :func:`main` writes)."""
    rows = run["pairs"]
    dots = sum(r["dots"] for r in rows)
    cycles = sum(r["cycles"] for r in rows)
    value = sum(r["value_mismatches"] for r in rows)
    cyc = sum(r["cycle_mismatches"] for r in rows)
    holed = [r for r in rows if r["holes"]]
    unmeasured = sorted({p for r in rows for p in r["unmeasured"]})
    sim = sum(r["sim_seconds"] for r in rows)
    per = sorted({r["dots"] for r in rows})
    out = [f"**Result: {len(rows)} format pairs, {dots:,} dot products ({cycles:,} cycles), "
           f"{value} value and {cyc} cycle mismatches; "
           + (f"{len(holed)} pair{'s' if len(holed) != 1 else ''} with coverage holes.**"
              if holed else "every coverpoint hit in every pair (0 holes).**"), "",
           "| | |", "|---|---|",
           f"| run | {run['date']}, `{run['command'].strip()}`, commit `{run['commit'][:12]}`; "
           f"{', '.join(f'{k} {v}' for k, v in run['versions'].items())}; "
           f"{run['seconds'] / 60:.0f} min in all, {sim:.0f} s of it in the harness |",
           f"| stimulus | `mxsim verify --bulk` chunks of {run['chunk']:,} from seed "
           f"{run['seed']}, {' / '.join(f'{d:,}' for d in per)} dot products per pair; "
           f"{run['lanes']} lanes, {run['stages']} stage{'s' if run['stages'] != 1 else ''} |",
           *_executor_rows(run),
           "| coverage | `backpressure` from the harness's trace; "
           + (f"not measured: {', '.join(unmeasured)}" if unmeasured
              else "every coverpoint measured in every pair")
           + ("; holes: " + "; ".join(f"{r['pair']}: {', '.join(r['holes'])}" for r in holed)
              if holed else "; 0 holes") + " |", "",
           "| pair | unit | dot products | cycles | value / cycle mismatches | coverage holes "
           "| harness (s) | whole (s) |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['pair']} | {r['unit']} | {r['dots']:,} | {r['cycles']:,} | "
                   f"{r['value_mismatches']} / {r['cycle_mismatches']} | {len(r['holes'])} | "
                   f"{r['sim_seconds']} | {r['seconds']} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
