// Ports only (no behaviour): what tests/test_portmap.py checks port maps against.
module dut #(parameter int K = 32) (
  input  logic              clk,
  input  logic              rst_n,
  input  logic              in_valid,
  output logic              in_ready,
  output logic              out_valid,
  input  logic              out_ready,
  input  logic [K*8-1:0]    rs1,
  input  logic [K*8-1:0]    rs2,
  input  logic [63:0]       rs3,
  input  logic [1:0]        fmt,
  input  logic [7:0]        a_arr [K],
  input  logic [7:0]        b_arr [K],
  output logic [31:0]       rd,
  output logic [15:0]       out_mant,
  output logic [7:0]        out_exp,
  output logic              out_nan
);
  assign in_ready = 1'b1;
  assign out_valid = in_valid;
  assign rd = rs3[31:0];
  assign out_mant = '0;
  assign out_exp = '0;
  assign out_nan = 1'b0;
endmodule
