/* mxsim_dot.h: the arithmetic of an mxsim unit spec in C99 (the engine every exported unit
 * shares). Generated units (see their own headers) hold a `const mxsim_unit` describing the
 * spec and call these functions; nothing here has global state, and every function is
 * reentrant. Written for mxsim; kept bit-equal to mxsim's engines by its tests. */
#ifndef MXSIM_DOT_H
#define MXSIM_DOT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MXSIM_DOT_VERSION 1

/* A value in flight, exact: (-1)^neg * sig * 2^exp, or Inf (sign neg) or NaN. */
enum { MXSIM_NUM = 0, MXSIM_INF = 1, MXSIM_NAN = 2 };
typedef struct mxsim_val {
    int32_t kind;       /* MXSIM_NUM, MXSIM_INF or MXSIM_NAN */
    int32_t neg;        /* sign (of a zero and of an Inf too) */
    uint64_t sig;       /* magnitude's integer significand (0: a zero) */
    int32_t exp;        /* exponent of sig's unit */
} mxsim_val;

/* A code of a format of at most 8 bits, as mxsim's format tables spell it. */
typedef struct mxsim_code {
    uint8_t sign;
    uint8_t cls;        /* 0 zero, 1 subnormal, 2 normal, 3 Inf, 4 NaN */
    int16_t e;          /* exponent field as mxsim.formats reads it (value = sig * 2^(e - man)) */
    uint16_t sig;
} mxsim_code;

typedef struct mxsim_format {
    const char *name;
    int32_t bits, man_bits, exp_bits, emin, emax;
    int32_t is_int;               /* MXINT8: sign and magnitude of a two's complement code */
    int32_t has_inf;              /* IEEE-style: top exponent field holds Inf and NaN */
    uint32_t value_mask;          /* bits of a code that carry its value */
    uint64_t max_sig;             /* largest finite value = max_sig * 2^max_exp */
    int32_t max_exp;
    uint32_t inf_code;            /* +Inf's code (IEEE-style formats) */
    const mxsim_code *table;      /* 2^bits entries, or NULL: IEEE fields decoded directly */
} mxsim_format;

/* Rounding modes, alignment, overflow, zero signs and epilogues, as mxsim.spec names them. */
enum { MXSIM_RNE = 0, MXSIM_RZ = 1, MXSIM_RNA = 2, MXSIM_RU = 3, MXSIM_RD = 4 };
enum { MXSIM_ALIGN_RZ = 0, MXSIM_ALIGN_RD = 1, MXSIM_ALIGN_RNE = 2, MXSIM_ALIGN_RZ_JAM = 3 };
enum { MXSIM_OVF_INF = 0, MXSIM_OVF_SATURATE = 1, MXSIM_OVF_IEEE = 2 };
enum { MXSIM_ZERO_POSITIVE = 0, MXSIM_ZERO_IEEE = 1, MXSIM_ZERO_C = 2 };
enum { MXSIM_EPI_NONE = 0, MXSIM_EPI_ALPHA = 1, MXSIM_EPI_COL_ROW = 2, MXSIM_EPI_BLOCK_FMA = 3 };
enum { MXSIM_FP32_TENSOR = 0, MXSIM_FP32_BLOCK = 1 };

/* One unit spec, as data (generated from mxsim's UnitSpec; field by field the same). */
typedef struct mxsim_unit {
    const char *name;
    const mxsim_format *a, *b, *scale, *upcast, *acc, *d, *fp32;
    int32_t a_size, b_size;       /* bytes of one element code in memory (1, 2 or 4) */
    int32_t block;                /* elements per block scale (0: none) */
    int32_t scale_fp32;           /* scales are FP32 (their bits, uint32): epilogue or exact */
    int32_t k;                    /* instruction K (0: the whole dot at once, the exact unit) */
    int32_t n_steps;
    const int32_t *step_start;    /* n_steps + 1 offsets into step_index */
    const int32_t *step_index;    /* the k indices of each fused step, in order */
    int32_t frac_bits;            /* -1: terms kept exactly */
    int32_t align, product_normalized, fold_scales, upcast_finite, specials_none;
    int32_t group;                /* GST-FDPA group (0: none) */
    int32_t tree;                 /* reduce = tree */
    int32_t n_tree_levels;
    const mxsim_format *const *tree_formats;
    int32_t c_after, c_rounding, acc_rounding, e_zero, overflow, zero_sign;
    uint32_t d_nan;
    int32_t promote_every;        /* 0: none */
    int32_t promote_rounding, epilogue;
    int32_t scale_sum_bits;       /* 0: none */
    int32_t scale_sum_saturate;
    int32_t exact;                /* the exact unit: every term summed exactly, one rounding */
} mxsim_unit;

/* Intermediates of one instruction, for node-by-node debugging (mxsim explain's nodes). Up
 * to MXSIM_TRACE_TERMS terms per step and MXSIM_TRACE_STEPS steps are recorded. */
#define MXSIM_TRACE_TERMS 256
#define MXSIM_TRACE_STEPS 8
typedef struct mxsim_step_trace {
    int32_t n_terms;              /* product or GST group terms recorded */
    int32_t has_acc;              /* the accumulator (C or the last step) is term n_terms */
    int32_t max_exp;              /* E: the largest alignment exponent */
    int32_t lsb_exp;              /* the exponent of the unit the aligned terms count */
    int32_t aligned_valid;        /* 0: an exact step (frac_bits null) or a special result */
    int32_t term_exp[MXSIM_TRACE_TERMS + 1];    /* each term's alignment exponent */
    mxsim_val term[MXSIM_TRACE_TERMS + 1];      /* each term, exact (scales applied) */
    int64_t aligned[MXSIM_TRACE_TERMS + 1];     /* each term aligned, in units of 2^lsb_exp */
    int64_t sum;                  /* the aligned terms' exact sum, in units of 2^lsb_exp */
    mxsim_val result;             /* the step's result, rounded to acc_format */
} mxsim_step_trace;

typedef struct mxsim_trace {
    int32_t n_blocks;
    int32_t scale_exp_sum[MXSIM_TRACE_TERMS];   /* per block: the scale exponents' sum, held */
    int32_t n_steps;
    mxsim_step_trace step[MXSIM_TRACE_STEPS];
    int32_t n_nodes;                            /* a reduction tree's nodes, level by level */
    mxsim_val node[MXSIM_TRACE_TERMS];
    mxsim_val to_d;                             /* the result converted to d_format */
    mxsim_val result;                           /* D, before its code */
    uint32_t d;                                 /* D's code */
} mxsim_trace;

/* One instruction (u->k elements; the exact unit: k elements). Element codes are read as
 * u->a_size / u->b_size bytes each; block scale codes are uint8 (one per u->block elements);
 * C and D are codes of u->d (FP16/BF16 in the low 16 bits). trace may be NULL. */
uint32_t mxsim_instruction(const mxsim_unit *u, size_t k, const void *a, const void *b,
                           const uint8_t *a_scale, const uint8_t *b_scale, uint32_t c,
                           mxsim_trace *trace);

/* A whole dot product of k elements (a multiple of u->k): instructions chained (D of one is
 * C of the next), promotions and the FP32-scale epilogue as mxsim's engines apply them.
 * Scales: uint8 codes (k / block of them), or for FP32 scales their bits as uint32: one per
 * operand (per tensor or row-wise), or k / 128 (block-wise). tensor_scale: FP32 bits of the
 * NVFP4 per-tensor scale (exact unit only), or NULL. */
uint32_t mxsim_dot(const mxsim_unit *u, size_t k, const void *a, const void *b,
                   const void *a_scale, const void *b_scale, uint32_t c,
                   const uint32_t *tensor_scale);

/* n dot products, each laid out contiguously: a[n][k], b[n][k] (B's column), scales
 * [n][scales_per_dot], c[n] (NULL: +0) and d[n]. */
void mxsim_dot_batch(const mxsim_unit *u, size_t n, size_t k, const void *a, const void *b,
                     const void *a_scale, const void *b_scale, size_t scales_per_dot,
                     const uint32_t *c, uint32_t *d);

/* The exact value a code of fmt holds (as_bits: the number its bits spell, NaN and Inf codes
 * too), and the value's code in an IEEE-style format (a value the format holds exactly). */
mxsim_val mxsim_decode(const mxsim_format *fmt, uint32_t code, int as_bits);
uint32_t mxsim_encode(const mxsim_format *fmt, mxsim_val v, uint32_t nan_code);

#ifdef __cplusplus
}
#endif
#endif
