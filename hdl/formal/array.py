"""``ArrayStream``: the handshake contract of ``hdl.array.DotProductArray`` (an array of
units, or a mutant of it) as properties, for a bounded model check.

The harness drives the array's input freely in every cycle (``AnySeq``: ``i.valid`` and the
whole wave) and watches ``i.ready`` and ``o``. It assumes only what the array's contract asks
of its input:

- the stream rule: a wave offered (``i.valid``) and not taken is offered again in the next
  cycle, unchanged (the fetch counters count bytes for the wave that waits);
- a well-formed wave: ``1 <= rows_on <= rows``, ``1 <= cols_on <= cols`` and
  ``t < interleave`` (unit (0, 0) takes part in every wave: the array times its outputs by
  it, as :func:`mxsim.array.plan.os_waves` always gives).

It keeps its own record of the waves taken in the last ``L`` cycles (``L = P + stages + 1``,
the array's ``latency``) and one count: the cycles with ``i.valid`` since the last wave was
taken, counting that cycle (a buffer of bandwidth ``B`` has fetched ``B`` bytes per counted
cycle). Asserted, each as its own check:

- *output*: ``o.valid`` exactly when a wave was taken ``L`` cycles before (no output made up
  or duplicated, none late or lost), and then ``o.t``, ``o.last`` and ``o.on`` (the mask of
  ``rows_on`` x ``cols_on``) are that wave's, so outputs come in the order waves were taken;
  a unit left out of the wave gives 0;
- *input*: a wave is taken only when the contract allows it: no wave taken in the ``P - 1``
  cycles before (a unit takes a beat every ``P`` cycles); each buffer has fetched the wave's
  bytes (A: ``rows_on`` blocks on ``new_a``, else none; B: ``cols_on`` blocks; a separate
  scale buffer: their scale bytes); a wave that is not ``first`` finds no wave of its slot
  among those taken in the last ``L`` cycles (their D is in the accumulators);
- *bounded liveness*: a wave offered while all of these hold is taken in that cycle, so a
  wave needing ``N`` bytes from a buffer of bandwidth ``B`` waits no more than ``ceil(N / B)``
  offered cycles for it, ``P`` cycles for the units and ``L + 1`` for its slot;
- *values* (``data``): each unit takes one beat in each wave it is in and none otherwise;
  the beat holds its row's A blocks (the wave's on ``new_a``, else those of the last
  ``new_a`` wave taken), its column's B blocks, their scales, ``first`` = ``last`` = 1, and
  C: the wave's on ``first``, else the unit's result for that slot that went out last
  (written when ``o`` shows it; 0 before any); each D on ``o`` is its unit's result.

With the unit's own proof (``mxsim prove``: every beat's D is
:class:`.reference.ReferenceDot`'s, ``L`` cycles later), the values checks make each D on ``o``
the reference's for its wave's blocks, C chained through the accumulators. That composition
is stated, not solved: units and reference circuits together in one array miter do not close.
None of the values checks needs the units' arithmetic, so :func:`testbenches.formal.array.
prove_array` cuts each unit's D free (any value in any cycle) before the solver sees it.

A bounded check from reset covers every input sequence up to its depth; the harness holds no
invariant about the array's own registers, so k-induction is not expected to close.
"""

from __future__ import annotations

import math

from amaranth import Array, Cat, Fragment, Module, Mux, Signal, Value
from amaranth.asserts import AnySeq
from amaranth.hdl import Assume

from mxsim.array import ArraySpec, Scales

from .miter import Harness

__all__ = ["ArrayStream", "array_depth"]


def array_depth(array: ArraySpec) -> int:
    """A BMC depth covering a few waves of ``array``: the slowest fetch of a full wave, then
    three chained waves of one slot and their results (``3 (L + 1) + 2``)."""
    return _fetch_cycles(array) + 3 * (array.latency + 1) + 2


def _needs(array: ArraySpec, rows_on, cols_on, new_a) -> list[tuple[int, Value]]:
    """(bandwidth, bytes) the wave needs from each buffer (the contract's formula)."""
    rows_a = Mux(new_a, rows_on, 0)
    out = [(array.a_buffer.bandwidth, rows_a * array.block_bytes("a")),
           (array.b_buffer.bandwidth, cols_on * array.block_bytes("b"))]
    if array.scales is Scales.SEPARATE:
        out.append((array.scale_buffer.bandwidth, (rows_a + cols_on) * array.scales_per_block))
    return out


def _fetch_cycles(array: ArraySpec) -> int:
    """Counted cycles the largest wave may need from its slowest buffer."""
    full = [(array.a_buffer.bandwidth, array.rows * array.block_bytes("a")),
            (array.b_buffer.bandwidth, array.cols * array.block_bytes("b"))]
    if array.scales is Scales.SEPARATE:
        full.append((array.scale_buffer.bandwidth,
                     (array.rows + array.cols) * array.scales_per_block))
    return max(math.ceil(need / max(bw, 1)) for bw, need in full)


class ArrayStream(Harness):
    """``array`` (a ``DotProductArray`` or a subclass, not yet elaborated) under a free
    stream of waves, its handshake contract asserted (see the module docstring); ``data``
    adds the values checks: where each unit's beat and D go."""

    def __init__(self, array, *, data: bool = False):
        super().__init__()
        self.array, self.data = array, data

    def elaborate(self, platform):
        m = self._module()
        dut = self.array
        m.submodules.dut = Fragment.get(dut, platform)     # elaborated now: its units to watch
        spec = dut.array
        p = dut.i.payload
        m.d.comb += [p.as_value().eq(AnySeq(len(p.as_value()))), dut.i.valid.eq(AnySeq(1))]
        self._assume_input(m, dut, spec)
        taken = dut.i.valid & dut.i.ready
        hist = self._history(m, spec, p, taken)
        self._outputs(m, dut, spec, hist)
        self._inputs(m, dut, spec, hist, taken)
        if self.data:
            self._values(m, dut, spec, taken)
        return m

    def _assume_input(self, m: Module, dut, spec: ArraySpec) -> None:
        """The stream rule and a well-formed wave (the contract's demands on its input)."""
        p = dut.i.payload
        waiting = Signal(name="i_waiting")          # last cycle: offered and not taken
        last = Signal(len(p.as_value()), name="i_last")
        m.d.sync += [waiting.eq(dut.i.valid & ~dut.i.ready), last.eq(p.as_value())]
        with m.If(waiting):
            m.d.comb += Assume(dut.i.valid & (p.as_value() == last))
        with m.If(dut.i.valid):
            m.d.comb += Assume((p.rows_on >= 1) & (p.rows_on <= spec.rows)
                               & (p.cols_on >= 1) & (p.cols_on <= spec.cols)
                               & (p.t < spec.interleave))

    def _history(self, m: Module, spec: ArraySpec, p, taken) -> list[dict]:
        """The waves taken 0 .. L cycles ago (index 0: this cycle's input, ``valid`` when it
        is taken), each a dict of ``valid``, ``t``, ``last``, ``rows_on``, ``cols_on``."""
        now = {"valid": taken, "t": p.t, "last": p.last, "rows_on": p.rows_on,
               "cols_on": p.cols_on}
        hist = [now]
        for j in range(1, spec.latency + 1):
            prev = hist[-1]
            row = {key: Signal(len(Value.cast(val)), name=f"h{j}_{key}")
                   for key, val in now.items()}
            m.d.sync += [row[key].eq(prev[key]) for key in row]
            hist.append(row)
        return hist

    def _outputs(self, m: Module, dut, spec: ArraySpec, hist: list[dict]) -> None:
        """``o`` is the wave taken ``L`` cycles ago, and only that."""
        old, o = hist[spec.latency], dut.o
        self.check(m, ~o.valid | old["valid"], "no output without a wave taken L cycles before")
        self.check(m, ~old["valid"] | o.valid, "each wave's output comes L cycles after it")
        mask = Cat((r < old["rows_on"]) & (c < old["cols_on"])
                   for r in range(spec.rows) for c in range(spec.cols))
        with m.If(o.valid & old["valid"]):
            self.check(m, o.payload.t == old["t"], "the output's slot is its wave's")
            self.check(m, o.payload.last == old["last"], "the output's last is its wave's")
            self.check(m, o.payload.on == mask, "the output's mask is its wave's")
        with m.If(o.valid):
            self.check(m, Cat(o.payload.on[i] | (o.payload.d[i] == 0)
                              for i in range(spec.units)).all(),
                       "a unit left out of the wave gives 0")

    def _inputs(self, m: Module, dut, spec: ArraySpec, hist: list[dict], taken) -> None:
        """A wave is taken exactly when the units, the buffers and its slot allow it."""
        p, P, L = dut.i.payload, spec.passes, spec.latency
        cap = _fetch_cycles(spec) + 1
        counted = Signal(range(cap + 1), name="fetch_cycles")
        with m.If(taken):
            m.d.sync += counted.eq(1)           # this cycle's fetch goes to the next wave
        with m.Elif(dut.i.valid & (counted < cap)):
            m.d.sync += counted.eq(counted + 1)
        units_ok = ~Cat(h["valid"] for h in hist[1:P]).any() if P > 1 else 1
        fetched = [counted * bw >= need for bw, need in _needs(spec, p.rows_on, p.cols_on,
                                                               p.new_a)]
        slot_ok = p.first | ~Cat(h["valid"] & (h["t"] == p.t) for h in hist[1:L + 1]).any()
        with m.If(taken):
            if P > 1:
                self.check(m, units_ok, "a wave is taken P cycles after the last at the earliest")
            for buf, ok in zip(("A", "B", "scale"), fetched, strict=False):
                self.check(m, ok, f"a wave is taken only with its {buf} bytes fetched")
            self.check(m, slot_ok, "a chained wave waits for its slot's results")
        with m.If(dut.i.valid & units_ok & Cat(fetched).all() & slot_ok):
            self.check(m, dut.i.ready, "a wave is taken as soon as the contract allows it")

    def _values(self, m: Module, dut, spec: ArraySpec, taken) -> None:
        """Every unit's beat and D where the contract puts them; C chained through a model
        of the accumulators, written when ``o`` shows the unit's result."""
        p, o = dut.i.payload, dut.o
        rows, cols, inter = spec.rows, spec.cols, spec.interleave
        a_bits, b_bits = len(Value.cast(p.a)) // rows, len(Value.cast(p.b)) // cols
        s_bits = len(Value.cast(p.a_scale)) // rows if "a_scale" in _fields(p) else 0
        held_a = [Signal(a_bits, name=f"held_a{r}") for r in range(rows)]
        held_s = [Signal(s_bits, name=f"held_as{r}") for r in range(rows) if s_bits]
        with m.If(taken & p.new_a):
            m.d.sync += [reg.eq(_part(p.a, r, a_bits)) for r, reg in enumerate(held_a)]
            m.d.sync += [reg.eq(_part(p.a_scale, r, s_bits)) for r, reg in enumerate(held_s)]
        beats, chained, outs, takes = [], [], [], []
        for r in range(rows):
            a_r = Mux(p.new_a, _part(p.a, r, a_bits), held_a[r])
            for c in range(cols):
                u, i = dut.units[r][c], r * cols + c
                beat = u.i.payload
                on = (r < p.rows_on) & (c < p.cols_on)
                takes.append((u.i.valid & u.i.ready) == (taken & on))
                ok = [Value.cast(beat.a) == a_r, beat.first, beat.last,
                      Value.cast(beat.b) == _part(p.b, c, b_bits)]
                if s_bits:
                    ok += [Value.cast(beat.a_scale) == Mux(p.new_a, _part(p.a_scale, r, s_bits),
                                                           held_s[r]),
                           Value.cast(beat.b_scale) == _part(p.b_scale, c, s_bits)]
                beats.append(~(taken & on) | Cat(ok).all())
                acc = Array(Signal(32, name=f"acc_{r}_{c}_{t}") for t in range(inter))
                with m.If(o.valid & o.payload.on[i]):
                    m.d.sync += acc[o.payload.t].eq(u.o.payload)
                chained.append(~(taken & on) | (beat.c == Mux(p.first, p.c[i], acc[p.t])))
                outs.append(~(o.valid & o.payload.on[i])
                            | (u.o.valid & (o.payload.d[i] == u.o.payload)))
        self.check(m, Cat(takes).all(), "each unit takes a beat exactly in its waves")
        self.check(m, Cat(beats).all(), "each unit's beat holds its row's and column's blocks")
        self.check(m, Cat(chained).all(),
                   "each unit's C is the wave's on first, else its slot's last D")
        self.check(m, Cat(outs).all(), "each output D is its unit's result")


def _fields(view) -> set[str]:
    """The field names of a struct view."""
    return {name for name, _ in view.shape()}


def _part(field, j: int, bits: int) -> Value:
    """Element ``j`` (``bits`` wide) of an array field's raw bits."""
    return Value.cast(field)[j * bits:(j + 1) * bits]
