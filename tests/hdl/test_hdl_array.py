"""hdl.array in Amaranth's simulator, cycle for cycle against the array cycle model (whose
values are the engine's), mutants of the contract caught, and what the RTL refuses."""

import numpy as np
import pytest

from mxsim import presets, units, vectors
from mxsim.array import Accumulators, ArraySpec, Buffer, check_rtl
from mxsim.array.cycle import simulate
from mxsim.microarch import MicroArch, MicroArchError

pytestmark = pytest.mark.rtl
pytest.importorskip("amaranth")

from hdl.array import DotProductArray, out_layout, wave_layout  # noqa: E402
from testbenches.array.mutants import MUTANTS  # noqa: E402
from testbenches.array.runner import amaranth_trace, expected  # noqa: E402


def _small(scaled):
    if scaled:
        return presets.get("blackwell-mxf8f6f4").spec("e2m1", "e4m3", scale_format="e8m0",
                                                      block=32)
    return units.get("hopper-wgmma").spec_for_formats("e4m3", "e5m2").replace(k=8)


def _compare(arr, m, n, k, seed, family="normal", design=None):
    u = arr.unit
    vs = vectors.generate(family, a_format=u.a_format, b_format=u.b_format, m=m, n=n, k=k,
                          scale_format=u.scale_format, block=u.block, seed=seed)
    run = simulate(arr, m, n, k, a=vs.a, b=vs.b, c=vs.c, a_scale=vs.a_scale,
                   b_scale=vs.b_scale, record=True)
    want = expected(arr, run)
    got = amaranth_trace(arr, run.trace.waves, vs, want.cycles, design=design)
    return want, got


def _same(want, got):
    return (np.array_equal(want.take, got.take) and np.array_equal(want.out_valid,
                                                                   got.out_valid)
            and want.out_word == got.out_word)


CONFIGS = [
    # scaled, scales, rows, cols, interleave, lanes, stages, bw A, bw B, M, N, K blocks
    (False, "inline", 2, 2, 2, 4, 1, 8, 8, 3, 5, 4),
    (True, "inline", 2, 1, 3, 16, 2, 40, 7, 3, 4, 2),
    (True, "separate", 1, 2, 2, 8, 3, 13, 30, 2, 5, 3),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=["plain-2x2", "scaled-2x1", "separate-1x2"])
def test_hdl_array_matches_cycle_model(cfg):
    scaled, scales, rows, cols, inter, lanes, stages, bwa, bwb, m, n, kb = cfg
    extra = dict(scale_buffer=Buffer(bytes=64, bandwidth=1)) if scales == "separate" else {}
    arr = ArraySpec(unit=_small(scaled), rows=rows, cols=cols, interleave=inter,
                    microarch=MicroArch(lanes=lanes, stages=stages), scales=scales,
                    a_buffer=Buffer(bytes=4096, bandwidth=bwa),
                    b_buffer=Buffer(bytes=4096, bandwidth=bwb), **extra)
    want, got = _compare(arr, m, n, arr.unit.k * kb, seed=len(CONFIGS) + rows)
    assert want.take.sum() == got.take.sum() > 0
    assert _same(want, got)
    assert got.dropped == 0            # every unit ready whenever the lead unit is


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_hdl_array_mutants_caught(name):
    """Each mutant of the contract differs from the model in some cycle."""
    arr = ArraySpec(unit=_small(False), rows=2, cols=2, interleave=1,
                    microarch=MicroArch(lanes=4, stages=1),
                    a_buffer=Buffer(bytes=4096, bandwidth=4),
                    b_buffer=Buffer(bytes=4096, bandwidth=4))
    want, got = _compare(arr, 2, 2, arr.unit.k * 3, seed=1, design=MUTANTS[name])
    assert want.take.sum() == 3 and not _same(want, got)


def test_hdl_array_layouts():
    arr = ArraySpec(unit=_small(True), rows=2, cols=3, interleave=4)
    w = wave_layout(arr)
    k = arr.unit.k
    assert w.size == 2 * k * 4 + 3 * k * 8 + (2 + 3) * 8 + 6 * 32 + 2 + 2 + 2 + 3  # e2m1 x e4m3
    assert out_layout(arr).size == 6 * 33 + 2 + 1


@pytest.mark.parametrize("change,msg", [
    (dict(dataflow="ws"), 'dataflow "os"'),
    (dict(accumulators=Accumulators(kind="tmem")), 'not "tmem"'),
    (dict(rows=9, cols=8), "at most 64"),
    (dict(interleave=17), "interleave must be at most 16"),
])
def test_hdl_array_refuses(change, msg):
    arr = ArraySpec(unit=_small(False), **change)
    with pytest.raises(MicroArchError) as err:
        DotProductArray(arr)
    assert msg in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(MicroArchError):
        check_rtl(arr)
