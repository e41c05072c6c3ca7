"""Observe a design behind a port map: any vector set through it, its results kept
(``mxsim rtl observe``).

:func:`observe_set` is ``fit --rtl``'s run of its probe suite
(:func:`testbenches.foreign.characterise.observe_run`) for a vector set the user gives: the
set is checked against the map first (its element formats, K, scales, C and ``[domain]``, one
line each, before anything is built), the design is driven in one *mode* (the unit-spec
fields that the map's ``[control]`` inputs follow, from ``--unit`` and ``--set``), and the
set comes back with ``d`` = the design's results, nothing compared: ``mxsim fit IN OUT`` then
fits a unit spec to them. ``d`` is in the result's encoding, as ``fit --rtl`` observes it:
FP32/FP16/BF16 codes, or a fixed-point result as the FP32 code of its value with
``meta['compare'] = "value"`` (which ``mxsim fit`` reads from the file); ``meta`` also gets
the instruction k (``instruction_k``, the k ``mxsim fit`` then fits) and the mode.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mxsim.errors import MxsimError
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

from ..sim.backend import MismatchKind, count
from .characterise import carrier_spec, checked_spec, observe_run

__all__ = ["Observation", "observe_set", "mode_spec"]

#: Fields ``--set`` cannot give: the vector set has the formats, the map k and the block.
_SHAPE = ("a_format", "b_format", "scale_format", "block", "k")


@dataclass
class Observation:
    """One vector set through a design: the set with ``d`` filled in, the simulator's cycles
    and seconds (the run alone, and the build with it), the mode the design ran in, and how
    often the design broke the timing its map declares (its results are kept all the same)."""
    observed: VectorSet
    backend: str
    cycles: int
    seconds: float
    total_seconds: float
    mode: dict[str, Any] = field(default_factory=dict)
    timing_mismatches: int = 0

    def to_dict(self) -> dict[str, Any]:
        vs = self.observed
        return {"dots": vs.num_dots, "k": vs.k, "instruction_k": vs.extra.get("instruction_k"),
                "d_format": vs.d_format, "compare": vs.extra.get("compare", "bits"),
                "backend": self.backend, "cycles": self.cycles, "seconds": self.seconds,
                "total_seconds": self.total_seconds, "mode": self.mode,
                "timing_mismatches": self.timing_mismatches}


def _check_formats(pm, vs: VectorSet) -> None:
    """Refuse a set whose element formats the design does not multiply (MapError, one line),
    before a spec in those formats is made (whose refusal would name a unit, not the set)."""
    from .portmap import MapError

    sel = pm.format_select
    takes = (vs.a_format == vs.b_format and vs.a_format in sel.values if sel is not None
             else (vs.a_format, vs.b_format) == (pm.a_format, pm.b_format))
    if not takes:
        line = sel.line if sel is not None else pm.instruction_line
        what = (f"one format for A and B among {', '.join(sel.values)}" if sel is not None
                else f"{pm.a_format} x {pm.b_format}")
        raise MapError(f"{pm.path}:{line}: the vector set holds {vs.a_format} x {vs.b_format}; "
                       f"the design takes {what}; generate a set in its formats")


def _followed(pm) -> list[str]:
    """The unit-spec fields the design behind ``pm`` follows: those its ``[control]`` inputs
    follow, and ``d_format`` where its result or C may have more than one format."""
    acc = pm.accumulator.format or ""
    out = [c.source for c in pm.controls]
    if pm.result.encodings or "|" in acc:
        out.append("d_format")
    return list(dict.fromkeys(out))


def mode_spec(pm, vs: VectorSet, fields: Mapping[str, Any], unit: str | None = None
              ) -> UnitSpec:
    """The spec that drives the design on ``vs``: ``unit``'s spec for the set's formats, or
    the carrier of ``fit --rtl`` (:func:`~testbenches.foreign.characterise.carrier_spec`: one
    exact rounding), with ``fields`` (``--set``) changed; where the design takes C in several
    formats and neither names ``d_format``, the set's C format. MxsimError (one line) for a
    field the design does not follow (:func:`_followed`: setting it would change nothing), or
    where the fields break a spec rule or the map cannot run the mode."""
    from mxsim import units

    fields = dict(fields)
    shape = [name for name in fields if name in _SHAPE]
    if shape:
        raise MxsimError(f"--set {shape[0]}: rtl observe takes the element formats and scales "
                         f"from the vector set and k and the block from the port map; set "
                         f"numerics and modes only (acc_rounding=rd, d_format=bf16)")
    followed = _followed(pm)
    idle = [name for name in fields if name not in followed]
    if idle:
        which = (f"its inputs follow {', '.join(followed)} only" if followed else
                 "it has no [control] inputs")
        raise MxsimError(f"--set {idle[0]}: no input of {pm.path} follows {idle[0]}, so the "
                         f"design runs the same without it ({which}); leave it out")
    acc = pm.accumulator.format
    if unit is None and "d_format" not in fields and acc and "|" in acc and vs.c is not None \
            and vs.c_format in acc.split("|"):
        fields["d_format"] = vs.c_format
    if unit is None:
        return carrier_spec(pm, vs.a_format, vs.b_format, fields)
    spec = units.get(unit).spec_for(vs)
    if fields:
        data = {**spec.to_dict(), **fields,
                "name": f"{spec.name} ({', '.join(f'{n}={v}' for n, v in fields.items())})"}
        return checked_spec(pm, data)
    pm.check_spec(spec)
    return spec


def observe_set(pm, vs: VectorSet, work: str | Path, *, sim: str = "verilator",
                bulk: bool = False, fields: Mapping[str, Any] | None = None,
                unit: str | None = None, seed: int = 0) -> Observation:
    """``vs`` through the design behind ``pm`` (checked against its ports), in the mode of
    :func:`mode_spec`, and its results as ``d`` (see the module docstring). The cocotb
    testbench runs it on ``sim`` (verilator or icarus), or the bulk C++ harness with
    ``bulk``; builds go to ``work`` (created once the set is checked, and reused while the
    design is unchanged). ``seed`` seeds the registers' random initial values; the set runs
    at full rate.

    Raises
    ------
    MxsimError
        One line, before anything is built, when the set does not fit the design (its formats,
        K, scales, C, or a dot product outside the map's ``[domain]``) or the mode is not one
        the map runs; after the run, when the design's results are too few, or (a fixed-point
        result) not FP32 values.
    """
    from .backend import ForeignBackend
    from .bulk import ForeignBulkBackend

    t0 = time.perf_counter()
    _check_formats(pm, vs)
    spec = mode_spec(pm, vs, dict(fields or {}), unit)
    pm.pack(spec, vs)           # K, scales, C and the ports' fields: one line, before a build
    pm.check_domain(vs, fix="observe in-domain dot products, or drop [domain] to run every "
                            "input")
    spec.check_vectors(vs)
    try:                                # created only for a set the design takes
        Path(work).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MxsimError(f"{work}: cannot create the output folder ({exc.strerror or exc})") \
            from None
    backend = ForeignBulkBackend(pm, probes=False) if bulk else ForeignBackend(
        pm, sim=sim, probes=False)           # observe compares nothing: [probes] unused
    observed, run = observe_run(pm, vs, work, backend=backend, spec=spec, seed=seed,
                                why="rtl observe writes a fixed-point result as the FP32 "
                                    "value it equals, which mxsim fit compares")
    data = spec.to_dict()
    mode = {name: data[name] for name in _followed(pm)}
    observed = observed.replace(extra={**observed.extra, "instruction_k": spec.k,
                                       "mode": mode})
    late = count(run.mismatches, MismatchKind.CYCLE)
    return Observation(observed, backend.mode, int(run.cycles), float(run.seconds),
                       time.perf_counter() - t0, mode, late)
