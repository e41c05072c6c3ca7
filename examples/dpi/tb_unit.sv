// tb_unit.sv: a plain-SystemVerilog bench for a design with the ports of the RTL mxsim
// generates for a unit (mx_dot; `DUT names another, e.g. examples/rtl/mxsim_unit's
// mx_dot_ftz), checked against the unit's DPI-C model (dut_model_pkg, from `mxsim export-c`).
//
// It drives chains of one to three blocks (each block's D is the next block's C, as the
// RTL's first/last markers say), one dot in eight with tiny scales and a subnormal C (so that
// results are subnormal), holds o.ready low now and then, and gives every result the design
// produces to the scoreboard, which computes the model's D through DPI-C and compares the
// codes. Written for mxsim's examples; run it with `python examples/dpi/run.py`.
`ifndef DOTS
`define DOTS 2000
`endif
`ifndef SEED
`define SEED 1
`endif
`ifndef DUT
`define DUT mx_dot
`endif

module tb_unit;
  import dut_model_pkg::*;

  localparam int unsigned W = K * A_BITS + K * B_BITS + 2 * SCALES * SCALE_BITS + 32 + 2;

  bit clk = 0;
  bit rst = 1;
  bit i_valid = 0;
  wire i_ready;
  bit [W-1:0] i_payload = '0;
  wire o_valid;
  bit o_ready = 1;
  wire [31:0] o_payload;

  `DUT dut (.clk(clk), .rst(rst), .i__valid(i_valid), .i__ready(i_ready),
              .i__payload(i_payload), .o__valid(o_valid), .o__ready(o_ready),
              .o__payload(o_payload));

  always #5 clk = ~clk;

  scoreboard sb = new({`"`DUT`", " vs the DPI-C model"});
  int unsigned expected[$];
  int unsigned c_of[$];
  bit done = 0;

  // Codes of one block: uniform over every code, or (half the blocks) with the exponent's
  // top bit clear, so most dots stay finite.
  function automatic a_t rand_a(bit tame);
    a_t x;
    for (int i = 0; i < K; i++) begin
      x[i*A_BITS +: A_BITS] = A_BITS'($urandom);
      if (tame) x[i*A_BITS + A_BITS - 2] = 1'b0;
    end
    return x;
  endfunction

  function automatic b_t rand_b(bit tame);
    b_t x;
    for (int i = 0; i < K; i++) begin
      x[i*B_BITS +: B_BITS] = B_BITS'($urandom);
      if (tame) x[i*B_BITS + B_BITS - 2] = 1'b0;
    end
    return x;
  endfunction

  // E8M0 scales near 2**0, now and then any code (0xFF is NaN); tiny: near 2**-70, so
  // that the products' sum lies about FP32's subnormal range
  function automatic scale_t rand_scale(bit tiny);
    scale_t x;
    for (int i = 0; i < SCALES; i++)
      x[i*SCALE_BITS +: SCALE_BITS] = tiny ? SCALE_BITS'(50 + $urandom % 15)
                                    : ($urandom % 10 == 0) ? SCALE_BITS'($urandom)
                                    : SCALE_BITS'(120 + $urandom % 16);
    return x;
  endfunction

  // FP32 C near 1, now and then any code (NaN, Inf, subnormals); tiny: a subnormal
  function automatic int unsigned rand_c(bit tiny);
    if (tiny) return {1'($urandom), 8'h00, 23'($urandom)};
    if ($urandom % 8 == 0) return $urandom;
    return {1'($urandom), 8'(120 + $urandom % 16), 23'($urandom)};
  endfunction

  task automatic send(bit [W-1:0] beat);
    @(negedge clk);
    i_payload = beat;
    i_valid = 1;
    while (!i_ready) @(negedge clk);
    @(posedge clk);                       // taken at this edge
  endtask

  initial begin : stimulus
    void'($urandom(`SEED));
    repeat (3) @(posedge clk);
    @(negedge clk) rst = 0;
    for (int d = 0; d < `DOTS; d++) begin
      automatic int links = 1 + $urandom % 3;
      automatic bit tiny = $urandom % 8 == 0;
      automatic int unsigned c = rand_c(tiny);
      automatic int unsigned model_d = c;
      for (int l = 0; l < links; l++) begin
        automatic bit tame = $urandom % 2;
        automatic a_t a = rand_a(tame);
        automatic b_t b = rand_b(tame);
        automatic scale_t sa = rand_scale(tiny);
        automatic scale_t sc = rand_scale(tiny);
        model_d = sb.model(a, b, sa, sc, model_d);      // this block's D: the next one's C
        send({1'(l == links - 1), 1'(l == 0), c, sc, sa, b, a});
      end
      expected.push_back(model_d);
      c_of.push_back(c);
    end
    @(negedge clk) i_valid = 0;
    done = 1;
  end

  // back-pressure: o.ready low one cycle in five
  always @(negedge clk) o_ready = ($urandom % 5) != 0;

  always @(posedge clk) begin : monitor
    if (!rst && o_valid && o_ready) begin
      if (expected.size() == 0) begin
        $display("MISMATCH: the RTL gave a result (%08h) no dot was sent for", o_payload);
        sb.mismatches++;
      end else begin
        void'(sb.check_d(expected.pop_front(), o_payload, c_of.pop_front()));
      end
    end
  end

  initial begin : finish
    wait (done);
    fork
      wait (expected.size() == 0);
      repeat (100000) @(posedge clk);
    join_any
    repeat (20) @(posedge clk);
    sb.report();
    if (expected.size() != 0) $display("MISMATCH: %0d results never came", expected.size());
    if (sb.mismatches != 0 || expected.size() != 0 || sb.checked != `DOTS) begin
      $display("FAIL");
      $fatal(1, "the RTL and the DPI-C model disagree");
    end
    $display("PASS");
    $finish;
  end
endmodule
