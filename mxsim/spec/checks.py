"""How a unit spec's fields are checked and shown: the enum each policy field takes, integers,
and a bad value as an error message quotes it (cut, indices counted)."""

from __future__ import annotations

import enum
import operator
from typing import Any

from ..errors import MxsimError
from ..formats import Overflow, Rounding
from .policies import (
    Align,
    CMode,
    Epilogue,
    Product,
    Reduce,
    ScaleSumOverflow,
    Specials,
    UpcastSpecials,
    ZeroSign,
)

__all__ = ["SpecError", "short", "few", "integer", "ENUMS", "LATE_ENUMS", "LATER_FIELDS"]


class SpecError(MxsimError, ValueError):
    """A unit spec that breaks a rule (raised when it is built or loaded)."""


def short(value: Any, limit: int = 60) -> str:
    """``repr(value)`` (``str`` for a string) cut to ``limit`` characters: a bad field may be
    huge."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def few(indices: list[int], limit: int = 8) -> str:
    """A sorted list of indices as a message shows it: the first ``limit``, then how many."""
    if len(indices) <= limit:
        return str(indices)
    return f"[{', '.join(map(str, indices[:limit]))}, ... ({len(indices)} in all)]"


def integer(value: Any, what: str) -> int:
    """``value`` as a Python int (numpy integers too), or SpecError "<what>, not <value>";
    booleans and floats are not integers."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise SpecError(f"{what}, not {short(repr(value))}")
    return operator.index(value)


#: Policy fields whose bad values a rule below refuses in its own words, in its place among
#: the rules: they become their enum only when the value names a member.
LATE_ENUMS: dict[str, type[enum.Enum]] = {"upcast_specials": UpcastSpecials,
                                           "epilogue": Epilogue}

ENUMS: dict[str, type[enum.Enum]] = {
    "align": Align, "product": Product, "c_mode": CMode, "zero_sign": ZeroSign,
    "acc_rounding": Rounding, "c_rounding": Rounding, "promote_rounding": Rounding,
    "overflow": Overflow, "specials": Specials, "reduce": Reduce,
    "scale_sum_overflow": ScaleSumOverflow,
}
#: Fields added after specs were first published: written (to_dict, dumps, digest) only when
#: they differ from their default, so every earlier spec keeps its text and its digest.
LATER_FIELDS = {"specials": Specials.IEEE, "reduce": Reduce.CHAIN, "tree_formats": None,
                "scale_sum_bits": None, "scale_sum_overflow": ScaleSumOverflow.WRAP}
