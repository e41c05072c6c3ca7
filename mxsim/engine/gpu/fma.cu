// Block-wise FP32 scales on the GPU (kernels.py block_fma): one pass per 128-deep K-block of
// total = fma(partial, fl(sa * sb), total), IEEE FP32 on bit patterns, each operation rounded
// once to nearest even, as mxsim.engine.fast.scales.mul_fp32 and fma_fp32 compute them in
// integers: the exact product, the exact two-term sum of fast.adders.exact_sum2 (a 62-bit
// window and a sticky bit), formats.round_to's CUDA twin, the zero signs and the specials of
// fast.operands.special_codes. Compiled after chain.cu (decode, specials, exact_sum2); the host
// build (g++ -DMXSIM_HOST) is held equal to the numpy functions by
// tests/mxsim/engine/test_gpu_fma.py.

namespace mxsim {

__device__ inline bool is_zero(const Fields &f) { return f.sig == 0 && !(f.flag & (NAN_ | INF_)); }

// scales.mul_fp32 of one pair (pf: FP32's rounding parameters, RNE, IEEE overflow).
__device__ inline i64 mul_fp32(const i64 *pf, i64 x, i64 y) {
    Fields fx = decode(pf, x), fy = decode(pf, y);
    int sign = fx.sign ^ fy.sign;
    i64 code = (i64)R::round_one(sign, fx.lsb + fy.lsb, (u64)fx.sig * (u64)fy.sig, false, pf);
    bool ix = (fx.flag & INF_) != 0, iy = (fy.flag & INF_) != 0;
    bool nan = ((fx.flag | fy.flag) & NAN_) || (ix && is_zero(fy)) || (is_zero(fx) && iy);
    bool inf = (ix || iy) && !nan;
    return specials(pf, code, nan, inf && sign == 0, inf && sign == 1);
}

// scales.fma_fp32 of one triple.
__device__ inline i64 fma_fp32(const i64 *pf, i64 x, i64 y, i64 z) {
    Fields fx = decode(pf, x), fy = decode(pf, y), fz = decode(pf, z);
    int sp = fx.sign ^ fy.sign;
    u64 p = (u64)fx.sig * (u64)fy.sig;
    Sum2 s = exact_sum2(sp, p, fx.lsb + fy.lsb, fz.sign, (u64)fz.sig, fz.lsb);
    i64 code = (i64)R::round_one(s.neg, s.base, s.mag, s.sticky, pf);
    if (s.zero) {
        bool neg_zero = p == 0 && is_zero(fz) && sp == 1 && fz.sign == 1;
        code = neg_zero ? (1LL << pf[R::P_SIGNSHIFT]) : 0;
    }
    bool ix = (fx.flag & INF_) != 0, iy = (fy.flag & INF_) != 0, iz = (fz.flag & INF_) != 0;
    bool pnan = ((fx.flag | fy.flag) & NAN_) || (ix && is_zero(fy)) || (is_zero(fx) && iy);
    bool pinf = (ix || iy) && !pnan;
    bool nan = pnan || (fz.flag & NAN_);
    bool pos = (pinf && sp == 0) || (iz && fz.sign == 0);
    bool neg = (pinf && sp == 1) || (iz && fz.sign == 1);
    return specials(pf, code, nan, pos, neg);
}

// One element of a block's pass: total = fma(partial, fl(sa[i] * sb[j]), total); on the last
// block a NaN total becomes d_nan (scales.block_fma).
__device__ inline void block_fma_one(const unsigned int *partial, const unsigned int *sa,
                                     const unsigned int *sb, unsigned int *total,
                                     const i64 *pf, i64 n, int last, unsigned int d_nan,
                                     i64 o) {
    i64 i = o / n, j = o % n;
    i64 v = fma_fp32(pf, partial[o], mul_fp32(pf, sa[i], sb[j]), total[o]);
    if (last && (v & 0x7FFFFFFFLL) > 0x7F800000LL) v = d_nan;
    total[o] = (unsigned int)v;
}

}  // namespace mxsim

#ifndef MXSIM_HOST

extern "C" __global__ void mxsim_block_fma(const unsigned int *partial, const unsigned int *sa,
                                           const unsigned int *sb, unsigned int *total,
                                           const long long *pf, long long m, long long n,
                                           int last, unsigned int d_nan) {
    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < m * n;
         o += (long long)gridDim.x * blockDim.x)
        mxsim::block_fma_one(partial, sa, sb, total, pf, n, last, d_nan, o);
}

#else

// The host entries (tests): every element of a block's pass; and the two FP32 operations on
// equally long arrays.
extern "C" void mxsim_block_fma_host(const unsigned int *partial, const unsigned int *sa,
                                     const unsigned int *sb, unsigned int *total,
                                     const long long *pf, long long m, long long n, int last,
                                     unsigned int d_nan) {
    for (long long o = 0; o < m * n; ++o)
        mxsim::block_fma_one(partial, sa, sb, total, pf, n, last, d_nan, o);
}

extern "C" void mxsim_fp32_host(const unsigned int *x, const unsigned int *y,
                                const unsigned int *z, const long long *pf, long long count,
                                unsigned int *mul, unsigned int *fma) {
    for (long long o = 0; o < count; ++o) {
        mul[o] = (unsigned int)mxsim::mul_fp32(pf, x[o], y[o]);
        fma[o] = (unsigned int)mxsim::fma_fp32(pf, x[o], y[o], z[o]);
    }
}

#endif
