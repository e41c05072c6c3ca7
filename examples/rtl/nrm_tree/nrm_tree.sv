// nrm_tree: a pipelined E4M3 block dot product of k = 32 elements with signed-exponent block
// scales, summed through a two-level tree of normalising, rounding adders.
//
// Written by hand as an example of mxsim's foreign-RTL path (see README.md).
//
// Inputs: a, b carry 32 E4M3 codes each (lane i in bits [8i+7:8i]); a_exp, b_exp carry four
// block exponents each (block j = lanes 8j..8j+7 in bits [6j+5:6j]), every one a 6-bit two's
// complement exponent e (the block scale is 2**e, e in -32..31).
//
// Numerics:
//   1. Elements: every E4M3 code is the finite number its bits spell: sig * 2**(e - 9) with
//      sig = {E != 0, m}, e = max(E, 1) - 1 (S.1111.111 is +-480, S.0000.mmm is m * 2**-9).
//      There is no NaN or Inf anywhere.
//   2. Block sums: the 8 products of block j are summed EXACTLY (a signed integer in units of
//      2**-18, |.| <= 8 * 225 * 2**28 < 2**39).
//   3. Block exponents: s_j = a_exp_j + b_exp_j in a 6-bit two's complement field (wrapping
//      modulo 64). The declared input domain keeps a_exp_j + b_exp_j within -32..31, where
//      nothing wraps. T_j = (block sum j) * 2**s_j, exact.
//   4. Level 1: U0 = round(T0 + T1), U1 = round(T2 + T3): each adder normalises the exact sum
//      of its two inputs and rounds it ONCE to 12 significant bits (hidden bit + 11 fraction
//      bits), to nearest with ties to even. Level 2: D = round(U0 + U1) to 15 significant bits,
//      to nearest even. No exponent limits apply (none can be reached, see below); no
//      subnormals, no saturation.
//   5. Every adder is exact up to a jam bit: both inputs are normalised (leading one at bit
//      38 of a 39-bit significand), the one with the larger exponent sits at the top of a
//      41-bit window and the other is shifted right by the exponent difference, the bits that
//      fall out OR-ed into its LSB. Bits fall out only when the shift is 3 or more; the sum's
//      leading one is then at window bit 39 or above and the round bit (15 bits lower at the
//      most) at bit 24 or above, so the jammed sum (an odd number of window units, within one
//      unit of the exact sum) rounds exactly as the exact sum does. When nothing falls out
//      the sum is exact, however much cancels.
//
// Exponent ranges (inputs in the domain, every s_j in -32..31): a non-zero T_j lies in
// [2**-50, 1800 * 2**41], U0 and U1 in [2**-50, 3600 * 2**41] and D in [2**-50, 7200 * 2**41]
// (every sum is a multiple of 2**-50 and no rounding leaves that grid), so
// floor(log2 |D|) is in -50..53. The internal signed exponents (EW = 10 bits, -512..511)
// hold every LSB exponent the adders form (-90..53) with a wide margin, and res_exp fits
// 8-bit two's complement (-128..127) with margin.
//
// Output encoding: value = res_mant * 2**(res_exp - 14), both two's complement.
//   non-zero D: |res_mant| in [2**14, 2**15) (normalised), res_exp = floor(log2 |D|);
//   zero D:     res_mant = 0, res_exp = 0 (the sign of zero is not represented).
//
// Pipeline (no back-pressure): an issue in cycle t (in_valid = 1 with the operands on the
// inputs, captured by the rising edge that ends cycle t) puts its result on res_mant / res_exp
// with out_valid = 1 in cycle t + 2 (two register stages: latency 2); out_valid = 0 in every
// other cycle. An issue is possible every cycle.
//   S1  decode, products, exact block sums, block exponents, the two level-1 adders
//   S2  the level-2 adder, output encoding
// rst (synchronous, active high) clears the valid bits only.
//
// `define NRM_TREE_BUG to build the deliberately broken variant: the block-exponent adder
// saturates to [-32, 30] instead of wrapping in 6 bits, an off-by-one clamp at the top (the
// intended [-32, 31] clamp would agree with the wrap on every in-domain input). Inside the
// domain only a block whose exponents sum to exactly 31 is affected (scaled by 2**30 instead
// of 2**31).
//
// `define NRM_TREE_NODE_BUG for another: the level-1 adder of blocks 2 and 3 (U1, the model's
// node L1.n1) clears the last of its 12 significant bits after rounding, so an odd U1 loses
// one ulp towards zero. The block terms and U0 stay right; examples/rtl/nrm_tree/
// nrm_tree_node_bug.toml probes them and U1 (docs/foreign-rtl.md, "Probes").

module nrm_tree (
    input  logic               clk,
    input  logic               rst,        // synchronous, active high
    input  logic               in_valid,   // issue
    output logic               out_valid,
    input  logic [255:0]       a,          // 32 E4M3 codes, lane i at [8i+7:8i]
    input  logic [255:0]       b,
    input  logic [23:0]        a_exp,      // 4 signed 6-bit block exponents, block j at [6j+5:6j]
    input  logic [23:0]        b_exp,
    output logic signed [15:0] res_mant,   // value = res_mant * 2**(res_exp - 14)
    output logic signed [7:0]  res_exp
);

    localparam int K      = 32;
    localparam int BLOCK  = 8;
    localparam int BLOCKS = K / BLOCK;
    localparam int W      = 39;            // magnitude bits of a block sum (< 2**39)
    localparam int G      = 2;             // guard bits below an adder's aligned operands
    localparam int WW     = W + G;         // the alignment window, jam bit included
    localparam int WR     = WW + 1;        // the sum's magnitude (one carry bit)
    localparam int EW     = 10;            // signed exponents (LSB exponents -90..53 in use)
    localparam int IW     = 6;             // bit indices 0..WR
    localparam int XW     = 6;             // a block exponent (two's complement)
    localparam int P1     = 12;            // level-1 significant bits
    localparam int P2     = 15;            // level-2 significant bits

    // A signed number (-1)**sign * mag * 2**lsb: a block term, or an adder's rounded result.
    typedef struct packed {
        logic                 sign;
        logic [W-1:0]         mag;
        logic signed [EW-1:0] lsb;
    } num_t;

    // The `verilator no_inline_task` pragmas keep the block sum and the adder one C++
    // function each (called 4 and 3 times): inlined, the model is larger and slower to build.
    // Other tools ignore the comment.

    // The exact sum of one block's 8 products, in units of 2**-18 (two's complement).
    function automatic logic signed [W:0] block_sum(input logic [8*BLOCK-1:0] x,
                                                    input logic [8*BLOCK-1:0] y);
        /* verilator no_inline_task */
        logic signed [W:0] s;
        logic [7:0] ca, cb;
        logic [7:0] sig;
        logic [4:0] sh;
        logic [W:0] mag;
        s = '0;
        for (int i = 0; i < BLOCK; i++) begin
            ca = x[8*i +: 8];
            cb = y[8*i +: 8];
            sig = {4'd0, ca[6:3] != 4'd0, ca[2:0]} * {4'd0, cb[6:3] != 4'd0, cb[2:0]};
            sh = (ca[6:3] == 4'd0 ? 5'd0 : {1'b0, ca[6:3]} - 5'd1)
               + (cb[6:3] == 4'd0 ? 5'd0 : {1'b0, cb[6:3]} - 5'd1);
            mag = (W + 1)'(sig) << sh;
            s = (ca[7] ^ cb[7]) ? s - $signed(mag) : s + $signed(mag);
        end
        return s;
    endfunction

    // Index of the most significant one of x (0 when x is 0).
    function automatic logic [IW-1:0] msb_index(input logic [WR-1:0] x);
        logic [IW-1:0] idx;
        idx = '0;
        for (int i = 0; i < WR; i++) if (x[i]) idx = IW'(i);
        return idx;
    endfunction

    // x with its magnitude's leading one at bit W-1 (the exponent lowered to match); 0 stays 0.
    function automatic num_t normalize(input num_t x);
        num_t r;
        logic [IW-1:0] lead;
        r = x;
        if (x.mag != '0) begin
            lead  = msb_index(WR'(x.mag));
            r.mag = x.mag << (IW'(W - 1) - lead);
            r.lsb = x.lsb - EW'(W - 1) + EW'(lead);
        end
        return r;
    endfunction

    // x + y, normalised and rounded once to prec significant bits, to nearest even (exponent
    // unbounded). A zero sum is returned as all zeros.
    function automatic num_t add_round(input num_t x_in, input num_t y_in,
                                       input logic [IW-1:0] prec);
        /* verilator no_inline_task */
        num_t x, y, r;
        logic [WW-1:0] x_win, y_win, y_sh;
        logic signed [WR:0] sum;
        logic [WR-1:0] mag, m;
        logic signed [EW-1:0] d, sh;
        logic [IW-1:0] p;
        logic round_bit, sticky;
        x = normalize(x_in);
        y = normalize(y_in);
        // x: the operand with the larger exponent; a zero operand never is
        if (x.mag == '0 || (y.mag != '0 && y.lsb > x.lsb)) begin
            r = x; x = y; y = r;
        end
        x_win = {x.mag, {G{1'b0}}};
        y_win = {y.mag, {G{1'b0}}};
        d = x.lsb - y.lsb;
        if (y.mag == '0) y_sh = '0;
        else if (d >= EW'(WW)) y_sh = WW'(1);                    // all of it falls out
        else begin
            y_sh = y_win >> d;
            y_sh = y_sh | WW'((y_sh << d) != y_win);              // the jam bit
        end
        sum = (x.sign ? -$signed({2'b00, x_win}) : $signed({2'b00, x_win}))
            + (y.sign ? -$signed({2'b00, y_sh}) : $signed({2'b00, y_sh}));
        r = '0;
        if (sum == '0) return r;
        r.sign = sum[WR];
        mag = WR'(r.sign ? -sum : sum);
        // sum = mag * 2**(x.lsb - G); keep prec bits below and at the leading one p
        p  = msb_index(mag);
        sh = EW'(p) - EW'(prec) + EW'(1);
        if (sh <= 0) begin                                       // few bits: exact
            m = mag << (-sh);
        end else begin
            m = mag >> sh;
            round_bit = mag[sh - 1];
            sticky = (mag & ((WR'(1) << (sh - 1)) - WR'(1))) != '0;
            if (round_bit && (sticky || m[0])) m = m + WR'(1);
            if (m[prec]) begin                                   // rounded up to 2**prec
                m = m >> 1;
                sh = sh + EW'(1);
            end
        end
        r.mag = W'(m);
        r.lsb = x.lsb - EW'(G) + sh;
        return r;
    endfunction

    // -------------------------------------------------------------------------------------
    // Valid pipeline: out_valid exactly two cycles after an issue.
    logic v1, v2;
    always_ff @(posedge clk) begin
        if (rst) begin
            v1 <= 1'b0;
            v2 <= 1'b0;
        end else begin
            v1 <= in_valid;
            v2 <= v1;
        end
    end
    assign out_valid = v2;

    // -------------------------------------------------------------------------------------
    // S1: block terms and the level-1 adders.
    logic signed [XW-1:0] s1_s    [BLOCKS];    // block exponent sums
    logic signed [W:0]    s1_bsum [BLOCKS];
    num_t                 s1_t    [BLOCKS];
    num_t                 s1_u0_next, s1_u1_next;
    num_t                 s1_u0, s1_u1;

    always_comb begin
        for (int j = 0; j < BLOCKS; j++) begin
`ifdef NRM_TREE_BUG
            // the bug: a saturating exponent adder whose upper limit is one short
            logic signed [XW:0] wide;
            wide = {a_exp[6*j + 5], a_exp[6*j +: 6]} + {b_exp[6*j + 5], b_exp[6*j +: 6]};
            if (wide > (XW + 1)'(30)) s1_s[j] = XW'(30);
            else if (wide < -(XW + 1)'(32)) s1_s[j] = -XW'(32);
            else s1_s[j] = XW'(wide);
`else
            s1_s[j] = $signed(a_exp[6*j +: 6]) + $signed(b_exp[6*j +: 6]);   // wraps in 6 bits
`endif
            s1_bsum[j] = block_sum(a[64*j +: 64], b[64*j +: 64]);
            // T_j = bsum * 2**(s_j - 18)
            s1_t[j].sign = s1_bsum[j][W];
            s1_t[j].mag  = W'(s1_bsum[j][W] ? -s1_bsum[j] : s1_bsum[j]);
            s1_t[j].lsb  = EW'(s1_s[j]) - EW'(18);
        end
        s1_u0_next = add_round(s1_t[0], s1_t[1], IW'(P1));
        s1_u1_next = add_round(s1_t[2], s1_t[3], IW'(P1));
`ifdef NRM_TREE_NODE_BUG
        // the second bug: level-1 node 1 keeps 11 of its 12 significant bits (drops its LSB)
        s1_u1_next.mag[0] = 1'b0;
`endif
    end

    always_ff @(posedge clk) begin
        s1_u0 <= s1_u0_next;
        s1_u1 <= s1_u1_next;
    end

    // -------------------------------------------------------------------------------------
    // S2: the level-2 adder and the output encoding.
    num_t               s2_d;
    logic signed [15:0] s2_mant;
    logic signed [7:0]  s2_exp;
    always_comb begin
        s2_d = add_round(s1_u0, s1_u1, IW'(P2));
        if (s2_d.mag == '0) begin
            s2_mant = '0;
            s2_exp  = '0;
        end else begin
            s2_mant = s2_d.sign ? -16'(s2_d.mag) : 16'(s2_d.mag);
            s2_exp  = 8'(s2_d.lsb + EW'(P2 - 1));
        end
    end

    always_ff @(posedge clk) begin
        res_mant <= s2_mant;
        res_exp  <= s2_exp;
    end

endmodule
