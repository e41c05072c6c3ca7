// A sequential MXFP4 (E2M1) dot-product-accumulate unit with start/done, k = 4 (a test
// fixture). `start` (one cycle) latches nothing: the operands a_0..a_3, b_0..b_3 and
// `first` are held until `done`. The unit adds one exact product a cycle to its accumulator
// (cleared by `first`) and pulses `done` 5 cycles after `start`, with the sum on `d`.
// d[15:0] is the accumulator in units of 2**-2, two's complement; d[19:16] is an exponent
// field that is always 0.
module startdone (
    input  wire        clk,
    input  wire        rst,          // synchronous, active high
    input  wire        start,
    input  wire [3:0]  a_0, a_1, a_2, a_3,
    input  wire [3:0]  b_0, b_1, b_2, b_3,
    input  wire        first,
    output reg         done,
    output wire [19:0] d
);
    // E2M1 magnitude in units of 0.5: 0, 1, 2, 3, 4, 6, 8, 12.
    function automatic [3:0] mag(input [2:0] c);
        case (c)
            3'd0: mag = 0; 3'd1: mag = 1; 3'd2: mag = 2; 3'd3: mag = 3;
            3'd4: mag = 4; 3'd5: mag = 6; 3'd6: mag = 8; default: mag = 12;
        endcase
    endfunction
    function automatic signed [15:0] prod(input [3:0] x, input [3:0] y);
        reg [7:0] m;
        begin
            m = mag(x[2:0]) * mag(y[2:0]);
            prod = (x[3] ^ y[3]) ? -$signed({8'd0, m}) : $signed({8'd0, m});
        end
    endfunction

    reg               busy;
    reg [1:0]         i;
    reg signed [15:0] acc;
    reg [3:0]         x, y;

    always @(*) begin
        case (i)
            2'd0: begin x = a_0; y = b_0; end
            2'd1: begin x = a_1; y = b_1; end
            2'd2: begin x = a_2; y = b_2; end
            default: begin x = a_3; y = b_3; end
        endcase
    end

    always @(posedge clk) begin
        done <= 1'b0;
        if (rst) begin
            busy <= 1'b0;
        end else if (start && !busy) begin
            busy <= 1'b1;
            i <= 2'd0;
            if (first) acc <= 16'sd0;
        end else if (busy) begin
            acc <= acc + prod(x, y);
            i <= i + 2'd1;
            if (i == 2'd3) begin
                busy <= 1'b0;
                done <= 1'b1;
            end
        end
    end
    assign d = {4'd0, acc};
endmodule
