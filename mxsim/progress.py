"""Progress on stderr for every step that takes more than a moment: one module, no dependency.

Two shapes, both drawn on one line of stderr that is rewritten in place:

* :class:`Progress`: a bar for work counted in items,
  ``[#####      ] 40% 8,000/20,000 dots  0:12 elapsed, ETA 0:18``.
* :class:`Step`: a blocking step with no count (a Verilator build, a Yosys run), a line whose
  elapsed time ticks once a second from a background thread,
  ``building RTL with Verilator (the first build takes ~2 min)... 0:35``; it is drawn only when
  the step outlasts ``delay`` seconds, so quick (cached) steps print nothing.

Both are off when ``enabled`` is False (callers pass False under ``--json``), and by default
(``enabled=None``) on only when stderr is a terminal. ``MXSIM_PROGRESS=0`` turns them off
everywhere, ``MXSIM_PROGRESS=1`` on even when stderr is not a terminal (logs, tests).
Standard output is never touched.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from types import TracebackType

__all__ = ["Progress", "Step", "wanted", "clock"]


def wanted(flag: bool | None = None) -> bool:
    """Whether to draw: ``flag`` when given, else ``MXSIM_PROGRESS`` (0/1) when set, else
    whether stderr is a terminal."""
    if flag is not None:
        return bool(flag)
    env = os.environ.get("MXSIM_PROGRESS", "").strip()
    if env in ("0", "1"):
        return env == "1"
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):       # a closed or replaced stderr
        return False


def clock(seconds: float) -> str:
    """``m:ss`` (or ``h:mm:ss``) of a duration."""
    s = max(0, int(round(seconds)))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02}:{s:02}" if h else f"{m}:{s:02}"


_lock = threading.Lock()


def _draw(text: str, end: str = "") -> None:
    with _lock:
        try:
            sys.stderr.write("\r" + text + "\x1b[K" + end)
            sys.stderr.flush()
        except (OSError, ValueError):
            pass                                  # stderr went away: progress is optional


class Progress:
    """``update(done)`` redraws ``[####    ] 40% done/total what  elapsed, ETA``.

    ``frac`` (0..1), where given, is the fraction of the work done when items differ in cost
    (the ETA follows it rather than the item count). ``enabled``: see :func:`wanted`.
    Usable as a context manager (``close`` on exit).
    """

    def __init__(self, total: int, enabled: bool | None = None, what: str = "dots",
                 label: str = ""):
        self.total, self.what, self.label = total, what, label
        self.enabled = wanted(enabled)
        self.t0 = time.perf_counter()
        self._drawn = False

    def line(self, done: int, note: str = "", frac: float | None = None) -> str:
        """The text of the bar after ``done`` items."""
        if frac is None:
            frac = done / self.total if self.total else 1.0
        frac = min(1.0, max(0.0, frac))
        el = time.perf_counter() - self.t0
        eta = f"ETA {clock(el / frac - el)}" if frac > 0 else "ETA --:--"
        bar = "#" * int(frac * 30)
        head = f"{self.label} " if self.label else ""
        total = max(self.total, done)           # work that outgrew its estimate: no 160%
        return (f"  {head}[{bar:30}] {frac:4.0%} {done:,}/{total:,} {self.what}  "
                f"{clock(el)} elapsed, {eta}" + (f"  {note}" if note else ""))

    def update(self, done: int, note: str = "", frac: float | None = None) -> None:
        if self.enabled:
            _draw(self.line(done, note, frac))
            self._drawn = True

    def close(self) -> None:
        if self.enabled and self._drawn:
            with _lock:
                sys.stderr.write("\n")
                sys.stderr.flush()
        self._drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Step:
    """A blocking step shown as ``message... m:ss`` with the elapsed time ticking.

    ``expect`` (seconds), where known, adds how long the step usually takes
    (``... 0:35 of ~2:00``). Nothing is drawn unless the step lasts more than ``delay``
    seconds; when something was drawn, the line ends with ``done in m:ss`` (or ``stopped after
    m:ss`` when the step raised).
    """

    def __init__(self, message: str, enabled: bool | None = None, *, expect: float | None = None,
                 delay: float = 1.0, interval: float = 1.0):
        self.message, self.expect = message, expect
        self.delay, self.interval = delay, interval
        self.enabled = wanted(enabled)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = False
        self.t0 = 0.0
        self.seconds = 0.0

    def line(self, elapsed: float) -> str:
        of = f" of ~{clock(self.expect)}" if self.expect and elapsed < self.expect else ""
        return f"  {self.message}... {clock(elapsed)}{of}"

    def _tick(self) -> None:
        if self._stop.wait(self.delay):
            return
        while True:
            _draw(self.line(time.perf_counter() - self.t0))
            self._drawn = True
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> Step:
        self.t0 = time.perf_counter()
        if self.enabled:
            self._thread = threading.Thread(target=self._tick, name="mxsim-progress",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.seconds = time.perf_counter() - self.t0
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self._drawn:
            how = "done in" if exc_type is None else "stopped after"
            _draw(f"  {self.message}... {how} {clock(self.seconds)}", end="\n")
