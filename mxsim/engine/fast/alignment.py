"""The fast engine's terms of one fused step, and their alignment to the step's LSB.

:func:`step_terms` forms a step's product terms (or GST-FDPA group terms) with their exact
values, alignment exponents and IEEE flags; :func:`align_terms` rounds terms to the step's
LSB as the spec's ``Align`` says. Both work on whole (rows, terms, columns) arrays.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ...formats import bit_length
from ...spec import Align, Product, ScaleSumOverflow, UnitSpec
from .operands import Operand, Operands

__all__ = ["align_terms", "step_terms", "scale_sum_shift"]


def scale_sum_shift(spec: UnitSpec, sa_e: npt.NDArray[np.int64],
                    sb_e: npt.NDArray[np.int64]) -> npt.NDArray[np.int64] | int:
    """What the spec's scale-exponent sum field adds to the exact sum ``sa_e + sb_e`` of two
    E8M0 scale exponents: 0 without ``scale_sum_bits``; else the sum held in that many bits of
    two's complement (wrapped modulo ``2**bits``, or saturated) minus the sum."""
    if spec.scale_sum_bits is None:
        return 0
    total = sa_e + sb_e
    half = 1 << (spec.scale_sum_bits - 1)
    if spec.scale_sum_overflow is ScaleSumOverflow.SATURATE:
        held = np.clip(total, -half, half - 1)
    else:
        held = ((total + half) & (2 * half - 1)) - half
    return held - total


def align_terms(sig: npt.NDArray[np.int64], sign: npt.NDArray[np.int64],
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


def step_terms(spec: UnitSpec, ops: Operands, a: Operand, b: Operand, sa: Operand | None,
               sb: Operand | None) -> tuple:
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
        if spec.scale_sum_bits is not None:       # the scale exponents' sum, held narrow
            shift = scale_sum_shift(spec, gsa.e[:, :, None], gsb.e[None, :, :])
            lsb, align_e = lsb + shift, align_e + shift
        # A group whose products are all zero, or whose scale is zero, aligns at e_zero; a
        # group whose non-zero products cancel keeps its scale exponent (MMA-Sim's GST-FDPA).
        align_e = np.where(all_zero | gsa.zero[:, :, None] | gsb.zero[None, :, :],
                           spec.e_zero, align_e)
        gnan = pnan.reshape(r, g // G, G, n).any(axis=2)
        ginf_p = (pinf & (psign == 0)).reshape(r, g // G, G, n).any(axis=2)
        ginf_n = (pinf & (psign == 1)).reshape(r, g // G, G, n).any(axis=2)
        return sign, sig, lsb, align_e, gnan, ginf_p, ginf_n
    shift = 0
    if sa is not None:
        psig = psig * sa.sig[:, :, None] * sb.sig[None, :, :]
        plsb = plsb + sa.lsb[:, :, None] + sb.lsb[None, :, :]
        if spec.scale_sum_bits is not None:       # the scale exponents' sum, held narrow
            shift = scale_sum_shift(spec, sa.e[:, :, None], sb.e[None, :, :])
            plsb = plsb + shift
    if spec.product is Product.RAW:
        align_e = a.e[:, :, None] + b.e[None, :, :]
        if sa is not None:
            align_e = align_e + sa.e[:, :, None] + sb.e[None, :, :]
            if spec.scale_sum_bits is not None:
                align_e = align_e + shift
    else:
        align_e = plsb + bit_length(psig.astype(np.uint64)) - 1
    align_e = np.where(psig == 0, spec.e_zero, align_e)
    return (psign, psig, plsb, align_e, pnan, pinf & (psign == 0), pinf & (psign == 1))
