// mxfp8_coproc: a pipelined MXFP8 dot-product-accumulate unit in the style of a RISC-V
// coprocessor instruction  rd = dot(rs1, rs2) * 2**(sa + sb - 254) + C.
//
//   rs1, rs2   K E4M3 codes each, lane i in bits [8i+7:8i]
//   rs3        [31:0] C (FP32), [39:32] A's E8M0 scale sa, [47:40] B's E8M0 scale sb,
//              [63:48] ignored
//   rd         the FP32 result
//
// Numerics: the K products are exact, their sum is an exact fixed-point integer, the scales
// shift it exactly and C is added exactly; the one rounding is to FP32, nearest-even, with
// gradual underflow. There are no NaNs or infinities: every E4M3 code is the number its bits
// spell (S.1111.111 is +-480), an E8M0 scale of 0xFF is 2**128, a C with exponent field 255
// is 2**128 * 1.m, and a result beyond FLT_MAX saturates to +-FLT_MAX. A zero result is +0.
//
// The exact sum without a far/near split: the product sum S is normalised and C's 24-bit
// significand is placed as it is (a subnormal C keeps its leading zeros); the one with the
// larger exponent sits at the top of a window of SW + G bits and the other is shifted right
// into it, the bits that fall out OR-ed into its LSB (a jam bit). Bits only fall out when the
// shift is at least G + 1 = 3, and then the result keeps its leading one within one place of
// the top, so the window holds its 24 bits, the round bit and more; the jam bit lies below all
// of them and only stands for "something non-zero down there", which is all nearest-even
// needs.
//
// Pipeline (a valid/ready stream; each stage holds one instruction and moves on when the next
// stage is free, so a stalled output stops only the stages behind a full one):
//   S1  decode the lanes, K 4x4-bit significand products, exponent sums, scale sum
//   S2  shift each product to its place, sum the K of them signed (the exact S)
//   S3  normalise S, decode C, pick the larger of the two, the alignment distance
//   S4  align the smaller with its jam bit, add: the exact sum in the window
//   S5  normalise, round to nearest-even, saturate, pack rd
// An instruction accepted at a rising edge is on out_valid/rd five edges later when nothing
// stalls: latency 5, one instruction per cycle.
//
// `define INJECT_BUG to build the deliberately broken variant: the final rounding forgets its
// sticky bit (every value just above a tie rounds as the tie would).

module mxfp8_coproc #(
    parameter int K = 8                  // products per instruction (a power of two >= 2)
) (
    input  logic             clk,
    input  logic             rst_n,      // synchronous, active low
    input  logic             in_valid,
    output logic             in_ready,
    input  logic [8*K-1:0]   rs1,
    input  logic [8*K-1:0]   rs2,
    input  logic [63:0]      rs3,
    output logic             out_valid,
    input  logic             out_ready,
    output logic [31:0]      rd
);
    // Widths. An E4M3 code is sig * 2**(e - 9) with sig in [0, 15] and e in [0, 14]; a product
    // sig_a*sig_b * 2**(e_a + e_b) is at most 225 * 2**28: PW bits, in units of 2**-18.
    localparam int PW = 36;
    localparam int SW = PW + $clog2(K);  // |S| < K * 2**36 <= 2**SW
    localparam int G  = 2;               // guard bits below the window's operands
    localparam int WW = SW + G;          // the alignment window, jam bit included
    localparam int WR = WW + 1;          // the sum's magnitude (one carry bit)
    localparam int EW = 12;              // signed exponents: all lie within [-320, 410]
    localparam int TW = 9;               // the final shift distance, in [0, 191]

    // -------------------------------------------------------------------------------------
    // Handshake: stage i takes a new instruction when it is empty or its own moves on.
    logic v1, v2, v3, v4, v5;
    logic go1, go2, go3, go4, go5;
    assign go5 = !v5 || out_ready;
    assign go4 = !v4 || go5;
    assign go3 = !v3 || go4;
    assign go2 = !v2 || go3;
    assign go1 = !v1 || go2;
    assign in_ready  = go1;
    assign out_valid = v5;

    always_ff @(posedge clk) begin
        if (!rst_n) begin
            {v1, v2, v3, v4, v5} <= '0;
        end else begin
            if (go1) v1 <= in_valid;
            if (go2) v2 <= v1;
            if (go3) v3 <= v2;
            if (go4) v4 <= v3;
            if (go5) v5 <= v4;
        end
    end

    // Index of the most significant one of x (0 when x is 0), as a signed exponent offset.
    function automatic logic signed [EW-1:0] msb_index(input logic [WR-1:0] x);
        logic signed [EW-1:0] idx;
        idx = '0;
        for (int i = 0; i < WR; i++) if (x[i]) idx = EW'(i);
        msb_index = idx;
    endfunction

    // -------------------------------------------------------------------------------------
    // S1: lanes to significands and exponents, K exact significand products.
    logic [K-1:0][7:0] s1_prod;          // sig_a * sig_b
    logic [K-1:0][4:0] s1_pexp;          // e_a + e_b
    logic [K-1:0]      s1_psgn;
    logic [8:0]        s1_sexp;          // sa + sb
    logic [31:0]       s1_c;

    logic [K-1:0][7:0] s1_prod_next;
    logic [K-1:0][4:0] s1_pexp_next;
    logic [K-1:0]      s1_psgn_next;
    always_comb begin
        for (int i = 0; i < K; i++) begin
            logic [7:0] a, b;
            logic [3:0] sig_a, sig_b;
            logic [4:0] e_a, e_b;
            a = rs1[8*i +: 8];
            b = rs2[8*i +: 8];
            sig_a = {a[6:3] != 4'd0, a[2:0]};
            sig_b = {b[6:3] != 4'd0, b[2:0]};
            e_a = (a[6:3] == 4'd0) ? 5'd0 : {1'b0, a[6:3]} - 5'd1;
            e_b = (b[6:3] == 4'd0) ? 5'd0 : {1'b0, b[6:3]} - 5'd1;
            s1_prod_next[i] = {4'd0, sig_a} * {4'd0, sig_b};
            s1_pexp_next[i] = e_a + e_b;
            s1_psgn_next[i] = a[7] ^ b[7];
        end
    end

    always_ff @(posedge clk) begin
        if (go1) begin
            s1_prod <= s1_prod_next;
            s1_pexp <= s1_pexp_next;
            s1_psgn <= s1_psgn_next;
            s1_sexp <= {1'b0, rs3[39:32]} + {1'b0, rs3[47:40]};
            s1_c    <= rs3[31:0];
        end
    end

    // -------------------------------------------------------------------------------------
    // S2: S = sum of +-(prod << pexp), exact, in units of 2**-18 (two's complement).
    logic signed [SW:0] s2_sum;
    logic [8:0]         s2_sexp;
    logic [31:0]        s2_c;

    logic signed [SW:0] s2_next;
    always_comb begin
        s2_next = '0;
        for (int i = 0; i < K; i++) begin
            logic [PW-1:0] placed;
            logic signed [SW:0] term;
            placed = PW'(s1_prod[i]) << s1_pexp[i];
            term = $signed({{(SW + 1 - PW){1'b0}}, placed});
            s2_next = s1_psgn[i] ? s2_next - term : s2_next + term;
        end
    end

    always_ff @(posedge clk) begin
        if (go2) begin
            s2_sum  <= s2_next;
            s2_sexp <= s1_sexp;
            s2_c    <= s1_c;
        end
    end

    // -------------------------------------------------------------------------------------
    // S3: S as sign, SW-bit normalised significand and exponent (of its leading one); C as
    // sign, 24-bit significand placed at the top of SW bits and exponent (of bit 23, 2**-126
    // for a subnormal C). The larger becomes the window's top operand X, the other Y.
    logic [SW-1:0]        s3_x, s3_y;
    logic                 s3_x_neg, s3_y_neg;
    logic signed [EW-1:0] s3_x_exp;      // exponent of s3_x's top bit
    logic [TW-1:0]        s3_dist;       // Y's shift right below X, capped at WW

    logic                 s3_s_neg, s3_s_zero, s3_c_zero, s3_c_on_top;
    logic [SW-1:0]        s3_s_mag, s3_s_norm, s3_c_norm;
    logic signed [EW-1:0] s3_s_exp, s3_c_exp, s3_gap;
    logic [7:0]           s3_c_field;
    always_comb begin
        logic [WR-1:0] wide;
        logic signed [EW-1:0] lead;
        s3_s_neg  = s2_sum[SW];
        s3_s_mag  = SW'(s3_s_neg ? -s2_sum : s2_sum);
        s3_s_zero = s3_s_mag == '0;
        wide      = WR'(s3_s_mag);
        lead      = msb_index(wide);
        s3_s_norm = s3_s_mag << (EW'(SW - 1) - lead);
        // value = mag * 2**(sa + sb - 254 - 18): the leading one is 2**(lead + sexp - 272)
        s3_s_exp  = lead + $signed({{(EW - 9){1'b0}}, s2_sexp}) - EW'(272);
        s3_c_field = s2_c[30:23];
        s3_c_zero = s2_c[30:0] == 31'd0;
        s3_c_norm = {s3_c_field != 8'd0, s2_c[22:0], {(SW - 24){1'b0}}};
        s3_c_exp  = $signed({{(EW - 8){1'b0}}, (s3_c_field == 8'd0) ? 8'd1 : s3_c_field})
                    - EW'(127);
        s3_c_on_top = !s3_c_zero && (s3_s_zero || s3_c_exp >= s3_s_exp);
        s3_gap = s3_c_on_top ? s3_c_exp - s3_s_exp : s3_s_exp - s3_c_exp;
    end

    always_ff @(posedge clk) begin
        if (go3) begin
            s3_x     <= s3_c_on_top ? s3_c_norm : s3_s_norm;
            s3_x_neg <= s3_c_on_top ? s2_c[31] : s3_s_neg;
            s3_x_exp <= s3_c_on_top ? s3_c_exp : s3_s_exp;
            s3_y     <= s3_c_on_top ? s3_s_norm : s3_c_norm;
            s3_y_neg <= s3_c_on_top ? s3_s_neg : s2_c[31];
            // A zero Y may sit anywhere: its gap (perhaps negative) is then irrelevant.
            if (s3_gap < 0)
                s3_dist <= '0;
            else if (s3_gap > EW'(WW))
                s3_dist <= TW'(WW);
            else
                s3_dist <= TW'(s3_gap);
        end
    end

    // -------------------------------------------------------------------------------------
    // S4: Y shifted right by dist with the bits that fall out jammed into its LSB; the signed
    // sum of X and Y in the window, whose LSB has exponent x_exp - (WW - 1).
    logic [WR-1:0]        s4_mag;
    logic                 s4_neg;
    logic signed [EW-1:0] s4_lsb_exp;

    logic signed [WR:0]   s4_sum;
    always_comb begin
        logic [WW-1:0] x_win, y_win, y_shift;
        logic          jam;
        logic signed [WR:0] x_term, y_term;
        x_win   = {s3_x, {G{1'b0}}};
        y_win   = {s3_y, {G{1'b0}}};
        y_shift = y_win >> s3_dist;
        jam     = (y_shift << s3_dist) != y_win;   // dist = WW: every bit fell out
        y_shift = y_shift | {{(WW - 1){1'b0}}, jam};
        x_term  = $signed({2'b00, x_win});
        y_term  = $signed({2'b00, y_shift});
        s4_sum  = (s3_x_neg ? -x_term : x_term) + (s3_y_neg ? -y_term : y_term);
    end

    always_ff @(posedge clk) begin
        if (go4) begin
            s4_neg     <= s4_sum[WR];
            s4_mag     <= WR'(s4_sum[WR] ? -s4_sum : s4_sum);
            s4_lsb_exp <= s3_x_exp - EW'(WW - 1);
        end
    end

    // -------------------------------------------------------------------------------------
    // S5: round mag * 2**lsb_exp to FP32, nearest-even, once. The kept LSB is 2**(lead - 23)
    // for a normal result and 2**-149 for a subnormal one; mag is first widened by 24 zero
    // bits so that the shift that brings the kept bits to [24:1] (round bit at [0]) is right.
    logic [31:0] s5_rd;

    logic [WR+23:0]       s5_wide, s5_kept;
    logic signed [EW-1:0] s5_lead_exp, s5_biased;
    logic [TW-1:0]        s5_dist;
    logic [23:0]          s5_mant;
    logic                 s5_zero, s5_normal, s5_round, s5_up, s5_sat;
`ifdef INJECT_BUG
    /* verilator lint_off UNUSEDSIGNAL */
    logic                 s5_sticky;         // read by nothing in the broken variant
    /* verilator lint_on UNUSEDSIGNAL */
`else
    logic                 s5_sticky;
`endif
    logic [31:0]          s5_code;
    logic [30:0]          s5_mag;
    always_comb begin
        logic signed [EW-1:0] lead;
        lead        = msb_index(s4_mag);
        s5_lead_exp = s4_lsb_exp + lead;
        s5_biased   = s5_lead_exp + EW'(127);
        s5_normal   = s5_biased >= EW'(1);
        // t = (exponent of the kept LSB) - lsb_exp + 23, never negative
        s5_dist     = TW'(s5_normal ? lead : EW'(-149 + 23) - s4_lsb_exp);
        s5_wide     = {s4_mag, 24'd0};
        s5_kept     = s5_wide >> s5_dist;
        s5_mant     = s5_kept[24:1];
        s5_round    = s5_kept[0];
        s5_sticky   = (s5_kept << s5_dist) != s5_wide;
`ifdef INJECT_BUG
        s5_up       = s5_round && s5_mant[0];      // the bug: the sticky bit is forgotten
`else
        s5_up       = s5_round && (s5_sticky || s5_mant[0]);
`endif
        // A normal result's hidden bit (mant[23]) adds the 1 that biased - 1 lacks; a
        // subnormal's round-up may carry into the smallest normal: the same sum.
        s5_code     = (s5_normal && s5_biased <= EW'(254))
                      ? {1'b0, 8'(s5_biased - EW'(1)), 23'd0} : 32'd0;
        s5_code     = s5_code + {8'd0, s5_mant} + {31'd0, s5_up};
        s5_sat      = s5_biased > EW'(254) || s5_code >= 32'h7f80_0000;
        s5_zero     = s4_mag == '0;
        s5_mag      = s5_zero ? 31'd0 : s5_sat ? 31'h7f7f_ffff : s5_code[30:0];
    end

    always_ff @(posedge clk) begin
        if (go5) s5_rd <= {s4_neg && s5_mag != 31'd0, s5_mag};
    end
    assign rd = s5_rd;

    // rs3[63:48] carries nothing this unit reads.
    logic unused_rs3;
    assign unused_rs3 = ^rs3[63:48];
endmodule
