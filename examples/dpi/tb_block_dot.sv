// tb_block_dot.sv: the same kind of bench for a design mxsim did not generate:
// examples/rtl/block_dot (a hand-written combinational MXFP8 block dot with its own output
// encoding), checked against the DPI-C model of its documented spec
// (examples/rtl/block_dot/block_dot_spec_e4m3.toml, exported as block_dot_model_pkg).
// Written for mxsim's examples; run it with `python examples/dpi/run.py`.
`ifndef DOTS
`define DOTS 2000
`endif
`ifndef SEED
`define SEED 1
`endif

module tb_block_dot;
  import block_dot_model_pkg::*;

  logic [7:0] a [K];
  logic [7:0] b [K];
  logic [7:0] a_scale [SCALES];
  logic [7:0] b_scale [SCALES];
  logic fmt = 1'b1;                       // MXFP8 E4M3
  wire signed [15:0] out_mant;
  wire [7:0] out_scale;
  wire out_nan;

  block_dot dut (.*);

  // The design's result as an FP32 code: value = out_mant * 2**(out_scale - 141), which
  // FP32 holds exactly (examples/rtl/block_dot/README.md, "Output encoding").
  function automatic int unsigned to_fp32(logic signed [15:0] m, logic [7:0] e, logic nan);
    logic [15:0] mag = m < 0 ? 16'(-m) : 16'(m);
    if (nan) return 32'h7FFFFFFF;
    if (mag == 0) return 32'h0;
    if (mag >= 16'h4000)                  // normal: FP32's biased exponent is out_scale
      return {m < 0, e, 23'(mag - 16'h4000) << 9};
    return {m < 0, 8'h0, 23'(mag) << 9};  // subnormal: mag * 2**-140 = (mag << 9) * 2**-149
  endfunction

  initial begin
    scoreboard sb = new("block_dot (hand-written RTL) vs the DPI-C model", 1);
    void'($urandom(`SEED));
    for (int d = 0; d < `DOTS; d++) begin
      automatic a_t pa;
      automatic b_t pb;
      automatic scale_t psa, psb;
      automatic bit tame = $urandom % 2;
      for (int i = 0; i < K; i++) begin
        a[i] = 8'($urandom);
        b[i] = 8'($urandom);
        if (tame) begin a[i][6] = 1'b0; b[i][6] = 1'b0; end
        pa[i*8 +: 8] = a[i];
        pb[i*8 +: 8] = b[i];
      end
      for (int j = 0; j < SCALES; j++) begin
        a_scale[j] = ($urandom % 10 == 0) ? 8'($urandom) : 8'(120 + $urandom % 16);
        b_scale[j] = ($urandom % 10 == 0) ? 8'($urandom) : 8'(120 + $urandom % 16);
        psa[j*8 +: 8] = a_scale[j];
        psb[j*8 +: 8] = b_scale[j];
      end
      #1;
      void'(sb.check(pa, pb, psa, psb, 32'h0, to_fp32(out_mant, out_scale, out_nan)));
    end
    sb.report();
    if (sb.mismatches != 0) begin
      $display("FAIL");
      $fatal(1, "the RTL and the DPI-C model disagree");
    end
    $display("PASS");
    $finish;
  end
endmodule
