// A combinational MXINT8 block dot, k = 16, one E8M0 scale per operand (a test fixture).
// Unpacked-array operands (b's lanes at indices 1..16); the result is exact: the integer
// sum m of a_i * b_i times 2**(e - 266) (MXINT8 codes are k * 2**-6, E8M0 has bias 127),
// with e = sa + sb, and nan set when either scale is 0xFF.
module comb16 (
    input  wire [7:0]         a [0:15],
    input  wire [7:0]         b [1:16],
    input  wire [15:0]        scales,     // sa = scales[7:0], sb = scales[15:8]
    output reg  signed [19:0] m,
    output wire [8:0]         e,
    output wire               nan
);
    integer i;
    always @(*) begin
        m = 20'sd0;
        for (i = 0; i < 16; i = i + 1)
            m = m + $signed(a[i]) * $signed(b[i + 1]);
    end
    assign e = {1'b0, scales[7:0]} + {1'b0, scales[15:8]};
    assign nan = scales[7:0] == 8'hFF || scales[15:8] == 8'hFF;
endmodule
