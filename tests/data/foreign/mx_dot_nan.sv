// A fixture of tests/hostile/test_foreign.py, written by hand around mxsim's generated mx_dot
// for k8_spec.toml (k = 8, one E8M0 scale per operand, IEEE NaN/Inf): a unit
// whose NaN result is a code a configuration input sets (as a CSR would), with an enable that
// holds both streams while low. Generate mx_dot.v beside it first:
//   mxsim rtl --unit k8_spec.toml --lanes 8 --stages 1 -o mx_dot.v
module mx_dot_nan (
    input  logic         clk,
    input  logic         rst,
    input  logic         enable,     // low: no handshake on either stream
    input  logic [31:0]  nan_code,   // the code every NaN result leaves as
    input  logic         i__valid,
    output logic         i__ready,
    input  logic [177:0] i__payload,
    output logic         o__valid,
    input  logic         o__ready,
    output logic [31:0]  o__payload
);
    logic [31:0] d;
    logic        ready, valid;

    mx_dot unit (
        .clk(clk), .rst(rst),
        .i__valid(i__valid & enable), .i__ready(ready), .i__payload(i__payload),
        .o__valid(valid), .o__ready(o__ready & enable), .o__payload(d)
    );

    assign i__ready = ready & enable;
    assign o__valid = valid & enable;
    // Exponent field all ones with a non-zero fraction: the unit's NaN, given the chosen code.
    assign o__payload = (d[30:23] == 8'hFF && d[22:0] != 23'd0) ? nan_code : d;
endmodule
