"""Bit-exact tests of :mod:`mxsim.formats` against an independent model and against peers.

The model in this file is built from the format definitions (``REFERENCE.md`` §1, IEEE 754) in
Python integers and :class:`fractions.Fraction`; it never calls mxsim's decode, fields or
``round_to``. Decode is checked on every code of every format of 16 bits or fewer, encode on
every rounding boundary of every format of 8 bits or fewer (sampled for fp16, bf16 and fp32)
under every rounding mode, and ml_dtypes, torch and torchao are compared bit for bit with the
differences from ml_dtypes listed in :data:`DIFFERENCES`.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest

from mxsim import formats
from mxsim.errors import FormatError
from mxsim.formats import Class

SEED = 20250611                   #: every random draw below derives from this
MODES = ("rne", "rna", "rz", "ru", "rd")
NAMES = formats.names()


@pytest.fixture(params=[False, True], ids=["numpy", "compiled"])
def kernel(request) -> bool:
    """Tests that round run twice: through round_to's numpy path (``kernel=False``) and
    through its compiled twin (``kernel=True``, even on small arrays), which must agree bit
    for bit."""
    if request.param:
        pytest.importorskip("numba")
    return request.param
SIXTEEN = [n for n in NAMES if formats.get(n).bits <= 16]
ML_DTYPES = ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "e8m0", "fp16", "bf16"]
TORCH = ["e4m3", "e5m2", "e2m1", "e8m0", "fp16", "bf16", "fp32"]


@dataclass(frozen=True)
class _MlDtypesCasts:
    """How the installed ml_dtypes casts where its releases differ, found by probing it.

    ``float64_via_float32``: its own types convert float64 through float32, rounding twice
    (0.6 and before); 0.7 rounds float64 once, as mxsim does. ``e8m0_subnormal_up``: float32
    subnormals in (2**-127, 1.5 * 2**-127) go to 2**-126 (0.6 and before); 0.7 rounds them to
    nearest, 2**-127, as mxsim does.
    """
    version: str
    float64_via_float32: bool
    e8m0_subnormal_up: bool


@functools.cache
def _ml_dtypes_casts() -> _MlDtypesCasts:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    # 1.0625 + 2**-40 is nearer 1.125 (0x39); float32 rounds it onto the tie 1.0625 first,
    # which ties-to-even then takes to 1.0 (0x38).
    twice = np.array([1.0625 + 2.0**-40]).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)[0]
    sub = np.array([1.2 * 2.0**-127], np.float32).astype(ml_dtypes.float8_e8m0fnu)
    return _MlDtypesCasts(ml_dtypes.__version__, bool(twice == 0x38),
                          bool(sub.view(np.uint8)[0] == 0x01))


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def test_formats_ml_dtypes_casts_match_its_release_notes() -> None:
    """The probe above agrees with what each ml_dtypes release is known to do, so a probe that
    stopped probing (or a release that changed again) shows here, not as odd diffs below."""
    casts = _ml_dtypes_casts()
    old = _version(casts.version) < (0, 7)
    assert (casts.float64_via_float32, casts.e8m0_subnormal_up) == (old, old), casts


def _rng(*salt: int | str) -> np.random.Generator:
    """A generator seeded from SEED and the test's own salt, printed so a failure reruns alone."""
    key = [SEED] + [s if isinstance(s, int) else int.from_bytes(s.encode(), "little")
                    for s in salt]
    print(f"seed = {key}")
    return np.random.default_rng(key)


# -- an independent model of every format (REFERENCE.md §1, IEEE 754) --------------------------

@dataclass(frozen=True)
class _Spec:
    """Fields of a sign/exponent/mantissa format, as the format's definition gives them."""
    signed: bool
    exp_bits: int
    man_bits: int
    bias: int
    specials: str        # "ieee": top exponent is Inf/NaN; "fn": only all-ones is NaN; "none"


_SPECS = {
    "e4m3":  _Spec(True, 4, 3, 7, "fn"),
    "e5m2":  _Spec(True, 5, 2, 15, "ieee"),
    "e3m2":  _Spec(True, 3, 2, 3, "none"),
    "e2m3":  _Spec(True, 2, 3, 1, "none"),
    "e2m1":  _Spec(True, 2, 1, 1, "none"),
    "ue4m3": _Spec(False, 4, 3, 7, "fn"),      # in a byte; bit 7 is ignored
    "fp16":  _Spec(True, 5, 10, 15, "ieee"),
    "bf16":  _Spec(True, 8, 7, 127, "ieee"),
    "tf32":  _Spec(True, 8, 10, 127, "ieee"),   # the top 19 bits of an FP32 pattern
    "fp32":  _Spec(True, 8, 23, 127, "ieee"),
}

# REFERENCE.md §1: emax, max, min normal, min subnormal; then code_of_max, code_of_nan,
# code_of_inf (None: the format has none), and the next value of the grid past max,
# max + 2**(emax - man_bits), where rounding decides overflow.
_CONSTANTS = {
    "e4m3":  (8, 448, 2**-6, 2**-9, 0x7E, 0x7F, None, 480),
    "e5m2":  (15, 57344, 2**-14, 2**-16, 0x7B, 0x7E, 0x7C, 65536),
    "e3m2":  (4, 28, 0.25, 0.0625, 0x1F, None, None, 32),
    "e2m3":  (2, 7.5, 1, 0.125, 0x1F, None, None, 8),
    "e2m1":  (2, 6, 1, 0.5, 0x7, None, None, 8),
    "int8":  (0, 127 / 64, None, 1 / 64, 0x7F, None, None, 2),
    "e8m0":  (127, 2.0**127, 2.0**-127, 2.0**-127, 0xFE, 0xFF, None, 2**128),
    "ue4m3": (8, 448, 2**-6, 2**-9, 0x7E, 0x7F, None, 480),
    "fp16":  (15, 65504, 2**-14, 2**-24, 0x7BFF, 0x7E00, 0x7C00, 65536),
    "bf16":  (127, (2 - 2**-7) * 2.0**127, 2.0**-126, 2.0**-133, 0x7F7F, 0x7FC0, 0x7F80,
              2**128),
    "tf32":  (127, (2 - 2**-10) * 2.0**127, 2.0**-126, 2.0**-136, 0x3FBFF, 0x3FE00, 0x3FC00,
              2**128),
    "fp32":  (127, float(np.finfo(np.float32).max), 2.0**-126, 2.0**-149, 0x7F7FFFFF,
              0x7FC00000, 0x7F800000, 2**128),
}

_BITS = {"e4m3": 8, "e5m2": 8, "e3m2": 6, "e2m3": 6, "e2m1": 4, "int8": 8, "e8m0": 8,
         "ue4m3": 8, "fp16": 16, "bf16": 16, "tf32": 19,
         "fp32": 32}


def _pow2(k: int) -> Fraction:
    return Fraction(1 << k) if k >= 0 else Fraction(1, 1 << -k)


def _ref_value(name: str, code: int) -> tuple[str, int, Fraction]:
    """``(kind, sign, magnitude)`` of one code; kind is ``num``, ``inf`` or ``nan``."""
    if name == "int8":                         # two's complement, value = i / 64
        i = code - 256 if code >= 128 else code
        return "num", int(i < 0), Fraction(abs(i), 64)
    if name == "e8m0":                         # 2**(code - 127), NaN 0xFF, no zero
        return ("nan", 0, Fraction(0)) if code == 0xFF else ("num", 0, _pow2(code - 127))
    s = _SPECS[name]
    if name == "ue4m3":
        code &= 0x7F
    m_bits = s.man_bits
    sign = (code >> (s.exp_bits + m_bits)) & 1 if s.signed else 0
    exp = (code >> m_bits) & ((1 << s.exp_bits) - 1)
    man = code & ((1 << m_bits) - 1)
    top = (1 << s.exp_bits) - 1
    if s.specials == "ieee" and exp == top:
        return ("nan", sign, Fraction(0)) if man else ("inf", sign, Fraction(0))
    if s.specials == "fn" and exp == top and man == (1 << m_bits) - 1:
        return "nan", sign, Fraction(0)
    if exp == 0:                               # subnormal: 0.man * 2**(1 - bias)
        return "num", sign, Fraction(man) * _pow2(1 - s.bias - m_bits)
    return "num", sign, Fraction((1 << m_bits) | man) * _pow2(exp - s.bias - m_bits)


def _as_float(v: tuple[str, int, Fraction]) -> float:
    kind, sign, mag = v
    if kind == "nan":
        return math.nan
    x = math.inf if kind == "inf" else float(mag)      # exact: every value fits float64
    return -x if sign else x


@functools.cache
def _ref_table(name: str) -> np.ndarray:
    """Value of every code of a format of 16 bits or fewer, as float64."""
    return np.array([_as_float(_ref_value(name, c)) for c in range(1 << _BITS[name])])


def _ref_decode(name: str, codes: np.ndarray) -> np.ndarray:
    if _BITS[name] <= 16:
        return _ref_table(name)[codes.astype(np.int64)]
    return np.array([_as_float(_ref_value(name, int(c))) for c in codes.ravel()]
                    ).reshape(codes.shape)


def _floor_log2(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while _pow2(e) > a:
        e -= 1
    while _pow2(e + 1) <= a:
        e += 1
    return e


class _Enc:
    """The encodable values of a format and how to pick between two of them.

    ``bracket(a)`` returns ``(lo, hi)`` with ``lo <= a < hi`` among the encodable magnitudes
    extended by ``beyond`` (the next grid value past max): ``lo`` is None below the smallest
    value (E8M0) and ``hi`` is None at or past ``beyond``. ``odd(m)`` is the parity of the
    integer significand of ``m`` (ties-to-even keeps even ones): its mantissa LSB, or the
    integer itself for int8; E8M0's significand is always 1, so it is always odd.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        emax, mx, *_, nan, inf, beyond = _CONSTANTS[name]
        self.max = Fraction(mx)
        self.beyond = Fraction(beyond)
        self.signed = name in ("int8",) or (name in _SPECS and _SPECS[name].signed)
        self.sign_bit = 0 if not self.signed or name == "int8" else 1 << (_BITS[name] - 1)
        self.nan_code, self.inf_code = nan, inf

    def special(self, neg: bool) -> int:
        """What overflow gives without saturation: Inf, or NaN where there is no Inf."""
        code = self.inf_code if self.inf_code is not None else self.nan_code
        assert code is not None
        return code | (self.sign_bit if neg else 0)


class _ListEnc(_Enc):
    """Encodable values listed from the exhaustive code table (formats of 16 bits or fewer)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.pos: dict[Fraction, int] = {}
        self.neg: dict[Fraction, int] = {}
        n_codes = 0x80 if name == "ue4m3" else 1 << _BITS[name]     # never the ignored bit
        for c in range(n_codes):
            kind, sign, mag = _ref_value(name, c)
            if kind != "num" or (name == "int8" and c == 0x80):  # -2.0 is never encoded
                continue
            (self.neg if sign else self.pos)[mag] = c
        self.mags = sorted(self.pos)
        assert self.mags[-1] == self.max

    def bracket(self, a: Fraction) -> tuple[Fraction | None, Fraction | None]:
        if a >= self.beyond:
            return self.beyond, None
        if a >= self.max:
            return self.max, self.beyond
        i = bisect.bisect_right(self.mags, a)
        return (self.mags[i - 1] if i else None), self.mags[i]

    def code_of(self, neg: bool, mag: Fraction) -> int:
        return self.neg.get(mag, self.pos[mag]) if neg else self.pos[mag]

    def odd(self, mag: Fraction) -> bool:
        if mag == 0:
            return False
        return True if self.name == "e8m0" else bool(self.pos[mag] & 1)


class _ArithEnc(_Enc):
    """Encodable values of an IEEE-style float computed from its fields (fp32's 2**32 codes)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        s = _SPECS[name]
        self.m_bits, self.bias = s.man_bits, s.bias
        self.emin = 1 - s.bias

    def _ulp(self, a: Fraction) -> Fraction:
        e = self.emin if a == 0 else max(_floor_log2(a), self.emin)
        return _pow2(e - self.m_bits)

    def bracket(self, a: Fraction) -> tuple[Fraction | None, Fraction | None]:
        if a >= self.beyond:
            return self.beyond, None
        ulp = self._ulp(a)
        lo = math.floor(a / ulp) * ulp
        return lo, lo + ulp

    def code_of(self, neg: bool, mag: Fraction) -> int:
        sig = mag / self._ulp(mag)
        assert sig.denominator == 1
        e = _floor_log2(mag) if mag else self.emin - 1
        exp = e + self.bias if e >= self.emin else 0
        code = (exp << self.m_bits) | (int(sig) & ((1 << self.m_bits) - 1))
        return code | (self.sign_bit if neg else 0)

    def odd(self, mag: Fraction) -> bool:
        return bool(int(mag / self._ulp(mag)) & 1)


@functools.cache
def _enc(name: str) -> _Enc:
    return _ArithEnc(name) if _BITS[name] > 16 else _ListEnc(name)


def _ref_round(enc: _Enc, neg: bool, a: Fraction, mode: str, saturate: bool,
               rand: int = 0, sr_bits: int = 0) -> int:
    """Code of ``(-1)**neg * a`` (finite) rounded per ``mode``; overflow per Format.encode."""
    lo, hi = enc.bracket(a)
    if lo is None:                     # E8M0 has no zero: underflow gives its smallest value
        return enc.code_of(False, hi)
    if hi is None or a == lo:
        pick = lo
    else:
        if mode == "rne":
            up = 2 * a > lo + hi or (2 * a == lo + hi and enc.odd(lo))
        elif mode == "rna":
            up = 2 * a >= lo + hi
        elif mode == "rz":
            up = False
        elif mode == "ru":
            up = not neg
        elif mode == "rd":
            up = neg
        else:                          # stochastic: the first sr_bits bits of the fraction
            frac = (a - lo) / (hi - lo)
            up = math.floor(frac * (1 << sr_bits)) + rand >= 1 << sr_bits
        pick = hi if up else lo
    if pick > enc.max:                 # IEEE 754 overflow, or saturation
        keeps_max = saturate or mode == "rz" or (mode == "ru" and neg) or (mode == "rd" and not neg)
        return enc.code_of(neg, enc.max) if keeps_max else enc.special(neg)
    return enc.code_of(neg, pick)


def _ref_encode(name: str, x: float, mode: str, saturate: bool, rand: int = 0,
                sr_bits: int = 0) -> int:
    """The code Format.encode must give for the float ``x``; raises FormatError where it must."""
    enc = _enc(name)
    if math.isnan(x):
        if enc.nan_code is None:
            raise FormatError("no NaN")
        return enc.nan_code | (enc.sign_bit if math.copysign(1.0, x) < 0 else 0)
    neg = math.copysign(1.0, x) < 0
    if neg and not enc.signed:
        if x != 0:
            raise FormatError("unsigned")
        neg = False
    if not saturate and enc.nan_code is None and enc.inf_code is None:
        raise FormatError("must saturate")
    if name == "int8" and x == 0:
        neg = False                    # one zero
    if math.isinf(x):                  # Inf is exact: it is not an overflow
        return enc.code_of(neg, enc.max) if saturate else enc.special(neg)
    return _ref_round(enc, neg, Fraction(abs(x)), mode, saturate, rand, sr_bits)


def _assert_codes(actual: np.ndarray, expected: np.ndarray, inputs: np.ndarray,
                  context: str) -> None:
    """assert_array_equal on codes, listing the first mismatches in hex so they rerun alone."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    bad = np.flatnonzero(actual.ravel() != expected.ravel())
    lines = [f"{context}: {bad.size} mismatches"]
    for i in bad[:8]:
        x = inputs.ravel()[i]
        xs = float(x).hex() if np.asarray(x).dtype.kind == "f" else repr(x)
        lines.append(f"  [{i}] x={xs} actual={int(actual.ravel()[i]):#x} "
                     f"expected={int(expected.ravel()[i]):#x}")
    np.testing.assert_array_equal(actual, expected, err_msg="\n".join(lines))


def _bits64(x: np.ndarray) -> np.ndarray:
    """float64 bit patterns, with every NaN made the same (NaN-ness is what is compared)."""
    x = np.asarray(x, np.float64).copy()
    x[np.isnan(x)] = np.nan
    return x.view(np.uint64)


# -- sanity of the model itself -------------------------------------------------------------

@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_formats_reference_self_check(name: str) -> None:
    """The fp32 model (fields arithmetic) agrees with the listed model where both exist."""
    listed, arith = _ListEnc(name), _ArithEnc(name)
    rng = _rng("self", name)
    mags = listed.mags
    for i in rng.integers(0, len(mags) - 1, 300):
        lo, hi = mags[i], mags[i + 1]
        for a in (lo, (lo + hi) / 2, lo + (hi - lo) / 3):
            assert listed.bracket(a) == arith.bracket(a)
        assert listed.code_of(False, lo) == arith.code_of(False, lo)
        assert listed.code_of(True, lo) == arith.code_of(True, lo)
        assert listed.odd(lo) == arith.odd(lo)


# -- a. decode: every code against the definition ---------------------------------------------

@pytest.mark.parametrize("name", SIXTEEN)
def test_formats_decode_exhaustive(name: str) -> None:
    fmt = formats.get(name)
    codes = np.arange(1 << fmt.bits, dtype=np.uint32).astype(fmt.code_dtype)
    np.testing.assert_array_equal(_bits64(fmt.decode(codes)), _bits64(_ref_table(name)))
    # -0 is a code of its own in every signed float format.
    if name in _SPECS and _SPECS[name].signed:
        neg_zero = fmt.decode(np.array([1 << (fmt.bits - 1)]))
        assert neg_zero.view(np.uint64)[0] == np.float64(-0.0).view(np.uint64)


def test_formats_decode_fp32_sampled() -> None:
    fmt = formats.get("fp32")
    rng = _rng("fp32-decode")
    edges = [0, 1, 0x007FFFFF, 0x00800000, 0x3F800000, 0x7F7FFFFF, 0x7F800000, 0x7F800001,
             0x7FC00000, 0x7FFFFFFF]
    codes = np.concatenate([rng.integers(0, 1 << 32, 20000, dtype=np.uint64),
                            np.array(edges, np.uint64)]).astype(np.uint32)
    codes = np.concatenate([codes, codes ^ np.uint32(0x80000000)])
    np.testing.assert_array_equal(_bits64(fmt.decode(codes)), _bits64(_ref_decode("fp32", codes)))


def test_formats_decode_special_codes() -> None:
    """The decisions REFERENCE.md leaves open, pinned: UE4M3 ignores bit 7, int8 0x80 is -2."""
    ue = formats.get("ue4m3")
    low = np.arange(0x80, dtype=np.uint8)
    np.testing.assert_array_equal(_bits64(ue.decode(low | 0x80)), _bits64(ue.decode(low)))
    np.testing.assert_array_equal(ue.classify(low | 0x80), ue.classify(low))
    assert np.isnan(ue.decode(np.array([0x7F, 0xFF]))).all()
    assert ue.decode(np.array([0x7E, 0xFE])).tolist() == [448.0, 448.0]
    i8 = formats.get("int8")
    assert i8.decode(np.array([0x80, 0x81, 0x7F, 0x01, 0xFF])).tolist() == [
        -2.0, -127 / 64, 127 / 64, 1 / 64, -1 / 64]
    e8 = formats.get("e8m0")
    assert e8.decode(np.array([0x00, 0x7F, 0xFE])).tolist() == [2.0**-127, 1.0, 2.0**127]
    assert np.isnan(e8.decode(np.array([0xFF]))).all()
    assert not (e8.decode(np.arange(0xFF, dtype=np.uint8)) == 0).any()      # no zero


@pytest.mark.parametrize("name", NAMES)
def test_formats_constants(name: str) -> None:
    fmt = formats.get(name)
    emax, mx, min_normal, min_sub, c_max, c_nan, c_inf, _ = _CONSTANTS[name]
    assert fmt.bits == _BITS[name]
    assert fmt.emax == emax
    assert fmt.max == mx
    assert fmt.min_subnormal == min_sub
    assert fmt.code_of_max == c_max
    assert _as_float(_ref_value(name, c_max)) == mx
    if min_normal is None:
        with pytest.raises(ValueError, match=r"^Format int8 has no normal/subnormal "
                                             r"distinction$"):
            _ = fmt.min_normal
    else:
        assert fmt.min_normal == min_normal
    if c_nan is None:
        with pytest.raises(ValueError, match=rf"^Format {name} has no NaN$"):
            _ = fmt.code_of_nan
    else:
        assert fmt.code_of_nan == c_nan
        assert _ref_value(name, c_nan)[0] == "nan"
    if c_inf is None:
        with pytest.raises(ValueError, match=rf"^Format {name} has no Inf$"):
            _ = fmt.code_of_inf
    else:
        assert fmt.code_of_inf == c_inf
        assert _ref_value(name, c_inf)[:2] == ("inf", 0)


# -- g. fields and classify -------------------------------------------------------------------

def _classify_ref(name: str, code: int) -> Class:
    kind, _, mag = _ref_value(name, code)
    if kind == "nan":
        return Class.NAN
    if kind == "inf":
        return Class.INF
    if mag == 0:
        return Class.ZERO
    min_normal = _CONSTANTS[name][2]
    if min_normal is not None and mag < Fraction(min_normal):
        return Class.SUBNORMAL
    return Class.NORMAL


@pytest.mark.parametrize("name", SIXTEEN)
def test_formats_fields_and_classify(name: str) -> None:
    fmt = formats.get(name)
    codes = np.arange(1 << fmt.bits, dtype=np.uint32).astype(fmt.code_dtype)
    sign, e, sig = fmt.fields(codes)
    assert (sign.dtype, e.dtype, sig.dtype) == (np.uint8, np.int32, np.uint32)
    cls = fmt.classify(codes)
    assert cls.dtype == np.uint8
    expected_cls = [_classify_ref(name, c) for c in range(1 << fmt.bits)]
    np.testing.assert_array_equal(cls, np.array(expected_cls, np.uint8))
    for c in range(1 << fmt.bits):
        kind, s, mag = _ref_value(name, c)
        if kind != "num":
            continue
        value = Fraction(int(sig[c])) * _pow2(int(e[c]) - fmt.man_bits)
        assert (int(sign[c]), value) == (s, mag), f"code {c:#x}"


# -- b. ml_dtypes, bit for bit -----------------------------------------------------------------

@pytest.mark.parametrize("name", ML_DTYPES)
def test_formats_decode_matches_ml_dtypes(name: str) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    fmt = formats.get(name)
    dt = np.dtype(getattr(ml_dtypes, fmt.ml_dtypes_name, None) or fmt.ml_dtypes_name)
    codes = np.arange(1 << fmt.bits, dtype=np.uint32).astype(f"u{dt.itemsize}")
    with np.errstate(invalid="ignore"):        # NaN codes cast to float64 NaN, which is the point
        peer = codes.view(dt).astype(np.float64)
    np.testing.assert_array_equal(_bits64(fmt.decode(codes)), _bits64(peer))


@dataclass(frozen=True)
class Difference:
    """One documented way ml_dtypes' ``astype`` differs from :meth:`Format.encode`.

    ``where`` selects the float32 inputs concerned; ``ml`` and ``ours`` give the codes each
    side produces there (``ours=None``: mxsim raises FormatError instead).
    """
    why: str
    where: Callable[[np.ndarray], np.ndarray]
    ml: Callable[[np.ndarray], np.ndarray]
    ours: Callable[[np.ndarray], np.ndarray] | None


def _const(code: int) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: np.full(x.shape, code, np.uint32)


def _signed_code(pos: int, sign_bit: int, flip: bool = False) -> Callable:
    return lambda x: np.where(np.signbit(x) ^ flip, pos | sign_bit, pos).astype(np.uint32)


def _overflows_rne(name: str) -> Callable[[np.ndarray], np.ndarray]:
    """|x| that RNE takes past max: above the midpoint to the next grid value, or on it when
    max has an odd significand (so the tie goes up); Inf too."""
    def where(x: np.ndarray) -> np.ndarray:
        _, mx, *_, beyond = _CONSTANTS[name]
        mid = float((Fraction(mx) + beyond) / 2)
        a = np.abs(x.astype(np.float64))
        return ~np.isnan(x) & ((a > mid) | (_enc(name).odd(Fraction(mx)) & (a == mid)))
    return where


_FP4_FP6_NAN = "NaN: FP4/FP6 have no NaN. ml_dtypes gives a zero of the opposite sign " \
               "(NaN -> -0, -NaN -> +0); mxsim raises FormatError"

#: Every difference between ``x.astype(ml_dtype)`` on float32 and ``Format.encode(x, "rne",
#: saturate)``, keyed by (format, saturate). ``saturate`` is False where the format has Inf
#: or NaN (ml_dtypes never saturates those) and True for FP4/FP6 (mxsim cannot do otherwise).
DIFFERENCES: dict[tuple[str, bool], list[Difference]] = {
    ("e4m3", False): [],
    ("e5m2", False): [],
    ("fp16", False): [],
    ("bf16", False): [],
    ("e3m2", True): [Difference(_FP4_FP6_NAN, np.isnan, _signed_code(0, 0x20, True), None)],
    ("e2m3", True): [Difference(_FP4_FP6_NAN, np.isnan, _signed_code(0, 0x20, True), None)],
    ("e2m1", True): [Difference(_FP4_FP6_NAN, np.isnan, _signed_code(0, 0x8, True), None)],
    ("e8m0", False): [
        Difference("zero: ml_dtypes gives NaN (0xFF); E8M0 has no zero and mxsim clamps "
                   "underflow to 2**-127 (0x00)", lambda x: x == 0, _const(0xFF), _const(0x00)),
        Difference("negative (and -Inf): ml_dtypes gives NaN (0xFF); mxsim raises FormatError",
                   lambda x: x < 0, _const(0xFF), None),
    ],
}

#: ml_dtypes 0.6 and before only (see :class:`_MlDtypesCasts`).
_E8M0_SUBNORMAL_UP = Difference(
    "float32 subnormals in (2**-127, 1.5 * 2**-127): ml_dtypes < 0.7 gives 2**-126 (0x01); "
    "mxsim rounds to nearest, 2**-127 (0x00)",
    lambda x: (x > 2.0**-127) & (x < 1.5 * 2.0**-127), _const(0x01), _const(0x00))


def _differences(name: str, saturate: bool) -> list[Difference]:
    """The documented differences from the installed ml_dtypes release."""
    diffs = DIFFERENCES[(name, saturate)]
    if name == "e8m0" and _ml_dtypes_casts().e8m0_subnormal_up:
        diffs = [*diffs, _E8M0_SUBNORMAL_UP]
    return diffs


def _saturating(name: str, diffs: list[Difference]) -> list[Difference]:
    """With saturate=True, a format with Inf or NaN differs in one more way."""
    _, _, _, _, c_max, c_nan, c_inf, _ = _CONSTANTS[name]
    sign = 1 << (_BITS[name] - 1) if formats.get(name).signed else 0
    return diffs + [Difference(
        "saturate=True: RNE overflow and +-Inf give +-max in mxsim; ml_dtypes never "
        "saturates and gives Inf (NaN where there is no Inf)",
        _overflows_rne(name), _signed_code(c_inf or c_nan, sign), _signed_code(c_max, sign))]


DIFFERENCES.update({(n, True): _saturating(n, d) for (n, s), d in list(DIFFERENCES.items())
                    if not s})


def _float32_probe(name: str) -> np.ndarray:
    """float32 inputs: random normals at many scales, every value of the format with its
    midpoints and their float32 neighbours, subnormals, Inf, NaN and huge values."""
    fmt = formats.get(name)
    rng = _rng("ml-probe", name)
    f32 = np.finfo(np.float32)
    scales = [2.0**k for k in range(max(-149, int(math.log2(fmt.min_subnormal)) - 3),
                                    min(120, fmt.emax + 4), 2)]
    parts = [(rng.standard_normal((len(scales), 512)) * np.array(scales)[:, None]).ravel()]
    mags = [float(m) for m in _ListEnc(name).mags]
    mids = [(a + b) / 2 for a, b in zip(mags, mags[1:] + [_CONSTANTS[name][7]], strict=True)]
    pts = np.array(mags + mids + [2 * fmt.max, 1e30, 3e38], np.float64)
    pts = pts[pts <= f32.max].astype(np.float32)
    parts += [pts, np.nextafter(pts, np.float32(np.inf)), np.nextafter(pts, np.float32(0))]
    sub = np.concatenate([rng.integers(1, 1 << 23, 4096, dtype=np.uint32),
                          np.array([1, 0x200000, 0x3FFFFF, 0x400000, 0x400001, 0x5FFFFF,
                                    0x600000, 0x600001, 0x7FFFFF], np.uint32)])
    parts.append(sub.view(np.float32))
    parts.append(np.array([0.0, np.inf, np.nan, f32.max, f32.tiny, f32.smallest_subnormal],
                          np.float32))
    x = np.concatenate([p.astype(np.float32) for p in parts])
    x = np.concatenate([x, -x])
    assert np.signbit(x[np.isnan(x)]).any() and not np.signbit(x[np.isnan(x)]).all()
    return x


@pytest.mark.parametrize("name,saturate", [pytest.param(n, s, id=f"{n}-sat{int(s)}")
                                           for n, s in DIFFERENCES])
def test_formats_encode_matches_ml_dtypes(name: str, saturate: bool, kernel: bool) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    fmt = formats.get(name)
    dt = np.dtype(getattr(ml_dtypes, fmt.ml_dtypes_name, None) or fmt.ml_dtypes_name)
    x = _float32_probe(name)
    with np.errstate(over="ignore", invalid="ignore"):   # ml_dtypes' overflow is under test
        peer = x.astype(dt).view(f"u{dt.itemsize}").astype(np.uint32)
    covered = np.zeros(x.shape, bool)
    refused = np.zeros(x.shape, bool)
    for d in _differences(name, saturate):
        where = d.where(x)
        assert where.any(), f"the probe never reaches the documented difference: {d.why}"
        _assert_codes(peer[where], d.ml(x[where]), x[where], f"ml_dtypes, {d.why}")
        covered |= where
        if d.ours is None:
            refused |= where
            for xi in x[where][:3]:
                with pytest.raises(FormatError):
                    fmt.encode(np.array([xi]), "rne", saturate, kernel=kernel)
    ours = np.zeros(x.shape, np.uint32)
    ours[~refused] = fmt.encode(x[~refused], "rne", saturate, kernel=kernel)
    for d in _differences(name, saturate):
        if d.ours is not None:
            where = d.where(x) & ~refused
            _assert_codes(ours[where], d.ours(x[where]), x[where], f"mxsim, {d.why}")
            assert (ours[where] != peer[where]).all(), d.why
    _assert_codes(ours[~covered], peer[~covered], x[~covered], f"{name} vs ml_dtypes")


# -- c. encode on every rounding boundary, against the Fraction model -------------------------

def _pair_codes(name: str) -> list[int]:
    """Positive codes c whose value and the next (c + 1, or the grid past max) are paired."""
    top = _CONSTANTS[name][4]
    if _BITS[name] <= 8:
        return list(range(top + 1))
    rng = _rng("pairs", name)
    m_bits = _SPECS[name].man_bits
    normal = 1 << m_bits
    edges = [0, 1, 2, normal - 2, normal - 1, normal, normal + 1, 2 * normal - 1,
             top - 1, top]
    return sorted(set(edges) | set(int(c) for c in rng.integers(0, top, 400)))


def _neighbours(v: float) -> list[float]:
    out = [v, float(np.nextafter(v, math.inf)), float(np.nextafter(v, -math.inf))]
    if abs(v) > float(np.finfo(np.float32).max):
        return out
    f = np.float32(v)
    if float(f) == v:
        with np.errstate(over="ignore"):          # past float32's max is Inf, a fine input
            out += [float(np.nextafter(f, np.float32(np.inf))),
                    float(np.nextafter(f, np.float32(-np.inf)))]
    return out


@functools.cache
def _boundary_inputs(name: str) -> np.ndarray:
    """Every finite value, every midpoint between neighbours (and past max), each with its
    float64 and float32 neighbours, mirrored to negative for signed formats; plus zeros,
    infinities, and values far beyond either end."""
    pts: list[float] = []
    top = _CONSTANTS[name][4]
    for c in _pair_codes(name):
        lo = _ref_value(name, c)[2]
        hi = Fraction(_CONSTANTS[name][7]) if c == top else _ref_value(name, c + 1)[2]
        pts += _neighbours(float(lo)) + _neighbours(float((lo + hi) / 2))
    pts += _neighbours(float(_CONSTANTS[name][7]))
    pts += [0.0, 5e-324, 1e-300, 2.0**-128, 1.5 * 2.0**-128, 1e300, math.inf]
    x = np.array(pts, np.float64)
    x = x[x >= 0]
    x = np.concatenate([x, -x]) if formats.get(name).signed else np.append(x, -0.0)
    return x


def _ref_codes(name: str, x: np.ndarray, mode: str, saturate: bool,
               rand: np.ndarray | None = None, sr_bits: int = 0) -> np.ndarray:
    r = np.zeros(x.shape, np.uint64) if rand is None else rand
    return np.array([_ref_encode(name, float(xi), mode, saturate, int(ri), sr_bits)
                     for xi, ri in zip(x, r, strict=True)], np.uint64)


_NO_SPECIALS = [n for n in NAMES if _CONSTANTS[n][5] is None and _CONSTANTS[n][6] is None]


@pytest.mark.parametrize("saturate", [True, False], ids=["sat", "ieee"])
@pytest.mark.parametrize("name", NAMES)
def test_formats_encode_boundaries(name: str, saturate: bool, kernel: bool) -> None:
    fmt = formats.get(name)
    x = _boundary_inputs(name)
    if not saturate and name in _NO_SPECIALS:
        with pytest.raises(FormatError, match=re.escape(
                f"Format {name} has neither Inf nor NaN, so overflow must saturate; "
                f"pass saturate=True") + "$"):
            fmt.encode(x, "rne", saturate=False, kernel=kernel)
        return
    for mode in MODES:
        ours = fmt.encode(x, mode, saturate, kernel=kernel)
        assert ours.dtype == fmt.code_dtype and ours.shape == x.shape
        _assert_codes(ours, _ref_codes(name, x, mode, saturate), x,
                      f"{name} {mode} saturate={saturate}")
        if name == "int8":
            assert not (ours == 0x80).any()
        if name == "ue4m3":
            assert not (ours & 0x80).any()


@pytest.mark.parametrize("name", NAMES)
def test_formats_encode_nan(name: str, kernel: bool) -> None:
    """NaN keeps its sign in signed formats; NaN into a format without NaN is refused."""
    fmt = formats.get(name)
    x = np.array([np.nan, -np.nan, 1.0])
    for mode in (*MODES, "stochastic"):
        for saturate in (True, False):
            if _CONSTANTS[name][5] is None:
                with pytest.raises(FormatError, match=re.escape(
                        f"Format {name} has no NaN; remove NaN values before encoding") + "$"):
                    fmt.encode(x, mode, saturate, seed=1, kernel=kernel)
                continue
            ours = fmt.encode(x, mode, saturate, seed=1, kernel=kernel)
            nan = _CONSTANTS[name][5]
            sign = 1 << (fmt.bits - 1) if fmt.signed else 0
            assert ours[:2].tolist() == [nan, nan | sign], (mode, saturate)


# -- d. stochastic rounding -------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_formats_encode_stochastic(name: str, kernel: bool) -> None:
    fmt = formats.get(name)
    rng = _rng("sr", name)
    x = _boundary_inputs(name)
    # Add points spread inside each gap, where the fraction takes every value.
    inside = np.abs(x[np.isfinite(x)])
    inside = np.sort(inside)
    u = rng.random(inside.size - 1)
    between = inside[:-1] + u * (inside[1:] - inside[:-1])
    between = between[np.isfinite(between)]
    x = np.concatenate([x, between, -between if fmt.signed else between])
    if x.size > 3000:                           # the Fraction model is slow; sample wide formats
        x = rng.choice(x, 3000, replace=False)
    for i, sr_bits in enumerate((1, 3, 8, 32)):
        r = rng.integers(0, 1 << sr_bits, x.size, dtype=np.uint64)
        r[:2] = [0, (1 << sr_bits) - 1]
        saturate = name in _NO_SPECIALS or i % 2 == 0
        ours = fmt.encode(x, "stochastic", saturate, random_bits=r, sr_bits=sr_bits, kernel=kernel)
        _assert_codes(ours, _ref_codes(name, x, "stochastic", saturate, r, sr_bits), x,
                      f"{name} stochastic sr_bits={sr_bits} saturate={saturate}")


@pytest.mark.parametrize("sr_bits", [1, 8, 32, 63])
def test_formats_encode_stochastic_seed(sr_bits: int, kernel: bool) -> None:
    """seed=S draws default_rng(S).integers(0, 2**sr_bits, size=shape, dtype=uint64), C order."""
    fmt = formats.get("e4m3")
    x = _rng("sr-seed").uniform(-300, 300, (7, 33))
    drawn = np.random.default_rng(1234).integers(0, 1 << sr_bits, size=x.shape, dtype=np.uint64)
    np.testing.assert_array_equal(
        fmt.encode(x, "stochastic", seed=1234, sr_bits=sr_bits, kernel=kernel),
        fmt.encode(x, "stochastic", random_bits=drawn, sr_bits=sr_bits, kernel=kernel))
    default = np.random.default_rng(99).integers(0, 1 << 32, size=x.shape, dtype=np.uint64)
    np.testing.assert_array_equal(fmt.encode(x, "stochastic", seed=99, kernel=kernel),
                                  fmt.encode(x, "stochastic", random_bits=default, kernel=kernel))


@pytest.mark.parametrize("name,x", [("e4m3", 1.1), ("e4m3", -0.013), ("e2m1", 2.6),
                                    ("e2m1", -0.3), ("e8m0", 3.0), ("int8", 0.33)])
def test_formats_encode_stochastic_unbiased(name: str, x: float, kernel: bool) -> None:
    """Sanity, in floats: the mean of stochastically rounded values is the value."""
    fmt = formats.get(name)
    n = 200_000
    mean = fmt.decode(fmt.encode(np.full(n, x), "stochastic", seed=SEED, kernel=kernel)).mean()
    lo, hi = _enc(name).bracket(Fraction(abs(x)))
    sigma = float(hi - lo) / 2 / math.sqrt(n)
    assert abs(mean - x) < 6 * sigma


# -- e. no double rounding --------------------------------------------------------------------

@pytest.mark.parametrize("name,mid,below,above,even", [
    ("e4m3", 1.0625, 0x38, 0x39, 0x38),     # between 1.0 (even) and 1.125 (odd)
    ("e4m3", 1.1875, 0x39, 0x3A, 0x3A),     # between 1.125 (odd) and 1.25 (even)
    ("e2m1", 1.25, 0x2, 0x3, 0x2),          # between 1.0 (even) and 1.5 (odd)
    ("e2m1", 1.75, 0x3, 0x4, 0x4),          # between 1.5 (odd) and 2.0 (even)
])
def test_formats_encode_no_double_rounding(name: str, mid: float, below: int, above: int,
                                           even: int, kernel: bool) -> None:
    """A float64 just off a midpoint rounds once, not first to float32 (ml_dtypes' DoubleRound).

    ``mid +- 2**-40`` is a float64 that float32 rounds onto ``mid``, where ties-to-even then
    picks the even neighbour; rounding the float64 directly picks the nearer one. ml_dtypes
    0.6 and before round twice here, 0.7 once (see :class:`_MlDtypesCasts`).
    """
    fmt = formats.get(name)
    x = np.array([mid + 2.0**-40, mid - 2.0**-40])
    assert (x.astype(np.float32) == mid).all()
    assert fmt.encode(x, kernel=kernel).tolist() == [above, below]
    assert fmt.encode(x.astype(np.float32), kernel=kernel).tolist() == [even, even]
    ml_dtypes = pytest.importorskip("ml_dtypes")
    peer = x.astype(getattr(ml_dtypes, fmt.ml_dtypes_name)).view(np.uint8)
    twice = _ml_dtypes_casts().float64_via_float32
    assert peer.tolist() == ([even, even] if twice else [above, below])


#: ml_dtypes' own types converted float64 through float32 before 0.7, rounding twice; numpy's
#: float16 (mxsim's fp16 counterpart) rounds once. A difference for float64 inputs only.
ML_DTYPES_ROUND_FLOAT64_VIA_FLOAT32 = ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "e8m0", "bf16"]


@pytest.mark.parametrize("name", ML_DTYPES)
def test_formats_encode_float64_vs_ml_dtypes(name: str, kernel: bool) -> None:
    """On float64 inputs ml_dtypes < 0.7 equals its own cast of float32(x) (double rounding),
    and mxsim, which rounds x once, equals it wherever rounding twice changes nothing; from 0.7
    on ml_dtypes rounds once too and equals mxsim everywhere."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    fmt = formats.get(name)
    dt = np.dtype(getattr(ml_dtypes, fmt.ml_dtypes_name, None) or fmt.ml_dtypes_name)
    rng = _rng("ml-f64", name)
    mags = np.array([float(m) for m in _ListEnc(name).mags])
    mids = (mags[1:] + mags[:-1]) / 2
    x = np.concatenate([mids * (1 + 2.0**-40), mids * (1 - 2.0**-40), mids,
                        rng.standard_normal(20000) * 2.0 ** rng.integers(-8, 8, 20000)])
    x = np.abs(x[np.abs(x) <= fmt.max])
    x = np.concatenate([x, -x]) if fmt.signed else x
    u = f"u{dt.itemsize}"
    peer = x.astype(dt).view(u)
    once = fmt.encode(x, "rne", saturate=True, kernel=kernel).astype(u)
    twice = fmt.encode(x.astype(np.float32), "rne", saturate=True, kernel=kernel).astype(u)
    if name in ML_DTYPES_ROUND_FLOAT64_VIA_FLOAT32:
        assert (once != twice).any()            # the probe does reach double rounding
    if name in ML_DTYPES_ROUND_FLOAT64_VIA_FLOAT32 and _ml_dtypes_casts().float64_via_float32:
        np.testing.assert_array_equal(peer, x.astype(np.float32).astype(dt).view(u))
        _assert_codes(peer, twice, x, f"{name}: ml_dtypes on float64")
    else:
        _assert_codes(peer, once, x, f"{name}: rounding float64 once")


# -- f. round_to on wide integers ---------------------------------------------------------------

@pytest.mark.parametrize("name", ["fp32", "fp16", "bf16", "e4m3", "e2m1", "int8", "e8m0"])
def test_formats_round_to(name: str, kernel: bool) -> None:
    """Significands of up to 64 bits at every exponent, with a sticky bit, in every mode.

    The sticky bit stands for a value strictly between 0 and 1 LSB; it decides the rounding
    only when the LSB lies below the cut (else the value is not determined), so cases with a
    sticky bit keep ``lsb_exp`` below the format's LSB for their binade.
    """
    fmt = formats.get(name)
    enc = _enc(name)
    rng = _rng("round_to", name)
    n = 700
    length = rng.integers(1, 65, n)
    sig = np.array([int(rng.integers(0, 1 << 62)) % (1 << int(b)) | (1 << (int(b) - 1))
                    for b in length], np.uint64)
    sig[:4] = [1 << 63, (1 << 64) - 1, (1 << 63) + 1, 3]
    lo_msb = math.floor(math.log2(fmt.min_subnormal)) - 3
    msb = rng.integers(lo_msb, fmt.emax + 3, n)
    lsb_exp = msb - (np.array([int(s).bit_length() for s in sig]) - 1)
    sign = rng.integers(0, 2 if fmt.signed else 1, n).astype(np.uint8)
    sticky = rng.random(n) < 0.5
    m_bits = 6 if name == "int8" else fmt.man_bits
    emin = 0 if name == "int8" else fmt.emin
    for i in range(n):
        e = int(msb[i]) if name != "int8" else 0
        cut = max(e, emin) - m_bits
        if int(lsb_exp[i]) >= cut:
            sticky[i] = False
    saturations = (True, False) if name not in _NO_SPECIALS else (True,)
    for saturate in saturations:
        for mode in MODES:
            ours = formats.round_to(fmt, sign, lsb_exp, sig, sticky, mode,
                                    formats.Overflow.saturating(saturate), kernel=kernel)
            expected = [_ref_round(enc, bool(sign[i]),
                                   (Fraction(int(sig[i])) + Fraction(int(sticky[i]), 2))
                                   * _pow2(int(lsb_exp[i])), mode, saturate)
                        for i in range(n)]
            _assert_codes(ours, np.array(expected), sig,
                          f"round_to {name} {mode} saturate={saturate}")
        sr_bits = int(rng.choice([1, 3, 8, 32]))
        r = rng.integers(0, 1 << sr_bits, n, dtype=np.uint64)
        ours = formats.round_to(fmt, sign, lsb_exp, sig, sticky, "stochastic",
                                formats.Overflow.saturating(saturate),
                                random_bits=r, sr_bits=sr_bits, kernel=kernel)
        expected = [_ref_round(enc, bool(sign[i]), Fraction(int(sig[i])) * _pow2(int(lsb_exp[i])),
                               "stochastic", saturate, int(r[i]), sr_bits) for i in range(n)]
        _assert_codes(ours, np.array(expected), sig,
                      f"round_to {name} stochastic/{sr_bits} saturate={saturate}")


@pytest.mark.parametrize("name", ["fp32", "fp16", "bf16", "e4m3", "e8m0"])
def test_formats_round_to_sticky_only(name: str, kernel: bool) -> None:
    """sig=0 with sticky is a positive value below half the smallest one; without, a zero."""
    fmt = formats.get(name)
    enc = _enc(name)
    below = math.floor(math.log2(fmt.min_subnormal)) - 1
    lsb = np.array([below, below - 7, -300, -2000], np.int64)
    for sign in ([0, 1] if fmt.signed else [0]):
        for mode in MODES:
            ours = formats.round_to(fmt, sign, lsb, 0, True, mode, kernel=kernel)
            expected = [_ref_round(enc, bool(sign), _pow2(int(k) - 1), mode, True) for k in lsb]
            _assert_codes(ours, np.array(expected), lsb, f"{name} sign={sign} {mode}")
            zero = formats.round_to(fmt, sign, lsb, 0, False, mode, kernel=kernel)
            expected = [_ref_round(enc, bool(sign), Fraction(0), mode, True)] * lsb.size
            _assert_codes(zero, np.array(expected), lsb, f"{name} sign={sign} {mode} zero")


def test_formats_round_to_huge_exponent(kernel: bool) -> None:
    fp16 = formats.get("fp16")
    for overflow, codes in (("saturate", [0x7BFF, 0xFBFF]), ("ieee", [0x7C00, 0xFC00])):
        got = formats.round_to(fp16, [0, 1], 4096, 1, False, "rne", overflow, kernel=kernel)
        assert got.tolist() == codes
    with pytest.raises(FormatError, match=r"^Overflow must be one of saturate, ieee, inf, "
                                          r"not True$"):
        formats.round_to(fp16, 0, 0, 1, False, "rne", True, kernel=kernel)
    with pytest.raises(ValueError, match=r"^Stochastic rounding needs random_bits$"):
        formats.round_to(fp16, 0, 0, 1, False, "stochastic", kernel=kernel)


@pytest.mark.parametrize("name", ["fp32", "fp16", "e8m13", "e4m3", "int8"])
def test_formats_round_to_zero_is_never_an_overflow(name: str, kernel: bool) -> None:
    """A zero significand is zero whatever its exponent (a cancelled sum at 2**219)."""
    fmt = formats.get(name)
    policies = [formats.Overflow.SATURATE]
    if fmt.has_inf or fmt.has_nan:
        policies += [formats.Overflow.INF, formats.Overflow.IEEE]
    for overflow in policies:
        codes = formats.round_to(fmt, [0, 1], [219, 4000], 0, False, "rz", overflow, kernel=kernel)
        mags = codes.astype(np.int64) & ((1 << fmt.sign_shift) - 1 if fmt.kind == "float"
                                         else 0xFF)
        assert mags.tolist() == [0, 0], (name, overflow, codes)


def test_formats_overflow_policies(kernel: bool) -> None:
    """RZ overflow: IEEE gives max, INF gives Inf (tensor-core accumulators), SATURATE max."""
    fp32 = formats.get("fp32")
    got = [int(formats.round_to(fp32, 0, 200, 1, False, "rz", o, kernel=kernel))
           for o in (formats.Overflow.IEEE, formats.Overflow.INF, formats.Overflow.SATURATE)]
    assert got == [0x7F7FFFFF, 0x7F800000, 0x7F7FFFFF]
    e8m13 = formats.get("e8m13")
    assert e8m13.min_subnormal == 2.0 ** -139 and e8m13.max == (2 - 2 ** -13) * 2.0 ** 127
    assert int(formats.round_to(e8m13, 1, 200, 1, False, "rz", "inf", kernel=kernel)) == 0x3FE000
    with pytest.raises(FormatError, match=r"^Overflow must be one of saturate, ieee, "
                                                  r"inf, not 'wrap'$"):
        formats.round_to(fp32, 0, 0, 1, False, "rz", "wrap", kernel=kernel)


def test_formats_encode_scalar_shape(kernel: bool) -> None:
    """Codes are shaped like the values, 0-d included."""
    for name in NAMES:
        fmt = formats.get(name)
        assert fmt.encode(1.0, kernel=kernel).shape == ()
        assert fmt.encode(np.ones((2, 3)), kernel=kernel).shape == (2, 3)
    assert formats.get("e4m3").encode(np.nan, kernel=kernel).shape == ()
    assert int(formats.get("e4m3").encode(-np.nan, kernel=kernel)) == 0xFF


# -- h. packing and interop -------------------------------------------------------------------

def test_formats_pack_fp4() -> None:
    rng = _rng("fp4")
    codes = rng.integers(0, 16, (3, 5, 32), dtype=np.uint8)
    packed = formats.pack_fp4(codes)
    assert packed.shape == (3, 5, 16) and packed.dtype == np.uint8
    np.testing.assert_array_equal(formats.unpack_fp4(packed), codes)
    assert formats.pack_fp4([0x1, 0x2, 0xF, 0x0]).tolist() == [0x21, 0x0F]   # low nibble first
    torch = pytest.importorskip("torch")
    t = formats.to_torch(codes, "e2m1")
    assert t.dtype == torch.float4_e2m1fn_x2 and tuple(t.shape) == (3, 5, 16)
    np.testing.assert_array_equal(t.view(torch.uint8).numpy(), packed)
    back, fmt = formats.from_torch(t)
    assert fmt is formats.get("e2m1")
    np.testing.assert_array_equal(back, codes)
    kernels = pytest.importorskip("torchao.prototype.mx_formats.kernels")
    np.testing.assert_array_equal(kernels.pack_uint4(torch.from_numpy(codes)).numpy(), packed)


def test_formats_pack_fp6() -> None:
    """Four codes make the big-endian 24-bit word x0 x1 x2 x3, stored as three bytes.

    torchao 0.18 has no ``pack_uint6`` (it left with the FP6 MX path), so the layout is
    checked against its definition instead.
    """
    rng = _rng("fp6")
    codes = rng.integers(0, 64, (4, 32), dtype=np.uint8)
    packed = formats.pack_fp6(codes)
    assert packed.shape == (4, 24) and packed.dtype == np.uint8
    np.testing.assert_array_equal(formats.unpack_fp6(packed), codes)
    expected = bytearray()
    for x0, x1, x2, x3 in codes.reshape(-1, 4).tolist():
        expected += ((x0 << 18) | (x1 << 12) | (x2 << 6) | x3).to_bytes(3, "big")
    np.testing.assert_array_equal(packed.ravel(), np.frombuffer(bytes(expected), np.uint8))
    assert formats.pack_fp6([0x3F, 0, 0, 0]).tolist() == [0xFC, 0x00, 0x00]
    assert formats.pack_fp6([0, 0, 0, 0x3F]).tolist() == [0x00, 0x00, 0x3F]


@pytest.mark.parametrize("name", NAMES)
def test_formats_ml_dtypes_round_trip(name: str) -> None:
    fmt = formats.get(name)
    codes = (np.arange(1 << fmt.bits, dtype=np.uint32) if fmt.bits <= 16 else
             _rng("ml-rt").integers(0, 1 << 32, 4096, dtype=np.uint64)).astype(fmt.code_dtype)
    if fmt.ml_dtypes_name is None:
        with pytest.raises(FormatError, match=rf"^Format {name} has no ml_dtypes counterpart$"):
            formats.to_ml_dtypes(codes, name)
        return
    pytest.importorskip("ml_dtypes")
    arr = formats.to_ml_dtypes(codes, name)
    assert arr.dtype.name == fmt.ml_dtypes_name
    back, f = formats.from_ml_dtypes(arr)
    assert f is fmt and back.dtype == fmt.code_dtype
    np.testing.assert_array_equal(back, codes)


@pytest.mark.parametrize("name", NAMES)
def test_formats_torch_round_trip(name: str) -> None:
    torch = pytest.importorskip("torch")
    fmt = formats.get(name)
    codes = (np.arange(1 << fmt.bits, dtype=np.uint32) if fmt.bits <= 16 else
             _rng("torch-rt").integers(0, 1 << 32, 4096, dtype=np.uint64)).astype(fmt.code_dtype)
    if name not in TORCH:
        with pytest.raises(FormatError, match=rf"^Format {name} has no torch dtype$"):
            formats.to_torch(codes, name)
        return
    t = formats.to_torch(codes, name)
    assert t.dtype == getattr(torch, fmt.torch_name)
    back, f = formats.from_torch(t)
    assert f is fmt and back.dtype == fmt.code_dtype
    np.testing.assert_array_equal(back, codes)
    if name != "e2m1":             # torch cannot convert float4_e2m1fn_x2 to anything
        np.testing.assert_array_equal(_bits64(t.double().numpy()), _bits64(fmt.decode(codes)))


def test_formats_interop_errors() -> None:
    with pytest.raises(FormatError, match=r"^No mxsim format matches dtype float64$"):
        formats.from_ml_dtypes(np.zeros(3))
    torch = pytest.importorskip("torch")
    with pytest.raises(FormatError, match=r"^No mxsim format matches torch dtype torch\.int32$"):
        formats.from_torch(torch.zeros(3, dtype=torch.int32))


# -- i. error paths ---------------------------------------------------------------------------

def test_formats_errors() -> None:
    e4m3, e2m1, e8m0 = formats.get("e4m3"), formats.get("e2m1"), formats.get("e8m0")
    listing = "e4m3, e5m2, e3m2, e2m3, e2m1, int8, e8m0, ue4m3, fp16, bf16, tf32, fp32"
    with pytest.raises(FormatError, match=re.escape(
            f"Unknown format 'e12m9'; choose one of {listing} (see `mxsim formats`)") + "$"):
        formats.get("e12m9")
    with pytest.raises(TypeError, match=r"^Format name must be a string, not 3$"):
        formats.get(3)
    assert formats.get(" FP8_E4M3 ") is e4m3 and formats.get(e4m3) is e4m3
    with pytest.raises(FormatError, match=re.escape(
            "Rounding must be one of rne, rna, rz, ru, rd, stochastic, not 'nearest'") + "$"):
        e4m3.encode(1.0, "nearest")
    for bad in (0, 64):
        with pytest.raises(ValueError, match=rf"^sr_bits must be between 1 and 63, not {bad}$"):
            e4m3.encode(1.0, "stochastic", seed=0, sr_bits=bad)
    with pytest.raises(ValueError, match=re.escape("random_bits must be integers in [0, 2**3)")
                       + "$"):
        e4m3.encode([1.0, 2.0], "stochastic", random_bits=[1, 8], sr_bits=3)
    with pytest.raises(FormatError, match=re.escape("Codes of e4m3 must lie in [0, 255]") + "$"):
        e4m3.decode(np.array([256]))
    with pytest.raises(FormatError, match=re.escape("Codes of e2m1 must lie in [0, 15]") + "$"):
        e2m1.decode(np.array([16]))
    with pytest.raises(FormatError, match=re.escape("Codes of e2m1 must lie in [0, 15]") + "$"):
        e2m1.classify(np.array([-1]))
    with pytest.raises(TypeError, match=r"^Codes of e4m3 must be an integer array, not float64$"):
        e4m3.decode(np.array([1.0]))
    with pytest.raises(TypeError, match=r"^Values must be a real numeric array, not <U3$"):
        e4m3.encode(["1.0"])
    with pytest.raises(FormatError, match=r"^Format e2m1 has no NaN; remove NaN values before "
                                          r"encoding$"):
        e2m1.encode([1.0, np.nan])
    for neg in (-1.0, -2.0**-140, -np.inf):
        with pytest.raises(FormatError, match=r"^Format e8m0 is unsigned; values must be >= 0$"):
            e8m0.encode([1.0, neg])
    with pytest.raises(FormatError, match=r"^Format ue4m3 is unsigned; values must be >= 0$"):
        formats.get("ue4m3").encode(-1.0)
    with pytest.raises(FormatError, match=r"^Format e2m1 has neither Inf nor NaN, so overflow "
                                          r"must saturate; pass saturate=True$"):
        e2m1.encode([1.0], saturate=False)
    with pytest.raises(ValueError, match=re.escape("Last axis of FP4 codes must be a multiple "
                                                   "of 2, not (3,)") + "$"):
        formats.pack_fp4([1, 2, 3])
    with pytest.raises(ValueError, match=r"^FP4 codes must be below 16$"):
        formats.pack_fp4([1, 16])
    with pytest.raises(ValueError, match=r"^FP6 codes must be below 64$"):
        formats.pack_fp6([1, 2, 3, 64])
    with pytest.raises(ValueError, match=re.escape("Last axis of packed FP6 bytes must be a "
                                                   "multiple of 3, not (4,)") + "$"):
        formats.unpack_fp6([1, 2, 3, 4])



@pytest.mark.parametrize("name", ["e8m13", "e8m10", "e8m22"])
def test_formats_accumulator_decode_matches_fields(name):
    """e8mN codes (wider than 16 bits, narrower than FP32) decode through their own fields."""
    f = formats.get(name)
    codes = np.random.default_rng(f.man_bits).integers(0, 1 << f.bits, 20000).astype(np.uint32)
    sign, e, sig = f.fields(codes)
    cls = f.classify(codes)
    finite = (cls != formats.Class.NAN) & (cls != formats.Class.INF)
    want = np.where(sign == 1, -1.0, 1.0) * np.ldexp(sig.astype(float), e - f.man_bits)
    got = f.decode(codes)
    assert np.array_equal(got[finite], want[finite])
    assert np.isnan(got[cls == formats.Class.NAN]).all()
    assert np.array_equal(got[cls == formats.Class.INF],
                          np.where(sign == 1, -np.inf, np.inf)[cls == formats.Class.INF])
