"""A one-line progress bar with an ETA on stderr (nothing when not a terminal)."""

from __future__ import annotations

import sys
import time

__all__ = ["Progress"]


class Progress:
    """``update(done)`` redraws ``[####    ] 40% done/total what, elapsed, ETA``.

    ``frac`` (0..1), where given, is the fraction of the work done when items differ in cost
    (the ETA follows it rather than the item count).
    """

    def __init__(self, total: int, enabled: bool, what: str = "dots"):
        self.total, self.enabled, self.what = total, enabled, what
        self.t0 = time.perf_counter()

    def update(self, done: int, note: str = "", frac: float | None = None) -> None:
        if not self.enabled:
            return
        if frac is None:
            frac = done / self.total if self.total else 1.0
        frac = min(1.0, frac)
        el = time.perf_counter() - self.t0
        eta = el / frac - el if frac > 0 else 0
        bar = "#" * int(frac * 30)
        sys.stderr.write(f"\r  [{bar:30}] {frac:4.0%} {done:,}/{self.total:,} {self.what} "
                         f"{el:5.0f} s, ETA {eta:4.0f} s {note}   ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
