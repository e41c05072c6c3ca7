"""The hostile-input corpus (issue 31): table rows of command lines, each with the exit status
and the first words of the message a user must see, run as a user runs them.

A :class:`Case` is one command (``python -m mxsim ...`` or another ``python -m`` entry point)
run in a fresh folder of its own, in a session of its own. :func:`check` runs it and holds it to
the promises every verb makes (../shared/attack/DEFECTS.md lists what broke them):

- the exit status is the row's (2 bad input, 1 mismatches, 0 success, 130/143 signals);
- no traceback and no "internal error" on stderr; a refusal (exit 2) is one line,
  ``mxsim: error: `` followed by the row's first words;
- nothing half-written: no ``*.tmp`` file anywhere in the folder, and the row's outputs are
  absent unless the command succeeded;
- no orphans: nothing of the command's session is alive once it has exited.

Rows name the defect they reproduce (``D-...`` as DEFECTS.md spells it) and, after a slash, the
neighbour they add. ``{t}`` in an argument, an output or ``says`` is the case's folder and
``{root}`` the repository.
"""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

__all__ = ["Case", "ROOT", "check", "params", "session_left", "run_case"]

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Case:
    """One row of the corpus.

    ``setup(t)`` prepares the folder ``t`` before the command runs. ``says`` is the start of the
    message: for exit 2, of the text after ``mxsim: error: ``; otherwise a text stderr or stdout
    must contain (empty: no check). ``outputs`` are paths (relative to ``t``) that must not exist
    after a failed command. ``after(t, proc)`` checks more (a store's counts, a file kept).
    ``user`` runs the command as that user id, with its group and no other, through ``setpriv``
    (the corpus must then run as root, and ``t`` be a folder that user may enter).
    """

    id: str
    argv: Sequence[str]
    rc: int
    says: str = ""
    setup: Callable[[Path], None] | None = None
    outputs: Sequence[str] = ()
    after: Callable[[Path, subprocess.CompletedProcess], None] | None = None
    module: str = "mxsim"
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 120.0
    marks: Sequence = ()
    user: int | None = None


def _expand(word: str, t: Path) -> str:
    return word.replace("{t}", str(t)).replace("{root}", str(ROOT))


def session_left(sid: int) -> list[str]:
    """The processes of session ``sid`` still alive, as ``pid args`` lines."""
    # -ww: the whole command line, whatever COLUMNS says (CI sets it, and ps cut the line)
    ps = subprocess.run(["ps", "-ww", "-s", str(sid), "-o", "pid=,stat=,args="],
                        capture_output=True, text=True).stdout
    return [line.strip() for line in ps.splitlines()
            if line.strip() and line.split()[1][:1] != "Z"]


def _reap(sid: int, grace: float) -> list[str]:
    """What of the session is still alive after ``grace`` seconds (then killed)."""
    deadline = time.monotonic() + grace
    left = session_left(sid)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = session_left(sid)
    for line in left:
        try:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


def _terminal_signals() -> None:
    """SIGINT and SIGHUP as a terminal's foreground process has them: a test run in the
    background of a non-interactive shell (CI) has SIGINT ignored, and one run under nohup
    SIGHUP, which exec keeps, and the command would never see the Ctrl-C or the hang-up a row
    sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _wait_for(p: subprocess.Popen, case: Case, t: Path,
              signal_when: Callable[[Path, Callable[[], list[str]]], bool]) -> None:
    """Poll until ``signal_when(t, ps)`` holds; fail the test if the command ends first or the
    moment does not come within the case's timeout."""
    deadline = time.monotonic() + case.timeout
    while not signal_when(t, lambda: session_left(p.pid)):
        if p.poll() is not None:
            out, err = p.communicate()
            pytest.fail(f"{case.id}: ended (exit {p.returncode}) before the moment to signal it"
                        f"\n--- stderr\n{err[-2000:]}")
        if time.monotonic() > deadline:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            pytest.fail(f"{case.id}: the moment to signal it did not come in "
                        f"{case.timeout:.0f} s")
        time.sleep(0.02)


def run_case(case: Case, t: Path, *, signal_after: float | None = None,
             sig: int = signal.SIGINT, grace: float = 5.0,
             signal_when: Callable[[Path, Callable[[], list[str]]], bool] | None = None,
             ) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run ``case`` in ``t`` in a session of its own; with ``signal_after``, send ``sig``
    after that many seconds (SIGINT to the whole group, as a terminal's Ctrl-C; anything else
    to the command's process only, as ``kill``); with ``signal_when``, once
    ``signal_when(t, ps)`` holds (polled every 20 ms: a file appears, a compiler runs), where
    ``ps()`` lists the session's processes (:func:`session_left`). Returns the finished
    process and what of its session outlived it by ``grace`` seconds."""
    if case.setup is not None:
        case.setup(t)
    argv = [sys.executable, "-m", case.module, *(_expand(str(a), t) for a in case.argv)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), MXSIM_PROGRESS="0", PYTHONUNBUFFERED="1")
    env.update({k: _expand(v, t) for k, v in case.env.items()})     # a row's own, PYTHONPATH too
    if case.user is not None:
        # setpriv, as DEFECTS.md's reproductions run it: Popen(user=) cannot start an
        # interpreter that lies in a folder only root may enter (~/.pyenv here); setpriv can.
        argv = ["setpriv", f"--reuid={case.user}", f"--regid={pwd.getpwuid(case.user).pw_gid}",
                "--clear-groups", *argv]
    terminal = sig in (signal.SIGINT, signal.SIGHUP) and (signal_after is not None or
                                                          signal_when is not None)
    with subprocess.Popen(argv, cwd=t, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          errors="replace", start_new_session=True,
                          preexec_fn=_terminal_signals if terminal else None) as p:
        try:
            if signal_when is not None:
                _wait_for(p, case, t, signal_when)
                signal_after = 0.0
            if signal_after is not None:
                try:
                    p.wait(signal_after)
                except subprocess.TimeoutExpired:
                    if sig == signal.SIGINT:
                        os.killpg(p.pid, sig)
                    else:
                        p.send_signal(sig)
            out, err = p.communicate(timeout=case.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            pytest.fail(f"{case.id}: still running after {case.timeout:.0f} s (a hang)")
    done = subprocess.CompletedProcess(argv, p.returncode, out, err)
    return done, _reap(p.pid, grace)


def check(case: Case, t: Path, **signal_kw) -> subprocess.CompletedProcess:
    """Run ``case`` (see :func:`run_case`) and hold it to the corpus's promises."""
    p, left = run_case(case, t, **signal_kw)
    what = f"{case.id}: exit {p.returncode}\n--- stderr\n{p.stderr[-3000:]}\n--- stdout\n" \
           f"{p.stdout[-1500:]}"
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr, what
    assert p.returncode == case.rc, what
    says = _expand(case.says, t)
    if case.rc == 2:
        assert p.stderr.count("\n") == 1, f"not one line: {what}"
        assert p.stderr.startswith(f"mxsim: error: {says}"), what
    elif says:
        assert says in p.stderr + p.stdout, what
    tmp = [str(q.relative_to(t)) for q in t.rglob("*.tmp*") if q.name.startswith(".")]
    assert tmp == [], f"{case.id}: temporary files left: {tmp}"
    if case.rc != 0:
        written = [o for o in case.outputs if (t / _expand(o, t)).exists()]
        assert written == [], f"{case.id}: outputs written by a failed command: {written}"
    assert left == [], f"{case.id}: processes alive after it exited: {left}"
    if case.after is not None:
        case.after(t, p)
    return p


def params(cases: Sequence[Case]) -> list:
    """``cases`` as pytest parameters, with their ids and marks."""
    ids = [c.id for c in cases]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    assert not dup, f"duplicate case ids: {dup}"
    return [pytest.param(c, id=c.id, marks=list(c.marks)) for c in cases]
