"""``DotProductArray``: an output-stationary array of ``DotProductUnit``s, as a stream.

The RTL view of an :class:`mxsim.array.ArraySpec` (the subset that
:func:`mxsim.array.check_rtl` accepts: dataflow "os", register accumulators). Timing
contract: :mod:`mxsim.array.cycle` (the same machine in Python; docs/array.md).

One input beat (``i``, :func:`wave_layout`) is one *wave* of :func:`mxsim.array.plan.os_waves`:
A's blocks for each array row, B's blocks for each column (codes and scale codes, as
``hdl.unit.block_layout`` lays out one unit's beat), the GEMM's C for each unit (read on a
``first`` wave), the interleave slot ``t``, ``rows_on``/``cols_on`` (units ``(r, c)`` with
``r < rows_on`` and ``c < cols_on`` take part), and ``first``, ``last`` and ``new_a`` (A's
blocks are new; otherwise each row reuses the blocks it holds from the slot-0 wave).

- ``i.ready`` is high when the units take a beat this cycle, each operand buffer's fetch
  counter has the wave's bytes (A: ``rows_on`` blocks on ``new_a``; B: ``cols_on`` blocks;
  the scale buffer's scale bytes when scales travel apart), and the wave is ``first`` or no
  wave of its slot is still in the units. A counter adds its buffer's bandwidth each cycle
  until it holds the pending wave's bytes, and restarts from one cycle's bandwidth when a
  wave is taken.
- Each active unit takes the beat (``first`` = ``last`` = 1) with C from the GEMM (first) or
  from the output's accumulator register (slot ``t``).
- ``o`` (no ``ready``: never stalled) is valid when the units' results appear,
  ``L = P + stages + 1`` cycles after the wave was taken: ``o.d[r * cols + c]`` is unit
  ``(r, c)``'s D (0 for units left out), ``o.on`` their mask, ``o.t`` and ``o.last`` the
  wave's (``last``: the outputs' final values). The results are written to the accumulator
  registers in that cycle.
"""

from __future__ import annotations

from amaranth import Array, Cat, Const, Module, Mux, Shape, Signal, Value, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from mxsim.array import ArraySpec, Scales, check_rtl

from .unit import DotProductUnit, block_layout

__all__ = ["DotProductArray", "wave_layout", "out_layout"]


def _scale_width(array: ArraySpec) -> int:
    """Bits of one operand's scale field in a unit's beat (0: unscaled)."""
    layout = block_layout(array.unit)
    names = {name for name, _ in layout}
    return Shape.cast(layout["a_scale"].shape).width if "a_scale" in names else 0


def wave_layout(array: ArraySpec) -> data.StructLayout:
    """One input beat of the array: a wave (see the module docstring). ``a`` holds the rows'
    blocks one after another (``rows * k`` codes), ``b`` the columns' (``cols * k``),
    ``a_scale``/``b_scale`` the rows'/columns' scale fields as raw bits, ``c`` one FP32 code
    per unit (row-major)."""
    unit, rows, cols = array.unit, array.rows, array.cols
    blk = block_layout(unit)
    a_elem, b_elem = blk["a"].shape.elem_shape, blk["b"].shape.elem_shape
    fields = {"a": data.ArrayLayout(a_elem, rows * unit.k),
              "b": data.ArrayLayout(b_elem, cols * unit.k)}
    sw = _scale_width(array)
    if sw:
        fields.update(a_scale=data.ArrayLayout(unsigned(sw), rows),
                      b_scale=data.ArrayLayout(unsigned(sw), cols))
    fields.update(c=data.ArrayLayout(unsigned(32), rows * cols),
                  t=unsigned(max(1, bits_for(array.interleave - 1))),
                  rows_on=unsigned(bits_for(rows)), cols_on=unsigned(bits_for(cols)),
                  first=1, last=1, new_a=1)
    return data.StructLayout(fields)


def out_layout(array: ArraySpec) -> data.StructLayout:
    """One output beat: every unit's D, the mask of units that took part, the slot and
    whether the values are final."""
    return data.StructLayout({"d": data.ArrayLayout(unsigned(32), array.units),
                              "on": unsigned(array.units),
                              "t": unsigned(max(1, bits_for(array.interleave - 1))),
                              "last": 1})


class DotProductArray(wiring.Component):
    """The output-stationary array of ``array`` (register accumulators).

    Members: ``i`` (in, ``stream.Signature(wave_layout(array))``), ``o`` (out: ``valid`` and
    ``payload``, ``out_layout(array)``; no ``ready``: the accumulators always take results).
    The timing contract is in the module docstring; ``latency`` (a wave's results after it
    is taken) and ``passes`` give it as numbers.

    Raises MicroArchError (one line) for an array the RTL does not build.
    """

    def __init__(self, array: ArraySpec):
        try:
            check_rtl(array)
        except Exception:
            self._MustUse__used = True       # refused, not forgotten: no "never used" warning
            raise
        self._array = array
        super().__init__({"i": In(stream.Signature(wave_layout(array))),
                          "o": Out(wiring.Signature({"valid": Out(1),
                                                      "payload": Out(out_layout(array))}))})

    @property
    def array(self) -> ArraySpec:
        return self._array

    @property
    def latency(self) -> int:
        return self._array.latency

    @property
    def passes(self) -> int:
        return self._array.passes

    def _fetch(self, m: Module, name: str, bandwidth: int, need, take) -> Signal:
        """A buffer's fetch counter; high (returned signal) when it holds ``need`` bytes."""
        top = max(bandwidth, 1)
        count = Signal(range(self._max_need + top + 1), name=f"{name}_count")
        full = Signal(name=f"{name}_full")
        m.d.comb += full.eq(count >= need)
        with m.If(take):
            m.d.sync += count.eq(bandwidth)
        with m.Elif(self.i.valid & ~full):
            m.d.sync += count.eq(count + bandwidth)
        return full

    def elaborate(self, platform):
        m = Module()
        arr = self._array
        units = [[DotProductUnit(arr.unit, arr.microarch) for _ in range(arr.cols)]
                 for _ in range(arr.rows)]
        for r, row in enumerate(units):
            for c, u in enumerate(row):
                m.submodules[f"unit_{r}_{c}"] = u
        take, back, head = self._control(m, units[0][0])
        self._datapath(m, units, take, back, head)
        return m

    def _chain_ok(self, cmd, pending) -> Value:
        """The wave may start its chain link: it is ``first``, or no wave of its slot is in
        the units (their Ds are in the accumulators)."""
        return cmd.first | (pending[cmd.t] == 0)

    def _control(self, m: Module, lead: DotProductUnit):
        """Fetch counters, the waves in flight and the chain check; (take, back, head):
        a wave is taken, results are back, and the slot/last/mask of the oldest wave."""
        arr, cmd = self._array, self.i.payload
        spb, sep = arr.scales_per_block, arr.scales is Scales.SEPARATE
        # Bytes each buffer delivers for this wave.
        rows_a = Mux(cmd.new_a, cmd.rows_on, 0)
        need_a = rows_a * arr.block_bytes("a")
        need_b = cmd.cols_on * arr.block_bytes("b")
        need_s = (rows_a + cmd.cols_on) * spb if sep else Const(0)
        self._max_need = max(arr.rows * arr.block_bytes("a"), arr.cols * arr.block_bytes("b"),
                             (arr.rows + arr.cols) * spb)
        take = Signal()
        full_a = self._fetch(m, "a", arr.a_buffer.bandwidth, need_a, take)
        full_b = self._fetch(m, "b", arr.b_buffer.bandwidth, need_b, take)
        full_s = (self._fetch(m, "s", arr.scale_buffer.bandwidth, need_s, take) if sep
                  else Const(1))

        # Waves in the units, in order (slot, last, mask), and per slot how many.
        depth = arr.latency // arr.passes + 2
        tw, rw, cw = len(cmd.t), len(cmd.rows_on), len(cmd.cols_on)
        m.submodules.inflight = inflight = fifo.SyncFIFO(width=tw + 1 + rw + cw, depth=depth)
        pending = Array(Signal(range(depth + 1), name=f"pending{t}")
                        for t in range(arr.interleave))
        head = Signal(tw + 1 + rw + cw)
        back = lead.o.valid
        m.d.comb += [
            head.eq(inflight.r_data),
            self.i.ready.eq(lead.i.ready & full_a & full_b & full_s
                            & self._chain_ok(cmd, pending)),
            take.eq(self.i.valid & self.i.ready),
            inflight.w_en.eq(take),
            inflight.w_data.eq(Cat(cmd.t, cmd.last, cmd.rows_on, cmd.cols_on)),
            inflight.r_en.eq(back),
        ]
        for t in range(arr.interleave):
            up, down = take & (cmd.t == t), back & (head[:tw] == t)
            with m.If(up & ~down):
                m.d.sync += pending[t].eq(pending[t] + 1)
            with m.Elif(down & ~up):
                m.d.sync += pending[t].eq(pending[t] - 1)
        return take, back, head

    def _datapath(self, m: Module, units, take, back, head) -> None:
        """The units' beats (A held per row across slots, C from the GEMM or the
        accumulators), the accumulator registers and the output."""
        arr, cmd = self._array, self.i.payload
        rows, cols = arr.rows, arr.cols
        tw, rw = len(cmd.t), len(cmd.rows_on)
        h_t, h_last = head[:tw], head[tw]
        h_rows, h_cols = head[tw + 1:tw + 1 + rw], head[tw + 1 + rw:]
        aw, bw, sw = len(Value.cast(cmd.a)) // rows, len(Value.cast(cmd.b)) // cols, \
            _scale_width(arr)

        def held(name: str, new: Value) -> Value:
            """The row's blocks: new ones on a ``new_a`` wave (kept), else those kept."""
            reg = Signal(len(new), name=name)
            with m.If(take & cmd.new_a):
                m.d.sync += reg.eq(new)
            return Mux(cmd.new_a, new, reg)

        for r in range(rows):
            a_r = held(f"held_a{r}", Value.cast(cmd.a)[r * aw:(r + 1) * aw])
            s_r = held(f"held_as{r}", Value.cast(cmd.a_scale)[r * sw:(r + 1) * sw]) if sw \
                else None
            for c in range(cols):
                u, i = units[r][c], r * cols + c
                acc = Array(Signal(32, name=f"acc_{r}_{c}_{t}") for t in range(arr.interleave))
                beat = u.i.payload
                m.d.comb += [
                    u.i.valid.eq(take & (r < cmd.rows_on) & (c < cmd.cols_on)),
                    Value.cast(beat.a).eq(a_r),
                    Value.cast(beat.b).eq(Value.cast(cmd.b)[c * bw:(c + 1) * bw]),
                    beat.c.eq(Mux(cmd.first, cmd.c[i], acc[cmd.t])),
                    beat.first.eq(1), beat.last.eq(1),
                    u.o.ready.eq(1),
                ]
                if sw:
                    m.d.comb += [Value.cast(beat.a_scale).eq(s_r),
                                 Value.cast(beat.b_scale).eq(
                                     Value.cast(cmd.b_scale)[c * sw:(c + 1) * sw])]
                on = (r < h_rows) & (c < h_cols)
                with m.If(back & on):
                    m.d.sync += acc[h_t].eq(u.o.payload)
                m.d.comb += [self.o.payload.d[i].eq(Mux(on, u.o.payload, 0)),
                             self.o.payload.on[i].eq(on)]
        m.d.comb += [self.o.valid.eq(back), self.o.payload.t.eq(h_t),
                     self.o.payload.last.eq(h_last)]
