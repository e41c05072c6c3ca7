"""Output files: every file mxsim writes goes through :func:`open_output`.

A write goes to a uniquely named temporary file in the target's folder, which is renamed over
the target only once it is complete, so a reader (or a rerun) sees the whole old file or the
whole new one, never half of either. On any failure, Ctrl-C included, the temporary file is
removed and the target is left as it was.

Only regular files are written. A path that names a directory, a device (``/dev/null``,
``/dev/full``), a FIFO or a socket is refused with an :class:`OutputError` before anything is
written: renaming over it would turn a device node into a regular file. A symbolic link is
followed, and the file it points to is replaced (the link stays a link).

An existing file is replaced only where the user may write it, as ``cp`` and the shell's ``>``
decide: renaming over a file needs only the right to write its folder, so a read-only file
(``chmod 444`` on a golden result, or another user's file in a shared folder) would otherwise
be replaced, and it is refused instead (``cannot write (Permission denied)``). The test is the
kernel's, :func:`os.access` with the effective user: root, whom the kernel lets write any file,
replaces a read-only file as ``cp`` does for root (a read-only file system refuses everyone).
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from .errors import MxsimError

__all__ = ["OutputError", "check_output", "open_output", "write_text", "write_bytes",
           "MARK", "fill_marked", "update_marked"]


class OutputError(MxsimError, ValueError):
    """An output path that cannot be written: a directory, a special file, a missing folder."""


_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def check_output(path: str | os.PathLike, error: type[MxsimError] = OutputError) -> Path:
    """The file that writing ``path`` replaces (symbolic links followed); raise ``error`` in
    one line when it is not a regular file or a new path in an existing folder.

    Commands call it before their work, so that a bad ``-o`` fails in a second rather than
    after the computation; :func:`open_output` calls it again just before it writes.
    """
    name = os.fspath(path)
    if not str(name):
        raise error("The output path must not be empty")
    if str(name).endswith(("/", os.sep)) and not os.path.isdir(name):
        raise error(f"{name}: cannot write (a folder name ends in '/'); give a file path")
    real = Path(os.path.realpath(name))
    try:
        # The path as given, links followed by the kernel: /dev/stdout is a pipe or a
        # terminal even where realpath() cannot name its target.
        st = os.stat(name)
    except FileNotFoundError:
        st = None
    except OSError as exc:                       # a parent that is a file, a link loop, ...
        raise error(f"{name}: cannot write ({exc.strerror})") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise error(f"{name}: cannot write (Is a directory)")
        if not stat.S_ISREG(st.st_mode):
            kind = next((k for test, k in _KINDS if test(st.st_mode)), "not a regular file")
            raise error(f"{name}: cannot write ({kind}); mxsim writes only regular files, so "
                        f"give a file path")
        if not _may_write(name, os.W_OK):
            raise error(f"{name}: cannot write (Permission denied)")
    if not real.parent.is_dir():
        raise error(f"{name}: directory does not exist")
    # The temporary file and the rename need the folder: said now, not after the work.
    if not _may_write(real.parent, os.W_OK | os.X_OK):
        raise error(f"{name}: cannot write (Permission denied)")
    return real


def _may_write(path: str | os.PathLike, mode: int) -> bool:
    """Whether the effective user has ``mode`` access to the existing ``path``: the file that
    a rename replaces is not asked (see the module docstring), so this asks as open() would."""
    if os.access in os.supports_effective_ids:
        return os.access(path, mode, effective_ids=True)
    return os.access(path, mode)


def _keep_owner(fd: int, old: os.stat_result) -> None:
    """Give the new file ``fd`` the owner and group of the file it replaces, as far as the
    kernel lets this user (the rest stays the user's, as any new file is)."""
    if not hasattr(os, "fchown"):
        return
    for uid, gid in ((old.st_uid, old.st_gid), (-1, old.st_gid)):
        try:
            os.fchown(fd, uid, gid)
            return
        except PermissionError:
            continue


@contextmanager
def open_output(path: str | os.PathLike, mode: str = "wb", *,
                error: type[MxsimError] = OutputError) -> Iterator[IO[Any]]:
    """Open a temporary file for ``path``; on a clean exit from the ``with`` block, rename it
    over ``path``. ``mode`` is ``"wb"`` or ``"w"`` (UTF-8 text).

    A new file gets the mode ``open()`` would give it (0666 less the umask); a file that is
    replaced keeps its permission bits, and its owner and group where the user may give them
    (root may; others keep a group they belong to), as a file written in place would. Raises
    ``error`` (one line) for a path that is not a regular file or a new path in an existing
    folder, for an existing file the user may not write, and for a failed write (disk full).
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"Mode must be 'wb' or 'w', not {mode!r}")
    name = os.fspath(path)
    real = check_output(path, error)
    # Not tempfile.mkstemp: it makes the file 0600, and outputs are shared (RTL host, GPU
    # host). O_EXCL with a random name: two writers of one path never share a temporary.
    tmp = real.parent / f".{real.name}.{secrets.token_hex(6)}.tmp"
    text = {"encoding": "utf-8", "newline": ""} if mode == "w" else {}
    # One try from the temporary's creation on: Ctrl-C or SIGTERM (mxsim.errors.Terminated)
    # may land between any two steps, and the random name is this call's alone to remove.
    try:
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
                         | getattr(os, "O_NOFOLLOW", 0), 0o666)
        except OSError as exc:
            raise error(f"{name}: cannot write ({exc.strerror})") from None
        try:
            fh = os.fdopen(fd, mode, **text)
        except BaseException:
            os.close(fd)
            raise
        with fh:
            try:
                old = os.stat(real)
            except OSError:
                old = None
            if old is not None and stat.S_ISREG(old.st_mode):
                _keep_owner(fh.fileno(), old)
                os.chmod(fh.fileno(), stat.S_IMODE(old.st_mode))
            yield fh
        check_output(path, error)                # still a regular file (or absent)?
        os.replace(tmp, real)
    except BaseException as exc:
        with suppress(OSError):                  # never created (a folder we may not write)
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):             # disk full, quota, I/O error
            raise error(f"{name}: cannot write ({exc.strerror or exc})") from None
        raise


def write_text(path: str | os.PathLike, text: str, *,
               error: type[MxsimError] = OutputError) -> None:
    """Write ``text`` (UTF-8) to ``path`` through :func:`open_output`."""
    with open_output(path, "w", error=error) as fh:
        fh.write(text)


def write_bytes(path: str | os.PathLike, data: bytes, *,
                error: type[MxsimError] = OutputError) -> None:
    """Write ``data`` to ``path`` through :func:`open_output`."""
    with open_output(path, "wb", error=error) as fh:
        fh.write(data)


#: A computed figure in a document: ``<!-- fig:KEY -->text<!-- /fig -->``.
MARK = re.compile(r"<!-- fig:([A-Za-z0-9_.:+/=-]+) -->(.*?)<!-- /fig -->", re.DOTALL)


def fill_marked(text: str, figs: dict[str, str]) -> tuple[str, list[str]]:
    """``text`` with every :data:`MARK` span filled from ``figs``; and the keys it names that
    ``figs`` has not (those spans are left as they were)."""
    missing: list[str] = []

    def fill(m: re.Match) -> str:
        if m.group(1) not in figs:
            missing.append(m.group(1))
            return m.group(0)
        return f"<!-- fig:{m.group(1)} -->{figs[m.group(1)]}<!-- /fig -->"
    return MARK.sub(fill, text), missing


def update_marked(doc: str | os.PathLike, figs: dict[str, str], *, check: bool, source: str,
                  command: str) -> int:
    """Fill ``doc``'s marked spans from ``figs`` and write it, or with ``check`` only compare;
    0, or 1 (and one line on stderr) where a key has no figure or the doc differs."""
    import sys
    text = Path(doc).read_text()
    new, missing = fill_marked(text, figs)
    if missing:
        print(f"{doc}: no figure for {', '.join(missing)}", file=sys.stderr)
        return 1
    if check:
        if new != text:
            print(f"{doc}: figures differ from {source}; run {command}", file=sys.stderr)
            return 1
        return 0
    Path(doc).write_text(new)
    return 0
