"""Mutants of ``hdl.array.DotProductArray``: subclasses that break one rule of the timing
contract, for tests that show the array checks (Amaranth's simulator, cocotb) catch them.
Nothing here is used by the production RTL."""

from __future__ import annotations

from amaranth import Const

from hdl.array import DotProductArray

__all__ = ["NoChainWait", "NoBandwidth", "MUTANTS"]


class NoChainWait(DotProductArray):
    """Issues a chained wave without waiting for its slot's previous D (reads a stale
    accumulator)."""

    def _chain_ok(self, cmd, pending):
        return Const(1)


class NoBandwidth(DotProductArray):
    """Fetch counters always full: operands arrive without a bandwidth limit."""

    def _fetch(self, m, name, bandwidth, need, take):
        return Const(1)


MUTANTS = {"no-chain-wait": NoChainWait, "no-bandwidth": NoBandwidth}
