"""What runs on a worker: resolve the task function by its dotted path, call it, time it.

An exception in the task function is a deterministic failure: it is caught here and returned
as an outcome (``ok: False``), so Dask never sees it and never retries it. A worker that dies
(SIGKILL, lost node) returns nothing; the scheduler reruns the task elsewhere.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["execute", "resolve"]


def resolve(fn: str, paths: Sequence[str] = ()) -> Callable[[dict], Any]:
    """The function ``package.module:function``; ``paths`` (folders that exist here and are not
    on ``sys.path`` yet) are appended first, so a worker finds the client's checkout."""
    for path in paths:
        if path not in sys.path and os.path.isdir(path):
            sys.path.append(path)
    module, _, name = fn.partition(":")
    return getattr(importlib.import_module(module), name)


def _jsonable(result: Any, fn: str) -> dict:
    if not isinstance(result, Mapping):
        raise TypeError(f"{fn} returned {type(result).__name__}, not a dict")
    # Through JSON and back: a result reads the same whether it came from a worker, this
    # process or the store (tuples become lists, keys strings).
    return json.loads(json.dumps(dict(result), allow_nan=False))


def execute(fn: str, args: Mapping[str, Any], paths: Sequence[str] = ()) -> dict[str, Any]:
    """Run one task; the outcome ``{ok, result | error, seconds, worker}``."""
    t0 = time.perf_counter()
    worker = f"{socket.gethostname()}:{os.getpid()}"
    try:
        result = _jsonable(resolve(fn, paths)(dict(args)), fn)
    except Exception as exc:                  # the task's own failure: reported, not retried
        text = str(exc).strip().splitlines()
        return {"ok": False, "error": f"{type(exc).__name__}: {text[0] if text else ''}"[:500],
                "seconds": time.perf_counter() - t0, "worker": worker}
    return {"ok": True, "result": result, "seconds": time.perf_counter() - t0, "worker": worker}
