"""Amaranth RTL of mxsim's dot-product unit, built from the same ``UnitSpec`` as the model.

- :mod:`hdl.unit`: ``DotProductUnit(spec, microarch)``, the streaming multiply-accumulate
  unit (its timing contract), and ``block_layout(spec)``, its input beat.
- :mod:`hdl.stages`: the unit's four stages (block stage, exponent maximum, accumulation,
  post pipeline) and the signatures that join them.
- :mod:`hdl.blocks`: the combinational blocks the stages are made of (decoder, multiplier,
  max tree, aligner, adder tree, normaliser, rounder, packer).
- :mod:`hdl.group`: GST-FDPA (grouped specs): the scale product, exact group sum and group
  term blocks, and the two grouped stages that replace the exponent maximum and accumulation.
- :mod:`hdl.verilog`: the Verilog text, its Verilator lint and its Yosys statistics.
- :mod:`hdl.sim`: the unit in Amaranth's simulator, traced as ``mxsim.microarch.cycle`` traces the
model.
- :mod:`hdl.toolchain`: where the ``rtl`` extra's Verilator and Yosys are.
- :mod:`hdl.cli`: the ``mxsim rtl`` and ``mxsim explore`` verbs, registered with the command
  through the ``mxsim.verbs`` entry points.

The package imports ``mxsim`` (never the testbenches or the GPU runners); ``mxsim`` never
imports it.
"""
