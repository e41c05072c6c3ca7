"""A format's layout as data: field widths, bias, special-value encoding and what they imply.

:class:`FormatLayout` holds the stored fields and derives every limit (``emax``, ``max``,
``code_of_nan`` ...) from them; :class:`mxsim.formats.Format` adds decode and encode on top.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .policy import Specials

__all__ = ["FormatLayout"]


@dataclass(frozen=True, kw_only=True)
class FormatLayout:
    """An element, scale or output format's layout: field widths, bias and special values.

    ``kind`` is ``"float"`` for sign/exponent/mantissa formats and ``"int"`` for MXINT8, whose
    value is the two's-complement code times ``2**-man_bits``. ``subnormals=False`` makes the
    zero exponent field an ordinary binade (E8M0, which has no zero). ``container_bits`` is the
    storage width when it exceeds the value bits (UE4M3 in a byte); the extra top bits are
    ignored on decode and never set on encode.

    :class:`mxsim.formats.Format` adds decode and encode; this part is all that
    :func:`mxsim.formats.round_to` needs to round into the format.
    """
    name: str
    exp_bits: int
    man_bits: int
    bias: int
    signed: bool = True
    kind: str = "float"
    specials: Specials = Specials.NONE
    subnormals: bool = True
    container_bits: int | None = None
    ml_dtypes_name: str | None = None
    torch_name: str | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("float", "int"):
            raise ValueError(f"Format kind must be 'float' or 'int', not {self.kind!r}")
        if self.container_bits is not None and self.container_bits < self.value_bits:
            raise ValueError(f"Container of {self.name} must hold {self.value_bits} bits, "
                             f"not {self.container_bits!r}")

    def __repr__(self) -> str:
        return f"formats.get({self.name!r})"

    # -- derived layout ---------------------------------------------------------------------

    @cached_property
    def value_bits(self) -> int:
        """Bits that carry the value (sign, exponent, mantissa; or the integer)."""
        if self.kind == "int":
            return 8
        return int(self.signed) + self.exp_bits + self.man_bits

    @cached_property
    def bits(self) -> int:
        """Storage width of one code."""
        return self.container_bits or self.value_bits

    @cached_property
    def code_dtype(self) -> np.dtype:
        return np.dtype(np.uint8 if self.bits <= 8 else np.uint16 if self.bits <= 16
                        else np.uint32)

    @cached_property
    def value_mask(self) -> int:
        return (1 << self.value_bits) - 1

    @cached_property
    def sign_shift(self) -> int:
        return self.exp_bits + self.man_bits

    @cached_property
    def has_inf(self) -> bool:
        return self.specials is Specials.IEEE

    @cached_property
    def has_nan(self) -> bool:
        return self.specials is not Specials.NONE

    @cached_property
    def has_zero(self) -> bool:
        return self.kind == "int" or self.subnormals

    @cached_property
    def emax(self) -> int:
        """Unbiased exponent of the largest finite value."""
        if self.kind == "int":
            return 0
        top = (1 << self.exp_bits) - 1
        if self.specials is Specials.IEEE or (self.specials is Specials.FN and self.man_bits == 0):
            top -= 1
        return top - self.bias

    @cached_property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal binade."""
        if self.kind == "int":
            return 0
        return (1 if self.subnormals else 0) - self.bias

    @cached_property
    def max_sig(self) -> int:
        """Largest significand (hidden bit included) at ``emax``."""
        if self.kind == "int":
            return 127
        full = (1 << (self.man_bits + 1)) - 1
        if self.specials is Specials.FN and self.man_bits > 0:
            return full - 1
        return full

    @cached_property
    def max(self) -> float:
        """Largest finite value."""
        return math.ldexp(self.max_sig, self.emax - self.man_bits)

    @cached_property
    def min_normal(self) -> float:
        if self.kind == "int":
            raise ValueError("Format int8 has no normal/subnormal distinction")
        return math.ldexp(1.0, self.emin)

    @cached_property
    def min_subnormal(self) -> float:
        """Smallest positive value (the smallest normal when there are no subnormals)."""
        if self.kind == "int" or self.subnormals:
            return math.ldexp(1.0, self.emin - self.man_bits)
        return self.min_normal

    @cached_property
    def code_of_max(self) -> int:
        """Code of the largest positive finite value."""
        if self.kind == "int":
            return 0x7F
        exp_field = self.emax + self.bias
        return (exp_field << self.man_bits) | (self.max_sig & ((1 << self.man_bits) - 1))

    @cached_property
    def code_of_nan(self) -> int:
        """Code of the canonical (positive, quiet) NaN."""
        if not self.has_nan:
            raise ValueError(f"Format {self.name} has no NaN")
        if self.specials is Specials.FN:
            return self.value_mask >> int(self.signed)
        return (((1 << self.exp_bits) - 1) << self.man_bits) | (1 << (self.man_bits - 1))

    @cached_property
    def code_of_inf(self) -> int:
        """Code of +Inf."""
        if not self.has_inf:
            raise ValueError(f"Format {self.name} has no Inf")
        return ((1 << self.exp_bits) - 1) << self.man_bits
