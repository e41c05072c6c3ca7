// block_dot: a combinational MXINT8 / MXFP8 (E4M3) block dot product of K = 128 elements.
//
// Written by hand as example 2 of mxsim's foreign-RTL path (see README.md). No clock: the
// inputs are set, the logic settles, the outputs are read. K and BLOCK are parameters (defaults
// 128 and 32: the documented design); `mxsim prove --rtl --param K=8 --param BLOCK=2` proves a
// smaller instance of the same arithmetic. K / BLOCK must be a power of two.
//
// Numerics (what mxsim's unit spec block_dot_spec_*.toml describes):
//   1. each block of BLOCK products a[i] * b[i] is summed EXACTLY (a signed fixed-point integer
//      in units of 2**-18: an E4M3 element is sig * 2**(shift - 9), an MXINT8 element code / 64);
//   2. the block sum is multiplied by its two E8M0 scales, 2**(a_scale + b_scale - 254): only
//      its exponent changes, so the block terms t0, t1, ... stay exact;
//   3. the terms are added pairwise in a balanced tree, (t0 + t1) + (t2 + t3) for four blocks;
//      every adder normalises the exact sum of its two inputs and rounds it ONCE to e8m14
//      (sign, hidden bit and 14 fraction bits; FP32's exponent range with gradual underflow
//      below 2**-126, so the smallest step is 2**-140), to nearest with ties to even; a sum
//      beyond e8m14's largest value (2 - 2**-14) * 2**127 saturates to +-that value. A single
//      block (K = BLOCK) is rounded once, as t0 + 0.
//   4. NaN: an E4M3 NaN code (S.1111.111, fmt = 1 only) in a or b, or a scale 0xFF (E8M0 NaN)
//      sets out_nan; out_mant and out_scale are then 0. MXINT8 has no NaN codes.
//
// Output encoding: value = out_mant * 2**(out_scale - 141), out_mant two's complement.
//   normal e8m14 value (1.f * 2**e, e in -126..127): |out_mant| in [2**14, 2**15),
//                                                   out_scale = e + 127 (1..254);
//   subnormal (|value| < 2**-126):                   |out_mant| < 2**14, out_scale = 1;
//   zero (and NaN):                                  out_mant = 0, out_scale = 0.
//
// `define INJECT_BUG: the (t2 + t3) adder (the root adder when there are only two blocks)
// truncates its sum (rounds toward zero) instead of rounding to nearest even: the deliberate
// bug that `mxsim verify --rtl` must catch.

module block_dot #(
    parameter int K     = 128,                 // elements of the dot
    parameter int BLOCK = 32                   // elements per E8M0 scale (and exact block sum)
) (
    input  logic        [7:0]  a       [K],          // element codes, lane i = index i
    input  logic        [7:0]  b       [K],
    input  logic        [7:0]  a_scale [K / BLOCK],  // E8M0, one per block of BLOCK lanes
    input  logic        [7:0]  b_scale [K / BLOCK],
    input  logic               fmt,                  // 0: MXINT8, 1: MXFP8 E4M3
    output logic signed [15:0] out_mant,
    output logic        [7:0]  out_scale,
    output logic               out_nan
);

    localparam int BLOCKS = K / BLOCK;
    // |product| < 448 * 448 * 2**18 < 2**36 (E4M3), so |block sum| < BLOCK * 2**36 (MXINT8:
    // BLOCK * 2**14 * 2**6); 41 bits for BLOCK = 32.
    localparam int W      = 36 + $clog2(BLOCK);  // magnitude bits of a block sum
    localparam int G      = 3;           // guard bits below an adder's aligned operands
    localparam int F      = W + G + 1;   // adder field: carry bit, W bits, G bits
    localparam int EW     = 12;          // signed exponent width inside the tree
    localparam int MANT   = 15;          // e8m14 significand: hidden bit + 14 fraction bits
    localparam int E_MIN  = -126;        // e8m14's smallest normal exponent (as FP32's)
    localparam int Q_MAX  = 113;         // LSB exponent of e8m14's largest binade (2**127)
    localparam int OFFSET = 141;         // value = out_mant * 2**(out_scale - OFFSET)
    // The adder that truncates under INJECT_BUG: t2 + t3 (node BLOCKS/2 + 1 of the tree below),
    // or the root when there are two blocks.
    localparam int BUG_NODE = BLOCKS >= 4 ? BLOCKS / 2 + 1 : 1;

    // A signed number (-1)**sign * mag * 2**lsb: a block term, or an adder's e8m14 result.
    typedef struct packed {
        logic                 sign;
        logic [W-1:0]         mag;
        logic signed [EW-1:0] lsb;
    } num_t;

    // The `verilator no_inline_task` pragmas keep product, normalize and add_round one C++
    // function each: inlined 128 and 3 times over, they made a 2 MB model that took twice as
    // long to build. Other tools ignore the comment.

    // One element as a signed significand and a shift: value = sig * 2**(shift - 9).
    // E4M3: normal (8 + m) * 2**(e - 10), subnormal m * 2**-9; MXINT8: code * 2**3 * 2**-9.
    function automatic logic signed [8:0] elem_sig(input logic is_fp8, input logic [7:0] code);
        logic [8:0] mag;
        if (!is_fp8) return {code[7], code};
        mag = {5'b0, code[6:3] != 4'd0, code[2:0]};
        return code[7] ? -mag : mag;
    endfunction

    function automatic logic [3:0] elem_shift(input logic is_fp8, input logic [3:0] exp);
        if (!is_fp8) return 4'd3;
        return exp == 4'd0 ? 4'd0 : exp - 4'd1;
    endfunction

    // The exact product of two elements in units of 2**-18 (|.| < 2**36).
    function automatic logic signed [47:0] product(input logic is_fp8, input logic [7:0] x,
                                                   input logic [7:0] y);
        /* verilator no_inline_task */
        logic signed [17:0] sig;
        logic [4:0] shift;
        sig = elem_sig(is_fp8, x) * elem_sig(is_fp8, y);
        shift = {1'b0, elem_shift(is_fp8, x[6:3])} + {1'b0, elem_shift(is_fp8, y[6:3])};
        return 48'(sig) <<< shift;
    endfunction

    // x with its magnitude's leading one at bit W-1 (the exponent lowered to match); 0 stays 0.
    function automatic num_t normalize(input num_t x);
        /* verilator no_inline_task */
        num_t r;
        int lz;
        lz = W;
        for (int i = 0; i < W; i++) if (x.mag[i]) lz = W - 1 - i;
        r = x;
        if (lz < W) begin
            r.mag = x.mag << lz;
            r.lsb = x.lsb - EW'(lz);
        end
        return r;
    endfunction

    // x + y rounded once to e8m14 (to nearest even, or toward zero when truncate), saturating
    // at +-(2**15 - 1) * 2**113. Exact: the smaller operand is aligned with its shifted-out bits
    // ORed into a sticky LSB. That changes no rounding: only shifts beyond G lose bits, and as
    // both operands are normalised, after a shift of 2 or more the sum's leading one is at field
    // bit W + 1 or above, its round bit at W - 14 or above (W >= 36), so every rounding boundary
    // is a multiple of 2**(W - 14), while the jammed sum is odd and within one unit of the
    // exact one.
    function automatic num_t add_round(input num_t x_in, input num_t y_in, input logic truncate);
        /* verilator no_inline_task */
        num_t x, y, r;
        logic [F-1:0] fa, fb, s, lost;
        logic signed [EW:0] d, e, q, sh;
        logic [MANT:0] m;
        logic round_bit, sticky;
        int p;
        x = normalize(x_in);
        y = normalize(y_in);
        // x: the operand with the larger exponent; a zero operand never is.
        if (x.mag == '0 || (y.mag != '0 && y.lsb > x.lsb)) begin
            r = x; x = y; y = r;
        end
        fa = {1'b0, x.mag, G'(0)};
        fb = {1'b0, y.mag, G'(0)};
        d = (EW + 1)'(x.lsb) - (EW + 1)'(y.lsb);
        if (y.mag == '0) fb = '0;
        else if (d >= (EW + 1)'(F)) fb = F'(1);
        else begin
            lost = fb & ((F'(1) << d) - F'(1));
            fb = (fb >> d) | F'(lost != '0);
        end
        r.sign = x.sign;
        if (x.sign == y.sign) s = fa + fb;
        else if (fa >= fb) s = fa - fb;
        else begin
            s = fb - fa;
            r.sign = y.sign;
        end
        // s * 2**(x.lsb - G) is the sum (up to the sticky LSB); round it to e8m14.
        p = -1;
        for (int i = 0; i < F; i++) if (s[i]) p = i;
        if (p < 0) return '0;
        e = (EW + 1)'(p) + (EW + 1)'(x.lsb) - (EW + 1)'(G);   // exponent of the leading one
        // the LSB kept: 14 bits below the leading one, never below 2**-140 (gradual underflow)
        q = (e < (EW + 1)'(E_MIN) ? (EW + 1)'(E_MIN) : e) - (EW + 1)'(MANT - 1);
        sh = q - ((EW + 1)'(x.lsb) - (EW + 1)'(G));
        if (sh <= 0) begin              // few bits: exact (sh >= -14 here)
            m = (MANT + 1)'(s << (-sh));
            round_bit = 1'b0;
            sticky = 1'b0;
        end else if (sh > (EW + 1)'(F)) begin   // far below 2**-140: rounds to 0
            m = '0;
            round_bit = 1'b0;
            sticky = 1'b1;
        end else begin
            m = (MANT + 1)'(s >> sh);
            round_bit = s[sh - 1];
            sticky = (s & ((F'(1) << (sh - 1)) - F'(1))) != '0;
        end
        if (!truncate && round_bit && (sticky || m[0])) m = m + 1'b1;
        if (m[MANT]) begin              // rounded up to 2**15: one binade higher
            m = m >> 1;
            q = q + 1'b1;
        end
        if (q > (EW + 1)'(Q_MAX)) begin   // beyond (2 - 2**-14) * 2**127: saturate
            m = (MANT + 1)'((1 << MANT) - 1);
            q = (EW + 1)'(Q_MAX);
        end
        if (m == '0) return '0;
        r.mag = W'(m);
        r.lsb = EW'(q);
        return r;
    endfunction

    logic signed [47:0] block_sum [BLOCKS];
    // The tree in heap order: node[BLOCKS + j] is block term j, node[n] = node[2n] + node[2n+1]
    // rounded (n = BLOCKS - 1 down to 1), so level 1 pairs (t0, t1), (t2, t3), ...; the root
    // is node[1].
    num_t               node      [2 * BLOCKS];
    num_t               root;
    logic               nan;

`ifdef INJECT_BUG
    localparam logic INJECTED = 1'b1;
`else
    localparam logic INJECTED = 1'b0;
`endif

    always_comb begin
        nan = 1'b0;
        for (int j = 0; j < BLOCKS; j++) begin
            block_sum[j] = '0;
            for (int i = j * BLOCK; i < (j + 1) * BLOCK; i++) begin
                block_sum[j] = block_sum[j] + product(fmt, a[i], b[i]);
                nan = nan | (fmt && (a[i][6:0] == 7'h7f || b[i][6:0] == 7'h7f));
            end
            nan = nan | a_scale[j] == 8'hff | b_scale[j] == 8'hff;
            // t_j = block_sum * 2**-18 * 2**(a_scale + b_scale - 254)
            node[BLOCKS + j].sign = block_sum[j][47];
            node[BLOCKS + j].mag  = W'(block_sum[j][47] ? -block_sum[j] : block_sum[j]);
            node[BLOCKS + j].lsb  = EW'({4'b0, a_scale[j]}) + EW'({4'b0, b_scale[j]})
                                    - EW'(254 + 18);
        end
        node[0] = '0;
        for (int n = BLOCKS - 1; n >= 1; n--)
            node[n] = add_round(node[2 * n], node[2 * n + 1], INJECTED && n == BUG_NODE);
        root = BLOCKS == 1 ? add_round(node[1], '0, 1'b0) : node[1];
        out_nan = nan;
        if (nan || root.mag == '0) begin
            out_mant  = '0;
            out_scale = '0;
        end else begin
            out_mant  = root.sign ? -16'(root.mag) : 16'(root.mag);
            out_scale = 8'(root.lsb + EW'(OFFSET));
        end
    end

endmodule
