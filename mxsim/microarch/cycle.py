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

from .. import formats
from ..spec import UnitSpec
from ..vectors import VectorSet
from . import MicroArch

__all__ = ["Beat", "UnitModel", "Trace", "TraceRecorder", "Driver", "patterns", "beats_of", "run",
           "GemmReport", "gemm"]


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
    """The unit's registers, stepped a cycle at a time (see ``hdl.unit``), for a design the
    RTL builds (as :func:`mxsim.design.resolve_design` resolves and checks it)."""

    def __init__(self, spec: UnitSpec, microarch: MicroArch):
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
    from ..engine import fast
    if d is None:
        d = fast.dot(spec, vs)
    nblk = vs.k // spec.k
    out = []
    for n, value in enumerate(np.asarray(d).reshape(-1)):
        for b in range(nblk):
            out.append(Beat(n, b, b == 0, b == nblk - 1, int(value) if b == nblk - 1 else None))
    return out


#: The flags byte of one cycle of a trace record: which handshake signals were high.
IN_VALID, IN_READY, OUT_VALID, OUT_READY = 1, 2, 4, 8
#: A trace record starts with this u32 (``MXT1``), then a u32 0, u64 cycles, u8 flags per
#: cycle, u32 ``o.payload`` per cycle; little-endian. ``testbenches/unit/harness.cpp`` writes it
# too.
TRACE_MAGIC = 0x3154584D


@dataclass
class Trace:
    """Per-cycle ``i.valid``, ``i.ready``, ``o.valid``, ``o.ready`` and ``o.payload`` (0 when
    not valid), and the output values in order (the payloads of the cycles with ``o.valid``
    and ``o.ready``)."""
    in_valid: npt.NDArray[np.bool_]
    in_ready: npt.NDArray[np.bool_]
    out_valid: npt.NDArray[np.bool_]
    out_ready: npt.NDArray[np.bool_]
    out_payload: npt.NDArray[np.uint32]
    results: list[int] = field(default_factory=list)

    @property
    def cycles(self) -> int:
        return len(self.in_valid)

    def to_bytes(self) -> bytes:
        """The trace as a record (layout at :data:`TRACE_MAGIC`); :meth:`from_bytes` reads it
        back equal."""
        flags = (self.in_valid * IN_VALID | self.in_ready * IN_READY | self.out_valid * OUT_VALID
                 | self.out_ready * OUT_READY).astype(np.uint8)
        head = np.array([TRACE_MAGIC, 0], "<u4").tobytes() + np.uint64(self.cycles).tobytes()
        return head + flags.tobytes() + self.out_payload.astype("<u4").tobytes()

    @classmethod
    def from_bytes(cls, raw: bytes) -> Trace:
        """The trace in a record (as :meth:`to_bytes` and the bulk harness write it).

        Raises
        ------
        ValueError
            If ``raw`` is not one whole trace record.
        """
        magic = int(np.frombuffer(raw, "<u4", 1)[0]) if len(raw) >= 16 else None
        cycles = int(np.frombuffer(raw, "<u8", 1, 8)[0]) if magic == TRACE_MAGIC else -1
        if cycles < 0 or len(raw) != 16 + 5 * cycles:
            raise ValueError(f"Trace record must be the magic, the cycle count and 5 bytes per "
                             f"cycle, not {len(raw)} bytes" + (
                                 f" for {cycles} cycles" if cycles >= 0 else ""))
        flags = np.frombuffer(raw, np.uint8, cycles, 16)
        payload = np.frombuffer(raw, "<u4", cycles, 16 + cycles).astype(np.uint32)
        in_valid, in_ready, out_valid, out_ready = (
            (flags & bit) != 0 for bit in (IN_VALID, IN_READY, OUT_VALID, OUT_READY))
        return cls(in_valid, in_ready, out_valid, out_ready, payload,
                   payload[out_valid & out_ready].tolist())


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


class TraceRecorder:
    """The handshake protocol of every testbench, one cycle at a time, and its trace.

    Each cycle, :meth:`offer` says what to drive (the :class:`Driver`'s beat, or None for
    ``i.valid`` low, and ``o.ready`` from the ready pattern); then :meth:`sample` takes what
    the design answered once settled (``i.ready``, ``o.valid``, ``o.payload``), records the
    cycle, hands the beat over on an input handshake and keeps the value of an output
    handshake. The cycle model, Amaranth's simulator and the cocotb testbench all drive
    through one, so their traces compare cycle for cycle (the bulk harness writes the same
    record in C++).
    """

    def __init__(self, beats: list, gaps: npt.NDArray[np.bool_], ready: npt.NDArray[np.bool_]):
        self.driver = Driver(beats, gaps)
        self.ready = ready
        self.results: list[int] = []
        self.cycle = 0
        self._o_ready = False
        # Per cycle: i.valid, i.ready, o.valid, o.ready, o.payload.
        self._cols: tuple[list, ...] = ([], [], [], [], [])

    def offer(self):
        """This cycle's input beat (None: ``i.valid`` low) and ``o.ready``."""
        beat = self.driver.offer(self.cycle)
        self._o_ready = o_ready = bool(self.ready[self.cycle % len(self.ready)])
        return beat, o_ready

    def sample(self, in_ready, out_valid, out_payload) -> None:
        """Record this cycle's outputs (``out_payload`` is read only while ``out_valid``) and
        go to the next cycle."""
        drv, o_ready = self.driver, self._o_ready
        offered = drv.offering
        iv, ir, ov, o_r, op = self._cols
        value = int(out_payload) if out_valid else 0
        if offered and in_ready:
            drv.taken()
        if out_valid and o_ready:
            self.results.append(value)
        iv.append(offered)
        ir.append(in_ready)
        ov.append(out_valid)
        o_r.append(o_ready)
        op.append(value)
        self.cycle += 1

    def trace(self) -> Trace:
        """Every cycle recorded so far."""
        iv, ir, ov, o_r, op = self._cols
        return Trace(np.array(iv, bool), np.array(ir, bool), np.array(ov, bool),
                     np.array(o_r, bool), np.array(op, np.uint32), list(self.results))


def run(model: UnitModel, beats: list[Beat], gaps: npt.NDArray[np.bool_],
        ready: npt.NDArray[np.bool_], max_cycles: int | None = None) -> Trace:
    """Drive ``model`` with ``beats`` until every last block's result has left."""
    want = sum(b.last for b in beats)
    rec = TraceRecorder(beats, gaps, ready)
    limit = max_cycles or (len(beats) + 4) * (model.latency + 4) * 8 + len(ready)
    while len(rec.results) < want:
        if rec.cycle >= limit:
            raise RuntimeError(f"cycle model stuck after {rec.cycle} cycles "
                               f"({len(rec.results)} of {want} results)")
        beat, o_ready = rec.offer()
        rec.sample(*model.step(beat is not None, beat, o_ready))
    return rec.trace()


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
    The design is one the RTL builds (:func:`mxsim.design.resolve_design` checks it).
    """
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
