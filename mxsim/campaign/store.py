"""The result store: one JSON file per finished task, in a directory (local or shared).

``<root>/<key[:2]>/<key>.json`` holds ``{"key", "fn", "label", "seconds", "result", "digest"}``,
``digest`` being the SHA-256 of the canonical JSON of ``[key, fn, result]``. Files are written
whole or not at all (:mod:`mxsim.output`: a temporary file renamed over the target), so a
reader, a second campaign or a resumed one sees finished results only. Two workers that finish
the same task write the same result; the last rename wins.

A record is trusted only when it is a regular file (never followed through a link, never opened
in a way that a FIFO or a device could block), at most :data:`MAX_RECORD_BYTES` of UTF-8 JSON,
an object whose ``key`` is its file's, whose ``fn`` is the task's and whose ``digest`` matches.
Anything else in its place (garbage, a truncated or hand-edited file, another task's record
copied over it, a record written before records had a digest, a directory, a FIFO, a link) is
*damaged or foreign*: :meth:`Store.lookup` says why, :func:`mxsim.campaign.run` recomputes the
task, replaces the file and reports it. One that cannot be replaced (a directory, a folder
without write permission) is a :class:`StoreError` naming it, raised before any task runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import MxsimError
from ..output import write_text
from .task import canonical_json

__all__ = ["Store", "StoreError", "DamagedFile", "read_regular", "MAX_RECORD_BYTES"]

#: The largest record a store reads (a task's result is counts and a few examples, not data).
MAX_RECORD_BYTES = 64 << 20

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


class StoreError(MxsimError, ValueError):
    """A store path that is not a directory, cannot be created, read or written, or a damaged
    record that cannot be replaced."""


class DamagedFile(Exception):
    """A file that is there but is not what it should be; the message says why, in a few
    words (``a FIFO``, ``not UTF-8 text``, ``the record of another task``)."""


def _kind(mode: int) -> str:
    return next((k for test, k in _KINDS if test(mode)), "not a regular file")


def read_regular(path: str | os.PathLike, limit: int, *, follow: bool = False) -> bytes:
    """The bytes of ``path`` when it is a regular file of at most ``limit`` bytes.

    A symbolic link is not followed (unless ``follow``: a file the user names, not one found
    in a shared folder) and a FIFO or a device is never opened for a blocking read
    (``O_NONBLOCK``, and ``fstat`` of what was opened), so a hostile file cannot redirect or
    stall the reader.

    Raises
    ------
    FileNotFoundError
        When nothing is at ``path``.
    DamagedFile
        For anything else that is not such a file, or that cannot be read (why, in a few words).
    """
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        raise
    except OSError as exc:                       # a parent that is a file, a link loop, EACCES
        raise DamagedFile(f"cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise DamagedFile(_kind(st.st_mode))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
                     | (0 if follow else os.O_NOFOLLOW))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise DamagedFile(f"cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):               # replaced between lstat and open
            raise DamagedFile(_kind(mode))
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise DamagedFile(f"cannot be read ({exc.strerror})") from None
    if len(data) > limit:
        raise DamagedFile(f"more than {limit:,} bytes")
    return data


def digest(key: str, fn: str | None, result: Any) -> str:
    """The SHA-256 (hex) of the canonical JSON of ``[key, fn, result]``: what a record's
    ``digest`` must be."""
    return hashlib.sha256(canonical_json([key, fn, result]).encode("ascii")).hexdigest()


class Store:
    """A directory of finished results, keyed by :attr:`mxsim.campaign.Task.key`."""

    def __init__(self, path: str | os.PathLike):
        if not os.fspath(path):
            raise StoreError("the result store path is empty; give a folder")
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(f"{path}: the result store must be a directory")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{path}: cannot create the result store ({exc.strerror})") from None
        if not os.access(self.path, os.R_OK | os.W_OK | os.X_OK):
            raise StoreError(f"{path}: cannot use the result store (Permission denied); give "
                             f"a folder you may read and write")

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    def _file(self, key: str) -> Path:
        if len(key) < 3 or not all(c in "0123456789abcdef" for c in key):
            raise ValueError(f"Not a task key: {key!r}")
        return self.path / key[:2] / f"{key}.json"

    def path_of(self, key: str) -> Path:
        """The file that holds (or will hold) the record of ``key``."""
        return self._file(key)

    def lookup(self, key: str, fn: str | None = None) -> tuple[dict[str, Any] | None, str | None]:
        """The record of ``key`` (result and metadata) and, when there is none, why: None when
        nothing is stored, else what is wrong with the file in its place (a few words). With
        ``fn``, a record of another task function is foreign too."""
        path = self._file(key)
        try:
            data = read_regular(path, MAX_RECORD_BYTES)
        except FileNotFoundError:
            return None, None
        except DamagedFile as exc:
            return None, str(exc)
        try:
            record = json.loads(data.decode("utf-8"))
        except UnicodeDecodeError:
            return None, "not UTF-8 text"
        except (ValueError, RecursionError):
            return None, "not JSON (truncated or garbled)"
        if not isinstance(record, dict) or not isinstance(record.get("result"), dict):
            return None, "not a record (no result object)"
        if "key" not in record:
            return None, "not a record (no key)"
        if record["key"] != key:
            return None, "the record of another task"
        if fn is not None and record.get("fn") != fn:
            return None, f"a record of {record.get('fn')!r}, not of {fn}"
        if "digest" not in record:
            return None, "no digest (written by an older mxsim)"
        try:
            expected = digest(key, record.get("fn"), record["result"])
        except (TypeError, ValueError):          # a NaN, say: never written by put()
            return None, "a result that is not canonical JSON"
        if record["digest"] != expected:
            return None, "a result that does not match its digest (edited or garbled)"
        return record, None

    def record(self, key: str, fn: str | None = None) -> dict[str, Any] | None:
        """The stored record of ``key`` (result and metadata), or None (also for a damaged or
        foreign file: see :meth:`lookup`)."""
        return self.lookup(key, fn)[0]

    def get(self, key: str, fn: str | None = None) -> dict[str, Any] | None:
        """The result of ``key``, or None when it has not finished (or its record is damaged)."""
        record = self.record(key, fn)
        return None if record is None else record["result"]

    def replaceable(self, key: str) -> None:
        """Raise :class:`StoreError` (naming the file) unless :meth:`put` can write the record
        of ``key``: its folder is a directory this process may write (or can be created) and no
        directory stands in the record's place. :func:`mxsim.campaign.run` asks before running
        anything, so a store that cannot take a result fails in a second, not after the work."""
        path = self._file(key)
        try:
            st = os.stat(path.parent)
        except FileNotFoundError:
            return                                # created by put(); the root is writable
        except OSError as exc:
            raise StoreError(f"{path.parent}: cannot hold records ({exc.strerror}); remove it "
                             f"or use another store") from None
        if not stat.S_ISDIR(st.st_mode):
            raise StoreError(f"{path.parent}: cannot hold records (not a directory); remove "
                             f"it or use another store")
        if not os.access(path.parent, os.W_OK | os.X_OK):
            raise StoreError(f"{path}: cannot write the record (Permission denied on its "
                             f"folder); make it writable or use another store")
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            return
        if stat.S_ISDIR(mode):
            raise StoreError(f"{path}: cannot replace this damaged or foreign record (a "
                             f"directory); remove it")

    def put(self, key: str, result: dict[str, Any], *, fn: str | None = None,
            **meta: Any) -> None:
        """Store ``result`` under ``key`` atomically, with ``fn`` (the task's function), its
        digest and ``meta`` (label, seconds) beside it. Whatever damaged or foreign file is in
        its place (a link, a FIFO, a file this process may not read or write) is replaced,
        never written through."""
        path = self._file(key)
        try:
            path.parent.mkdir(exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{path.parent}: cannot hold records ({exc.strerror}); remove it "
                             f"or use another store") from None
        text = json.dumps({"key": key, "fn": fn, **meta, "result": result,
                           "digest": digest(key, fn, result)}, sort_keys=True, allow_nan=False)
        try:
            st = os.lstat(path)
        except OSError:
            st = None
        # A link would be followed by the rename's target check and a FIFO refused; a file
        # this process may not read would keep its mode (0) in the new record, and one it may
        # not write is refused by open_output (the rule for a user's -o file, not for the
        # store's own damaged records): so each goes first. A readable, writable regular file
        # is replaced by the rename, atomically.
        if st is not None and not stat.S_ISDIR(st.st_mode) and (
                not stat.S_ISREG(st.st_mode) or not os.access(path, os.R_OK | os.W_OK)):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise StoreError(f"{path}: cannot replace this damaged or foreign record "
                                 f"({exc.strerror}); remove it") from None
        write_text(path, text + "\n", error=StoreError)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.record(key) is not None

    def keys(self) -> Iterator[str]:
        """The keys of the stored results (whole, verified records only)."""
        for path in sorted(self.path.glob("??/*.json")):
            key = path.stem
            if len(key) >= 3 and key[:2] == path.parent.name and self._is_key(key) \
                    and self.record(key) is not None:
                yield key

    @staticmethod
    def _is_key(key: str) -> bool:
        return all(c in "0123456789abcdef" for c in key)

    def __len__(self) -> int:
        return sum(1 for _ in self.keys())
