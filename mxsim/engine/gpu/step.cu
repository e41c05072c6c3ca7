// One fused step of the fast engine for whole blocks of dots, in integers only.
//
// Per dot (row i of A against column j of B, g terms), exactly what the numba kernel
// mxsim/engine/_kernels.py `_step_loop` does:
//   1. the products' significands (int64), signs and LSB exponents;
//   2. the step's largest alignment exponent E: e_a + e_b (or the exact product's exponent when
//      `normalized`), e_zero for a zero product, the accumulator's (e_zero when it is zero), and
//      e_zero for a +0 accumulator (`zero_acc`);
//   3. every term rounded to the step's LSB 2**(E - frac_bits) by the alignment mode (rz, rd,
//      rne, rz-jam: then in units of half that LSB) and summed exactly in int64;
//   4. flags: 1 NaN, 2 +Inf, 4 -Inf, 8 every term is a -0 (an exact zero sum is then -0).
//
// The same source compiles twice: by NVRTC (cupy, mxsim/engine/gpu/kernels.py) for the GPU, and
// by g++ (`-x c++ -DMXSIM_HOST`) into a host library that tests/mxsim/engine/test_gpu_kernel.py holds
// bit-equal to the numba kernel. The host build runs the very block code the GPU runs: a CUDA
// block's threads become loops over (ty, tx) between the barriers, so the tiling and the
// indexing are tested on the CPU too.
//
// Throughput (H100/H200): one thread per dot, a block of TR x TN = 8 x 32 dots; A rows and B
// columns are staged in shared memory TK = 32 terms at a time with coalesced loads (a warp
// reads 32 consecutive terms of a row); the B tile is padded to TK + 1 so that the 32 lanes of a
// warp, which read 32 different columns at the same term, hit 32 different banks, while A reads
// are broadcasts. Significands, exponents and flags are int32 (exact: the engine's `_side`
// proves they fit); products, shifts of products and the sum are int64. The mode and the
// product rule are template parameters, so the inner loops carry no mode branches.
// Arithmetic on the sum is unsigned (two's-complement wrap, no undefined behaviour); the
// spec's limits (frac_bits <= 40, MAX_STEP_SUM_BITS) keep every sum inside int64 anyway.

#ifdef MXSIM_HOST
#define __host__
#define __device__
#define __global__
#define MX_CLZLL(x) __builtin_clzll(x)
#else
#define MX_CLZLL(x) __clzll(x)
#endif

namespace mxsim {

typedef long long i64;
typedef unsigned long long u64;

// Operand flag bits (as in _kernels.py) and result flag bits.
constexpr int NAN_ = 1, INF_ = 2, ZERO_ = 4;
constexpr int F_NAN = 1, F_PINF = 2, F_NINF = 4, F_NEGZERO = 8;

constexpr int TR = 8;     // rows of A per block (threadIdx.y)
constexpr int TN = 32;    // columns of B per block (threadIdx.x): one warp per row
constexpr int TK = 32;    // terms staged per shared-memory tile
constexpr int NT = TR * TN;

// +-sig * 2**-shift rounded by MODE (0 rz, 1 rd, 2 rne, 3 rz-jam; rz-jam's shift is already
// one lower); sig >= 0. A shift <= 0 is exact (the spec's limits keep it below 64 bits).
template <int MODE>
__host__ __device__ inline i64 align_one(u64 sig, int sign, i64 shift) {
    u64 mag;
    if (shift <= 0) {
        mag = sig << ((-shift) & 63);
    } else if (shift >= 63) {
        if (MODE == 1) mag = (sign == 1 && sig != 0) ? 1 : 0;
        else if (MODE == 3) mag = sig != 0 ? 1 : 0;
        else mag = 0;
    } else {
        u64 kept = sig >> shift;
        u64 rest = sig - (kept << shift);
        if (MODE == 0) {
            mag = kept;
        } else if (MODE == 1) {
            mag = kept + ((rest != 0 && sign == 1) ? 1 : 0);
        } else if (MODE == 2) {
            u64 half = (u64)1 << (shift - 1);
            mag = kept + ((rest > half || (rest == half && (kept & 1))) ? 1 : 0);
        } else {
            mag = kept | (rest != 0 ? 1 : 0);
        }
    }
    return (i64)(sign == 1 ? (u64)0 - mag : mag);
}

// The alignment exponent of one product (e_zero when it is zero).
template <bool NORM>
__host__ __device__ inline int product_e(i64 p, int lsb, int e_ab, int e_zero) {
    if (p == 0) return e_zero;
    if (NORM) return lsb + (63 - MX_CLZLL((u64)p));   // lsb + bit_length(p) - 1
    return e_ab;
}

// Flags of one product term: NaN (a NaN factor, or Inf times zero), else a signed Inf.
__host__ __device__ inline int term_flags(int f, int neg) {
    if (!(f & (NAN_ | INF_))) return 0;
    if (f & (NAN_ | ZERO_)) return F_NAN;
    return neg ? F_NINF : F_PINF;
}

struct StepArgs {
    const int *a_sign, *a_sig, *a_lsb, *a_e, *a_flag;     // (r, g)
    const int *b_sign, *b_sig, *b_lsb, *b_e, *b_flag;     // (n, g): B transposed
    const i64 *c_sign, *c_sig, *c_lsb, *c_e, *c_flag;     // (r, n) when has_acc
    i64 r, n;
    int g, has_acc, zero_acc, frac_bits, e_zero;
    i64 *out_sum, *out_lsb, *out_flag;                    // (r, n)
};

// One thread's dot in flight.
struct Dot {
    i64 emax;
    u64 total;
    int flags;
    int all_neg_zero;
};

// Shared-memory tiles: A's rows and B's columns, TK terms; sign and flags packed in `sf`
// (bit 0 the sign, bits 1-3 the operand flags).
struct Tiles {
    int a_sig[TR][TK], a_lsb[TR][TK], a_e[TR][TK], a_sf[TR][TK];
    int b_sig[TN][TK + 1], b_lsb[TN][TK + 1], b_e[TN][TK + 1], b_sf[TN][TK + 1];
};

// The block's threads: on the GPU the calling thread, on the host a loop over all of them
// (between two barriers every thread runs the same code on its own state).
#ifdef MXSIM_HOST
#define MX_THREADS for (int ty = 0; ty < TR; ++ty) for (int tx = 0; tx < TN; ++tx)
#define MX_ST st[ty * TN + tx]
#define MX_SYNC
#define MX_NST NT
#else
#define MX_THREADS for (int ty = threadIdx.y, tx = threadIdx.x, once_ = 1; once_; once_ = 0)
#define MX_ST st[0]
#define MX_SYNC __syncthreads();
#define MX_NST 1
#endif

// Thread `tid`'s share of staging terms t0.. of the block's rows and columns (zeros outside).
__host__ __device__ inline void load_tiles(const StepArgs &p, Tiles &s, i64 r0, i64 n0, int t0,
                                           int tid) {
    for (int x = tid; x < TR * TK; x += NT) {
        int row = x / TK, t = x % TK;
        i64 i = r0 + row;
        int gt = t0 + t;
        int sig = 0, lsb = 0, e = 0, sf = 0;
        if (i < p.r && gt < p.g) {
            i64 k = i * p.g + gt;
            sig = p.a_sig[k]; lsb = p.a_lsb[k]; e = p.a_e[k];
            sf = (p.a_sign[k] & 1) | (p.a_flag[k] << 1);
        }
        s.a_sig[row][t] = sig; s.a_lsb[row][t] = lsb; s.a_e[row][t] = e; s.a_sf[row][t] = sf;
    }
    for (int x = tid; x < TN * TK; x += NT) {
        int col = x / TK, t = x % TK;
        i64 j = n0 + col;
        int gt = t0 + t;
        int sig = 0, lsb = 0, e = 0, sf = 0;
        if (j < p.n && gt < p.g) {
            i64 k = j * p.g + gt;
            sig = p.b_sig[k]; lsb = p.b_lsb[k]; e = p.b_e[k];
            sf = (p.b_sign[k] & 1) | (p.b_flag[k] << 1);
        }
        s.b_sig[col][t] = sig; s.b_lsb[col][t] = lsb; s.b_e[col][t] = e; s.b_sf[col][t] = sf;
    }
}

// Pass 1 over a tile: the largest alignment exponent of the products.
template <bool NORM>
__host__ __device__ inline void max_exponent(Dot &d, const Tiles &s, int ty, int tx, int nt,
                                             int e_zero) {
    i64 emax = d.emax;
    for (int t = 0; t < nt; ++t) {
        i64 p = (i64)s.a_sig[ty][t] * s.b_sig[tx][t];
        int e = product_e<NORM>(p, s.a_lsb[ty][t] + s.b_lsb[tx][t],
                                s.a_e[ty][t] + s.b_e[tx][t], e_zero);
        emax = e > emax ? e : emax;
    }
    d.emax = emax;
}

// Pass 2 over a tile: every product aligned to the step's LSB (base) and summed; flags.
template <int MODE>
__host__ __device__ inline void aligned_sum(Dot &d, const Tiles &s, int ty, int tx, int nt,
                                            i64 base) {
    u64 total = d.total;
    int flags = d.flags, anz = d.all_neg_zero;
    for (int t = 0; t < nt; ++t) {
        i64 p = (i64)s.a_sig[ty][t] * s.b_sig[tx][t];
        int sf = s.a_sf[ty][t] ^ s.b_sf[tx][t];
        int neg = sf & 1;
        flags |= term_flags((s.a_sf[ty][t] | s.b_sf[tx][t]) >> 1, neg);
        if (p != 0) {
            total += (u64)align_one<MODE>((u64)p, neg, base - (s.a_lsb[ty][t] + s.b_lsb[tx][t]));
            anz = 0;
        } else if (!neg) {
            anz = 0;
        }
    }
    d.total = total;
    d.flags = flags;
    d.all_neg_zero = anz;
}

// The dots of one block: rows r0.., columns n0.. (TR x TN of them).
template <int MODE, bool NORM>
__host__ __device__ void step_block(const StepArgs &p, Tiles &s, i64 r0, i64 n0) {
    const int jam = MODE == 3 ? 1 : 0;
    Dot st[MX_NST];
    MX_THREADS {
        (void)ty; (void)tx;
        MX_ST.emax = p.zero_acc ? (i64)p.e_zero : -((i64)1 << 40);
        MX_ST.total = 0;
        MX_ST.flags = 0;
        MX_ST.all_neg_zero = !p.zero_acc;
    }
    for (int t0 = 0; t0 < p.g; t0 += TK) {
        int nt = p.g - t0 < TK ? p.g - t0 : TK;
        MX_SYNC
        MX_THREADS { load_tiles(p, s, r0, n0, t0, ty * TN + tx); }
        MX_SYNC
        MX_THREADS { max_exponent<NORM>(MX_ST, s, ty, tx, nt, p.e_zero); }
    }
    MX_THREADS {
        i64 i = r0 + ty, j = n0 + tx;
        if (p.has_acc && i < p.r && j < p.n) {
            i64 k = i * p.n + j;
            i64 ec = p.c_sig[k] == 0 ? (i64)p.e_zero : p.c_e[k];
            MX_ST.emax = ec > MX_ST.emax ? ec : MX_ST.emax;
        }
    }
    for (int t0 = 0; t0 < p.g; t0 += TK) {
        int nt = p.g - t0 < TK ? p.g - t0 : TK;
        if (p.g > TK) {     // one tile holds the whole step: it is still in shared memory
            MX_SYNC
            MX_THREADS { load_tiles(p, s, r0, n0, t0, ty * TN + tx); }
            MX_SYNC
        }
        MX_THREADS { aligned_sum<MODE>(MX_ST, s, ty, tx, nt, MX_ST.emax - p.frac_bits - jam); }
    }
    MX_THREADS {
        i64 i = r0 + ty, j = n0 + tx;
        if (i < p.r && j < p.n) {
            Dot &d = MX_ST;
            i64 k = i * p.n + j;
            i64 step_lsb = d.emax - p.frac_bits;
            if (p.has_acc) {
                i64 cs = p.c_sig[k];
                int csign = (int)p.c_sign[k];
                if (cs != 0) d.total += (u64)align_one<MODE>((u64)cs, csign, step_lsb - jam - p.c_lsb[k]);
                i64 fc = p.c_flag[k];
                if (fc & NAN_) d.flags |= F_NAN;
                else if (fc & INF_) d.flags |= csign == 1 ? F_NINF : F_PINF;
                if (cs != 0 || csign == 0) d.all_neg_zero = 0;
            }
            if (d.total == 0 && d.all_neg_zero) d.flags |= F_NEGZERO;
            p.out_sum[k] = (i64)d.total;
            p.out_lsb[k] = step_lsb - jam;
            p.out_flag[k] = d.flags;
        }
    }
}

}  // namespace mxsim

#ifndef MXSIM_HOST

// The GPU entries: a 1-D grid of blocks (gridDim.x has room for 2**31 - 1 of them), block b
// computing row tile b / col_tiles and column tile b % col_tiles; blockDim = (TN, TR). One
// extern "C" kernel per (mode, product rule): mxsim_step_<mode>_<0 raw | 1 normalized>.
// __launch_bounds__(256, 4): four blocks per SM (ptxas -v for sm_90: 51-58 registers, no
// spills; 73 without the bound, three blocks). The throughput gain is not measured.
#define MXSIM_STEP_KERNEL(MODE, NORM)                                                          \
    extern "C" __global__ void __launch_bounds__(mxsim::NT, 4) mxsim_step_##MODE##_##NORM(     \
            const int *a_sign, const int *a_sig, const int *a_lsb, const int *a_e,             \
            const int *a_flag, const int *b_sign, const int *b_sig, const int *b_lsb,          \
            const int *b_e, const int *b_flag, const long long *c_sign,                        \
            const long long *c_sig, const long long *c_lsb, const long long *c_e,              \
            const long long *c_flag, long long r, long long n, int g, int has_acc,             \
            int zero_acc, int frac_bits, int e_zero, long long col_tiles, long long *out_sum,  \
            long long *out_lsb, long long *out_flag) {                                         \
        __shared__ mxsim::Tiles s;                                                             \
        mxsim::StepArgs p = {a_sign, a_sig, a_lsb, a_e, a_flag, b_sign, b_sig, b_lsb, b_e,     \
                             b_flag, c_sign, c_sig, c_lsb, c_e, c_flag, r, n, g, has_acc,      \
                             zero_acc, frac_bits, e_zero, out_sum, out_lsb, out_flag};         \
        long long b = blockIdx.x;                                                              \
        mxsim::step_block<MODE, NORM>(p, s, (b / col_tiles) * mxsim::TR,                       \
                                      (b % col_tiles) * mxsim::TN);                            \
    }

MXSIM_STEP_KERNEL(0, 0)
MXSIM_STEP_KERNEL(0, 1)
MXSIM_STEP_KERNEL(1, 0)
MXSIM_STEP_KERNEL(1, 1)
MXSIM_STEP_KERNEL(2, 0)
MXSIM_STEP_KERNEL(2, 1)
MXSIM_STEP_KERNEL(3, 0)
MXSIM_STEP_KERNEL(3, 1)

#else

namespace mxsim {
template <int MODE, bool NORM>
void host_blocks(const StepArgs &p) {
    static thread_local Tiles s;
    for (i64 r0 = 0; r0 < p.r; r0 += TR)
        for (i64 n0 = 0; n0 < p.n; n0 += TN)
            step_block<MODE, NORM>(p, s, r0, n0);
}
}  // namespace mxsim

// The host entry (tests): every block of the grid in turn; returns 0, or -1 for a bad mode.
extern "C" int mxsim_step_host(
        const int *a_sign, const int *a_sig, const int *a_lsb, const int *a_e, const int *a_flag,
        const int *b_sign, const int *b_sig, const int *b_lsb, const int *b_e, const int *b_flag,
        const long long *c_sign, const long long *c_sig, const long long *c_lsb,
        const long long *c_e, const long long *c_flag, long long r, long long n, int g,
        int has_acc, int zero_acc, int frac_bits, int mode, int normalized, int e_zero,
        long long *out_sum, long long *out_lsb, long long *out_flag) {
    mxsim::StepArgs p = {a_sign, a_sig, a_lsb, a_e, a_flag, b_sign, b_sig, b_lsb, b_e, b_flag,
                         c_sign, c_sig, c_lsb, c_e, c_flag, r, n, g, has_acc, zero_acc,
                         frac_bits, e_zero, out_sum, out_lsb, out_flag};
    switch (mode * 2 + (normalized ? 1 : 0)) {
        case 0: mxsim::host_blocks<0, false>(p); return 0;
        case 1: mxsim::host_blocks<0, true>(p); return 0;
        case 2: mxsim::host_blocks<1, false>(p); return 0;
        case 3: mxsim::host_blocks<1, true>(p); return 0;
        case 4: mxsim::host_blocks<2, false>(p); return 0;
        case 5: mxsim::host_blocks<2, true>(p); return 0;
        case 6: mxsim::host_blocks<3, false>(p); return 0;
        case 7: mxsim::host_blocks<3, true>(p); return 0;
        default: return -1;
    }
}

#endif
