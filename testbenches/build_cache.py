"""A build cache for simulator models, keyed by the RTL hash, shared by the workers of a campaign.

A campaign's workers (:mod:`testbenches.campaign_tasks`) each need the Verilated model of the
design they verify. A model is a folder ``<cache>/<key>`` (``key``: the hash of the Verilog,
the harness, the tool versions and the build flags, :func:`rtl_key`), built once into a
temporary folder beside it and renamed into place whole, so a folder that exists is a finished
build: a worker killed mid-build leaves a ``.tmp-`` folder and no model, which :func:`sweep`
removes (the next build, and a campaign once its workers are stopped). A file lock
(``fcntl.flock`` on ``<key>.lock``) makes a second worker on the machine wait for the first one's
build and then reuse it; workers of other machines do the same when the cache folder is shared
(a network file system with working locks). The cache is ``MXSIM_BUILD_CACHE``, or
``$XDG_CACHE_HOME/mxsim/builds`` (``~/.cache/mxsim/builds``) unless a campaign names one.

A design's RTL hash needs its Verilog, which takes seconds to generate; :func:`memo` keeps the
hash of each design (spec, micro-architecture and RTL sources) in ``<cache>/designs`` so that
only the first task of a design on a machine generates it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["cache_dir", "locked", "ensure", "memo", "rtl_key", "sweep"]


def cache_dir(shared: str | os.PathLike | None = None) -> Path:
    """The build cache folder: ``shared`` when given, else ``MXSIM_BUILD_CACHE``, else the
    per-user default; created if need be."""
    if shared is None:
        shared = os.environ.get("MXSIM_BUILD_CACHE") or Path(
            os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mxsim" / "builds"
    out = Path(shared)
    out.mkdir(parents=True, exist_ok=True)
    return out


def rtl_key(*parts: str) -> str:
    """The hash (hex, 24 digits) of the texts that determine a build: the Verilog, the
    harness, the tool versions, the flags."""
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part.encode()).digest())
    return h.hexdigest()[:24]


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (created if need be) while the block runs; released by
    the kernel if the process dies."""
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def sweep(cache: Path) -> None:
    """Remove the temporary folders and files (``<name>.tmp-<pid>``) of the builds and memos in
    ``cache`` that never finished: a worker killed mid-build cannot remove its own. One is made
    and used only under the lock ``<name>.lock``, so it is stale when nobody holds that lock (a
    process killed holds none: the kernel releases its locks)."""
    for folder in (cache, cache / "designs"):
        for tmp in folder.glob("*.tmp-*"):
            with open(folder / f"{tmp.name.partition('.tmp-')[0]}.lock", "a") as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:            # a build in progress
                    continue
                if tmp.is_dir() and not tmp.is_symlink():
                    shutil.rmtree(tmp, ignore_errors=True)
                else:
                    tmp.unlink(missing_ok=True)
                fcntl.flock(f, fcntl.LOCK_UN)


def ensure(cache: Path, key: str, build: Callable[[Path], None]) -> tuple[Path, bool]:
    """The folder of build ``key`` in ``cache``, and whether this call built it: ``build``
    fills an empty folder, which becomes ``<cache>/<key>`` whole when it returns; a build
    that exists (another worker's included) is reused."""
    folder = cache / key
    if folder.is_dir():
        return folder, False
    sweep(cache)
    with locked(cache / f"{key}.lock"):
        if folder.is_dir():                      # built while this worker waited
            return folder, False
        tmp = cache / f"{key}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            build(tmp)
            tmp.rename(folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder, True


def memo(cache: Path, design: str, compute: Callable[[], str]) -> str:
    """The RTL hash of ``design`` (a key of everything that determines its Verilog) as kept in
    ``cache``, or ``compute()`` kept there for the next task (under the design's lock, so two
    workers do not both generate it)."""
    folder = cache / "designs"
    folder.mkdir(exist_ok=True)
    path = folder / f"{design}.json"
    with locked(folder / f"{design}.lock"):
        if path.is_file():
            return json.loads(path.read_text())["rtl_hash"]
        value = compute()
        tmp = folder / f"{design}.tmp-{os.getpid()}"           # see sweep()
        tmp.write_text(json.dumps({"rtl_hash": value}))
        tmp.replace(path)
    return value
