"""A format with its codes: field access, exact decode, and encode through ``round_to``.

:class:`Format` is the frozen, keyword-only record of one element, scale or output format
(its layout, :class:`~mxsim.formats.layout.FormatLayout`) with the operations on its codes.
Decode maps codes to exact float64 values; encode splits float64 values into integers and
calls :func:`~mxsim.formats.rounding.round_to`, the one place that rounds.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import FormatError
from .layout import FormatLayout
from .policy import DEFAULT_SR_BITS, Class, Fields, Overflow, Rounding, Specials
from .rounding import draw_random_bits, round_to
from .xp import of as _xp_of

__all__ = ["Format"]


class Format(FormatLayout):
    """An element, scale or output format: its layout (the stored fields of
    :class:`~mxsim.formats.layout.FormatLayout`) and the operations on its codes.

    Construct it with the layout's keyword-only fields; it is frozen and compares by value.
    """

    # -- field access -----------------------------------------------------------------------

    def checked_codes(self, codes: Any) -> npt.NDArray:
        """``codes`` as an array of :attr:`code_dtype`, container bits above the value cleared.

        Raises TypeError for a non-integer array and FormatError for a code outside
        ``[0, 2**bits)`` (numpy arrays; CuPy arrays, the GPU engine's own, are not
        range-checked).
        """
        xp = _xp_of(codes)
        arr = xp.asarray(codes)
        if arr.dtype.kind not in "ui":
            raise TypeError(f"Codes of {self.name} must be an integer array, not {arr.dtype}")
        # Arrays on a GPU are the engine's own (from vector sets checked on the host): their
        # range is not checked again, which would cost two reductions and a wait each time.
        if xp is np and arr.size and (arr.min() < 0 or arr.max() >= (1 << self.bits)):
            raise FormatError(f"Codes of {self.name} must lie in [0, {(1 << self.bits) - 1}]")
        return arr.astype(self.code_dtype, copy=False) & self.code_dtype.type(self.value_mask)

    def sign(self, codes: Any) -> npt.NDArray[np.uint8]:
        """Sign bit of each code (0 for unsigned formats)."""
        c = self.checked_codes(codes)
        if not self.signed:
            return _xp_of(c).zeros(c.shape, np.uint8)
        return ((c >> (self.value_bits - 1)) & 1).astype(np.uint8)

    def exp(self, codes: Any) -> npt.NDArray[np.int32]:
        """Biased exponent field of each code."""
        c = self.checked_codes(codes)
        return ((c >> self.man_bits) & ((1 << self.exp_bits) - 1)).astype(np.int32)

    def man(self, codes: Any) -> npt.NDArray[np.uint32]:
        """Mantissa field (without the hidden bit) of each code."""
        c = self.checked_codes(codes)
        return (c & ((1 << self.man_bits) - 1)).astype(np.uint32)

    def fields(self, codes: Any) -> Fields:
        """Exact ``(sign, e, sig)`` of each code, for the numerics engine.

        For finite codes the value is ``(-1)**sign * sig * 2**(e - man_bits)``. For int8,
        ``e`` is 0 and ``sig`` is the integer's magnitude (up to 128). Inf/NaN codes get the
        fields their bits spell; check :meth:`classify` first.
        """
        c = self.checked_codes(codes)
        if self.kind == "int":
            i = c.astype(np.uint8).view(np.int8).astype(np.int32)
            return Fields((i < 0).astype(np.uint8), _xp_of(c).zeros(c.shape, np.int32),
                          np.abs(i).astype(np.uint32))
        exp = self.exp(c)
        man = self.man(c)
        if self.subnormals:
            normal = exp > 0
            sig = man | (normal.astype(np.uint32) << self.man_bits)
            e = np.maximum(exp, 1) - self.bias
        else:
            sig = man | np.uint32(1 << self.man_bits)
            e = exp - self.bias
        return Fields(self.sign(c), e.astype(np.int32), sig.astype(np.uint32))

    def classify(self, codes: Any) -> npt.NDArray[np.uint8]:
        """The :class:`Class` of each code, as ``np.uint8``."""
        c = self.checked_codes(codes)
        if self.kind == "int":
            return np.where(c == 0, int(Class.ZERO), int(Class.NORMAL)).astype(np.uint8)
        exp = self.exp(c)
        man = self.man(c)
        mag = c & self.code_dtype.type(self.value_mask >> int(self.signed))
        out = _xp_of(c).full(c.shape, int(Class.NORMAL), np.uint8)
        if self.subnormals:
            out[(exp == 0) & (man != 0)] = int(Class.SUBNORMAL)
            out[mag == 0] = int(Class.ZERO)
        top = (1 << self.exp_bits) - 1
        if self.specials is Specials.IEEE:
            out[(exp == top) & (man == 0)] = int(Class.INF)
            out[(exp == top) & (man != 0)] = int(Class.NAN)
        elif self.specials is Specials.FN:
            out[mag == (self.value_mask >> int(self.signed))] = int(Class.NAN)
        return out

    # -- decode -----------------------------------------------------------------------------

    @cached_property
    def _table(self) -> npt.NDArray[np.float64]:
        """Value of every code (formats of 16 bits or fewer), computed from the fields."""
        codes = np.arange(1 << self.bits, dtype=np.uint32).astype(self.code_dtype)
        return self._decode_fields(codes)

    def _table_of(self, xp) -> Any:
        """:attr:`_table` as an array of module ``xp`` (copied once to the GPU for CuPy)."""
        if xp is np:
            return self._table
        tables = self.__dict__.setdefault("_tables", {})
        if xp.__name__ not in tables:
            tables[xp.__name__] = xp.asarray(self._table)
        return tables[xp.__name__]

    def _decode_fields(self, codes: npt.NDArray) -> npt.NDArray[np.float64]:
        if self.kind == "int":
            return codes.astype(np.uint8).view(np.int8).astype(np.float64) / 64.0
        s, e, sig = self.fields(codes)
        val = np.ldexp(sig.astype(np.float64), e - self.man_bits)
        val = np.where(s == 1, -val, val)
        cls = self.classify(codes)
        inf = cls == int(Class.INF)
        val[inf] = np.where(s[inf] == 1, -np.inf, np.inf)
        val[cls == int(Class.NAN)] = np.nan
        return val

    def decode(self, codes: Any) -> npt.NDArray[np.float64]:
        """Exact value of each code as float64 (every format here fits float64 exactly).

        NaN codes give NaN and Inf codes give signed Inf; ``-0`` codes give ``-0.0``.
        """
        c = self.checked_codes(codes)
        if self.bits <= 16:
            return self._table_of(_xp_of(c))[c]
        if _xp_of(c) is not np or self.exp_bits != 8:
            # From the fields, in float64: CuPy flushes float32 subnormals to zero, and a wide
            # accumulator (e10m11) is not FP32's layout.
            return self._decode_fields(c)
        # Signalling-NaN codes (quiet bit clear) make the float32 -> float64 cast raise
        # FE_INVALID; they decode to NaN like every NaN code, so the flag means nothing here.
        c = c.astype(np.uint32)
        if self.bits != 32:          # e8mN accumulators: FP32's layout, mantissa cut short
            pad = 23 - self.man_bits
            c = ((c >> (self.bits - 1)) << 31) | ((c & ((1 << (self.bits - 1)) - 1)) << pad)
        with np.errstate(invalid="ignore"):
            return c.astype(np.uint32).view(np.float32).astype(np.float64)   # fp32

    # -- encode -----------------------------------------------------------------------------

    def encode(self, values: Any, rounding: Rounding | str = "rne", saturate: bool = True, *,
               seed: int | None = None, random_bits: Any = None,
               sr_bits: int = DEFAULT_SR_BITS, kernel: bool | None = None) -> npt.NDArray:
        """Round float values to this format and return their codes.

        ``values`` are taken exactly as float64 (float32, float16 and bfloat16 inputs convert
        without rounding). Rounding is done once, on integers, by :func:`round_to`.

        Parameters
        ----------
        values
            Array-like of floats.
        rounding
            ``rne``, ``rna``, ``rz``, ``ru``, ``rd`` or ``stochastic``.
        saturate
            If true, finite values beyond the largest finite value and infinities become
            ``±max`` (PTX ``.satfinite``). If false, overflow follows IEEE 754 for the rounding
            mode (``rne``/``rna``/``stochastic`` give Inf, ``rz`` gives max, ``ru``/``rd`` give
            Inf on their side), and Inf becomes NaN in formats without Inf (E4M3).
        seed, random_bits, sr_bits
            Stochastic rounding only: ``random_bits`` (non-negative integers below
            ``2**sr_bits``, broadcast to ``values``) or, if it is None, bits drawn as
            ``np.random.default_rng(seed).integers(0, 2**sr_bits, size=shape, dtype=np.uint64)``
            in C order. See :func:`round_to` for how they are used.
        kernel
            Which code rounds, as :func:`round_to` takes it (the same bits either way).

        Returns
        -------
        Codes in :attr:`code_dtype`, shaped like ``values``.

        Raises
        ------
        FormatError
            NaN into a format without NaN; a negative value into an unsigned format; overflow
            with ``saturate=False`` in a format that has neither Inf nor NaN.
        """
        xp = _xp_of(values)
        x = xp.asarray(values)
        if x.dtype.kind in "OUSMmc":
            raise TypeError(f"Values must be a real numeric array, not {x.dtype}")
        x = xp.array(x, dtype=np.float64, order="C")   # a copy that keeps 0-d shapes
        sign, lsb_exp, sig, finite = _float64_fields(x)
        nan = np.isnan(x)
        inf = np.isinf(x)
        if nan.any() and not self.has_nan:
            raise FormatError(f"Format {self.name} has no NaN; remove NaN values before encoding")
        if not self.signed:
            if ((sign == 1) & (sig != 0) & finite | (sign == 1) & inf).any():
                raise FormatError(f"Format {self.name} is unsigned; values must be >= 0")
            sign = np.zeros_like(sign)
        if self.kind == "int":
            sign = np.where(sig == 0, 0, sign).astype(np.uint8)   # int8 has one zero
        # Infinities enter as overflowing finite values, so the overflow policy decides them.
        sig = np.where(finite, sig, np.uint64(1))
        lsb_exp = np.where(finite, lsb_exp, 4096)
        rb = None
        if Rounding.of(rounding) is Rounding.STOCHASTIC:
            rb = draw_random_bits(x.shape, seed, random_bits, sr_bits)
        if not saturate and not self.has_inf and not self.has_nan:
            raise FormatError(f"Format {self.name} has neither Inf nor NaN, so overflow must "
                              f"saturate; pass saturate=True")
        codes = round_to(self, sign, lsb_exp, sig, False, rounding,
                         Overflow.saturating(saturate), random_bits=rb, sr_bits=sr_bits,
                         kernel=kernel)
        if not saturate and inf.any():
            # IEEE 754: an infinite operand converts exactly, to Inf (NaN where there is no
            # Inf), in every rounding mode; it is not an overflow, which gives max under rz.
            special = self.code_of_inf if self.has_inf else self.code_of_nan
            codes[inf] = special | (sign[inf].astype(self.code_dtype) << self.sign_shift
                                    if self.signed else 0)
        if nan.any():
            codes[nan] = self.code_of_nan | (sign[nan].astype(self.code_dtype) << self.sign_shift
                                             if self.signed else 0)
        return codes

    # -- conveniences -----------------------------------------------------------------------

    def finite_codes(self) -> npt.NDArray:
        """Every code of a format of 16 bits or fewer that decodes to a finite value."""
        if self.bits > 16:
            raise ValueError(f"Format {self.name} has too many codes to list")
        codes = np.arange(1 << self.value_bits, dtype=np.uint32).astype(self.code_dtype)
        cls = self.classify(codes)
        return codes[(cls != Class.NAN) & (cls != Class.INF)]


def _float64_fields(x: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.uint8],
                                                          npt.NDArray[np.int64],
                                                          npt.NDArray[np.uint64],
                                                          npt.NDArray[np.bool_]]:
    """Exact ``(sign, lsb_exp, sig, finite)`` of float64 values: ``x = (-1)**sign * sig *
    2**lsb_exp`` where ``finite`` (Inf and NaN get their raw mantissa fields)."""
    bits = x.view(np.uint64)
    sign = (bits >> np.uint64(63)).astype(np.uint8)
    expf = ((bits >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64)
    man = bits & np.uint64((1 << 52) - 1)
    finite = expf != 0x7FF
    sig = np.where(expf > 0, man | np.uint64(1 << 52), man)
    lsb_exp = np.maximum(expf, 1) - 1075
    return sign, lsb_exp, sig, finite
