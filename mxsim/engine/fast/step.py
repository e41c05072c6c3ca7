"""One fused step of the general unit for whole blocks of dots: align, sum, round once.

:func:`step` computes one step of rows against columns (in the compiled kernel or numpy);
:func:`step_all_rows` runs it over every row of a batch entry in cache-sized chunks, on
threads. The accumulator may be :data:`ZERO` (a chain without C, known to be +0).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt

from ... import formats
from ...formats import Rounding
from ...spec import Align, Product, UnitSpec, ZeroSign
from .. import _kernels, wide
from ..exactsum import exact_sums
from ..xp import of as xp_of
from .alignment import align_terms, step_terms
from .operands import Operand, Operands, index_count, special_codes
from .paths import step_kernels

__all__ = ["ZERO", "by_rows", "codes_of", "finish", "step", "step_all_rows"]

_CHUNK_TERMS = 1 << 21          # products materialised at once (bounds memory to ~100 MB)
_CHUNK_DOTS = 1 << 15           # dots per compiled-kernel call
# Dots per call of numpy's float64 step (engine.wide), on one thread: its numpy calls hold
# the GIL between them, and two threads ran it slower than one at every chunk size tried by
# hand on the 2-core machine (1M dots of hopper-wgmma, 2**14 to 2**16 dots a chunk; no record
# of the tries), where 2**16 was fastest.
_WIDE_CHUNK_DOTS = 1 << 16
_THREADS = os.cpu_count() or 1
_GPU_CHUNK_TERMS = 1 << 26      # products materialised at once on a GPU (numpy-style step)


class _Zero:
    """An accumulator that is +0 everywhere (a vector set without C)."""


#: The accumulator of a chain without C: +0 everywhere, never decoded.
ZERO = _Zero()


def codes_of(d, fmt: formats.Format, m: int, n: int, xp=np) -> npt.NDArray | Operand:
    """The (m, n) codes of accumulator ``d`` (``ZERO`` becomes +0 codes of ``fmt``, an
    array of module ``xp``; a C already read as an :class:`Operand` stays one)."""
    return xp.zeros((m, n), fmt.code_dtype) if d is ZERO else d


def finish(spec: UnitSpec, fmt: formats.Format, codes, exact_zero, all_neg_zero, nan, pinf,
           ninf, specials: bool) -> npt.NDArray:
    """The sign of zero results (per the spec), then NaN and Inf where the terms force them.
    ``exact_zero`` and ``all_neg_zero`` are not read for +0 zeros (they may be None)."""
    mask = (1 << fmt.sign_shift) - 1
    if spec.zero_sign is ZeroSign.POSITIVE:
        codes = np.where((codes & mask) == 0, 0, codes).astype(codes.dtype)
    elif spec.zero_sign is ZeroSign.C:
        # IEEE 754 6.3: an exact zero sum is -0 only when rounding toward -Inf (the chain
        # passes C through where the products alone sum to zero).
        neg_zero = (1 << fmt.sign_shift) if spec.acc_rounding is Rounding.RD else 0
        codes = np.where(exact_zero, neg_zero, codes).astype(codes.dtype)
    else:
        # IEEE: an exact zero sum is -0 only when every term is a -0.
        neg_zero = np.where(all_neg_zero, 1 << fmt.sign_shift, 0)
        codes = np.where(exact_zero, neg_zero, codes).astype(codes.dtype)
    if specials:
        codes = special_codes(fmt, nan, pinf, ninf, codes)
    return codes


def step(spec: UnitSpec, ops: Operands, a: Operand, b: Operand, sa: Operand | None,
         sb: Operand | None, acc_codes: npt.NDArray | None, acc_in: formats.Format,
         b_side=None, kernels=_kernels) -> npt.NDArray:
    """One fused step of rows ``a`` (r, g) against columns ``b`` (g, N); acc_format codes.

    ``acc_codes`` are the accumulator's codes in ``acc_in`` (None: no accumulator; ``ZERO``:
    +0 everywhere; an :class:`Operand`: a C already read). ``b_side`` is B prepared by the
    module ``kernels`` (see :func:`.paths.step_kernels`: the compiled kernel, or numpy's
    :mod:`mxsim.engine.wide`, which declines data outside its bounds); None, or a decline,
    computes the step with :mod:`.alignment`'s integer terms.
    """
    acc_fmt = formats.get(spec.acc_format)
    zero_acc = acc_codes is ZERO
    acc = None if acc_codes is None or zero_acc else Operand.read(acc_in, acc_codes)
    sums = None if b_side is None else kernels.step_sums(
        a, sa, b_side, acc, spec.frac_bits, spec.align.value,
        spec.product is Product.NORMALIZED, spec.e_zero, zero_acc)
    if sums is not None:
        q, step_lsb, flags = sums
        if kernels is wide:          # numpy throughout: float64's rounding where it is exact
            codes = wide.round_sums(acc_fmt, q, step_lsb, spec.acc_rounding, spec.overflow)
        else:
            codes = formats.round_to(acc_fmt, q < 0, step_lsb, np.abs(q).astype(np.uint64),
                                     False, spec.acc_rounding, spec.overflow)
        specials = bool(flags.any()) and bool((flags & 7).any())
        nan, pinf, ninf = ((flags & bit) != 0 for bit in (1, 2, 4)) if specials else (None,) * 3
        # What finish reads of the zeros (none for +0 zeros): passes over every dot.
        positive = spec.zero_sign is ZeroSign.POSITIVE
        return finish(spec, acc_fmt, codes, None if positive else q == 0,
                      None if positive else (flags & 8) != 0, nan, pinf, ninf, specials)
    if zero_acc:       # the integer step reads +0 codes (the kernels' zero_acc)
        acc = Operand.of(acc_in, xp_of(a.sig).zeros((a.sig.shape[0], b.sig.shape[1]),
                                                    acc_in.code_dtype))
    sign, sig, lsb, align_e, nan, pinf, ninf = step_terms(spec, ops, a, b, sa, sb)
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
        codes, zero = _exact_step(spec, acc_fmt, sign, sig, lsb, acc)
    else:
        codes, zero = _truncated_step(spec, acc_fmt, sign, sig, lsb, e_max, acc)
    return finish(spec, acc_fmt, codes, zero, all_neg_zero, nan, pinf, ninf,
                  ops.specials or acc is not None)


def _exact_step(spec: UnitSpec, acc_fmt: formats.Format, sign, sig, lsb,
                acc: Operand | None) -> tuple[npt.NDArray, npt.NDArray]:
    """Codes and exact-zero flags of a step without alignment: a superaccumulator over the
    products (and the accumulator), rounded once."""
    r, _, n = sig.shape
    xp = xp_of(sig)
    dots = xp.broadcast_to(xp.arange(r * n).reshape(r, 1, n), sig.shape).reshape(-1)
    parts = [(dots, sign.reshape(-1), sig.reshape(-1), lsb.reshape(-1))]
    if acc is not None:
        parts.append((xp.arange(r * n), acc.sign.reshape(-1), acc.sig.reshape(-1),
                      acc.lsb.reshape(-1)))
    cat = [xp.concatenate(x) for x in zip(*parts, strict=True)]
    neg, mag, lsb_exp, sticky, zero = exact_sums(
        cat[0], cat[1].astype(np.uint8), cat[2].astype(np.uint64), cat[3], r * n)
    codes = formats.round_to(acc_fmt, neg, lsb_exp, mag, sticky, spec.acc_rounding,
                             spec.overflow).reshape(r, n)
    return codes, zero.reshape(r, n)


def _truncated_step(spec: UnitSpec, acc_fmt: formats.Format, sign, sig, lsb, e_max,
                    acc: Operand | None) -> tuple[npt.NDArray, npt.NDArray]:
    """Codes and exact-zero flags of a step that aligns every term to ``frac_bits`` below
    the largest exponent, sums the aligned terms exactly and rounds the sum once."""
    step_lsb = e_max - spec.frac_bits
    q = align_terms(sig, sign, step_lsb[:, None, :] - lsb, spec.align).sum(axis=1)
    if acc is not None:
        q = q + align_terms(acc.sig, acc.sign, step_lsb - acc.lsb, spec.align)
    if spec.align is Align.RZ_JAM:
        step_lsb = step_lsb - 1
    codes = formats.round_to(acc_fmt, q < 0, step_lsb, np.abs(q).astype(np.uint64), False,
                             spec.acc_rounding, spec.overflow)
    return codes, q == 0


def by_rows(fn, x: npt.NDArray) -> npt.NDArray:
    """``fn`` applied to cache-sized row chunks of ``x`` (on threads); ``fn`` is elementwise.
    A GPU's array is one chunk."""
    rows_per = max(1, _CHUNK_DOTS // max(1, x.shape[1]))
    starts = range(0, x.shape[0], rows_per)
    if len(starts) == 1 or xp_of(x) is not np:
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


def step_all_rows(spec: UnitSpec, ops: Operands, bi: int, idx: npt.NDArray,
                  acc: npt.NDArray | None, acc_in: formats.Format,
                  kernel: bool = True) -> npt.NDArray:
    """One fused step for every row of batch entry ``bi`` (in row chunks); ``kernel=False``
    keeps it in numpy even where the compiled kernel applies."""
    m, n = ops.a.sig.shape[1], ops.b.sig.shape[2]
    xp = xp_of(ops.a.sig)
    b = ops.b.take(bi).take((idx, slice(None)))
    sb = None if ops.sb is None else ops.sb.take(bi).take((idx, slice(None)))
    kernels = step_kernels(spec, kernel, xp)
    kernel = kernels is not None
    b_side = kernels.prepare_b(b, sb) if kernel else None
    # Row chunks: ~_CHUNK_TERMS products in numpy temporaries; for the kernel, ~_CHUNK_DOTS
    # dots, so that the numpy rounding after it works on cache-sized arrays. A GPU takes
    # every row at once through its kernel, and big chunks in the numpy-style step.
    if xp is not np:
        rows_per = m if kernel else max(1, _GPU_CHUNK_TERMS // max(1, n * index_count(idx)))
    else:
        chunk_dots = _WIDE_CHUNK_DOTS if kernels is wide else _CHUNK_DOTS
        rows_per = max(1, chunk_dots // n if kernel
                       else _CHUNK_TERMS // max(1, n * index_count(idx)))
    out = xp.empty((m, n), formats.get(spec.acc_format).code_dtype)

    def chunk(r0: int) -> None:
        rows = slice(r0, min(m, r0 + rows_per))
        a = ops.a.take(bi).take((rows, idx))
        sa = None if ops.sa is None else ops.sa.take(bi).take((rows, idx))
        acc_rows = acc if acc is None or acc is ZERO else (
            acc.take(rows) if isinstance(acc, Operand) else acc[rows])
        out[rows] = step(spec, ops, a, b, sa, sb, acc_rows, acc_in, b_side, kernels)

    starts = range(0, m, rows_per)
    if kernel and len(starts) > 1 and _THREADS > 1 and xp is np and kernels is not wide:
        # The compiled kernel releases the GIL: row chunks run side by side (numpy's float64
        # step holds it between its many short calls, and runs faster on one thread).
        with ThreadPoolExecutor(_THREADS) as pool:
            list(pool.map(chunk, starts))
    else:
        for r0 in starts:
            chunk(r0)
    return out
