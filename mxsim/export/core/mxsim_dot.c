/* mxsim_dot.c: the arithmetic of an mxsim unit spec in C99 (see mxsim_dot.h).
 *
 * The model is mxsim's (docs/units.md): exact products, per fused step the terms aligned to
 * the largest exponent's window of frac_bits bits and summed exactly, one rounding per step;
 * GST groups, reduction trees, C after, promotions and FP32-scale epilogues as the spec says.
 * Values in flight are exact (mxsim_val); sums wider than 64 bits go through a fixed-point
 * accumulator wide enough for every exponent a unit can meet. Written for mxsim and held
 * bit-equal to its engines by tests/mxsim/export; no global state. */
#include "mxsim_dot.h"

#include <string.h>

/* -- bits -------------------------------------------------------------------------------- */

static int bit_length(uint64_t x)
{
#if defined(__GNUC__)
    return x ? 64 - __builtin_clzll(x) : 0;
#else
    int n = 0;
    while (x >> 32) { x >>= 32; n += 32; }
    while (x) { x >>= 1; n += 1; }
    return n;
#endif
}

static mxsim_val num(int neg, uint64_t sig, int exp)
{
    mxsim_val v;
    v.kind = MXSIM_NUM; v.neg = neg; v.sig = sig; v.exp = exp;
    return v;
}

static mxsim_val special(int kind, int neg)
{
    mxsim_val v = num(neg, 0, 0);
    v.kind = kind;
    return v;
}

static int is_zero(mxsim_val v) { return v.kind == MXSIM_NUM && v.sig == 0; }

/* floor(log2|v|) of a non-zero finite value */
static int floor_log2(mxsim_val v) { return bit_length(v.sig) - 1 + v.exp; }

static uint32_t load(const void *p, int size, size_t i)
{
    if (size == 1) return ((const uint8_t *)p)[i];
    if (size == 2) return ((const uint16_t *)p)[i];
    return ((const uint32_t *)p)[i];
}

/* -- a wide exact sum: two fixed-point magnitudes (positive and negative terms) ------------ */

#define ACC_LIMBS 72
#define ACC_LSB (-1152)          /* the accumulator holds multiples of 2^-1152 below 2^1152 */

typedef struct wide {
    uint32_t mag[2][ACC_LIMBS];
    int lo, hi;                  /* limbs touched: [lo, hi) */
    int lost;                    /* a term fell outside the range (never for a valid spec) */
} wide;

static void wide_init(wide *w)
{
    memset(w->mag, 0, sizeof w->mag);
    w->lo = ACC_LIMBS; w->hi = 0; w->lost = 0;
}

/* add sig * 2^exp (sig < 2^64) to the magnitude of its sign */
static void wide_add(wide *w, int neg, uint64_t sig, int exp)
{
    uint32_t *m = w->mag[neg ? 1 : 0];
    int off, li, sh, i;
    uint64_t parts[3], carry = 0;
    if (sig == 0) return;
    off = exp - ACC_LSB;
    if (off < 0 || off + 64 >= 32 * (ACC_LIMBS - 2)) { w->lost = 1; return; }
    li = off / 32; sh = off % 32;
    parts[0] = (uint32_t)(sig << sh);
    parts[1] = sh ? (uint32_t)(sig >> (32 - sh)) : (uint32_t)(sig >> 32);
    parts[2] = sh ? (uint32_t)(sig >> (64 - sh)) : 0;
    for (i = 0; i < 3 || carry; i++) {
        uint64_t s = (uint64_t)m[li + i] + (i < 3 ? parts[i] : 0) + carry;
        m[li + i] = (uint32_t)s;
        carry = s >> 32;
    }
    if (li < w->lo) w->lo = li;
    if (li + i > w->hi) w->hi = li + i;
}

static void wide_add_val(wide *w, mxsim_val v) { wide_add(w, v.neg, v.sig, v.exp); }

/* The sum as (neg, top, x, sticky): |sum| = (top + a fraction below) * 2^x, top holding the
 * sum's leading 64 bits (top = 0: the sum is zero). */
typedef struct rough { int neg; uint64_t top; int x; int sticky; } rough;

static rough wide_result(const wide *w)
{
    rough r;
    uint32_t diff[ACC_LIMBS];
    const uint32_t *big, *small;
    int i, top, cmp = 0;
    uint64_t borrow = 0;
    r.neg = 0; r.top = 0; r.x = 0; r.sticky = 0;
    for (i = w->hi - 1; i >= w->lo && !cmp; i--)
        cmp = w->mag[0][i] > w->mag[1][i] ? 1 : w->mag[0][i] < w->mag[1][i] ? -1 : 0;
    if (!cmp) return r;
    r.neg = cmp < 0;
    big = w->mag[r.neg ? 1 : 0]; small = w->mag[r.neg ? 0 : 1];
    for (i = w->lo; i < w->hi; i++) {
        uint64_t d = (uint64_t)big[i] - small[i] - borrow;
        diff[i] = (uint32_t)d;
        borrow = (d >> 32) & 1;
    }
    for (top = w->hi - 1; diff[top] == 0; top--) {}
    {
        /* the top limb's nb bits, then the two limbs below: the leading 64 bits */
        int nb = bit_length(diff[top]);
        uint64_t l1 = top - 1 >= w->lo ? diff[top - 1] : 0;
        uint64_t l2 = top - 2 >= w->lo ? diff[top - 2] : 0;
        uint64_t low = l1 << 32 | l2;
        r.top = ((uint64_t)diff[top] << (64 - nb)) | (low >> nb);
        r.x = ACC_LSB + 32 * (top - 2) + nb;
        r.sticky = (low & ((((uint64_t)1) << nb) - 1)) != 0;
        for (i = top - 3; i >= w->lo && !r.sticky; i--)
            r.sticky = diff[i] != 0;
    }
    return r;
}

/* -- rounding -------------------------------------------------------------------------- */

static int above_max(uint64_t sig, int exp, const mxsim_format *f)
{
    int e = bit_length(sig) - 1 + exp, emax = bit_length(f->max_sig) - 1 + f->max_exp;
    if (e != emax) return e > emax;
    /* the same binade: compare the significands at the finer exponent */
    if (exp >= f->max_exp) return (sig << (exp - f->max_exp)) > f->max_sig;
    return sig > (f->max_sig << (f->max_exp - exp));
}

/* (-1)^neg * (top + sticky fraction) * 2^x rounded to fmt (its precision, subnormals and
 * range) with rounding rm and overflow ov; a zero result keeps neg. */
static mxsim_val round_bits(int neg, uint64_t top, int x, int sticky, const mxsim_format *f,
                            int rm, int ov)
{
    int clz, e, lsb, s, up = 0, cmp, inexact;
    uint64_t kept, rem, half;
    if (top == 0) return num(0, 0, 0);
    clz = 64 - bit_length(top);
    top <<= clz; x -= clz;
    e = x + 63;
    lsb = (e > f->emin ? e : f->emin) - f->man_bits;
    s = lsb - x;                                  /* >= 1: the format is narrower than 64 bits */
    if (s >= 64) {
        kept = 0;
        if (s > 64) { cmp = -1; inexact = 1; }
        else {
            half = (uint64_t)1 << 63;
            cmp = top > half ? 1 : top < half ? -1 : (sticky ? 1 : 0);
            inexact = 1;
        }
    } else {
        kept = top >> s;
        rem = top & ((((uint64_t)1) << s) - 1);
        half = ((uint64_t)1) << (s - 1);
        cmp = rem > half ? 1 : rem < half ? -1 : (sticky ? 1 : 0);
        inexact = rem != 0 || sticky;
    }
    switch (rm) {
    case MXSIM_RNE: up = cmp > 0 || (cmp == 0 && (kept & 1)); break;
    case MXSIM_RNA: up = cmp >= 0; break;
    case MXSIM_RU: up = inexact && !neg; break;
    case MXSIM_RD: up = inexact && neg; break;
    default: up = 0;
    }
    kept += (uint64_t)up;
    if (kept && above_max(kept, lsb, f)) {
        if (ov == MXSIM_OVF_SATURATE || (ov == MXSIM_OVF_IEEE &&
                (rm == MXSIM_RZ || (rm == MXSIM_RU && neg) || (rm == MXSIM_RD && !neg))))
            return num(neg, f->max_sig, f->max_exp);
        return special(MXSIM_INF, neg);
    }
    return num(neg, kept, lsb);
}

static mxsim_val round_val(mxsim_val v, const mxsim_format *f, int rm, int ov)
{
    if (v.kind != MXSIM_NUM || v.sig == 0) return v;
    return round_bits(v.neg, v.sig, v.exp, 0, f, rm, ov);
}

static mxsim_val round_wide(const wide *w, const mxsim_format *f, int rm, int ov, int *zero)
{
    rough r;
    if (w->lost) { *zero = 0; return special(MXSIM_NAN, 0); }
    r = wide_result(w);
    *zero = r.top == 0;
    return round_bits(r.neg, r.top, r.x, r.sticky, f, rm, ov);
}

/* -- codes ----------------------------------------------------------------------------- */

/* the exact value of a code and (*e) its exponent field as mxsim.formats reads it: the binade
 * of a finite value, the least exponent for subnormals and zeros */
static mxsim_val decode_e(const mxsim_format *f, uint32_t code, int as_bits, int *e_out)
{
    int sign, e, cls;
    uint64_t sig;
    code &= f->value_mask;
    if (f->table) {
        const mxsim_code *t = &f->table[code];
        sign = t->sign; e = t->e; sig = t->sig; cls = t->cls;
    } else {
        uint32_t top = (1u << f->exp_bits) - 1;
        uint32_t field = (code >> f->man_bits) & top, man = code & ((1u << f->man_bits) - 1);
        sign = (int)((code >> (f->bits - 1)) & 1);
        sig = field ? (man | (1u << f->man_bits)) : man;
        e = field ? (int)field + f->emin - 1 : f->emin;
        cls = field == top && f->has_inf ? (man ? 4 : 3) : 2;
    }
    *e_out = e;
    if (!as_bits && cls == 4) return special(MXSIM_NAN, 0);
    if (!as_bits && cls == 3) return special(MXSIM_INF, sign);
    return num(sign, sig, e - f->man_bits);
}

mxsim_val mxsim_decode(const mxsim_format *f, uint32_t code, int as_bits)
{
    int e;
    return decode_e(f, code, as_bits, &e);
}

uint32_t mxsim_encode(const mxsim_format *f, mxsim_val v, uint32_t nan_code)
{
    uint32_t sign = (uint32_t)(v.neg ? 1 : 0) << (f->bits - 1);
    int e;
    if (v.kind == MXSIM_NAN) return nan_code;
    if (v.kind == MXSIM_INF) return sign | f->inf_code;
    if (v.sig == 0) return sign;
    e = floor_log2(v);
    if (e < f->emin) {             /* subnormal: the significand in units of 2^(emin - man) */
        int sh = v.exp - (f->emin - f->man_bits);
        return sign | (uint32_t)(sh >= 0 ? v.sig << sh : v.sig >> -sh);
    } else {
        int sh = v.exp - (e - f->man_bits);
        uint64_t m = sh >= 0 ? v.sig << sh : v.sig >> -sh;
        return sign | ((uint32_t)(e - f->emin + 1) << f->man_bits)
               | (uint32_t)(m & ((((uint64_t)1) << f->man_bits) - 1));
    }
}

/* -- products -------------------------------------------------------------------------- */

static mxsim_val mul(mxsim_val x, mxsim_val y)
{
    int neg = x.neg ^ y.neg;
    if (x.kind == MXSIM_NAN || y.kind == MXSIM_NAN) return special(MXSIM_NAN, 0);
    if (x.kind == MXSIM_INF || y.kind == MXSIM_INF) {
        if (is_zero(x) || is_zero(y)) return special(MXSIM_NAN, 0);
        return special(MXSIM_INF, neg);
    }
    if (x.sig == 0 || y.sig == 0) return num(neg, 0, 0);
    return num(neg, x.sig * y.sig, x.exp + y.exp);
}

/* an element as the unit reads it (specials none: its bits; upcast_specials finite: an
 * IEEE-style format's Inf and NaN codes as one binade more) */
static mxsim_val element(const mxsim_unit *u, const mxsim_format *f, uint32_t code, int *e)
{
    if (u->specials_none) return decode_e(f, code, 1, e);
    if (u->upcast_finite && f->has_inf) {
        uint32_t top = (1u << f->exp_bits) - 1;
        if (((code & f->value_mask) >> f->man_bits & top) == top)
            return decode_e(f, code, 1, e);
    }
    return decode_e(f, code, 0, e);
}

/* the binade an upcast format holds a value at (its fields' exponent) */
static int upcast_exp(const mxsim_format *up, mxsim_val v)
{
    int e;
    if (v.kind != MXSIM_NUM) return up->emax + 1;
    if (v.sig == 0) return up->emin;
    e = floor_log2(v);
    return e > up->emin ? e : up->emin;
}

/* element * 2^(scale - 127), rounded once into the upcast format (Triton's bf16 emulation) */
static mxsim_val fold(const mxsim_unit *u, const mxsim_format *f, uint32_t code, uint32_t scale)
{
    int e;
    mxsim_val v = element(u, f, code, &e), s, p;
    s = scale == 0xFF ? special(MXSIM_NAN, 0) : scale == 0 ? num(0, 0, 0)
        : num(0, 1, (int)scale - 127);
    p = mul(v, s);
    if (p.kind != MXSIM_NUM || p.sig == 0) return p;
    return round_val(p, u->upcast, MXSIM_RNE, MXSIM_OVF_IEEE);
}

/* the two block scales of block blk, multiplied (the exponent sum held in scale_sum_bits) */
static mxsim_val scale_pair(const mxsim_unit *u, uint8_t sa, uint8_t sb, int *e_out)
{
    const mxsim_format *fs = u->scale;
    int ea, eb, e;
    mxsim_val va = decode_e(fs, sa, u->specials_none, &ea);
    mxsim_val vb = decode_e(fs, sb, u->specials_none, &eb);
    e = ea + eb;
    if (u->scale_sum_bits) {
        int half = 1 << (u->scale_sum_bits - 1), held;
        if (u->scale_sum_saturate) held = e < -half ? -half : e > half - 1 ? half - 1 : e;
        else held = ((e + half) % (2 * half) + 2 * half) % (2 * half) - half;
        *e_out = held;
        if (va.kind == MXSIM_NAN || vb.kind == MXSIM_NAN) return special(MXSIM_NAN, 0);
        return num(0, 1, held);
    }
    *e_out = e;
    return mul(va, vb);
}

typedef struct operands {
    const void *a, *b;
    const uint8_t *sa, *sb;
    size_t scale_block;          /* the block whose scale pair is held below (SIZE_MAX: none) */
    mxsim_val scale;
    int scale_e;
} operands;

/* the scale pair of block blk, computed once per block */
static mxsim_val block_scale(const mxsim_unit *u, operands *o, size_t blk, int *e)
{
    if (o->scale_block != blk) {
        o->scale = scale_pair(u, o->sa[blk], o->sb[blk], &o->scale_e);
        o->scale_block = blk;
    }
    *e = o->scale_e;
    return o->scale;
}

/* product kk (times its block scales if scaled) into *p, and its alignment exponent */
static void product(const mxsim_unit *u, operands *o, size_t kk, int scaled, mxsim_val *p,
                    int *e, mxsim_trace *t)
{
    uint32_t ca = load(o->a, u->a_size, kk), cb = load(o->b, u->b_size, kk);
    mxsim_val va, vb;
    int ea, eb;
    if (u->fold_scales) {
        size_t blk = kk / (size_t)u->block;
        va = fold(u, u->a, ca, o->sa[blk]);
        vb = fold(u, u->b, cb, o->sb[blk]);
        *e = upcast_exp(u->upcast, va) + upcast_exp(u->upcast, vb);
        *p = mul(va, vb);
        return;
    }
    va = element(u, u->a, ca, &ea);
    vb = element(u, u->b, cb, &eb);
    if (u->upcast) *e = upcast_exp(u->upcast, va) + upcast_exp(u->upcast, vb);
    else *e = ea + eb;
    *p = mul(va, vb);
    if (scaled && u->block && !u->scale_fp32) {
        int se;
        size_t blk = kk / (size_t)u->block;
        *p = mul(*p, block_scale(u, o, blk, &se));
        *e += se;
        if (t && blk < MXSIM_TRACE_TERMS) {
            t->scale_exp_sum[blk] = se;
            if ((int)blk + 1 > t->n_blocks) t->n_blocks = (int)blk + 1;
        }
    }
}

/* NaN or Inf where the values force one (NaN wins; +Inf with -Inf is NaN); else kind NUM */
static mxsim_val sum_specials(const mxsim_val *v, int n)
{
    int i, pinf = 0, ninf = 0;
    for (i = 0; i < n; i++) {
        if (v[i].kind == MXSIM_NAN) return special(MXSIM_NAN, 0);
        if (v[i].kind == MXSIM_INF) { if (v[i].neg) ninf = 1; else pinf = 1; }
    }
    if (pinf && ninf) return special(MXSIM_NAN, 0);
    if (pinf || ninf) return special(MXSIM_INF, ninf);
    return num(0, 0, 0);
}

/* the terms of the step of indices idx[0..n): products, or GST groups; returns their count */
static int terms(const mxsim_unit *u, operands *o, size_t base, const int32_t *idx, int n,
                 mxsim_val *val, int *exps, mxsim_trace *t)
{
    int i, g, count = 0;
    if (!u->group) {
        for (i = 0; i < n; i++) {
            product(u, o, base + (size_t)idx[i], 1, &val[i], &exps[i], t);
            if (is_zero(val[i])) exps[i] = u->e_zero;
            else if (val[i].kind == MXSIM_NUM && u->product_normalized)
                exps[i] = floor_log2(val[i]);
        }
        return n;
    }
    for (g = 0; g < n; g += u->group) {
        mxsim_val m, sp, scale;
        int e, dummy, all_zero = 1, nan = 0, pinf = 0, ninf = 0;
        size_t blk = (base + (size_t)idx[g]) / (size_t)u->block;
        wide w;
        rough r;
        wide_init(&w);
        for (i = g; i < g + u->group; i++) {
            product(u, o, base + (size_t)idx[i], 0, &m, &dummy, t);
            if (m.kind == MXSIM_NAN) nan = 1;
            else if (m.kind == MXSIM_INF) { if (m.neg) ninf = 1; else pinf = 1; }
            else if (m.sig) { all_zero = 0; wide_add_val(&w, m); }
        }
        sp = nan || (pinf && ninf) ? special(MXSIM_NAN, 0)
             : pinf || ninf ? special(MXSIM_INF, ninf) : num(0, 0, 0);
        scale = scale_pair(u, o->sa[blk], o->sb[blk], &e);
        if (t && blk < MXSIM_TRACE_TERMS) {
            t->scale_exp_sum[blk] = e;
            if ((int)blk + 1 > t->n_blocks) t->n_blocks = (int)blk + 1;
        }
        if (sp.kind != MXSIM_NUM) { val[count] = mul(sp, scale); exps[count++] = e; continue; }
        if (scale.kind == MXSIM_NAN) { val[count] = scale; exps[count++] = e; continue; }
        if (all_zero || scale.sig == 0) e = u->e_zero;
        r = wide_result(&w);
        {
            /* the exact group sum (below 2^63 by the spec's rules) times the scale product;
             * a zero keeps the sum's sign (a negative sum times a zero scale is -0) */
            int x = r.x;
            uint64_t s = r.top;
            while (s && !(s & 1)) { s >>= 1; x++; }
            val[count] = scale.sig ? num(r.neg, s * scale.sig, x + scale.exp) : num(r.neg, 0, 0);
        }
        exps[count++] = e;
    }
    return count;
}

/* -- a fused step ---------------------------------------------------------------------- */

/* a term in units of 2^lsb, rounded by the spec's alignment (rz-jam: in half units, with a
 * jam bit for anything below) */
static int64_t align_term(mxsim_val v, int lsb, int mode)
{
    int sh, s, cmp, inexact;
    uint64_t kept, rem, half, mag;
    if (v.sig == 0) return 0;
    sh = v.exp - lsb + (mode == MXSIM_ALIGN_RZ_JAM ? 1 : 0);
    if (sh >= 0) {
        mag = v.sig << sh;
        return v.neg ? -(int64_t)mag : (int64_t)mag;
    }
    s = -sh;
    if (s >= 64) {
        kept = 0; inexact = 1;
        cmp = s > 64 ? -1 : (v.sig > ((uint64_t)1 << 63) ? 1 : v.sig < ((uint64_t)1 << 63) ? -1 : 0);
    } else {
        kept = v.sig >> s;
        rem = v.sig & ((((uint64_t)1) << s) - 1);
        half = ((uint64_t)1) << (s - 1);
        cmp = rem > half ? 1 : rem < half ? -1 : 0;
        inexact = rem != 0;
    }
    mag = kept;
    if (mode == MXSIM_ALIGN_RD && v.neg && inexact) mag += 1;
    else if (mode == MXSIM_ALIGN_RNE && (cmp > 0 || (cmp == 0 && (kept & 1)))) mag += 1;
    else if (mode == MXSIM_ALIGN_RZ_JAM && inexact) mag |= 1;
    return v.neg ? -(int64_t)mag : (int64_t)mag;
}

#define MAX_TERMS 1024          /* terms of one fused step (mxsim export-c refuses more) */

/* the zero a rounding to zero gives: its sign by the spec's zero_sign rule */
static mxsim_val signed_zero(const mxsim_unit *u, int rm, int total_zero, int total_neg,
                             int all_neg_zero)
{
    if (u->zero_sign == MXSIM_ZERO_C)
        return num(total_zero ? rm == MXSIM_RD : total_neg, 0, 0);
    return num(u->zero_sign == MXSIM_ZERO_IEEE && (total_zero ? all_neg_zero : total_neg), 0, 0);
}

/* where a step's trace keeps term i of n: the terms at their index (the first
 * MXSIM_TRACE_TERMS), the accumulator right after the terms; -1: not kept */
static int trace_slot(int i, int n, int has_acc)
{
    int terms = n - has_acc;
    if (has_acc && i == n - 1) return terms < MXSIM_TRACE_TERMS ? terms : MXSIM_TRACE_TERMS;
    return i < MXSIM_TRACE_TERMS ? i : -1;
}

/* one fused step: val[0..n) (the accumulator last when has_acc) aligned, summed exactly and
 * rounded once to acc_format */
static mxsim_val step(const mxsim_unit *u, const mxsim_val *val, const int *exps, int n,
                      int has_acc, mxsim_step_trace *st)
{
    int i, all_neg_zero = 1, total_zero, total_neg;
    mxsim_val r = sum_specials(val, n);
    if (st) {
        st->n_terms = n - has_acc; st->has_acc = has_acc; st->aligned_valid = 0;
        for (i = 0; i < n; i++) {
            int at = trace_slot(i, n, has_acc);
            if (at >= 0) { st->term[at] = val[i]; st->term_exp[at] = exps[i]; }
        }
    }
    if (r.kind != MXSIM_NUM) { if (st) st->result = r; return r; }
    for (i = 0; i < n; i++) all_neg_zero &= val[i].sig == 0 && val[i].neg;
    if (u->frac_bits < 0) {
        wide w;
        rough rr;
        wide_init(&w);
        for (i = 0; i < n; i++) wide_add_val(&w, val[i]);
        if (w.lost) return special(MXSIM_NAN, 0);
        rr = wide_result(&w);
        total_zero = rr.top == 0; total_neg = rr.neg;
        r = round_bits(rr.neg, rr.top, rr.x, rr.sticky, u->acc, u->acc_rounding, u->overflow);
    } else {
        int e_max = exps[0], lsb;
        int64_t sum = 0;
        for (i = 1; i < n; i++) if (exps[i] > e_max) e_max = exps[i];
        lsb = e_max - u->frac_bits;
        for (i = 0; i < n; i++) {
            int64_t t = align_term(val[i], lsb, u->align);
            sum += t;
            if (st && trace_slot(i, n, has_acc) >= 0) st->aligned[trace_slot(i, n, has_acc)] = t;
        }
        if (u->align == MXSIM_ALIGN_RZ_JAM) lsb -= 1;
        if (st) { st->aligned_valid = 1; st->max_exp = e_max; st->lsb_exp = lsb; st->sum = sum; }
        total_zero = sum == 0; total_neg = sum < 0;
        r = round_bits(sum < 0, sum < 0 ? (uint64_t)0 - (uint64_t)sum : (uint64_t)sum, lsb, 0,
                       u->acc, u->acc_rounding, u->overflow);
    }
    if (r.kind == MXSIM_NUM && r.sig == 0)
        r = signed_zero(u, u->acc_rounding, total_zero, total_neg, all_neg_zero);
    if (st) st->result = r;
    return r;
}

/* x + y rounded once to fmt (a tree node, C after the steps, a promotion, an FMA) */
static mxsim_val add2(const mxsim_unit *u, mxsim_val x, mxsim_val y, const mxsim_format *f,
                      int rm, int zero_sign)
{
    mxsim_val pair[2], r;
    wide w;
    rough rr;
    pair[0] = x; pair[1] = y;
    r = sum_specials(pair, 2);
    if (r.kind != MXSIM_NUM) return r;
    wide_init(&w);
    wide_add_val(&w, x);
    wide_add_val(&w, y);
    if (w.lost) return special(MXSIM_NAN, 0);
    rr = wide_result(&w);
    r = round_bits(rr.neg, rr.top, rr.x, rr.sticky, f, rm, u->overflow);
    if (r.kind == MXSIM_NUM && r.sig == 0) {
        if (zero_sign == MXSIM_ZERO_C) return num(rr.top == 0 ? rm == MXSIM_RD : rr.neg, 0, 0);
        return num(zero_sign == MXSIM_ZERO_IEEE && (rr.top == 0 ? x.neg && y.neg : rr.neg), 0, 0);
    }
    return r;
}

/* a reduction tree: ((t0 + t1) + (t2 + t3)) + ..., each level rounded to its format */
static mxsim_val tree(const mxsim_unit *u, mxsim_val *nodes, int n, mxsim_trace *t)
{
    int level, i;
    if (n == 1) nodes[n++] = num(0, 0, 0);
    for (level = 0; level < u->n_tree_levels && n > 1; level++) {
        for (i = 0; i < n / 2; i++) {
            nodes[i] = add2(u, nodes[2 * i], nodes[2 * i + 1], u->tree_formats[level],
                            u->acc_rounding, u->zero_sign);
            if (t && t->n_nodes < MXSIM_TRACE_TERMS) t->node[t->n_nodes++] = nodes[i];
        }
        n /= 2;
    }
    return nodes[0];
}

/* the exponent the accumulator enters a step with: its binade, at least fmt's least */
static int acc_exponent(const mxsim_unit *u, const mxsim_format *f, mxsim_val v)
{
    int e;
    if (v.kind != MXSIM_NUM || v.sig == 0) return u->e_zero;
    e = floor_log2(v);
    return e > f->emin ? e : f->emin;
}

static int sums_to_zero(const mxsim_val *val, int n)
{
    wide w;
    int i;
    wide_init(&w);
    for (i = 0; i < n; i++) {
        if (val[i].kind != MXSIM_NUM) return 0;
        wide_add_val(&w, val[i]);
    }
    return wide_result(&w).top == 0;
}

/* one instruction from its C, d: the steps (C in the first, or after them) or the tree,
 * converted to d_format */
static mxsim_val instruction(const mxsim_unit *u, operands *o, size_t base, size_t k,
                             mxsim_val d, mxsim_trace *t)
{
    mxsim_val val[MAX_TERMS + 2], acc = d;
    int exps[MAX_TERMS + 2], n = 0, s, has_acc = !u->c_after;
    const mxsim_format *acc_in = u->d;
    if (t) memset(t, 0, sizeof *t);
    if (u->tree) {
        n = terms(u, o, base, u->step_index, (int)k, val, exps, t);
        acc = tree(u, val, n, t);
        has_acc = 1;
    }
    for (s = 0; s < u->n_steps && !u->tree; s++) {
        const int32_t *idx = u->step_index + u->step_start[s];
        int len = u->step_start[s + 1] - u->step_start[s];
        n = terms(u, o, base, idx, len, val, exps, t);
        if (has_acc) { val[n] = acc; exps[n] = acc_exponent(u, acc_in, acc); }
        acc = step(u, val, exps, n + has_acc, has_acc,
                   t && s < MXSIM_TRACE_STEPS ? &t->step[s] : NULL);
        if (t && s < MXSIM_TRACE_STEPS) t->n_steps = s + 1;
        has_acc = 1;
        acc_in = u->acc;
    }
    if (acc.kind == MXSIM_NUM && acc.sig)
        acc = round_val(acc, u->d, u->acc_rounding, u->overflow);
    if (t) t->to_d = acc;
    if (u->c_after) acc = add2(u, d, acc, u->d, u->c_rounding, u->zero_sign);
    if (u->zero_sign == MXSIM_ZERO_C && !u->tree && sums_to_zero(val, n)) return d;
    if (u->zero_sign == MXSIM_ZERO_C && u->tree) {
        /* the tree overwrote its terms: sum them again */
        n = terms(u, o, base, u->step_index, (int)k, val, exps, NULL);
        if (sums_to_zero(val, n)) return d;
    }
    return acc;
}

/* -- FP32 scales and the exact unit ------------------------------------------------------ */

static mxsim_val mul_fp32(const mxsim_unit *u, mxsim_val x, mxsim_val y)
{
    mxsim_val p = mul(x, y);
    if (p.kind != MXSIM_NUM || p.sig == 0) return p;
    return round_val(p, u->fp32, MXSIM_RNE, MXSIM_OVF_IEEE);
}

static mxsim_val fp32_of(const mxsim_unit *u, const void *scales, size_t i)
{
    return mxsim_decode(u->fp32, ((const uint32_t *)scales)[i], 0);
}

/* the instructions of one dot, chained from C (with promotions) */
static mxsim_val chain(const mxsim_unit *u, operands *o, size_t k, mxsim_val c,
                       int promote)
{
    size_t inst, kk = (size_t)u->k;
    mxsim_val d = c, total = c;
    int every = promote ? u->promote_every : 0;
    if (every) d = num(0, 0, 0);
    for (inst = 0; inst < k / kk; inst++) {
        if (every && inst && inst % (size_t)every == 0) {
            total = add2(u, total, d, u->d, u->promote_rounding, u->zero_sign);
            d = num(0, 0, 0);
        }
        d = instruction(u, o, inst * kk, kk, d, NULL);
    }
    if (every) d = add2(u, total, d, u->d, u->promote_rounding, u->zero_sign);
    return d;
}

/* the exact unit: every product (scales applied exactly) and C summed exactly, one RNE
 * rounding to FP32 */
static uint32_t exact_dot(const mxsim_unit *u, size_t k, const operands *o, const void *sa,
                          const void *sb, uint32_t c, const uint32_t *tensor_scale)
{
    wide w;
    size_t kk;
    int nan = 0, pinf = 0, ninf = 0, all_neg_zero, zero;
    mxsim_val cv = mxsim_decode(u->d, c, 0), r;
    wide_init(&w);
    all_neg_zero = cv.kind == MXSIM_NUM && cv.sig == 0 && cv.neg;
    for (kk = 0; kk < k; kk++) {
        mxsim_val f[5];
        uint32_t limbs[6];
        int nf = 2, i, j, neg = 0, exp = 0, has_zero = 0, has_inf = 0, has_nan = 0, nl = 1;
        f[0] = mxsim_decode(u->a, load(o->a, u->a_size, kk), 0);
        f[1] = mxsim_decode(u->b, load(o->b, u->b_size, kk), 0);
        if (u->scale_fp32) {
            size_t blk = u->block ? kk / (size_t)u->block : 0;
            f[nf++] = fp32_of(u, sa, blk);
            f[nf++] = fp32_of(u, sb, blk);
        } else if (u->block) {
            f[nf++] = mxsim_decode(u->scale, ((const uint8_t *)sa)[kk / (size_t)u->block], 0);
            f[nf++] = mxsim_decode(u->scale, ((const uint8_t *)sb)[kk / (size_t)u->block], 0);
        }
        if (tensor_scale) f[nf++] = mxsim_decode(u->fp32, *tensor_scale, 0);
        limbs[0] = 1;
        for (i = 0; i < nf; i++) {
            uint64_t carry = 0;
            neg ^= f[i].neg;
            has_nan |= f[i].kind == MXSIM_NAN;
            has_inf |= f[i].kind == MXSIM_INF;
            has_zero |= f[i].kind == MXSIM_NUM && f[i].sig == 0;
            if (f[i].kind != MXSIM_NUM || f[i].sig == 0) continue;
            exp += f[i].exp;
            for (j = 0; j < nl; j++) {          /* limbs *= sig (every sig is below 2^32) */
                uint64_t p = (uint64_t)limbs[j] * f[i].sig + carry;
                limbs[j] = (uint32_t)p;
                carry = p >> 32;
            }
            if (carry) limbs[nl++] = (uint32_t)carry;
        }
        if (has_nan || (has_inf && has_zero)) { nan = 1; continue; }
        if (has_inf) { if (neg) ninf = 1; else pinf = 1; continue; }
        if (has_zero) { all_neg_zero &= neg; continue; }
        all_neg_zero = 0;
        for (j = 0; j < nl; j++) wide_add(&w, neg, limbs[j], exp + 32 * j);
    }
    if (cv.kind == MXSIM_NAN) nan = 1;
    else if (cv.kind == MXSIM_INF) { if (cv.neg) ninf = 1; else pinf = 1; }
    else { wide_add_val(&w, cv); if (cv.sig) all_neg_zero = 0; }
    if (nan || (pinf && ninf)) return u->d_nan;
    if (pinf || ninf) return mxsim_encode(u->d, special(MXSIM_INF, ninf), u->d_nan);
    r = round_wide(&w, u->d, MXSIM_RNE, MXSIM_OVF_IEEE, &zero);
    if (zero) return all_neg_zero ? (uint32_t)1 << (u->d->bits - 1) : 0;
    return mxsim_encode(u->d, r, u->d_nan);
}

/* -- the API ----------------------------------------------------------------------------- */

uint32_t mxsim_instruction(const mxsim_unit *u, size_t k, const void *a, const void *b,
                           const uint8_t *a_scale, const uint8_t *b_scale, uint32_t c,
                           mxsim_trace *trace)
{
    operands o;
    mxsim_val d;
    uint32_t code;
    o.a = a; o.b = b; o.sa = a_scale; o.sb = b_scale; o.scale_block = SIZE_MAX;
    if (u->exact) {
        code = exact_dot(u, k, &o, a_scale, b_scale, c, NULL);
        if (trace) { memset(trace, 0, sizeof *trace); trace->d = code; }
        return code;
    }
    d = instruction(u, &o, 0, (size_t)u->k, mxsim_decode(u->d, c, u->specials_none), trace);
    code = mxsim_encode(u->d, d, u->d_nan);
    if (trace) { trace->result = d; trace->d = code; }
    return code;
}

uint32_t mxsim_dot(const mxsim_unit *u, size_t k, const void *a, const void *b,
                   const void *a_scale, const void *b_scale, uint32_t c,
                   const uint32_t *tensor_scale)
{
    operands o;
    mxsim_val r;
    o.a = a; o.b = b; o.scale_block = SIZE_MAX;
    o.sa = (const uint8_t *)a_scale; o.sb = (const uint8_t *)b_scale;
    if (u->exact) return exact_dot(u, k, &o, a_scale, b_scale, c, tensor_scale);
    if (u->epilogue == MXSIM_EPI_BLOCK_FMA) {
        size_t kb;
        int a1 = u->a_size, b1 = u->b_size;
        mxsim_val total = mxsim_decode(u->fp32, c, 0);
        for (kb = 0; kb < k / 128; kb++) {
            operands ob;
            mxsim_val part, s;
            ob.a = (const uint8_t *)a + kb * 128 * (size_t)a1;
            ob.b = (const uint8_t *)b + kb * 128 * (size_t)b1;
            ob.sa = NULL; ob.sb = NULL; ob.scale_block = SIZE_MAX;
            part = chain(u, &ob, 128, num(0, 0, 0), 0);
            s = mul_fp32(u, fp32_of(u, a_scale, kb), fp32_of(u, b_scale, kb));
            total = add2(u, total, mul(part, s), u->fp32, MXSIM_RNE, MXSIM_ZERO_IEEE);
        }
        return mxsim_encode(u->fp32, total, u->d_nan);
    }
    r = chain(u, &o, k, mxsim_decode(u->d, c, u->specials_none), 1);
    if (u->epilogue == MXSIM_EPI_ALPHA) {
        r = mul_fp32(u, mul_fp32(u, fp32_of(u, a_scale, 0), fp32_of(u, b_scale, 0)), r);
        if (r.kind == MXSIM_NUM && r.sig == 0) r.neg = 0;       /* alpha * D + 0 * C */
    } else if (u->epilogue == MXSIM_EPI_COL_ROW) {
        r = mul_fp32(u, mul_fp32(u, r, fp32_of(u, b_scale, 0)), fp32_of(u, a_scale, 0));
    }
    return mxsim_encode(u->d, r, u->d_nan);
}

void mxsim_dot_batch(const mxsim_unit *u, size_t n, size_t k, const void *a, const void *b,
                     const void *a_scale, const void *b_scale, size_t scales_per_dot,
                     const uint32_t *c, uint32_t *d)
{
    size_t i, ss = u->scale_fp32 ? 4 : 1;
    for (i = 0; i < n; i++)
        d[i] = mxsim_dot(u, k, (const uint8_t *)a + i * k * (size_t)u->a_size,
                         (const uint8_t *)b + i * k * (size_t)u->b_size,
                         a_scale ? (const uint8_t *)a_scale + i * scales_per_dot * ss : NULL,
                         b_scale ? (const uint8_t *)b_scale + i * scales_per_dot * ss : NULL,
                         c ? c[i] : 0, NULL);
}
