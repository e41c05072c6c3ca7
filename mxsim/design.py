"""A design: the unit spec and micro-architecture that the RTL, the cycle model and the
testbenches build, resolved in one place.

Every route to RTL (``mxsim rtl``/``verify``, explore's designs, mutation runs) names a unit (a
preset, a spec file or a :class:`~mxsim.spec.UnitSpec`), an operand pair, optional field
overrides and the lanes and stages; :func:`resolve_design` turns that into the pair the
builders take and checks once, with :func:`~mxsim.microarch.check_rtl`, that the RTL builds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import units
from .errors import MxsimError
from .microarch import MicroArch, check_rtl, check_rtl_formats
from .spec import UnitSpec

__all__ = ["resolve_design"]


def resolve_design(unit: str | UnitSpec | units.Unit, a_format: str | None = None,
                   b_format: str | None = None, overrides: Mapping[str, Any] | None = None,
                   lanes: int | None = None, stages: int = 1,
                   scale: tuple[str | None, int | None] | None = None
                   ) -> tuple[UnitSpec, MicroArch]:
    """The spec of ``unit`` for A in ``a_format`` and B in ``b_format`` (B defaults to A; both
    to the spec's own formats for a spec file or UnitSpec, and to E4M3 for a hardware preset),
    with ``overrides`` (UnitSpec fields) applied, and a MicroArch of ``lanes`` products per
    cycle (the spec's k unless given) and ``stages`` registers after the accumulator.

    ``scale`` (``(scale_format, block)``) picks one of a preset's scale configurations
    (default: its first; ``blackwell-mxf4nvf4`` has E8M0 in blocks of 32 or 16 and UE4M3 in
    blocks of 16).

    Raises the spec's errors for a bad override, and MicroArchError (one line, naming what the
    RTL cannot build) unless the RTL generator builds the pair.
    """
    # The RTL's formats first: a preset that has fp16 operands should not answer for it.
    found = units.get(unit)
    check_rtl_formats(found.name, a_format, b_format)
    spec = found.spec_for_formats(a_format, b_format)
    if scale is not None and tuple(scale) != (spec.scale_format, spec.block):
        spec = _with_scale(found, spec, scale)
    if overrides:
        spec = spec.replace(**overrides)
    ua = MicroArch(lanes=lanes if lanes is not None else spec.k or 1, stages=stages)
    check_rtl(spec, ua)
    return spec, ua


def _with_scale(found: units.Unit, spec: UnitSpec, scale: tuple[str | None, int | None]
                ) -> UnitSpec:
    """``spec`` with the preset's scale configuration ``scale``; MxsimError (one line) naming
    the configurations it has when it has not this one."""
    have = tuple(tuple(s) for s in getattr(found.preset, "scales", ()))
    if tuple(scale) not in have:
        names = ", ".join(f"{f}/{b}" if f else "none" for f, b in have) or "none"
        got = f"{scale[0]}/{scale[1]}" if scale[0] else "none"
        raise MxsimError(f"Unit {found.name!r} has no scale configuration {got}; it has "
                         f"{names}")
    fmt, block = scale
    return found.preset.spec(spec.a_format, spec.b_format, scale_format=fmt, block=block,
                             c_format=spec.d_format)
