"""The array cycle model: closed forms where the timing is obvious, invariants on random arrays
and GEMMs, D's bits from the engine in each dataflow's order, and one-line errors."""

import math

import numpy as np
import pytest

from mxsim import units, vectors
from mxsim.array import Accumulators, ArrayError, ArraySpec, Buffer, plan, values
from mxsim.array.cycle import STALL_CAUSES, simulate
from mxsim.engine import fast
from mxsim.microarch import MicroArch

BIG = 1 << 20


def _unit(scaled=False):
    if scaled:
        return units.get("blackwell-mxf8f6f4").spec_for_formats("e4m3", "e2m1")
    return units.get("hopper-wgmma").spec_for_formats("e4m3", "e5m2")


def _array(scaled=False, **kw):
    base = dict(unit=_unit(scaled), rows=2, cols=2, microarch=MicroArch(lanes=8, stages=1),
                a_buffer=Buffer(bytes=BIG, bandwidth=BIG), b_buffer=Buffer(bytes=BIG,
                                                                          bandwidth=BIG))
    base.update(kw)
    return ArraySpec(**base)


def _operands(arr, m, n, k, seed=0, family="normal", with_c=True):
    u = arr.unit
    return vectors.generate(family, a_format=u.a_format, b_format=u.b_format, m=m, n=n, k=k,
                            scale_format=u.scale_format, block=u.block, with_c=with_c,
                            seed=seed)


def _run(arr, vs, **kw):
    return simulate(arr, vs.m, vs.n, vs.k, a=vs.a, b=vs.b, c=vs.c, a_scale=vs.a_scale,
                    b_scale=vs.b_scale, **kw)


def test_array_os_closed_form_one_wave_per_p():
    """Unlimited bandwidth and enough interleave: a wave every P cycles from cycle 1 (B's
    first blocks take one cycle), the last D L cycles after the last issue."""
    arr = _array(interleave=4)                     # P = 4, L = 6: (L + 1) / P <= 4
    p, lat = arr.passes, arr.latency
    m, n, k = 4, 16, 32 * 5
    run = simulate(arr, m, n, k)
    waves = len(plan.os_waves(arr, m, n, k))
    assert waves == (m // 2) * (n // 8) * 5 * 4
    assert run.cycles == 1 + (waves - 1) * p + lat + 1
    assert run.busy == waves * p * arr.units
    assert run.stalls["chain dependency"] == 0
    assert run.stalls["operand bandwidth"] == arr.units          # cycle 0: the first fetch
    assert run.stalls["fill and drain"] == arr.units * (lat - p + 1)
    assert run.utilisation == pytest.approx(run.busy / (4 * run.cycles))


def test_array_os_chain_bound_without_interleave():
    """Interleave 1: each K-block waits for the previous one's D (L + 1 cycles apart)."""
    arr = _array(interleave=1)
    lat = arr.latency
    run = simulate(arr, 2, 2, 32 * 6)
    assert run.cycles == 1 + 5 * (lat + 1) + lat + 1
    assert run.stalls["chain dependency"] == arr.units * 5 * (lat + 1 - arr.passes)


def test_array_os_bandwidth_bound():
    """B's bandwidth below a wave's bytes: a wave every ceil(bytes / bandwidth) cycles."""
    arr = _array(interleave=8, b_buffer=Buffer(bytes=BIG, bandwidth=5))
    need = 2 * arr.block_bytes("b")                # two columns of B per wave
    gap = math.ceil(need / 5)
    assert gap > arr.passes
    run = simulate(arr, 2, 16, 32)
    assert run.cycles == gap + 7 * gap + arr.latency + 1
    assert run.stalls["operand bandwidth"] > 0 and run.stalls["chain dependency"] == 0


def test_array_tmem_unlimited_is_registers():
    """tmem with unlimited ports and latency 0 is the register timing, cycle for cycle."""
    arr = _array(interleave=2, b_buffer=Buffer(bytes=BIG, bandwidth=40))
    tm = arr.replace(accumulators=Accumulators(kind="tmem", read_ports=64, write_ports=64,
                                               latency=0))
    a, b = simulate(arr, 3, 7, 96, record=True), simulate(tm, 3, 7, 96, record=True)
    assert a.cycles == b.cycles
    assert np.array_equal(a.trace.issue, b.trace.issue)
    assert np.array_equal(a.d_cycle, b.d_cycle)
    slow = simulate(tm.replace(accumulators=Accumulators(kind="tmem", read_ports=1,
                                                         write_ports=1, latency=3)), 3, 7, 96)
    assert slow.cycles > a.cycles and slow.stalls["accumulator port"] > 0


CASES = [(df, acc, scaled, sep) for df in ("os", "ws", "is") for acc in ("registers", "tmem")
         for scaled, sep in ((False, False), (True, True))]


@pytest.mark.parametrize("df,acc,scaled,sep", CASES,
                         ids=[f"{d}-{a}-{'sep' if s else 'plain'}" for d, a, _, s in CASES])
def test_array_invariants_random(df, acc, scaled, sep):
    """Random arrays and GEMMs: busy + stalls cover units x cycles, every output appears once
    the run is over, traffic as the plan says, D from the engine in the dataflow's order."""
    rng = np.random.default_rng(abs(hash((df, acc, scaled, sep))) % 2**32)
    for trial in range(3):
        kw = dict(rows=int(rng.integers(1, 4)), cols=int(rng.integers(1, 4)), dataflow=df,
                  interleave=int(rng.integers(1, 4)),
                  a_buffer=Buffer(bytes=BIG, bandwidth=int(rng.integers(1, 80))),
                  b_buffer=Buffer(bytes=BIG, bandwidth=int(rng.integers(1, 80))),
                  accumulators=Accumulators(kind=acc, read_ports=int(rng.integers(1, 5)),
                                            write_ports=int(rng.integers(1, 5)),
                                            latency=int(rng.integers(0, 3))),
                  microarch=MicroArch(lanes=int(rng.choice([8, 16, 32])),
                                      stages=int(rng.integers(1, 4))))
        if sep:
            kw.update(scales="separate", scale_buffer=Buffer(bytes=64, bandwidth=1))
        arr = _array(scaled, **kw)
        m, n = int(rng.integers(1, 7)), int(rng.integers(1, 7))
        k = arr.unit.k * int(rng.integers(1, 6))
        vs = _operands(arr, m, n, k, seed=trial, with_c=trial != 1)
        run = _run(arr, vs)
        assert set(run.stalls) == set(STALL_CAUSES)
        assert run.busy + sum(run.stalls.values()) == arr.units * run.cycles
        assert run.busy == arr.passes * m * n * (k // arr.unit.k)
        assert 0 < run.utilisation <= 1
        assert (run.d_cycle >= 0).all() and run.d_cycle.max() < run.cycles
        assert run.traffic["D out"] == 4 * m * n
        assert run.traffic["accumulator writes"] >= 4 * m * n
        elems = m * k * arr.element_bytes("a") // arr.unit.k
        assert run.traffic["A"] >= elems                 # every block of A at least once
        if df == "os":
            assert run.traffic["A"] == (elems if sep else m * (k // arr.unit.k)
                                        * arr.block_bytes("a")) * math.ceil(
                n / (arr.cols * arr.interleave))
        assert np.array_equal(run.d, fast.dot(values.unit_for(arr), vs))


def test_array_chain_of_instructions_is_the_engine_dot():
    """Each beat's D from the engine, chained through the accumulator, is the engine's dot
    over the whole K (the reference the RTL's per-beat outputs are held to)."""
    for scaled in (False, True):
        arr = _array(scaled, interleave=2)
        for fam in ("normal", "specials", "cancellation", "one-large"):
            vs = _operands(arr, 3, 5, arr.unit.k * 4, seed=3, family=fam)
            run = _run(arr, vs, record=True)
            assert np.array_equal(run.chain[..., -1], run.d)
            assert np.array_equal(run.d, fast.dot(arr.unit, vs))


def test_array_dataflow_changes_bits_only_with_tmem_partials():
    """ws/is with registers chain K as os does (same bits); with tmem each K-tile's partial
    is added in FP32 (the engine's promotion), which rounds differently on some outputs."""
    arr = _array(rows=2, cols=3)
    vs = _operands(arr, 6, 6, arr.unit.k * 6, seed=9, family="cancellation")
    d_os = _run(arr, vs).d
    for df in ("ws", "is"):
        assert np.array_equal(_run(arr.replace(dataflow=df), vs).d, d_os)
        tm = arr.replace(dataflow=df, accumulators=Accumulators(kind="tmem"))
        d = _run(tm, vs).d
        promoted = arr.unit.replace(promote_every=2, promote_rounding="rne")
        assert np.array_equal(d, fast.dot(promoted, vs))
        assert (d != d_os).any()


def test_array_ws_is_mirror():
    """is on (M, N) has the timing of ws on (N, M) with A and B's buffers swapped."""
    arr = _array(rows=3, cols=2, dataflow="ws", a_buffer=Buffer(bytes=BIG, bandwidth=20),
                 b_buffer=Buffer(bytes=BIG, bandwidth=70))
    mirror = arr.replace(dataflow="is", a_buffer=arr.b_buffer, b_buffer=arr.a_buffer)
    a, b = simulate(arr, 5, 7, 32 * 7), simulate(mirror, 7, 5, 32 * 7)
    assert a.cycles == b.cycles and a.stalls == b.stalls
    assert np.array_equal(a.d_cycle, b.d_cycle.T)
    assert (a.traffic["A"], a.traffic["B"]) == (b.traffic["B"], b.traffic["A"])


def test_array_ws_stationary_load_and_skew():
    """ws: the first beat waits for the stationary tile; row r starts (L + 1) r later."""
    arr = _array(rows=3, cols=2, dataflow="ws", b_buffer=Buffer(bytes=BIG, bandwidth=8))
    run = simulate(arr, 4, 2, 32 * 3)
    load = math.ceil(3 * 2 * arr.element_bytes("b") / 8)
    assert run.stalls["stationary load"] == arr.cols * load    # the top row waits; the rest skew
    # The last output: row 2 issues its 4th beat (4 - 1) P after its first, which is
    # (L + 1) * 2 after the top row's first, which follows the load and A's fetch.
    assert run.cycles > load + 2 * (arr.latency + 1) + 3 * arr.passes + arr.latency


BAD = [
    (dict(m=0, n=1, k=32), "M must be a positive integer"),
    (dict(m=1, n=1, k=48), "multiple of unit"),
    (dict(m=1, n=True, k=32), "N must be a positive integer"),
    (dict(m=1, n=1, k=32, c=np.zeros((1, 1), np.uint32)), "C and scales need A and B"),
    (dict(m=1, n=1, k=32, a=np.zeros((1, 32), np.uint8)), "give both A and B"),
    (dict(m=2, n=1, k=32, a=np.zeros((1, 32), np.uint8), b=np.zeros((32, 1), np.uint8)),
     "must be A (2, 32)"),
    (dict(m=1, n=1, k=32, a=np.zeros((1, 32), np.float32), b=np.zeros((32, 1), np.uint8)),
     "GEMM operands:"),
    (dict(m=1 << 12, n=1 << 12, k=1 << 12), "use the analytic view"),
]


@pytest.mark.parametrize("kw,msg", BAD, ids=[m for _, m in BAD])
def test_array_simulate_bad_input(kw, msg):
    with pytest.raises(ArrayError) as err:
        simulate(_array(), **kw)
    assert msg in str(err.value) and "\n" not in str(err.value)


def test_array_simulate_bad_input_stationary():
    with pytest.raises(ArrayError, match="use the analytic view"):
        simulate(_array(dataflow="ws"), 1 << 13, 1 << 12, 1 << 12)
    with pytest.raises(ArrayError, match="already promotes"):
        values.unit_for(_array(dataflow="ws", accumulators=Accumulators(kind="tmem"),
                               unit=_unit().replace(promote_every=4)))
