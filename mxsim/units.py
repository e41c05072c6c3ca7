"""The unit registry: named dot-product units that compute ``d`` for a vector set.

For now it holds ``exact``; the numerics-engine issue adds the hardware presets (as
``UnitSpec`` families) behind the same ``get(name).run(vectors)`` interface.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .engine import fast, reference
from .errors import UnitError
from .vectors import VectorSet

__all__ = ["Unit", "UNITS", "get", "names", "ENGINES"]

ENGINES = ("fast", "reference")


@dataclass(frozen=True)
class Unit:
    """A named unit: what it computes, where its definition comes from, and its engines."""
    name: str
    summary: str
    provenance: str
    d_format: str
    fast: Callable[[VectorSet], npt.NDArray]
    reference: Callable[[VectorSet], npt.NDArray]

    def compute(self, vs: VectorSet, engine: str = "fast") -> npt.NDArray[np.uint32]:
        """``d`` bit patterns of this unit on the inputs of ``vs``."""
        if engine not in ENGINES:
            raise UnitError(f"Engine must be one of {', '.join(ENGINES)}, not {engine!r}")
        return getattr(self, engine)(vs)

    def run(self, vs: VectorSet, engine: str = "fast") -> VectorSet:
        """A copy of ``vs`` with ``d`` computed by this unit and the producer recorded."""
        return vs.with_result(self.compute(vs, engine), d_format=self.d_format,
                              producer=f"mxsim unit {self.name}", unit=self.name,
                              engine=engine)


UNITS: dict[str, Unit] = {u.name: u for u in [
    Unit(name="exact",
         summary="infinitely precise A·B + C (scales applied exactly), rounded once to FP32 RNE",
         provenance="definition (mathematically exact); no hardware computes it",
         d_format="fp32", fast=fast.matmul_exact, reference=reference.matmul_exact),
]}


def names() -> list[str]:
    return list(UNITS)


def get(name: str | Unit) -> Unit:
    """Look a unit up by name."""
    if isinstance(name, Unit):
        return name
    try:
        return UNITS[name]
    except KeyError:
        raise UnitError(f"Unknown unit {name!r}; choose one of {', '.join(UNITS)} "
                        f"(see `mxsim units`)") from None
