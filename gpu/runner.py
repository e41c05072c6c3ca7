"""The one shape of a GPU path: a :class:`Runner` (``gpu.paths`` registers every one).

A runner is named for the instruction or library call it drives, says in one line why it
cannot run here (``unavailable_reason()``), and runs a vector set into a copy with ``d`` and
its provenance filled in (``run(vs)``). A run on a machine that cannot take it raises one
:class:`~mxsim.errors.UnitError` line, ``GPU path NAME is unavailable here: REASON``
(:func:`require`), before anything is imported or launched.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from mxsim.errors import UnitError
from mxsim.vectors import VectorSet

__all__ = ["Runner", "require", "require_operands"]


@runtime_checkable
class Runner(Protocol):
    """A GPU path: what it runs, whether it can run here, and the run itself."""

    #: The path's name, as ``mxsim gpu run --path NAME`` takes it.
    name: str
    #: One line for ``mxsim gpu info``: what runs, and how.
    summary: str
    #: The instruction (or library call) the path drives.
    instruction: str
    #: The preset expected to reproduce the path bit for bit, where one does (else None).
    preset: str | None

    def unavailable_reason(self) -> str | None:
        """None when the path can run on this machine; otherwise one line saying why not."""
        ...

    def run(self, vs: VectorSet) -> VectorSet:
        """``vs`` with ``d`` computed on the local GPU and the producer recorded."""
        ...


def require(runner: Runner) -> None:
    """Raise the one-line UnitError of an unavailable path; return if ``runner`` can run."""
    reason = runner.unavailable_reason()
    if reason is not None:
        raise UnitError(f"GPU path {runner.name} is unavailable here: {reason}")


def require_operands(runner: Runner, vs, fmt: str) -> None:
    """:func:`require`, then the one-line UnitError of a set whose A is not ``fmt`` (the
    paths of one operand format: fp16, bf16 or tf32)."""
    require(runner)
    if vs.a_format != fmt:
        raise UnitError(f"GPU path {runner.name} takes {fmt} operands, not {vs.a_format}")
