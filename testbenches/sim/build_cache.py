"""A build cache for simulator models, keyed by the RTL hash, shared by the workers of a campaign.

A campaign's workers (:mod:`testbenches.campaigns.tasks`) each need the Verilated model of the
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

Entries are checked before they are trusted, since a cache outlives crashes, disks that fill
and hands that edit it: a build holds a manifest (every file's size and SHA-256, written last)
and a memo its design's name and a digest. An entry that does not match (a truncated model, a
garbled memo, a directory or a FIFO in a file's place, a build of an older mxsim without a
manifest) is removed and rebuilt under the entry's lock, and named in the ``repaired`` list the
caller passes, so that the campaign can say what it rebuilt.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from mxsim.campaign import DamagedFile, canonical_json, read_regular
from mxsim.errors import MxsimError

__all__ = ["cache_dir", "locked", "ensure", "memo", "rtl_key", "sweep", "BuildCacheError",
           "MANIFEST"]

#: The file in a build's folder that lists every other file's size and SHA-256.
MANIFEST = ".manifest.json"
_MAX_MEMO_BYTES = 1 << 16


class BuildCacheError(MxsimError, ValueError):
    """A build cache that is not a directory or cannot be used, or an entry in it that cannot
    be removed or locked."""


def cache_dir(shared: str | os.PathLike | None = None) -> Path:
    """The build cache folder as an absolute path (a model is linked from a task's work
    folder by it, and a worker's current folder is not the client's): ``shared`` when given,
    else ``MXSIM_BUILD_CACHE``, else the per-user default; created if need be. Raises
    :class:`BuildCacheError` (one line naming it) for a path that is empty, not a directory,
    or a folder this process cannot create or write."""
    if shared is None:
        shared = os.environ.get("MXSIM_BUILD_CACHE") or Path(
            os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mxsim" / "builds"
    if not os.fspath(shared):
        raise BuildCacheError("the build cache path is empty; give a folder")
    out = Path(os.path.abspath(shared))
    if out.exists() and not out.is_dir():
        raise BuildCacheError(f"{shared}: the build cache must be a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildCacheError(f"{shared}: cannot create the build cache ({exc.strerror})") \
            from None
    if not os.access(out, os.R_OK | os.W_OK | os.X_OK):
        raise BuildCacheError(f"{shared}: cannot use the build cache (Permission denied); give "
                              f"a folder you may read and write")
    return out


def rtl_key(*parts: str) -> str:
    """The hash (hex, 24 digits) of the texts that determine a build: the Verilog, the
    harness, the tool versions, the flags."""
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part.encode()).digest())
    return h.hexdigest()[:24]


def _lock_file(path: Path) -> IO[str]:
    """The lock file ``path``, opened (created if need be) for ``flock``. One that is not a
    regular file (a FIFO would block the open, a directory refuse it) is a
    :class:`BuildCacheError` naming it."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise BuildCacheError(f"{path}: cannot lock the build cache entry ({exc.strerror}); "
                              f"delete it") from None
    f = os.fdopen(fd, "w")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        f.close()
        raise BuildCacheError(f"{path}: cannot lock the build cache entry (not a regular "
                              f"file); delete it")
    return f


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (created if need be) while the block runs; released by
    the kernel if the process dies (see :func:`_lock_file` for a lock file that is not one)."""
    with _lock_file(path) as f:
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
            try:
                f = _lock_file(folder / f"{tmp.name.partition('.tmp-')[0]}.lock")
            except BuildCacheError:                # said by locked() for the entry it is
                continue
            with f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:            # a build in progress
                    continue
                if tmp.is_dir() and not tmp.is_symlink():
                    shutil.rmtree(tmp, ignore_errors=True)
                else:
                    tmp.unlink(missing_ok=True)
                fcntl.flock(f, fcntl.LOCK_UN)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _files(folder: Path) -> dict[str, list]:
    """Every regular file under ``folder`` but the manifest: relative path -> [size, sha256]."""
    return {str(p.relative_to(folder)): [p.stat().st_size, _sha256(p)]
            for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink() and p.name != MANIFEST}


def _damage(folder: Path) -> str | None:
    """Why the build in ``folder`` cannot be trusted (a few words), "absent" when there is
    none, or None when it matches its manifest (files added since, a run's outputs, are
    allowed)."""
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory"
    try:
        manifest = json.loads(read_regular(folder / MANIFEST, 64 << 20).decode("utf-8"))
    except FileNotFoundError:
        return "no manifest: built before entries were checked, or never finished"
    except (DamagedFile, ValueError):
        return "a damaged manifest"
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not files or not all(
            isinstance(v, list) and len(v) == 2 for v in files.values()):
        return "a damaged manifest"
    for name, (size, digest) in files.items():
        path = folder / name
        try:
            st = os.lstat(path)
        except OSError:
            return f"{name} is missing"
        if not stat.S_ISREG(st.st_mode) or st.st_size != size:
            return f"{name} is not the file that was built (size {st.st_size:,}, not {size:,})"
        if _sha256(path) != digest:
            return f"{name} is not the file that was built (its SHA-256 differs)"
    return None


def _discard(path: Path, why: str, repaired: list[str] | None) -> None:
    """Remove the damaged entry at ``path`` (moved aside first, so that no reader sees half of
    it) and note it in ``repaired``."""
    if repaired is not None:
        repaired.append(f"{path} ({why})")
    try:
        if path.is_dir() and not path.is_symlink():
            aside = path.with_name(f"{path.name}.tmp-{os.getpid()}-damaged")
            shutil.rmtree(aside, ignore_errors=True)
            path.rename(aside)
            shutil.rmtree(aside)
        else:
            path.unlink(missing_ok=True)
    except OSError as exc:
        raise BuildCacheError(f"{path}: a damaged build cache entry ({why}) that cannot be "
                              f"removed ({exc.strerror}); delete it") from None


def ensure(cache: Path, key: str, build: Callable[[Path], None],
           repaired: list[str] | None = None) -> tuple[Path, bool]:
    """The folder of build ``key`` in ``cache``, and whether this call built it: ``build``
    fills an empty folder, which gets its manifest and becomes ``<cache>/<key>`` whole when it
    returns; a build that exists and matches its manifest (another worker's included) is
    reused, and one that does not is removed, rebuilt and noted in ``repaired``."""
    folder = cache / key
    if _damage(folder) is None:
        return folder, False
    sweep(cache)
    with locked(cache / f"{key}.lock"):
        why = _damage(folder)
        if why is None:                          # built while this worker waited
            return folder, False
        if why != "absent":
            _discard(folder, why, repaired)
        tmp = cache / f"{key}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            build(tmp)
            # Written last: a folder with a manifest is a finished build.
            (tmp / MANIFEST).write_text(json.dumps({"files": _files(tmp)}))
            tmp.rename(folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder, True


def _memo_digest(design: str, value: str) -> str:
    return hashlib.sha256(canonical_json([design, value]).encode("ascii")).hexdigest()


def _read_memo(path: Path, design: str) -> tuple[str | None, str | None]:
    """The RTL hash kept in ``path``, or None and why not (None when nothing is there)."""
    try:
        data = json.loads(read_regular(path, _MAX_MEMO_BYTES).decode("utf-8"))
    except FileNotFoundError:
        return None, None
    except DamagedFile as exc:
        return None, str(exc)
    except ValueError:                           # not UTF-8, not JSON
        return None, "not a memo (garbled or truncated)"
    value = data.get("rtl_hash") if isinstance(data, dict) else None
    if not isinstance(value, str) or data.get("design") != design or \
            data.get("digest") != _memo_digest(design, value):
        return None, "not this design's memo (edited, garbled or of an older mxsim)"
    return value, None


def memo(cache: Path, design: str, compute: Callable[[], str],
         repaired: list[str] | None = None) -> str:
    """The RTL hash of ``design`` (a key of everything that determines its Verilog) as kept in
    ``cache``, or ``compute()`` kept there for the next task (under the design's lock, so two
    workers do not both generate it). A memo that is not whole and this design's is computed
    again, replaced and noted in ``repaired``."""
    folder = cache / "designs"
    if os.path.lexists(folder) and not folder.is_dir():   # a file, a dangling link
        _discard(folder, "not a directory", repaired)
    folder.mkdir(exist_ok=True)
    path = folder / f"{design}.json"
    with locked(folder / f"{design}.lock"):
        value, why = _read_memo(path, design)
        if value is not None:
            return value
        value = compute()
        if why is not None:
            _discard(path, why, repaired)
        tmp = folder / f"{design}.tmp-{os.getpid()}"           # see sweep()
        tmp.write_text(json.dumps({"design": design, "rtl_hash": value,
                                   "digest": _memo_digest(design, value)}))
        tmp.replace(path)
    return value
