"""The ``exact`` unit in the fast engine: every term summed without rounding, rounded once.

Its twin, :func:`mxsim.engine.reference.matmul_exact`, computes the same with Python
fractions; a test holds them equal.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ... import formats
from ...vectors import VectorSet
from ..exactsum import exact_sums, float_terms
from ..specials import FP32_NAN, FP32_NEG_INF, FP32_POS_INF
from ..xp import of as xp_of

__all__ = ["matmul_exact"]

_CHUNK_TERMS = 1 << 21          # products materialised at once (bounds memory to ~100 MB)
_GPU_CHUNK_TERMS = 1 << 25      # the same on a GPU


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
    xp = xp_of(vs.a)
    batch = vs.batch_shape
    nb = int(np.prod(batch, dtype=np.int64))
    m, n, k = vs.m, vs.n, vs.k
    if xp is not np and vs.scale_format == "fp32":
        # FP32 scales decoded from their bits: CuPy's float32 -> float64 cast flushes
        # subnormals to zero.
        fp32 = formats.get("fp32")
        vs = vs._derived(a_scale=fp32.decode(vs.a_scale.view(np.uint32)),
                         b_scale=fp32.decode(vs.b_scale.view(np.uint32)))
    a = fa.decode(vs.a).reshape(nb, m, k)
    b = fb.decode(vs.b).reshape(nb, k, n)
    scales = vs.scale_values()
    # Inf times a zero scale (UE4M3 0, FP32 0) is NaN, as it should be: no warning for it.
    with np.errstate(invalid="ignore"):
        if scales is not None:
            sa, sb = scales
            a = a * xp.broadcast_to(sa, batch + (m, k)).reshape(nb, m, k)   # exact: see below
            b = b * xp.broadcast_to(sb, batch + (k, n)).reshape(nb, k, n)
        if vs.tensor_scale is not None:
            a = a * float(vs.tensor_scale)
    # Every product above is exact in float64: element significands have at most 8 bits and
    # scale significands at most 24 (FP32) or 4 (+24 for the tensor scale), and the exponent
    # range stays far inside float64's.
    if vs.c is not None:
        c = formats.get(vs.c_format).decode(vs.c).reshape(nb, m, n)
    else:
        c = xp.zeros((nb, m, n))
    out = xp.empty((nb, m, n), np.uint32)
    rows = max(1, (_CHUNK_TERMS if xp is np else _GPU_CHUNK_TERMS) // max(1, n * k))
    for bi in range(nb):
        sb_, sigb, eb = float_terms(b[bi])
        b_finite = np.isfinite(b[bi]).all()
        for r0 in range(0, m, rows):
            ar = a[bi, r0:r0 + rows]
            cr = c[bi, r0:r0 + rows]
            out[bi, r0:r0 + rows] = _block_exact(ar, b[bi], cr, float_terms(ar), (sb_, sigb, eb),
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
    sc, sigc, ec = float_terms(c)
    ndots = r * n
    xp = xp_of(sig)
    dot_idx = xp.arange(ndots, dtype=np.int64).reshape(r, 1, n)
    dots = xp.concatenate([xp.broadcast_to(dot_idx, (r, k, n)).reshape(-1),
                           xp.arange(ndots, dtype=np.int64)])
    neg, mag, lsb_exp, sticky, zero = exact_sums(
        dots, xp.concatenate([sign.reshape(-1), sc.reshape(-1)]),
        xp.concatenate([sig.reshape(-1), sigc.reshape(-1)]),
        xp.concatenate([exp.reshape(-1), ec.reshape(-1)]), ndots)
    d = formats.round_to(formats.get("fp32"), neg, lsb_exp, mag, sticky, "rne",
                         formats.Overflow.IEEE)
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
