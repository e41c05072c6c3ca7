// A pipelined MXINT8 dot product of four lanes (written for mxsim's tests) whose two E8M0 scales
// arrive pre-summed: one 8-bit two's complement field holds ea + eb (the scale exponents, E8M0
// code - 127). D = sum_i a_i * b_i * 2**(e_sum - 12), every bit kept: a signed 18-bit mantissa
// and a signed 10-bit exponent out, one cycle after the instruction.
module presum_dot (
    input  logic               clk,
    input  logic               rst,
    input  logic               in_valid,
    input  logic        [31:0] a,          // lane i in [8i+7:8i], INT8 (two's complement)
    input  logic        [31:0] b,
    input  logic        [7:0]  e_sum,      // ea + eb, two's complement
    output logic               out_valid,
    output logic signed [17:0] res_mant,
    output logic signed [9:0]  res_exp
);
    logic signed [17:0] s;
    logic signed [17:0] x, y;
    always_comb begin
        s = '0;
        for (int i = 0; i < 4; i++) begin
            x = {{10{a[8*i+7]}}, a[8*i +: 8]};
            y = {{10{b[8*i+7]}}, b[8*i +: 8]};
            s = s + x * y;
        end
    end
    always_ff @(posedge clk) begin
        if (rst) out_valid <= 1'b0;
        else out_valid <= in_valid;
        res_mant <= s;
        res_exp <= {{2{e_sum[7]}}, e_sum} - 10'sd12;
    end
endmodule
