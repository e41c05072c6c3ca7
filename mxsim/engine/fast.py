"""Fast, vectorised engine: whole batches of dot products with numpy, bit-exact.

``matmul_exact`` computes the ``exact`` unit: every product, scale and C is combined without
rounding in a superaccumulator, and the sum is rounded once to FP32 by
:func:`mxsim.formats.round_to`. Its twin, :mod:`mxsim.engine.reference`, computes the same with
Python fractions; a test holds them equal.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .. import formats
from ..formats import Overflow, _bit_length
from ..spec import Align, CMode, Product, UnitSpec, ZeroSign
from ..vectors import VectorSet
from . import _kernels
from .specials import FP32_NAN, FP32_NEG_INF, FP32_POS_INF

__all__ = ["matmul_exact", "dot"]

_LIMB = 16                      # bits per superaccumulator limb
_LIMB_MASK = np.uint64((1 << _LIMB) - 1)
_CHUNK_TERMS = 1 << 21          # products materialised at once (bounds memory to ~100 MB)
_RUN_TERMS = 1 << 22            # terms per float64 limb sum: below 2**53 with pieces < 2**31
_MAX_TERMS = 1 << 32            # terms per superaccumulator call: int64 limb sums stay exact
_CHUNK_DOTS = 1 << 15           # dots per compiled-kernel call
_THREADS = os.cpu_count() or 1


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

    Each term is split into 16-bit pieces placed in 16-bit limbs (a term puts at most one
    piece in each limb); ``np.bincount`` adds the pieces of each (dot, limb) in float64 over
    runs of at most ``2**22`` terms, which is exact because every partial sum is then an
    integer below ``2**53`` (pieces are below ``2**31``), and the runs' sums add in int64
    (exact below ``2**32`` terms in all).
    """
    live = sig != 0
    dot, sign, sig, exp = dot[live], sign[live], sig[live], exp[live]
    if sig.size == 0:
        zeros = np.zeros(ndots, np.int64)
        return (zeros.astype(bool), zeros.astype(np.uint64), zeros, zeros.astype(bool),
                np.ones(ndots, bool))
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
    limbs = np.zeros(ndots * nlimbs, np.int64)
    for t0 in range(0, sig.size, _RUN_TERMS):
        run = slice(t0, t0 + _RUN_TERMS)
        sums = np.zeros(ndots * nlimbs, np.float64)
        for j in range(npieces):
            piece = (sig[run] >> np.uint64(_LIMB * j)) & _LIMB_MASK
            w = (piece << off[run]).astype(np.float64) * weight_sign[run]   # < 2**31, exact
            sums += np.bincount(slot[run] + j, weights=w, minlength=ndots * nlimbs)
        limbs += sums.astype(np.int64)
    limbs = limbs.reshape(ndots, nlimbs)
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
    fa, fb = formats.get(vs.a_format), formats.get(vs.b_format)
    batch = vs.batch_shape
    nb = int(np.prod(batch, dtype=np.int64))
    m, n, k = vs.m, vs.n, vs.k
    a = fa.decode(vs.a).reshape(nb, m, k)
    b = fb.decode(vs.b).reshape(nb, k, n)
    scales = vs.scale_values()
    # Inf times a zero scale (UE4M3 0, FP32 0) is NaN, as it should be: no warning for it.
    with np.errstate(invalid="ignore"):
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


# -- the general unit: chained (truncated) fused dot-product-add steps ---------------------

@dataclass
class _Operand:
    """Exact fields of one operand: value = (-1)**sign * sig * 2**lsb; ``e`` is the exponent
    the alignment uses; non-finite codes get ``sig = 0`` and a flag."""
    sign: npt.NDArray[np.int64]
    sig: npt.NDArray[np.int64]
    lsb: npt.NDArray[np.int64]
    e: npt.NDArray[np.int64]
    zero: npt.NDArray[np.bool_]
    nan: npt.NDArray[np.bool_]
    inf: npt.NDArray[np.bool_]

    @classmethod
    def of(cls, fmt: formats.Format, codes: npt.NDArray) -> _Operand:
        sign, e, sig = fmt.fields(codes)
        cls_ = fmt.classify(codes)
        nan = cls_ == formats.Class.NAN
        inf = cls_ == formats.Class.INF
        sig = np.where(nan | inf, 0, sig).astype(np.int64)
        e = e.astype(np.int64)
        zero = (sig == 0) & ~nan & ~inf
        return cls(sign.astype(np.int64), sig, e - fmt.man_bits, e, zero, nan, inf)

    def take(self, index) -> _Operand:
        return _Operand(*(getattr(self, f)[index] for f in
                          ("sign", "sig", "lsb", "e", "zero", "nan", "inf")))


def _align_terms(sig: npt.NDArray[np.int64], sign: npt.NDArray[np.int64],
                 shift: npt.NDArray[np.int64], align: Align) -> npt.NDArray[np.int64]:
    """Signed multiples of the step's LSB: ``±sig * 2**-shift`` rounded by ``align``.

    For ``Align.RZ_JAM`` the LSB is one bit lower and that bit is the OR of the discarded
    bits, so the result is in units of half the step's LSB.
    """
    if align is Align.RZ_JAM:
        shift = shift - 1
    right = np.clip(shift, 0, 63)
    left = np.clip(-shift, 0, 62)
    big = shift >= 63                      # every bit is discarded (sig < 2**62)
    kept = np.where(shift > 0, sig >> right, sig << left)
    kept = np.where(big, 0, kept)
    discarded = np.where(shift > 0, sig - (kept << right), 0)
    discarded = np.where(big, sig, discarded)
    if align is Align.RZ:
        mag = kept
    elif align is Align.RZ_JAM:
        mag = np.where(discarded != 0, kept | 1, kept)
        mag = np.where((shift > 0) & ~big, mag, np.where(big, (sig != 0).astype(np.int64),
                                                          kept))
    elif align is Align.RD:
        mag = kept + ((discarded != 0) & (sign == 1))
    else:  # RNE
        half = np.where(shift > 0, np.int64(1) << np.clip(right - 1, 0, 62), 0)
        up = (discarded > half) | ((discarded == half) & (half > 0) & ((kept & 1) == 1))
        up &= ~big
        mag = kept + up
    return np.where(sign == 1, -mag, mag)


def _step_terms(spec: UnitSpec, ops: _Operands, a: _Operand, b: _Operand, sa, sb):
    """Signs, significands, LSB and alignment exponents of one step's product terms.

    ``a`` is (r, g) and ``b`` (g, N); the result arrays are (r, t, N) with t = g products, or
    t = g / G group terms for GST-FDPA. Also returns the special-value flags per term.
    """
    psign = a.sign[:, :, None] ^ b.sign[None, :, :]
    psig = a.sig[:, :, None] * b.sig[None, :, :]
    plsb = a.lsb[:, :, None] + b.lsb[None, :, :]
    pnan = a.nan[:, :, None] | b.nan[None, :, :]
    pinf = a.inf[:, :, None] | b.inf[None, :, :]
    zero_factor = a.zero[:, :, None] | b.zero[None, :, :]
    if sa is not None:
        pnan = pnan | sa.nan[:, :, None] | sb.nan[None, :, :]
        zero_factor = zero_factor | sa.zero[:, :, None] | sb.zero[None, :, :]
    pnan = pnan | (pinf & zero_factor)
    pinf = pinf & ~pnan
    if spec.group is not None:
        G = spec.group
        r, g, n = psig.shape
        base = ops.a_lsb_min + ops.b_lsb_min
        fixed = psig << (plsb - base)                     # exact: every product at one LSB
        fixed = np.where(psign == 1, -fixed, fixed).reshape(r, g // G, G, n)
        gsum = fixed.sum(axis=2)
        all_zero = (psig == 0).reshape(r, g // G, G, n).all(axis=2)
        first = slice(0, g, G)                            # a group's scale: its block's
        gsa, gsb = sa.take((slice(None), first)), sb.take((first, slice(None)))
        sig = np.abs(gsum) * gsa.sig[:, :, None] * gsb.sig[None, :, :]
        sign = (gsum < 0).astype(np.int64)
        lsb = base + gsa.lsb[:, :, None] + gsb.lsb[None, :, :]
        align_e = gsa.e[:, :, None] + gsb.e[None, :, :]
        # A group whose products are all zero, or whose scale is zero, aligns at e_zero; a
        # group whose non-zero products cancel keeps its scale exponent (MMA-Sim's GST-FDPA).
        align_e = np.where(all_zero | gsa.zero[:, :, None] | gsb.zero[None, :, :],
                           spec.e_zero, align_e)
        gnan = pnan.reshape(r, g // G, G, n).any(axis=2)
        ginf_p = (pinf & (psign == 0)).reshape(r, g // G, G, n).any(axis=2)
        ginf_n = (pinf & (psign == 1)).reshape(r, g // G, G, n).any(axis=2)
        return sign, sig, lsb, align_e, gnan, ginf_p, ginf_n
    if sa is not None:
        psig = psig * sa.sig[:, :, None] * sb.sig[None, :, :]
        plsb = plsb + sa.lsb[:, :, None] + sb.lsb[None, :, :]
    if spec.product is Product.RAW:
        align_e = a.e[:, :, None] + b.e[None, :, :]
        if sa is not None:
            align_e = align_e + sa.e[:, :, None] + sb.e[None, :, :]
    else:
        align_e = plsb + _bit_length(psig.astype(np.uint64)) - 1
    align_e = np.where(psig == 0, spec.e_zero, align_e)
    return (psign, psig, plsb, align_e, pnan, pinf & (psign == 0), pinf & (psign == 1))


@dataclass
class _Operands:
    """Fields of A, B and their scales for a whole vector set, computed once."""
    a: _Operand
    b: _Operand
    sa: _Operand | None
    sb: _Operand | None
    a_lsb_min: int
    b_lsb_min: int
    specials: bool

    @classmethod
    def of(cls, spec: UnitSpec, vs: VectorSet) -> _Operands:
        fa, fb = formats.get(vs.a_format), formats.get(vs.b_format)
        nb = int(np.prod(vs.batch_shape, dtype=np.int64))
        a_codes, b_codes = vs.a.reshape(nb, vs.m, vs.k), vs.b.reshape(nb, vs.k, vs.n)
        folded = False
        if spec.upcast is not None:
            # The operands as the tensor core sees them: re-encoded in the upcast format (with
            # the block scales folded in, where the spec says so), whose fields then give the
            # alignment exponents.
            up = formats.get(spec.upcast)
            va = _upcast_values(fa, a_codes, spec.upcast_specials)
            vb = _upcast_values(fb, b_codes, spec.upcast_specials)
            if spec.fold_scales:
                blk = vs.block
                with np.errstate(invalid="ignore"):      # Inf * a zero scale is NaN
                    va = va * np.repeat(_folded_scales(vs.a_scale.reshape(nb, vs.m, -1)), blk, -1)
                    vb = vb * np.repeat(_folded_scales(vs.b_scale.reshape(nb, -1, vs.n)), blk,
                                        -2)
                folded = True
            a_codes = up.encode(va, "rne", saturate=False)
            b_codes = up.encode(vb, "rne", saturate=False)
            fa = fb = up
        a = _Operand.of(fa, a_codes)
        b = _Operand.of(fb, b_codes)
        sa = sb = None
        if vs.scale_format is not None and not folded:
            fs = formats.get(vs.scale_format)
            blk = vs.block
            sa = _Operand.of(fs, np.repeat(vs.a_scale.reshape(nb, vs.m, -1), blk, axis=-1))
            sb = _Operand.of(fs, np.repeat(vs.b_scale.reshape(nb, -1, vs.n), blk, axis=-2))
            sa.sign[...] = 0          # UE4M3's sign bit is ignored, E8M0 has none
            sb.sign[...] = 0
        specials = bool(a.nan.any() or a.inf.any() or b.nan.any() or b.inf.any()
                        or (sa is not None and (sa.nan.any() or sb.nan.any())))
        lsb_min = lambda f: (f.emin - f.man_bits) if f.kind == "float" else -f.man_bits  # noqa: E731
        return cls(a, b, sa, sb, lsb_min(fa), lsb_min(fb), specials)


def _upcast_values(fmt: formats.Format, codes: npt.NDArray, specials: str) -> npt.NDArray:
    """Element values as an upcast reads them: exactly, or (``specials="finite"``) with an
    IEEE-style format's Inf/NaN codes read as ``±2**(emax+1) * (1 + m / 2**man_bits)``."""
    values = fmt.decode(codes)
    if specials == "finite" and fmt.kind == "float" and fmt.specials is formats.Specials.IEEE:
        top = fmt.exp(codes) == (1 << fmt.exp_bits) - 1
        mag = np.ldexp(1.0 + fmt.man(codes) / (1 << fmt.man_bits), fmt.emax + 1)
        values = np.where(top, np.where(fmt.sign(codes) == 1, -mag, mag), values)
    return values


def _folded_scales(codes: npt.NDArray) -> npt.NDArray[np.float64]:
    """E8M0 scale values as a bf16-folding emulation builds them: 0x00 is 0, 0xFF NaN."""
    codes = codes.astype(np.int64)
    return np.where(codes == 0xFF, np.nan,
                    np.where(codes == 0, 0.0, np.ldexp(1.0, codes - 127)))


def _special_codes(fmt: formats.Format, nan, pinf, ninf, codes):
    """Overwrite results with NaN / ±Inf codes of ``fmt`` where the flags say so."""
    codes = np.where(pinf, fmt.code_of_inf, codes)
    codes = np.where(ninf, fmt.code_of_inf | (1 << fmt.sign_shift), codes)
    return np.where(nan | (pinf & ninf), fmt.code_of_nan, codes).astype(fmt.code_dtype)


def _step(spec: UnitSpec, ops: _Operands, a: _Operand, b: _Operand, sa: _Operand | None,
          sb: _Operand | None, acc_codes: npt.NDArray | None, acc_in: formats.Format,
          b_side=None) -> npt.NDArray:
    """One fused step of rows ``a`` (r, g) against columns ``b`` (g, N); acc_format codes.

    ``b_side`` is B prepared for the compiled kernel (None: use numpy).
    """
    acc_fmt = formats.get(spec.acc_format)
    zero_acc = acc_codes is ZERO
    acc = None if acc_codes is None or zero_acc else _Operand.of(acc_in, acc_codes)
    if b_side is not None:
        q, step_lsb, flags = _kernels.step_sums(
            a, sa, b_side, acc, spec.frac_bits, spec.align.value,
            spec.product is Product.NORMALIZED, spec.e_zero, zero_acc)
        codes = formats.round_to(acc_fmt, q < 0, step_lsb, np.abs(q).astype(np.uint64), False,
                                 spec.acc_rounding, spec.overflow)
        specials = bool((flags & 7).any())
        return _finish(spec, acc_fmt, codes, q == 0, (flags & 8) != 0, (flags & 1) != 0,
                       (flags & 2) != 0, (flags & 4) != 0, specials)
    sign, sig, lsb, align_e, nan, pinf, ninf = _step_terms(spec, ops, a, b, sa, sb)
    r, _, n = sig.shape
    e_max = align_e.max(axis=1)
    nan, pinf, ninf = nan.any(axis=1), pinf.any(axis=1), ninf.any(axis=1)
    all_neg_zero = ((sig == 0) & (sign == 1)).all(axis=1)
    if acc is not None:
        e_max = np.maximum(e_max, np.where(acc.sig == 0, spec.e_zero, acc.e))
        nan |= acc.nan
        pinf |= acc.inf & (acc.sign == 0)
        ninf |= acc.inf & (acc.sign == 1)
        all_neg_zero &= (acc.sig == 0) & (acc.sign == 1)
    if spec.frac_bits is None:
        # Exact step: a superaccumulator over the products (and the accumulator).
        dots = np.broadcast_to(np.arange(r * n).reshape(r, 1, n), sig.shape).reshape(-1)
        parts = [(dots, sign.reshape(-1), sig.reshape(-1), lsb.reshape(-1))]
        if acc is not None:
            parts.append((np.arange(r * n), acc.sign.reshape(-1), acc.sig.reshape(-1),
                          acc.lsb.reshape(-1)))
        cat = [np.concatenate(x) for x in zip(*parts, strict=True)]
        neg, mag, lsb_exp, sticky, zero = _accumulate(
            cat[0], cat[1].astype(np.uint8), cat[2].astype(np.uint64), cat[3], r * n)
        codes = formats.round_to(acc_fmt, neg, lsb_exp, mag, sticky, spec.acc_rounding,
                                 spec.overflow).reshape(r, n)
        zero = zero.reshape(r, n)
    else:
        step_lsb = e_max - spec.frac_bits
        q = _align_terms(sig, sign, step_lsb[:, None, :] - lsb, spec.align).sum(axis=1)
        if acc is not None:
            q = q + _align_terms(acc.sig, acc.sign, step_lsb - acc.lsb, spec.align)
        if spec.align is Align.RZ_JAM:
            step_lsb = step_lsb - 1
        codes = formats.round_to(acc_fmt, q < 0, step_lsb, np.abs(q).astype(np.uint64), False,
                                 spec.acc_rounding, spec.overflow)
        zero = q == 0
    return _finish(spec, acc_fmt, codes, zero, all_neg_zero, nan, pinf, ninf,
                   ops.specials or acc is not None)


#: Use the compiled kernel where it applies (tests switch it off to check the numpy path).
USE_KERNEL = True


def _use_kernel() -> bool:
    return USE_KERNEL and _kernels.available()


def _kernel_applies(spec: UnitSpec) -> bool:
    """True when ``spec``'s fused steps are ones the compiled kernel computes (truncated
    alignment, no product groups); exact steps and the exact unit have no kernel."""
    return not spec.exact and spec.frac_bits is not None and spec.group is None


#: How much slower the numpy fallback is than the compiled kernel, as said to the user:
#: hopper-wgmma, 1M dots of K = 32, numba 0.68, 2 shared cores, 2026-12-01: 17.9x, 9.6x and
#: 16.4x in three runs (the last line of ``python benchmarks/bench_engine.py``).
NUMPY_SLOWDOWN = "10-20x"


def path(spec: UnitSpec) -> dict:
    """Which code computes ``spec``'s dots in this process: ``{"path": "numba" | "numpy",
    "compiled": bool, "numba": version or None, "note": why}``."""
    numba_version = _kernels.version()
    if not _kernel_applies(spec):
        return {"path": "numpy", "compiled": False, "numba": numba_version,
                "note": "numpy, exact sums (no compiled kernel for this spec)"}
    if _use_kernel():
        return {"path": "numba", "compiled": True, "numba": numba_version,
                "note": f"numba kernel (compiled, numba {numba_version})"}
    why = "numba is not installed" if numba_version is None else "the kernel is switched off"
    return {"path": "numpy", "compiled": False, "numba": numba_version,
            "note": f"numpy fallback, {NUMPY_SLOWDOWN} slower: {why} "
                    f"(pip install 'mxsim[fast]')"}


def _finish(spec, fmt, codes, exact_zero, all_neg_zero, nan, pinf, ninf, specials):
    """The sign of zero results (per the spec), then NaN and Inf where the terms force them."""
    mask = (1 << fmt.sign_shift) - 1
    if spec.zero_sign is ZeroSign.POSITIVE:
        codes = np.where((codes & mask) == 0, codes & mask, codes).astype(codes.dtype)
    else:
        # IEEE: an exact zero sum is -0 only when every term is a -0.
        neg_zero = np.where(all_neg_zero, 1 << fmt.sign_shift, 0)
        codes = np.where(exact_zero, neg_zero, codes).astype(codes.dtype)
    if specials:
        codes = _special_codes(fmt, nan, pinf, ninf, codes)
    return codes


def _add_round(out: formats.Format, x: npt.NDArray, fx: formats.Format, y: npt.NDArray,
               fy: formats.Format, rounding, overflow, zero_sign: ZeroSign) -> npt.NDArray:
    """``x + y`` (codes of two formats) exact, rounded once to ``out``."""
    ox, oy = _Operand.of(fx, x), _Operand.of(fy, y)
    n = x.size
    dots = np.concatenate([np.arange(n), np.arange(n)])
    neg, mag, lsb_exp, sticky, zero = _accumulate(
        dots, np.concatenate([ox.sign.ravel(), oy.sign.ravel()]).astype(np.uint8),
        np.concatenate([ox.sig.ravel(), oy.sig.ravel()]).astype(np.uint64),
        np.concatenate([ox.lsb.ravel(), oy.lsb.ravel()]), n)
    codes = formats.round_to(out, neg, lsb_exp, mag, sticky, rounding, overflow).reshape(x.shape)
    zero = zero.reshape(x.shape)
    mask = (1 << out.sign_shift) - 1
    if zero_sign is ZeroSign.POSITIVE:
        codes = np.where((codes & mask) == 0, codes & mask, codes)
    else:
        both_neg = ox.zero & oy.zero & (ox.sign == 1) & (oy.sign == 1)
        codes = np.where(zero, np.where(both_neg, 1 << out.sign_shift, 0), codes)
    nan = ox.nan | oy.nan
    pinf = ox.inf & (ox.sign == 0) | oy.inf & (oy.sign == 0)
    ninf = ox.inf & (ox.sign == 1) | oy.inf & (oy.sign == 1)
    return _special_codes(out, nan, pinf, ninf, codes)


def _convert(out: formats.Format, codes: npt.NDArray, fmt: formats.Format, rounding,
             overflow) -> npt.NDArray:
    """Codes of ``fmt`` rounded to ``out`` (exact when ``out`` holds every value of ``fmt``)."""
    if out.name == fmt.name:
        return codes
    if (out.exp_bits, out.bias, out.specials) == (fmt.exp_bits, fmt.bias, fmt.specials) \
            and out.man_bits >= fmt.man_bits and fmt.kind == out.kind == "float":
        # A narrower mantissa in the same exponent range (E8M13 in FP32): every value, Inf and
        # NaN maps over exactly by moving the fields.
        dt = out.code_dtype.type
        c = codes.astype(out.code_dtype, copy=False)
        sign = c >> dt(fmt.sign_shift)
        mag = c & dt((1 << fmt.sign_shift) - 1)
        return (sign << dt(out.sign_shift)) | (mag << dt(out.man_bits - fmt.man_bits))
    op = _Operand.of(fmt, codes)
    res = formats.round_to(out, op.sign, op.lsb, op.sig.astype(np.uint64), False, rounding,
                           overflow)
    return _special_codes(out, op.nan, op.inf & (op.sign == 0), op.inf & (op.sign == 1), res)


def dot(spec: UnitSpec, vs: VectorSet) -> npt.NDArray:
    """D = A·B + C of a vector set exactly as ``spec`` computes it; codes of ``spec.d_format``.

    A K longer than the instruction's chains instructions (D of one is C of the next), with
    promotion if the spec declares it. Raises UnitError when the vectors do not fit the spec.
    """
    spec.check_vectors(vs)
    if spec.exact:
        return matmul_exact(vs)
    if spec.epilogue == "block-fma":
        return _block_fma(spec, vs)
    if spec.epilogue is not None:
        inner, plain = _without_epilogue(spec, vs)
        return _epilogue(spec, vs, dot(inner, plain))
    ops = _Operands.of(spec, vs)
    d_fmt, acc_fmt = formats.get(spec.d_format), formats.get(spec.acc_format)
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n = vs.m, vs.n
    steps = [np.asarray(s, np.int64) for s in spec.steps()]
    out = np.empty((nb, m, n), d_fmt.code_dtype)
    for bi in range(nb):
        # The whole (M, N) accumulator lives across the chain; each step prepares its B
        # columns once and sweeps the rows in chunks that bound the temporaries. ZERO stands
        # for an accumulator known to be +0 everywhere (no C), which needs no decoding.
        d = ZERO if vs.c is None else vs.c.reshape(nb, m, n)[bi]
        total = None
        if spec.promote_every is not None:
            total, d = _codes_of(d, d_fmt, m, n), ZERO
        for inst in range(vs.k // spec.k):
            if total is not None and inst and inst % spec.promote_every == 0:
                total = _add_round(d_fmt, total, d_fmt, d, d_fmt, spec.promote_rounding,
                                   spec.overflow, spec.zero_sign)
                d = ZERO
            acc, acc_in = (None if spec.c_mode is CMode.AFTER else d), d_fmt
            for step in steps:
                acc = _step_all_rows(spec, ops, bi, inst * spec.k + step, acc, acc_in)
                acc_in = acc_fmt
            if spec.c_mode is CMode.AFTER:
                res = _convert(d_fmt, acc, acc_fmt, spec.acc_rounding, spec.overflow)
                res = _add_round(d_fmt, _codes_of(d, d_fmt, m, n), d_fmt, res, d_fmt,
                                 spec.c_rounding, spec.overflow, spec.zero_sign)
            else:
                res = _by_rows(lambda x: _convert(d_fmt, x, acc_fmt, spec.acc_rounding,
                                                  spec.overflow), acc)
            d = res
        if total is not None:
            d = _add_round(d_fmt, total, d_fmt, _codes_of(d, d_fmt, m, n), d_fmt,
                           spec.promote_rounding, spec.overflow, spec.zero_sign)
        d = _codes_of(d, d_fmt, m, n)
        out[bi] = _by_rows(lambda x: np.where(d_fmt.classify(x) == formats.Class.NAN,
                                              spec.d_nan, x).astype(d_fmt.code_dtype), d)
    return out.reshape(vs.batch_shape + (m, n))


def _without_epilogue(spec: UnitSpec, vs: VectorSet,
                      ks: slice | None = None) -> tuple[UnitSpec, VectorSet]:
    """The unit and vectors before the FP32 scales: no scales, no epilogue.

    With ``ks`` (block-fma), the vectors are one 128-K slice without C and the unit is the
    chain without promotion: the slice is one partial sum for the FMA to scale."""
    from dataclasses import replace
    inner = replace(spec, scale_format=None, block=None, epilogue=None)
    plain = replace(vs, a_scale=None, b_scale=None, scale_format=None, block=None, d=None)
    if ks is not None:
        inner = replace(inner, promote_every=None)
        plain = replace(plain, a=vs.a[..., ks], b=vs.b[..., ks, :], c=None)
    return inner, plain


def _block_slices(spec: UnitSpec, vs: VectorSet):
    """(partial-sum spec, [(vectors of one 128-K block, FP32 bits of fl(sa*sb))]) of a
    block-wise scaled unit: each block is the chain from +0 without scales or promotion."""
    n = vs.n
    out = []
    for kb in range(vs.k // 128):
        inner, plain = _without_epilogue(spec, vs, slice(kb * 128, (kb + 1) * 128))
        sa = np.asarray(vs.a_scale, np.float32)[..., kb][..., :, None]
        sb = np.repeat(np.asarray(vs.b_scale, np.float32)[..., kb, :], 128, axis=-1)[..., :n]
        shape = vs.batch_shape + (vs.m, n)
        s = _mul_fp32(np.broadcast_to(sa, shape).view(np.uint32),
                      np.broadcast_to(sb[..., None, :], shape).view(np.uint32))
        out.append((plain, s))
    return inner, out


def _fma_fp32(x: npt.NDArray, y: npt.NDArray, z: npt.NDArray) -> npt.NDArray[np.uint32]:
    """IEEE FP32 ``fma(x, y, z)`` on bit patterns: rounded once to nearest even.

    In float64 the product of two FP32 values is exact; TwoSum gives the sum's rounding error
    exactly, which turns the float64 sum into its round-to-odd value (53 >= 24 + 2 bits), and
    rounding that to FP32 is the correctly rounded FMA (Boldo & Melquiond, 2008)."""
    with np.errstate(all="ignore"):         # NaN and Inf flow through as IEEE says
        f64 = [np.asarray(v, np.uint32).view(np.float32).astype(np.float64) for v in (x, y, z)]
        prod = f64[0] * f64[1]
        s = prod + f64[2]
        bb = s - prod
        err = (prod - (s - bb)) + (f64[2] - bb)
        even = (s.view(np.uint64) & np.uint64(1)) == 0
        fix = np.isfinite(s) & (err != 0) & even
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
        return s.astype(np.float32).view(np.uint32)


def _block_fma(spec: UnitSpec, vs: VectorSet) -> npt.NDArray[np.uint32]:
    inner, blocks = _block_slices(spec, vs)
    shape = vs.batch_shape + (vs.m, vs.n)
    total = np.zeros(shape, np.uint32) if vs.c is None else np.asarray(vs.c, np.uint32)
    for plain, s in blocks:
        total = _fma_fp32(dot(inner, plain), s, total)
    nan = formats.get("fp32").classify(total) == formats.Class.NAN
    return np.where(nan, np.uint32(spec.d_nan), total).astype(np.uint32)


def _epilogue_scales(vs: VectorSet) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
    """FP32 bits of each dot's A scale and B scale (per tensor or row-wise)."""
    shape = vs.batch_shape + (vs.m, vs.n)
    sa = np.broadcast_to(np.asarray(vs.a_scale, np.float32), shape if vs.a_scale.ndim == 0
                         else vs.batch_shape + (vs.m, 1))
    sb = np.broadcast_to(np.asarray(vs.b_scale, np.float32), shape if vs.b_scale.ndim == 0
                         else vs.batch_shape + (1, vs.n))
    return (np.broadcast_to(sa, shape).view(np.uint32),
            np.broadcast_to(sb, shape).view(np.uint32))


def _mul_fp32(x: npt.NDArray, y: npt.NDArray) -> npt.NDArray[np.uint32]:
    """IEEE FP32 ``x * y`` on bit patterns: the exact product rounded once to nearest even."""
    fp32 = formats.get("fp32")
    ox, oy = _Operand.of(fp32, x), _Operand.of(fp32, y)
    sign = (ox.sign ^ oy.sign).astype(np.uint8)
    sig = ox.sig.astype(np.uint64) * oy.sig.astype(np.uint64)      # 24 x 24 bits: exact
    codes = formats.round_to(fp32, sign, ox.lsb + oy.lsb, sig, False, "rne", Overflow.IEEE)
    nan = ox.nan | oy.nan | (ox.inf & oy.zero) | (ox.zero & oy.inf)
    inf = (ox.inf | oy.inf) & ~nan
    return _special_codes(fp32, nan, inf & (sign == 0), inf & (sign == 1), codes)


def _epilogue(spec: UnitSpec, vs: VectorSet, d: npt.NDArray) -> npt.NDArray[np.uint32]:
    sa, sb = _epilogue_scales(vs)
    if spec.epilogue == "alpha":
        out = _mul_fp32(_mul_fp32(sa, sb), d)
        # alpha * D + beta * C with beta = 0: a -0 product plus +0 is +0 (measured on the
        # H200: 33,016 of 33,016 such outputs); the row-wise epilogue keeps -0 (4,098 of them).
        out = np.where(out == np.uint32(0x80000000), np.uint32(0), out)
    else:                                              # col-row
        out = _mul_fp32(_mul_fp32(d, sb), sa)
    nan = formats.get("fp32").classify(out) == formats.Class.NAN
    return np.where(nan, np.uint32(spec.d_nan), out).astype(np.uint32)


def _by_rows(fn, x: npt.NDArray) -> npt.NDArray:
    """``fn`` applied to cache-sized row chunks of ``x`` (on threads); ``fn`` is elementwise."""
    rows_per = max(1, _CHUNK_DOTS // max(1, x.shape[1]))
    starts = range(0, x.shape[0], rows_per)
    if len(starts) == 1:
        return fn(x)
    parts = [None] * len(starts)

    def run(i: int) -> None:
        parts[i] = fn(x[starts[i]:starts[i] + rows_per])

    if _THREADS > 1:
        with ThreadPoolExecutor(_THREADS) as pool:
            list(pool.map(run, range(len(starts))))
    else:
        for i in range(len(starts)):
            run(i)
    return np.concatenate(parts)


class _Zero:
    """An accumulator that is +0 everywhere (a vector set without C)."""


ZERO = _Zero()


def _codes_of(d, fmt: formats.Format, m: int, n: int) -> npt.NDArray:
    return np.zeros((m, n), fmt.code_dtype) if d is ZERO else d


def _step_all_rows(spec: UnitSpec, ops: _Operands, bi: int, idx: npt.NDArray,
                   acc: npt.NDArray | None, acc_in: formats.Format) -> npt.NDArray:
    """One fused step for every row of batch entry ``bi`` (in row chunks)."""
    m, n = ops.a.sig.shape[1], ops.b.sig.shape[2]
    b = ops.b.take(bi).take((idx, slice(None)))
    sb = None if ops.sb is None else ops.sb.take(bi).take((idx, slice(None)))
    kernel = _kernel_applies(spec) and _use_kernel()
    b_side = _kernels.prepare_b(b, sb) if kernel else None
    # Row chunks: ~_CHUNK_TERMS products in numpy temporaries; for the kernel, ~_CHUNK_DOTS
    # dots, so that the numpy rounding after it works on cache-sized arrays.
    rows_per = max(1, _CHUNK_DOTS // n if kernel else _CHUNK_TERMS // max(1, n * len(idx)))
    out = np.empty((m, n), formats.get(spec.acc_format).code_dtype)

    if acc is ZERO and not kernel:
        acc = np.zeros((m, n), acc_in.code_dtype)

    def chunk(r0: int) -> None:
        rows = slice(r0, min(m, r0 + rows_per))
        a = ops.a.take(bi).take((rows, idx))
        sa = None if ops.sa is None else ops.sa.take(bi).take((rows, idx))
        acc_rows = acc if acc is None or acc is ZERO else acc[rows]
        out[rows] = _step(spec, ops, a, b, sa, sb, acc_rows, acc_in, b_side)

    starts = range(0, m, rows_per)
    if kernel and len(starts) > 1 and _THREADS > 1:
        # The kernel and most numpy calls release the GIL: row chunks run side by side.
        with ThreadPoolExecutor(_THREADS) as pool:
            list(pool.map(chunk, starts))
    else:
        for r0 in starts:
            chunk(r0)
    return out


