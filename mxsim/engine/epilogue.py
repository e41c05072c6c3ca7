"""What runs before a unit's FP32-scale epilogue: the unit and vectors without the scales.

Plumbing shared by both engines (which vectors and which unit compute the partial sums that
the epilogue then scales); no arithmetic, so :mod:`mxsim.engine.reference` and
:mod:`mxsim.engine.fast` stay independent twins.
"""

from __future__ import annotations

from dataclasses import replace

from ..spec import UnitSpec
from ..vectors import VectorSet
from .xp import is_numpy

__all__ = ["without_epilogue"]


def without_epilogue(spec: UnitSpec, vs: VectorSet,
                     ks: slice | None = None) -> tuple[UnitSpec, VectorSet]:
    """The unit and vectors before the FP32 scales: no scales, no epilogue.

    With ``ks`` (block-fma), the vectors are one 128-K slice without C and the unit is the
    chain without promotion: the slice is one partial sum for the FMA to scale. The vectors
    returned are validated."""
    inner = replace(spec, scale_format=None, block=None, epilogue=None)
    # Arrays on a GPU are not checked again (the host's copy was): the set is derived.
    new = (lambda x, **kw: replace(x, **kw)) if is_numpy(vs.a) else (
        lambda x, **kw: x._derived(**kw))
    plain = new(vs, a_scale=None, b_scale=None, scale_format=None, block=None, d=None)
    if ks is not None:
        inner = replace(inner, promote_every=None)
        plain = new(plain, a=vs.a[..., ks], b=vs.b[..., ks, :], c=None)
    return inner, plain
