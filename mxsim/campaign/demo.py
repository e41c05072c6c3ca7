"""The demo campaign (and the benchmark's workload): CPU-bound, deterministic tasks.

:func:`spin` hashes a seed ``rounds`` times with SHA-256 and folds the digests into a
histogram, the shape of a verification chunk (a seed range in, counts and a digest out) with
no dependency; ``rounds=20000`` takes about 10 ms. ``sleep`` (seconds, before the work) makes a
task last long enough to be interrupted; ``fail`` makes it raise (a deterministic failure);
``attempts`` (a folder) gets one file line per attempt, so tests count executions.

``python -m mxsim.campaign demo --tasks 8 --store DIR`` runs such a campaign.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any

from ..errors import MxsimError
from .task import Task

__all__ = ["spin", "demo_tasks"]


def spin(args: dict[str, Any]) -> dict[str, Any]:
    """One demo task: ``{seed, rounds, digest, histogram}`` from ``args`` (seed, rounds,
    and the optional sleep, fail, attempts)."""
    seed, rounds = int(args["seed"]), int(args.get("rounds", 20000))
    if args.get("attempts"):
        with open(os.path.join(args["attempts"], f"{seed}.log"), "a") as fh:
            fh.write(f"{os.getpid()}\n")
    if args.get("sleep"):
        time.sleep(float(args["sleep"]))
    if args.get("fail"):
        raise ValueError(f"seed {seed}: mismatch at round {rounds // 2} (a planted failure)")
    digest = seed.to_bytes(8, "little")
    histogram = [0] * 16
    for _ in range(rounds):
        digest = hashlib.sha256(digest).digest()
        histogram[digest[0] & 15] += 1
    return {"seed": seed, "rounds": rounds, "digest": digest.hex(), "histogram": histogram}


def demo_tasks(n: int, rounds: int = 20000, *, sleep: float = 0.0,
               fail: frozenset[int] = frozenset(), attempts: str | None = None,
               first: int = 0) -> list[Task]:
    """``n`` demo tasks, seeds ``first..first+n-1``; the key covers seed and rounds only.
    ``attempts`` must be a folder; it is passed to the workers as an absolute path (a worker's
    current folder is not the caller's)."""
    if attempts is not None:
        if not os.path.isdir(attempts):
            raise MxsimError(f"the attempts folder {str(attempts)!r} is not an existing "
                             f"directory; create it first")
        attempts = os.path.abspath(attempts)
    tasks = []
    for seed in range(first, first + n):
        args: dict[str, Any] = {"seed": seed, "rounds": rounds}
        if sleep:
            args["sleep"] = sleep
        if seed in fail:
            args["fail"] = True
        if attempts:
            args["attempts"] = str(attempts)
        tasks.append(Task("mxsim.campaign.demo:spin", args,
                          key_parts={"all": True, "seed": seed, "rounds": rounds,
                                     "fail": seed in fail},
                          label=f"spin#{seed}",
                          replay=f"python -m mxsim.campaign demo --first {seed} --tasks 1 "
                                 f"--rounds {rounds} --executor inprocess"
                                 + (f" --fail {seed}" if seed in fail else "")))
    return tasks
