"""The campaign report: counts, failures with their replay commands, timings, speed-up."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["Report", "Failure"]


class Failure(NamedTuple):
    """A task that failed: its label, the error (one line) and the command that replays it."""

    label: str
    error: str
    replay: str


@dataclass
class Report:
    """What a campaign did.

    ``tasks`` distinct tasks; ``done`` computed in this run, ``cached`` found in the store,
    ``failed`` the deterministic failures; ``damaged`` names the damaged or foreign records
    found in the store (``PATH (why)``), whose tasks were computed again; ``results`` maps
    each finished key (computed or cached) to its result; ``seconds`` is the wall time,
    ``startup`` the part of it spent starting or reaching the cluster, ``compute`` the part
    from then to the last result (the rest is closing the cluster), ``task_seconds`` the sum of
    the computed tasks' own times (``timings``: label, seconds, worker), so ``speedup`` (task
    seconds over ``compute``) is how many workers were busy on average.
    """

    tasks: int = 0
    done: int = 0
    cached: int = 0
    failed: list[Failure] = field(default_factory=list)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0
    startup: float = 0.0
    compute: float = 0.0
    task_seconds: float = 0.0
    workers: int = 1
    dashboard: str | None = None
    executor: str = "inprocess"
    timings: list[tuple[str, float, str]] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)

    @property
    def speedup(self) -> float:
        """Sum of task seconds over the computing wall time (0 when nothing ran)."""
        return self.task_seconds / self.compute if self.compute > 0 else 0.0

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": self.tasks, "done": self.done, "cached": self.cached,
            "failed": [{"label": f.label, "error": f.error, "replay": f.replay}
                       for f in self.failed],
            "seconds": round(self.seconds, 3), "startup": round(self.startup, 3),
            "compute": round(self.compute, 3),
            "task_seconds": round(self.task_seconds, 3),
            "speedup": round(self.speedup, 2), "workers": self.workers,
            "executor": self.executor, "dashboard": self.dashboard,
            "timings": [{"label": lb, "seconds": round(s, 3), "worker": w}
                        for lb, s, w in self.timings],
            "damaged": self.damaged,
            "results": self.results,
        }

    def damage_note(self) -> str:
        """One line on the damaged or foreign records recomputed (the first three named), or
        "" when there were none."""
        n = len(self.damaged)
        if not n:
            return ""
        more = f"; {n - 3} more" if n > 3 else ""
        return (f"{n} damaged or foreign record{'s' if n != 1 else ''} recomputed: "
                f"{'; '.join(self.damaged[:3])}{more}")

    def markdown(self) -> str:
        """A short markdown summary (the results themselves are the caller's to render)."""
        times = sorted(s for _, s, _ in self.timings)
        median = times[len(times) // 2] if times else 0.0
        lines = [
            "| tasks | computed | cached | failed | workers | wall (start-up, computing) "
            "| task time | median task | speed-up |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| {self.tasks:,} | {self.done:,} | {self.cached:,} | {len(self.failed):,} "
            f"| {self.workers} | {self.seconds:.1f} s ({self.startup:.1f} s, {self.compute:.1f} s) "
            f"| {self.task_seconds:.1f} s | {median:.2f} s | {self.speedup:.1f}x |",
        ]
        if self.damaged:
            lines += ["", self.damage_note()]
        if self.failed:
            lines += ["", "Failed (deterministic; not retried):", ""]
            lines += [f"- `{f.label}`: {f.error}" + (f"; replay: `{f.replay}`" if f.replay else "")
                      for f in self.failed]
        return "\n".join(lines) + "\n"
