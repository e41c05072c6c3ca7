"""The policies of a unit spec: each implementation-defined choice is one enum.

Every policy field of :class:`~mxsim.spec.UnitSpec` holds a member of one of these (or of
:class:`~mxsim.formats.Rounding` and :class:`~mxsim.formats.Overflow`); spec files spell the
member by its value (``align = "rz-jam"``).
"""

from __future__ import annotations

import enum

__all__ = ["Align", "Product", "CMode", "ZeroSign", "UpcastSpecials", "Epilogue", "Specials",
           "Reduce", "ScaleSumOverflow"]


class Align(enum.Enum):
    """How each term is cut to ``frac_bits`` below the step's largest exponent."""
    RZ = "rz"            #: truncate the magnitude (toward zero)
    RD = "rd"            #: floor the signed value (toward -Inf)
    RNE = "rne"          #: to nearest, ties to even, using every discarded bit
    RZ_JAM = "rz-jam"    #: truncate, plus one jam bit below: OR of the discarded bits


class Product(enum.Enum):
    """The alignment exponent of a product."""
    RAW = "raw"                  #: e_a + e_b, significand product in [0, 4) (MMA-Sim)
    NORMALIZED = "normalized"    #: the exponent of the exact product (significand in [1, 2))


class CMode(enum.Enum):
    """Where the accumulator C enters."""
    STEP = "step"      #: as an aligned term of the first fused step (then each step's result)
    AFTER = "after"    #: added to the instruction's result at the end, with ``c_rounding``


class ZeroSign(enum.Enum):
    """Sign of an exactly-zero result."""
    POSITIVE = "positive"  #: always +0 (NVIDIA tensor cores)
    IEEE = "ieee"          #: -0 only when every term is -0 (IEEE 754 sum rules)
    #: C passes through: where the instruction's scaled products sum to exactly zero, D = C
    #: (its code); any other exact zero is +0, -0 when the final rounding is toward -Inf
    #: (IEEE 754 section 6.3)
    C = "c"


class UpcastSpecials(enum.StrEnum):
    """How an upcast reads an element format's Inf/NaN codes.

    A ``str`` enum: it equals its TOML spelling (``spec.upcast_specials == "finite"``).
    """
    IEEE = "ieee"          #: as Inf and NaN
    #: the top exponent binade as ordinary numbers, 2**16 * (1 + m/4) for E5M2 (Triton's
    #: bit-shift E5M2-to-BF16 conversion)
    FINITE = "finite"


class Epilogue(enum.StrEnum):
    """How FP32 scales are applied to the FP32 result (cuBLASLt, H200).

    A ``str`` enum: it equals its TOML spelling (``spec.epilogue == "block-fma"``).
    """
    ALPHA = "alpha"            #: per tensor: fl(fl(sa*sb)*acc) + 0
    COL_ROW = "col-row"        #: row-wise: fl(fl(acc*sb)*sa)
    BLOCK_FMA = "block-fma"    #: per 128-K block: total = fma(partial, fl(sa*sb), total)


class Specials(enum.StrEnum):
    """Whether the unit knows NaN and Inf codes in its inputs.

    A ``str`` enum: it equals its TOML spelling (``spec.specials == "none"``).
    """
    IEEE = "ieee"          #: NaN and Inf codes as the formats define them (OCP MX, IEEE 754)
    #: no NaN or Inf inputs: every code of A, B, the scales and C is the finite number its
    #: bits spell (E4M3 S.1111.111 is 480, E5M2's Inf/NaN codes one more binade, an E8M0
    #: scale 0xFF 2**128, an FP32 C with exponent field 255 2**128 * 1.m)
    NONE = "none"


class Reduce(enum.StrEnum):
    """How an instruction's terms are added.

    A ``str`` enum: it equals its TOML spelling (``spec.reduce == "tree"``).
    """
    CHAIN = "chain"        #: fused steps, each one aligned sum rounded once (MMA-Sim's model)
    #: GST-FDPA group terms added pairwise in a balanced binary tree in index order, each
    #: node ``x + y`` rounded once to ``acc_format``
    TREE = "tree"


class ScaleSumOverflow(enum.StrEnum):
    """What a narrow scale-exponent sum field (``scale_sum_bits``) does with a sum beyond it.

    A ``str`` enum: it equals its TOML spelling (``spec.scale_sum_overflow == "wrap"``).
    """
    WRAP = "wrap"            #: modulo 2**bits, read as two's complement
    SATURATE = "saturate"    #: to the field's range, -2**(bits-1) .. 2**(bits-1) - 1
