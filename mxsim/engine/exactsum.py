"""Exact sums of many signed binary terms, grouped by dot: the engine's superaccumulator.

:func:`float_terms` splits float64 values into exact ``(sign, sig, lsb_exp)`` terms and
:func:`exact_sums` adds terms ``±sig * 2**lsb_exp`` per dot with no rounding, returning the
top 64 bits of each sum, their LSB exponent and a sticky bit: exactly what
:func:`mxsim.formats.round_to` takes to round the sum once.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from .xp import of as xp_of

__all__ = ["ExactSums", "exact_sums", "float_terms"]

_LIMB = 16                      # bits per superaccumulator limb
_LIMB_MASK = np.uint64((1 << _LIMB) - 1)
_RUN_TERMS = 1 << 22            # terms per float64 limb sum: below 2**53 with pieces < 2**31
_MAX_TERMS = 1 << 32            # terms per call: int64 limb sums stay exact


class ExactSums(NamedTuple):
    """Exact sums per dot, ready for :func:`mxsim.formats.round_to`.

    Members
    -------
    neg
        The sum is negative (False for an exact zero).
    sig
        Its top 64 bits as an unsigned integer (``np.uint64``).
    lsb_exp
        The exponent of ``sig``'s least significant bit.
    sticky
        Bits below ``sig`` are non-zero.
    zero
        The sum is exactly zero.
    """
    neg: npt.NDArray[np.bool_]
    sig: npt.NDArray[np.uint64]
    lsb_exp: npt.NDArray[np.int64]
    sticky: npt.NDArray[np.bool_]
    zero: npt.NDArray[np.bool_]


def float_terms(x: npt.ArrayLike) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint64],
                                            npt.NDArray[np.int64]]:
    """Exact ``(sign, sig, lsb_exp)`` of float64 values with trailing zero bits stripped.

    ``x == (-1)**sign * sig * 2**lsb_exp`` exactly for finite ``x``; zeros and non-finite
    values get ``sig == 0`` (their class is the caller's to handle).
    """
    bits = xp_of(x).array(x, dtype=np.float64, order="C").view(np.uint64)
    sign = (bits >> np.uint64(63)).astype(np.uint8)
    expf = ((bits >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64)
    man = bits & np.uint64((1 << 52) - 1)
    sig = np.where(expf > 0, man | np.uint64(1 << 52), man)
    sig = np.where(expf == 0x7FF, np.uint64(0), sig)
    lsb = np.maximum(expf, 1) - 1075
    low = sig & (~sig + np.uint64(1))                       # lowest set bit, a power of two
    _, tz = np.frexp(low.astype(np.float64))                # exact for powers of two
    tz = np.where(sig == 0, 0, tz.astype(np.int64) - 1)
    return sign, sig >> tz.astype(np.uint64), lsb + tz


def exact_sums(dot: npt.NDArray[np.int64], sign: npt.NDArray[np.uint8],
               sig: npt.NDArray[np.uint64], exp: npt.NDArray[np.int64],
               ndots: int) -> ExactSums:
    """Exact sums of signed terms ``(-1)**sign * sig * 2**exp`` grouped by ``dot``.

    ``dot`` holds each term's dot index in ``[0, ndots)``; the result has one entry per dot
    (see :class:`ExactSums`). Nothing is rounded: every bit of every sum is accounted for in
    ``sig`` and ``sticky``. Raises ValueError for ``2**32`` terms or more.

    Each term is split into 16-bit pieces placed in 16-bit limbs (a term puts at most one
    piece in each limb); ``np.bincount`` adds the pieces of each (dot, limb) in float64 over
    runs of at most ``2**22`` terms, which is exact because every partial sum is then an
    integer below ``2**53`` (pieces are below ``2**31``), and the runs' sums add in int64
    (exact below ``2**32`` terms in all).
    """
    xp = xp_of(sig, dot, exp)
    live = sig != 0
    dot, sign, sig, exp = dot[live], sign[live], sig[live], exp[live]
    if sig.size == 0:
        zeros = xp.zeros(ndots, np.int64)
        return ExactSums(zeros.astype(bool), zeros.astype(np.uint64), zeros,
                         zeros.astype(bool), xp.ones(ndots, bool))
    if sig.size >= _MAX_TERMS:
        raise ValueError(f"A superaccumulator call must sum fewer than 2**32 terms, not "
                         f"{sig.size}")
    base = int(exp.min())
    pos = exp - base
    limb0 = pos // _LIMB
    off = (pos % _LIMB).astype(np.uint64)
    npieces = (int(sig.max()).bit_length() + _LIMB - 1) // _LIMB
    nlimbs = int(limb0.max()) + npieces + 3          # room for the carries of the sum
    weight_sign = np.where(sign == 1, -1.0, 1.0)
    slot = dot * nlimbs + limb0
    limbs = xp.zeros(ndots * nlimbs, np.int64)
    for t0 in range(0, sig.size, _RUN_TERMS):
        run = slice(t0, t0 + _RUN_TERMS)
        sums = xp.zeros(ndots * nlimbs, np.float64)
        for j in range(npieces):
            piece = (sig[run] >> np.uint64(_LIMB * j)) & _LIMB_MASK
            w = (piece << off[run]).astype(np.float64) * weight_sign[run]   # < 2**31, exact
            sums += np.bincount(slot[run] + j, weights=w, minlength=ndots * nlimbs)
        limbs += sums.astype(np.int64)
    return _top_bits(limbs.reshape(ndots, nlimbs), base)


def _top_bits(limbs: npt.NDArray[np.int64], base: int) -> ExactSums:
    """The sums held in (ndots, nlimbs) limbs of weight ``2**(base + 16 i)``, as ExactSums."""
    ndots, nlimbs = limbs.shape
    limbs = _normalise(limbs)
    neg = limbs[:, -1] < 0
    if neg.any():
        limbs[neg] = _normalise(-limbs[neg])
    nz = limbs != 0
    zero = ~nz.any(axis=1)
    top = nlimbs - 1 - np.argmax(nz[:, ::-1], axis=1)           # highest non-zero limb
    mag = xp_of(limbs).zeros(ndots, np.uint64)
    for j in range(4):                                           # the top 64 bits
        idx = top - j
        part = np.take_along_axis(limbs, np.maximum(idx, 0)[:, None], axis=1)[:, 0]
        part = np.where(idx >= 0, part, 0).astype(np.uint64)
        mag |= part << np.uint64(_LIMB * (3 - j))
    below = np.cumsum(nz, axis=1)                                # non-zero limbs up to i
    sticky_idx = top - 4
    sticky = np.where(sticky_idx >= 0,
                      np.take_along_axis(below, np.maximum(sticky_idx, 0)[:, None],
                                         axis=1)[:, 0] > 0, False)
    lsb_exp = base + _LIMB * (top - 3)
    return ExactSums(neg & ~zero, mag, lsb_exp, sticky, zero)


def _normalise(limbs: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Propagate carries so every limb but the top lies in [0, 2**16); the top keeps the sign."""
    limbs = limbs.copy()
    for i in range(limbs.shape[1] - 1):
        carry = limbs[:, i] >> _LIMB                  # arithmetic shift: floor division
        limbs[:, i] -= carry << _LIMB
        limbs[:, i + 1] += carry
    return limbs
