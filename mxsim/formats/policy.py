"""The policies and small records of the formats layer: rounding modes, overflow, specials.

Policies are enums passed explicitly (``Rounding.RNE``, ``Overflow.SATURATE``), never booleans
or globals; :func:`choice` reads one from its name with a one-line error.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ..errors import FormatError

__all__ = ["choice", "Rounding", "Overflow", "Specials", "Class", "Fields", "DEFAULT_SR_BITS"]


def choice(kind: type[enum.Enum], value: Any, label: str,
           error: type[Exception] = FormatError) -> Any:
    """The member of a string-valued enum named by ``value`` (case-insensitive).

    Raises ``error`` worded "<label> must be one of <choices>, not <value>".
    """
    if isinstance(value, kind):
        return value
    try:
        return kind(str(value).lower())
    except ValueError:
        choices = ", ".join(m.value for m in kind)
        raise error(f"{label} must be one of {choices}, not {value!r}") from None


class Rounding(enum.Enum):
    """Rounding of a value that falls between two representable neighbours."""
    RNE = "rne"                #: to nearest, ties to even
    RNA = "rna"                #: to nearest, ties away from zero
    RZ = "rz"                  #: toward zero (truncate the magnitude)
    RU = "ru"                  #: toward +Inf
    RD = "rd"                  #: toward -Inf
    STOCHASTIC = "stochastic"  #: up with probability given by the discarded bits (see round_to)

    @classmethod
    def of(cls, value: Rounding | str) -> Rounding:
        return choice(cls, value, "Rounding")


class Overflow(enum.Enum):
    """What a result beyond the largest finite value becomes."""
    SATURATE = "saturate"   #: ±max (PTX .satfinite)
    IEEE = "ieee"           #: IEEE 754 for the rounding mode (rz gives max, rne gives Inf ...)
    INF = "inf"             #: ±Inf whatever the rounding mode (tensor-core accumulators)

    @classmethod
    def of(cls, value: Overflow | str) -> Overflow:
        return choice(cls, value, "Overflow")

    @classmethod
    def saturating(cls, saturate: bool) -> Overflow:
        """SATURATE for true, IEEE for false (the ``saturate`` flag of encoders)."""
        return cls.SATURATE if saturate else cls.IEEE


class Specials(enum.Enum):
    """How a floating-point format spends codes on Inf and NaN."""
    IEEE = "ieee"   #: the top exponent is reserved: Inf when the mantissa is 0, NaN otherwise
    FN = "fn"       #: finite-and-NaN: only the all-ones magnitude is NaN, there is no Inf
    NONE = "none"   #: every code is a finite number


class Class(enum.IntEnum):
    """Class of a code, as :meth:`Format.classify` reports it."""
    ZERO = 0
    SUBNORMAL = 1
    NORMAL = 2
    INF = 3
    NAN = 4


class Fields(NamedTuple):
    """Exact fields of codes: value = (-1)**sign * sig * 2**(e - man_bits) for finite codes."""
    sign: npt.NDArray[np.uint8]
    e: npt.NDArray[np.int32]      #: unbiased exponent of the leading significand bit
    sig: npt.NDArray[np.uint32]   #: integer significand, hidden bit included


#: Random bits per element that stochastic rounding uses unless told otherwise.
DEFAULT_SR_BITS = 32
