"""Fast, vectorised engine: whole batches of dot products with numpy, bit-exact.

``matmul_exact`` computes the ``exact`` unit: every product, scale and C is combined without
rounding in a superaccumulator, and the sum is rounded once to FP32 by
:func:`mxsim.formats.round_to`. Its twin, :mod:`mxsim.engine.reference`, computes the same with
Python fractions; a test holds them equal.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .. import formats
from ..vectors import VectorSet
from .specials import FP32_NAN, FP32_NEG_INF, FP32_POS_INF

__all__ = ["matmul_exact"]

_LIMB = 16                      # bits per superaccumulator limb
_LIMB_MASK = np.uint64((1 << _LIMB) - 1)
_CHUNK_TERMS = 1 << 21          # products materialised at once (bounds memory to ~100 MB)


def _split(x: npt.NDArray[np.float64]):
    """Exact ``(sign, sig, lsb_exp)`` of float64 values with trailing zero bits stripped.

    Zeros and non-finite values get ``sig == 0``.
    """
    bits = np.array(x, dtype=np.float64, order="C").view(np.uint64)
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


def _accumulate(dot: npt.NDArray[np.int64], sign: npt.NDArray[np.uint8],
                sig: npt.NDArray[np.uint64], exp: npt.NDArray[np.int64], ndots: int):
    """Exact sums of signed terms ``±sig * 2**exp`` grouped by ``dot``.

    Returns ``(neg, mag_sig, lsb_exp, sticky, zero)`` per dot: the sum's sign, its top 64 bits
    as an integer with the exponent of their LSB, whether lower bits are non-zero, and whether
    the sum is exactly zero.

    Each term is split into 16-bit pieces placed in 16-bit limbs; ``np.bincount`` adds the
    pieces of each (dot, limb) in float64, which is exact because every partial sum is an
    integer below ``2**53`` (pieces are below ``2**31`` and at most ``2**21`` add per limb).
    """
    live = sig != 0
    dot, sign, sig, exp = dot[live], sign[live], sig[live], exp[live]
    if sig.size == 0:
        zeros = np.zeros(ndots, np.int64)
        return (zeros.astype(bool), zeros.astype(np.uint64), zeros, zeros.astype(bool),
                np.ones(ndots, bool))
    assert sig.size < (1 << 21) * 16, "chunk too large for exact float64 limb sums"
    base = int(exp.min())
    pos = exp - base
    limb0 = pos // _LIMB
    off = (pos % _LIMB).astype(np.uint64)
    npieces = (int(sig.max()).bit_length() + _LIMB - 1) // _LIMB
    nlimbs = int(limb0.max()) + npieces + 3          # room for the carries of the sum
    weight_sign = np.where(sign == 1, -1.0, 1.0)
    sums = np.zeros(ndots * nlimbs, np.float64)
    for j in range(npieces):
        piece = (sig >> np.uint64(_LIMB * j)) & _LIMB_MASK
        w = (piece << off).astype(np.float64) * weight_sign    # < 2**31, exact
        sums += np.bincount(dot * nlimbs + limb0 + j, weights=w, minlength=ndots * nlimbs)
    limbs = sums.astype(np.int64).reshape(ndots, nlimbs)
    limbs = _normalise(limbs)
    neg = limbs[:, -1] < 0
    if neg.any():
        limbs[neg] = _normalise(-limbs[neg])
    nz = limbs != 0
    zero = ~nz.any(axis=1)
    top = nlimbs - 1 - np.argmax(nz[:, ::-1], axis=1)           # highest non-zero limb
    mag = np.zeros(ndots, np.uint64)
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
    return neg & ~zero, mag, lsb_exp, sticky, zero


def _normalise(limbs: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Propagate carries so every limb but the top lies in [0, 2**16); the top keeps the sign."""
    limbs = limbs.copy()
    for i in range(limbs.shape[1] - 1):
        carry = limbs[:, i] >> _LIMB                  # arithmetic shift: floor division
        limbs[:, i] -= carry << _LIMB
        limbs[:, i + 1] += carry
    return limbs


def matmul_exact(vs: VectorSet) -> npt.NDArray[np.uint32]:
    """D = A·B + C of a vector set, exact, rounded once to FP32 (RNE); FP32 bit patterns.

    Each term ``a * sa * b * sb`` (scales applied exactly; the NVFP4 ``tensor_scale`` multiplies
    every product) and C are summed with no rounding; the sum is rounded to nearest even, with
    IEEE overflow to ±Inf. Special values: any NaN operand or scale used by a dot, Inf·0 or
    +Inf + -Inf give the canonical NaN ``0x7FFFFFFF``; otherwise an Inf term gives that Inf.
    An absent C is +0. An exact-zero sum is -0 only when every product and C is -0 (IEEE sum
    rules), else +0.
    """
    vs.validate()
    fa, fb = formats.get(vs.a_format), formats.get(vs.b_format)
    batch = vs.batch_shape
    nb = int(np.prod(batch, dtype=np.int64))
    m, n, k = vs.m, vs.n, vs.k
    a = fa.decode(vs.a).reshape(nb, m, k)
    b = fb.decode(vs.b).reshape(nb, k, n)
    scales = vs.scale_values()
    if scales is not None:
        sa, sb = scales
        a = a * np.broadcast_to(sa, batch + (m, k)).reshape(nb, m, k)   # exact: see below
        b = b * np.broadcast_to(sb, batch + (k, n)).reshape(nb, k, n)
    if vs.tensor_scale is not None:
        a = a * np.float64(vs.tensor_scale)
    # Every product above is exact in float64: element significands have at most 8 bits and
    # scale significands at most 24 (FP32) or 4 (+24 for the tensor scale), and the exponent
    # range stays far inside float64's.
    if vs.c is not None:
        c = formats.get(vs.c_format).decode(vs.c).reshape(nb, m, n)
    else:
        c = np.zeros((nb, m, n))
    out = np.empty((nb, m, n), np.uint32)
    rows = max(1, _CHUNK_TERMS // max(1, n * k))
    for bi in range(nb):
        sb_, sigb, eb = _split(b[bi])
        b_finite = np.isfinite(b[bi]).all()
        for r0 in range(0, m, rows):
            ar = a[bi, r0:r0 + rows]
            cr = c[bi, r0:r0 + rows]
            out[bi, r0:r0 + rows] = _block_exact(ar, b[bi], cr, _split(ar), (sb_, sigb, eb),
                                                 b_finite)
    return out.reshape(batch + (m, n))


def _block_exact(a, b, c, a_split, b_split, b_finite) -> npt.NDArray[np.uint32]:
    """Exact D for rows ``a`` (r, K) against ``b`` (K, N) with C ``c`` (r, N)."""
    r, k = a.shape
    n = b.shape[1]
    sa, siga, ea = a_split
    sb, sigb, eb = b_split
    sign = (sa[:, :, None] ^ sb[None, :, :])                      # (r, K, N)
    sig = siga[:, :, None] * sigb[None, :, :]                     # < 2**64 (see matmul_exact)
    exp = ea[:, :, None] + eb[None, :, :]
    sc, sigc, ec = _split(c)
    ndots = r * n
    dot_idx = np.arange(ndots, dtype=np.int64).reshape(r, 1, n)
    dots = np.concatenate([np.broadcast_to(dot_idx, (r, k, n)).reshape(-1),
                           np.arange(ndots, dtype=np.int64)])
    neg, mag, lsb_exp, sticky, zero = _accumulate(
        dots, np.concatenate([sign.reshape(-1), sc.reshape(-1)]),
        np.concatenate([sig.reshape(-1), sigc.reshape(-1)]),
        np.concatenate([exp.reshape(-1), ec.reshape(-1)]), ndots)
    d = formats.round_to(formats.get("fp32"), neg, lsb_exp, mag, sticky, "rne", saturate=False)
    # An exact zero: -0 only when every product and C is a -0.
    prod_zero = sig == 0
    all_neg_zero = ((sign == 1) & prod_zero).all(axis=1).reshape(-1)
    c_neg_zero = (np.signbit(c) & (c == 0)).reshape(-1)
    d = np.where(zero, np.where(all_neg_zero & c_neg_zero, np.uint32(0x80000000),
                                np.uint32(0)), d).astype(np.uint32)
    # Special values, from the float64 products (their class is exact even where their
    # value is not needed).
    if not (np.isfinite(a).all() and b_finite and np.isfinite(c).all()):
        with np.errstate(invalid="ignore"):       # Inf * 0 -> NaN is the point here
            p = a[:, :, None] * b[None, :, :]
        has_nan = np.isnan(p).any(axis=1) | np.isnan(c)
        pos_inf = (p == np.inf).any(axis=1) | (c == np.inf)
        neg_inf = (p == -np.inf).any(axis=1) | (c == -np.inf)
        nan = (has_nan | (pos_inf & neg_inf)).reshape(-1)
        d = np.where(pos_inf.reshape(-1), FP32_POS_INF, d)
        d = np.where(neg_inf.reshape(-1), FP32_NEG_INF, d)
        d = np.where(nan, FP32_NAN, d).astype(np.uint32)
    return d.reshape(r, n)
