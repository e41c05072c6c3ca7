"""Single-fault mutants of the GST-FDPA datapath (:mod:`hdl.group`), built from outside it.

Like :mod:`testbenches.unit.faults`, each mutant is a subclass of ``hdl.unit.DotProductUnit`` that
names, through the class attributes of the unit and its grouped stages, a part with one small
method overridden; they act on grouped specs only (``spec.group`` set), whose unit is built
from ``DotProductUnit.group_exponent_max`` and ``group_accumulate``. :data:`GROUP_FAULTS`
names each and what it breaks; :func:`testbenches.unit.faults.unit_class` builds them as it builds
the others.
"""

from __future__ import annotations

from hdl.group import GroupAccumulate, GroupExponentMax, GroupSum, GroupTerm
from hdl.unit import DotProductUnit

__all__ = ["GROUP_FAULTS", "GROUP_UNITS"]

#: fault -> where it is and what it breaks (grouped units)
GROUP_FAULTS: dict[str, str] = {
    "group-boundary-off-by-one": "grouping: group g sums products g*G+1 ... g*G+G (the next "
                                 "group's first instead of its own first)",
    "group-sum-truncated": "group sum: its lowest bit dropped (the exact sum truncated to an "
                           "even multiple of the formats' smallest step)",
    "group-scale-first-block": "grouping: every group takes the instruction's first scale "
                               "block's scales, not its own block's",
    "group-zero-exp-kept": "group term: an all-zero group (or one under a zero scale) keeps "
                           "its scale exponent instead of e_zero (the e_zero rule dropped)",
    "group-cancel-to-e-zero": "group term: a group whose non-zero products cancel aligns at "
                              "e_zero (it must keep its scale exponent)",
    "group-scale-sig-dropped": "scale product: the UE4M3 scales' significands left out of the "
                               "group term (exponents kept; UE4M3-scaled units only)",
}


class _BoundaryOff:
    def members(self, g):
        k = self._spec.k
        return [(j + 1) % k for j in super().members(g)]


class _FirstBlockScale:
    def scale_index(self, g):
        return 0


class _SumTruncated(GroupSum):
    def total(self, tree_sum):
        return (tree_sum >> 1) << 1


class _ZeroExpKept(GroupTerm):
    def align_exp(self, scale_exp, zero):
        return scale_exp


class _CancelToEZero(GroupTerm):
    def zero_group(self, gs, sp):
        return (gs.sum == 0) | sp.zero


def _stages(mixin: type | None = None, **parts) -> type[DotProductUnit]:
    """The unit whose two grouped stages get ``mixin`` (a method of ``_Grouping``) and/or the
    part classes ``parts`` (``group_term=...``)."""
    bases_e = (mixin, GroupExponentMax) if mixin else (GroupExponentMax,)
    bases_a = (mixin, GroupAccumulate) if mixin else (GroupAccumulate,)
    exp = type("GroupExponentMax", bases_e, dict(parts))
    acc = type("GroupAccumulate", bases_a, dict(parts))
    return type("DotProductUnit", (DotProductUnit,),
                {"group_exponent_max": exp, "group_accumulate": acc})


def _term(**parts) -> type[GroupTerm]:
    return type("GroupTerm", (GroupTerm,), parts)


class _SigDroppedTerm(GroupTerm):
    def scaled_mag(self, mag, scale_sig):
        return mag


GROUP_UNITS: dict[str, type[DotProductUnit]] = {
    "group-boundary-off-by-one": _stages(_BoundaryOff),
    "group-sum-truncated": _stages(group_term=_term(group_sum=_SumTruncated)),
    "group-scale-first-block": _stages(_FirstBlockScale),
    "group-zero-exp-kept": _stages(group_term=_ZeroExpKept),
    "group-cancel-to-e-zero": _stages(group_term=_CancelToEZero),
    "group-scale-sig-dropped": _stages(group_term=_SigDroppedTerm),
}
assert GROUP_UNITS.keys() == GROUP_FAULTS.keys()
