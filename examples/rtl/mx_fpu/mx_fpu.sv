// mx_fpu: a pipelined MX dot-product-accumulate unit in the style of a RISC-V FPU extension,
//
//     D = round_rm(C + 2**(sa - 127) * 2**(sb - 127) * sum_i a_i * b_i)
//
// over one instruction's k lanes (k = 32 for the 8-bit formats, 64 for E2M1), with one E8M0
// scale pair per instruction, the accumulator C and the result D in FP32 or BF16, the five
// RISC-V rounding modes and the RISC-V fflags.
//
// Written by hand as an example of mxsim's foreign-RTL path (see README.md).
//
// Operands (fmt selects the element format of both a and b):
//   fmt 0  E4M3  (OCP): sig * 2**(e - 9), sig = {E != 0, m}, e = max(E, 1) - 1; no Inf;
//                NaN = S.1111.111
//   fmt 1  E5M2  (IEEE-like): sig * 2**(e - 16), sig = {E != 0, m}, e = max(E, 1) - 1;
//                E = 31: Inf (m = 0) or NaN (m != 0)
//   fmt 2  E2M1  (FP4): sig * 2**(e - 1), sig = {E != 0, m}, e = max(E, 1) - 1; no specials
//   fmt 3  INT8  (MXINT8): the two's complement code * 2**-6; no specials
//   op_a, op_b lane i in bits [w*i + w-1 : w*i], w = 8 (k = 32) or 4 (E2M1, k = 64)
//   scale_a, scale_b  E8M0, 2**(code - 127); 0xFF is NaN
//   acc_in   C: FP32 bits (acc_fmt = 0), or BF16 bits in [15:0] (acc_fmt = 1; [31:16] ignored)
//   rm       0 RNE, 1 RTZ, 2 RDN, 3 RUP, 4 RMM (nearest, ties away); 5..7 round as RNE
//
// Numerics:
//   1. Every product a_i * b_i is exact and so is their sum S: a signed integer in units of
//      2**u (u = -18 E4M3, -32 E5M2, -2 E2M1, -12 INT8), |S| < 2**69 (E5M2: 32 * 49 * 2**58).
//   2. P = S * 2**(u + sa + sb - 254) is exact (only its exponent moves: 2**-286 .. 2**290).
//   3. C + P is formed exactly up to a jam bit (see "alignment" below) and rounded ONCE to the
//      accumulator format (FP32: 24 significant bits; BF16: 8; both with exponents -126..127
//      and gradual underflow) in the mode rm. Overflow (the result rounded with an unbounded
//      exponent is above the largest finite number): RNE, RMM and 5..7 give +-Inf, RTZ
//      +-max finite, RDN +max finite / -Inf, RUP +Inf / -max finite.
//   4. Zeros: when S = 0 (every product zero, or the products cancel exactly) D = C, its code
//      unchanged (-0, a subnormal, an Inf, a BF16 code in [15:0]); otherwise an exact total
//      C + P = 0 gives +0 (-0 in RDN), and a non-zero total that rounds to zero keeps its sign.
//   5. Specials. D is the canonical NaN 0x7FC00000 (BF16 0x7FC0) when an element is a NaN
//      code, a scale is 0xFF, C is a NaN, a product is Inf * 0 (E5M2), or +Inf and -Inf meet
//      among the products and C. Otherwise an Inf product (E5M2 Inf * non-zero) or an Inf C
//      gives that Inf. The finite lanes are then irrelevant.
//   6. flags[4:0] = {NV, DZ, OF, UF, NX} (RISC-V fflags order); DZ is always 0.
//      NV: D is NaN through an element NaN code, a scale 0xFF, an Inf * 0 product, +Inf and
//          -Inf among the products and C, or C is a signaling NaN (exponent all ones,
//          fraction != 0 with its MSB 0). A quiet NaN C alone gives NaN without NV; the
//          product-side causes set NV whatever C is (as RISC-V's fmadd does for Inf * 0 + qNaN).
//      OF: the result rounded with an unbounded exponent exceeds the largest finite number
//          (NX is then set too).
//      UF: the result is tiny AFTER rounding (rounded to 24 / 8 significant bits with an
//          unbounded exponent it is below 2**-126, the RISC-V rule) and inexact.
//      NX: the delivered result differs from the exact value.
//      A NaN or Inf result from NaN/Inf/0xFF inputs, a pass-through of C and an exact result
//      have no OF, UF or NX.
//
// Alignment (exact without a near/far split): S is normalised to the top of SM = 70 bits and
// C's 24-bit significand is placed at the top of SM bits too (a subnormal C keeps its leading
// zeros at exponent -126). The one with the larger top exponent (X) sits at the top of a
// window of WW = SM + 2 bits; the other (Y) is shifted right by the exponent difference, the
// bits that fall out OR-ed into its LSB (the jam bit). Bits fall out only when the shift is 3
// or more; the jammed sum J is then an odd number of window units and the exact sum lies
// strictly between J - 1 and J + 1, so both round alike at every boundary that is an even
// number of units: a normalised X leaves the sum's leading one at window bit 70 or above, so
// FP32's round bit is at bit 46 or above; a subnormal C on top puts the window's LSB at
// 2**-197, far below the 2**-151 of the finest boundary any rounding (tininess included)
// looks at. When nothing falls out the sum is exact, however much cancels.
//
// Pipeline: a valid/ready stream of three register stages, one instruction each; a stage takes
// a new instruction when it is empty or its own moves on, so in_ready = !full || out_ready
// through the chain; while out_valid && !out_ready, result, flags and out_valid hold.
//   S1  decode the lanes, the exact products and their sum S, specials, scale sum
//   S2  normalise S, decode C, align the smaller, add: C + P in the window (plus its jam bit)
//   S3  round to FP32 / BF16 in rm, overflow, flags, specials and pass-through; pack D
// An instruction taken in cycle t (in_valid && in_ready in cycle t: captured by the rising
// edge that ends it) is on out_valid / result / flags in cycle t + 3 when nothing stalls (and
// leaves with the edge that ends t + 3 if out_ready is high): latency 3, one instruction per
// cycle.
//
// `define MX_FPU_BUG to build the deliberately broken variant: in RDN, for a negative result,
// the round-up (magnitude increment) decision ignores the sticky bit and uses the round bit
// alone, so a negative RDN result whose discarded part is non-zero but below half an ulp is
// one ulp too small in magnitude. Every other mode is unaffected.

module mx_fpu (
    input  logic         clk,
    input  logic         rst_n,          // synchronous, active low
    input  logic         in_valid,
    output logic         in_ready,
    input  logic [255:0] op_a,           // element codes, lane i at [w*i + w-1 : w*i]
    input  logic [255:0] op_b,
    input  logic [7:0]   scale_a,        // E8M0 (0xFF = NaN), one pair per instruction
    input  logic [7:0]   scale_b,
    input  logic [31:0]  acc_in,         // C: FP32, or BF16 in [15:0] when acc_fmt = 1
    input  logic [1:0]   fmt,            // 0 E4M3, 1 E5M2, 2 E2M1, 3 INT8
    input  logic         acc_fmt,        // 0 FP32, 1 BF16
    input  logic [2:0]   rm,             // 0 RNE, 1 RTZ, 2 RDN, 3 RUP, 4 RMM, 5..7 as RNE
    output logic         out_valid,
    input  logic         out_ready,
    output logic [31:0]  result,         // D: FP32, or BF16 in [15:0] with [31:16] = 0
    output logic [4:0]   flags           // {NV, DZ, OF, UF, NX}
);

    localparam logic [1:0] FMT_E4M3 = 2'd0;
    localparam logic [1:0] FMT_E5M2 = 2'd1;
    localparam logic [1:0] FMT_E2M1 = 2'd2;

    localparam logic [2:0] RM_RTZ = 3'd1;
    localparam logic [2:0] RM_RDN = 3'd2;
    localparam logic [2:0] RM_RUP = 3'd3;
    localparam logic [2:0] RM_RMM = 3'd4;

    localparam int LANES = 32;           // 8-bit chunks of op_a / op_b (two E2M1 lanes each)
    localparam int SUMW  = 72;           // S, two's complement: |S| < 2**69
    localparam int SM    = 70;           // |S| and the normalised operands of the add
    localparam int G     = 2;            // guard bits below the window's operands
    localparam int WW    = SM + G;       // the alignment window, jam bit included
    localparam int WR    = WW + 1;       // the sum's magnitude (one carry bit)
    localparam int RW    = WR + 24;      // the sum widened for the rounding shift
    localparam int EW    = 12;           // signed exponents, distances: all within +-420
    localparam int DW    = 7;            // shift distances, 0 .. RW

    // -------------------------------------------------------------------------------------
    // Handshake: stage i takes a new instruction when it is empty or its own moves on.
    logic v1, v2, v3;
    logic go1, go2, go3;
    assign go3 = !v3 || out_ready;
    assign go2 = !v2 || go3;
    assign go1 = !v1 || go2;
    assign in_ready  = go1;
    assign out_valid = v3;

    always_ff @(posedge clk) begin
        if (!rst_n) begin
            {v1, v2, v3} <= '0;
        end else begin
            if (go1) v1 <= in_valid;
            if (go2) v2 <= v1;
            if (go3) v3 <= v2;
        end
    end

    // -------------------------------------------------------------------------------------
    // S1: lanes, exact products, their sum, specials.

    // One element: value = sig * 2**(exp + u/2) for a finite one.
    typedef struct packed {
        logic       sign;
        logic [7:0] sig;
        logic [4:0] exp;
        logic       inf;
        logic       nan;
    } elem_t;

    // One 8-bit chunk of the operands: its product (the sum of its two products for E2M1),
    // exact, in units of 2**u; zero when a special element is present.
    typedef struct packed {
        logic signed [SUMW-1:0] val;
        logic                   nan;     // an element NaN code, or Inf * 0
        logic                   pinf;    // a +Inf product
        logic                   ninf;    // a -Inf product
    } lane_t;

    // The `verilator no_inline_task` pragmas keep the lane decode one C++ function (called
    // 32 times): inlined, the model is several times larger and slower to build. Other tools
    // ignore the comment.

    // Element code c of format f (E2M1: the code is c[3:0]).
    function automatic elem_t decode(input logic [1:0] f, input logic [7:0] c);
        elem_t r;
        r = '0;
        r.sign = c[7];
        case (f)
            FMT_E4M3: begin
                r.sig = {4'd0, c[6:3] != 4'd0, c[2:0]};
                r.exp = c[6:3] == 4'd0 ? 5'd0 : {1'b0, c[6:3]} - 5'd1;
                r.nan = c[6:0] == 7'h7f;
            end
            FMT_E5M2: begin
                r.sig = {5'd0, c[6:2] != 5'd0, c[1:0]};
                r.exp = c[6:2] == 5'd0 ? 5'd0 : c[6:2] - 5'd1;
                r.inf = c[6:2] == 5'h1f && c[1:0] == 2'd0;
                r.nan = c[6:2] == 5'h1f && c[1:0] != 2'd0;
            end
            FMT_E2M1: begin
                r.sign = c[3];
                r.sig = {6'd0, c[2:1] != 2'd0, c[0]};
                r.exp = c[2:1] == 2'd0 ? 5'd0 : {3'd0, c[2:1]} - 5'd1;
            end
            default: begin                               // INT8: |code|, -128 -> 128
                r.sig = c[7] ? 8'(-c) : c;
            end
        endcase
        return r;
    endfunction

    // The exact product of two decoded elements, in units of 2**u.
    function automatic lane_t product(input elem_t x, input elem_t y);
        lane_t r;
        logic [15:0] sig;
        logic [63:0] mag;                // E5M2: at most 49 * 2**58
        logic special;
        sig = {8'd0, x.sig} * {8'd0, y.sig};
        mag = 64'(sig) << ({1'b0, x.exp} + {1'b0, y.exp});
        special = x.inf || x.nan || y.inf || y.nan;
        r.nan = x.nan || y.nan || (x.inf && y.sig == 8'd0) || (y.inf && x.sig == 8'd0);
        r.pinf = !r.nan && (x.inf || y.inf) && !(x.sign ^ y.sign);
        r.ninf = !r.nan && (x.inf || y.inf) && (x.sign ^ y.sign);
        if (special) r.val = '0;
        else if (x.sign ^ y.sign) r.val = -$signed({{(SUMW - 64){1'b0}}, mag});
        else r.val = $signed({{(SUMW - 64){1'b0}}, mag});
        return r;
    endfunction

    function automatic lane_t lane(input logic [1:0] f, input logic [7:0] ca,
                                   input logic [7:0] cb);
        /* verilator no_inline_task */
        lane_t lo, hi, r;
        if (f == FMT_E2M1) begin
            lo = product(decode(f, {4'd0, ca[3:0]}), decode(f, {4'd0, cb[3:0]}));
            hi = product(decode(f, {4'd0, ca[7:4]}), decode(f, {4'd0, cb[7:4]}));
            r.val  = lo.val + hi.val;
            r.nan  = lo.nan | hi.nan;                    // (E2M1 has no specials)
            r.pinf = lo.pinf | hi.pinf;
            r.ninf = lo.ninf | hi.ninf;
        end else begin
            r = product(decode(f, ca), decode(f, cb));
        end
        return r;
    endfunction

    logic signed [SUMW-1:0] s1_sum;      // S
    logic [1:0]             s1_fmt;
    logic [8:0]             s1_sexp;     // sa + sb
    logic [31:0]            s1_acc;
    logic                   s1_acc_fmt;
    logic [2:0]             s1_rm;
    logic                   s1_nan, s1_nv, s1_inf, s1_inf_neg;

    logic signed [SUMW-1:0] s1_sum_next;
    logic                   s1_nan_next, s1_nv_next, s1_inf_next;
    logic                   s1_lane_nan, s1_pinf, s1_ninf;
    logic [31:0]            s1_c;        // C as FP32 bits (a BF16 C is its upper half)
    logic                   s1_c_nan, s1_c_snan, s1_scale_nan;
    always_comb begin
        lane_t l;
        s1_sum_next = '0;
        s1_lane_nan = 1'b0;
        s1_pinf = 1'b0;
        s1_ninf = 1'b0;
        for (int i = 0; i < LANES; i++) begin
            l = lane(fmt, op_a[8*i +: 8], op_b[8*i +: 8]);
            s1_sum_next = s1_sum_next + l.val;
            s1_lane_nan = s1_lane_nan | l.nan;
            s1_pinf = s1_pinf | l.pinf;
            s1_ninf = s1_ninf | l.ninf;
        end
        s1_c = acc_fmt ? {acc_in[15:0], 16'd0} : acc_in;
        s1_c_nan  = s1_c[30:23] == 8'hff && s1_c[22:0] != 23'd0;
        s1_c_snan = s1_c_nan && !s1_c[22];
        // C's Inf joins the products' (a NaN C is no Inf)
        if (s1_c[30:0] == 31'h7f80_0000) begin
            if (s1_c[31]) s1_ninf = 1'b1;
            else s1_pinf = 1'b1;
        end
        s1_scale_nan = scale_a == 8'hff || scale_b == 8'hff;
        s1_nv_next  = s1_lane_nan || s1_scale_nan || s1_c_snan || (s1_pinf && s1_ninf);
        s1_nan_next = s1_nv_next || s1_c_nan;
        s1_inf_next = s1_pinf || s1_ninf;
    end

    always_ff @(posedge clk) begin
        if (go1) begin
            s1_sum     <= s1_sum_next;
            s1_fmt     <= fmt;
            s1_sexp    <= {1'b0, scale_a} + {1'b0, scale_b};
            s1_acc     <= acc_in;
            s1_acc_fmt <= acc_fmt;
            s1_rm      <= rm;
            s1_nan     <= s1_nan_next;
            s1_nv      <= s1_nv_next;
            s1_inf     <= s1_inf_next;
            s1_inf_neg <= s1_ninf;
        end
    end

    // -------------------------------------------------------------------------------------
    // S2: S normalised, C decoded, the larger on top, the other aligned with its jam bit, the
    // signed sum in the window; its LSB has exponent x_exp - (WW - 1).

    // Index of the most significant one of x (0 when x is 0).
    function automatic logic [DW-1:0] msb_index(input logic [WR-1:0] x);
        logic [DW-1:0] idx;
        idx = '0;
        for (int i = 0; i < WR; i++) if (x[i]) idx = DW'(i);
        return idx;
    endfunction

    logic [WR-1:0]        s2_mag;
    logic                 s2_neg;
    logic signed [EW-1:0] s2_lsb_exp;
    logic                 s2_s_zero;
    logic [31:0]          s2_pass;       // D when S = 0: C's code as given
    logic                 s2_acc_fmt;
    logic [2:0]           s2_rm;
    logic                 s2_nan, s2_nv, s2_inf, s2_inf_neg;

    logic                 s2_s_neg, s2_s_zero_next, s2_c_zero, s2_c_top;
    logic [SM-1:0]        s2_s_mag, s2_s_norm, s2_c_norm, s2_x, s2_y;
    logic [DW-1:0]        s2_lead;
    logic signed [EW-1:0] s2_u, s2_s_exp, s2_c_exp, s2_x_exp, s2_gap;
    logic                 s2_x_neg, s2_y_neg;
    logic [DW-1:0]        s2_dist;
    logic [31:0]          s2_c;
    logic signed [WR:0]   s2_sum;
    always_comb begin
        logic [WW-1:0] x_win, y_win, y_shift;
        logic          jam;
        logic signed [WR:0] x_term, y_term;
        s2_s_neg  = s1_sum[SUMW-1];
        s2_s_mag  = SM'(s2_s_neg ? -s1_sum : s1_sum);   // |S| < 2**69
        s2_s_zero_next = s2_s_mag == '0;
        s2_lead   = msb_index(WR'(s2_s_mag));
        s2_s_norm = s2_s_mag << (DW'(SM - 1) - s2_lead);
        case (s1_fmt)
            FMT_E4M3: s2_u = -EW'(18);
            FMT_E5M2: s2_u = -EW'(32);
            FMT_E2M1: s2_u = -EW'(2);
            default:  s2_u = -EW'(12);
        endcase
        // S's leading one is 2**(lead + u + sa + sb - 254)
        s2_s_exp = EW'(s2_lead) + s2_u + EW'(s1_sexp) - EW'(254);
        s2_c      = s1_acc_fmt ? {s1_acc[15:0], 16'd0} : s1_acc;
        s2_c_zero = s2_c[30:0] == 31'd0;
        s2_c_norm = {s2_c[30:23] != 8'd0, s2_c[22:0], {(SM - 24){1'b0}}};
        s2_c_exp  = EW'(s2_c[30:23] == 8'd0 ? 8'd1 : s2_c[30:23]) - EW'(127);
        s2_c_top  = !s2_c_zero && (s2_s_zero_next || s2_c_exp >= s2_s_exp);
        s2_x      = s2_c_top ? s2_c_norm : s2_s_norm;
        s2_x_neg  = s2_c_top ? s2_c[31] : s2_s_neg;
        s2_x_exp  = s2_c_top ? s2_c_exp : s2_s_exp;
        s2_y      = s2_c_top ? s2_s_norm : s2_c_norm;
        s2_y_neg  = s2_c_top ? s2_s_neg : s2_c[31];
        // a zero Y may sit anywhere: its gap (perhaps negative) is then irrelevant
        s2_gap    = s2_c_top ? s2_c_exp - s2_s_exp : s2_s_exp - s2_c_exp;
        if (s2_gap < 0) s2_dist = '0;
        else if (s2_gap > EW'(WW)) s2_dist = DW'(WW);
        else s2_dist = DW'(s2_gap);
        x_win   = {s2_x, {G{1'b0}}};
        y_win   = {s2_y, {G{1'b0}}};
        y_shift = y_win >> s2_dist;
        jam     = (y_shift << s2_dist) != y_win;       // dist = WW: every bit fell out
        y_shift = y_shift | {{(WW - 1){1'b0}}, jam};
        x_term  = $signed({2'b00, x_win});
        y_term  = $signed({2'b00, y_shift});
        s2_sum  = (s2_x_neg ? -x_term : x_term) + (s2_y_neg ? -y_term : y_term);
    end

    always_ff @(posedge clk) begin
        if (go2) begin
            s2_neg     <= s2_sum[WR];
            s2_mag     <= WR'(s2_sum[WR] ? -s2_sum : s2_sum);
            s2_lsb_exp <= s2_x_exp - EW'(WW - 1);
            s2_s_zero  <= s2_s_zero_next;
            s2_pass    <= s1_acc_fmt ? {16'd0, s1_acc[15:0]} : s1_acc;
            s2_acc_fmt <= s1_acc_fmt;
            s2_rm      <= s1_rm;
            s2_nan     <= s1_nan;
            s2_nv      <= s1_nv;
            s2_inf     <= s1_inf;
            s2_inf_neg <= s1_inf_neg;
        end
    end

    // -------------------------------------------------------------------------------------
    // S3: round mag * 2**lsb_exp to FP32 / BF16 in rm, once.

    // The round-up (magnitude increment) decision of rm for a result of sign neg.
    function automatic logic round_up(input logic [2:0] mode, input logic neg, input logic lsb,
                                      input logic rnd, input logic sticky);
        case (mode)
            RM_RTZ: return 1'b0;
`ifdef MX_FPU_BUG
            RM_RDN: return neg && rnd;                   // the bug: sticky forgotten
`else
            RM_RDN: return neg && (rnd || sticky);
`endif
            RM_RUP: return !neg && (rnd || sticky);
            RM_RMM: return rnd;
            default: return rnd && (sticky || lsb);      // RNE, and 5..7
        endcase
    endfunction

    // wide >> sh: the kept bits [24:1] and the round bit [0]; the sticky bit: any one below.
    typedef struct packed {
        logic [23:0] mant;
        logic        rnd;
        logic        sticky;
    } cut_t;

    function automatic cut_t cut(input logic [RW-1:0] wide, input logic [DW-1:0] sh);
        cut_t r;
        logic [RW-1:0] kept;
        kept     = wide >> sh;
        r.mant   = kept[24:1];
        r.rnd    = kept[0];
        r.sticky = (kept << sh) != wide;
        return r;
    endfunction

    logic [31:0] s3_result;
    logic [4:0]  s3_flags;

    logic [DW-1:0]        s3_lead;
    logic signed [EW-1:0] s3_lead_exp, s3_biased, s3_dist_s;
    logic [DW-1:0]        s3_dist_n, s3_dist_b;
    logic [RW-1:0]        s3_wide;
    cut_t                 s3_b, s3_n;    // bounded (the result) and unbounded (tininess)
    logic                 s3_normal, s3_up, s3_up_n, s3_carry_n, s3_tiny, s3_inexact, s3_ovf;
    logic                 s3_ovf_inf;
    logic [30:0]          s3_code;       // the rounded magnitude's code (BF16: [14:0])
    logic [31:0]          s3_d;
    logic [4:0]           s3_f;
    always_comb begin
        logic [4:0] frac_bits;           // 23 FP32, 7 BF16
        s3_lead     = msb_index(s2_mag);
        s3_lead_exp = s2_lsb_exp + EW'(s3_lead);
        s3_biased   = s3_lead_exp + EW'(127);
        s3_normal   = s3_lead_exp >= -EW'(126);
        frac_bits   = s2_acc_fmt ? 5'd7 : 5'd23;
        // shift that brings the kept LSB to bit 1 of the widened sum (round bit at bit 0):
        // kept LSB 2**(lead_exp - frac_bits), or 2**(-126 - frac_bits) below 2**-126
        s3_dist_n   = s3_lead + DW'(23) - DW'(frac_bits);   // at most 72 + 16
        s3_dist_s   = -EW'(103) - EW'(frac_bits) - s2_lsb_exp;
        if (s3_normal) s3_dist_b = s3_dist_n;
        else if (s3_dist_s > EW'(RW)) s3_dist_b = DW'(RW);
        else s3_dist_b = DW'(s3_dist_s);
        s3_wide     = {s2_mag, 24'd0};
        s3_b        = cut(s3_wide, s3_dist_b);
        s3_n        = cut(s3_wide, s3_dist_n);
        s3_up       = round_up(s2_rm, s2_neg, s3_b.mant[0], s3_b.rnd, s3_b.sticky);
        s3_up_n     = round_up(s2_rm, s2_neg, s3_n.mant[0], s3_n.rnd, s3_n.sticky);
        // tiny after rounding: below 2**-126 unless the unbounded rounding carries up to it
        s3_carry_n  = s3_up_n && (s2_acc_fmt ? s3_n.mant == 24'h0000ff
                                             : s3_n.mant == 24'hffffff);
        s3_tiny     = !s3_normal && !(s3_lead_exp == -EW'(127) && s3_carry_n);
        s3_inexact  = s3_b.rnd || s3_b.sticky;
        // A normal result's hidden bit adds the 1 that biased - 1 lacks; a subnormal's
        // round-up may carry into the smallest normal, and a normal's into the next binade:
        // the same sum.
        if (s2_acc_fmt) begin
            s3_code = {16'd0, (s3_normal ? {8'(s3_biased - EW'(1)), 7'd0} : 15'd0)
                              + {7'd0, s3_b.mant[7:0]} + {14'd0, s3_up}};
            s3_ovf  = s3_normal && (s3_biased > EW'(254) || s3_code[14:0] >= 15'h7f80);
        end else begin
            s3_code = (s3_normal ? {8'(s3_biased - EW'(1)), 23'd0} : 31'd0)
                      + {7'd0, s3_b.mant} + {30'd0, s3_up};
            s3_ovf  = s3_normal && (s3_biased > EW'(254) || s3_code >= 31'h7f80_0000);
        end
        case (s2_rm)
            RM_RTZ:  s3_ovf_inf = 1'b0;
            RM_RDN:  s3_ovf_inf = s2_neg;
            RM_RUP:  s3_ovf_inf = !s2_neg;
            default: s3_ovf_inf = 1'b1;                  // RNE, RMM, 5..7
        endcase
        if (s3_ovf) s3_code = s3_ovf_inf ? (s2_acc_fmt ? 31'h7f80 : 31'h7f80_0000)
                                         : (s2_acc_fmt ? 31'h7f7f : 31'h7f7f_ffff);

        s3_f = '0;
        if (s2_nan) begin
            s3_d = s2_acc_fmt ? 32'h0000_7fc0 : 32'h7fc0_0000;
            s3_f[4] = s2_nv;
        end else if (s2_inf) begin
            s3_d = s2_acc_fmt ? {16'd0, s2_inf_neg, 15'h7f80} : {s2_inf_neg, 31'h7f80_0000};
        end else if (s2_s_zero) begin
            s3_d = s2_pass;
        end else if (s2_mag == '0) begin                 // C + P = 0 exactly
            s3_d = s2_acc_fmt ? {16'd0, s2_rm == RM_RDN, 15'd0} : {s2_rm == RM_RDN, 31'd0};
        end else begin
            s3_d = s2_acc_fmt ? {16'd0, s2_neg, s3_code[14:0]} : {s2_neg, s3_code};
            s3_f[2] = s3_ovf;
            s3_f[1] = s3_tiny && s3_inexact;
            s3_f[0] = s3_inexact || s3_ovf;
        end
    end

    always_ff @(posedge clk) begin
        if (go3) begin
            s3_result <= s3_d;
            s3_flags  <= s3_f;
        end
    end
    assign result = s3_result;
    assign flags  = s3_flags;

endmodule
