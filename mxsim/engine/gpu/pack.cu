// Device-side packing of one side of a GEMM for the whole-dot kernel (chain.cu): element codes
// and block-scale codes in, the five int32 fields of mxsim.engine._kernels.side out (sign,
// significand, LSB exponent, alignment exponent, flags; scales folded in), one term per thread.
//
// The fields of every code come from tables the host computed with the fast engine's own
// Operand.of (kernels.py code_table), so a term's fields are exactly the host's: the kernel
// only looks them up and folds the scale in as _kernels.side does (significands multiply,
// exponents add, NaN and zero flags OR). Compiled after step.cu (i64, the flag bits).
//
// Layout: the term (row r, position t) of the side reads codes[r * rs + t * ts] and the scale
// scales[r * srs + (t / blk) * sts] (A: rs = K, ts = 1; B, whose rows are its columns:
// rs = 1, ts = N), and writes field[r * K + t]. `special` gets 1 where any term is NaN or Inf.

namespace mxsim {

struct PackArgs {
    const unsigned char *codes8;    // 8-bit codes, or null
    const unsigned short *codes16;  // 16-bit codes (where codes8 is null)
    const unsigned char *scales;    // E8M0 / UE4M3 codes, or null (no block scales)
    const int *etab;                // 5 x n_codes: sign, sig, lsb, e, flags of every code
    const int *stab;                // 4 x 256: sig, lsb, e, flags (NaN, zero) of every scale
    i64 n_codes, rows, K, rs, ts, blk, srs, sts;
    int *sign, *sig, *lsb, *e, *flag;
    int *special;
};

__host__ __device__ inline void pack_one(const PackArgs &p, i64 o) {
    i64 r = o / p.K, t = o % p.K;
    i64 at = r * p.rs + t * p.ts;
    // Bits above the format's are cleared, as Format.checked_codes does for device arrays.
    i64 code = (p.codes8 ? (i64)p.codes8[at] : (i64)p.codes16[at]) & (p.n_codes - 1);
    const int *x = p.etab;
    int sig = x[p.n_codes + code], lsb = x[2 * p.n_codes + code], e = x[3 * p.n_codes + code];
    int flag = x[4 * p.n_codes + code];
    if (p.scales) {
        i64 sc = p.scales[r * p.srs + (t / p.blk) * p.sts];
        sig *= p.stab[sc];
        lsb += p.stab[256 + sc];
        e += p.stab[512 + sc];
        flag |= p.stab[768 + sc];
    }
    p.sign[o] = x[code];
    p.sig[o] = sig;
    p.lsb[o] = lsb;
    p.e[o] = e;
    p.flag[o] = flag;
#ifdef MXSIM_HOST
    if (flag & (NAN_ | INF_)) *p.special = 1;
#else
    if (flag & (NAN_ | INF_)) atomicOr(p.special, 1);
#endif
}

// The arguments of both entries below as one record (`dims`: n_codes, rows, K, rs, ts, blk,
// srs, sts).
inline __host__ __device__ PackArgs pack_args(
        const unsigned char *codes8, const unsigned short *codes16, const unsigned char *scales,
        const int *etab, const int *stab, const long long *dims, int *sign, int *sig, int *lsb,
        int *e, int *flag, int *special) {
    PackArgs p = {codes8, codes16, scales, etab, stab, dims[0], dims[1], dims[2], dims[3],
                  dims[4], dims[5], dims[6], dims[7], sign, sig, lsb, e, flag, special};
    return p;
}

}  // namespace mxsim

#ifndef MXSIM_HOST

extern "C" __global__ void mxsim_pack_side(
        const unsigned char *codes8, const unsigned short *codes16, const unsigned char *scales,
        const int *etab, const int *stab, const long long *dims, int *sign, int *sig, int *lsb,
        int *e, int *flag, int *special) {
    mxsim::PackArgs p = mxsim::pack_args(codes8, codes16, scales, etab, stab, dims, sign, sig,
                                         lsb, e, flag, special);
    long long total = p.rows * p.K;
    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < total;
         o += (long long)gridDim.x * blockDim.x)
        mxsim::pack_one(p, o);
}

#else

// The host entry (tests): every term in turn.
extern "C" void mxsim_pack_host(
        const unsigned char *codes8, const unsigned short *codes16, const unsigned char *scales,
        const int *etab, const int *stab, const long long *dims, int *sign, int *sig, int *lsb,
        int *e, int *flag, int *special) {
    mxsim::PackArgs p = mxsim::pack_args(codes8, codes16, scales, etab, stab, dims, sign, sig,
                                         lsb, e, flag, special);
    for (long long o = 0; o < p.rows * p.K; ++o) mxsim::pack_one(p, o);
}

#endif
