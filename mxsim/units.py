"""Units: a preset (a hardware family of specs, or one spec from a file) run by an engine.

``get("hopper-wgmma")`` or ``get("my_unit.toml")`` gives a :class:`Unit`; its ``run(vectors)``
picks the spec for the file's formats (once) and computes ``d`` with the fast engine (or the
reference engine, for checking, or the GPU engine: the fast engine's arithmetic on an NVIDIA
GPU, bit-equal to it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from . import presets
from . import spec as spec_mod
from .engine import fast, gpu, reference
from .errors import UnitError
from .progress import Progress, wanted
from .spec import UnitSpec
from .vectors import VectorSet

__all__ = ["Unit", "get", "names", "all_units", "path", "check_engine", "ENGINES"]

ENGINES = ("fast", "reference", "gpu")


@dataclass(frozen=True)
class Unit:
    """A preset, run by an engine: a hardware family, or one spec from a file
    (:func:`mxsim.presets.from_spec`)."""
    preset: presets.Preset

    @property
    def name(self) -> str:
        return self.preset.name

    @property
    def summary(self) -> str:
        return self.preset.summary

    @property
    def provenance(self) -> str:
        return self.preset.provenance

    @property
    def verified(self) -> str:
        return self.preset.verified

    def spec_for(self, vs: VectorSet) -> UnitSpec:
        """The spec this unit applies to the vector set's formats."""
        return self.preset.spec_for(vs)

    def spec_for_formats(self, a_format: str | None = None,
                         b_format: str | None = None) -> UnitSpec:
        """The spec for an operand pair, with the unit's first scale pattern (for the RTL
        generator, which has no vector set to read formats from); see
        :meth:`mxsim.presets.Preset.spec_for_formats` for the defaults."""
        return self.preset.spec_for_formats(a_format, b_format)

    def compute(self, vs: VectorSet, engine: str = "fast",
                progress: bool | None = False) -> npt.NDArray:
        """``d`` codes of this unit on the inputs of ``vs``.

        ``progress`` (see :func:`mxsim.progress.wanted`; off by default) draws a bar with an
        ETA on stderr; a large set is then computed in row chunks (the same codes: rows are
        independent dot products)."""
        dot = _engine_dot(engine)
        return self._compute(self.spec_for(vs), vs, dot, engine, progress)

    def d_format(self, vs: VectorSet) -> str:
        return self.spec_for(vs).d_format

    def run(self, vs: VectorSet, engine: str = "fast",
            progress: bool | None = False) -> VectorSet:
        """A copy of ``vs`` with ``d`` computed by this unit and the producer recorded."""
        spec = self.spec_for(vs)
        d = self._compute(spec, vs, _engine_dot(engine), engine, progress)
        return vs.with_result(d, d_format=spec.d_format, producer=f"mxsim unit {self.name}",
                              unit=self.name, instruction=spec.instruction, engine=engine)

    def _compute(self, spec: UnitSpec, vs: VectorSet, dot: Callable[..., npt.NDArray],
                 engine: str, progress: bool | None) -> npt.NDArray:
        starts = _row_chunks(vs, engine) if wanted(progress) else [0]
        if len(starts) == 1:
            return dot(spec, vs)
        parts = []
        with Progress(vs.num_dots, True, label=f"{self.name} ({engine})") as bar:
            bar.update(0)
            for r0, r1 in zip(starts, starts[1:] + [vs.m], strict=True):
                parts.append(dot(spec, vs.subset(slice(r0, r1))))
                bar.update(vs.num_dots // vs.m * r1)
        return np.concatenate(parts, axis=-2)


def check_engine(engine: str) -> None:
    """Raise UnitError in one line unless ``engine`` names one of :data:`ENGINES`."""
    if engine not in ENGINES:
        raise UnitError(f"Engine must be one of {', '.join(ENGINES)}, not {engine!r}")


def _engine_dot(engine: str) -> Callable[..., npt.NDArray]:
    check_engine(engine)
    if engine == "gpu":
        gpu.require()
    return {"fast": fast, "reference": reference, "gpu": gpu}[engine].dot


#: Products (m * n * k) above which a run shows progress in chunks: roughly a second of work.
_PROGRESS_TERMS = {"fast": 1 << 25, "reference": 1 << 14, "gpu": 1 << 34}
_PROGRESS_CHUNKS = 50


def _row_chunks(vs: VectorSet, engine: str) -> list[int]:
    """First rows of the chunks a run with progress computes (``[0]``: one piece)."""
    terms = vs.num_dots * vs.k
    if terms <= _PROGRESS_TERMS[engine] or vs.m < 2:
        return [0]
    rows = -(-vs.m // min(vs.m, _PROGRESS_CHUNKS))
    return list(range(0, vs.m, rows))


def path(unit: Unit, vs: VectorSet, engine: str = "fast") -> dict:
    """Which code computes this unit's dots on ``vs`` (see :func:`mxsim.engine.fast.path`);
    the reference engine is always Python fractions."""
    if engine == "reference":
        return {"path": "reference", "compiled": False, "numba": None,
                "note": "Python fractions, one dot at a time"}
    if engine == "gpu":
        gpu.require()
        return {"path": "gpu", "compiled": True, "numba": None,
                "note": "the fast engine's arithmetic on the GPU (CuPy)"}
    return fast.path(unit.spec_for(vs))


def names() -> list[str]:
    return presets.names()


def all_units() -> list[Unit]:
    return [Unit(p) for p in presets.PRESETS.values()]


def get(name: str | Unit | UnitSpec) -> Unit:
    """A preset by name, a spec file (``.toml`` / ``.json``) or a UnitSpec, as a unit."""
    if isinstance(name, Unit):
        return name
    if isinstance(name, UnitSpec):
        return Unit(presets.from_spec(name, summary=name.instruction or "user spec",
                                      provenance=name.provenance or "user spec"))
    if str(name).endswith((".toml", ".json")) or Path(str(name)).is_file():
        spec = _load_spec(name)
        return Unit(presets.from_spec(spec, summary=spec.instruction or f"spec file {name}",
                                      provenance=spec.provenance or f"spec file {name}"))
    return Unit(presets.get(name))


def _load_spec(name: str) -> UnitSpec:
    """A spec file, or a one-line UnitError for one that cannot be read."""
    try:
        return spec_mod.load(name)
    except UnicodeDecodeError as exc:
        raise UnitError(f"{name}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
                        f"offset {exc.start}); a spec file is TOML or JSON in UTF-8") from None
    except RecursionError:
        raise UnitError(f"{name}: nested too deeply to read; a spec file is a flat table "
                        f"of keys and values") from None
    except OSError as exc:
        raise UnitError(f"{name}: cannot read the spec file ({exc.strerror})") from None
