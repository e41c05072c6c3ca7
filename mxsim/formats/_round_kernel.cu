// formats.round_to on a GPU: one thread per element, integers only.
//
// Element by element, exactly what the numpy path (mxsim/formats/rounding.py `_round_numpy`)
// and its numba twin (mxsim/formats/_round_kernel.py `_round_loop`) do: a non-negative significand
// `sig` with the exponent of its LSB and a sticky bit, rounded once to a format's codes under
// one rounding mode (0 rne, 1 rna, 2 rz, 3 ru, 4 rd; stochastic rounding stays in numpy) and
// overflow policy (0 saturate, 1 ieee, 2 inf). The format's constants come in `p` (see
// P_* below, filled by mxsim/formats/_round_kernel.py `_params`).
//
// The same source compiles twice: by NVRTC (CuPy) for the GPU, and by g++ (`-x c++
// -DMXSIM_HOST`) into a host library that tests/mxsim/formats/test_gpu_round.py holds bit-equal to the numpy
// path and the numba twin. Inputs may be broadcast: each array comes with a stride of 0 (one
// value for every element) or 1.

#ifdef MXSIM_HOST
#define __device__
#define __global__
#define MX_CLZLL(x) __builtin_clzll(x)
#else
#define MX_CLZLL(x) __clzll(x)
#endif

namespace mxsim_round {

typedef long long i64;
typedef unsigned long long u64;

// Indices into the parameter array p.
enum { P_INT, P_MAN, P_EMIN, P_EMAX, P_MAXSIG, P_BIAS, P_EXPBITS, P_SIGNED, P_HASZERO,
       P_SIGNSHIFT, P_CODEMAX, P_HASINF, P_CODEINF, P_HASNAN, P_CODENAN, P_MODE, P_OVERFLOW,
       P_COUNT };

__device__ inline int bit_length(u64 x) { return x ? 64 - MX_CLZLL(x) : 0; }

// Whether the magnitude cut to `kept` (`discarded`: its low `right` bits) rounds up.
__device__ inline bool round_up(int mode, int s, u64 kept, u64 discarded, i64 right, bool st) {
    bool guard = false;
    if (right >= 1 && right <= 64) guard = ((discarded >> (right - 1)) & 1ULL) != 0;
    bool rest = false;
    if (right - 1 >= 64) rest = discarded != 0;
    else if (right >= 1) rest = (discarded & ((1ULL << (right - 1)) - 1ULL)) != 0;
    rest = rest || st;
    bool inexact = guard || rest;
    bool odd = (kept & 1ULL) != 0;
    switch (mode) {
        case 0: return guard && (rest || odd);
        case 1: return guard;
        case 2: return false;
        case 3: return inexact && s == 0;
        default: return inexact && s == 1;
    }
}

// +-max or +-Inf (NaN where the format has no Inf) for an overflowing result.
__device__ inline u64 overflow_code(int s, const i64* p) {
    bool neg = s == 1;
    int mode = (int)p[P_MODE], overflow = (int)p[P_OVERFLOW];
    bool to_inf;
    if (overflow == 0) to_inf = false;
    else if (overflow == 2) to_inf = true;
    else if (mode == 2) to_inf = false;
    else if (mode == 3) to_inf = !neg;
    else if (mode == 4) to_inf = neg;
    else to_inf = true;
    u64 signbit = p[P_SIGNED] ? ((u64)s << p[P_SIGNSHIFT]) : 0ULL;
    u64 maxc = p[P_INT] ? (neg ? 0x81ULL : 0x7FULL) : ((u64)p[P_CODEMAX] | signbit);
    u64 infc = p[P_HASINF] ? ((u64)p[P_CODEINF] | signbit)
             : p[P_HASNAN] ? ((u64)p[P_CODENAN] | signbit) : maxc;
    return to_inf ? infc : maxc;
}

// The code of an in-range result: significand `kept` with LSB exponent `target`.
__device__ inline u64 pack(int s, u64 kept, i64 target, const i64* p) {
    if (p[P_INT]) {
        u64 max_sig = (u64)p[P_MAXSIG];
        i64 mag = (i64)(kept < max_sig ? kept : max_sig);
        i64 ival = s == 1 ? -mag : mag;
        return (u64)(ival & 0xFF);
    }
    int man = (int)p[P_MAN];
    bool normal = (kept >> man) != 0;
    i64 ef = normal ? target + man + p[P_BIAS] : 0;
    i64 top = (1LL << p[P_EXPBITS]) - 1;
    ef = ef < 0 ? 0 : (ef > top ? top : ef);
    u64 code = ((u64)ef << man) | (kept & ((1ULL << man) - 1ULL));
    if (!p[P_HASZERO] && kept == 0) code = 0;
    if (p[P_SIGNED]) code |= (u64)s << p[P_SIGNSHIFT];
    return code;
}

__device__ inline u64 round_one(int s, i64 lsb, u64 sg, bool st, const i64* p) {
    if (sg == 0 && st) {            // a bare sticky bit: a positive value below all others
        sg = 1;
        lsb = -(1LL << 20);
        st = false;
    }
    int man = (int)p[P_MAN];
    i64 msb = lsb + bit_length(sg) - 1;
    bool huge = false;
    i64 target;
    if (p[P_INT]) {
        target = -man;
        huge = msb > 0 && sg != 0;
        if (huge) sg = 0;
    } else {
        target = (msb > p[P_EMIN] ? msb : p[P_EMIN]) - man;
    }
    i64 shift = target - lsb;
    i64 right = shift > 0 ? shift : 0;
    u64 kept, discarded;
    if (shift > 0) {
        if (right >= 64) {
            kept = 0;
            discarded = sg;
        } else {
            kept = sg >> right;
            discarded = sg & ((1ULL << right) - 1ULL);
        }
    } else {
        i64 left = -shift;
        kept = sg << (left < 63 ? left : 63);
        discarded = 0;
    }
    if (sg == 0) kept = 0;
    if (round_up((int)p[P_MODE], s, kept, discarded, right, st)) kept += 1;
    if (!p[P_INT] && (kept >> (man + 1)) != 0) {
        kept >>= 1;
        target += 1;
    }
    bool over;
    if (p[P_INT]) {
        over = huge || kept > (u64)p[P_MAXSIG];
    } else {
        i64 top_exp = target + man;
        over = (top_exp > p[P_EMAX] || (top_exp == p[P_EMAX] && kept > (u64)p[P_MAXSIG]))
               && kept != 0;
    }
    return over ? overflow_code(s, p) : pack(s, kept, target, p);
}

}  // namespace mxsim_round

#define MXSIM_ROUND_KERNEL(NAME, T)                                                         \
    extern "C" __global__ void NAME(const unsigned char* sign, long long ss,                  \
                                    const long long* lsb, long long ls,                       \
                                    const unsigned long long* sig, long long gs,              \
                                    const unsigned char* sticky, long long ts,                \
                                    const long long* p, T* out, long long n) {                \
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;           \
             i += (long long)blockDim.x * gridDim.x)                                          \
            out[i] = (T)mxsim_round::round_one(sign[i * ss], lsb[i * ls], sig[i * gs],        \
                                               sticky[i * ts] != 0, p);                       \
    }

#ifndef MXSIM_HOST
MXSIM_ROUND_KERNEL(mxsim_round_u8, unsigned char)
MXSIM_ROUND_KERNEL(mxsim_round_u16, unsigned short)
MXSIM_ROUND_KERNEL(mxsim_round_u32, unsigned int)
MXSIM_ROUND_KERNEL(mxsim_round_u64, unsigned long long)
#else
// The host build: the same element function over flat arrays (strides as on the GPU).
extern "C" int mxsim_round_host(const unsigned char* sign, long long ss, const long long* lsb,
                                long long ls, const unsigned long long* sig, long long gs,
                                const unsigned char* sticky, long long ts, const long long* p,
                                unsigned long long* out, long long n) {
    for (long long i = 0; i < n; ++i)
        out[i] = mxsim_round::round_one(sign[i * ss], lsb[i * ls], sig[i * gs],
                                        sticky[i * ts] != 0, p);
    return 0;
}
#endif
