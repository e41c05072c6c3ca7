"""User-facing errors: each prints as one line that says what is wrong and what to do.

:func:`run_command` runs a command's body and turns what it raises into the command line's exit
statuses, and :class:`Parser` says a usage error in one line, for ``mxsim`` and the
``python -m mxsim.*`` entry points alike (:func:`run_parsed` puts the two together).

SIGTERM (``kill PID``, a batch system's or a container's stop) and SIGHUP (a closed terminal)
are handled as Ctrl-C is: while a command runs they raise :class:`Terminated`, a
``KeyboardInterrupt``, so every path that cleans up after Ctrl-C (a half-written output
removed, a campaign's workers stopped, a build's processes stopped) does the same for them, and
the command exits ``128 + signal number`` (143, 129) with one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["MxsimError", "FormatError", "VectorFileError", "UnitError", "printable",
           "run_command", "Parser", "run_parsed", "Terminated", "exit_status", "stopped_by"]


class MxsimError(Exception):
    """A failure caused by user input (a file, a name, an option), reported in one line.

    The CLI prints it as ``mxsim: error: <message>`` and exits with status 2. Anything that is
    not an ``MxsimError`` is a bug in mxsim and keeps its traceback.
    """


class FormatError(MxsimError, ValueError):
    """An unknown format name, or a value a format cannot represent under the chosen policy."""


class VectorFileError(MxsimError, ValueError):
    """A vector-set file that is missing, unreadable or does not follow ``mxsim.vectors/1``."""


class UnitError(MxsimError, ValueError):
    """An unknown unit name, or a unit that cannot take the operands it was given."""


def printable(text: str, keep: str = "") -> str:
    """``text`` safe to show on a terminal: every character that is not printable (as
    :meth:`str.isprintable` says: control characters such as newline, ESC and DEL, format
    characters such as bidi overrides, separators other than the space, lone surrogates,
    unassigned code points) is written as a Python string literal writes it (``\\n``,
    ``\\x1b``, ``\\u202e``, ``\\ud800``), except the characters in ``keep``.

    Names and values that come from files (provenance, spec and sweep text) are shown through
    it, so that they can neither move the cursor, clear the screen or forge a line of output,
    nor fail to encode.
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in keep else repr(ch)[1:-1] for ch in text)
class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP received while a command ran (``signum``): a ``KeyboardInterrupt``,
    so that what cleans up after Ctrl-C cleans up after these too."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    def __str__(self) -> str:
        return stopped_by(self)


#: The signals handled as Ctrl-C while a command runs.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def exit_status(exc: BaseException) -> int:
    """The exit status of a command stopped by ``exc`` (a ``KeyboardInterrupt``, or anything
    with the ``signum`` that stopped it): 128 + the signal's number, as a shell reports a
    process that a signal killed (Ctrl-C 130, SIGTERM 143, SIGHUP 129)."""
    return 128 + getattr(exc, "signum", signal.SIGINT)


def stopped_by(exc: BaseException) -> str:
    """How a command stopped by ``exc`` says so: ``interrupted`` (Ctrl-C), or ``terminated
    (SIGTERM)``."""
    signum = getattr(exc, "signum", signal.SIGINT)
    return "interrupted" if signum == signal.SIGINT else \
        f"terminated ({signal.Signals(signum).name})"


def _after_stop(unraisable: object) -> None:
    """``sys.unraisablehook`` once a command is being stopped: an object the signal cut short
    may fail in its destructor as it is collected (a ``ZipFile`` interrupted in its
    ``__init__``: "Exception ignored in ... Traceback"), which says nothing to the user."""


def _raise_terminated(signum: int, frame: object) -> None:
    sys.unraisablehook = _after_stop
    raise Terminated(signum)


def _raise_interrupt(signum: int, frame: object) -> None:
    sys.unraisablehook = _after_stop
    raise KeyboardInterrupt


@contextmanager
def _stop_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`Terminated` in the main thread while the block runs,
    and SIGINT ``KeyboardInterrupt`` as Python's own handler does; from then on, the
    destructors of what they cut short are quiet (:func:`_after_stop`, until
    :func:`run_command` returns).

    A signal this process inherited ignored stays ignored (``nohup mxsim ...`` survives the
    terminal's hangup), and nothing is installed off the main thread, where Python cannot."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {}
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            saved[sig] = signal.signal(sig, _raise_terminated)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        saved[signal.SIGINT] = signal.signal(signal.SIGINT, _raise_interrupt)
    try:
        yield
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)


def run_command(body: Callable[[], int], *, debug: bool = False) -> int:
    """``body()``'s exit status, or the status of what it raised, said in one line on stderr:
    an :class:`MxsimError` (bad input) 2, Ctrl-C 130, SIGTERM 143 and SIGHUP 129 (raised as
    :class:`Terminated` while ``body`` runs), a reader that went away (``... | head``) 0, out
    of memory 2, anything else 3 (a bug in mxsim; its traceback only with ``debug``)."""
    hook = sys.unraisablehook
    try:
        return _run(body, debug)
    finally:
        sys.unraisablehook = hook          # set by a stop signal (_stop_signals)


def _run(body: Callable[[], int], debug: bool) -> int:
    try:
        with _stop_signals():
            return body()
    except MxsimError as exc:
        # One line, whatever the message quotes (a path or a key from a file).
        print(f"mxsim: error: {printable(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(f"mxsim: {stopped_by(exc)}", file=sys.stderr)
        return exit_status(exc)
    except BrokenPipeError:
        # The reader went away (``mxsim ... | head``): nothing more to say, and not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except MemoryError:
        print("mxsim: error: out of memory; use a smaller vector set or run on a machine with "
              "more memory", file=sys.stderr)
        return 2
    except Exception as exc:
        stop = _stopping(exc)
        if stop is None:
            return _last_resort(exc, debug)
        print(f"mxsim: {stopped_by(stop)}", file=sys.stderr)
        return exit_status(stop)


def _stopping(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or stop signal that ``exc`` was raised while unwinding from, if any: a
    signal that lands mid-operation (a ``ZipFile`` opening a member) can leave a clean-up to
    fail over the half-made object ("Can't close the ZIP file while there is an open writing
    handle"), and that failure is the signal's, not a bug to report."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _last_resort(exc: BaseException, debug: bool) -> int:
    """A bug in mxsim, said in one line (its traceback only with ``debug``), and never exit 1."""
    if debug:
        traceback.print_exc()
    lines = str(exc).strip().splitlines()
    what = lines[0][:200] if lines else ""
    print(f"mxsim: internal error: {type(exc).__name__}{': ' + what if what else ''} "
          f"(please report it; rerun with --debug for the traceback)", file=sys.stderr)
    return 3


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``PROG: error: ...`` and where to find help (exit 2);
    its sub-command parsers are Parsers too."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def run_parsed(parser: argparse.ArgumentParser, argv: list[str] | None,
               body: Callable[[argparse.Namespace], int], *, debug: bool = False) -> int:
    """Parse ``argv`` and return ``body(args)``'s exit status through :func:`run_command`; a
    usage error (already said by a :class:`Parser`), ``--help`` or ``--version``: argparse's
    status, returned rather than raised, so a caller of ``main(argv)`` gets it."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    return run_command(lambda: body(args), debug=debug)
