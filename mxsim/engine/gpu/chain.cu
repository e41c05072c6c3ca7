// Whole dots on the GPU: codes in, D's codes out, one thread per dot, every step of every
// instruction of the chain (with promotion) before the dot is written.
//
// The CUDA twin of the numba whole-dot kernel (mxsim/engine/_fused.py): the steps as step.cu
// computes them (its tiles, `max_exponent` and `aligned_sum`), the sum rounded to acc_format by
// formats.round_to's CUDA twin (mxsim/formats/_round_kernel.cu `round_one`), zeros +0, NaN and
// Inf, the conversion to d_format, the promotion into a separate total (an exact two-term sum
// rounded once) and NaN as the spec's d_nan. This text is compiled after those two sources, in
// one translation unit (mxsim/engine/gpu/kernels.py `chain_source`).
//
// The same text compiles for the host too (g++ -DMXSIM_HOST), where a block's threads become
// loops between the barriers, as in step.cu; tests/mxsim/engine/test_gpu_chain.py holds that
// build equal to the numba kernel.

#ifndef MXSIM_HOST
// MX_THREADS declares the thread's (ty, tx) for the host build's loops; on the GPU a block of
// code that does not index by them leaves them unused.
#pragma nv_diag_suppress 177
#pragma nv_diag_suppress 550
#endif

#ifdef MXSIM_HOST
struct int2 {
    int x, y;
};
inline int2 make_int2(int x, int y) {
    int2 v = {x, y};
    return v;
}
#endif

namespace mxsim {

namespace R = mxsim_round;

// Operand fields of one code of an IEEE-style float format (fast.operands.Operand.of).
struct Fields {
    int sign;
    i64 sig, lsb, e;
    int flag;
};

__device__ inline Fields decode(const i64 *p, i64 code) {
    int man = (int)p[R::P_MAN], eb = (int)p[R::P_EXPBITS];
    Fields f;
    f.sign = (int)((code >> p[R::P_SIGNSHIFT]) & 1);
    i64 ef = (code >> man) & ((1LL << eb) - 1);
    i64 m = code & ((1LL << man) - 1);
    if (ef == (1LL << eb) - 1) {
        f.sig = 0; f.lsb = 0; f.e = 0; f.flag = m != 0 ? NAN_ : INF_;
        return f;
    }
    f.e = ef == 0 ? p[R::P_EMIN] : ef - p[R::P_BIAS];
    f.sig = ef == 0 ? m : (m | (1LL << man));
    f.lsb = f.e - man;
    f.flag = f.sig == 0 ? ZERO_ : 0;
    return f;
}

// fast.operands.special_codes for one code.
__device__ inline i64 specials(const i64 *p, i64 code, bool nan, bool pinf,
                                        bool ninf) {
    if (pinf) code = p[R::P_CODEINF];
    if (ninf) code = p[R::P_CODEINF] | (1LL << p[R::P_SIGNSHIFT]);
    if (nan || (pinf && ninf)) code = p[R::P_CODENAN];
    return code;
}

// A code rounded from (-1)**neg * mag * 2**lsb (+ sticky), zeros +0 (ZeroSign.POSITIVE).
__device__ inline i64 rounded(const i64 *p, int neg, i64 lsb, u64 mag, bool sticky) {
    i64 code = (i64)R::round_one(neg, lsb, mag, sticky, p);
    i64 mask = (1LL << p[R::P_SIGNSHIFT]) - 1;
    return (code & mask) == 0 ? (code & mask) : code;
}

// A step's exact sum as its acc_format code (fast.step.step, then finish).
__device__ inline i64 finish(const i64 *pa, i64 total, i64 lsb, int flags) {
    u64 mag = total < 0 ? (u64)0 - (u64)total : (u64)total;
    i64 code = rounded(pa, total < 0 ? 1 : 0, lsb, mag, false);
    return specials(pa, code, flags & F_NAN, flags & F_PINF, flags & F_NINF);
}

// fast.adders.convert of an acc_format code to d_format (move >= 0: the fields move over).
__device__ inline i64 convert(const i64 *pa, const i64 *pc, int move, i64 code) {
    if (move >= 0)
        return ((code >> pa[R::P_SIGNSHIFT]) << pc[R::P_SIGNSHIFT])
               | ((code & ((1LL << pa[R::P_SIGNSHIFT]) - 1)) << move);
    Fields f = decode(pa, code);
    i64 res = (i64)R::round_one(f.sign, f.lsb, (u64)f.sig, false, pc);
    bool inf = (f.flag & INF_) != 0;
    return specials(pc, res, f.flag & NAN_, inf && f.sign == 0, inf && f.sign == 1);
}

// fast.adders._window of one significand: kept, and whether bits fell off.
__device__ inline u64 window(u64 sig, i64 shift, bool &lost) {
    if (shift <= 0) {
        lost = false;
        return sig << (-shift < 63 ? -shift : 63);
    }
    i64 right = shift < 63 ? shift : 63;
    lost = (sig & ((1ULL << right) - 1ULL)) != 0;
    return sig >> right;
}

// fast.adders.exact_sum2 of (-1)**sx * gx * 2**lx and (-1)**sy * gy * 2**ly: the sign (zero:
// +), the magnitude in a 62-bit window from `base`, and a sticky bit for what fell off.
struct Sum2 {
    int neg;
    u64 mag;
    i64 base;
    bool sticky, zero;
};

__device__ inline Sum2 exact_sum2(int sx, u64 gx, i64 lx, int sy, u64 gy, i64 ly) {
    const i64 none = -(1LL << 20);
    i64 mx = gx == 0 ? none : lx + R::bit_length(gx) - 1;
    i64 my = gy == 0 ? none : ly + R::bit_length(gy) - 1;
    Sum2 s;
    s.base = (mx > my ? mx : my) - 62;
    bool x_lost, y_lost;
    u64 tx = window(gx, s.base - lx, x_lost);
    u64 ty = window(gy, s.base - ly, y_lost);
    s.sticky = x_lost || y_lost;
    bool x_big = tx >= ty;
    u64 big = x_big ? tx : ty, small = x_big ? ty : tx;
    int sgn;
    if (sx != sy) {
        s.mag = big - small - (s.sticky ? 1ULL : 0ULL);
        sgn = x_big ? sx : sy;
    } else {
        s.mag = big + small;
        sgn = sx;
    }
    s.zero = s.mag == 0 && !s.sticky;
    s.neg = sgn == 1 && !s.zero;
    return s;
}

// fast.adders.add_round of two d_format codes, zeros +0.
__device__ inline i64 add_round(const i64 *pp, i64 x, i64 y) {
    Fields fx = decode(pp, x), fy = decode(pp, y);
    Sum2 s = exact_sum2(fx.sign, (u64)fx.sig, fx.lsb, fy.sign, (u64)fy.sig, fy.lsb);
    i64 code = rounded(pp, s.neg, s.base, s.mag, s.sticky);
    bool ix = (fx.flag & INF_) != 0, iy = (fy.flag & INF_) != 0;
    return specials(pp, code, ((fx.flag | fy.flag) & NAN_) != 0,
                    (ix && fx.sign == 0) || (iy && fy.sign == 0),
                    (ix && fx.sign == 1) || (iy && fy.sign == 1));
}

struct ChainArgs {
    const int *a_sign, *a_sig, *a_lsb, *a_e, *a_flag;     // (r, K)
    const int *b_sign, *b_sig, *b_lsb, *b_e, *b_flag;     // (n, K): B transposed
    const i64 *c;                                         // (r, n) codes of d_format
    const i64 *bounds;                                    // the steps' offsets, n_steps + 1
    const i64 *pa, *pc, *pp;                              // rounding parameters
    i64 r, n;
    int K, has_c, k_inst, n_inst, n_steps, promote, frac_bits, e_zero, move, plain;
    unsigned int d_nan;
    unsigned int *out;                                    // (r, n) codes of d_format
};

// One thread's dot through the chain.
struct ChainDot {
    Dot dot;
    Fields acc;
    i64 d, total, code;
    int d_zero, zero_acc;
};

// Thread `tid`'s share of staging terms t0 .. min(t0 + TK, hi) of the block's rows and columns
// (zeros outside).
__device__ inline void load_range(const ChainArgs &p, Tiles &s, i64 r0, i64 n0, int t0,
                                           int hi, int tid) {
    for (int x = tid; x < TR * TK; x += NT) {
        int row = x / TK, t = x % TK, gt = t0 + t;
        i64 i = r0 + row;
        int sig = 0, lsb = 0, e = 0, sf = 0;
        if (i < p.r && gt < hi) {
            i64 k = i * p.K + gt;
            sig = p.a_sig[k]; lsb = p.a_lsb[k]; e = p.a_e[k];
            sf = (p.a_sign[k] & 1) | (p.a_flag[k] << 1);
        }
        s.a_sig[row][t] = sig; s.a_lsb[row][t] = lsb; s.a_e[row][t] = e; s.a_sf[row][t] = sf;
    }
    for (int x = tid; x < TN * TK; x += NT) {
        int col = x / TK, t = x % TK, gt = t0 + t;
        i64 j = n0 + col;
        int sig = 0, lsb = 0, e = 0, sf = 0;
        if (j < p.n && gt < hi) {
            i64 k = j * p.K + gt;
            sig = p.b_sig[k]; lsb = p.b_lsb[k]; e = p.b_e[k];
            sf = (p.b_sign[k] & 1) | (p.b_flag[k] << 1);
        }
        s.b_sig[col][t] = sig; s.b_lsb[col][t] = lsb; s.b_e[col][t] = e; s.b_sf[col][t] = sf;
    }
}

// The accumulator's part of a step: its exponent in the maximum.
__device__ inline void acc_exponent(ChainDot &c, int e_zero) {
    if (!c.zero_acc) {
        i64 ec = c.acc.sig == 0 ? (i64)e_zero : c.acc.e;
        c.dot.emax = ec > c.dot.emax ? ec : c.dot.emax;
    }
}

// The accumulator's aligned term and flags, then the step's acc_format code.
template <int MODE>
__device__ inline void step_code(ChainDot &c, const ChainArgs &p) {
    const int jam = MODE == 3 ? 1 : 0;
    i64 step_lsb = c.dot.emax - p.frac_bits;
    if (!c.zero_acc) {
        if (c.acc.sig != 0)
            c.dot.total += (u64)align_one<MODE>((u64)c.acc.sig, c.acc.sign,
                                                step_lsb - jam - c.acc.lsb);
        if (c.acc.flag & NAN_) c.dot.flags |= F_NAN;
        else if (c.acc.flag & INF_) c.dot.flags |= c.acc.sign == 1 ? F_NINF : F_PINF;
    }
    c.code = finish(p.pa, (i64)c.dot.total, step_lsb - jam, c.dot.flags);
}

// One fused step [lo, hi) of the block's dots: both passes over its terms, then its code.
template <int MODE, bool NORM>
__device__ void chain_step(const ChainArgs &p, Tiles &s, ChainDot *st, i64 r0, i64 n0,
                                    int lo, int hi, bool first) {
    (void)st;
    MX_THREADS {
        (void)ty; (void)tx;
        ChainDot &c = MX_ST;
        c.zero_acc = first ? c.d_zero : 0;
        c.acc = first ? decode(p.pc, c.d) : decode(p.pa, c.code);
        c.dot.emax = c.zero_acc ? (i64)p.e_zero : -((i64)1 << 40);
        c.dot.total = 0;
        c.dot.flags = 0;
        c.dot.all_neg_zero = 0;
    }
    for (int t0 = lo; t0 < hi; t0 += TK) {
        int nt = hi - t0 < TK ? hi - t0 : TK;
        MX_SYNC
        MX_THREADS { load_range(p, s, r0, n0, t0, hi, ty * TN + tx); }
        MX_SYNC
        MX_THREADS { max_exponent<NORM>(MX_ST.dot, s, ty, tx, nt, p.e_zero); }
    }
    MX_THREADS { (void)ty; (void)tx; acc_exponent(MX_ST, p.e_zero); }
    for (int t0 = lo; t0 < hi; t0 += TK) {
        int nt = hi - t0 < TK ? hi - t0 : TK;
        if (hi - lo > TK) {     // one tile holds the whole step: it is still in shared memory
            MX_SYNC
            MX_THREADS { load_range(p, s, r0, n0, t0, hi, ty * TN + tx); }
            MX_SYNC
        }
        MX_THREADS {
        (void)ty; (void)tx;
            ChainDot &c = MX_ST;
            aligned_sum<MODE>(c.dot, s, ty, tx, nt, c.dot.emax - p.frac_bits - (MODE == 3));
        }
    }
    MX_THREADS { (void)ty; (void)tx; step_code<MODE>(MX_ST, p); }
}

// The dots of one block (TR x TN): the whole chain, then D.
template <int MODE, bool NORM>
__device__ void chain_block(const ChainArgs &p, Tiles &s, i64 r0, i64 n0) {
    ChainDot st[MX_NST];
    MX_THREADS {
        (void)ty; (void)tx;
        ChainDot &c = MX_ST;
        i64 i = r0 + ty, j = n0 + tx;
        c.d = (p.has_c && i < p.r && j < p.n) ? p.c[i * p.n + j] : 0;
        c.total = c.d;
        c.d_zero = p.promote != 0 || !p.has_c;
        c.code = 0;
    }
    for (int inst = 0; inst < p.n_inst; ++inst) {
        if (p.promote && inst && inst % p.promote == 0) {
            MX_THREADS {
        (void)ty; (void)tx;
                MX_ST.total = add_round(p.pp, MX_ST.total, MX_ST.d);
                MX_ST.d_zero = 1;
            }
        }
        int off = inst * p.k_inst;
        for (int k = 0; k < p.n_steps; ++k)
            chain_step<MODE, NORM>(p, s, st, r0, n0, off + (int)p.bounds[k],
                                   off + (int)p.bounds[k + 1], k == 0);
        MX_THREADS {
        (void)ty; (void)tx;
            MX_ST.d = convert(p.pa, p.pc, p.move, MX_ST.code);
            MX_ST.d_zero = 0;
        }
    }
    MX_THREADS {
        (void)ty; (void)tx;
        i64 i = r0 + ty, j = n0 + tx;
        if (i < p.r && j < p.n) {
            ChainDot &c = MX_ST;
            i64 v = p.promote ? add_round(p.pp, c.total, c.d) : c.d;
            p.out[i * p.n + j] = (decode(p.pc, v).flag & NAN_) ? p.d_nan : (unsigned int)v;
        }
    }
}

// The plain path: raw products, RZ alignment, no NaN or Inf among A's and B's codes (C may hold
// them), products and aligned terms within 31 bits and exponents within 16 (kernels.py checks
// all of it before choosing this path). Each term is one 64-bit word in shared memory: the
// significand with its sign, and the LSB and alignment exponents as two 16-bit halves; the
// products and the shifts are 32-bit. The same bits as chain_block<0, false>.
struct PlainTiles {
    int2 a[TR][TK];
    int2 b[TN][TK + 1];
};

__device__ inline int2 plain_term(const int *sign, const int *sig, const int *lsb, const int *e,
                                  i64 k) {
    int v = sign[k] & 1 ? -sig[k] : sig[k];
    return make_int2(v, (int)(((unsigned)lsb[k] & 0xFFFFu) | ((unsigned)e[k] << 16)));
}

__device__ inline void load_plain(const ChainArgs &p, PlainTiles &s, i64 r0, i64 n0, int t0,
                                  int hi, int tid) {
    for (int x = tid; x < TR * TK; x += NT) {
        int row = x / TK, t = x % TK, gt = t0 + t;
        i64 i = r0 + row;
        s.a[row][t] = (i < p.r && gt < hi)
            ? plain_term(p.a_sign, p.a_sig, p.a_lsb, p.a_e, i * p.K + gt) : make_int2(0, 0);
    }
    for (int x = tid; x < TN * TK; x += NT) {
        int col = x / TK, t = x % TK, gt = t0 + t;
        i64 j = n0 + col;
        s.b[col][t] = (j < p.n && gt < hi)
            ? plain_term(p.b_sign, p.b_sig, p.b_lsb, p.b_e, j * p.K + gt) : make_int2(0, 0);
    }
}

__device__ inline int plain_max(const PlainTiles &s, int ty, int tx, int nt, int e_zero,
                                int emax) {
    for (int t = 0; t < nt; ++t) {
        int2 a = s.a[ty][t], b = s.b[tx][t];
        int e = a.x * b.x == 0 ? e_zero : (a.y >> 16) + (b.y >> 16);
        emax = e > emax ? e : emax;
    }
    return emax;
}

__device__ inline i64 plain_sum(const PlainTiles &s, int ty, int tx, int nt, int base) {
    i64 total = 0;
    for (int t = 0; t < nt; ++t) {
        int2 a = s.a[ty][t], b = s.b[tx][t];
        int prod = a.x * b.x;
        int shift = base - ((int)(short)a.y + (int)(short)b.y);
        unsigned m = prod < 0 ? 0u - (unsigned)prod : (unsigned)prod;
        unsigned v = shift <= 0 ? m << (-shift < 31 ? -shift : 31) : (shift >= 32 ? 0u : m >> shift);
        total += prod < 0 ? -(i64)v : (i64)v;
    }
    return total;
}

// One fused step [lo, hi) on the plain path (chain_step's twin).
__device__ void plain_step(const ChainArgs &p, PlainTiles &s, ChainDot *st, i64 r0, i64 n0,
                           int lo, int hi, bool first) {
    (void)st;
    MX_THREADS {
        ChainDot &c = MX_ST;
        c.zero_acc = first ? c.d_zero : 0;
        c.acc = first ? decode(p.pc, c.d) : decode(p.pa, c.code);
        c.dot.emax = c.zero_acc ? (i64)p.e_zero : -((i64)1 << 30);
        c.dot.total = 0;
        c.dot.flags = 0;
    }
    for (int t0 = lo; t0 < hi; t0 += TK) {
        int nt = hi - t0 < TK ? hi - t0 : TK;
        MX_SYNC
        MX_THREADS { load_plain(p, s, r0, n0, t0, hi, ty * TN + tx); }
        MX_SYNC
        MX_THREADS {
            MX_ST.dot.emax = plain_max(s, ty, tx, nt, p.e_zero, (int)MX_ST.dot.emax);
        }
    }
    MX_THREADS { (void)ty; (void)tx; acc_exponent(MX_ST, p.e_zero); }
    for (int t0 = lo; t0 < hi; t0 += TK) {
        int nt = hi - t0 < TK ? hi - t0 : TK;
        if (hi - lo > TK) {
            MX_SYNC
            MX_THREADS { load_plain(p, s, r0, n0, t0, hi, ty * TN + tx); }
            MX_SYNC
        }
        MX_THREADS {
            ChainDot &c = MX_ST;
            c.dot.total += (u64)plain_sum(s, ty, tx, nt, (int)(c.dot.emax - p.frac_bits));
        }
    }
    MX_THREADS { (void)ty; (void)tx; step_code<0>(MX_ST, p); }
}

// chain_block<0, false> on the plain path.
__device__ void plain_block(const ChainArgs &p, PlainTiles &s, i64 r0, i64 n0) {
    ChainDot st[MX_NST];
    MX_THREADS {
        ChainDot &c = MX_ST;
        i64 i = r0 + ty, j = n0 + tx;
        c.d = (p.has_c && i < p.r && j < p.n) ? p.c[i * p.n + j] : 0;
        c.total = c.d;
        c.d_zero = p.promote != 0 || !p.has_c;
        c.code = 0;
    }
    for (int inst = 0; inst < p.n_inst; ++inst) {
        if (p.promote && inst && inst % p.promote == 0) {
            MX_THREADS {
                (void)ty; (void)tx;
                MX_ST.total = add_round(p.pp, MX_ST.total, MX_ST.d);
                MX_ST.d_zero = 1;
            }
        }
        int off = inst * p.k_inst;
        for (int k = 0; k < p.n_steps; ++k)
            plain_step(p, s, st, r0, n0, off + (int)p.bounds[k], off + (int)p.bounds[k + 1],
                       k == 0);
        MX_THREADS {
            (void)ty; (void)tx;
            MX_ST.d = convert(p.pa, p.pc, p.move, MX_ST.code);
            MX_ST.d_zero = 0;
        }
    }
    MX_THREADS {
        i64 i = r0 + ty, j = n0 + tx;
        if (i < p.r && j < p.n) {
            ChainDot &c = MX_ST;
            i64 v = p.promote ? add_round(p.pp, c.total, c.d) : c.d;
            p.out[i * p.n + j] = (decode(p.pc, v).flag & NAN_) ? p.d_nan : (unsigned int)v;
        }
    }
}

}  // namespace mxsim

#ifndef MXSIM_HOST

#define MXSIM_CHAIN_KERNEL(MODE, NORM)                                                         \
    extern "C" __global__ void __launch_bounds__(mxsim::NT) mxsim_chain_##MODE##_##NORM(        \
            const int *a_sign, const int *a_sig, const int *a_lsb, const int *a_e,             \
            const int *a_flag, const int *b_sign, const int *b_sig, const int *b_lsb,          \
            const int *b_e, const int *b_flag, const long long *c, const long long *bounds,    \
            const long long *pa, const long long *pc, const long long *pp, long long r,        \
            long long n, const int *ints, unsigned int d_nan, long long col_tiles,             \
            unsigned int *out) {                                                               \
        __shared__ mxsim::Tiles s;                                                             \
        mxsim::ChainArgs p = {a_sign, a_sig, a_lsb, a_e, a_flag, b_sign, b_sig, b_lsb, b_e,    \
                              b_flag, c, bounds, pa, pc, pp, r, n, ints[0], ints[1], ints[2],  \
                              ints[3], ints[4], ints[5], ints[6], ints[7], ints[8], ints[9],   \
                              d_nan, out};                                                     \
        long long b = blockIdx.x;                                                              \
        mxsim::chain_block<MODE, NORM>(p, s, (b / col_tiles) * mxsim::TR,                      \
                                       (b % col_tiles) * mxsim::TN);                           \
    }

// The plain path's kernel (kernels.py launches it with ints[9] = 1); three blocks per SM (80
// registers, no spills; 97 without the bound, two blocks).
extern "C" __global__ void __launch_bounds__(mxsim::NT, 3) mxsim_chain_plain(
        const int *a_sign, const int *a_sig, const int *a_lsb, const int *a_e, const int *a_flag,
        const int *b_sign, const int *b_sig, const int *b_lsb, const int *b_e, const int *b_flag,
        const long long *c, const long long *bounds, const long long *pa, const long long *pc,
        const long long *pp, long long r, long long n, const int *ints, unsigned int d_nan,
        long long col_tiles, unsigned int *out) {
    __shared__ mxsim::PlainTiles s;
    mxsim::ChainArgs p = {a_sign, a_sig, a_lsb, a_e, a_flag, b_sign, b_sig, b_lsb, b_e, b_flag,
                          c, bounds, pa, pc, pp, r, n, ints[0], ints[1], ints[2], ints[3],
                          ints[4], ints[5], ints[6], ints[7], ints[8], ints[9], d_nan, out};
    long long b = blockIdx.x;
    mxsim::plain_block(p, s, (b / col_tiles) * mxsim::TR, (b % col_tiles) * mxsim::TN);
}

MXSIM_CHAIN_KERNEL(0, 0)
MXSIM_CHAIN_KERNEL(0, 1)
MXSIM_CHAIN_KERNEL(1, 0)
MXSIM_CHAIN_KERNEL(1, 1)
MXSIM_CHAIN_KERNEL(2, 0)
MXSIM_CHAIN_KERNEL(2, 1)
MXSIM_CHAIN_KERNEL(3, 0)
MXSIM_CHAIN_KERNEL(3, 1)

#else

namespace mxsim {
template <int MODE, bool NORM>
void host_chain(const ChainArgs &p) {
    static thread_local Tiles s;
    for (i64 r0 = 0; r0 < p.r; r0 += TR)
        for (i64 n0 = 0; n0 < p.n; n0 += TN)
            chain_block<MODE, NORM>(p, s, r0, n0);
}
}  // namespace mxsim

// The host entry (tests): every block of the grid in turn; 0, or -1 for a bad mode. `ints`:
// K, has_c, k_inst, n_inst, n_steps, promote, frac_bits, e_zero, move, plain (1: the plain
// path, mxsim_chain_plain on the GPU).
extern "C" int mxsim_chain_host(
        const int *a_sign, const int *a_sig, const int *a_lsb, const int *a_e, const int *a_flag,
        const int *b_sign, const int *b_sig, const int *b_lsb, const int *b_e, const int *b_flag,
        const long long *c, const long long *bounds, const long long *pa, const long long *pc,
        const long long *pp, long long r, long long n, const int *ints, unsigned int d_nan,
        int mode, int normalized, unsigned int *out) {
    mxsim::ChainArgs p = {a_sign, a_sig, a_lsb, a_e, a_flag, b_sign, b_sig, b_lsb, b_e, b_flag,
                          c, bounds, pa, pc, pp, r, n, ints[0], ints[1], ints[2], ints[3],
                          ints[4], ints[5], ints[6], ints[7], ints[8], ints[9], d_nan, out};
    if (p.plain) {
        if (mode != 0 || normalized) return -1;
        static thread_local mxsim::PlainTiles s;
        for (long long r0 = 0; r0 < p.r; r0 += mxsim::TR)
            for (long long n0 = 0; n0 < p.n; n0 += mxsim::TN)
                mxsim::plain_block(p, s, r0, n0);
        return 0;
    }
    switch (mode * 2 + (normalized ? 1 : 0)) {
        case 0: mxsim::host_chain<0, false>(p); return 0;
        case 1: mxsim::host_chain<0, true>(p); return 0;
        case 2: mxsim::host_chain<1, false>(p); return 0;
        case 3: mxsim::host_chain<1, true>(p); return 0;
        case 4: mxsim::host_chain<2, false>(p); return 0;
        case 5: mxsim::host_chain<2, true>(p); return 0;
        case 6: mxsim::host_chain<3, false>(p); return 0;
        case 7: mxsim::host_chain<3, true>(p); return 0;
        default: return -1;
    }
}

#endif
