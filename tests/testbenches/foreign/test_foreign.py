"""Foreign designs as verification backends: the cocotb test and the generated C++ harness
driven through a port map, and the timing checks of what the map declares.

mxsim's own generated unit goes through a map written here like any foreign design, and must
give the native cocotb testbench's outputs and trace, and the model's, bit for bit. The
fixtures in tests/data/rtl (hand-written Verilog, one top ``fixtures``, so one build serves
every map) cover the other handshakes: a 2-stage fixed-latency pipeline, a start-done unit
with an internal accumulator, a combinational unit with unpacked-array ports and a fixed-point
result, a valid/ready unit, and one that drops its results under back-pressure, which the
timing checks must catch. Builds are module-scoped; C++ is compiled without optimisation
(``OPT_*=-O0``: quicker builds, and these runs are small).
"""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from mxsim import presets, vectors
from mxsim.engine import fast
from mxsim.errors import MxsimError
from mxsim.microarch import MicroArch, cycle

pytestmark = [pytest.mark.rtl, pytest.mark.slow]
pytest.importorskip("cocotb")
pytest.importorskip("amaranth")

from testbenches.foreign import portmap, timing  # noqa: E402
from testbenches.foreign.backend import ForeignBackend, read_results, write_results  # noqa: E402
from testbenches.foreign.bulk import ForeignBulkBackend, cxx_name  # noqa: E402
from testbenches.sim.backend import HANDSHAKE_LIMIT, MismatchKind, Stimulus, check  # noqa: E402

RTL = Path(__file__).parents[2] / "data" / "rtl"

#: Example 3: mxsim's generated unit behind its committed port map (C on the first
#: instruction, first/last chaining), and the bug wrapper's map.
EXAMPLE3 = Path(__file__).resolve().parents[3] / "examples" / "rtl" / "mxsim_unit"
UNIT_MAP = (EXAMPLE3 / "mxsim_unit.toml").read_text()


@pytest.fixture(scope="module")
def quick_builds():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MAKEFLAGS", "OPT_FAST=-O0 OPT_SLOW=-O0 OPT_GLOBAL=-O0")
        yield


def _trace_columns(t: cycle.Trace) -> list:
    return [t.in_valid.tolist(), t.in_ready.tolist(), t.out_valid.tolist(),
            t.out_ready.tolist(), t.out_payload.tolist()]


# ---- mxsim's generated unit through a port map ----------------------------------------

@pytest.fixture(scope="module")
def unit(tmp_path_factory, quick_builds):
    from hdl.verilog import generate
    from testbenches.unit.runner import strip_initial_values
    spec = presets.get("blackwell-mxf8f6f4").spec("e4m3", scale_format="e8m0", block=32)
    ua = MicroArch(lanes=32, stages=1)
    d = tmp_path_factory.mktemp("unit")
    (d / "mx_dot.v").write_text(strip_initial_values(generate(spec, ua)))
    assert f"latency = {ua.latency(spec)} " in UNIT_MAP        # the example's map is right
    (d / "map.toml").write_text(UNIT_MAP)
    pm = portmap.load(d / "map.toml")
    cocotb_be, bulk_be = ForeignBackend(pm), ForeignBulkBackend(pm)
    cocotb_be.build(spec, ua, d / "out")
    bulk_be.build(spec, ua, d / "out")
    return spec, ua, cocotb_be, bulk_be


def test_generated_unit_matches_native_testbench_and_model(unit):
    from testbenches.unit.runner import Build
    from testbenches.unit.runner import test as native_test
    spec, ua, cocotb_be, bulk_be = unit
    vs = vectors.generate_suite(["normal", "specials", "scale-extremes", "nan-scale"], m=6,
                                n=7, k=32, scale_format="e8m0", block=32, with_c=False,
                                seed=11)
    stim = Stimulus.random(11, valid_p=0.7, ready_p=0.6)
    want = fast.dot(spec, vs).reshape(-1)
    runs = [cocotb_be.run(vs, stim, name="unit"), bulk_be.run(vs, stim, name="unit")]
    # The native cocotb testbench (its own scoreboard) on the same build of the same Verilog.
    native = native_test(Build(spec, ua, "verilator", "unique", cocotb_be.build_dir), vs, stim,
                         name="native")
    assert native.passed, native.mismatches
    for r in runs:
        assert r.passed, r.mismatches[:5]
        assert r.dots == vs.num_dots == len(want) and r.beats == vs.num_dots
        assert r.outputs.tolist() == want.tolist() == native.outputs.tolist()
        assert r.raw["o__payload"][:, 0].tolist() == want.tolist()
        assert _trace_columns(r.trace) == _trace_columns(native.trace)
        assert check(spec, ua, vs, r.trace, stim) == []           # the cycle model's trace
    stalls = runs[0].trace.out_valid & ~runs[0].trace.out_ready
    assert stalls.sum() > 10 and (~runs[0].trace.in_valid).sum() > 10


def test_generated_unit_chains_through_first_and_last(unit):
    """Dot products of 3 instructions: each continuing one waits in the unit for its C."""
    spec, ua, cocotb_be, bulk_be = unit
    vs = vectors.generate("normal", m=4, n=5, k=96, scale_format="e8m0", block=32,
                          with_c=False, seed=12)
    stim = Stimulus.random(12, valid_p=0.8, ready_p=0.7)
    runs = [cocotb_be.run(vs, stim, name="chains"), bulk_be.run(vs, stim, name="chains")]
    for r in runs:
        assert r.passed, r.mismatches[:5]
        assert r.outputs.tolist() == fast.dot(spec, vs).reshape(-1).tolist()
        assert r.beats == 3 * vs.num_dots and check(spec, ua, vs, r.trace, stim) == []
    assert _trace_columns(runs[0].trace) == _trace_columns(runs[1].trace)


def test_generated_unit_with_a_wrong_latency_is_caught(unit, tmp_path):
    spec, ua, cocotb_be, bulk_be = unit
    text = UNIT_MAP.replace(f"latency = {ua.latency(spec)} ", f"latency = {ua.latency(spec) + 1} ")
    src = Path(cocotb_be.pm.path).parent / "late.toml"
    src.write_text(text)
    late = ForeignBulkBackend(portmap.load(src))
    late.build(spec, ua, Path(cocotb_be.pm.path).parent / "out")     # the same executable
    assert late.executable == bulk_be.executable
    vs = vectors.generate("normal", m=4, n=4, k=32, scale_format="e8m0", block=32,
                          with_c=False, seed=3)
    r = late.run(vs, Stimulus.random(3))
    assert all(m.kind is MismatchKind.CYCLE for m in r.mismatches)
    notes = [m.note for m in r.mismatches]
    assert len(notes) == HANDSHAKE_LIMIT + 1
    assert notes[-1].endswith("... 6 more, not listed (16 in all)")
    assert r.mismatches[-1].unlisted == 6                  # the report counts all 16
    assert notes[0].startswith("valid-ready rule 3 (latency): result of instruction 0 valid "
                               f"at cycle {ua.latency(spec)}, {ua.latency(spec)} cycles after")


def test_example3_bug_wrapper_is_caught_on_subnormal_results(unit):
    """The example's INJECT_BUG wrapper flushes subnormal results to zero: every other
    result is the clean unit's, and every subnormal one is a value mismatch."""
    import shutil
    spec, ua, cocotb_be, bulk_be = unit
    d = Path(cocotb_be.pm.path).parent
    shutil.copy(EXAMPLE3 / "mx_dot_ftz.sv", d)
    (d / "bug.toml").write_text((EXAMPLE3 / "mxsim_unit_bug.toml").read_text())
    bug = ForeignBulkBackend(portmap.load(d / "bug.toml"))
    bug.build(spec, ua, d / "out")
    from testbenches.unit import coverage
    vs = coverage.stimulus(spec, 600, blocks=1, seed=21)          # subnormal C: results too
    want = fast.dot(spec, vs).reshape(-1)
    r = bug.run(vs, Stimulus.random(21))
    sub = ((want >> 23) & 0xFF == 0) & (want & 0x7FFFFF != 0)
    assert sub.sum() > 0
    assert r.outputs.tolist() == np.where(sub, want & 0x80000000, want).tolist()
    bad = [m.dot for m in r.mismatches if m.dot is not None]
    assert bad == np.nonzero(sub)[0][:len(bad)].tolist() and len(bad) > 0
    assert all(m.kind is MismatchKind.VALUE for m in r.mismatches)


# ---- hand-written fixtures, one per handshake kind --------------------------------------

EXACT = presets.get("exact")


def _int8(k: int, scaled: bool):
    spec = EXACT.spec("int8", scale_format="e8m0" if scaled else None,
                      block=32 if scaled else None)
    return replace(spec, k=k, block=k if scaled else None)


def _set(name: str):
    """(spec, vector set) of a fixture: exact specs (every fixture sums exactly)."""
    if name == "startdone":                 # two instructions per dot product (first/last)
        spec = replace(EXACT.spec("e2m1", scale_format=None, block=None), k=4)
        return spec, vectors.generate_suite(["uniform", "max", "zeros"], a_format="e2m1", m=4,
                                            n=3, k=8, with_c=False, seed=5)
    if name == "comb16":                    # scales kept in FP32's range, a few NaN scales
        spec = _int8(16, True)
        vs = vectors.generate_suite(["uniform", "max", "subnormal"], a_format="int8", m=5,
                                    n=4, k=16, scale_format="e8m0", block=16, with_c=False,
                                    seed=5)
        rng = np.random.default_rng(5)
        sa = rng.integers(110, 145, vs.a_scale.shape).astype(np.uint8)
        sb = rng.integers(110, 145, vs.b_scale.shape).astype(np.uint8)
        sa[0, 1, 0], sb[1, 0, 2] = 0xFF, 0xFF
        return spec, replace(vs, a_scale=sa, b_scale=sb)
    spec = _int8(4, False)
    return spec, vectors.generate_suite(["uniform", "max"], a_format="int8", m=6, n=5, k=4,
                                        with_c=False, seed=5)


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory, quick_builds):
    """A backend per (map, path), built on first use into one folder: one cocotb build
    and one Verilated model (one harness per map) for all of them."""
    out = tmp_path_factory.mktemp("fixtures")
    made = {}

    def backend(name: str, bulk: bool, text: str | None = None):
        key = (name, bulk, text)
        if key not in made:
            path = RTL / f"{name}.toml"
            if text is not None:            # a variant of the map, beside the sources
                path = out / f"{name}-variant.toml"
                path.write_text(text.replace('sources = ["', f'sources = ["{RTL}/').replace(
                    '", "', f'", "{RTL}/'))
            pm = portmap.load(path)
            be = ForeignBulkBackend(pm) if bulk else ForeignBackend(pm)
            be.build(_set(name)[0], None, out)
            made[key] = be
        return made[key]
    return backend


@pytest.mark.parametrize("name", ["pipe2", "startdone", "comb16", "vr1"])
def test_fixture_matches_model_in_both_paths(fixtures, name):
    spec, vs = _set(name)
    stim = Stimulus.random(7, valid_p=0.6, ready_p=0.5)
    runs = [fixtures(name, bulk).run(vs, stim, name=name) for bulk in (False, True)]
    want = fast.dot(spec, vs).reshape(-1)
    per_dot = vs.k // spec.k
    for r in runs:
        assert r.passed, r.mismatches[:5]
        assert r.dots == len(want) == len(r.result_cycles)
        assert r.beats == per_dot * r.dots
    cocotb_run, bulk_run = runs
    assert _trace_columns(cocotb_run.trace) == _trace_columns(bulk_run.trace)
    assert cocotb_run.result_cycles.tolist() == bulk_run.result_cycles.tolist()
    for port, words in cocotb_run.raw.items():
        assert words.tolist() == bulk_run.raw[port].tolist()
    t = cocotb_run.trace
    taken = np.nonzero(t.in_valid & t.in_ready)[0]
    ends = taken[per_dot - 1::per_dot]
    if name == "pipe2":                     # read 2 cycles after each issue, out_valid then
        assert cocotb_run.result_cycles.tolist() == (ends + 2).tolist()
        assert np.nonzero(t.out_valid)[0].tolist() == (ends + 2).tolist()
    elif name == "startdone":               # done 5 cycles after every start
        assert np.nonzero(t.out_valid)[0].tolist() == (taken + 5).tolist()
        assert cocotb_run.result_cycles.tolist() == (ends + 5).tolist()
    elif name == "comb16":                  # the NaN flag and exact values
        assert cocotb_run.raw["c_nan"][:, 0].sum() == int(np.isnan(want.view(np.float32)).sum())
        assert t.cycles == vs.num_dots
    else:                                   # back-pressure held the results
        assert (t.out_valid & ~t.out_ready).sum() > 5


def test_fixture_dropping_results_under_back_pressure_is_caught(fixtures):
    spec, vs = _set("vr1_drop")
    stim = Stimulus.random(7, valid_p=0.6, ready_p=0.5)
    runs = [fixtures("vr1_drop", bulk).run(vs, stim, name="drop") for bulk in (False, True)]
    assert [str(m) for m in runs[0].mismatches] == [str(m) for m in runs[1].mismatches]
    notes = [m.note for m in runs[0].mismatches if m.kind is MismatchKind.CYCLE]
    rule2 = [n for n in notes if n.startswith("valid-ready rule 2 (hold under back-pressure)")]
    assert len(rule2) == HANDSHAKE_LIMIT + 1 and "then the design dropped out_valid" in \
        " ".join(rule2)
    assert any(n.startswith("valid-ready rule 1 (one result per instruction, in order)")
               for n in notes)
    assert len(runs[0].result_cycles) < vs.num_dots


@pytest.mark.parametrize("name, edit, rule", [
    ("pipe2", ("latency = 2", "latency = 3"), "pipeline (out_valid): out_valid low at cycle"),
    ("startdone", ("latency = 5", 'latency = 4\nlatency_is = "max"'),
     "start-done (latency): done for instruction 0 at cycle 5, 5 cycles after its start at "
     "cycle 0; declared latency at most 4"),
    ("vr1", ("latency = 1", "latency = 2"), "valid-ready rule 3 (latency): result of "
                                            "instruction 0 valid at cycle 1, 1 cycles after"),
])
def test_fixture_with_a_wrong_declared_latency_is_caught(fixtures, name, edit, rule):
    spec, vs = _set(name)
    text = (RTL / f"{name}.toml").read_text().replace(*edit)
    r = fixtures(name, True, text).run(vs, Stimulus.random(2), name="late")
    assert r.mismatches and any(m.note.startswith(rule) for m in r.mismatches
                                if m.kind is MismatchKind.CYCLE)
    assert fixtures(name, True, text).executable == fixtures(name, True).executable


def test_fixture_with_a_longer_maximum_latency_passes(fixtures):
    spec, vs = _set("startdone")
    text = (RTL / "startdone.toml").read_text().replace("latency = 5",
                                                        'latency = 7\nlatency_is = "max"')
    assert fixtures("startdone", True, text).run(vs, Stimulus.random(2)).passed


# ---- the pieces, without a simulator ----------------------------------------------------

def _trace(iv, ir, ov, o_r, payload=None) -> cycle.Trace:
    n = len(iv)
    return cycle.Trace(*(np.array(x, bool) for x in (iv, ir, ov, o_r)),
                       np.array(payload if payload is not None else [0] * n, np.uint32))


def test_timing_valid_ready_interval_and_in_ready():
    d = timing.Declared("valid-ready", latency=1, interval=2)
    # Handshakes at 0 and 1 (too close), then in_ready low at 4 = 2 after the one at 2.
    t = _trace([1, 1, 1, 0, 1, 1, 0], [1, 1, 1, 0, 0, 1, 0], [0, 1, 1, 1, 0, 0, 1],
               [1, 1, 1, 1, 1, 1, 1])
    notes = [m.note for m in timing.check(d, t, np.array([1, 2, 3, 6]))]
    assert "valid-ready rule 4 (interval): input handshakes at cycles 0 and 1, 1 apart; " \
           "declared interval 2" in notes
    assert "valid-ready rule 4 (interval): in_ready low at cycle 4 with an input offered, 2 " \
           "cycles after the input handshake at cycle 2 and out_ready high throughout" in notes


def test_timing_exact_latency_only_for_one_instruction_dots():
    # Handshakes at 0 (first) and 1 (last, waits for the first's result): valid at 4, not 3.
    t = _trace([1, 1, 0, 0, 0], [1, 1, 0, 0, 0], [0, 0, 0, 0, 1], [1] * 5)
    assert timing.check(timing.Declared("valid-ready", 2, per_dot=2), t, np.array([4])) == []
    # One instruction a dot product, taken at 1: its result is late.
    t = _trace([0, 1, 0, 0, 0], [1, 1, 0, 0, 0], [0, 0, 0, 0, 1], [1] * 5)
    notes = [m.note for m in timing.check(timing.Declared("valid-ready", 2), t,
                                          np.array([4]))]
    assert notes == ["valid-ready rule 3 (latency): result of instruction 0 valid at cycle 4, "
                     "3 cycles after its input handshake at cycle 1 with out_ready high "
                     "throughout; declared latency 2"]


def test_timing_start_done_spurious_and_missing_done():
    d = timing.Declared("start-done", latency=2, out_ready=False)
    t = _trace([0, 1, 0, 0, 1, 0, 0], [1, 1, 0, 1, 1, 0, 0], [1, 0, 0, 1, 0, 0, 0],
               [1] * 7)
    notes = [m.note for m in timing.check(d, t, np.array([3]))]
    assert notes == ["start-done (latency): no done for instruction 1 (start at cycle 4) in 3 "
                     "cycles; declared latency 2",
                     "start-done (one done per start): done at cycle 0 with no start waiting "
                     "for it"]


def test_timing_combinational_has_no_rules():
    t = _trace([1, 1], [1, 1], [1, 1], [1, 1])
    assert timing.check(timing.Declared("combinational", 0), t, np.array([0, 1])) == []
    with pytest.raises(ValueError, match="Handshake kind must be one of"):
        timing.check(timing.Declared("credit", 0), t, np.array([]))


def test_results_file_round_trip_and_refusal(tmp_path):
    raw = {"d": np.array([[1, 2], [3, 4], [5, 6]], np.uint32),
           "nan": np.array([[0], [1], [0]], np.uint32)}
    write_results(tmp_path / "r.bin", [4, 9, 12], raw)
    cycles, back = read_results(tmp_path / "r.bin", ("d", "nan"))
    assert cycles.tolist() == [4, 9, 12]
    assert {k: v.tolist() for k, v in back.items()} == {k: v.tolist() for k, v in raw.items()}
    with pytest.raises(MxsimError, match="is not a results file of 1 ports"):
        read_results(tmp_path / "r.bin", ("d",))
    (tmp_path / "cut.bin").write_bytes((tmp_path / "r.bin").read_bytes()[:-4])
    with pytest.raises(MxsimError, match="is cut short"):
        read_results(tmp_path / "cut.bin", ("d", "nan"))


def test_cxx_names_escape_double_underscores_as_verilator_does():
    assert [cxx_name(p) for p in ("i__valid", "x___y", "q____r", "a_b")] == [
        "i___05Fvalid", "x___05F_y", "q___05F___05Fr", "a_b"]
