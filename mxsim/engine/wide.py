"""The fused step in numpy, one product position at a time over whole blocks of dots, in float64.

:func:`step_sums` returns what the compiled kernel's (``engine._kernels.step_sums``) does, for
the numpy path (no numba, or ``kernel=False``): per dot the step's largest alignment exponent,
every term rounded to the step's LSB as the spec's ``Align`` says, the exact sum, and the
special-value flags. Where ``fast.alignment`` builds (rows, terms, columns) integer temporaries
and shifts each term, this loops over the step's K positions and works on (rows, columns)
arrays that stay in cache, with a term's rounding to the step's LSB done by float64 arithmetic
that is exact by construction:

- an operand's value ``±sig * 2**lsb`` is a float64 exactly (``sig`` has at most 53 bits);
- a product of two is exact while the two significands have at most 53 bits together, and so is
  its scaling by ``2**-lsb_step`` while every exponent stays in float64's normal range;
- ``trunc`` (RZ), ``floor`` (RD) and ``rint`` (RNE, ties to even) of that quotient are then the
  aligned term itself, and RZ_JAM is ``trunc`` of the half-LSB quotient with the jam bit ORed in;
- the terms are integers, and their sum is exact in float64 (in any order) while every partial
  sum stays below ``2**53``.

:func:`step_sums` checks those bounds on the data it is given (significand widths, exponent
range, and the largest aligned term from each side's ratio of value to alignment exponent) and
returns None where they do not hold; the caller then uses ``fast.alignment``'s integer step.
Where tighter bounds hold (24 significand bits together, exponents within ``LIMIT32``, sums
below ``2**23``: ``hopper-wgmma``'s FP8 steps among them) the same arithmetic runs in float32,
half the bytes per pass. :func:`round_sums` rounds the step sums to the accumulator's format
through float64's own bits where that is exact (RZ and RNE, normal results), instead of
``formats.round_to``'s dozens of integer passes. tests/mxsim/engine/test_wide.py holds all of
it equal to the kernel, the integer step and ``round_to``, on random and adversarial data.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .. import formats
from ..formats import Rounding
from ._kernels import INF, NAN, ZERO, side

__all__ = ["Side", "prepare_b", "round_sums", "step_sums"]

#: Largest |exponent| (LSB or alignment exponent) of an operand this path takes: products
#: then lie within 2**±502 and a term's quotient within 2**±1006, inside float64's normal range.
LIMIT = 250
#: The same for float32 (:func:`_fits32`): products' LSBs within 2**-60, a term's after
#: scaling within 2**-120, above float32's smallest subnormal (2**-149).
LIMIT32 = 30
_NONE = -(1 << 20)       # the alignment exponent of a zero operand (never the maximum)
_ROUND = {"rz": np.trunc, "rd": np.floor, "rne": np.rint}


@dataclass
class Side:
    """One operand's step terms, K position first: values (float64, exact), alignment
    exponents (int32, ``_NONE`` where the value is zero), signs, flags, and the bounds the
    exactness checks read."""
    val: npt.NDArray[np.float64]
    e: npt.NDArray[np.int32]
    sign: npt.NDArray[np.int32]
    flag: npt.NDArray[np.int32]
    zero_any: npt.NDArray[np.bool_]     # per row / column: some term of the step is zero
    special: npt.NDArray[np.bool_]      # per row / column: some term is NaN or Inf
    sig_bits: int                       # the widest significand's bit length
    ratio: float                        # max |value| / 2**e over non-zero values
    span: int                           # max |LSB exponent| and |e| over non-zero values

    @functools.cached_property
    def val32(self) -> npt.NDArray[np.float32]:
        """:attr:`val` in float32 (exact where :func:`_fits32` holds)."""
        return self.val.astype(np.float32)

    @classmethod
    def of(cls, op, scale, transpose: bool) -> Side:
        """The side of an :class:`~.fast.operands.Operand` (``scale``: its block scales or None),
        K position first: ``transpose`` for A's (rows, g), not for B's (g, N)."""
        sign, sig, lsb, e, flag = side(op, scale, transpose)
        nonzero = sig != 0
        mag = np.abs(sig).astype(np.float64)
        top = int(mag.max(initial=0))
        hi = int(np.where(nonzero, np.maximum(np.abs(lsb), np.abs(e)), 0).max(initial=0))
        ratio = float(np.where(nonzero, np.ldexp(mag, lsb - e), 0.0).max(initial=0.0))
        return cls(np.ldexp(np.where(sign == 1, -mag, mag), lsb),
                   np.where(nonzero, e, _NONE).astype(np.int32), sign, flag,
                   (~nonzero).any(axis=0), ((flag & (NAN | INF)) != 0).any(axis=0),
                   top.bit_length(), ratio, hi)


def prepare_b(b, sb) -> Side:
    """B's columns (g, N) for :func:`step_sums`, prepared once per step: scales folded in."""
    return Side.of(b, sb, False)


def _fits(a: Side, b: Side, acc, frac_bits: int, e_zero: int, jam: int) -> bool:
    """Whether float64 computes this step exactly (see the module's notes)."""
    if not (max(a.span, b.span) <= LIMIT and abs(e_zero) <= LIMIT and 0 <= frac_bits <= 60):
        return False
    if a.sig_bits + b.sig_bits > 53:
        return False
    if acc is not None:
        live = acc.sig != 0
        if int(acc.sig.max(initial=0)).bit_length() > 53 or int(np.where(
                live, np.maximum(np.abs(acc.lsb), np.abs(acc.e)), 0).max(initial=0)) > LIMIT:
            return False
    return _sum_bound(a, b, frac_bits, jam) < 2.0 ** 52


def _sum_bound(a: Side, b: Side, frac_bits: int, jam: int) -> float:
    """A bound on a step's aligned sum: each term's magnitude is at most ratio_a * ratio_b *
    2**(frac_bits + jam), plus one from rounding up (a normalised product's, or the
    accumulator's, below 2**(f + jam + 1))."""
    unit = 2.0 ** (frac_bits + jam)
    term = max(a.ratio * b.ratio, 2.0) * unit + 1
    return a.val.shape[0] * term + 2 * unit + 1


def _fits32(a: Side, b: Side, acc, frac_bits: int, e_zero: int, jam: int) -> bool:
    """Whether float32 computes this step exactly too (with :func:`_fits`): significands of
    24 bits together, exponents within ``LIMIT32`` (products' LSBs, and the terms' after
    scaling, stay above float32's smallest subnormal), an accumulator's exponents within
    twice that, and sums below ``2**23``. An e_zero far below the data only decides dots whose
    terms are all zero (their scale is clipped)."""
    if not (max(a.span, b.span) <= LIMIT32 and e_zero <= 2 * LIMIT32 and 0 <= frac_bits <= 40
            and a.sig_bits + b.sig_bits <= 24):
        return False
    # The accumulator's term is scaled and rounded in float64 (exact under _fits), so only
    # its exponent matters here: within 2 * LIMIT32, its dots' scale is never clipped.
    if acc is not None and int(np.where(acc.sig != 0, np.abs(acc.e), 0).max(initial=0)) \
            > 2 * LIMIT32:
        return False
    return _sum_bound(a, b, frac_bits, jam) < 2.0 ** 23


def step_sums(a, sa, b_side: Side, acc, frac_bits: int, align: str, normalized: bool,
              e_zero: int, zero_acc: bool = False):
    """(sum, lsb, flags) per dot of one fused step, as ``engine._kernels.step_sums`` computes
    them (the same arguments, ``b_side`` from :func:`prepare_b`), or None where the float64
    bounds do not hold for this data."""
    a_side = Side.of(a, sa, True)
    jam = 1 if align == "rz-jam" else 0
    if not _fits(a_side, b_side, acc, frac_bits, e_zero, jam):
        return None
    emax = _emax(a_side, b_side, acc, normalized, e_zero, zero_acc)
    base = emax - (frac_bits + jam)
    if _fits32(a_side, b_side, acc, frac_bits, e_zero, jam):
        # Half the bytes per pass. Only dots whose products are all zero have a base below
        # -120 (e_zero's); their terms are zero at any finite scale.
        scale = np.ldexp(np.float32(1.0), np.clip(-base, -126, 120).astype(np.int32))
        total = _aligned_sum(a_side, b_side, acc, scale, align, True)
    else:
        total = _aligned_sum(a_side, b_side, acc, np.ldexp(1.0, -base), align, False)
    q = total.astype(np.int64)
    flags = np.zeros(q.shape, np.int64)
    if a_side.special.any() or b_side.special.any() or (
            acc is not None and (acc.nan.any() or acc.inf.any())):
        flags |= _special_flags(a_side, b_side, acc)
    if not zero_acc and (q == 0).any():
        flags |= np.where((q == 0) & _all_neg_zero(a_side, b_side, acc), 8, 0)
    return q, base, flags


def _emax(a: Side, b: Side, acc, normalized: bool, e_zero: int, zero_acc: bool):
    """The step's largest alignment exponent per dot (int64): the non-zero products', e_zero
    where a product is zero or the accumulator is +0, and the accumulator's."""
    r, n = a.val.shape[1], b.val.shape[1]
    emax = np.full((r, n), _NONE, np.int32)
    tmp = np.empty((r, n), np.int32)
    prod = np.empty((r, n), np.float64) if normalized else None
    for t in range(a.val.shape[0]):
        if normalized:        # the exact product's exponent
            np.multiply(a.val[t][:, None], b.val[t][None, :], out=prod)
            _, ex = np.frexp(prod)
            np.putmask(ex, prod == 0, _NONE + 1)
            np.subtract(ex, 1, out=tmp)
        else:
            np.add(a.e[t][:, None], b.e[t][None, :], out=tmp)
        np.maximum(emax, tmp, out=emax)
    emax = emax.astype(np.int64)
    floor = a.zero_any[:, None] | b.zero_any[None, :]
    if zero_acc:
        floor = np.ones_like(floor)
    emax = np.where(floor, np.maximum(emax, e_zero), emax)
    if acc is not None:
        emax = np.maximum(emax, np.where(acc.sig == 0, e_zero, acc.e))
    return emax


def _aligned_sum(a: Side, b: Side, acc, scale, align: str, single: bool):
    """Every term times ``scale`` (2**-base), rounded to an integer as ``align`` says, summed
    (float64, exact under :func:`_fits`; float32 where ``single``, exact under
    :func:`_fits32`)."""
    r, n = scale.shape
    dt = np.float32 if single else np.float64
    a_val, b_val = (a.val32, b.val32) if single else (a.val, b.val)
    total = np.zeros((r, n), dt)
    tmp = np.empty((r, n), dt)
    rnd = _ROUND.get(align)
    for t in range(a.val.shape[0]):
        np.multiply(a_val[t][:, None], b_val[t][None, :], out=tmp)
        np.multiply(tmp, scale, out=tmp)
        if rnd is None:
            _jam(tmp)
        else:
            rnd(tmp, out=tmp)
        np.add(total, tmp, out=total)
    if acc is not None:
        c = np.ldexp(np.where(acc.sign == 1, -1.0, 1.0) * acc.sig, acc.lsb) * scale
        if rnd is None:
            _jam(c)
        else:
            rnd(c, out=c)
        total += c
    return total


def _jam(y) -> None:
    """RZ_JAM in place: ``y`` (in half-LSB units) truncated, its last bit ORed with whether
    bits were discarded."""
    kept = np.trunc(y)
    lost = kept != y
    mag = np.abs(kept)
    mag += lost & (np.fmod(mag, 2.0) == 0)
    np.copysign(mag, y, out=y)


def _special_flags(a: Side, b: Side, acc):
    """Flag bits 1 (NaN), 2 (+Inf), 4 (-Inf) per dot, as the compiled kernel sets them."""
    r, n = a.val.shape[1], b.val.shape[1]
    flags = np.zeros((r, n), np.int64)
    for t in range(a.val.shape[0]):
        f = a.flag[t][:, None] | b.flag[t][None, :]
        special = (f & (NAN | INF)) != 0
        nan = special & ((f & (NAN | ZERO)) != 0)
        neg = (a.sign[t][:, None] ^ b.sign[t][None, :]) == 1
        flags |= np.where(nan, 1, np.where(special, np.where(neg, 4, 2), 0))
    if acc is not None:
        flags |= np.where(acc.nan, 1, np.where(acc.inf, np.where(acc.sign == 1, 4, 2), 0))
    return flags


def _all_neg_zero(a: Side, b: Side, acc):
    """Per dot: every term is a -0 (each product zero with a negative sign, and so is the
    accumulator where there is one)."""
    r, n = a.val.shape[1], b.val.shape[1]
    out = np.ones((r, n), np.bool_)
    for t in range(a.val.shape[0]):
        zero = (a.val[t][:, None] == 0) | (b.val[t][None, :] == 0)
        out &= zero & ((a.sign[t][:, None] ^ b.sign[t][None, :]) == 1)
    if acc is not None:
        out &= (acc.sig == 0) & (acc.sign == 1)
    return out


@functools.lru_cache(maxsize=256)
def _checked(fmt_name: str, rounding: Rounding, overflow) -> None:
    """round_to's own checks of the arguments (one zero rounded), so that :func:`round_sums`
    refuses what it refuses; once per combination."""
    formats.round_to(formats.get(fmt_name), False, 0, np.uint64(0), False, rounding, overflow)


def round_sums(fmt: formats.Format, q: npt.NDArray, lsb: npt.NDArray, rounding: Rounding,
               overflow) -> npt.NDArray:
    """``formats.round_to(fmt, q < 0, lsb, |q|, False, rounding, overflow)`` of step sums
    ``q`` (int64) at LSB exponents ``lsb``, by float64 where that is exact: RZ or RNE into a
    float format of at most 52 mantissa bits, ``|q| <= 2**53`` (so ``q * 2**lsb`` is a float64
    exactly while its exponent is in float64's normal range), a result whose exponent before
    rounding is at least ``fmt.emin`` (no subnormal) and after it below ``fmt.emax`` (no
    overflow, whatever the largest significand at emax). Rounding the float64's bits at
    ``fmt``'s precision is then ``round_to``'s: RZ clears the low bits, RNE adds half an LSB
    less one plus the kept LSB first, and a carry moves into the exponent field as it should.
    Every other sum goes to ``round_to``. tests/mxsim/engine/test_wide.py holds the two equal.
    """
    _checked(fmt.name, rounding, overflow)
    q = np.asarray(q, np.int64)
    lsb = np.broadcast_to(np.asarray(lsb, np.int64), q.shape)
    if fmt.kind != "float" or fmt.man_bits > 52 or rounding not in (Rounding.RZ, Rounding.RNE):
        return formats.round_to(fmt, q < 0, lsb, np.abs(q).view(np.uint64), False, rounding,
                                overflow)
    # Exponents far outside float64's range are clipped: the value is then Inf or below
    # float64's normal range (|q| <= 2**53), which the exponent tests below refuse.
    with np.errstate(over="ignore", under="ignore"):
        x = np.ldexp(q.astype(np.float64), np.clip(lsb, -1100, 1100).astype(np.int32))
    bits = x.view(np.uint64)
    u = np.uint64
    drop, top = u(52 - fmt.man_bits), u((1 << 63) - 1)
    mag = bits & top
    # Biased exponent fields of float64, before and after rounding: the tests in those terms.
    ok = mag >= u((fmt.emin + 1023) << 52)
    if rounding is Rounding.RNE and drop:
        mag += ((u(1) << (drop - u(1))) - u(1)) + ((mag >> drop) & u(1))
    mag >>= drop
    ok &= mag < u((fmt.emax + 1023) << fmt.man_bits)
    ok &= np.abs(q).view(np.uint64) <= u(1 << 53)
    zero = q == 0
    ok |= zero                   # float64's +0 and -0 give the code 0 below
    # float64's exponent field rebiased to fmt's (wrapping below zero, which ok refuses)
    code = (mag - u((1023 - fmt.bias) << fmt.man_bits)) | (
        (bits >> u(63)) << u(fmt.sign_shift))
    code[zero] = 0
    rest = ~ok
    if rest.any():
        code[rest] = formats.round_to(fmt, q[rest] < 0, lsb[rest],
                                      np.abs(q[rest]).view(np.uint64), False, rounding,
                                      overflow)
    return code.astype(fmt.code_dtype)
