"""mxsim.microarch.cycle without the RTL: its timing contract, its driver, and the GEMM throughput
view. (Cycle-for-cycle agreement with the RTL is tests/hdl/test_hdl_unit.py and
tests/testbenches/test_rtl_sim.py.)"""

import subprocess
import sys

import numpy as np
import pytest

from mxsim import presets, vectors
from mxsim.microarch import MicroArch, cycle


def test_cycle_model_imports_neither_hdl_nor_amaranth():
    code = ("import sys, mxsim.microarch.cycle, mxsim.microarch; "
            "print(any(m.split('.')[0] in ('hdl', 'amaranth') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize("lanes, stages", [(32, 1), (8, 2), (1, 3)])
def test_cycle_model_values_are_the_engines_and_timing_the_contract(lanes, stages):
    spec = presets.get("hopper-wgmma").spec("e4m3")
    ua = MicroArch(lanes=lanes, stages=stages)
    vs = vectors.generate("llm", m=3, n=4, k=128, seed=2)
    model = cycle.UnitModel(spec, ua)
    trace = cycle.run(model, cycle.beats_of(spec, vs), np.ones(8, bool), np.ones(8, bool))
    # The values leave in dot order (batch, row, column), each the one the reference engine
    # (Python fractions, sharing no code with the fast engine that beats_of reads) computes.
    from mxsim.engine import reference
    assert trace.results == reference.dot(spec, vs).reshape(-1).tolist()
    assert trace.out_payload[trace.out_valid & trace.out_ready].tolist() == trace.results
    # 12 chains of 4 blocks, no gaps: a chain's second block enters P cycles after its first,
    # every later block (and the next chain's first) waits for the previous result: P + R.
    P, R = ua.passes(spec), stages
    taken = np.nonzero(trace.in_valid & trace.in_ready)[0]
    assert np.diff(taken).tolist() == ([P, P + R, P + R, P + R] * 12)[:-1]
    last_out = np.nonzero(trace.out_valid)[0][-1]
    assert last_out - taken[-1] == ua.latency(spec) + R


def test_cycle_model_back_pressure_holds_the_output():
    spec = presets.get("hopper-wgmma").spec("e4m3")
    ua = MicroArch(lanes=32, stages=1)
    vs = vectors.generate("normal", m=1, n=4, k=32, seed=1)
    ready = np.array([False] * 10 + [True] * 30)
    trace = cycle.run(cycle.UnitModel(spec, ua), cycle.beats_of(spec, vs), np.ones(40, bool),
                      ready)
    held = trace.out_valid & ~trace.out_ready
    assert held[:10].sum() > 0 and not trace.out_valid[10:][~trace.out_ready[10:]].any()
    # While the output is held, the pipeline stalls: values are not lost or reordered, and the
    # held payload does not change. Tokens (not the engine's values) make order visible.
    tokens = np.arange(0x1000, 0x1000 + vs.num_dots)
    trace = cycle.run(cycle.UnitModel(spec, ua), cycle.beats_of(spec, vs, tokens),
                      np.ones(40, bool), ready)
    assert trace.results == tokens.tolist()
    held = trace.out_valid & ~trace.out_ready
    first = np.nonzero(held)[0]
    assert len(first) >= 2 and (trace.out_payload[first] == trace.out_payload[first[0]]).all()
    # The values beats_of attaches by default are the reference engine's, dot for dot.
    from mxsim.engine import reference
    trace = cycle.run(cycle.UnitModel(spec, ua), cycle.beats_of(spec, vs), np.ones(40, bool),
                      ready)
    assert trace.results == reference.dot(spec, vs).reshape(-1).tolist()


def test_cycle_gemm_throughput_view():
    spec = presets.get("blackwell-mxf8f6f4").spec("e4m3", scale_format="e8m0", block=32)
    ua = MicroArch(lanes=32, stages=2)
    fast_feed = cycle.gemm(spec, ua, 256, 256, 4096, rows=16, cols=16, bandwidth=1e9)
    # Compute-bound: every block waits for its chain (P + stages = 3 cycles per block).
    assert fast_feed.detail["step"] == 3
    assert fast_feed.stalls["operand bandwidth"] == 0
    tiles = (256 // 16) ** 2
    assert fast_feed.stalls["chain dependency"] == tiles * 128 * 2
    assert fast_feed.cycles == tiles * (128 * 3 + ua.latency(spec) - 1)
    assert fast_feed.utilisation == pytest.approx(256 * 256 * 4096 / (
        256 * 32 * fast_feed.cycles))
    # 16 + 16 blocks of 33 bytes per step at 64 B/cycle: 17 cycles a step, bandwidth-bound.
    slow = cycle.gemm(spec, ua, 256, 256, 4096, rows=16, cols=16, bandwidth=64)
    assert slow.detail["step"] == 17 and slow.stalls["operand bandwidth"] == tiles * 128 * 14
    assert slow.utilisation < fast_feed.utilisation
    # Ragged edges: a 20 x 20 output on a 16 x 16 array idles units.
    ragged = cycle.gemm(spec, ua, 20, 20, 256, rows=16, cols=16, bandwidth=1e9)
    assert ragged.detail["idle_unit_fraction"] == pytest.approx(1 - 400 / 1024)
    with pytest.raises(ValueError, match="multiple of the unit's k"):
        cycle.gemm(spec, ua, 16, 16, 100, rows=4, cols=4, bandwidth=64)
