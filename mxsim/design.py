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
from .microarch import MicroArch, check_rtl, check_rtl_formats
from .spec import UnitSpec

__all__ = ["resolve_design"]


def resolve_design(unit: str | UnitSpec | units.Unit, a_format: str | None = None,
                   b_format: str | None = None, overrides: Mapping[str, Any] | None = None,
                   lanes: int | None = None, stages: int = 1) -> tuple[UnitSpec, MicroArch]:
    """The spec of ``unit`` for A in ``a_format`` and B in ``b_format`` (B defaults to A; both
    to the spec's own formats for a spec file or UnitSpec, and to E4M3 for a hardware preset),
    with ``overrides`` (UnitSpec fields) applied, and a MicroArch of ``lanes`` products per
    cycle (the spec's k unless given) and ``stages`` registers after the accumulator.

    Raises the spec's errors for a bad override, and MicroArchError (one line, naming what the
    RTL cannot build) unless the RTL generator builds the pair.
    """
    # The RTL's formats first: a preset that has fp16 operands should not answer for it.
    found = units.get(unit)
    check_rtl_formats(found.name, a_format, b_format)
    spec = found.spec_for_formats(a_format, b_format)
    if overrides:
        spec = spec.replace(**overrides)
    ua = MicroArch(lanes=lanes if lanes is not None else spec.k or 1, stages=stages)
    check_rtl(spec, ua)
    return spec, ua
