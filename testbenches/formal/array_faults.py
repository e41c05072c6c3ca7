"""Handshake mutants of ``hdl.array.DotProductArray`` for proofs: subclasses that each break
one rule of the array's timing contract the way a hand-written array could, for tests that
show :func:`testbenches.formal.array.prove_array` catches them. Nothing here is used by the
production RTL (its hooks are the array's own methods, overridden).

Each entry of :data:`ARRAY_FAULTS` names the mutant, its class and the check of
:class:`hdl.formal.array.ArrayStream` that fails on it (and whether that is a values check,
``data``).
"""

from __future__ import annotations

from amaranth import Cat, Signal

from hdl.array import DotProductArray

__all__ = ["EarlyChain", "EarlyFetch", "WrongSlot", "ReversedColumns", "ARRAY_FAULTS"]


class EarlyChain(DotProductArray):
    """Frees a slot in the cycle its last wave's results are written (the count it will have
    after this cycle), not the cycle after: a chained wave taken then reads the accumulator
    before that D is in it (there is no bypass)."""

    def _chain_ok(self, cmd, pending):
        self._freed = Signal(name="slot_freed_now")
        self._pending = pending
        return super()._chain_ok(cmd, pending) | self._freed

    def _control(self, m, lead):
        take, back, head = super()._control(m, lead)
        cmd, tw = self.i.payload, len(self.i.payload.t)
        m.d.comb += self._freed.eq(back & (head[:tw] == cmd.t) & (self._pending[cmd.t] == 1))
        return take, back, head


class EarlyFetch(DotProductArray):
    """Counts the bytes arriving this cycle as already fetched: a wave is taken in the cycle
    its last byte arrives instead of the cycle after."""

    def _fetch(self, m, name, bandwidth, need, take):
        top = max(bandwidth, 1)
        count = Signal(range(self._max_need + 2 * top + 1), name=f"{name}_count")
        with m.If(take):
            m.d.sync += count.eq(bandwidth)
        with m.Elif(self.i.valid & (count < need)):
            m.d.sync += count.eq(count + bandwidth)
        return count + bandwidth >= need


class WrongSlot(DotProductArray):
    """Labels each output (and picks the accumulator it writes) with the slot of the wave on
    the input instead of the wave that left the in-flight queue."""

    def _control(self, m, lead):
        take, back, head = super()._control(m, lead)
        tw = len(self.i.payload.t)
        return take, back, Cat(self.i.payload.t, head[tw:])


class ReversedColumns(DotProductArray):
    """Wires the columns of units in reverse order: unit ``(r, c)`` sits where the datapath
    expects ``(r, cols - 1 - c)`` (its B blocks, its place in ``o.d``, its enable)."""

    def _datapath(self, m, units, take, back, head):
        super()._datapath(m, [row[::-1] for row in units], take, back, head)


#: name: (class, the check that fails on it, whether that check needs ``data``)
ARRAY_FAULTS = {
    "early-chain": (EarlyChain, "a chained wave waits for its slot's results", False),
    "early-fetch": (EarlyFetch, "a wave is taken only with its A bytes fetched", False),
    "wrong-slot": (WrongSlot, "the output's slot is its wave's", False),
    "reversed-columns": (ReversedColumns, "each unit's beat holds its row's and column's "
                                          "blocks", True),
}
