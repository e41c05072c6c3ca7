"""The analytic view of an array: a GEMM's cycles, utilisation, stalls and traffic in closed form.

The same :class:`~mxsim.array.ArraySpec` as the cycle model, timed without stepping it: the
GEMM's steps (waves of beats for "os", stationary tiles and streamed vectors for "ws"/"is", in
the order of :mod:`mxsim.array.spec`) fall into at most four classes (full or ragged in each
outer dimension), and each class is timed once by the same issue rules as the cycle model:

- a step issues when the units are free again (``P`` cycles per beat), when its blocks have
  arrived from the buffers (``ceil(bytes / bandwidth)`` cycles per buffer, the buffers in
  parallel) and, for a K-block of an output already started, when that output's previous D is
  back (``L`` cycles after its beat, plus the tensor memory's read latency);
- a K-block of ``s`` waves therefore takes ``max(sum of the waves' gaps, L + lat)`` cycles, and
  the GEMM ends ``L`` cycles after its last beat.

The stall split names the cycles each cause adds over the units' own ``P`` cycles per beat.
:func:`estimate` is exact (``exact`` True) where those rules are the cycle model's, which
tests/test_array_analytic.py checks against :func:`mxsim.array.cycle.simulate`; elsewhere
(``exact`` False) its cycles are a lower bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .spec import AccKind, ArrayError, ArraySpec, Dataflow, Scales

__all__ = ["Estimate", "estimate", "check", "MAX_DIM"]

#: The largest M, N or K the closed form takes (it is exact integer arithmetic, but a GEMM
#: beyond 2^31 per side is a typo).
MAX_DIM = 1 << 31


@dataclass
class Estimate:
    """A GEMM's timing on an array, from the closed form."""
    cycles: int
    utilisation: float               #: products done / (units x lanes x cycles)
    stalls: dict[str, int]           #: cycles added over the units' own passes, by cause
    traffic: dict[str, int]          #: bytes read from each buffer
    exact: bool                      #: equal to the cycle model (else a lower bound)
    detail: dict[str, Any] = field(default_factory=dict)


def check(array: ArraySpec, m: int, n: int, k: int) -> int:
    """K / k, or ArrayError (one line) when the GEMM does not fit the array's unit."""
    for name, value in (("M", m), ("N", n), ("K", k)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DIM:
            raise ArrayError(f"GEMM {name} must be an integer from 1 to {MAX_DIM}, not "
                             f"{value!r}")
    if k % array.unit.k:
        raise ArrayError(f"GEMM K ({k}) must be a multiple of unit {array.unit.name!r}'s "
                         f"instruction k ({array.unit.k})")
    return k // array.unit.k


def _feed(nbytes: int, bandwidth: int) -> int:
    return -(-nbytes // bandwidth)


def _scale_bytes(array: ArraySpec, blocks: int) -> int:
    return blocks * array.scales_per_block if array.scales is Scales.SEPARATE else 0


def _wave_gap(array: ArraySpec, a_blocks: int, b_blocks: int) -> tuple[int, dict[str, int]]:
    """Cycles between a wave and the next, and the bytes it reads, by buffer."""
    ta = {"a": a_blocks * array.block_bytes("a"), "b": b_blocks * array.block_bytes("b")}
    if array.scales is Scales.SEPARATE:
        ta["scales"] = _scale_bytes(array, a_blocks + b_blocks)
    feeds = [_feed(ta["a"], array.a_buffer.bandwidth), _feed(ta["b"], array.b_buffer.bandwidth)]
    if "scales" in ta:
        feeds.append(_feed(ta["scales"], array.scale_buffer.bandwidth))
    return max(array.passes, *feeds), ta


def _chain_wait(array: ArraySpec) -> int:
    lat = array.accumulators.latency if array.accumulators.kind is AccKind.TMEM else 0
    return array.latency + lat


def _add(total: dict[str, int], part: dict[str, int], times: int) -> None:
    for key, value in part.items():
        total[key] = total.get(key, 0) + value * times


def _os(array: ArraySpec, m: int, n: int, blocks: int) -> tuple[int, dict, dict]:
    """Issue cycles of every wave, stall cycles and traffic of an output-stationary GEMM."""
    rows, cols, inter = array.rows, array.cols, array.interleave
    span = cols * inter
    wait = _chain_wait(array)
    issue = 0
    stalls = {"operand bandwidth": 0, "chain dependency": 0}
    traffic: dict[str, int] = {}
    m_tiles = [(m // rows, rows)] + ([(1, m % rows)] if m % rows else [])
    n_tiles = [(n // span, span)] + ([(1, n % span)] if n % span else [])
    for mt, rows_on in m_tiles:
        for nt, width in n_tiles:
            count = mt * nt
            if not count:
                continue
            slots = [min(cols, width - cols * t) for t in range(inter) if cols * t < width]
            gaps, step_traffic = [], {}
            for t, cols_on in enumerate(slots):
                g, ta = _wave_gap(array, rows_on if t == 0 else 0, cols_on)
                gaps.append(g)
                _add(step_traffic, ta, 1)
            step = sum(gaps)
            period = max(step, wait)
            issue += count * ((blocks - 1) * period + step)
            stalls["operand bandwidth"] += count * blocks * (step - array.passes * len(slots))
            stalls["chain dependency"] += count * (blocks - 1) * (period - step)
            _add(traffic, step_traffic, count * blocks)
    return issue, stalls, traffic


def _stationary(array: ArraySpec, m: int, n: int, blocks: int) -> tuple[int, dict, dict]:
    """Issue cycles, stalls and traffic of a weight- or input-stationary GEMM: per stationary
    tile, its blocks loaded, then the streamed vectors one per gap; a column's partial passes
    down the rows (``L`` cycles per row)."""
    ws = array.dataflow is Dataflow.WS
    outer, stream = (n, m) if ws else (m, n)
    held, streamed = ("b", "a") if ws else ("a", "b")
    rows, cols = array.rows, array.cols
    ktiles = [(blocks // rows, rows)] + ([(1, blocks % rows)] if blocks % rows else [])
    otiles = [(outer // cols, cols)] + ([(1, outer % cols)] if outer % cols else [])
    bw = {"a": array.a_buffer.bandwidth, "b": array.b_buffer.bandwidth}
    issue = 0
    stalls = {"stationary load": 0, "operand bandwidth": 0, "accumulator ports": 0}
    traffic: dict[str, int] = {}
    ports = array.accumulators.write_ports if array.accumulators.kind is AccKind.TMEM else None
    for ot, cols_on in otiles:
        for kt, rows_on in ktiles:
            count = ot * kt
            if not count:
                continue
            load = _feed(rows_on * cols_on * array.block_bytes(held), bw[held])
            g = max(array.passes, _feed(rows_on * array.block_bytes(streamed), bw[streamed]))
            port_gap = _feed(cols_on, ports) if ports else 0
            gap = max(g, port_gap)
            issue += count * (load + stream * gap + (rows_on - 1) * array.latency)
            stalls["stationary load"] += count * load
            stalls["operand bandwidth"] += count * stream * (g - array.passes)
            stalls["accumulator ports"] += count * stream * (gap - g)
            _add(traffic, {held: rows_on * cols_on * array.block_bytes(held)}, count)
            _add(traffic, {streamed: stream * rows_on * array.block_bytes(streamed)}, count)
    return issue, stalls, traffic


def estimate(array: ArraySpec, m: int, n: int, k: int) -> Estimate:
    """The cycles, utilisation, stalls and buffer traffic of ``m x n x k`` on ``array``."""
    blocks = check(array, m, n, k)
    if array.dataflow is Dataflow.OS:
        issue, stalls, traffic = _os(array, m, n, blocks)
    else:
        issue, stalls, traffic = _stationary(array, m, n, blocks)
    cycles = issue + array.latency
    stalls["fill and drain"] = array.latency
    capacity = array.units * array.microarch.lanes * cycles
    return Estimate(cycles, m * n * k / capacity, stalls, traffic, exact=False,
                    detail={"k_blocks": blocks, "passes": array.passes,
                            "latency": array.latency})
