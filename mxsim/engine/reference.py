"""Exact reference engine: Python fractions, one dot product at a time, obviously correct.

It shares nothing with :mod:`mxsim.engine.fast` but :meth:`mxsim.formats.Format.decode` (which
is itself checked exhaustively against independent tables) and the plumbing of
:func:`mxsim.engine.epilogue.without_epilogue` (which vectors run before the FP32 scales).
Slow by design; tests hold the fast engine equal to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from .. import formats
from ..formats import Overflow, Rounding
from ..spec import Align, CMode, Product, Reduce, Specials, UnitSpec, ZeroSign
from ..vectors import VectorSet

# Plumbing only (which vectors and which unit run before the FP32 scales), no arithmetic.
from .epilogue import without_epilogue

__all__ = ["matmul_exact", "dot", "round_fp32_rne"]


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
    for idx in np.ndindex(*vs.batch_shape, vs.m, vs.n):
        *bt, i, j = idx
        bt = tuple(bt)
        terms = []
        for kk in range(vs.k):
            factors = [float(a[bt + (i, kk)]), float(b[bt + (kk, j)])]
            if vs.scale_format is not None:
                factors += _scale_factors(vs, bt, i, j, kk)
            if ts is not None:
                factors.append(ts)
            terms.append(_mul(*factors))
        out[idx] = _dot(terms, float(c[idx]))
    return out


# -- the general unit, one dot at a time ----------------------------------------------------

@dataclass(frozen=True)
class _Val:
    """A value in flight: a finite Fraction (with the sign of a zero), NaN, or ±Inf."""
    kind: str                      # "num", "nan" or "inf"
    q: Fraction = Fraction(0)
    neg: bool = False              # sign of a zero or an Inf

    @classmethod
    def of_code(cls, fmt: formats.Format, code: int) -> _Val:
        v = float(fmt.decode(np.array([code], fmt.code_dtype))[0])
        if math.isnan(v):
            return cls("nan")
        if math.isinf(v):
            return cls("inf", neg=v < 0)
        return cls("num", Fraction(v), math.copysign(1.0, v) < 0)

    @classmethod
    def of_bits(cls, fmt: formats.Format, code: int) -> _Val:
        """The number the bits of ``code`` spell, NaN and Inf codes included."""
        sign, e, sig = (int(x[0]) for x in fmt.fields(np.array([code], fmt.code_dtype)))
        q = sig * Fraction(2) ** (e - fmt.man_bits)
        return cls("num", -q if sign else q, bool(sign))


def _input(spec: UnitSpec, fmt: formats.Format, code: int) -> _Val:
    """An input code (element, scale or C) as the unit reads it: with ``specials="none"``
    the number its bits spell, else as the format defines it."""
    if spec.specials is Specials.NONE:
        return _Val.of_bits(fmt, code)
    return _Val.of_code(fmt, code)


def _round_value(q: Fraction, fmt: formats.Format, rounding: Rounding,
                 overflow: Overflow) -> _Val:
    """``q`` rounded to ``fmt`` (its precision, subnormals and range), as a _Val."""
    if q == 0:
        return _Val("num", Fraction(0), False)
    neg = q < 0
    mag = abs(q)
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    if Fraction(2) ** e > mag:
        e -= 1
    lsb = Fraction(2) ** (max(e, fmt.emin) - fmt.man_bits)
    units = mag / lsb
    low = math.floor(units)
    frac = units - low
    if rounding is Rounding.RZ or frac == 0:
        up = False
    elif rounding is Rounding.RNE:
        up = frac > Fraction(1, 2) or (frac == Fraction(1, 2) and low % 2 == 1)
    elif rounding is Rounding.RNA:
        up = frac >= Fraction(1, 2)
    elif rounding is Rounding.RU:
        up = not neg
    elif rounding is Rounding.RD:
        up = neg
    else:
        raise ValueError(f"Rounding {rounding} is not used by unit specs")
    r = (low + up) * lsb
    if r > Fraction(fmt.max):
        if overflow is Overflow.SATURATE or (overflow is Overflow.IEEE and (
                rounding is Rounding.RZ or (rounding is Rounding.RU and neg)
                or (rounding is Rounding.RD and not neg))):
            return _Val("num", -Fraction(fmt.max) if neg else Fraction(fmt.max), neg)
        return _Val("inf", neg=neg)
    return _Val("num", -r if neg else r, neg)


def _code(fmt: formats.Format, v: _Val) -> int:
    if v.kind == "nan":
        return fmt.code_of_nan
    if v.kind == "inf":
        return fmt.code_of_inf | (int(v.neg) << fmt.sign_shift)
    if v.q == 0:
        return int(v.neg) << fmt.sign_shift
    return int(fmt.encode(np.array([float(v.q)]), "rne", saturate=False)[0])


def _sum_specials(values: list[_Val]) -> _Val | None:
    """NaN or ±Inf if the values force one (IEEE: NaN wins, +Inf + -Inf is NaN)."""
    if any(v.kind == "nan" for v in values):
        return _Val("nan")
    infs = {v.neg for v in values if v.kind == "inf"}
    if len(infs) == 2:
        return _Val("nan")
    if infs:
        return _Val("inf", neg=infs.pop())
    return None


def _align(x: Fraction, align: Align) -> int:
    """``x`` (in units of the step's LSB) as an integer, by the spec's alignment rounding."""
    if align is Align.RZ:
        return math.trunc(x)
    if align is Align.RD:
        return math.floor(x)
    if align is Align.RNE:
        return round(x)                 # Fraction.__round__ rounds half to even
    twice = abs(x) * 2                  # RZ_JAM: units of half an LSB, plus a jam bit
    t = math.floor(twice)
    if t != twice:
        t |= 1
    return -t if x < 0 else t


def _product(spec: UnitSpec, vs: VectorSet, bt: tuple, i: int, j: int, kk: int,
             scaled: bool = True):
    """(value, alignment exponent) of one product, times its block scales if ``scaled``."""
    fa, fb = formats.get(vs.a_format), formats.get(vs.b_format)
    ca, cb = int(vs.a[bt + (i, kk)]), int(vs.b[bt + (kk, j)])
    if spec.fold_scales:
        # Each operand times its scale, rounded once into the upcast format.
        up = formats.get(spec.upcast)
        blk = kk // vs.block
        va = _fold(spec, up, fa, ca, int(vs.a_scale[bt + (i, blk)]))
        vb = _fold(spec, up, fb, cb, int(vs.b_scale[bt + (blk, j)]))
        e = sum(int(up.fields(_code(up, v)).e) for v in (va, vb))
        return _mul_vals([va, vb]), e
    va, vb = _upcast_val(spec, fa, ca), _upcast_val(spec, fb, cb)
    factors = [va, vb]
    if spec.upcast is not None:
        # Exponents as the upcast format holds the values (an exact conversion).
        up = formats.get(spec.upcast)
        e = int(up.fields(_code(up, va)).e) + int(up.fields(_code(up, vb)).e)
    else:
        e = int(fa.fields(ca).e) + int(fb.fields(cb).e)
    if scaled and vs.scale_format is not None:
        fs = formats.get(vs.scale_format)
        blk = kk // vs.block
        for code in (int(vs.a_scale[bt + (i, blk)]), int(vs.b_scale[bt + (blk, j)])):
            code &= fs.value_mask                   # UE4M3's sign bit is ignored
            factors.append(_input(spec, fs, code))
            e += int(fs.fields(code).e)
    return _mul_vals(factors), e


def _upcast_val(spec: UnitSpec, fmt: formats.Format, code: int) -> _Val:
    """An element as the unit reads it: with ``upcast_specials="finite"``, the top exponent
    binade of an IEEE-style format holds numbers, not Inf and NaN; with ``specials="none"``
    every code is the number its bits spell."""
    if spec.specials is Specials.NONE:
        return _Val.of_bits(fmt, code)
    bits = fmt.bits - 1 - fmt.man_bits if fmt.kind == "float" else 0
    top = (code >> fmt.man_bits) & ((1 << bits) - 1) == (1 << bits) - 1 if bits else False
    if spec.upcast_specials == "finite" and fmt.kind == "float" \
            and fmt.specials is formats.Specials.IEEE and top:
        man = Fraction(code & ((1 << fmt.man_bits) - 1), 1 << fmt.man_bits)
        q = Fraction(2) ** (fmt.emax + 1) * (1 + man)
        neg = bool(code >> (fmt.bits - 1) & 1)
        return _Val("num", -q if neg else q, neg)
    return _Val.of_code(fmt, code)


def _fold(spec: UnitSpec, up: formats.Format, fmt: formats.Format, code: int,
          scale: int) -> _Val:
    """fl_up(element * scale) with the scale as a bf16-building emulation reads E8M0."""
    v = _upcast_val(spec, fmt, code)
    s = (_Val("nan") if scale == 0xFF else _Val("num") if scale == 0 else
         _Val("num", Fraction(2) ** (scale - 127)))
    p = _mul_vals([v, s])
    if p.kind != "num" or p.q == 0:
        return p
    return _round_value(p.q, up, Rounding.RNE, Overflow.IEEE)


def _mul_vals(factors: list[_Val]) -> _Val:
    if any(f.kind == "nan" for f in factors):
        return _Val("nan")
    neg = sum(f.neg if f.kind == "inf" or f.q == 0 else f.q < 0 for f in factors) % 2 == 1
    has_inf = any(f.kind == "inf" for f in factors)
    if has_inf and any(f.kind == "num" and f.q == 0 for f in factors):
        return _Val("nan")
    if has_inf:
        return _Val("inf", neg=neg)
    q = math.prod((f.q for f in factors), start=Fraction(1))
    return _Val("num", q, neg)


def _terms(spec: UnitSpec, vs: VectorSet, bt, i, j, idx) -> list[tuple[_Val, int]]:
    """(value, alignment exponent) of each term of one step, products or GST groups."""
    prods = [_product(spec, vs, bt, i, j, kk, scaled=spec.group is None) for kk in idx]
    if spec.group is None:
        out = []
        for v, e in prods:
            if v.kind == "num" and v.q == 0:
                e = spec.e_zero
            elif v.kind == "num" and spec.product is Product.NORMALIZED:
                m = abs(v.q)
                e = m.numerator.bit_length() - m.denominator.bit_length()
                if Fraction(2) ** e > m:
                    e -= 1
            out.append((v, e))
        return out
    # GST-FDPA: each group's exact sum times its scale product; aligned at the scale exponents.
    fs = formats.get(vs.scale_format)
    out = []
    for g0 in range(0, len(idx), spec.group):
        members = prods[g0:g0 + spec.group]
        special = _sum_specials([v for v, _ in members])
        kk = idx[g0]
        blk = kk // vs.block
        sa = int(vs.a_scale[bt + (i, blk)]) & fs.value_mask
        sb = int(vs.b_scale[bt + (blk, j)]) & fs.value_mask
        e = int(fs.fields(sa).e) + int(fs.fields(sb).e)
        scale = _mul_vals([_input(spec, fs, sa), _input(spec, fs, sb)])
        if special is not None:
            out.append((_mul_vals([special, scale]), e))     # Inf times a zero scale: NaN
            continue
        if scale.kind == "nan":
            out.append((scale, e))
            continue
        all_zero = all(v.q == 0 for v, _ in members)
        if all_zero or scale.q == 0:
            e = spec.e_zero
        # A zero term keeps the sign of its exact sum (IEEE: a negative sum times a zero
        # scale is -0); a sum that cancels to zero is +0.
        total = sum((v.q for v, _ in members), Fraction(0))
        out.append((_Val("num", total * scale.q, total < 0), e))
    return out


def _step_ref(spec: UnitSpec, terms: list[tuple[_Val, int]], acc: _Val | None,
              acc_e: int | None) -> _Val:
    """One fused step: align, sum exactly, round once to acc_format."""
    acc_fmt = formats.get(spec.acc_format)
    values = [v for v, _ in terms] + ([acc] if acc is not None else [])
    special = _sum_specials(values)
    if special is not None:
        return special
    exps = [e for _, e in terms] + ([acc_e] if acc is not None else [])
    if spec.frac_bits is None:
        total = sum((v.q for v in values), Fraction(0))
        unit = None
    else:
        unit = Fraction(2) ** (max(exps) - spec.frac_bits)
        if spec.align is Align.RZ_JAM:
            unit_q = [_align(v.q / unit, spec.align) for v in values]
            total = sum(unit_q) * unit / 2
        else:
            total = sum(_align(v.q / unit, spec.align) for v in values) * unit
    r = _round_value(total, acc_fmt, spec.acc_rounding, spec.overflow)
    if r.kind == "num" and r.q == 0:
        all_neg_zero = all(v.q == 0 and v.neg for v in values)
        neg = spec.zero_sign is ZeroSign.IEEE and (all_neg_zero if total == 0 else
                                                   total < 0)
        return _Val("num", Fraction(0), neg)
    return r


def _tree_ref(spec: UnitSpec, terms: list[tuple[_Val, int]]) -> _Val:
    """A reduction tree: the terms added pairwise, ((t0 + t1) + (t2 + t3)) + ..., each node
    rounded once to acc_format; a lone term is rounded once, as t0 + 0."""
    acc_fmt = formats.get(spec.acc_format)
    nodes = [v for v, _ in terms] + ([_Val("num")] if len(terms) == 1 else [])
    while len(nodes) > 1:
        nodes = [_add_ref(x, y, acc_fmt, spec.acc_rounding, spec.overflow, spec.zero_sign)
                 for x, y in zip(nodes[::2], nodes[1::2], strict=True)]
    return nodes[0]


def _add_ref(x: _Val, y: _Val, out: formats.Format, rounding: Rounding, overflow: Overflow,
             zero_sign: ZeroSign) -> _Val:
    special = _sum_specials([x, y])
    if special is not None:
        return special
    total = x.q + y.q
    r = _round_value(total, out, rounding, overflow)
    if r.kind == "num" and r.q == 0:
        neg = zero_sign is ZeroSign.IEEE and (x.neg and y.neg if total == 0 else total < 0)
        return _Val("num", Fraction(0), neg)
    return r


def _acc_exponent(spec: UnitSpec, fmt: formats.Format, v: _Val) -> int:
    if v.kind != "num" or v.q == 0:
        return spec.e_zero
    m = abs(v.q)
    e = m.numerator.bit_length() - m.denominator.bit_length()
    if Fraction(2) ** e > m:
        e -= 1
    return max(e, fmt.emin)                 # subnormals sit at the smallest exponent


def _mul_ref(x: _Val, y: _Val) -> _Val:
    """IEEE FP32 multiply of two values, rounded once to nearest even."""
    fp32 = formats.get("fp32")
    special = _mul_vals([x, y])
    if special.kind != "num":
        return special
    if special.q == 0:
        return special
    return _round_value(special.q, fp32, Rounding.RNE, Overflow.IEEE)


def _epilogue_ref(spec: UnitSpec, vs: VectorSet) -> npt.NDArray:
    """The unit without its epilogue, then the FP32 scales as the epilogue applies them."""
    d = dot(*without_epilogue(spec, vs))
    fp32 = formats.get("fp32")
    out = np.empty_like(d)
    for index in np.ndindex(*d.shape):
        *bt, i, j = index
        sa = vs.a_scale if vs.a_scale.ndim == 0 else vs.a_scale[tuple(bt) + (i, 0)]
        sb = vs.b_scale if vs.b_scale.ndim == 0 else vs.b_scale[tuple(bt) + (0, j)]
        va = _Val.of_code(fp32, int(np.float32(sa).view(np.uint32)))
        vb = _Val.of_code(fp32, int(np.float32(sb).view(np.uint32)))
        acc = _Val.of_code(fp32, int(d[index]))
        if spec.epilogue == "alpha":
            r = _mul_ref(_mul_ref(va, vb), acc)
            if r.kind == "num" and r.q == 0:
                r = _Val("num")                    # alpha * D + 0 * C: -0 becomes +0
        else:
            r = _mul_ref(_mul_ref(acc, vb), va)
        out[index] = spec.d_nan if r.kind == "nan" else _code(fp32, r)
    return out


def _block_fma_ref(spec: UnitSpec, vs: VectorSet) -> npt.NDArray:
    """Block-wise FP32 scales: per 128-K block, total = fma(partial, fl(sa*sb), total)."""
    fp32 = formats.get("fp32")
    parts = [dot(*without_epilogue(spec, vs, slice(kb * 128, (kb + 1) * 128)))
             for kb in range(vs.k // 128)]
    out = np.empty(vs.batch_shape + (vs.m, vs.n), np.uint32)

    def val(x) -> _Val:
        return _Val.of_code(fp32, int(np.float32(x).view(np.uint32)))

    for index in np.ndindex(*out.shape):
        *bt, i, j = index
        bt = tuple(bt)
        total = _Val.of_code(fp32, int(vs.c[index])) if vs.c is not None else _Val("num")
        for kb, part in enumerate(parts):
            s = _mul_ref(val(vs.a_scale[bt + (i, kb)]), val(vs.b_scale[bt + (kb, j // 128)]))
            prod = _mul_vals([_Val.of_code(fp32, int(part[index])), s])
            total = _add_ref(total, prod, fp32, Rounding.RNE, Overflow.IEEE, ZeroSign.IEEE)
        out[index] = spec.d_nan if total.kind == "nan" else _code(fp32, total)
    return out


def dot(spec: UnitSpec, vs: VectorSet) -> npt.NDArray:
    """The unit of ``spec``, as :func:`mxsim.engine.fast.dot` documents it, one dot at a time."""
    spec.check_vectors(vs)
    if spec.exact:
        return matmul_exact(vs)
    if spec.epilogue == "block-fma":
        return _block_fma_ref(spec, vs)
    if spec.epilogue is not None:
        return _epilogue_ref(spec, vs)
    d_fmt, acc_fmt = formats.get(spec.d_format), formats.get(spec.acc_format)
    out = np.empty(vs.batch_shape + (vs.m, vs.n), d_fmt.code_dtype)
    for index in np.ndindex(*vs.batch_shape, vs.m, vs.n):
        *bt, i, j = index
        bt = tuple(bt)
        c = _input(spec, d_fmt, int(vs.c[index])) if vs.c is not None else _Val("num")
        d, total = c, None
        if spec.promote_every is not None:
            d, total = _Val("num"), c
        for inst in range(vs.k // spec.k):
            if total is not None and inst and inst % spec.promote_every == 0:
                total = _add_ref(total, d, d_fmt, spec.promote_rounding, spec.overflow,
                                 spec.zero_sign)
                d = _Val("num")
            acc, acc_in = (None if spec.c_mode is CMode.AFTER else d), d_fmt
            if spec.reduce is Reduce.TREE:
                idx = list(range(inst * spec.k, (inst + 1) * spec.k))
                acc = _tree_ref(spec, _terms(spec, vs, bt, i, j, idx))
            for step in spec.steps() if spec.reduce is Reduce.CHAIN else ():
                idx = [inst * spec.k + s for s in step]
                acc_e = _acc_exponent(spec, acc_in, acc) if acc is not None else None
                acc = _step_ref(spec, _terms(spec, vs, bt, i, j, idx), acc, acc_e)
                acc_in = acc_fmt
            if acc.kind == "num" and acc.q != 0:
                acc = _round_value(acc.q, d_fmt, spec.acc_rounding, spec.overflow)
            if spec.c_mode is CMode.AFTER:
                acc = _add_ref(d, acc, d_fmt, spec.c_rounding, spec.overflow, spec.zero_sign)
            d = acc
        if total is not None:
            d = _add_ref(total, d, d_fmt, spec.promote_rounding, spec.overflow, spec.zero_sign)
        out[index] = spec.d_nan if d.kind == "nan" else _code(d_fmt, d)
    return out
