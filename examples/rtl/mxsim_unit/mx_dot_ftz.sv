// A wrapper around mxsim's generated mx_dot, written by hand for the mxsim_unit example.
// Without INJECT_BUG it passes every port through unchanged. With INJECT_BUG it carries a
// classic integration bug: the result is flushed to zero when it is subnormal (an FTZ stage
// someone added downstream), keeping the sign. `mxsim verify --rtl mxsim_unit_bug.toml`
// must catch it with a minimal failing set. The generated RTL itself is never edited.
module mx_dot_ftz (
    input  logic         clk,
    input  logic         rst,
    input  logic         i__valid,
    output logic         i__ready,
    input  logic [561:0] i__payload,
    output logic         o__valid,
    input  logic         o__ready,
    output logic [31:0]  o__payload
);
    logic [31:0] d;

    mx_dot unit (
        .clk(clk), .rst(rst),
        .i__valid(i__valid), .i__ready(i__ready), .i__payload(i__payload),
        .o__valid(o__valid), .o__ready(o__ready), .o__payload(d)
    );

`ifdef INJECT_BUG
    // Exponent field 0 with a non-zero fraction: a subnormal, flushed to a zero of its sign.
    assign o__payload = (d[30:23] == 8'd0) ? {d[31], 31'd0} : d;
`else
    assign o__payload = d;
`endif
endmodule
