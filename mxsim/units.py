"""Units: a hardware preset (a family of specs) or a user's spec file, run by an engine.

``get("hopper-wgmma")`` or ``get("my_unit.toml")`` gives a :class:`Unit`; its ``run(vectors)``
picks the spec for the file's formats and computes ``d`` with the fast engine (or the
reference engine, for checking).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from . import presets
from . import spec as spec_mod
from .engine import fast, reference
from .errors import UnitError
from .progress import Progress, wanted
from .spec import UnitSpec
from .vectors import VectorSet

__all__ = ["Unit", "get", "names", "all_units", "path", "ENGINES"]

ENGINES = ("fast", "reference")


@dataclass(frozen=True)
class Unit:
    """A named unit: a preset family, or one fixed spec read from a file."""
    name: str
    summary: str
    provenance: str
    verified: str
    preset: presets.Preset | None = None
    fixed: UnitSpec | None = None

    def spec_for(self, vs: VectorSet) -> UnitSpec:
        """The spec this unit applies to the vector set's formats."""
        if self.preset is not None:
            return self.preset.spec_for(vs)
        self.fixed.check_operands(vs.a_format, vs.b_format, vs.scale_format, vs.block,
                                  None if vs.c is None else vs.c_format)
        return self.fixed

    def spec_for_formats(self, a_format: str, b_format: str | None = None) -> UnitSpec:
        """The spec for an operand pair, with the unit's first scale pattern (for the RTL
        generator, which has no vector set to read formats from)."""
        b_format = b_format or a_format
        if self.preset is not None:
            scale, block = self.preset.scales[0]
            return self.preset.spec(a_format, b_format, scale_format=scale, block=block)
        if (a_format, b_format) != (self.fixed.a_format, self.fixed.b_format):
            raise UnitError(f"Unit {self.name} is specified for {self.fixed.a_format} x "
                            f"{self.fixed.b_format}, not {a_format} x {b_format}")
        return self.fixed

    def compute(self, vs: VectorSet, engine: str = "fast",
                progress: bool | None = False) -> npt.NDArray:
        """``d`` codes of this unit on the inputs of ``vs``.

        ``progress`` (see :func:`mxsim.progress.wanted`; off by default) draws a bar with an
        ETA on stderr; a large set is then computed in row chunks (the same codes: rows are
        independent dot products)."""
        if engine not in ENGINES:
            raise UnitError(f"Engine must be one of {', '.join(ENGINES)}, not {engine!r}")
        spec = self.spec_for(vs)
        dot = (fast if engine == "fast" else reference).dot
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

    def d_format(self, vs: VectorSet) -> str:
        return self.spec_for(vs).d_format

    def run(self, vs: VectorSet, engine: str = "fast",
            progress: bool | None = False) -> VectorSet:
        """A copy of ``vs`` with ``d`` computed by this unit and the producer recorded."""
        spec = self.spec_for(vs)
        d = self.compute(vs, engine, progress)
        return vs.with_result(d, d_format=spec.d_format, producer=f"mxsim unit {self.name}",
                              unit=self.name, instruction=spec.instruction, engine=engine)


#: Products (m * n * k) above which a run shows progress in chunks: roughly a second of work.
_PROGRESS_TERMS = {"fast": 1 << 25, "reference": 1 << 14}
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
    return fast.path(unit.spec_for(vs))


def _from_preset(p: presets.Preset) -> Unit:
    return Unit(name=p.name, summary=p.summary, provenance=p.provenance, verified=p.verified,
                preset=p)


def names() -> list[str]:
    return presets.names()


def all_units() -> list[Unit]:
    return [_from_preset(p) for p in presets.PRESETS.values()]


def get(name: str | Unit) -> Unit:
    """A preset by name, or a spec file (``.toml`` / ``.json``)."""
    if isinstance(name, Unit):
        return name
    if isinstance(name, UnitSpec):
        return Unit(name=name.name, summary=name.instruction or "user spec",
                    provenance=name.provenance or "user spec", verified="no", fixed=name)
    if str(name).endswith((".toml", ".json")) or Path(str(name)).is_file():
        try:
            spec = spec_mod.load(name)
        except UnicodeDecodeError as exc:
            raise UnitError(f"{name}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
                            f"offset {exc.start}); a spec file is TOML or JSON in UTF-8") from None
        except RecursionError:
            raise UnitError(f"{name}: nested too deeply to read; a spec file is a flat table "
                            f"of keys and values") from None
        except OSError as exc:
            raise UnitError(f"{name}: cannot read the spec file ({exc.strerror})") from None
        return Unit(name=spec.name, summary=spec.instruction or f"spec file {name}",
                    provenance=spec.provenance or f"spec file {name}", verified="no",
                    fixed=spec)
    return _from_preset(presets.get(name))

