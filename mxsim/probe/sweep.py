"""Fit and probe sweeps as campaign tasks: many observed sets, and the recovery study.

Two kinds of :class:`mxsim.campaign.Task`, run by :func:`mxsim.campaign.run` on any of its
executors (this process, a local Dask cluster, a running scheduler, a batch farm):

* :func:`fit_file`: fit one observed vector set, the inputs and the outputs to explain in one
  file (what ``mxsim fit GPU_OUT.npz`` takes). Its key is the file's SHA-256, ``k`` and the
  digest of mxsim's sources, so a second sweep over the same files is free and an edited file
  or fitter is fitted again. A worker checks that the file it reads is the one the client
  hashed (a shared folder on a cluster).
* :func:`drawn_fit`: one trial of the fitter's recovery study (tests/mxsim/probe/test_fit.py runs 20
in
  CI): draw a spec from its seed (:func:`draw`), run the first ``rows`` rows of the k = 32
  probe suite through it on the fast engine, fit those outputs, and record whether the fit
  reproduces every output (output-equivalent), equals the drawn spec in every searched
  parameter (identical), names each parameter it got otherwise as one the data cannot separate,
  and equals the drawn spec on a fresh suite (seed 1).

::

    mxsim fit --campaign OBS1.npz OBS2.npz ... -o FITTED/ [--workers N | --scheduler ADDR]
    python -m mxsim.probe.sweep drawn --specs 320 [--rows 16] [--workers N] [--json OUT]
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from .. import campaign, probe, vectors
from ..engine import fast
from ..errors import MxsimError, Parser, run_parsed
from ..spec import UnitSpec, from_dict
from . import fit

__all__ = ["draw", "draw_from", "drawn_fit", "drawn_tasks", "fit_file", "fit_tasks",
           "summarise_drawn", "spec_of", "markdown", "main", "DRAW_SEED"]

DRAW_SEED = 2026                 #: the study's seed: trial i draws from (DRAW_SEED, i)
_ROOT = Path(__file__).resolve().parents[2]


def sources_digest() -> str:
    """A hash (16 hex digits) of mxsim's Python sources: the fitter and the engine a fit
    result stands for."""
    return campaign.sources_digest(_ROOT, ("mxsim",))


def _file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as e:
        raise MxsimError(f"cannot read {path}: {e.strerror or e}") from None


def fit_tasks(paths: list[str | Path], *, k: int | None = None,
              allow_large: bool = False) -> list[campaign.Task]:
    """One task per observed set; each file is read here first (one line for a file that is
    not a vector set with outputs, before any task runs)."""
    tasks, digest = [], sources_digest()
    for p in paths:
        path = Path(p).resolve()
        vs = vectors.load(path, allow_large=allow_large)
        if vs.d is None:
            raise MxsimError(f"{p} holds no outputs to fit (d); give the GPU's or RTL's "
                             f"output file")
        args = {"path": str(path), "sha256": _file_digest(path), "k": k,
                "allow_large": allow_large, "sources": digest}
        tasks.append(campaign.Task(
            "mxsim.probe.sweep:fit_file", args, label=path.stem,
            key_parts={"all": True, "sha256": args["sha256"], "k": k,
                       "sources": args["sources"]},
            replay=f"mxsim fit {path} -o {path.stem}.toml" + (f" -k {k}" if k else "")))
    return tasks


def fit_file(args: dict[str, Any]) -> dict[str, Any]:
    """Fit one observed set (see the module docstring): the fitted spec and the counts."""
    path = Path(args["path"])
    if _file_digest(path) != args["sha256"]:
        raise MxsimError(f"{path} on this worker is not the file the campaign hashed")
    observed = vectors.load(path, allow_large=args["allow_large"])
    result = fit.fit(observed, k=args["k"] or fit.default_k(observed))
    return {"file": str(path), "exact": result.exact, "equal": result.equal,
            "total": result.total, "spec": result.spec.to_dict(),
            "unseparated": result.unseparated, "report": result.report()}


def draw_from(rng: np.random.Generator) -> UnitSpec:
    """A random k = 32 e5m2 x e4m3 spec of the fitter's search space: schedule, F, alignment,
    C entry, accumulator format and rounding, e_zero and the FP16 upcast."""
    scheds = list(fit.schedules(32).values())
    return UnitSpec(
        name="drawn", a_format="e5m2", b_format="e4m3", k=32,
        schedule=scheds[rng.integers(len(scheds))], frac_bits=int(rng.integers(8, 31)),
        align=str(rng.choice(["rz", "rd", "rne"])), c_mode=str(rng.choice(["step", "after"])),
        acc_format=str(rng.choice(["fp32", "e8m13", "e8m16"])),
        acc_rounding=str(rng.choice(["rz", "rne"])), e_zero=int(rng.choice([-133, -139, -127])),
        upcast=rng.choice([None, "fp16"]))


def draw(seed: int) -> UnitSpec:
    """Trial ``seed``'s spec: :func:`draw_from` a generator seeded with (DRAW_SEED, seed)."""
    return draw_from(np.random.default_rng([DRAW_SEED, seed]))


def drawn_tasks(specs: int, *, rows: int = 16, first: int = 0) -> list[campaign.Task]:
    """Trials ``first .. first + specs - 1`` of the recovery study on ``rows``-row cuts."""
    digest = sources_digest()
    return [campaign.Task("mxsim.probe.sweep:drawn_fit", {"seed": s, "rows": rows},
                          label=f"drawn#{s}",
                          key_parts={"all": True, "seed": s, "rows": rows, "sources": digest},
                          replay=f"python -m mxsim.probe.sweep drawn --first {s} --specs 1 "
                                 f"--rows {rows} --executor inprocess")
            for s in range(first, first + specs)]


def drawn_fit(args: dict[str, Any]) -> dict[str, Any]:
    """One trial of the recovery study (see the module docstring)."""
    true, rows = draw(int(args["seed"])), int(args["rows"])
    suite = probe.probe_suite(k=32).subset(slice(0, rows))
    fresh = probe.probe_suite(k=32, seed=1).subset(slice(0, rows))
    observed = suite.with_result(fast.dot(true, suite), producer="model")
    result = fit.fit(observed, k=32)
    differ = [p for p in fit.SEARCHED if getattr(result.spec, p) != getattr(true, p)]
    return {"seed": int(args["seed"]), "rows": rows, "drawn": true.to_dict(),
            "fitted": result.spec.to_dict(), "exact": result.exact, "equal": result.equal,
            "total": result.total, "identical": result.exact and not differ, "differ": differ,
            "named": all(p in result.unseparated for p in differ),
            "fresh_equal": bool(np.array_equal(fast.dot(result.spec, fresh),
                                               fast.dot(true, fresh)))}


def summarise_drawn(results: list[dict[str, Any]]) -> dict[str, int]:
    """The study's counts: trials, output-equivalent fits, identical ones, output-equivalent
    fits whose every other parameter the fit names as unseparated, and fresh-suite matches."""
    exact = [r for r in results if r["exact"]]
    return {"drawn": len(results), "output-equivalent": len(exact),
            "identical": sum(r["identical"] for r in results),
            "differences named": sum(r["named"] for r in exact),
            "fresh-equal": sum(r["fresh_equal"] for r in results)}


def markdown(record: dict[str, Any]) -> str:
    """docs/findings.md's paragraph on a recovery study at scale, every figure from the
    ``--json`` record of ``python -m mxsim.probe.sweep drawn``."""
    c, camp, trials = record["counts"], record["campaign"], record["trials"]
    missed = [t["seed"] for t in trials if not t["exact"]]
    unnamed = [t for t in trials if t["exact"] and not t["named"]]
    often: dict[str, int] = {}
    for t in trials:
        for p in t["differ"] if t["exact"] else ():
            often[p] = often.get(p, 0) + 1
    top = sorted(often.items(), key=lambda kv: -kv[1])[:3]
    return (f"At scale (`{record['command']}`, {record['date']}: {c['drawn']} trials as campaign "
            f"tasks on {camp['workers']} workers, {camp['task_seconds'] / 60:.0f} min of fitting "
            f"in {camp['seconds'] / 60:.1f} min): {c['output-equivalent']} of {c['drawn']} fits "
            f"are output-equivalent and {c['identical']} identical; "
            f"{c['differences named']} of the output-equivalent ones name every parameter they "
            f"got otherwise as one the cut cannot separate (the {len(unnamed)} others differ in "
            f"two or more parameters at once, which the pairwise report does not name); the "
            f"parameters most often different are "
            f"{', '.join(f'`{p}` ({n})' for p, n in top)}. {c['fresh-equal']} of the "
            f"{c['drawn']} fits also match the drawn spec on a fresh suite. "
            + (f"The search missed {len(missed)} spec{'s' if len(missed) != 1 else ''} that "
               f"{'are' if len(missed) != 1 else 'is'} in its space (trial"
               f"{'s' if len(missed) != 1 else ''} {', '.join(map(str, missed))}: "
               f"`python -m mxsim.probe.sweep drawn --first {missed[0]} --specs 1` replays one), "
               f"so the fitter is a search, not a proof."
               if missed else "The search found an exact spec in every trial."))


def spec_of(result: dict[str, Any]) -> UnitSpec:
    """The fitted spec of a :func:`fit_file` or :func:`drawn_fit` result."""
    return from_dict(result.get("spec") or result["fitted"])



def _parser():
    p = Parser(prog="python -m mxsim.probe.sweep",
               description="The fitter's recovery study as a campaign.")
    sub = p.add_subparsers(dest="verb", required=True)
    d = sub.add_parser("drawn", help="fit drawn specs from their probe outputs")
    d.add_argument("--specs", type=int, default=20, help="trials (default 20)")
    d.add_argument("--first", type=int, default=0, help="first trial's seed (default 0)")
    d.add_argument("--rows", type=int, default=16, help="probe-suite rows per trial (16)")
    campaign.add_executor_arguments(d, store="build/fitsweep")
    d.add_argument("--json", default=None, metavar="OUT", help="write the study's record here")
    return p


def _drawn(args, command: str) -> int:
    import datetime
    import json
    import platform

    from ..output import write_text
    if args.specs < 1 or args.first < 0 or not 1 <= args.rows <= 64:
        raise MxsimError("--specs must be at least 1, --first not negative and --rows "
                         "between 1 and 64")
    tasks = drawn_tasks(args.specs, rows=args.rows, first=args.first)
    rep = campaign.run(tasks, args.store, executor=args.executor, workers=args.workers,
                       scheduler=args.scheduler, cluster_spec=args.cluster_spec)
    results = [rep.results[t.key] for t in tasks if t.key in rep.results]
    counts = summarise_drawn(results)
    print(", ".join(f"{k} {v}" for k, v in counts.items()))
    print(rep.markdown(), end="")
    if args.json:
        record = {"command": command,
                  "date": datetime.date.today().isoformat(), "python": platform.python_version(),
                  "counts": counts, "campaign": rep.to_dict(),
                  "trials": [{k: r[k] for k in ("seed", "exact", "identical", "differ", "named",
                                                "fresh_equal")} for r in results]}
        write_text(args.json, json.dumps(record, indent=1))
    return 1 if rep.failed else 0


def main(argv: list[str] | None = None) -> int:
    """``python -m mxsim.probe.sweep drawn``: exit 0 when every trial ran, 1 when one failed, 2
    for bad input (one line), 130 when interrupted, 143 on SIGTERM and 129 on SIGHUP
    (finished trials stay in the store)."""
    import sys
    argv = sys.argv[1:] if argv is None else argv
    return run_parsed(_parser(), argv,
                      lambda args: _drawn(args, "python -m mxsim.probe.sweep " + " ".join(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
