"""Compiled whole-chain kernel of the fast engine (numba): codes in, D's codes out, per dot.

:mod:`._kernels` computes one fused step's exact sums and leaves the rounding, the conversions,
the chaining and the promotions to numpy (one pass over an (M, N) array each). For the units
most presets are (``fast.fused.applies``: a chain of truncating steps, C in the first step,
zeros +0, IEEE specials), this kernel does all of it for one dot before the next: every step of
every instruction (:func:`_step_tile` as ``_kernels._step_loop`` computes it), the sum rounded to
``acc_format`` by the same integer algorithm as ``formats.round_to`` (its compiled twin,
inlined; for RZ and RNE its branch-free equal, :func:`_round_sum`), the zero sign and
specials as ``fast.step.finish``, the conversion to ``d_format`` as ``fast.adders.convert``,
the promotion into a separate total as ``fast.adders.add_round`` and NaN as
``spec.d_nan``. The tests hold it equal to the numpy path and the step kernel.

numba's on-disk cache is keyed on this file: a change to the rounding kernel it inlines
(``mxsim/formats/_round_kernel.py``) alone does not recompile it; clear ``__pycache__`` then.
"""

from __future__ import annotations

import numpy as np

from .. import _numba
from ..formats.rounding import compiled_rounding

__all__ = ["chain_rows", "pack_rows", "round_sums"]

NAN, INF, ZERO = 1, 2, 4        # operand flag bits (as in _kernels)
_RB = np.zeros(1, np.uint64)    # the random bits of a rounding that is never stochastic
_kernel = None
_sums = None
_pack = None
round_one = None


def _round(p, s, lsb, sig, st):
    # formats.round_to of one value; p from formats.rounding_params.
    return np.int64(round_one(s, lsb, np.uint64(sig), st, _RB, 0, p[0] != 0, p[1], p[2], p[3],
                              np.uint64(p[4]), p[5], p[6], p[7] != 0, p[8] != 0, p[9], p[10],
                              p[11] != 0, p[12], p[13] != 0, p[14], p[15], p[16], 0))


def _decode(p, code):
    # Operand.of for one code of an IEEE-style float format: sign, sig, lsb, e, flags.
    man, emin, bias, eb, ss = p[1], p[2], p[5], p[6], p[9]
    sign = (code >> ss) & 1
    ef = (code >> man) & ((1 << eb) - 1)
    m = code & ((1 << man) - 1)
    if ef == (1 << eb) - 1:
        return sign, 0, 0, 0, (NAN if m != 0 else INF)
    e = emin if ef == 0 else ef - bias
    sig = m if ef == 0 else m | (1 << man)
    return sign, sig, e - man, e, (ZERO if sig == 0 else 0)


def _specials(p, code, nan, pinf, ninf):
    # fast.operands.special_codes for one code.
    if pinf:
        code = p[12]
    if ninf:
        code = p[12] | (1 << p[9])
    if nan or (pinf and ninf):
        code = p[14]
    return code


def _products(a, b, i, j, lo, hi, normalized, e_zero, emax, mag, neg, lsb):
    # The step's products (kept in mag, neg, lsb) and its largest alignment exponent.
    ulo = np.uint64(lo)
    for t in range(ulo, np.uint64(hi)):   # unsigned indices: see _signed_tile
        p = np.int64(a[1, i, t]) * b[1, j, t]
        x = t - ulo
        mag[x] = p
        neg[x] = a[0, i, t] ^ b[0, j, t]
        lsb[x] = a[2, i, t] + b[2, j, t]
        if p == 0:
            e = e_zero
        elif normalized:
            bl = 0
            y = p
            while y:
                bl += 1
                y >>= 1
            e = lsb[x] + bl - 1
        else:
            e = a[3, i, t] + b[3, j, t]
        emax = max(emax, e)
    return emax


def _aligned(mag, neg, lsb, g, base, mode):
    # Every product rounded to the step's LSB (base) by the alignment mode, summed exactly.
    total = 0
    if mode == 0:
        for x in range(g):
            shift = base - lsb[x]
            if shift <= 0:
                m = mag[x] << (-shift)
            elif shift >= 63:
                m = 0
            else:
                m = mag[x] >> shift
            total += -m if neg[x] else m
    else:
        for x in range(g):
            if mag[x] != 0:
                total += align_one(mag[x], neg[x], base - lsb[x], mode)
    return total


def _term_flags(a, b, i, j, lo, hi, neg):
    # NaN / +Inf / -Inf of the step's products (flag bits 1, 2, 4).
    flags = 0
    for t in range(np.uint64(lo), np.uint64(hi)):   # unsigned indices: see _signed_tile
        f = a[4, i, t] | b[4, j, t]
        if f & (NAN | INF):
            if (f & NAN) or (f & ZERO):
                flags |= 1
            else:
                flags |= 4 if neg[t - np.uint64(lo)] else 2
    return flags


def _step_tile(a, b, i, j0, nj, lo, hi, acc, pacc, zero_acc, special, cfg, mag, neg, lsb,
               tot, slsb, flg):
    # One fused step of dots (i, j0 + x), x < nj, with accumulator codes acc (of the format
    # of pacc; zero_acc: +0 everywhere): exact sums, their LSB exponents and flags.
    frac_bits, mode, normalized, e_zero = cfg[0], cfg[1], cfg[2] != 0, cfg[3]
    jam = 1 if mode == 3 else 0
    floor = e_zero if zero_acc else -(1 << 40)
    if cfg[4]:
        _signed_tile(a, b, i, j0, nj, lo, hi, acc, pacc, zero_acc, frac_bits, e_zero, floor,
                     tot, slsb, flg)
        return
    for x in range(nj):
        j = j0 + x
        emax = _products(a, b, i, j, lo, hi, normalized, e_zero, floor, mag, neg, lsb)
        cs, csig, clsb, ce, cf = _decode(pacc, acc[x])
        if not zero_acc:
            emax = max(emax, e_zero if csig == 0 else ce)
        step_lsb = emax - frac_bits
        total = _aligned(mag, neg, lsb, hi - lo, step_lsb - jam, mode)
        if not zero_acc and csig != 0:
            total += align_one(np.int64(csig), cs, step_lsb - jam - clsb, mode)
        flags = _term_flags(a, b, i, j, lo, hi, neg) if special[x] else 0
        if not zero_acc:
            if cf & NAN:
                flags |= 1
            elif cf & INF:
                flags |= 4 if cs == 1 else 2
        tot[x] = total
        slsb[x] = step_lsb - jam
        flg[x] = flags


def _signed_tile(a, b, i, j0, nj, lo, hi, acc, pacc, zero_acc, frac_bits, e_zero, floor, tot,
                 slsb, flg):
    # _step_tile for a raw RZ unit whose sides carry signed significands (sign 0) and no NaN
    # or Inf (fast.fused.dot checks): the products' signs are their own, no flags per term.
    # B comes by instruction as (5, k_inst, N) (its columns along the rows), so the loops run
    # over the tile's columns, long and contiguous, with one term of A fixed: the compiler
    # vectorises them, where a loop over one step's K terms is too short to pay.
    # Unsigned indices, which the compiler can prove non-negative (numba wraps negative ones,
    # a test on every access that keeps these loops from being vectorised).
    lo, hi = np.uint64(max(lo, 0)), np.uint64(max(hi, 0))
    uj0, unj = np.uint64(j0), np.uint64(nj)
    for x in range(unj):
        slsb[x] = floor
    for t in range(lo, hi):
        if a[1, i, t] == 0:                      # every product 0: e_zero
            for x in range(unj):
                slsb[x] = max(slsb[x], e_zero)
        else:
            ae = a[3, i, t]
            for x in range(unj):
                bj = uj0 + x
                slsb[x] = max(slsb[x], e_zero if b[1, t, bj] == 0 else ae + b[3, t, bj])
    if not zero_acc:
        for x in range(unj):
            _, csig, _, ce, _ = _decode(pacc, acc[x])
            slsb[x] = max(slsb[x], e_zero if csig == 0 else ce)
    for x in range(unj):
        slsb[x] -= frac_bits
        tot[x] = 0
    for t in range(lo, hi):
        asig = np.int64(a[1, i, t])
        if asig == 0:
            continue
        alsb = a[2, i, t]
        for x in range(unj):
            bj = uj0 + x
            p = asig * b[1, t, bj]
            shift = slsb[x] - (alsb + b[2, t, bj])
            m = abs(p)
            if shift <= 0:
                v = m << (-shift)
            elif shift >= 63:
                v = 0
            else:
                v = m >> shift
            tot[x] += -v if p < 0 else v
    for x in range(unj):
        flags = 0
        if not zero_acc:
            cs, csig, clsb, _, cf = _decode(pacc, acc[x])
            if csig != 0:
                tot[x] += align_one(np.int64(csig), cs, slsb[x] - clsb, 0)
            if cf & NAN:
                flags = 1
            elif cf & INF:
                flags = 4 if cs == 1 else 2
        flg[x] = flags


def _round_sum(p, total, lsb):
    # formats.round_to of total * 2**lsb (no sticky bit) for RZ and RNE into a float format
    # whose largest significand is all ones (fast.fused.plan's cfg[6]): the same code as
    # _round, computed with selects instead of the branches the data decides (a step sum's
    # alignment to its binade is a coin flip for the branch predictor).
    man, emin, mask = p[1], p[2], (np.uint64(1) << np.uint64(p[1])) - np.uint64(1)
    sig = np.uint64(abs(total))
    msb = lsb + 63 - np.int64(_clz(sig))
    target = (msb if msb > emin else emin) - man
    shift = target - lsb
    right = np.uint64(min(max(shift, 0), 63))
    kept = (sig >> right) << np.uint64(min(max(-shift, 0), 63))
    if p[15] == 0:                      # RNE: guard bit, then the rest or an odd kept
        # (sig < 2**63: no bit at 63 or above, so no guard bit beyond a shift of 63)
        guard = (sig >> (right - np.uint64(1))) & np.uint64(1) if 0 < shift < 64 \
            else np.uint64(0)
        rest = sig & ((np.uint64(1) << (right - np.uint64(1))) - np.uint64(1)) \
            if shift > 1 else np.uint64(0)
        kept += guard & (np.uint64(rest != 0) | (kept & np.uint64(1)))
        carry = kept >> np.uint64(man + 1)
        kept >>= carry
        target += np.int64(carry)
    ef = target + man + p[5] if (kept >> np.uint64(man)) != 0 else 0
    code = (ef << man) | np.int64(kept & mask)
    if target + man > p[3]:
        to_inf = p[16] == 2 or (p[16] == 1 and p[15] == 0)
        code = p[12] if to_inf else p[10]
    return code | (np.int64(total < 0) << p[9]) if total != 0 else 0


def _finish(pa, total, lsb, flags, quick):
    # The step sum's code of acc_format: rounded, zeros +0, NaN and Inf (fast.step.finish).
    if quick:
        code = _round_sum(pa, total, lsb)
    else:
        code = _round(pa, 1 if total < 0 else 0, lsb, abs(total), False)
    mask = (1 << pa[9]) - 1
    if (code & mask) == 0:
        code = code & mask
    return _specials(pa, code, (flags & 1) != 0, (flags & 2) != 0, (flags & 4) != 0)


def _finish_quick(pa, tot, slsb, flg, acc, nj):
    # _finish(..., quick) of a tile's sums, one loop of selects the compiler vectorises.
    # The parameters as a tuple: values the compiler keeps out of the loop, where an array's
    # could change with each store to acc (the two might overlap).
    q = (pa[0], pa[1], pa[2], pa[3], pa[4], pa[5], pa[6], pa[7], pa[8], pa[9], pa[10], pa[11],
         pa[12], pa[13], pa[14], pa[15], pa[16])
    mask = (np.int64(1) << pa[9]) - 1
    inf, sbit, nan = pa[12], np.int64(1) << pa[9], pa[14]
    for x in range(np.uint64(nj)):
        code = _round_sum(q, tot[x], slsb[x])
        code = code & mask if (code & mask) == 0 else code
        f = flg[x]
        code = inf if (f & 2) != 0 else code
        code = inf | sbit if (f & 4) != 0 else code
        acc[x] = nan if (f & 1) != 0 or (f & 6) == 6 else code


def _exact_sum2(sx, gx, lx, sy, gy, ly):
    # fast.adders.exact_sum2 of one pair: negative, magnitude, LSB exponent, sticky, zero.
    none = -(1 << 20)
    mx = none if gx == 0 else lx + _bits(gx) - 1
    my = none if gy == 0 else ly + _bits(gy) - 1
    base = max(mx, my) - 62
    tx, stx = _window(gx, base - lx)
    ty, sty = _window(gy, base - ly)
    sticky = stx or sty
    x_big = tx >= ty
    big, small = (tx, ty) if x_big else (ty, tx)
    if sx != sy:
        mag = big - small - np.uint64(1 if sticky else 0)
        sgn = sx if x_big else sy
    else:
        mag = big + small
        sgn = sx
    zero = mag == 0 and not sticky
    return (sgn == 1 and not zero), mag, base, sticky, zero


def _bits(x):
    n = 0
    while x:
        n += 1
        x >>= 1
    return n


def _window(sig, shift):
    # fast.adders._window of one significand: kept (uint64) and whether bits fell off.
    x = np.uint64(sig)
    if shift <= 0:
        return x << np.uint64(min(-shift, 63)), False
    right = np.uint64(min(shift, 63))
    return x >> right, (x & ((np.uint64(1) << right) - np.uint64(1))) != 0


def _add_round(pp, x, y):
    # fast.adders.add_round of two d_format codes, zeros +0 (ZeroSign.POSITIVE).
    sx, gx, lx, _, fx = _decode(pp, x)
    sy, gy, ly, _, fy = _decode(pp, y)
    neg, mag, base, sticky, _ = _exact_sum2(sx, gx, lx, sy, gy, ly)
    code = _round(pp, 1 if neg else 0, base, mag, sticky)
    mask = (1 << pp[9]) - 1
    if (code & mask) == 0:
        code = code & mask
    ix, iy = (fx & INF) != 0, (fy & INF) != 0
    return _specials(pp, code, ((fx | fy) & NAN) != 0, (ix and sx == 0) or (iy and sy == 0),
                     (ix and sx == 1) or (iy and sy == 1))


def _convert(pa, pc, move, code):
    # fast.adders.convert of an acc_format code to d_format (pc: its rounding); move >= 0: the
    # formats share their exponents and specials, d_format's mantissa is move bits wider (0:
    # the same format), so the fields move over.
    if move >= 0:
        return ((code >> pa[9]) << pc[9]) | ((code & ((1 << pa[9]) - 1)) << move)
    s, sig, lsb, _, f = _decode(pa, code)
    res = _round(pc, s, lsb, sig, False)
    inf = (f & INF) != 0
    return _specials(pc, res, (f & NAN) != 0, inf and s == 0, inf and s == 1)


def _instruction(a, b, i, j0, nj, off, bounds, d, d_zero, special, cfg, mag, neg, lsb, pa, pc,
                 move, acc, tot, slsb, flg):
    # One instruction of dots (i, j0 + x): its steps, then D (into d, codes of d_format).
    for s in range(bounds.shape[0] - 1):
        if s == 0:
            _step_tile(a, b, i, j0, nj, off + bounds[0], off + bounds[1], d, pc, d_zero,
                       special, cfg, mag, neg, lsb, tot, slsb, flg)
        else:
            _step_tile(a, b, i, j0, nj, off + bounds[s], off + bounds[s + 1], acc, pa, False,
                       special, cfg, mag, neg, lsb, tot, slsb, flg)
        if cfg[6] != 0:
            _finish_quick(pa, tot, slsb, flg, acc, nj)
        else:
            for x in range(nj):
                acc[x] = _finish(pa, tot[x], slsb[x], flg[x], False)
    for x in range(nj):
        d[x] = _convert(pa, pc, move, acc[x])


def _chain_loop(a, b, a_special, b_special, c, has_c, bounds, k_inst, n_inst, promote, cfg,
                pa, pc, pp, move, d_nan, r0, r1, out):
    # Rows r0..r1 of D against every column, in blocks of cfg[7] rows by cfg[5] columns: each
    # instruction of the chain runs over the whole block before the next, so one instruction's
    # slices of A and B stay in cache whatever K is (each dot keeps its state in the block).
    g = 1
    for s in range(bounds.shape[0] - 1):
        g = max(g, bounds[s + 1] - bounds[s])
    mag, neg, lsb = np.empty(g, np.int64), np.empty(g, np.int64), np.empty(g, np.int64)
    tile, rows = cfg[5], cfg[7]
    d, acc = np.empty((rows, tile), np.int64), np.empty((rows, tile), np.int64)
    total = np.empty((rows, tile), np.int64)
    tot, slsb, flg = np.empty(tile, np.int64), np.empty(tile, np.int64), np.empty(tile, np.int64)
    special = np.empty((rows, tile), np.bool_)
    n = b.shape[3] if cfg[4] else b.shape[2]      # signed: B by instruction is (5, k, N)
    for j0 in range(0, n, tile):
        nj = min(n, j0 + tile) - j0
        for i0 in range(r0, r1, rows):
            ni = min(r1, i0 + rows) - i0
            # What the block's dots start from: C (without it, the first step reads a +0
            # accumulator and d is not read), C as the separate total under promotion, and
            # which dots meet a NaN or Inf operand (read off the plain path only).
            if has_c or promote:
                for y in range(ni):
                    for x in range(nj):
                        d[y, x] = c[i0 + y, j0 + x] if has_c else 0
                        total[y, x] = d[y, x]
            if not cfg[4]:
                for y in range(ni):
                    for x in range(nj):
                        special[y, x] = a_special[i0 + y] or b_special[j0 + x]
            d_zero = promote != 0 or not has_c
            for inst in range(n_inst):
                if promote and inst and inst % promote == 0:
                    for y in range(ni):
                        for x in range(nj):
                            total[y, x] = _add_round(pp, total[y, x], d[y, x])
                    d_zero = True
                ai, bi = a[inst], b[inst]
                for y in range(ni):
                    _instruction(ai, bi, i0 + y, j0, nj, 0, bounds, d[y], d_zero, special[y],
                                 cfg, mag, neg, lsb, pa, pc, move, acc[y], tot, slsb, flg)
                d_zero = False
            for y in range(ni):
                for x in range(nj):
                    v = _add_round(pp, total[y, x], d[y, x]) if promote else d[y, x]
                    # d_format is IEEE-style: codes above Inf's magnitude are NaN
                    out[i0 + y, j0 + x] = d_nan if (v & ((1 << pc[9]) - 1)) > pc[12] else v


def _build():
    """Compile the kernel with numba, its helpers inlined; once per process (then cached on
    disk). The helpers are module globals, not closures, for numba's cache (see _kernels)."""
    global round_one, align_one, _round, _decode, _specials, _products, _aligned, \
        _term_flags, _step_tile, _signed_tile, _finish, _finish_quick, _exact_sum2, _bits, \
        _window, _add_round, _convert, _instruction, _round_sum, _clz
    from . import _kernels
    numba = _numba.load()
    from numba.cpython.unsafe.numbers import leading_zeros as _clz
    round_one = compiled_rounding()
    align_one = _kernels.compiled_align_one()
    inline = numba.njit(cache=_numba.cache(), inline="always")
    (_round, _round_sum, _decode, _specials, _finish, _exact_sum2, _bits, _window, _add_round,
     _convert) = (inline(getattr(f, "py_func", f)) for f in (
        _round, _round_sum, _decode, _specials, _finish, _exact_sum2, _bits, _window,
        _add_round, _convert))
    # The loops are compiled apart (LLVM still inlines them where it pays): numba's own
    # inlining of whole loop nests makes slower code.
    call = numba.njit(cache=_numba.cache())
    _products, _aligned, _term_flags, _signed_tile, _step_tile, _finish_quick, _instruction = (
        call(getattr(f, "py_func", f)) for f in (
            _products, _aligned, _term_flags, _signed_tile, _step_tile, _finish_quick,
            _instruction))
    return numba.njit(cache=_numba.cache(), nogil=True)(_chain_loop)


def _pack_term(table, stable, c, sc, signed, inst, tt, x, out):
    # One term's fields (table row c, scale row sc folded in) into out[inst, :, x, tt];
    # whether it is a NaN or an Inf. No scales: stable is None, a branch numba prunes as it
    # compiles (a branch on a flag, even never taken, makes the loops 3 times slower).
    sign, sig, lsb, e, f = table[0, c], table[1, c], table[2, c], table[3, c], table[4, c]
    if stable is not None:
        sig *= stable[0, sc]
        lsb += stable[1, sc]
        e += stable[2, sc]
        f |= stable[3, sc]
    if signed:                       # without a branch on the data's signs
        sig, sign = sig - 2 * sig * sign, sign - sign
    out[inst, 0, x, tt], out[inst, 1, x, tt], out[inst, 2, x, tt] = sign, sig, lsb
    out[inst, 3, x, tt], out[inst, 4, x, tt] = e, f
    return (f & (NAN | INF)) != 0


def _pack_loop(codes, mask, table, scodes, stable, block, k_inst, signed, by_column, r0, r1,
               out, special):
    # Rows r0..r1 of a side, (K / k_inst, 5, rows, k_inst) int32, from codes (rows, K), or
    # (K, rows) when by_column (B as stored: its columns in groups of 64, each group down K).
    n_inst = out.shape[0]
    if not by_column:
        for i in range(r0, r1):
            sp = False
            for inst in range(n_inst):
                for tt in range(k_inst):
                    t = inst * k_inst + tt
                    sc = 0
                    if scodes is not None:
                        sc = scodes[i, t // block]
                    sp |= _pack_term(table, stable, codes[i, t] & mask, sc, signed, inst, tt,
                                     i, out)
            special[i] = sp
        return
    for i0 in range(r0, r1, 64):
        i1 = min(r1, i0 + 64)
        for i in range(i0, i1):
            special[i] = False
        for inst in range(n_inst):
            for tt in range(k_inst):
                t = inst * k_inst + tt
                for i in range(i0, i1):
                    sc = 0
                    if scodes is not None:
                        sc = scodes[t // block, i]
                    if _pack_term(table, stable, codes[t, i] & mask, sc, signed, inst, tt, i,
                                  out):
                        special[i] = True


def _build_pack():
    global _pack_term
    numba = _numba.load()
    _pack_term = numba.njit(cache=_numba.cache(), inline="always")(
        getattr(_pack_term, "py_func", _pack_term))
    return numba.njit(cache=_numba.cache(), nogil=True)(_pack_loop)


def pack_rows(codes, mask: int, table, scodes, stable, block: int, k_inst: int, signed: bool,
              by_column: bool, r0: int, r1: int, out, special) -> None:
    """Rows ``r0:r1`` of one side of :func:`chain_rows` looked up from its codes: ``out``
    (K / k_inst, 5, rows, k_inst) int32 and ``special`` (rows,) bool, whether a row holds a
    NaN or an Inf. ``codes`` (rows, K), or (K, rows) with ``by_column``, bits above ``mask``
    ignored; ``table`` (5, codes) the fields of each code (``fast.operands.code_table``);
    ``scodes`` the block scales' codes shaped as ``codes`` with K / ``block`` and ``stable``
    their (4, 256) fields, or None; ``signed``: the signs folded into the significands (the
    sign plane 0), as ``fast.fused.dot`` does for a raw RZ unit. Releases the GIL."""
    global _pack
    if _pack is None:
        _pack = _build_pack()
    if scodes is None:
        stable, block = None, 1
    _pack(codes, mask, table, scodes, stable, block, k_inst, signed, by_column, r0, r1, out,
          special)


def _round_sums_loop(p, totals, lsbs, out):
    for x in range(totals.shape[0]):
        out[x] = _round_sum(p, totals[x], lsbs[x])


def round_sums(p, totals, lsbs):
    """The kernel's branch-free rounding (``_round_sum``) of ``totals * 2**lsbs`` (int64
    arrays) to the format of ``p`` (``formats.rounding_params``: RZ or RNE, a float format
    whose largest significand is all ones), codes as int64, zeros +0: for the tests that hold
    it equal to ``formats.round_to``."""
    global _kernel, _sums
    if _kernel is None:
        _kernel = _build()
    if _sums is None:
        _sums = _numba.load().njit(cache=_numba.cache())(_round_sums_loop)
    out = np.empty(len(totals), np.int64)
    _sums(p, np.ascontiguousarray(totals, np.int64), np.ascontiguousarray(lsbs, np.int64), out)
    return out


align_one = None
_clz = None   # numba's leading-zero count (an intrinsic), set by _build


def chain_rows(a, b, a_special, b_special, c, bounds, k_inst: int, n_inst: int,
               promote: int, cfg, pa, pc, pp, move: int, d_nan: int, r0: int, r1: int,
               out) -> None:
    """Rows ``r0:r1`` of D into ``out`` (int64 codes of d_format), each dot computed whole.

    ``a`` (K / k_inst, 5, M, k_inst) and ``b`` (K / k_inst, 5, N, k_inst) are int32 sides
    (``_kernels.side``, scales folded in) by instruction (:func:`pack_rows`), so that one
    instruction's slice of every row is one piece whatever K is; ``a_special``/``b_special``
    say which rows/columns hold a NaN or Inf; ``c`` (M, N) int64 codes of d_format or None;
    ``bounds`` the steps' K offsets in an instruction of ``k_inst``, ``n_inst`` instructions;
    ``promote`` the spec's promote_every or 0; ``cfg`` (frac_bits, align code, normalized,
    e_zero, signed: the sides carry signed significands and no NaN/Inf, columns per block,
    quick: the step sums round by :func:`_round_sum`, rows per block); ``pa``/``pc``/``pp``
    the rounding parameters of the step sums (acc_format), the conversion and the
    promotion (d_format); ``move``: how many bits wider d_format's mantissa is where the
    conversion only moves fields (-1: it rounds). Releases the GIL."""
    global _kernel
    if _kernel is None:
        _kernel = _build()
    has_c = c is not None
    _kernel(a, b, a_special, b_special, c if has_c else np.zeros((1, 1), np.int64), has_c,
            bounds, k_inst, n_inst, promote, cfg, pa, pc, pp, move, d_nan, r0, r1, out)
