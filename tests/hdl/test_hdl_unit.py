"""The whole datapath in Amaranth's simulator: the engine's values, the cycle model's cycles.

Every run drives random valid gaps and random ready back-pressure, and checks (1) every output
against ``mxsim.engine.fast`` bit for bit and (2) the per-cycle trace (``i.ready``,
``o.valid``, ``o.payload``) against ``mxsim.microarch.cycle.UnitModel`` cycle for cycle.
"""

import itertools

import numpy as np
import pytest

from mxsim import presets, vectors
from mxsim.design import resolve_design
from mxsim.engine import fast
from mxsim.microarch import RTL_FORMATS, MicroArch, MicroArchError, check_rtl, cycle
from mxsim.spec import UnitSpec

pytestmark = pytest.mark.rtl
pytest.importorskip("amaranth")

from hdl.sim import simulate  # noqa: E402
from hdl.unit import DotProductUnit  # noqa: E402
from testbenches.unit import faults  # noqa: E402

FAMILIES = ("normal", "specials", "subnormal", "max", "one-large", "cancellation", "zeros")


def check_unit(spec: UnitSpec, ua: MicroArch, families=FAMILIES, *, blocks: int = 2,
               seed: int = 0, valid_p: float = 0.7, ready_p: float = 0.6) -> cycle.Trace:
    fams = list(families)
    if spec.scale_format is not None:
        fams += ["scale-extremes", "nan-scale"]
    vs = vectors.generate_suite(fams, a_format=spec.a_format, b_format=spec.b_format, m=2, n=2,
                                k=spec.k * blocks, scale_format=spec.scale_format,
                                block=spec.block, seed=seed)
    want = fast.dot(spec, vs).reshape(-1)
    gaps, ready = cycle.patterns(8192, valid_p=valid_p, ready_p=ready_p, seed=seed)
    trace = simulate(DotProductUnit(spec, ua), vs, gaps, ready)
    assert np.array_equal(np.array(trace.results, np.uint32), want), (
        [hex(x) for x in trace.results], [hex(x) for x in want])
    model = cycle.run(cycle.UnitModel(spec, ua), cycle.beats_of(spec, vs), gaps, ready)
    for name in ("in_valid", "in_ready", "out_valid", "out_ready", "out_payload"):
        a, b = getattr(trace, name), getattr(model, name)
        assert np.array_equal(a, b), (name, np.nonzero(a[:len(b)] != b[:len(a)])[0][:5])
    return trace


def _spec(a, b, i):
    """A spec per pair: F, scales, accumulator, rounding, overflow and e_zero vary."""
    return UnitSpec(name=f"rtl-{a}-{b}", a_format=a, b_format=b, k=32,
                    scale_format="e8m0" if i % 2 else None, block=32 if i % 2 else None,
                    frac_bits=(13, 25, 3, 20, 0, 31)[i % 6],
                    acc_format=("e8m13", "fp32", "e8m10")[i % 3],
                    acc_rounding=("rz", "rne")[(i // 2) % 2],
                    overflow=("inf", "saturate", "ieee")[(i // 3) % 3],
                    e_zero=(-133, -21, -200, 0)[i % 4])


PAIRS = list(itertools.product(RTL_FORMATS, repeat=2))


@pytest.mark.parametrize("a, b", PAIRS, ids=[f"{a}x{b}" for a, b in PAIRS])
def test_hdl_unit_every_format_pair(a, b):
    i = PAIRS.index((a, b))
    ua = MicroArch(lanes=(1, 2, 4, 8, 16, 32)[i % 6], stages=1 + i % 3)
    check_unit(_spec(a, b, i), ua, seed=i)


@pytest.mark.parametrize("lanes, stages", [(32, 1), (8, 2), (4, 3), (1, 3)])
def test_hdl_unit_hopper_wgmma_builds_and_matches(lanes, stages):
    spec = presets.get("hopper-wgmma").spec("e4m3", "e5m2")
    trace = check_unit(spec, MicroArch(lanes=lanes, stages=stages), blocks=3, seed=lanes)
    assert trace.results


@pytest.mark.parametrize("a, b", [("e4m3", "e4m3"), ("e2m1", "e3m2"), ("e5m2", "e2m3")])
def test_hdl_unit_blackwell_mxf8f6f4_builds_and_matches(a, b):
    spec = presets.get("blackwell-mxf8f6f4").spec(a, b, scale_format="e8m0", block=32)
    check_unit(spec, MicroArch(lanes=8, stages=2), seed=3)


@pytest.mark.parametrize("a, b, lanes, stages, frac_bits, rounding", [
    ("e2m1", "e2m1", 16, 1, 25, "rz"), ("e2m1", "e2m1", 4, 3, 3, "rne"),
    ("e4m3", "e2m1", 8, 2, 13, "rne"), ("int8", "e5m2", 2, 1, 31, "rz")])
def test_hdl_unit_ue4m3_scales(a, b, lanes, stages, frac_bits, rounding):
    """One UE4M3 scale per operand per 16-element instruction (an NVFP4-style ST-FDPA unit):
    the scale significands multiply into every product."""
    spec = UnitSpec(name="st-ue4m3", a_format=a, b_format=b, k=16, scale_format="ue4m3",
                    block=16, frac_bits=frac_bits, acc_format="fp32", acc_rounding=rounding,
                    e_zero=-140)
    check_unit(spec, MicroArch(lanes=lanes, stages=stages), blocks=3, seed=lanes)


def test_hdl_unit_ue4m3_scale_mutant_is_caught():
    """Dropping the UE4M3 scale's significand (exponent kept) changes outputs the engine
    predicts: the comparison above would catch it."""
    spec = UnitSpec(name="st-ue4m3", a_format="e2m1", b_format="e2m1", k=16,
                    scale_format="ue4m3", block=16, frac_bits=25, acc_format="fp32")
    vs = vectors.generate_suite(["normal", "scale-extremes"], a_format="e2m1", m=2, n=2, k=32,
                                scale_format="ue4m3", block=16, seed=4)
    gaps, ready = cycle.patterns(2048, seed=4)
    trace = simulate(faults.unit("mul-scale-sig-dropped", spec, MicroArch(lanes=8)), vs, gaps,
                     ready)
    assert not np.array_equal(np.array(trace.results, np.uint32), fast.dot(spec, vs).reshape(-1))


def test_hdl_unit_timing_contract():
    """Without gaps or back-pressure: latency P + stages + 1, interval P (independent) and
    P + stages (chained), as MicroArch reports them."""
    spec = presets.get("hopper-wgmma").spec("e4m3")
    for lanes, stages in ((32, 1), (8, 3), (4, 2)):
        ua = MicroArch(lanes=lanes, stages=stages)
        for blocks, chained in ((1, False), (4, True)):
            vs = vectors.generate("normal", m=1, n=3, k=32 * blocks, seed=1)
            trace = simulate(DotProductUnit(spec, ua), vs, np.ones(64, bool), np.ones(64, bool))
            taken = np.nonzero(trace.in_valid & trace.in_ready)[0]
            # A chain's second block is taken as soon as the first leaves S0; each later one
            # waits for its predecessor's result.
            links = [t for t in range(1, len(taken)) if not chained or t % blocks >= 2]
            assert {int(taken[t] - taken[t - 1]) for t in links} == {ua.interval(spec, chained)}
            first_out = np.nonzero(trace.out_valid)[0][0]
            # A chained block waits `stages` cycles in S0 for its C.
            assert first_out - taken[blocks - 1] == ua.latency(spec) + chained * stages


@pytest.mark.parametrize("unit, ua, message", [
    ("hopper-wgmma", MicroArch(lanes=5), "lanes (5) must divide the instruction k (32) of unit "
                                         "'hopper-wgmma': try one of 1, 2, 4, 8, 16, 32"),
    ("hopper-mma-sync", MicroArch(), "Unit 'hopper-mma-sync' cannot be built as RTL: the RTL "
                                     "builds one fused step per instruction, not 2 (schedule)"),
    ("triton-dot-scaled-hopper", MicroArch(), "cannot be built as RTL: the RTL builds one fused "
                                              "step per instruction, not 2 (schedule)"),
    ("blackwell-mxf4", MicroArch(lanes=8), "lanes (8) must be a multiple of the group (16) of "
                                           "unit 'blackwell-mxf4', so that a pass sums whole "
                                           "groups: try one of 16, 32, 64"),
    ("exact", MicroArch(), "the exact unit (k or frac_bits null) has no fixed width"),
])
def test_hdl_check_rejects_what_the_rtl_cannot_build(unit, ua, message):
    p = presets.get(unit)
    a, b = p.pairs[0]
    scale, block = p.scales[0]
    spec = p.spec(a, b, scale_format=scale, block=block)
    with pytest.raises(MicroArchError, match=__import__("re").escape(message)):
        check_rtl(spec, ua)
    with pytest.raises(MicroArchError, match=__import__("re").escape(message)):
        resolve_design(spec, lanes=ua.lanes, stages=ua.stages)


@pytest.mark.parametrize("kwargs, message", [
    (dict(lanes=0), "lanes must be at least 1, not 0"),
    (dict(stages=4), "stages must be 1, 2 or 3 (registers after the accumulator), not 4"),
    (dict(lanes="8"), "lanes must be an integer, not '8'"),
])
def test_hdl_microarch_rejects_bad_parameters(kwargs, message):
    with pytest.raises(MicroArchError, match=__import__("re").escape(message)):
        MicroArch(**kwargs)
