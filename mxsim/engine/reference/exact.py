"""The reference of the ``exact`` unit: every product, scale and C summed as Python fractions,
rounded once to FP32 (:func:`mxsim.engine.fast.matmul_exact` is its twin)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from ... import formats
from ...vectors import VectorSet
from . import trace

__all__ = ["matmul_exact", "round_fp32_rne"]


def round_fp32_rne(q: Fraction) -> int:
    """FP32 bit pattern of the exact rational ``q`` rounded to nearest even (IEEE overflow)."""
    if q == 0:
        return 0
    sign = 1 if q < 0 else 0
    q = abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:                    # now 2**e <= q < 2**(e+1)
        e -= 1
    e = max(e, -126)                            # subnormals share the smallest binade's LSB
    scaled = q * Fraction(2) ** (23 - e)        # significand in units of the LSB
    i = math.floor(scaled)
    rem = scaled - i
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and i % 2 == 1):
        i += 1
    if i == 1 << 24:
        i, e = i >> 1, e + 1
    if e > 127:
        return (sign << 31) | 0x7F800000
    exp_field = e + 127 if i >= 1 << 23 else 0
    return (sign << 31) | (exp_field << 23) | (i & ((1 << 23) - 1))


def _dot(terms: list[Fraction | float], c: float) -> int:
    """FP32 bits of sum(terms) + c, exact then rounded once.

    A term is a non-zero ``Fraction`` or a float zero/Inf/NaN carrying its IEEE class and sign.
    """
    values = terms + [c if not math.isfinite(c) or c == 0 else Fraction(c)]
    specials = [v for v in values if isinstance(v, float)]
    if any(math.isnan(v) for v in specials):
        return 0x7FFFFFFF
    pos_inf = any(v == math.inf for v in specials)
    neg_inf = any(v == -math.inf for v in specials)
    if pos_inf and neg_inf:
        return 0x7FFFFFFF
    if pos_inf:
        return 0x7F800000
    if neg_inf:
        return 0xFF800000
    total = sum((v for v in values if isinstance(v, Fraction)), Fraction(0))
    if total == 0:
        all_neg_zero = all(isinstance(v, float) and math.copysign(1.0, v) < 0 for v in values)
        return 0x80000000 if all_neg_zero else 0
    return round_fp32_rne(total)


def _mul(*factors: float) -> Fraction | float:
    """Exact product of float64 factors: a non-zero Fraction, or a float zero/Inf/NaN."""
    if any(math.isnan(f) for f in factors):
        return math.nan
    has_inf = any(math.isinf(f) for f in factors)
    has_zero = any(f == 0 for f in factors)
    if has_inf and has_zero:
        return math.nan
    negative = sum(math.copysign(1.0, f) < 0 for f in factors) % 2 == 1
    if has_inf:
        return -math.inf if negative else math.inf
    if has_zero:
        return -0.0 if negative else 0.0
    return math.prod(Fraction(f) for f in factors)


def _scale_factors(vs: VectorSet, bt: tuple, i: int, j: int, kk: int) -> list[float]:
    """Values of the A and B scales that apply to ``a[i, kk] * b[kk, j]``."""
    sa, sb = vs.a_scale, vs.b_scale
    if vs.scale_format in ("e8m0", "ue4m3"):
        f = formats.get(vs.scale_format)
        blk = kk // vs.block
        return [float(f.decode(sa[bt + (i, blk)])), float(f.decode(sb[bt + (blk, j)]))]
    if vs.block == 128:                       # 1x128 blocks of A, 128x128 blocks of B
        return [float(sa[bt + (i, kk // 128)]), float(sb[bt + (kk // 128, j // 128)])]
    if sa.ndim == 0:                          # per tensor
        return [float(sa), float(sb)]
    return [float(sa[bt + (i, 0)]), float(sb[bt + (0, j)])]   # row-wise


def matmul_exact(vs: VectorSet) -> npt.NDArray[np.uint32]:
    """The ``exact`` unit, as :func:`mxsim.engine.fast.matmul_exact` documents it."""
    a = formats.get(vs.a_format).decode(vs.a)
    b = formats.get(vs.b_format).decode(vs.b)
    c = (formats.get(vs.c_format).decode(vs.c) if vs.c is not None
         else np.zeros(vs.batch_shape + (vs.m, vs.n)))
    ts = float(vs.tensor_scale) if vs.tensor_scale is not None else None
    out = np.empty(vs.batch_shape + (vs.m, vs.n), np.uint32)
    for flat, idx in enumerate(np.ndindex(*vs.batch_shape, vs.m, vs.n)):
        *bt, i, j = idx
        bt = tuple(bt)
        terms = []
        with trace.scope("", dot=flat):
            if trace.active():
                trace.note("c", "c", _noted(float(c[idx])))
            for kk in range(vs.k):
                factors = [float(a[bt + (i, kk)]), float(b[bt + (kk, j)])]
                if vs.scale_format is not None:
                    factors += _scale_factors(vs, bt, i, j, kk)
                if ts is not None:
                    factors.append(ts)
                terms.append(_mul(*factors))
                if trace.active():
                    trace.note("product", f"p{kk}", _noted(terms[-1]), factors=[
                        trace.exact(Fraction(f)) if math.isfinite(f) else str(f)
                        for f in factors])
            out[idx] = _dot(terms, float(c[idx]))
            if trace.active():
                trace.note("result", "d", _noted(float(np.uint32(out[idx]).view(np.float32))),
                           code=hex(int(out[idx])), format="fp32", rounding="rne",
                           exact=sum((t for t in terms + [_noted(float(c[idx])).q]
                                      if isinstance(t, Fraction)), Fraction(0)))
    return out


def _noted(v: Fraction | float):
    """A term or float as the trace writes values (exact; NaN, Inf and a zero's sign)."""
    if isinstance(v, Fraction):
        return v
    if math.isnan(v):
        return trace.Value("nan")
    if math.isinf(v):
        return trace.Value("inf", neg=v < 0)
    return trace.Value("num", Fraction(v), math.copysign(1.0, v) < 0)
