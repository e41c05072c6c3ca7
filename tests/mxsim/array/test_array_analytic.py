"""mxsim.array.analytic: the closed form equals the array cycle model where it says so.

Random arrays (units with and without block scales, 1 to 8 lanes, 1 to 3 stages, ragged
tiles, interleave beyond the columns, buffers of 1 byte per cycle up, inline and separate
scales, register and tmem accumulators with few or many ports) and small GEMMs: for
output-stationary arrays (always ``exact``) its cycles, busy unit-cycles, stalls by cause and
traffic equal :func:`mxsim.array.cycle.simulate`'s, tensor-memory write queues that carry
from tile to tile included; for weight- and input-stationary ones too wherever ``exact`` (no
row waits for a tensor memory's adder), and elsewhere its cycles are a lower bound, with busy
unit-cycles and traffic equal.
"""

import random

import pytest

from mxsim.array import ArrayError, ArraySpec, Buffer, analytic, cycle
from mxsim.design import resolve_design
from mxsim.microarch import MicroArch
from mxsim.spec import UnitSpec

MXF8, _ = resolve_design("blackwell-mxf8f6f4", "e4m3", "e4m3", lanes=8)
MAC = UnitSpec(name="mac-e4m3", a_format="e4m3", b_format="e4m3", k=1, frac_bits=25)


def _array(rng: random.Random) -> ArraySpec:
    u = rng.choice([MXF8, MAC])
    lanes = rng.choice([x for x in (1, 2, 4, 8, 32) if u.k % x == 0])
    sep = u.scale_format is not None and rng.random() < 0.5
    return ArraySpec(
        unit=u, microarch=MicroArch(lanes, rng.choice([1, 2, 3])), rows=rng.randint(1, 4),
        cols=rng.randint(1, 4), interleave=rng.choice([1, 2, 3, 5]),
        a_buffer=Buffer(bytes=1 << 20, bandwidth=rng.choice([1, 7, 33, 256])),
        b_buffer=Buffer(bytes=1 << 20, bandwidth=rng.choice([1, 5, 64, 256])),
        scales="separate" if sep else "inline",
        scale_buffer=Buffer(bytes=1 << 20, bandwidth=rng.choice([1, 2, 8])) if sep else None,
        accumulators={"kind": rng.choice(["registers", "tmem"]),
                      "read_ports": rng.choice([1, 2, 16]),
                      "write_ports": rng.choice([1, 4, 16]), "latency": rng.choice([0, 1, 3])})


@pytest.mark.parametrize("seed", range(4))
def test_closed_form_equals_the_cycle_model_where_exact(seed):
    rng = random.Random(seed)
    exact = 0
    for _ in range(40):
        arr = _array(rng)
        m, n, k = rng.randint(1, 9), rng.randint(1, 13), rng.randint(1, 5) * arr.unit.k
        run = cycle.simulate(arr, m, n, k)
        est = analytic.estimate(arr, m, n, k)
        if est.exact:
            exact += 1
            assert (est.cycles, est.detail["busy"], est.stalls, est.traffic) == (
                run.cycles, run.busy, run.stalls, run.traffic), (arr, m, n, k)
            assert est.utilisation == run.utilisation
        else:
            assert est.cycles <= run.cycles, (arr, m, n, k)
    assert exact == 40          # output-stationary: always exact


def test_exact_on_register_arrays_and_a_larger_gemm():
    """Registers are always exact; a 4 x 4 MXFP8 array with interleave 2 on 40 x 52 x 256."""
    arr = ArraySpec(unit=MXF8, microarch=MicroArch(8, 2), rows=4, cols=4, interleave=2,
                    a_buffer=Buffer(bytes=1 << 20, bandwidth=64),
                    b_buffer=Buffer(bytes=1 << 20, bandwidth=96))
    run, est = cycle.simulate(arr, 40, 52, 256), analytic.estimate(arr, 40, 52, 256)
    assert est.exact and (est.cycles, est.stalls, est.traffic) == (run.cycles, run.stalls,
                                                                   run.traffic)


def test_big_gemms_take_no_time_and_bad_shapes_one_line():
    arr = ArraySpec(unit=MXF8, rows=32, cols=32, interleave=2)
    est = analytic.estimate(arr, 4096, 14336, 4096)
    assert est.exact and 0 < est.utilisation <= 1
    assert sum(est.stalls.values()) + est.detail["busy"] == arr.units * est.cycles
    for args, msg in [((4, 4, 48), "multiple of"), ((0, 4, 32), "GEMM M must be"),
                      ((4, 2.5, 32), "GEMM N must be")]:
        with pytest.raises(ArrayError, match=msg) as e:
            analytic.estimate(arr, *args)
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("seed", range(2))
def test_stationary_closed_form_equals_the_cycle_model_where_exact_else_bounds_it(seed):
    """Weight- and input-stationary: exact (cycles, stalls, traffic) with register
    accumulators, and with a tensor memory that adds at least ``cols`` values a cycle when
    every K-tile has the same rows; else the cycles are a lower bound, busy and traffic
    still equal."""
    rng = random.Random(100 + seed)
    exact = 0
    for _ in range(40):
        arr = _array(rng).replace(dataflow=rng.choice(["ws", "is"]))
        m, n, k = rng.randint(1, 12), rng.randint(1, 12), rng.randint(1, 9) * arr.unit.k
        run, est = cycle.simulate(arr, m, n, k), analytic.estimate(arr, m, n, k)
        assert (est.detail["busy"], est.traffic) == (run.busy, run.traffic), (arr, m, n, k)
        assert min(est.stalls.values()) >= 0
        assert sum(est.stalls.values()) + est.detail["busy"] == arr.units * est.cycles
        if est.exact:
            exact += 1
            assert (est.cycles, est.stalls) == (run.cycles, run.stalls), (arr, m, n, k)
        else:
            assert est.cycles <= run.cycles, (arr, m, n, k)
    assert exact >= 20


@pytest.mark.parametrize("dataflow,acc", [("ws", "registers"), ("is", "tmem")])
def test_stationary_bound_is_tight_on_long_streams(dataflow, acc):
    arr = ArraySpec(unit=MXF8, microarch=MicroArch(8, 1), rows=4, cols=4, dataflow=dataflow,
                    accumulators={"kind": acc, "read_ports": 4, "write_ports": 4})
    for m, n, k in [(256, 16, 256), (40, 300, 128)]:
        assert analytic.estimate(arr, m, n, k).cycles == cycle.simulate(arr, m, n, k).cycles


def test_long_k_uses_the_periodic_steady_state_exactly():
    """Long K (many K-blocks per tile): the closed form adds the repeating K-blocks at once,
    and still equals the cycle model."""
    rng = random.Random(7)
    checked = 0
    for _ in range(25):
        arr = _array(rng)
        m, n, k = rng.randint(1, 6), rng.randint(1, 9), rng.randint(20, 60) * arr.unit.k
        est = analytic.estimate(arr, m, n, k)
        if est.exact:
            run = cycle.simulate(arr, m, n, k)
            assert (est.cycles, est.stalls, est.traffic) == (run.cycles, run.stalls,
                                                             run.traffic), (arr, m, n, k)
            checked += 1
    assert checked >= 12


def test_tmem_write_queues_that_carry_from_tile_to_tile():
    """One-lane MAC units, a tensor memory of one or two write ports, one to three K-blocks:
    the D values of a tile are still queued when the next tile's arrive."""
    rng = random.Random(3)
    for _ in range(30):
        arr = ArraySpec(unit=MAC, microarch=MicroArch(1, rng.randint(1, 3)),
                        rows=rng.randint(1, 4), cols=rng.randint(1, 4),
                        interleave=rng.randint(1, 3),
                        accumulators={"kind": "tmem", "read_ports": rng.randint(1, 2),
                                      "write_ports": rng.randint(1, 3),
                                      "latency": rng.randint(0, 2)})
        m, n, k = rng.randint(1, 20), rng.randint(1, 20), rng.randint(1, 3)
        run, est = cycle.simulate(arr, m, n, k), analytic.estimate(arr, m, n, k)
        assert est.exact and (est.cycles, est.stalls, est.traffic) == (
            run.cycles, run.stalls, run.traffic), (arr, m, n, k)
