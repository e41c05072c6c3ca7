"""The result of a GEMM on an array (:class:`ArrayRun`), shared by the cycle models."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from . import plan
from .spec import ArraySpec

__all__ = ["ArrayRun", "OsTrace", "STALL_CAUSES"]

STALL_CAUSES = ("chain dependency", "accumulator port", "operand bandwidth", "scale bandwidth",
                "stationary load", "fill and drain", "ragged edges")


@dataclass
class OsTrace:
    """Per cycle of an output-stationary run: the wave issued (-1: none) and the wave whose
    D appears on the units' outputs (-1: none); ``waves`` is the plan they index."""
    issue: npt.NDArray[np.int64]
    out: npt.NDArray[np.int64]
    waves: list[plan.Wave]


@dataclass
class ArrayRun:
    """One GEMM on an array: timing, where the time went, traffic and (given operands) D."""
    array: ArraySpec
    m: int
    n: int
    k: int
    cycles: int
    busy: int                                   #: unit-cycles spent on beats
    stalls: dict[str, int]                      #: idle unit-cycles, by cause
    traffic: dict[str, int]                     #: bytes, by buffer or path
    d: npt.NDArray | None = None                #: (M, N) D codes, when operands were given
    d_cycle: npt.NDArray[np.int64] | None = None  #: (M, N) cycle each final D appears
    trace: OsTrace | None = None                #: per-cycle record ("os", record=True)
    chain: npt.NDArray | None = None            #: (M, N, K/k) every instruction's D
    detail: dict[str, float] = field(default_factory=dict)

    @property
    def utilisation(self) -> float:
        return self.busy / (self.array.units * self.cycles)

    @property
    def macs_per_cycle(self) -> float:
        return self.m * self.n * self.k / self.cycles

    def table(self) -> str:
        """A short text report: cycles, utilisation, stalls and traffic."""
        lines = [f"cycles        {self.cycles}", f"utilisation   {self.utilisation:.1%}",
                 f"MACs/cycle    {self.macs_per_cycle:.1f}", "stalls (unit-cycles)"]
        lines += [f"  {k:22} {v}" for k, v in self.stalls.items() if v]
        lines += ["traffic (bytes)"] + [f"  {k:22} {v}" for k, v in self.traffic.items()]
        return "\n".join(lines)


