"""The cycle-level model of a dot-product unit, and the throughput of arrays of them.

:class:`UnitModel` is the RTL's machine (``hdl.unit.DotProductUnit``; the timing contract is
in that module's docstring and in docs/rtl.md), stepped one clock at a time: for each cycle it
gives ``i.ready``, ``o.valid`` and the output value exactly as the RTL drives them. Values come
from the numerics engine (the same spec), attached to each dot product's last block, so the
model never re-implements arithmetic. It imports neither ``hdl`` nor amaranth.

:func:`run` drives a model with a vector set under a valid-gap and a ready pattern (the same
driver the testbenches use) and returns the per-cycle trace. :func:`gemm` is the throughput
view: an M x N x K GEMM on an R x C array of units fed at a given operand bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from . import formats
from .microarch import MicroArch, check_rtl
from .spec import UnitSpec
from .vectors import VectorSet

__all__ = ["Beat", "UnitModel", "Trace", "beats_of", "run", "GemmReport", "gemm"]


@dataclass(frozen=True)
class Beat:
    """One input beat: block ``block`` of dot product ``dot``; ``value`` (the FP32 code of D)
    on the last block."""
    dot: int
    block: int
    first: bool
    last: bool
    value: int | None = None


class UnitModel:
    """The unit's registers, stepped a cycle at a time (see ``hdl.unit``)."""

    def __init__(self, spec: UnitSpec, microarch: MicroArch):
        check_rtl(spec, microarch)
        self.spec, self.microarch = spec, microarch
        self.passes = microarch.passes(spec)
        self.stages = microarch.stages
        self.reset()

    @property
    def latency(self) -> int:
        return self.microarch.latency(self.spec)

    def reset(self) -> None:
        self.s0: Beat | None = None
        self.p = 0
        self.post: list[Beat | None] = [None] * self.stages
        self.out: Beat | None = None
        self.cycle = 0

    def outputs(self, out_ready: bool) -> tuple[bool, bool, int | None]:
        """``(i.ready, o.valid, o.payload)`` this cycle (``o.ready`` reaches ``i.ready``
        through the stall)."""
        stall = self.out is not None and not out_ready
        done = self._go(stall) and self.p == self.passes - 1
        value = self.out.value if self.out is not None else None
        return self.s0 is None or done, self.out is not None, value

    def _go(self, stall: bool) -> bool:
        busy = any(b is not None for b in self.post)
        return self.s0 is not None and (self.s0.first or not busy) and not stall

    def step(self, in_valid: bool, beat: Beat | None, out_ready: bool
             ) -> tuple[bool, bool, int | None]:
        """One clock: the outputs of this cycle (as :meth:`outputs`), then the edge."""
        in_ready, out_valid, value = self.outputs(out_ready)
        stall = out_valid and not out_ready
        go = self._go(stall)
        done = go and self.p == self.passes - 1
        out = None if (out_valid and out_ready) else self.out
        if not stall:
            leaving = self.post[-1]
            if leaving is not None and leaving.last:
                out = leaving
            self.post = [self.s0 if done else None] + self.post[:-1]
        self.out = out
        if in_valid and in_ready:
            self.s0, self.p = beat, 0
        else:
            if done:
                self.s0 = None
            if go and not done:
                self.p += 1
        self.cycle += 1
        return in_ready, out_valid, value


def beats_of(spec: UnitSpec, vs: VectorSet, d: npt.NDArray | None = None) -> list[Beat]:
    """The beats of every dot product of ``vs`` (batch, row, column order), each a chain of
    ``K / k`` blocks; ``d`` (default: the engine's result) gives the last blocks' values."""
    from .engine import fast
    if d is None:
        d = fast.dot(spec, vs)
    nblk = vs.k // spec.k
    out = []
    for n, value in enumerate(np.asarray(d).reshape(-1)):
        for b in range(nblk):
            out.append(Beat(n, b, b == 0, b == nblk - 1, int(value) if b == nblk - 1 else None))
    return out


@dataclass
class Trace:
    """Per-cycle ``i.valid``, ``i.ready``, ``o.valid``, ``o.ready`` and ``o.payload`` (0 when
    not valid), and the output values in order."""
    in_valid: npt.NDArray[np.bool_]
    in_ready: npt.NDArray[np.bool_]
    out_valid: npt.NDArray[np.bool_]
    out_ready: npt.NDArray[np.bool_]
    out_payload: npt.NDArray[np.uint32]
    results: list[int] = field(default_factory=list)

    @property
    def cycles(self) -> int:
        return len(self.in_valid)


class Driver:
    """The testbenches' source: beat ``n`` is offered from the first cycle at or after the
    previous handshake whose ``gaps`` bit is 1, and held until taken (AXI-stream rules).
    ``beats`` may be any items (the cocotb testbench offers payload words)."""

    def __init__(self, beats: list, gaps):
        self.beats, self.gaps, self.n, self.offering = beats, gaps, 0, False

    def offer(self, cycle: int):
        if not self.offering and self.n < len(self.beats) and self.gaps[cycle % len(self.gaps)]:
            self.offering = True
        return self.beats[self.n] if self.offering else None

    def taken(self) -> None:
        self.n += 1
        self.offering = False

    @property
    def done(self) -> bool:
        return self.n == len(self.beats)


def patterns(cycles: int, *, valid_p: float = 1.0, ready_p: float = 1.0,
             seed: int = 0) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Seeded random valid-gap and ready patterns (probability of 1 per cycle)."""
    rng = np.random.default_rng([seed, 7])
    return rng.random(cycles) < valid_p, rng.random(cycles) < ready_p


def run(model: UnitModel, beats: list[Beat], gaps: npt.NDArray[np.bool_],
        ready: npt.NDArray[np.bool_], max_cycles: int | None = None) -> Trace:
    """Drive ``model`` with ``beats`` until every last block's result has left."""
    want = sum(b.last for b in beats)
    drv = Driver(beats, gaps)
    cols: dict[str, list] = {k: [] for k in ("iv", "ir", "ov", "or", "op")}
    results: list[int] = []
    limit = max_cycles or (len(beats) + 4) * (model.latency + 4) * 8 + len(ready)
    c = 0
    while len(results) < want:
        if c >= limit:
            raise RuntimeError(f"cycle model stuck after {c} cycles ({len(results)} of {want} "
                               f"results)")
        beat = drv.offer(c)
        o_ready = bool(ready[c % len(ready)])
        i_ready, o_valid, value = model.step(beat is not None, beat, o_ready)
        if beat is not None and i_ready:
            drv.taken()
        if o_valid and o_ready:
            results.append(value)
        cols["iv"].append(beat is not None)
        cols["ir"].append(i_ready)
        cols["ov"].append(o_valid)
        cols["or"].append(o_ready)
        cols["op"].append(value if o_valid else 0)
        c += 1
    return Trace(np.array(cols["iv"]), np.array(cols["ir"]), np.array(cols["ov"]),
                 np.array(cols["or"]), np.array(cols["op"], np.uint32), results)


@dataclass
class GemmReport:
    """Cycles, utilisation and where the cycles went, for one GEMM on an array of units."""
    cycles: int
    dots_per_cycle: float
    utilisation: float              #: useful products / (units x lanes x cycles)
    stalls: dict[str, int]          #: cycles lost, by cause
    detail: dict[str, float]

    def table(self) -> str:
        lines = [f"cycles        {self.cycles}",
                 f"dots/cycle    {self.dots_per_cycle:.3f}",
                 f"utilisation   {self.utilisation:.1%}"]
        lines += [f"  {k:24} {v}" for k, v in self.stalls.items()]
        return "\n".join(lines)


def gemm(spec: UnitSpec, microarch: MicroArch, m: int, n: int, k: int, *, rows: int,
         cols: int, bandwidth: float) -> GemmReport:
    """An M x N x K GEMM on a ``rows`` x ``cols`` array of units (output-stationary: each
    unit owns one output and runs its K/k blocks as one chain).

    Per block step the array needs one A block per row and one B block per column (element
    bits and one scale byte each), broadcast along the array, at ``bandwidth`` bytes/cycle.
    A step takes the longer of the chain interval (``MicroArch.interval(chained=True)``) and
    the feed time; each output tile adds the pipeline's fill and drain. Stall causes: the
    chain's wait for its previous result, operand bandwidth, and idle units at ragged edges.
    """
    check_rtl(spec, microarch)
    if k % spec.k:
        raise ValueError(f"K ({k}) must be a multiple of the unit's k ({spec.k})")
    fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)
    scale = 1 if spec.scale_format is not None else 0
    bytes_step = rows * (spec.k * fa.bits / 8 + scale) + cols * (spec.k * fb.bits / 8 + scale)
    passes = microarch.passes(spec)
    chain = microarch.interval(spec, chained=True)
    feed = bytes_step / bandwidth
    step = max(chain, math.ceil(feed))
    blocks = k // spec.k
    tiles = math.ceil(m / rows) * math.ceil(n / cols)
    tile_cycles = blocks * step + microarch.latency(spec) - passes
    cycles = tiles * tile_cycles
    useful = m * n * k
    capacity = rows * cols * microarch.lanes * cycles
    per_tile_pass = tiles * blocks * passes
    stalls = {
        "chain dependency": tiles * blocks * (chain - passes),
        "operand bandwidth": tiles * blocks * (step - chain),
        "fill and drain": tiles * (microarch.latency(spec) - passes),
    }
    edge = 1 - (m * n) / (math.ceil(m / rows) * rows * math.ceil(n / cols) * cols)
    return GemmReport(cycles, m * n / cycles, useful / capacity, stalls,
                      {"passes_per_block": passes, "step": step, "feed_cycles": feed,
                       "busy_pass_cycles": per_tile_pass, "idle_unit_fraction": edge})
