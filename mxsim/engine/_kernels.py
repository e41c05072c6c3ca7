"""Compiled inner loop of the fast engine (numba), imported only when a dot is computed.

``step_sums`` does, for every dot of a block of rows, what ``fast.alignment.step_terms`` and
``fast.alignment.align_terms`` do with numpy temporaries: find the step's largest alignment
exponent, round every term to the step's LSB and sum the results exactly (int64). Everything before
(field extraction) and after (rounding to the accumulator format, special values) stays in
numpy. The kernel releases the GIL, so the engine runs row chunks on several threads.
``available()`` is False when numba is missing; the engine then uses numpy, and the tests hold
the two equal.
"""

from __future__ import annotations

import numpy as np

from .. import _numba

__all__ = ["available", "compiled_align_one", "prepare_b", "side", "step_sums", "ALIGN_CODES"]

#: Align enum values as the kernel numbers them.
ALIGN_CODES = {"rz": 0, "rd": 1, "rne": 2, "rz-jam": 3}

# Operand flag bits.
NAN, INF, ZERO = 1, 2, 4
TILE = 128          # columns of B per cache tile

_kernel = None


def available() -> bool:
    """True when numba can be imported (the kernel is compiled on first use)."""
    return version() is not None


def version() -> str | None:
    """numba's version, or None when it cannot be imported."""
    try:
        import numba
    except ImportError:
        return None
    return numba.__version__


def align_one(sig, sign, shift, mode):
    # ±sig * 2**-shift rounded by the mode; RZ_JAM's shift is already one lower.
    if shift <= 0:
        mag = sig << (-shift)
    elif shift >= 63:
        if mode == 0:
            mag = 0
        elif mode == 1:
            mag = 1 if (sign == 1 and sig != 0) else 0
        elif mode == 2:
            mag = 0
        else:
            mag = 1 if sig != 0 else 0
    else:
        kept = sig >> shift
        rest = sig - (kept << shift)
        if mode == 0:
            mag = kept
        elif mode == 1:
            mag = kept + (1 if (rest != 0 and sign == 1) else 0)
        elif mode == 2:
            half = np.int64(1) << (shift - 1)
            if rest > half or (rest == half and (kept & 1) == 1):
                mag = kept + 1
            else:
                mag = kept
        else:
            mag = kept | (1 if rest != 0 else 0)
    return -mag if sign == 1 else mag


# A named exception to the size limits (docs/architecture.md): the engine's hot loop stays one
# tiled loop nest, so numba/LLVM see a whole dot (products, maximum, aligned sum) at once.
def _step_loop(a_sign, a_sig, a_lsb, a_e, a_flag, b_sign, b_sig, b_lsb, b_e, b_flag,  # noqa: C901, PLR0915
               b_special, c_sign, c_sig, c_lsb, c_e, c_flag, has_acc, zero_acc, frac_bits,
               mode, normalized, e_zero, out_sum, out_lsb, out_flag):
    # A is (r, g); B is given transposed, (n, g), so both inner loops read contiguously.
    # b_special[j]: column j holds a NaN or Inf code.
    r, g = a_sig.shape
    n = b_sig.shape[0]
    jam = 1 if mode == 3 else 0
    # zero_acc: the accumulator is +0 everywhere (no C, or a chain restarted by promotion):
    # a +0 term, so it takes part in the maximum and an exact-zero sum is never -0.
    floor = e_zero if zero_acc else -(1 << 40)
    a_special = np.zeros(r, np.bool_)
    for i in range(r):
        for t in range(g):
            if a_flag[i, t] & (NAN | INF):
                a_special[i] = True
    # One dot's products: magnitude, sign and LSB exponent, kept for the second pass.
    mag = np.empty(g, np.int64)
    neg = np.empty(g, np.int64)
    lsb = np.empty(g, np.int64)
    # Columns in tiles that stay in cache while every row of the block reads them.
    for j0 in range(0, n, TILE):
      for i in range(r):  # noqa: E111
        for j in range(j0, min(n, j0 + TILE)):
            # The step's largest alignment exponent (zero products count as e_zero).
            emax = floor
            for t in range(g):
                p = np.int64(a_sig[i, t]) * b_sig[j, t]
                mag[t] = p
                neg[t] = a_sign[i, t] ^ b_sign[j, t]
                lsb[t] = a_lsb[i, t] + b_lsb[j, t]
                if p == 0:
                    e = e_zero
                elif normalized:
                    bl = 0
                    x = p
                    while x:
                        bl += 1
                        x >>= 1
                    e = lsb[t] + bl - 1
                else:
                    e = a_e[i, t] + b_e[j, t]
                emax = max(emax, e)
            if has_acc:
                emax = max(emax, e_zero if c_sig[i, j] == 0 else c_e[i, j])
            step_lsb = emax - frac_bits
            base = step_lsb - jam
            # Every term rounded to the step's LSB and summed exactly; RZ (the common
            # mode) in a loop of its own that the compiler can keep branch-light.
            total = 0
            if mode == 0:
                for t in range(g):
                    shift = base - lsb[t]
                    if shift <= 0:
                        m = mag[t] << (-shift)
                    elif shift >= 63:
                        m = 0
                    else:
                        m = mag[t] >> shift
                    total += -m if neg[t] else m
            else:
                for t in range(g):
                    if mag[t] != 0:
                        total += align_one(mag[t], neg[t], base - lsb[t], mode)
            if has_acc and c_sig[i, j] != 0:
                total += align_one(c_sig[i, j], c_sign[i, j], base - c_lsb[i, j], mode)
            # Special values and the sign of an exact zero are rare: computed apart.
            flags = 0            # 1 NaN, 2 +Inf, 4 -Inf, 8 every term is a -0
            if a_special[i] or b_special[j] or (has_acc and c_flag[i, j] & (NAN | INF)):
                for t in range(g):
                    f = a_flag[i, t] | b_flag[j, t]
                    if f & (NAN | INF):
                        if (f & NAN) or (f & ZERO):      # NaN, or Inf times zero
                            flags |= 1
                        else:
                            flags |= 4 if neg[t] else 2
                if has_acc:
                    fc = c_flag[i, j]
                    if fc & NAN:
                        flags |= 1
                    elif fc & INF:
                        flags |= 4 if c_sign[i, j] == 1 else 2
            if total == 0:
                # Every term a -0 (then the sum is 0 too): the IEEE sign of the zero. A +0
                # accumulator (zero_acc) is a +0 term, so the sum is +0.
                all_neg_zero = not zero_acc
                for t in range(g):
                    if mag[t] != 0 or neg[t] == 0:
                        all_neg_zero = False
                if has_acc and (c_sig[i, j] != 0 or c_sign[i, j] == 0):
                    all_neg_zero = False
                if all_neg_zero:
                    flags |= 8
            out_sum[i, j] = total
            out_lsb[i, j] = step_lsb - jam
            out_flag[i, j] = flags


def _build():
    """Compile the kernel (and ``align_one``, which it inlines) with numba; once per process.

    Both are plain Python at module level, compiled here: module globals, not closure cells,
    because numba keys its on-disk cache on the pickled closure, which differs from process to
    process (a closure would recompile on every run).
    """
    numba = _numba.load()
    compiled_align_one()
    return numba.njit(cache=_numba.cache(), nogil=True)(_step_loop)


def compiled_align_one():
    """:func:`align_one` compiled by numba, to be inlined into kernels' loops; once per
    process."""
    global align_one
    if not hasattr(align_one, "py_func"):
        align_one = _numba.load().njit(cache=_numba.cache(), inline="always")(align_one)
    return align_one


def side(op, scale, transpose: bool):
    """One operand with its block scales folded in: sign, sig, lsb, e, flags (contiguous)."""
    sig, lsb, e = op.sig, op.lsb, op.e
    nan, zero = op.nan, op.zero
    if scale is not None:
        sig, lsb, e = sig * scale.sig, lsb + scale.lsb, e + scale.e
        nan, zero = nan | scale.nan, zero | scale.zero
    flag = nan * NAN | op.inf * INF | zero * ZERO
    arrays = (op.sign, sig, lsb, e, flag)
    if transpose:
        arrays = tuple(x.T for x in arrays)
    # int32 halves the bytes streamed per term; significands (at most 2**12 with a UE4M3
    # scale) and exponents fit, and the kernel multiplies in int64.
    return tuple(np.ascontiguousarray(x, np.int32) for x in arrays)


def prepare_b(b, sb):
    """B's columns for :func:`step_sums`, prepared once per step: scales folded in, (N, g),
    and whether each column holds a NaN or Inf."""
    cols = side(b, sb, True)
    return (*cols, np.ascontiguousarray((cols[4] & (NAN | INF)).any(axis=1)))


def step_sums(a, sa, b_side, acc, frac_bits: int, align: str, normalized: bool,
              e_zero: int, zero_acc: bool = False):
    """(sum, lsb, flags) per dot of one fused step: rows ``a`` (r, g) against ``b_side``.

    ``a``/``sa`` are ``fast.operands.Operand`` records (``sa`` its block scales or None), ``b_side``
    comes from :func:`prepare_b`; ``acc`` is an operand record, or None (``zero_acc``: it is
    +0 everywhere and takes part only in the maximum). The products'
    alignment exponent is ``e_a + e_b`` plus the scale exponents, or the exponent of the exact
    product when ``normalized``. ``flags`` bits: 1 NaN, 2 +Inf, 4 -Inf, 8 every term is -0.
    """
    global _kernel
    if _kernel is None:
        _kernel = _build()
    r, n = a.sig.shape[0], b_side[1].shape[0]
    if acc is not None:
        accs = tuple(np.ascontiguousarray(x, np.int64) for x in (
            acc.sign, acc.sig, acc.lsb, acc.e, acc.nan * NAN | acc.inf * INF | acc.zero * ZERO))
    else:
        accs = (np.zeros((1, 1), np.int64),) * 5
    out_sum = np.empty((r, n), np.int64)
    out_lsb = np.empty((r, n), np.int64)
    out_flag = np.empty((r, n), np.int64)
    _kernel(*side(a, sa, False), *b_side, *accs, acc is not None, zero_acc, frac_bits,
            ALIGN_CODES[align], normalized, e_zero, out_sum, out_lsb, out_flag)
    return out_sum, out_lsb, out_flag
