"""Exact reference engine: Python fractions, one dot product at a time, obviously correct.

It shares nothing with :mod:`mxsim.engine.fast` but :meth:`mxsim.formats.Format.decode` (which
is itself checked exhaustively against independent tables) and the plumbing of
:func:`mxsim.engine.epilogue.without_epilogue` (which vectors run before the FP32 scales).
Slow by design; tests hold the fast engine equal to it. The ``exact`` unit's reference is
:mod:`.exact`; :func:`exception_flags` gives the IEEE 754 flags of a unit that rounds once.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from ... import formats
from ...formats import Overflow, Rounding
from ...spec import (
    Align,
    CMode,
    Product,
    Reduce,
    ScaleSumOverflow,
    Specials,
    UnitSpec,
    ZeroSign,
)
from ...vectors import VectorSet

# Plumbing only (which vectors and which unit run before the FP32 scales), no arithmetic.
from ..epilogue import without_epilogue
from . import trace
from .exact import matmul_exact, round_fp32_rne
from .values import Val as _Val
from .values import align_units as _align
from .values import encode_val as _code
from .values import exponent as _exponent
from .values import round_mag as _round_mag
from .values import round_value as _round_value
from .values import sum_specials as _sum_specials

__all__ = ["matmul_exact", "dot", "exception_flags", "round_fp32_rne"]


# -- the general unit, one dot at a time ----------------------------------------------------

def _input(spec: UnitSpec, fmt: formats.Format, code: int) -> _Val:
    """An input code (element, scale or C) as the unit reads it: with ``specials="none"``
    the number its bits spell, else as the format defines it."""
    if spec.specials is Specials.NONE:
        return _Val.of_bits(fmt, code)
    return _Val.of_code(fmt, code)


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
        scale, scale_e = _scale_pair(spec, vs, bt, i, j, kk)
        factors.append(scale)
        e += scale_e
    product = _mul_vals(factors)
    if trace.active():
        trace.note("product", f"p{kk}", product, a=hex(ca), b=hex(cb),
                   a_value=trace.exact(va), b_value=trace.exact(vb), exponent=e,
                   block=kk // vs.block if scaled and vs.scale_format is not None else None)
    return product, e


def _scale_pair(spec: UnitSpec, vs: VectorSet, bt: tuple, i: int, j: int,
                kk: int) -> tuple[_Val, int]:
    """The product of the two block scales of index ``kk`` and its exponent, the sum of
    theirs: held in a ``scale_sum_bits`` field (wrapped or saturated) where the spec says so,
    the product then being 2 to that power (NaN where a scale is NaN)."""
    fs = formats.get(vs.scale_format)
    blk = kk // vs.block
    # UE4M3's sign bit is ignored.
    codes = [int(vs.a_scale[bt + (i, blk)]) & fs.value_mask,
             int(vs.b_scale[bt + (blk, j)]) & fs.value_mask]
    values = [_input(spec, fs, code) for code in codes]
    e = sum(int(fs.fields(code).e) for code in codes)
    if spec.scale_sum_bits is None:
        out = _mul_vals(values), e
    else:
        half = 1 << (spec.scale_sum_bits - 1)
        held = e
        if spec.scale_sum_overflow is ScaleSumOverflow.SATURATE:
            held = max(-half, min(half - 1, e))
        else:
            held = (e + half) % (2 * half) - half        # two's complement, modulo 2**bits
        out = (_Val("nan") if any(v.kind == "nan" for v in values) else
               _Val("num", Fraction(2) ** held)), held
    if trace.active():                     # the value the unit uses: the sum as it is held
        trace.note("scale", f"scale{blk}", out[0], a_scale=hex(codes[0]),
                   b_scale=hex(codes[1]), exponent_sum=e, **(
                       {} if spec.scale_sum_bits is None else
                       {"held_in_bits": spec.scale_sum_bits, "held": out[1],
                        "overflow": spec.scale_sum_overflow.value}))
    return out


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
    out = []
    for g0 in range(0, len(idx), spec.group):
        members = prods[g0:g0 + spec.group]
        special = _sum_specials([v for v, _ in members])
        scale, e = _scale_pair(spec, vs, bt, i, j, idx[g0])
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
        trace.note("group", f"g{idx[g0]}", out[-1][0], tuple(
            trace.name(f"p{kk}") for kk in idx[g0:g0 + spec.group]), exponent=e)
    return out


def _step_ref(spec: UnitSpec, terms: list[tuple[_Val, int]], acc: _Val | None,
              acc_e: int | None, names: tuple[str, ...] = ()) -> _Val:
    """One fused step: align, sum exactly, round once to acc_format (``names``: the terms'
    node names, for a recording)."""
    acc_fmt = formats.get(spec.acc_format)
    values = [v for v, _ in terms] + ([acc] if acc is not None else [])
    special = _sum_specials(values)
    if special is not None:
        return special
    exps = [e for _, e in terms] + ([acc_e] if acc is not None else [])
    if acc is not None:
        trace.note("acc", "acc", acc, exponent=acc_e)
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
        if trace.active():
            _note_alignment(spec, values, exps, unit, names, acc is not None)
    r = _round_value(total, acc_fmt, spec.acc_rounding, spec.overflow)
    if r.kind == "num" and r.q == 0:
        if spec.zero_sign is ZeroSign.C:           # IEEE 754 6.3: -0 only rounding down
            neg = spec.acc_rounding is Rounding.RD if total == 0 else total < 0
        else:
            all_neg_zero = all(v.q == 0 and v.neg for v in values)
            neg = spec.zero_sign is ZeroSign.IEEE and (all_neg_zero if total == 0 else
                                                       total < 0)
        r = _Val("num", Fraction(0), neg)
    trace.note("step", "round", r, names + ((trace.name("acc"),) if acc is not None else ()),
               exact=total, format=acc_fmt.name, rounding=spec.acc_rounding.value)
    return r


def _note_alignment(spec: UnitSpec, values: list[_Val], exps: list[int], unit: Fraction,
                    names: tuple[str, ...], with_acc: bool) -> None:
    """Note each term aligned to the step's window: its value there and what it lost."""
    jam = spec.align is Align.RZ_JAM
    for n, (v, e) in enumerate(zip(values, exps, strict=True)):
        kept = _align(v.q / unit, spec.align) * (unit / 2 if jam else unit)
        part = trace.name("acc") if with_acc and n == len(values) - 1 else (
            names[n] if n < len(names) else f"t{n}")
        trace.note("align", f"aligned.{part.rsplit('.', 1)[-1]}", _Val("num", kept, v.neg),
                   (part,), exponent=e, lsb=unit, lost=v.q - kept,
                   window_top=max(exps), align=spec.align.value)


def _tree_ref(spec: UnitSpec, terms: list[tuple[_Val, int]], names: tuple[str, ...] = ()
              ) -> _Val:
    """A reduction tree: the terms added pairwise, ((t0 + t1) + (t2 + t3)) + ..., each node
    rounded once to its level's format (tree_formats, or acc_format); a lone term is rounded
    once to acc_format, as t0 + 0."""
    nodes = [v for v, _ in terms] + ([_Val("num")] if len(terms) == 1 else [])
    names = list(names) + ["0"] * (len(nodes) - len(names))
    for depth, name in enumerate(spec.tree_level_formats() or (spec.acc_format,)):
        out, out_names = [], []
        for n, (x, y) in enumerate(zip(nodes[::2], nodes[1::2], strict=True)):
            part = f"L{depth + 1}.n{n}"
            change = trace.changed(part)          # a diagnosis's other rounding of one node
            fmt = change.get("format", name)
            rounding = Rounding(change.get("rounding", spec.acc_rounding))
            out.append(_add_ref(x, y, formats.get(fmt), rounding, spec.overflow,
                                spec.zero_sign))
            if change.get("ulp") and out[-1].kind == "num" and out[-1].q != 0:
                out[-1] = _nudge(out[-1], formats.get(fmt), change["ulp"])
            out_names.append(trace.note("tree", part, out[-1], tuple(names[2 * n:2 * n + 2]),
                                        format=fmt, rounding=rounding.value))
        nodes, names = out, out_names
    assert len(nodes) == 1
    return nodes[0]


def _nudge(v: _Val, fmt: formats.Format, ulps: int) -> _Val:
    """``v`` moved ``ulps`` units in its last place of ``fmt`` away from zero (a diagnosis's
    node that lost or gained its last bit)."""
    mag = abs(v.q)
    e = max(_exponent(mag), fmt.emin)
    if ulps < 0 and e > fmt.emin and mag == Fraction(2) ** e:
        e -= 1                             # below a power of two, the binade under it
    mag += ulps * Fraction(2) ** (e - fmt.man_bits)
    return _Val("num", -mag if v.neg else mag, v.neg)


def _add_ref(x: _Val, y: _Val, out: formats.Format, rounding: Rounding, overflow: Overflow,
             zero_sign: ZeroSign) -> _Val:
    special = _sum_specials([x, y])
    if special is not None:
        return special
    total = x.q + y.q
    r = _round_value(total, out, rounding, overflow)
    if r.kind == "num" and r.q == 0:
        if zero_sign is ZeroSign.C:                # IEEE 754 6.3: -0 only rounding down
            neg = rounding is Rounding.RD if total == 0 else total < 0
        else:
            neg = zero_sign is ZeroSign.IEEE and (x.neg and y.neg if total == 0 else total < 0)
        return _Val("num", Fraction(0), neg)
    return r


def _instruction(spec: UnitSpec, vs: VectorSet, bt: tuple, i: int, j: int, inst: int,
                 d: _Val) -> _Val:
    """D of instruction ``inst`` of dot (bt, i, j) from its C, ``d``: the steps (C in the
    first, or after them) or the tree, converted to d_format."""
    d_fmt, acc_fmt = formats.get(spec.d_format), formats.get(spec.acc_format)
    acc, acc_in = (None if spec.c_mode is CMode.AFTER else d), d_fmt
    if spec.reduce is Reduce.TREE:
        idx = list(range(inst * spec.k, (inst + 1) * spec.k))
        terms = _terms(spec, vs, bt, i, j, idx)
        acc = _tree_ref(spec, terms, _term_names(spec, idx))
    for n, step in enumerate(spec.steps() if spec.reduce is Reduce.CHAIN else ()):
        with trace.scope(f"s{n}"):
            idx = [inst * spec.k + s for s in step]
            terms = _terms(spec, vs, bt, i, j, idx)
            acc_e = _acc_exponent(spec, acc_in, acc) if acc is not None else None
            acc = _step_ref(spec, terms, acc, acc_e, _term_names(spec, idx))
        acc_in = acc_fmt
    if acc.kind == "num" and acc.q != 0:
        exact = acc.q
        acc = _round_value(acc.q, d_fmt, spec.acc_rounding, spec.overflow)
        trace.note("convert", "to_d", acc, exact=exact, format=d_fmt.name,
                   rounding=spec.acc_rounding.value)
    if spec.c_mode is CMode.AFTER:
        acc = _add_ref(d, acc, d_fmt, spec.c_rounding, spec.overflow, spec.zero_sign)
        trace.note("c", "c_after", acc, (trace.name("to_d"),), c=trace.exact(d),
                   format=d_fmt.name, rounding=spec.c_rounding.value)
    # zero_sign c: C passes through where the products' exact sum is zero (one step or a tree,
    # so ``terms`` are the whole instruction's).
    if spec.zero_sign is ZeroSign.C and all(v.kind == "num" for v, _ in terms) \
            and sum((v.q for v, _ in terms), Fraction(0)) == 0:
        trace.note("zero", "c_passes", d, ("c",), why="the products sum to exactly zero "
                   "(zero_sign = c: C passes through)")
        return d
    return acc


def _term_names(spec: UnitSpec, idx: list[int]) -> tuple[str, ...]:
    """The node names of a step's terms (products, or GST groups), when recording."""
    if not trace.active():
        return ()
    if spec.group is None:
        return tuple(trace.name(f"p{kk}") for kk in idx)
    return tuple(trace.name(f"g{idx[g]}") for g in range(0, len(idx), spec.group))


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
        with trace.scope("", dot=int(np.ravel_multi_index(index, d.shape))):
            trace.note("epilogue", "scaled", r, ("d",), a_scale=trace.exact(va),
                       b_scale=trace.exact(vb), how=spec.epilogue, code=hex(int(out[index])))
    return out


def _block_fma_ref(spec: UnitSpec, vs: VectorSet) -> npt.NDArray:
    """Block-wise FP32 scales: per 128-K block, total = fma(partial, fl(sa*sb), total)."""
    fp32 = formats.get("fp32")
    parts = []
    for kb in range(vs.k // 128):
        with trace.base(f"k{kb * 128}"):              # each K block's nodes named apart
            parts.append(dot(*without_epilogue(spec, vs, slice(kb * 128, (kb + 1) * 128))))
    out = np.empty(vs.batch_shape + (vs.m, vs.n), np.uint32)

    def val(x) -> _Val:
        return _Val.of_code(fp32, int(np.float32(x).view(np.uint32)))

    for index in np.ndindex(*out.shape):
        *bt, i, j = index
        bt = tuple(bt)
        total = _Val.of_code(fp32, int(vs.c[index])) if vs.c is not None else _Val("num")
        with trace.scope("", dot=int(np.ravel_multi_index(index, out.shape))):
            for kb, part in enumerate(parts):
                s = _mul_ref(val(vs.a_scale[bt + (i, kb)]),
                             val(vs.b_scale[bt + (kb, j // 128)]))
                prod = _mul_vals([_Val.of_code(fp32, int(part[index])), s])
                total = _add_ref(total, prod, fp32, Rounding.RNE, Overflow.IEEE, ZeroSign.IEEE)
                trace.note("epilogue", f"fma{kb}", total, (f"k{kb * 128}.d",),
                           scale=trace.exact(s), format="fp32", rounding="rne")
            out[index] = spec.d_nan if total.kind == "nan" else _code(fp32, total)
            trace.note("result", "d", total, code=hex(int(out[index])), format="fp32")
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
    d_fmt = formats.get(spec.d_format)
    out = np.empty(vs.batch_shape + (vs.m, vs.n), d_fmt.code_dtype)
    for flat, index in enumerate(np.ndindex(*vs.batch_shape, vs.m, vs.n)):
        *bt, i, j = index
        bt = tuple(bt)
        c = _input(spec, d_fmt, int(vs.c[index])) if vs.c is not None else _Val("num")
        with trace.scope("", dot=flat):
            d = _dot_one(spec, vs, bt, i, j, c)
            out[index] = spec.d_nan if d.kind == "nan" else _code(d_fmt, d)
            trace.note("result", "d", d, code=hex(int(out[index])), format=d_fmt.name)
    return out


def _dot_one(spec: UnitSpec, vs: VectorSet, bt: tuple, i: int, j: int, c: _Val) -> _Val:
    """One dot product from its C: its instructions (and promotions), as ``dot`` runs them."""
    d_fmt = formats.get(spec.d_format)
    trace.note("c", "c", c, code=hex(int(vs.c[bt + (i, j)])) if vs.c is not None else None)
    d, total = c, None
    if spec.promote_every is not None:
        d, total = _Val("num"), c
    for inst in range(vs.k // spec.k):
        if total is not None and inst and inst % spec.promote_every == 0:
            total = _add_ref(total, d, d_fmt, spec.promote_rounding, spec.overflow,
                             spec.zero_sign)
            trace.note("promote", f"promote{inst}", total, format=d_fmt.name,
                       rounding=spec.promote_rounding.value)
            d = _Val("num")
        with trace.scope(f"i{inst}"):
            d = _instruction(spec, vs, bt, i, j, inst, d)
    if total is not None:
        d = _add_ref(total, d, d_fmt, spec.promote_rounding, spec.overflow, spec.zero_sign)
        trace.note("promote", "promote_last", d, format=d_fmt.name,
                   rounding=spec.promote_rounding.value)
    return d


# -- IEEE 754 exception flags of a unit that rounds once --------------------------------------

def _signaling(fmt: formats.Format, code: int) -> bool:
    """Whether ``code`` is a signaling NaN of an IEEE-style ``fmt``: exponent all ones, a
    fraction that is not zero, its top bit clear."""
    top = (1 << fmt.exp_bits) - 1
    man = code & ((1 << fmt.man_bits) - 1)
    return (code >> fmt.man_bits) & top == top and man != 0 and not man >> (fmt.man_bits - 1)


def _round_flags(q: Fraction, fmt: formats.Format, rounding: Rounding,
                 overflow: Overflow) -> tuple[bool, bool, bool]:
    """(overflow, underflow, inexact) of rounding the non-zero ``q`` to ``fmt``: beyond
    ``fmt.max`` once rounded with an unbounded exponent; tiny (below ``2**emin``) so rounded
    and inexact; the value delivered (subnormals, overflow policy) differs from ``q``."""
    r = _round_value(q, fmt, rounding, overflow)
    inexact = r.kind != "num" or r.q != q
    unbounded = _round_mag(abs(q), q < 0, fmt, rounding, unbounded=True)
    tiny = unbounded < Fraction(2) ** fmt.emin
    return unbounded > Fraction(fmt.max), tiny and inexact, inexact


def _op_flags(products: list[_Val], others: list[_Val], fmt: formats.Format,
              rounding: Rounding, overflow: Overflow, snan: bool) -> tuple[bool, ...]:
    """(nv, of, uf, nx) of one rounded sum of ``products`` (a NaN among them is invalid: a NaN
    code or scale, Inf x 0) and ``others`` (C, a step's result: NaN there is quiet unless
    ``snan``); +Inf with -Inf is invalid; a NaN or Inf result raises nothing else."""
    values = products + others
    infs = {v.neg for v in values if v.kind == "inf"}
    nv = snan or any(v.kind == "nan" for v in products) or len(infs) == 2
    total = sum((v.q for v in values if v.kind == "num"), Fraction(0))
    if any(v.kind != "num" for v in values) or total == 0:
        return nv, False, False, False
    return (nv, *_round_flags(total, fmt, rounding, overflow))


def _instruction_flags(spec: UnitSpec, terms: list[_Val], c: _Val,
                       snan: bool) -> tuple[bool, ...]:
    """(nv, of, uf, nx) of one instruction with C ``c``: its one rounding (C in the step), or
    its two (the step, then C + that) ORed, as a unit that raises each adder's flags does."""
    acc_fmt, d_fmt = formats.get(spec.acc_format), formats.get(spec.d_format)
    if spec.c_mode is CMode.STEP:
        return _op_flags(terms, [c], acc_fmt, spec.acc_rounding, spec.overflow, snan)
    first = _op_flags(terms, [], acc_fmt, spec.acc_rounding, spec.overflow, False)
    step = _step_ref(spec, [(t, 0) for t in terms], None, None)
    second = _op_flags([], [c, step], d_fmt, spec.c_rounding, spec.overflow, snan)
    return tuple(x or y for x, y in zip(first, second, strict=True))


def exception_flags(spec: UnitSpec, vs: VectorSet) -> tuple[npt.NDArray[np.bool_], ...]:
    """``(nv, of, uf, nx)``, boolean arrays of ``vs.out_shape``, as
    :func:`mxsim.engine.fast.exception_flags` documents them, one dot at a time.

    ``spec`` must round once per instruction (one exact step, ``d_format`` = ``acc_format``;
    :func:`mxsim.engine.flags.status_flags` checks it). Flags accrue over a chain's
    instructions; a C that is a signaling NaN is invalid in the first (the ones after it take
    the unit's own results).
    """
    spec.check_vectors(vs)
    d_fmt = formats.get(spec.d_format)
    out = np.zeros((4,) + vs.out_shape, bool)
    for index in np.ndindex(*vs.out_shape):
        *bt, i, j = index
        bt = tuple(bt)
        code = int(vs.c[index]) if vs.c is not None else 0
        d = _input(spec, d_fmt, code)
        snan = vs.c is not None and spec.specials is Specials.IEEE and _signaling(d_fmt, code)
        raised = [False] * 4
        for inst in range(vs.k // spec.k):
            idx = [inst * spec.k + s for s in spec.steps()[0]]
            terms = [v for v, _ in _terms(spec, vs, bt, i, j, idx)]
            flags = _instruction_flags(spec, terms, d, snan and inst == 0)
            raised = [x or y for x, y in zip(raised, flags, strict=True)]
            d = _instruction(spec, vs, bt, i, j, inst, d)
        out[(slice(None),) + index] = raised
    return tuple(out)
