// A two-stage fixed-latency MXINT8 dot product without scales, k = 4 (a test fixture).
// Stage 1 registers the four exact products, stage 2 their sum: the result of an issue at
// cycle t is on `d` at cycle t + 2, with `out_valid`. One issue a cycle.
// d[17:0] is the exact sum of a_i * b_i in units of 2**-12 (MXINT8 codes are k * 2**-6),
// two's complement; d[21:18] is an exponent field that is always 0.
module pipe2 (
    input  wire        clk,
    input  wire        rst,          // synchronous, active high
    input  wire        in_valid,
    input  wire [31:0] a,            // lane i: bits [8i+7:8i]
    input  wire [31:0] b,
    output reg         out_valid,
    output wire [21:0] d
);
    reg signed [15:0] p0, p1, p2, p3;
    reg               v1;
    reg signed [17:0] sum;

    always @(posedge clk) begin
        p0 <= $signed(a[7:0]) * $signed(b[7:0]);
        p1 <= $signed(a[15:8]) * $signed(b[15:8]);
        p2 <= $signed(a[23:16]) * $signed(b[23:16]);
        p3 <= $signed(a[31:24]) * $signed(b[31:24]);
        sum <= p0 + p1 + p2 + p3;
        if (rst) begin
            v1 <= 1'b0;
            out_valid <= 1'b0;
        end else begin
            v1 <= in_valid;
            out_valid <= v1;
        end
    end
    assign d = {4'd0, sum};
endmodule
