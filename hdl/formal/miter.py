"""Miters: a unit (the generated ``DotProductUnit``, one of its mutants) against
:class:`.reference.ReferenceDot`, with the stream handshake as properties.

Two harnesses, each a plain ``Elaboratable`` whose one port is the clock (reset held low:
registers start from their initial values), ready for :func:`amaranth.back.rtlil.
convert` and a bounded model check:

``SingleBeat``
    the datapath: one beat of free codes (``AnyConst``, ``first`` = ``last`` = 1) offered in
    cycle 0, ``o.ready`` high. Asserted: the beat is taken in cycle 0, no result before cycle
    ``latency``, and in that cycle ``o`` holds ReferenceDot's D for those codes. A bounded
    check to depth ``latency + 1`` covers every input the unit can take.
``Stream``
    the handshake: free ``i.valid``, payload and ``o.ready`` each cycle (``AnySeq``); chains
    well formed (a beat is ``first`` exactly when the previous taken beat was ``last``). A
    scoreboard computes each taken chain's D with ReferenceDot (C of a chained beat: the
    previous beat's D) and keeps the pending results in order. Asserted: no output without a
    pending result (none duplicated or made up); each output equals the oldest pending result
    (values and order; ``data=False`` leaves values out); an output held under back-pressure
    stays valid and unchanged; a one-beat chain taken with ``o.ready`` high until its result
    appears comes out exactly ``latency`` cycles after its handshake, never later (none lost).
"""

from __future__ import annotations

from amaranth import Array, ClockDomain, Elaboratable, Module, Mux, Signal
from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume

from hdl.stages import block_layout

from .reference import ReferenceDot

__all__ = ["Harness", "SingleBeat", "Stream", "CHECK_MESSAGE"]

#: The message of check ``n`` of a harness (Yosys: the ``$check`` cell's ``FORMAT``).
CHECK_MESSAGE = "check {n}: {name}"


class Harness(Elaboratable):
    """A harness owns its clock domain and a selector: ``clk`` and ``sel`` are its ports
    (``ports`` for :func:`amaranth.back.rtlil.convert`); reset is held low. Each assertion is
    made through :meth:`check`, which names it and numbers it from 1: with ``sel`` set to a
    number (Yosys ``connect -set sel N``) only that one is checked, with 0 all of them, so
    that one conversion serves a proof of each."""

    def __init__(self):
        self.domain = ClockDomain("sync")
        self.sel = Signal(16, name="sel")
        self.checks: list[str] = []

    @property
    def ports(self) -> list:
        return [self.domain.clk, self.sel]

    def _module(self) -> Module:
        m = Module()
        m.domains.sync = self.domain
        m.d.comb += self.domain.rst.eq(0)
        return m

    def single_beat(self, m: Module, unit, latency: int):
        """Make ``unit`` a submodule offered one free beat (``AnyConst``, ``first`` = ``last``
        = 1) in cycle 0, with ``o.ready`` high; the beat and the cycle counter."""
        m.submodules.dut = unit
        beat = Signal(block_layout(unit.spec), name="beat")
        m.d.comb += beat.eq(AnyConst(block_layout(unit.spec)))
        cycle = Signal(range(latency + 2), name="cycle")
        with m.If(cycle <= latency):
            m.d.sync += cycle.eq(cycle + 1)
        m.d.comb += [unit.i.payload.eq(beat), unit.i.valid.eq(cycle == 0),
                     unit.i.payload.first.eq(1), unit.i.payload.last.eq(1),
                     unit.o.ready.eq(1)]
        return beat, cycle

    def free_stream(self, m: Module, unit):
        """Make ``unit`` a submodule under a free stream environment: ``i.valid``, the
        payload and ``o.ready`` free in every cycle (``AnySeq``), chains well formed (a beat
        is ``first`` exactly when the previous beat taken was ``last``); the payload and
        whether it is taken this cycle."""
        m.submodules.dut = unit
        m.d.comb += [unit.i.payload.as_value().eq(AnySeq(block_layout(unit.spec))),
                     unit.i.valid.eq(AnySeq(1)), unit.o.ready.eq(AnySeq(1))]
        p = unit.i.payload
        taken = unit.i.valid & unit.i.ready
        in_chain = Signal(name="in_chain")
        with m.If(taken):
            m.d.sync += in_chain.eq(~p.last)
        with m.If(unit.i.valid):
            m.d.comb += Assume(p.first == ~in_chain)
        return p, taken

    def check(self, m: Module, cond, name: str) -> None:
        """Assert ``cond`` (where the caller's conditions hold) as check ``name``; the
        assertion's message is ``check N: name`` (:data:`CHECK_MESSAGE`), by which a script
        can keep one check's cell alone."""
        self.checks.append(name)
        with m.If((self.sel == 0) | (self.sel == len(self.checks))):
            m.d.comb += Assert(cond, CHECK_MESSAGE.format(n=len(self.checks), name=name))


class SingleBeat(Harness):
    """One free beat through ``unit`` (``latency`` cycles to its result) against the
    reference (see the module docstring)."""

    def __init__(self, unit, latency: int):
        super().__init__()
        self.unit, self.latency = unit, latency

    def elaborate(self, platform):
        m = self._module()
        dut = self.unit
        beat, cycle = self.single_beat(m, dut, self.latency)
        m.submodules.ref = ref = ReferenceDot(dut.spec)
        want = Signal(32, name="want")
        m.d.comb += [ref.i.eq(beat), want.eq(ref.d)]
        with m.If(cycle == 0):
            self.check(m, dut.i.ready, "the beat is taken at once")
        with m.If((cycle > 0) & (cycle < self.latency)):
            self.check(m, ~dut.o.valid, "no result before the latency")
        with m.If(cycle == self.latency):
            self.check(m, dut.o.valid, "the result appears at the latency")
            self.check(m, dut.o.payload == want, "D equals the reference's")
        return m


class Stream(Harness):
    """``unit`` under a free stream environment against a scoreboard of reference results
    (see the module docstring); ``depth``: the most results pending at once."""

    def __init__(self, unit, latency: int, depth: int, *, data: bool = True):
        super().__init__()
        self.unit, self.latency, self.depth, self.data = unit, latency, depth, data

    def elaborate(self, platform):
        m = self._module()
        spec, dut = self.unit.spec, self.unit
        p, taken = self.free_stream(m, dut)
        result = self._reference(m, spec, p, taken) if self.data else Signal(32)
        self._scoreboard(m, dut, taken & p.last, p.first, result)
        self._stability(m, dut)
        return m

    def _reference(self, m: Module, spec, p, taken):
        """D of the beat on ``i`` (C of a chained beat: the chain's last D)."""
        m.submodules.ref = ref = ReferenceDot(spec)
        prev = Signal(32, name="chain_d")
        for name, _ in block_layout(spec):
            if name != "c":
                m.d.comb += getattr(ref.i, name).eq(getattr(p, name))
        m.d.comb += ref.i.c.eq(Mux(p.first, p.c, prev))
        with m.If(taken):
            m.d.sync += prev.eq(ref.d)
        return ref.d

    def _scoreboard(self, m: Module, dut, push, first, result) -> None:
        n, lat = self.depth, self.latency
        data = Array(Signal(32, name=f"sb{j}_d") for j in range(n))
        age = Array(Signal(range(lat + 2), name=f"sb{j}_age") for j in range(n))
        clean = Array(Signal(name=f"sb{j}_clean") for j in range(n))
        head = Signal(range(n), name="sb_head")
        count = Signal(range(n + 1), name="sb_count")
        pop = dut.o.valid & dut.o.ready
        self.check(m, ~pop | (count != 0), "no output without a pending result")
        if self.data:
            with m.If(pop & (count != 0)):
                self.check(m, dut.o.payload == data[head],
                           "each output is the oldest pending result")
        with m.If(pop & (count != 0) & clean[head]):
            self.check(m, age[head] == lat, "an unstalled result comes at the latency")
        for j in range(n):
            live = _live(j, head, count, n)
            m.d.sync += [age[j].eq(Mux(age[j] > lat, age[j], age[j] + 1)),
                         clean[j].eq(clean[j] & dut.o.ready)]
            with m.If(live & clean[j]):
                self.check(m, age[j] <= lat, "no unstalled result is late or lost")
        tail = Signal(range(n), name="sb_tail")
        m.d.comb += tail.eq((head + count) % n)
        with m.If(push):
            self.check(m, (count < n) | pop, "the unit holds at most depth results")
            m.d.sync += [data[tail].eq(result), age[tail].eq(1),
                         clean[tail].eq(first & dut.o.ready)]
        with m.If(pop & (count != 0)):
            m.d.sync += head.eq(Mux(head == n - 1, 0, head + 1))
        m.d.sync += count.eq(count + push - (pop & (count != 0)))

    def _stability(self, m: Module, dut) -> None:
        held = Signal(name="o_held")            # last cycle: valid and not taken
        last = Signal(32, name="o_last")
        m.d.sync += [held.eq(dut.o.valid & ~dut.o.ready), last.eq(dut.o.payload)]
        with m.If(held):
            self.check(m, dut.o.valid, "a result under back-pressure stays valid")
            self.check(m, dut.o.payload == last,
                       "a result under back-pressure stays unchanged")


def _live(j: int, head, count, n: int):
    """Whether scoreboard slot ``j`` holds a pending result."""
    offset = Mux(head <= j, j - head, j + n - head)
    return offset < count
