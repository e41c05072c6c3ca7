"""Element, scale and output formats, with bit-exact, vectorised decode and encode.

A format is data (:class:`Format`), looked up by name with :func:`get`. Codes are unsigned
integer arrays (``np.uint8`` for formats of 8 bits or fewer, ``np.uint16``, ``np.uint32``), one
code per array element; FP4 and FP6 are packed only at the interop edge (:func:`pack_fp4`,
:func:`pack_fp6`).

Decode, round and encode stay apart: :meth:`Format.decode` maps codes to exact float64 values,
:func:`round_to` is the only place that rounds (an integer significand, an exponent and a sticky
bit in; codes out), and :meth:`Format.encode` splits float64 values into those integers and calls
it. Nothing here rounds through a float.

Formats (OCP MX v1.0, OCP OFP8, IEEE 754):

======== ====== ==== ======================================================================
name     layout bias specials
======== ====== ==== ======================================================================
e4m3     1.4.3  7    no Inf; NaN is S.1111.111 (OCP E4M3, ``float8_e4m3fn``)
e5m2     1.5.2  15   IEEE: Inf is S.11111.00, NaN S.11111.{01,10,11}
e3m2     1.3.2  3    none (every code finite)
e2m3     1.2.3  1    none
e2m1     1.2.1  1    none
int8     8-bit  --   two's complement, value = i / 64 (MXINT8); 0x80 decodes to -2.0,
                     encode never produces it (it saturates to +-127/64)
e8m0     0.8.0  127  unsigned, no zero, no subnormals: value 2^(code - 127); NaN is 0xFF
ue4m3    0.4.3  7    unsigned E4M3 (NVFP4 scale) in an 8-bit container; NaN is 0x7F;
                     the top bit is ignored on decode, as NVIDIA hardware ignores it
fp16     1.5.10 15   IEEE binary16
bf16     1.8.7  127  bfloat16 (IEEE-style specials)
fp32     1.8.23 127  IEEE binary32
======== ====== ==== ======================================================================
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .errors import FormatError

__all__ = [
    "choice", "Rounding", "Overflow", "Specials", "Class", "Format", "Fields",
    "get", "names", "FORMATS",
    "round_to", "DEFAULT_SR_BITS", "bit_length",
    "pack_fp4", "unpack_fp4", "pack_fp6", "unpack_fp6",
    "to_ml_dtypes", "from_ml_dtypes", "to_torch", "from_torch",
]


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
    def of(cls, value: Overflow | bool | str) -> Overflow:
        if isinstance(value, cls):
            return value
        if isinstance(value, bool):
            return cls.SATURATE if value else cls.IEEE
        return choice(cls, value, "Overflow")


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


@dataclass(frozen=True, kw_only=True)
class Format:
    """An element, scale or output format: field widths, bias and special-value encoding.

    ``kind`` is ``"float"`` for sign/exponent/mantissa formats and ``"int"`` for MXINT8, whose
    value is the two's-complement code times ``2**-man_bits``. ``subnormals=False`` makes the
    zero exponent field an ordinary binade (E8M0, which has no zero). ``container_bits`` is the
    storage width when it exceeds the value bits (UE4M3 in a byte); the extra top bits are
    ignored on decode and never set on encode.
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

    # -- field access -----------------------------------------------------------------------

    def _codes(self, codes: Any) -> npt.NDArray:
        arr = np.asarray(codes)
        if arr.dtype.kind not in "ui":
            raise TypeError(f"Codes of {self.name} must be an integer array, not {arr.dtype}")
        if arr.size and (arr.min() < 0 or arr.max() >= (1 << self.bits)):
            raise FormatError(f"Codes of {self.name} must lie in [0, {(1 << self.bits) - 1}]")
        return arr.astype(self.code_dtype, copy=False) & self.code_dtype.type(self.value_mask)

    def sign(self, codes: Any) -> npt.NDArray[np.uint8]:
        """Sign bit of each code (0 for unsigned formats)."""
        c = self._codes(codes)
        if not self.signed:
            return np.zeros(c.shape, np.uint8)
        return ((c >> (self.value_bits - 1)) & 1).astype(np.uint8)

    def exp(self, codes: Any) -> npt.NDArray[np.int32]:
        """Biased exponent field of each code."""
        c = self._codes(codes)
        return ((c >> self.man_bits) & ((1 << self.exp_bits) - 1)).astype(np.int32)

    def man(self, codes: Any) -> npt.NDArray[np.uint32]:
        """Mantissa field (without the hidden bit) of each code."""
        c = self._codes(codes)
        return (c & ((1 << self.man_bits) - 1)).astype(np.uint32)

    def fields(self, codes: Any) -> Fields:
        """Exact ``(sign, e, sig)`` of each code, for the numerics engine.

        For finite codes the value is ``(-1)**sign * sig * 2**(e - man_bits)``. For int8,
        ``e`` is 0 and ``sig`` is the integer's magnitude (up to 128). Inf/NaN codes get the
        fields their bits spell; check :meth:`classify` first.
        """
        c = self._codes(codes)
        if self.kind == "int":
            i = c.astype(np.uint8).view(np.int8).astype(np.int32)
            return Fields((i < 0).astype(np.uint8), np.zeros(c.shape, np.int32),
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
        c = self._codes(codes)
        if self.kind == "int":
            return np.where(c == 0, Class.ZERO, Class.NORMAL).astype(np.uint8)
        exp = self.exp(c)
        man = self.man(c)
        mag = c & self.code_dtype.type(self.value_mask >> int(self.signed))
        out = np.full(c.shape, Class.NORMAL, np.uint8)
        if self.subnormals:
            out[(exp == 0) & (man != 0)] = Class.SUBNORMAL
            out[mag == 0] = Class.ZERO
        top = (1 << self.exp_bits) - 1
        if self.specials is Specials.IEEE:
            out[(exp == top) & (man == 0)] = Class.INF
            out[(exp == top) & (man != 0)] = Class.NAN
        elif self.specials is Specials.FN:
            out[mag == (self.value_mask >> int(self.signed))] = Class.NAN
        return out

    # -- decode -----------------------------------------------------------------------------

    @cached_property
    def _table(self) -> npt.NDArray[np.float64]:
        """Value of every code (formats of 16 bits or fewer), computed from the fields."""
        codes = np.arange(1 << self.bits, dtype=np.uint32).astype(self.code_dtype)
        return self._decode_fields(codes)

    def _decode_fields(self, codes: npt.NDArray) -> npt.NDArray[np.float64]:
        if self.kind == "int":
            return codes.astype(np.uint8).view(np.int8).astype(np.float64) / 64.0
        s, e, sig = self.fields(codes)
        val = np.ldexp(sig.astype(np.float64), e - self.man_bits)
        val = np.where(s == 1, -val, val)
        cls = self.classify(codes)
        val[cls == Class.INF] = np.where(s[cls == Class.INF] == 1, -np.inf, np.inf)
        val[cls == Class.NAN] = np.nan
        return val

    def decode(self, codes: Any) -> npt.NDArray[np.float64]:
        """Exact value of each code as float64 (every format here fits float64 exactly).

        NaN codes give NaN and Inf codes give signed Inf; ``-0`` codes give ``-0.0``.
        """
        c = self._codes(codes)
        if self.bits <= 16:
            return self._table[c]
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
               sr_bits: int = DEFAULT_SR_BITS) -> npt.NDArray:
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

        Returns
        -------
        Codes in :attr:`code_dtype`, shaped like ``values``.

        Raises
        ------
        FormatError
            NaN into a format without NaN; a negative value into an unsigned format; overflow
            with ``saturate=False`` in a format that has neither Inf nor NaN.
        """
        x = np.asarray(values)
        if x.dtype.kind in "OUSMmc":
            raise TypeError(f"Values must be a real numeric array, not {x.dtype}")
        x = np.array(x, dtype=np.float64, order="C")   # a copy that keeps 0-d shapes
        bits = x.view(np.uint64)
        sign = (bits >> np.uint64(63)).astype(np.uint8)
        expf = ((bits >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64)
        man = bits & np.uint64((1 << 52) - 1)
        finite = expf != 0x7FF
        sig = np.where(expf > 0, man | np.uint64(1 << 52), man)
        lsb_exp = np.maximum(expf, 1) - 1075
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
            rb = _random_bits(x.shape, seed, random_bits, sr_bits)
        codes = round_to(self, sign, lsb_exp, sig, False, rounding, saturate,
                         random_bits=rb, sr_bits=sr_bits)
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


def _random_bits(shape: tuple[int, ...], seed: int | None, random_bits: Any,
                 sr_bits: int) -> npt.NDArray[np.uint64]:
    if not 1 <= sr_bits <= 63:
        raise ValueError(f"sr_bits must be between 1 and 63, not {sr_bits!r}")
    if random_bits is None:
        rng = np.random.default_rng(seed)
        return rng.integers(0, 1 << sr_bits, size=shape, dtype=np.uint64)
    rb = np.asarray(random_bits)
    if rb.dtype.kind not in "ui" or (rb.size and (rb.min() < 0 or rb.max() >= (1 << sr_bits))):
        raise ValueError(f"random_bits must be integers in [0, 2**{sr_bits})")
    return np.broadcast_to(rb.astype(np.uint64), shape)


# -- the one rounding routine ---------------------------------------------------------------

#: Large arrays go through a compiled twin of the numpy path below when numba is installed
#: (mxsim/_round_kernel.py); tests switch this off to check that the two agree bit for bit.
USE_KERNEL = True
_KERNEL_MIN_SIZE = 4096


def _kernel_available() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


_U1 = np.uint64(1)


def bit_length(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """Exact bit length of each uint64 (0 for 0)."""
    _, exp = np.frexp(x.astype(np.float64))   # may be one too high when x rounds up to 2**n
    bl = exp.astype(np.int64)
    probe = np.clip(bl - 1, 0, 63).astype(np.uint64)
    too_high = (bl > 0) & ((bl > 64) | ((x >> probe) == 0))
    return np.where(too_high, bl - 1, bl)


def _shr(x: npt.NDArray[np.uint64], n: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    """x >> n for any n >= 0 (0 when n >= 64)."""
    return np.where(n >= 64, np.uint64(0), x >> np.clip(n, 0, 63).astype(np.uint64))


def _low_mask(n: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    """(1 << n) - 1 for 0 <= n, saturating to all ones when n >= 64."""
    m = np.minimum(n, 64)
    return np.where(m >= 64, ~np.uint64(0),
                    (_U1 << np.minimum(m, 63).astype(np.uint64)) - _U1)


def round_to(fmt: Format, sign: Any, lsb_exp: Any, sig: Any, sticky: Any = False,
             rounding: Rounding | str = "rne", saturate: bool | Overflow = True, *,
             random_bits: Any = None, sr_bits: int = DEFAULT_SR_BITS) -> npt.NDArray:
    """Round ``(-1)**sign * (sig + s) * 2**lsb_exp`` to ``fmt`` and return its codes.

    ``sig`` is a non-negative integer significand (uint64; any position, not normalised),
    ``lsb_exp`` the exponent of its least significant bit, and ``sticky`` says that the exact
    value has further non-zero bits below that LSB (``0 < s < 1``). All arguments broadcast.
    This is the only place in mxsim that rounds; every arithmetic path ends here.

    Rounding is exact, in integers: the significand is cut at the format's LSB for the value's
    binade (or at the subnormal LSB), with a guard bit and a sticky bit for the rest.
    Stochastic rounding takes the ``sr_bits`` discarded bits just below the cut (lower bits and
    ``sticky`` are ignored), adds the element's random integer ``r`` in ``[0, 2**sr_bits)``,
    and rounds the magnitude up iff the sum reaches ``2**sr_bits``.

    Overflow (a rounded magnitude above ``fmt.max``) gives ``±max`` when ``saturate`` is true or
    ``Overflow.SATURATE``; IEEE 754 rules for the mode when it is false or ``Overflow.IEEE``;
    ±Inf in every mode for ``Overflow.INF``. NaN stands in for Inf in formats without Inf. Formats
    without a zero (E8M0) give their smallest value for results that round to zero. An exact
    zero gets the sign it was given (unsigned and integer formats: +0).
    """
    mode = Rounding.of(rounding)
    overflow = Overflow.of(saturate)
    if overflow is not Overflow.SATURATE and not fmt.has_inf and not fmt.has_nan:
        raise FormatError(f"Format {fmt.name} has neither Inf nor NaN, so overflow must "
                          f"saturate; pass saturate=True")
    sign, lsb_exp, sig, sticky = np.broadcast_arrays(
        np.asarray(sign, np.uint8), np.asarray(lsb_exp, np.int64),
        np.asarray(sig, np.uint64), np.asarray(sticky, bool))
    if mode is Rounding.STOCHASTIC and random_bits is None:
        raise ValueError("Stochastic rounding needs random_bits")
    if USE_KERNEL and sig.size >= _KERNEL_MIN_SIZE and _kernel_available():
        from . import _round_kernel
        rb = None if random_bits is None else np.broadcast_to(
            np.asarray(random_bits, np.uint64), sig.shape).reshape(-1)
        codes = _round_kernel.round_codes(fmt, sign.reshape(-1), lsb_exp.reshape(-1),
                                          sig.reshape(-1), sticky.reshape(-1), rb, mode.value,
                                          overflow.value, sr_bits)
        return codes.reshape(sig.shape).astype(fmt.code_dtype)
    sign, sticky = sign.copy(), sticky.copy()
    # A bare sticky bit is a positive value below any representable one.
    tiny = (sig == 0) & sticky
    sig = np.where(tiny, _U1, sig)
    lsb_exp = np.where(tiny, -(1 << 20), lsb_exp)
    sticky &= ~tiny

    M = fmt.man_bits
    msb_exp = lsb_exp + bit_length(sig) - 1
    if fmt.kind == "int":
        target = np.full(sig.shape, -M, np.int64)
        huge = (msb_exp > 0) & (sig != 0)             # |value| >= 2 > max, before any shifting
        sig = np.where(huge, np.uint64(0), sig)
    else:
        target = np.maximum(msb_exp, fmt.emin) - M    # exponent of the kept LSB
    shift = target - lsb_exp                          # > 0: bits are discarded
    right = np.maximum(shift, 0)
    kept = np.where(shift > 0, _shr(sig, right), sig << np.minimum(-shift, 63).astype(np.uint64))
    kept = np.where(sig == 0, np.uint64(0), kept)
    discarded = sig & _low_mask(right)
    guard = np.where(right >= 1, _shr(discarded, right - 1) & _U1, 0).astype(bool)
    rest = (discarded & _low_mask(np.maximum(right - 1, 0))) != 0
    rest |= sticky
    inexact = guard | rest
    odd = (kept & _U1).astype(bool)
    if mode is Rounding.RNE:
        up = guard & (rest | odd)
    elif mode is Rounding.RNA:
        up = guard
    elif mode is Rounding.RZ:
        up = np.zeros_like(guard)
    elif mode is Rounding.RU:
        up = inexact & (sign == 0)
    elif mode is Rounding.RD:
        up = inexact & (sign == 1)
    else:
        r = np.broadcast_to(np.asarray(random_bits, np.uint64), sig.shape)
        # The sr_bits discarded bits just below the cut, as an integer.
        top = np.where(right >= sr_bits, _shr(discarded, right - sr_bits),
                       discarded << np.clip(sr_bits - right, 0, 63).astype(np.uint64))
        up = (top + r) >= (_U1 << np.uint64(sr_bits))
    kept = kept + up.astype(np.uint64)
    carry = kept >> np.uint64(M + 1) != 0
    if fmt.kind == "float":
        kept = np.where(carry, kept >> _U1, kept)
        target = target + carry
    # Overflow: beyond the largest finite significand at emax.
    if fmt.kind == "int":
        over = huge | (kept > fmt.max_sig)
    else:
        top_exp = target + M
        over = (top_exp > fmt.emax) | ((top_exp == fmt.emax) & (kept > fmt.max_sig))
        over &= kept != 0                             # a zero is never an overflow
    # Pack the in-range results.
    if fmt.kind == "int":
        mag = np.minimum(kept, np.uint64(fmt.max_sig)).astype(np.int64)
        ival = np.where(sign == 1, -mag, mag)
        codes = (ival & 0xFF).astype(np.uint64)     # a zero magnitude gives +0: one zero
    else:
        normal = kept >> np.uint64(M) != 0
        exp_field = np.where(normal, target + M + fmt.bias, 0)
        exp_field = np.clip(exp_field, 0, (1 << fmt.exp_bits) - 1).astype(np.uint64)
        codes = (exp_field << np.uint64(M)) | (kept & np.uint64((1 << M) - 1))
        if not fmt.has_zero:
            codes = np.where(kept == 0, np.uint64(0), codes)    # smallest value, 2**-bias
        if fmt.signed:
            codes |= sign.astype(np.uint64) << np.uint64(fmt.sign_shift)
    if over.any():
        neg = sign == 1
        if overflow is Overflow.SATURATE:
            to_inf = np.zeros_like(over)
        elif overflow is Overflow.INF:
            to_inf = np.ones_like(over)
        elif mode is Rounding.RZ:
            to_inf = np.zeros_like(over)
        elif mode is Rounding.RU:
            to_inf = ~neg
        elif mode is Rounding.RD:
            to_inf = neg
        else:
            to_inf = np.ones_like(over)
        signbit = (sign.astype(np.uint64) << np.uint64(fmt.sign_shift)) if fmt.signed else 0
        if fmt.kind == "int":
            maxc = np.where(neg, np.uint64(0x81), np.uint64(0x7F))
        else:
            maxc = np.uint64(fmt.code_of_max) | signbit
        if fmt.has_inf:
            infc = np.uint64(fmt.code_of_inf) | signbit
        elif fmt.has_nan:
            infc = np.uint64(fmt.code_of_nan) | signbit
        else:
            infc = maxc     # unreachable: saturate is forced above
        codes = np.where(over, np.where(to_inf, infc, maxc), codes)
    return codes.astype(fmt.code_dtype)


# -- the registry ---------------------------------------------------------------------------

FORMATS: dict[str, Format] = {f.name: f for f in [
    Format(name="e4m3", exp_bits=4, man_bits=3, bias=7, specials=Specials.FN,
           ml_dtypes_name="float8_e4m3fn", torch_name="float8_e4m3fn",
           description="FP8 E4M3 (OCP), no Inf, NaN S.1111.111"),
    Format(name="e5m2", exp_bits=5, man_bits=2, bias=15, specials=Specials.IEEE,
           ml_dtypes_name="float8_e5m2", torch_name="float8_e5m2",
           description="FP8 E5M2 (OCP), IEEE-style Inf/NaN"),
    Format(name="e3m2", exp_bits=3, man_bits=2, bias=3,
           ml_dtypes_name="float6_e3m2fn", description="FP6 E3M2 (OCP MX), all finite"),
    Format(name="e2m3", exp_bits=2, man_bits=3, bias=1,
           ml_dtypes_name="float6_e2m3fn", description="FP6 E2M3 (OCP MX), all finite"),
    Format(name="e2m1", exp_bits=2, man_bits=1, bias=1,
           ml_dtypes_name="float4_e2m1fn", torch_name="float4_e2m1fn_x2",
           description="FP4 E2M1 (OCP MX), all finite"),
    Format(name="int8", exp_bits=0, man_bits=6, bias=0, kind="int",
           description="MXINT8: two's complement, value = i/64"),
    Format(name="e8m0", exp_bits=8, man_bits=0, bias=127, signed=False, specials=Specials.FN,
           subnormals=False, ml_dtypes_name="float8_e8m0fnu", torch_name="float8_e8m0fnu",
           description="E8M0 scale (OCP MX): 2^(code-127), NaN 0xFF"),
    Format(name="ue4m3", exp_bits=4, man_bits=3, bias=7, signed=False, specials=Specials.FN,
           container_bits=8, description="UE4M3 scale (NVFP4): unsigned E4M3, NaN 0x7F"),
    Format(name="fp16", exp_bits=5, man_bits=10, bias=15, specials=Specials.IEEE,
           ml_dtypes_name="float16", torch_name="float16", description="IEEE binary16"),
    Format(name="bf16", exp_bits=8, man_bits=7, bias=127, specials=Specials.IEEE,
           ml_dtypes_name="bfloat16", torch_name="bfloat16", description="bfloat16"),
    Format(name="fp32", exp_bits=8, man_bits=23, bias=127, specials=Specials.IEEE,
           ml_dtypes_name="float32", torch_name="float32", description="IEEE binary32"),
]}

_ALIASES = {
    "fp8_e4m3": "e4m3", "float8_e4m3fn": "e4m3", "fp8_e5m2": "e5m2", "float8_e5m2": "e5m2",
    "fp6_e3m2": "e3m2", "float6_e3m2fn": "e3m2", "fp6_e2m3": "e2m3", "float6_e2m3fn": "e2m3",
    "fp4": "e2m1", "fp4_e2m1": "e2m1", "float4_e2m1fn": "e2m1", "mxint8": "int8",
    "float8_e8m0fnu": "e8m0", "float16": "fp16", "half": "fp16", "bfloat16": "bf16",
    "float32": "fp32", "float": "fp32",
}


def names() -> list[str]:
    """Names of every registered format, in table order."""
    return list(FORMATS)


_ACCUMULATORS: dict[str, Format] = {}


def _accumulator(man_bits: int) -> Format:
    """``e8m<man_bits>``: FP32's exponent range (bias 127, subnormals, IEEE Inf/NaN) with a
    shorter mantissa, as tensor-core accumulators keep it (Hopper FP8: E8M13)."""
    name = f"e8m{man_bits}"
    if name not in _ACCUMULATORS:
        _ACCUMULATORS[name] = Format(
            name=name, exp_bits=8, man_bits=man_bits, bias=127, specials=Specials.IEEE,
            description=f"accumulator: FP32 exponent range, {man_bits} mantissa bits")
    return _ACCUMULATORS[name]


def get(name: str | Format) -> Format:
    """Look a format up by name (``e4m3``, ``e8m0``, ``fp32`` ...) or common alias.

    Besides the registered formats, ``e8m1`` .. ``e8m22`` name accumulator formats with FP32's
    exponent range and a shorter mantissa (``e8m13`` is Hopper's FP8 accumulator).
    """
    if isinstance(name, Format):
        return name
    if not isinstance(name, str):
        raise TypeError(f"Format name must be a string, not {name!r}")
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key.startswith("e8m") and key[3:].isdigit() and 1 <= int(key[3:]) <= 22:
        return _accumulator(int(key[3:]))
    try:
        return FORMATS[key]
    except KeyError:
        raise FormatError(f"Unknown format {name!r}; choose one of "
                          f"{', '.join(FORMATS)} (see `mxsim formats`)") from None


# -- packing --------------------------------------------------------------------------------

def _check_last(codes: npt.NDArray, multiple: int, what: str) -> None:
    if codes.ndim == 0 or codes.shape[-1] % multiple:
        raise ValueError(f"Last axis of {what} must be a multiple of {multiple}, "
                         f"not {codes.shape[-1:] or '()'}")


def pack_fp4(codes: Any) -> npt.NDArray[np.uint8]:
    """Pack 4-bit codes two per byte along the last axis, the first in the low nibble.

    This is the layout of torch's ``float4_e2m1fn_x2`` and of Triton's packed FP4.
    """
    c = np.asarray(codes, np.uint8)
    _check_last(c, 2, "FP4 codes")
    if (c > 0xF).any():
        raise ValueError("FP4 codes must be below 16")
    return (c[..., 0::2] | (c[..., 1::2] << 4)).astype(np.uint8)


def unpack_fp4(packed: Any) -> npt.NDArray[np.uint8]:
    """Inverse of :func:`pack_fp4`."""
    p = np.asarray(packed, np.uint8)
    out = np.empty(p.shape[:-1] + (p.shape[-1] * 2,), np.uint8)
    out[..., 0::2] = p & 0xF
    out[..., 1::2] = p >> 4
    return out


def pack_fp6(codes: Any) -> npt.NDArray[np.uint8]:
    """Pack 6-bit codes four into three bytes along the last axis, most significant first.

    Elements ``x0..x3`` form the 24-bit big-endian word ``x0 x1 x2 x3``: bytes
    ``x0<<2 | x1>>4``, ``(x1&15)<<4 | x2>>2``, ``(x2&3)<<6 | x3`` (torchao's ``pack_uint6``).
    """
    c = np.asarray(codes, np.uint8)
    _check_last(c, 4, "FP6 codes")
    if (c > 0x3F).any():
        raise ValueError("FP6 codes must be below 64")
    x0, x1, x2, x3 = (c[..., i::4].astype(np.uint8) for i in range(4))
    out = np.empty(c.shape[:-1] + (c.shape[-1] // 4, 3), np.uint8)
    out[..., 0] = (x0 << 2) | (x1 >> 4)
    out[..., 1] = ((x1 & 0xF) << 4) | (x2 >> 2)
    out[..., 2] = ((x2 & 0x3) << 6) | x3
    return out.reshape(c.shape[:-1] + (c.shape[-1] // 4 * 3,))


def unpack_fp6(packed: Any) -> npt.NDArray[np.uint8]:
    """Inverse of :func:`pack_fp6`."""
    p = np.asarray(packed, np.uint8)
    _check_last(p, 3, "packed FP6 bytes")
    b = p.reshape(p.shape[:-1] + (p.shape[-1] // 3, 3))
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    out = np.empty(p.shape[:-1] + (p.shape[-1] // 3, 4), np.uint8)
    out[..., 0] = b0 >> 2
    out[..., 1] = ((b0 & 0x3) << 4) | (b1 >> 4)
    out[..., 2] = ((b1 & 0xF) << 2) | (b2 >> 6)
    out[..., 3] = b2 & 0x3F
    return out.reshape(p.shape[:-1] + (p.shape[-1] // 3 * 4,))


# -- interop with ml_dtypes and torch -------------------------------------------------------

def _ml_dtype(fmt: Format) -> np.dtype:
    if fmt.ml_dtypes_name is None:
        raise FormatError(f"Format {fmt.name} has no ml_dtypes counterpart")
    if fmt.ml_dtypes_name in ("float16", "float32"):
        return np.dtype(fmt.ml_dtypes_name)
    import ml_dtypes
    return np.dtype(getattr(ml_dtypes, fmt.ml_dtypes_name))


def to_ml_dtypes(codes: Any, fmt: str | Format) -> npt.NDArray:
    """View codes as the matching ml_dtypes (or numpy) array, without changing any bit."""
    f = get(fmt)
    dt = _ml_dtype(f)
    c = f._codes(codes)
    return c.astype(np.dtype(f"u{dt.itemsize}")).view(dt)


def from_ml_dtypes(array: Any) -> tuple[npt.NDArray, Format]:
    """Codes and format of an ml_dtypes/numpy float array, without changing any bit."""
    a = np.asarray(array)
    for f in FORMATS.values():
        if f.ml_dtypes_name is not None and _ml_dtype(f) == a.dtype:
            return a.view(np.dtype(f"u{a.dtype.itemsize}")).astype(f.code_dtype), f
    raise FormatError(f"No mxsim format matches dtype {a.dtype}")


def to_torch(codes: Any, fmt: str | Format):
    """A torch tensor holding the same bits (FP4 is packed two per byte into float4_e2m1fn_x2)."""
    import torch

    f = get(fmt)
    if f.torch_name is None:
        raise FormatError(f"Format {f.name} has no torch dtype")
    dtype = getattr(torch, f.torch_name)
    c = f._codes(codes)
    if f.name == "e2m1":
        c = pack_fp4(c)
    raw = {1: torch.uint8, 2: torch.uint16, 4: torch.uint32}[dtype.itemsize]
    return torch.from_numpy(np.ascontiguousarray(c.astype(np.dtype(f"u{dtype.itemsize}")))
                            ).view(raw).view(dtype)


def from_torch(tensor) -> tuple[npt.NDArray, Format]:
    """Codes and format of a torch tensor, without changing any bit (FP4 is unpacked)."""
    import torch

    for f in FORMATS.values():
        if f.torch_name is not None and getattr(torch, f.torch_name, None) == tensor.dtype:
            raw = {1: torch.uint8, 2: torch.uint16, 4: torch.uint32}[tensor.dtype.itemsize]
            c = tensor.detach().cpu().contiguous().view(raw).numpy()
            if f.name == "e2m1":
                c = unpack_fp4(c)
            return c.astype(f.code_dtype), f
    raise FormatError(f"No mxsim format matches torch dtype {tensor.dtype}")
