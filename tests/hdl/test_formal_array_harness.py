"""hdl.formal.array's ArrayStream without a solver: the checks it states for an array, its
default depth, and the small array the proofs in CI use (tests/testbenches/
test_formal_array.py, ``small_array``) stalling for every cause the handshake has."""

import pytest

from mxsim.array import ArraySpec, Buffer
from mxsim.array.cycle import simulate
from mxsim.design import resolve_design

pytest.importorskip("amaranth")

from amaranth.back import rtlil  # noqa: E402

from hdl.array import DotProductArray  # noqa: E402
from hdl.formal.array import ArrayStream, array_depth  # noqa: E402
from testbenches.formal.array import small_array as ci_array  # noqa: E402

HANDSHAKE = [
    "no output without a wave taken L cycles before",
    "each wave's output comes L cycles after it",
    "the output's slot is its wave's",
    "the output's last is its wave's",
    "the output's mask is its wave's",
    "a unit left out of the wave gives 0",
    "a wave is taken P cycles after the last at the earliest",
    "a wave is taken only with its A bytes fetched",
    "a wave is taken only with its B bytes fetched",
    "a chained wave waits for its slot's results",
    "a wave is taken as soon as the contract allows it",
]
VALUES = [
    "each unit takes a beat exactly in its waves",
    "each unit's beat holds its row's and column's blocks",
    "each unit's C is the wave's on first, else its slot's last D",
    "each output D is its unit's result",
]


def _fp4_separate() -> ArraySpec:
    spec, ua = resolve_design("blackwell-mxf8f6f4", "e2m1", "e2m1", {"k": 8, "block": 8}, 4, 1)
    return ArraySpec(name="fp4-1x2", unit=spec, microarch=ua, rows=1, cols=2, interleave=3,
                     scales="separate", scale_buffer=Buffer(bytes=64, bandwidth=1),
                     a_buffer=Buffer(bytes=4096, bandwidth=4),
                     b_buffer=Buffer(bytes=4096, bandwidth=8))


def _checks(arr: ArraySpec, data: bool = False) -> list[str]:
    harness = ArrayStream(DotProductArray(arr), data=data)
    text = rtlil.convert(harness, name="top", ports=harness.ports)
    assert "module \\top" in text
    return harness.checks


def test_array_stream_checks_of_the_ci_array():
    assert _checks(ci_array()) == HANDSHAKE
    assert _checks(ci_array(), data=True) == HANDSHAKE + VALUES


def test_array_stream_checks_follow_the_array():
    """One pass per beat: no spacing check; separate scales: a scale-bytes check; scaled
    values compare the scale fields too (the harness converts)."""
    one_pass = [c for c in HANDSHAKE if "P cycles" not in c]
    assert _checks(ci_array(lanes=2)) == one_pass
    fetched = HANDSHAKE.index("a wave is taken only with its B bytes fetched") + 1
    separate = HANDSHAKE[:fetched] + ["a wave is taken only with its scale bytes fetched"] \
        + HANDSHAKE[fetched:]
    assert _checks(_fp4_separate(), data=True) == separate + VALUES


def test_array_depth_covers_a_fetch_and_three_chained_waves():
    arr = ci_array()
    assert (arr.passes, arr.latency) == (2, 4)
    assert array_depth(arr) == 2 + 3 * (4 + 1) + 2          # A: 4 bytes at 2 a cycle
    sep = _fp4_separate()
    assert array_depth(sep) == (1 + 2) * 1 + 3 * (sep.latency + 1) + 2   # scales at 1 a cycle


def test_ci_array_stalls_for_every_cause():
    """The proofs' array holds waves back for the units (P = 2), for operand bandwidth and
    for the chain: each condition of i.ready is exercised (the cycle model's stalls)."""
    arr = ci_array()
    run = simulate(arr, 2, 8, 8)
    assert run.stalls["chain dependency"] > 0 and run.stalls["operand bandwidth"] > 0
    assert run.busy < arr.units * run.cycles
