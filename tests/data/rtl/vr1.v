// A valid/ready MXINT8 dot product without scales, k = 4 (a test fixture): one output
// register, taken when empty or leaving (in_ready = !out_valid || out_ready), so the
// latency is 1 and an input can be taken every cycle. With DROP = 1 it drops a result
// under back-pressure: out_valid falls after one cycle whether or not it was taken, and it
// takes an input every cycle (a deliberate protocol bug for the timing checks).
// d[17:0]: the exact sum in units of 2**-12, two's complement; d[21:18]: exponent, 0.
module vr1 #(parameter DROP = 0) (
    input  wire        clk,
    input  wire        rst,
    input  wire        in_valid,
    output wire        in_ready,
    input  wire [31:0] a,
    input  wire [31:0] b,
    output reg         out_valid,
    input  wire        out_ready,
    output wire [21:0] d
);
    reg signed [17:0] sum;
    wire signed [17:0] next = $signed(a[7:0]) * $signed(b[7:0])
                            + $signed(a[15:8]) * $signed(b[15:8])
                            + $signed(a[23:16]) * $signed(b[23:16])
                            + $signed(a[31:24]) * $signed(b[31:24]);
    assign in_ready = DROP ? 1'b1 : (!out_valid || out_ready);
    always @(posedge clk) begin
        if (rst) begin
            out_valid <= 1'b0;
        end else if (in_valid && in_ready) begin
            out_valid <= 1'b1;
            sum <= next;
        end else if (out_ready || DROP) begin
            out_valid <= 1'b0;
        end
    end
    assign d = {4'd0, sum};
endmodule
