// The test fixtures side by side in one top, so that one simulator build serves every port
// map of tests/test_foreign.py (each map names only its own unit's ports).
module fixtures (
    input  wire        clk,
    input  wire        rst,
    // pipe2
    input  wire        p_valid,
    input  wire [31:0] p_a, p_b,
    output wire        p_out_valid,
    output wire [21:0] p_d,
    // startdone
    input  wire        s_start,
    input  wire [3:0]  s_a_0, s_a_1, s_a_2, s_a_3, s_b_0, s_b_1, s_b_2, s_b_3,
    input  wire        s_first,
    input  wire        s_last,
    output wire        s_done,
    output wire [19:0] s_d,
    // comb16
    input  wire [7:0]  c_a [0:15],
    input  wire [7:0]  c_b [1:16],
    input  wire [15:0] c_scales,
    output wire [19:0] c_m,
    output wire [8:0]  c_e,
    output wire        c_nan,
    // vr1, and vr1 with DROP = 1
    input  wire        v_valid, x_valid,
    output wire        v_ready, x_ready,
    input  wire [31:0] v_a, v_b, x_a, x_b,
    output wire        v_out_valid, x_out_valid,
    input  wire        v_out_ready, x_out_ready,
    output wire [21:0] v_d, x_d
);
    pipe2 u_pipe2 (.clk(clk), .rst(rst), .in_valid(p_valid), .a(p_a), .b(p_b),
                   .out_valid(p_out_valid), .d(p_d));
    startdone u_startdone (.clk(clk), .rst(rst), .start(s_start),
                           .a_0(s_a_0), .a_1(s_a_1), .a_2(s_a_2), .a_3(s_a_3),
                           .b_0(s_b_0), .b_1(s_b_1), .b_2(s_b_2), .b_3(s_b_3),
                           .first(s_first), .done(s_done), .d(s_d));
    comb16 u_comb16 (.a(c_a), .b(c_b), .scales(c_scales), .m(c_m), .e(c_e), .nan(c_nan));
    vr1 #(.DROP(0)) u_vr (.clk(clk), .rst(rst), .in_valid(v_valid), .in_ready(v_ready),
                          .a(v_a), .b(v_b), .out_valid(v_out_valid), .out_ready(v_out_ready),
                          .d(v_d));
    vr1 #(.DROP(1)) u_drop (.clk(clk), .rst(rst), .in_valid(x_valid), .in_ready(x_ready),
                            .a(x_a), .b(x_b), .out_valid(x_out_valid),
                            .out_ready(x_out_ready), .d(x_d));
endmodule
