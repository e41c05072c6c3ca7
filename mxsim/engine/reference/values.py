"""Values in flight in the reference engine: exact rationals with the sign of a zero, NaN and
Inf, and the roundings, alignments and encodings the engine applies to them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ... import formats
from ...formats import Overflow, Rounding
from ...spec import Align

__all__ = ["Val", "exponent", "round_mag", "round_value", "encode_val", "sum_specials",
           "align_units"]


@dataclass(frozen=True)
class Val:
    """A value in flight: a finite Fraction (with the sign of a zero), NaN, or ±Inf."""
    kind: str                      # "num", "nan" or "inf"
    q: Fraction = Fraction(0)
    neg: bool = False              # sign of a zero or an Inf

    @classmethod
    def of_code(cls, fmt: formats.Format, code: int) -> Val:
        v = float(fmt.decode(np.array([code], fmt.code_dtype))[0])
        if math.isnan(v):
            return cls("nan")
        if math.isinf(v):
            return cls("inf", neg=v < 0)
        return cls("num", Fraction(v), math.copysign(1.0, v) < 0)

    @classmethod
    def of_bits(cls, fmt: formats.Format, code: int) -> Val:
        """The number the bits of ``code`` spell, NaN and Inf codes included."""
        sign, e, sig = (int(x[0]) for x in fmt.fields(np.array([code], fmt.code_dtype)))
        q = sig * Fraction(2) ** (e - fmt.man_bits)
        return cls("num", -q if sign else q, bool(sign))


def exponent(mag: Fraction) -> int:
    """floor(log2(mag)) of a positive rational."""
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    return e - 1 if Fraction(2) ** e > mag else e


def round_mag(mag: Fraction, neg: bool, fmt: formats.Format, rounding: Rounding,
               unbounded: bool = False) -> Fraction:
    """The magnitude ``mag`` > 0 rounded to ``fmt``'s precision: with its subnormals, or
    (``unbounded``) with no least exponent; the range above is the caller's."""
    e = exponent(mag)
    lsb = Fraction(2) ** ((e if unbounded else max(e, fmt.emin)) - fmt.man_bits)
    units = mag / lsb
    low = math.floor(units)
    frac = units - low
    if rounding is Rounding.RZ or frac == 0:
        up = False
    elif rounding is Rounding.RNE:
        up = frac > Fraction(1, 2) or (frac == Fraction(1, 2) and low % 2 == 1)
    elif rounding is Rounding.RNA:
        up = frac >= Fraction(1, 2)
    elif rounding is Rounding.RU:
        up = not neg
    elif rounding is Rounding.RD:
        up = neg
    else:
        raise ValueError(f"Rounding {rounding} is not used by unit specs")
    return (low + up) * lsb


def round_value(q: Fraction, fmt: formats.Format, rounding: Rounding,
                 overflow: Overflow) -> Val:
    """``q`` rounded to ``fmt`` (its precision, subnormals and range), as a Val."""
    if q == 0:
        return Val("num", Fraction(0), False)
    neg = q < 0
    r = round_mag(abs(q), neg, fmt, rounding)
    if r > Fraction(fmt.max):
        if overflow is Overflow.SATURATE or (overflow is Overflow.IEEE and (
                rounding is Rounding.RZ or (rounding is Rounding.RU and neg)
                or (rounding is Rounding.RD and not neg))):
            return Val("num", -Fraction(fmt.max) if neg else Fraction(fmt.max), neg)
        return Val("inf", neg=neg)
    return Val("num", -r if neg else r, neg)


def encode_val(fmt: formats.Format, v: Val) -> int:
    if v.kind == "nan":
        return fmt.code_of_nan
    if v.kind == "inf":
        return fmt.code_of_inf | (int(v.neg) << fmt.sign_shift)
    if v.q == 0:
        return int(v.neg) << fmt.sign_shift
    return int(fmt.encode(np.array([float(v.q)]), "rne", saturate=False)[0])


def sum_specials(values: list[Val]) -> Val | None:
    """NaN or ±Inf if the values force one (IEEE: NaN wins, +Inf + -Inf is NaN)."""
    if any(v.kind == "nan" for v in values):
        return Val("nan")
    infs = {v.neg for v in values if v.kind == "inf"}
    if len(infs) == 2:
        return Val("nan")
    if infs:
        return Val("inf", neg=infs.pop())
    return None


def align_units(x: Fraction, align: Align) -> int:
    """``x`` (in units of the step's LSB) as an integer, by the spec's alignment rounding."""
    if align is Align.RZ:
        return math.trunc(x)
    if align is Align.RD:
        return math.floor(x)
    if align is Align.RNE:
        return round(x)                 # Fraction.__round__ rounds half to even
    twice = abs(x) * 2                  # RZ_JAM: units of half an LSB, plus a jam bit
    t = math.floor(twice)
    if t != twice:
        t |= 1
    return -t if x < 0 else t
