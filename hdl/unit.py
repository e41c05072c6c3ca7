"""``DotProductUnit``: the MX multiply-accumulate datapath of a ``UnitSpec``, as a stream.

Timing contract (``mxsim.microarch.cycle.UnitModel`` steps the same machine; docs/rtl.md has the
port
map). One input beat is one K-block of a dot product: K codes of A's row and B's column, their
E8M0 or UE4M3 scale codes (scaled specs: ``k / block`` per operand), C (FP32 code) and
``first``/``last`` markers. A chain of
blocks from ``first`` to ``last`` is one long dot product: each block's result, rounded as the
spec rounds an instruction's result, is the next block's C (``c`` is read only on ``first``
blocks). Only ``last`` blocks produce an output beat, the FP32 code of D.

Registers: the block stage S0 (the accepted beat and a pass counter), the accumulator, the
post stages S1..S``stages`` (normalise | round | pack, cut as ``MicroArch.stages`` says), the
output register, and the chain's feedback register. :mod:`hdl.stages` builds them, in four
components (``BlockStage``, ``ExponentMax``, ``Accumulate``, ``PostPipeline``) that the unit
joins with ``wiring.connect``.

- ``i.ready`` is high when S0 is empty or finishes its block this cycle.
- A block spends ``P = k / lanes`` cycles (passes) in S0; pass ``p`` multiplies, aligns and
  adds lanes ``p*lanes ... p*lanes + lanes - 1`` (and C in pass 0) into the accumulator (a
  GST-FDPA unit, :mod:`hdl.group`: ``lanes / G`` whole groups, each one aligned term). A
  chained block (``first`` low) starts its passes only when no older block is in S1..S``R``
  (it needs the previous result).
- Each post stage holds one cycle; the last one writes the feedback register and, for a
  ``last`` block, the output register.
- ``o.valid`` is the output register's valid bit. While it holds a beat that is not taken
  (``o.ready`` low) the whole pipeline stalls.

So an unstalled block's result is valid ``P + stages + 1`` cycles after its handshake;
independent blocks are accepted every ``P`` cycles, links of one chain every ``P + stages``.
"""

from __future__ import annotations

from amaranth import Module, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from mxsim.microarch import MicroArch
from mxsim.spec import UnitSpec

from .group import GroupAccumulate, GroupExponentMax
from .stages import Accumulate, BlockStage, ExponentMax, PostPipeline, block_layout

__all__ = ["DotProductUnit", "block_layout"]


class DotProductUnit(wiring.Component):
    """The dot-product-add unit of ``spec``, built as ``microarch`` says.

    Members: ``i`` (in, ``stream.Signature(block_layout(spec))``), ``o`` (out,
    ``stream.Signature(32)``: FP32 codes of D). Latency, interval and the cycle-by-cycle
    behaviour are in the module docstring; ``latency`` and ``passes`` give them as numbers.

    The unit builds whatever ``mxsim.microarch.check_rtl`` accepts (``mxsim.design.
    resolve_design`` checks it); a spec it refuses gives no meaningful circuit.
    """

    #: The four stage classes the unit is built from. A subclass may name others, with the
    #: same constructor ``(spec, microarch)`` and the same ports, to build another
    #: implementation of one stage.
    block_stage: type[BlockStage] = BlockStage
    exponent_max: type[ExponentMax] = ExponentMax
    accumulate: type[Accumulate] = Accumulate
    post_pipeline: type[PostPipeline] = PostPipeline
    #: The two stages a GST-FDPA spec (``spec.group`` set) is built with instead of
    #: ``exponent_max`` and ``accumulate`` (:mod:`hdl.group`).
    group_exponent_max: type[ExponentMax] = GroupExponentMax
    group_accumulate: type[Accumulate] = GroupAccumulate

    def __init__(self, spec: UnitSpec, microarch: MicroArch | None = None):
        self._spec = spec
        self._ua = microarch or MicroArch(lanes=spec.k or 1)
        super().__init__({"i": In(stream.Signature(block_layout(spec))),
                          "o": Out(stream.Signature(unsigned(32)))})

    @property
    def spec(self) -> UnitSpec:
        return self._spec

    @property
    def microarch(self) -> MicroArch:
        return self._ua

    @property
    def passes(self) -> int:
        return self._ua.passes(self._spec)

    @property
    def latency(self) -> int:
        return self._ua.latency(self._spec)

    def elaborate(self, platform):
        m = Module()
        spec, ua = self._spec, self._ua
        m.submodules.block = block = self.block_stage(spec, ua)
        grouped = spec.group is not None
        exponent_max = self.group_exponent_max if grouped else self.exponent_max
        accumulate_cls = self.group_accumulate if grouped else self.accumulate
        m.submodules.exponents = exponents = exponent_max(spec, ua)
        m.submodules.accumulate = accumulate = accumulate_cls(spec, ua)
        m.submodules.post = post = self.post_pipeline(spec, ua)
        wiring.connect(m, wiring.flipped(self.i), block.i)
        wiring.connect(m, block.s0, exponents.s0, accumulate.s0, post.s0)
        wiring.connect(m, exponents.o, accumulate.exponents, post.exponents)
        wiring.connect(m, accumulate.o, post.acc)
        wiring.connect(m, post.status, block.post)
        wiring.connect(m, post.o, wiring.flipped(self.o))
        return m
