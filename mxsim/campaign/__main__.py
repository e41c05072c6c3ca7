"""``python -m mxsim.campaign demo``: run the demo campaign (see :mod:`mxsim.campaign.demo`).

Exit codes as the ``mxsim`` command: 0 all tasks finished, 1 some task failed, 2 bad input
(one line), 130 interrupted, 143 on SIGTERM, 129 on SIGHUP (the store keeps the finished
results).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..errors import MxsimError, Parser, run_parsed
from . import run
from .demo import demo_tasks
from .executors import add_executor_arguments


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m mxsim.campaign",
               description="Run the demo campaign (CPU-bound hash tasks).")
    sub = p.add_subparsers(dest="verb", required=True)
    d = sub.add_parser("demo", help="the demo campaign")
    d.add_argument("--tasks", type=int, default=8, help="number of tasks (default 8)")
    d.add_argument("--first", type=int, default=0, help="first seed (default 0)")
    d.add_argument("--rounds", type=int, default=20000, help="hash rounds per task")
    d.add_argument("--sleep", type=float, default=0.0, help="seconds each task sleeps first")
    d.add_argument("--fail", default="", help="comma-separated seeds that fail")
    d.add_argument("--attempts", default=None, help="folder: one line per attempt per seed")
    add_executor_arguments(d, store="build/campaign-demo")
    d.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    return p


def _seeds(text: str) -> frozenset[int]:
    try:
        return frozenset(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise MxsimError(f"--fail takes comma-separated seeds, not {text!r}") from None


def _demo(args: argparse.Namespace) -> int:
    if args.tasks < 0 or args.rounds < 0:
        raise MxsimError("--tasks and --rounds must not be negative")
    tasks = demo_tasks(args.tasks, args.rounds, sleep=args.sleep, fail=_seeds(args.fail),
                       attempts=args.attempts, first=args.first)
    report = run(tasks, args.store, executor=args.executor, workers=args.workers,
                 scheduler=args.scheduler, cluster_spec=args.cluster_spec,
                 progress=False if args.json else None)
    try:
        if args.json:
            print(json.dumps(report.to_dict(), indent=1))
        else:
            print(report.markdown(), end="")
    except BrokenPipeError:                     # `... | head`: the reader went away
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 1 if report.failed else 0


def main(argv: list[str] | None = None) -> int:
    return run_parsed(_parser(), argv, _demo)


if __name__ == "__main__":
    sys.exit(main())
