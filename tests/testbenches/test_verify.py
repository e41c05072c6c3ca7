"""mxsim verify: the cocotb testbench, the bulk harness, coverage, failing sets and mutants."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from mxsim import presets, units, vectors
from mxsim.engine import fast
from mxsim.microarch import MicroArch, cycle

pytestmark = [pytest.mark.rtl, pytest.mark.usefixtures("quick_cxx")]
pytest.importorskip("cocotb")
pytest.importorskip("amaranth")

from testbenches.sim.backend import Mismatch, MismatchKind, Stimulus  # noqa: E402
from testbenches.unit import bulk, coverage  # noqa: E402
from testbenches.unit.mutants import FAULTS  # noqa: E402
from testbenches.unit.verify import failing_dots, minimal_set, verify  # noqa: E402

MXFP8 = presets.get("blackwell-mxf8f6f4").spec("e5m2", "e4m3", scale_format="e8m0", block=32)


#: A small unit (FP4 operands, 8 lanes) for the Verilator builds: quick to compile.
SMALL = presets.get("blackwell-mxf8f6f4").spec("e2m1", "e2m1", scale_format="e8m0", block=32)


@pytest.fixture(scope="module")
def build_root(tmp_path_factory):
    """One folder per module, so runs of the same unit share their Verilator build."""
    return tmp_path_factory.mktemp("verify")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "mxsim", *args], capture_output=True,
                          text=True, check=False)


@pytest.mark.slow
def test_verify_cli_passes_and_reports(build_root):
    p = _cli("verify", "--unit", "blackwell-mxf8f6f4", "--a-format", "e2m1", "--lanes", "8",
             "--stages", "1", "--vectors", "3000", "--chunk", "1500", "--out", str(build_root),
             "--json")
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads(p.stdout)
    assert rep["passed"] and rep["mismatches"] == [] and rep["dots"] >= 2900
    assert (rep["value_mismatches"], rep["cycle_mismatches"]) == (0, 0)
    assert rep["holes"] == len(rep["coverage"]["holes"]) and rep["coverage"]["unmeasured"] == []
    assert rep["result"] == ("PASS with holes" if rep["holes"] else "PASS")
    assert rep["cycles"] > rep["dots"] and rep["sim"] == "verilator"
    assert {"a_class", "spread", "cancellation", "carry_out", "output_class",
            "backpressure", "scale_class"} <= set(rep["coverage"]["hits"])


@pytest.mark.slow
def test_verify_catches_a_mutant_and_writes_a_replayable_failing_set(build_root):
    spec, ua, tmp_path = SMALL, MicroArch(lanes=8, stages=1), build_root
    rep = verify(spec, ua, dots=800, chunk=400, seed=1, out_dir=tmp_path,
                 fault="align-c-sign", progress=False)
    assert not rep.passed
    failing = vectors.load(rep.failing)
    assert 1 <= failing.num_dots <= 10 and (failing.m, failing.n) == (1, 1)
    assert rep.waveform and rep.waveform.endswith((".fst", ".vcd")), rep.waveform
    assert re.fullmatch(r"mxsim verify --unit blackwell-mxf8f6f4 --a-format e2m1 --b-format "
                        r"e2m1 --lanes 8 --stages 1 --sim verilator --replay \S+ --waves",
                        rep.replay)
    # The failing set fails on the mutant again, and passes on the real RTL.
    again = verify(spec, ua, replay=failing, out_dir=tmp_path, fault="align-c-sign",
                   keep_failing=False, progress=False)
    assert not again.passed
    good = verify(spec, ua, replay=failing, out_dir=tmp_path, progress=False)
    assert good.passed and good.dots == failing.num_dots


@pytest.mark.slow
def test_verify_bulk_mode_and_a_handshake_mutant(build_root):
    ua = MicroArch(lanes=8, stages=2)
    rep = verify(SMALL, ua, dots=6000, chunk=3000, out_dir=build_root, bulk=True,
                 progress=False)
    assert rep.passed and rep.dots >= 5900 and rep.mode == "bulk C++ harness"
    # The handshake coverage comes from the harness's own trace (every cycle's valid/ready).
    assert rep.coverage.unmeasured() == []
    bp = rep.coverage.hits["backpressure"]
    assert set(bp) == {"stall", "stall-run-3", "gap", "in-and-out"}
    assert bp["stall"] > 0 and bp["stall-run-3"] > 0 and bp["gap"] > 0 and bp["in-and-out"] > 0
    assert rep.cycle_mismatches == 0 and rep.value_mismatches == 0
    assert rep.result == ("PASS with holes" if rep.coverage.holes() else "PASS")
    # The harness's trace is the cycle model's, cycle for cycle, and so is its coverage.
    exe = bulk.build(SMALL, ua, build_root / "bulk-trace")
    vs = coverage.stimulus(SMALL, 2000, blocks=2, seed=5)
    stimulus = Stimulus.random(5, valid_p=0.6, ready_p=0.5)
    r = bulk.run(exe, SMALL, ua, vs, stimulus)
    model = cycle.run(cycle.UnitModel(SMALL, ua), cycle.beats_of(SMALL, vs), stimulus.gaps,
                      stimulus.ready)
    assert r.passed and r.trace.cycles == model.cycles == r.cycles
    for name in ("in_valid", "in_ready", "out_valid", "out_ready", "out_payload"):
        got = getattr(r.trace, name)
        assert got.dtype == getattr(model, name).dtype and np.array_equal(
            got, getattr(model, name)), name
    assert r.trace.results == model.results and r.outputs.tolist() == model.results
    assert coverage.measure(SMALL, vs, r.trace, ua.lanes) == coverage.measure(
        SMALL, vs, model, ua.lanes)
    bad = verify(SMALL, ua, dots=6000, chunk=3000, out_dir=build_root, bulk=True,
                 fault="chain-no-wait", keep_failing=False, progress=False)
    assert not bad.passed and bad.cycle_mismatches > 0 and bad.result == "FAIL"


@pytest.mark.parametrize("fault", ["ready-ignores-stall", "round-up-on-guard",
                                   "norm-sticky-dropped", "pack-inf-sign"])
def test_mutants_representative_caught_in_simulation(fault):
    """Four mutants (handshake, rounding, sticky, sign) against the cycle model and engine in
    Amaranth's simulator, with the verify stimulus and back-pressure."""
    from hdl.sim import simulate
    from testbenches.unit import faults
    spec = MXFP8.replace(acc_rounding="rne")
    # A stall starts when a result reaches the output register, stages + 1 cycles after its
    # block left S0, so it catches the next block on pass (stages mod passes): only when that
    # is the last pass is ready-ignores-stall observable (2 passes, 3 stages here; with 4
    # passes and 2 stages it is an equivalent mutant).
    ua = MicroArch(lanes=16, stages=3)
    vs = coverage.stimulus(spec, 300, blocks=2, seed=5)
    gaps, ready = cycle.patterns(4096, valid_p=0.6, ready_p=0.5, seed=5)
    model = cycle.run(cycle.UnitModel(spec, ua), cycle.beats_of(spec, vs), gaps, ready)
    trace = simulate(faults.unit(fault, spec, ua), vs, gaps, ready,
                     max_cycles=model.cycles + 64)
    same = trace.cycles == model.cycles and all(
        np.array_equal(getattr(trace, f), getattr(model, f))
        for f in ("in_ready", "out_valid", "out_payload"))
    assert not same, f"mutant {fault} survived"


def test_mutants_are_at_least_twenty_and_each_is_a_subclass_outside_the_rtl():
    """Every fault is its own DotProductUnit subclass, built in testbenches/; hdl/ never names
    a fault."""
    from pathlib import Path

    from hdl.unit import DotProductUnit
    from testbenches.unit import faults
    source = "".join(p.read_text() for p in (Path(__file__).parents[2] / "hdl").glob("*.py"))
    # a word that starts with "fault" (hdl/cli.py's argparse "default"s do not)
    assert len(FAULTS) >= 20 and re.search(r"\bfault", source.lower()) is None
    classes = [faults.unit_class(f) for f in FAULTS]
    assert all(issubclass(c, DotProductUnit) and c is not DotProductUnit for c in classes)
    assert len(set(classes)) == len(FAULTS)
    with pytest.raises(ValueError, match=r"^Fault must be one of decode-subnormal-exp, .*, "
                                         r"not 'no-such-fault'$"):
        faults.unit_class("no-such-fault")


def test_coverage_points_and_holes():
    spec = MXFP8
    ua = MicroArch(lanes=8, stages=2)
    total = coverage.Coverage()
    for i in range(3):
        vs = coverage.stimulus(spec, 2500, blocks=1 + i, seed=i)
        gaps, ready = cycle.patterns(4096, valid_p=(1.0, 0.8, 0.4)[i], ready_p=(1.0, 0.7, 0.3)[i],
                                     seed=i)
        trace = cycle.run(cycle.UnitModel(spec, ua), cycle.beats_of(spec, vs), gaps, ready)
        cov = coverage.measure(spec, vs, trace, ua.lanes)
        # The engine's results a backend already has give the same coverage.
        assert coverage.measure(spec, vs, trace, ua.lanes, want=fast.dot(spec, vs)) == cov
        total.merge(cov)
    for point in ("scale_class", "spread", "carry_out", "special_case", "output_class",
                  "backpressure"):
        assert all(n >= coverage.COVERPOINTS[point][1] for n in total.hits[point].values()), \
            (point, total.hits[point])
    assert len(total.hits["a_class"]) == 8 * 6 and len(total.hits["b_class"]) == 8 * 5
    assert "back-to-back" not in total.hits["backpressure"]        # lanes < k: impossible
    assert total.unmeasured() == []
    # The one hole of these three small seeded runs, by name, bin and count.
    assert total.holes() == ["cancellation:exact-zero (1 < 4)"]
    for hole in total.holes():
        point, rest = hole.split(":", 1)
        assert point in coverage.COVERPOINTS and rest.split(" (")[0] in total.hits[point]


def test_coverage_without_a_trace_is_a_hole_and_the_report_says_so():
    """A run that never measures the handshakes (no trace) cannot report 0 holes: the
    coverpoint is a hole, and the report says PASS with holes, not PASS (issue 14: bulk mode
    once reported 0 holes without measuring back-pressure)."""
    from testbenches.unit.verify import Report
    spec, ua = MXFP8, MicroArch(lanes=32, stages=1)
    vs = coverage.stimulus(spec, 20000, blocks=1, seed=3)
    cov = coverage.measure(spec, vs, None, ua.lanes)
    assert "backpressure" not in cov.hits and cov.unmeasured() == ["backpressure"]
    assert cov.holes()[0] == "backpressure: not measured"
    assert "backpressure   not measured" in cov.summary()
    rep = Report("u", "verilator", "bulk C++ harness", dots=vs.num_dots)
    rep.coverage.merge(cov)
    assert rep.passed and rep.result == "PASS with holes"
    assert rep.format().splitlines()[-1].startswith("  result      PASS with holes (")
    d = rep.to_dict()
    assert (d["result"], d["value_mismatches"], d["cycle_mismatches"]) == (
        "PASS with holes", 0, 0)
    assert d["holes"] == len(cov.holes()) and d["coverage"]["unmeasured"] == ["backpressure"]
    # Measured with a trace, the same stimulus has the handshake coverpoint.
    gaps, ready = cycle.patterns(4096, valid_p=0.5, ready_p=0.5, seed=3)
    trace = cycle.run(cycle.UnitModel(spec, ua), cycle.beats_of(spec, vs), gaps, ready)
    full = coverage.measure(spec, vs, trace, ua.lanes)
    assert full.unmeasured() == [] and min(full.hits["backpressure"].values()) >= 4


def test_verify_report_counts_value_and_cycle_mismatches_apart():
    from testbenches.unit.verify import Report
    value, cyc = MismatchKind.VALUE, MismatchKind.CYCLE
    rep = Report("u", "verilator", "cocotb")
    rep.mismatches = [
        Mismatch(value, cycle=5, beat=2, rtl=[1, 1, "0x3f800000"], model=[1, 1, "0x3f800001"],
                 chunk=0),
        Mismatch(cyc, cycle=9, beat=3, rtl=[0, 1, "0x0"], model=[1, 1, "0x0"], chunk=0),
        Mismatch(cyc, note="input handshake 4: RTL cycle 8, model 9", chunk=1)]
    assert (rep.value_mismatches, rep.cycle_mismatches, rep.result) == (1, 2, "FAIL")
    # Reports and JSON show a mismatch as they always have: its set fields in a fixed order.
    assert ("  mismatches  1 value, 2 cycle (first: {'cycle': 5, 'beat': 2, 'rtl': [1, 1, "
            "'0x3f800000'], 'model': [1, 1, '0x3f800001'], 'kind': 'value', 'chunk': 0})"
            ) in rep.format()
    assert rep.format().endswith("  result      FAIL")
    d = json.loads(json.dumps(rep.to_dict()))
    assert d["value_mismatches"] == 1 and d["cycle_mismatches"] == 2
    assert d["mismatches"][2] == {"note": "input handshake 4: RTL cycle 8, model 9",
                                  "kind": "cycle", "chunk": 1}
    assert [Mismatch.from_dict(m) for m in d["mismatches"]] == rep.mismatches
    assert list(Mismatch(value, dot=7, rtl="0x1", model="0x2").to_dict()) == [
        "dot", "rtl", "model", "kind"]
    assert failing_dots(rep.mismatches, beats_per_dot=2) == [1]


def test_verify_report_counts_every_mismatch_of_a_capped_list():
    """A backend lists the first VALUE_LIMIT value mismatches (HANDSHAKE_LIMIT per timing
    rule) and one entry for the rest: the counts the report prints and the JSON holds are the
    true ones, and the text says how many the JSON lists."""
    from testbenches.sim.backend import HANDSHAKE_LIMIT, VALUE_LIMIT, count, not_listed
    from testbenches.unit.verify import Report
    value, cyc = MismatchKind.VALUE, MismatchKind.CYCLE
    rep = Report("u", "verilator", "bulk C++ harness")
    rep.mismatches = (
        [Mismatch(value, dot=i, rtl="0x1", model="0x2") for i in range(VALUE_LIMIT)]
        + [not_listed(value, 52, VALUE_LIMIT)]
        + [Mismatch(cyc, note=f"rule 3: result {i}") for i in range(HANDSHAKE_LIMIT)]
        + [not_listed(cyc, 15, HANDSHAKE_LIMIT, "rule 3: ")])
    assert (rep.value_mismatches, rep.cycle_mismatches) == (52, 15) == (
        count(rep.mismatches, value), count(rep.mismatches, cyc))
    assert ("  mismatches  52 value, 15 cycle (first: {'dot': 0, 'rtl': '0x1', 'model': '0x2', "
            "'kind': 'value'}; the JSON report lists 30 of the 67)") in rep.format()
    d = json.loads(json.dumps(rep.to_dict()))
    assert (d["value_mismatches"], d["cycle_mismatches"]) == (52, 15)
    assert d["mismatches"][VALUE_LIMIT] == {"note": "... 32 more, not listed (52 in all)",
                                            "kind": "value", "unlisted": 32}
    assert d["mismatches"][-1]["note"] == "rule 3: ... 5 more, not listed (15 in all)"
    assert [Mismatch.from_dict(m) for m in d["mismatches"]] == rep.mismatches


def test_minimal_set():
    vs = vectors.generate("normal", a_format="e5m2", b_format="e4m3", m=3, n=4, k=64,
                          scale_format="e8m0", block=32, seed=2)
    sub = minimal_set(vs, [0, 7, 11])
    assert sub.num_dots == 3 and sub.a.shape == (3, 1, 64) and sub.b.shape == (3, 64, 1)
    assert np.array_equal(sub.a[1, 0], vs.a[1]) and np.array_equal(sub.b[1][:, 0], vs.b[:, 3])
    assert sub.c[2, 0, 0] == vs.c[2, 3] and sub.b_scale[2, 1, 0] == vs.b_scale[1, 3]
    assert sub.d is None and sub.extra["dots"] == [0, 7, 11]


def test_minimal_set_keeps_the_nvfp4_tensor_scale():
    """A shrunk NVFP4 set is the same computation: its per-tensor scale comes along."""
    vs = vectors.generate("normal", a_format="e2m1", b_format="e2m1", m=2, n=2, k=32,
                          scale_format="ue4m3", block=16, tensor_scale=0.375, seed=3)
    sub = minimal_set(vs, [3])
    assert sub.tensor_scale == vs.tensor_scale == np.float32(0.375)
    spec = units.get("exact").spec_for(vs)
    assert fast.dot(spec, sub)[0, 0, 0] == fast.dot(spec, vs)[1, 1]


@pytest.mark.parametrize("args, message", [
    (["--lanes", "5"], "lanes (5) must divide the instruction k (32)"),
    (["--vectors", "0"], "--vectors must be at least 1, not 0"),
    (["--unit", "hopper-mma-sync"], "cannot be built as RTL"),
    (["--out", "/proc/no/such"], "/proc/no/such: cannot create the output folder"),
])
def test_verify_cli_bad_input(args, message):
    p = _cli("verify", *args)
    assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_rtl_cli_bad_output_folder(tmp_path):
    p = _cli("rtl", "-o", str(tmp_path / "missing" / "out.v"))
    assert p.returncode == 2 and "no such folder for -o" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not (tmp_path / "missing").exists()


def test_rtl_cli_writes_linted_verilog_with_its_provenance(tmp_path):
    out = tmp_path / "mx_dot.v"
    p = _cli("rtl", "--unit", "hopper-wgmma", "--lanes", "8", "--stages", "2", "-o", str(out),
             "--lint", "--json")
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert (info["latency"], info["interval"], info["interval_chained"]) == (7, 4, 6)
    assert info["lint"] == []
    head = out.read_text().splitlines()[:4]
    spec = presets.get("hopper-wgmma").spec("e4m3")
    assert head[2] == f"// spec digest {spec.digest()}" and "lanes 8, stages 2" in head[3]


@pytest.mark.slow
def test_rtl_cli_stats_from_yosys():
    p = _cli("rtl", "--unit", "blackwell-mxf8f6f4", "--a-format", "e2m1", "--lanes", "4",
             "--stats", "--no-ice40", "--json")
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert info["total_cells"] > 1000 and info["flip_flops"] > 100 and info["depth"] > 20
    assert info["gate_equivalents"] > info["total_cells"] * 0.67


def _model_run(spec, ua, vs, stimulus, *, flip_dot=None):
    """A stand-in backend's run: the cycle model's own trace (result ``flip_dot`` with its
    last bit flipped, where the run has that many), checked as a backend without a scoreboard
    checks it."""
    from testbenches.sim.backend import Run, check
    trace = cycle.run(cycle.UnitModel(spec, ua), cycle.beats_of(spec, vs), stimulus.gaps,
                      stimulus.ready)
    if flip_dot is not None and flip_dot < len(trace.results):
        at = np.nonzero(trace.out_valid & trace.out_ready)[0][flip_dot]
        held = np.nonzero(trace.out_valid[:at + 1])[0]
        start = held[np.nonzero(np.diff(np.r_[-2, held]) > 1)[0][-1]]    # the value's first cycle
        trace.out_payload[start:at + 1] ^= 1
        trace.results[flip_dot] ^= 1
    return Run(vs.num_dots, len(cycle.beats_of(spec, vs)), trace.cycles, trace,
               check(spec, ua, vs, trace, stimulus), 0.0, 0.0)


class _ModelBackend:
    """The Backend protocol with the cycle model as the design (no simulator): what a foreign
    RTL backend plugs into."""
    mode, what, build_seconds = "cycle model", "nothing", None
    design, max_blocks, takes_c, backpressure = None, None, True, True

    def __init__(self, flip_dot=None):
        self.flip_dot, self.built, self.runs = flip_dot, [], []

    def build(self, spec, microarch, out_dir, *, fault=None):
        self.spec, self.ua = spec, microarch
        self.built.append((spec.name, microarch.lanes, fault))

    def run(self, vs, stimulus, *, name="run"):
        self.runs.append((name, vs.num_dots, stimulus.seed))
        return _model_run(self.spec, self.ua, vs, stimulus, flip_dot=self.flip_dot)

    def with_waves(self):
        return None


def test_verify_drives_any_backend_and_reports_its_mismatches(tmp_path):
    """verify() runs every chunk through the Backend protocol: a design that equals the model
    passes; one wrong bit in one result of each chunk is one value mismatch per chunk (every
    chunk runs), and the failing set is that dot product (alone it no longer fails on this
    stand-in, which flips the fourth result of a run: the set is the dot as found)."""
    ua = MicroArch(lanes=8, stages=2)
    good = _ModelBackend()
    rep = verify(SMALL, ua, dots=300, chunk=150, seed=2, out_dir=tmp_path, backend=good,
                 progress=False)
    assert rep.passed and rep.mode == "cycle model" and rep.dots == 480
    assert good.built == [(SMALL.name, 8, None)]
    assert good.runs == [("chunk0", 240, 2 * 100003), ("chunk1", 240, 2 * 100003 + 1)]
    bad = _ModelBackend(flip_dot=3)
    rep = verify(SMALL, ua, dots=300, chunk=150, seed=2, out_dir=tmp_path, backend=bad,
                 progress=False)
    assert (rep.value_mismatches, rep.cycle_mismatches, rep.result) == (2, 0, "FAIL")
    assert rep.chunks == 2 and rep.census.failing_chunks == 2
    m = rep.mismatches[0]
    assert (m.kind, m.dot, m.chunk) == (MismatchKind.VALUE, 3, 0)
    assert [(x.dot, x.chunk) for x in rep.mismatches] == [(3, 0), (3, 1)]
    assert int(m.rtl, 16) == int(m.model, 16) ^ 1 and rep.waveform is None
    failing = vectors.load(rep.failing)
    assert failing.num_dots == 1 and failing.extra["dots"] == [3]
    assert json.loads((tmp_path / f"report-{SMALL.digest()}-l8-s2.json").read_text())[
        "mismatches"] == [x.to_dict() for x in rep.mismatches]


def test_verify_check_finds_every_kind_of_difference():
    """backend.check against the model: nothing on the model's own trace; a late input
    handshake is a cycle mismatch of the handshake, of the trace and of the beat count."""
    from testbenches.sim.backend import check
    spec, ua = SMALL, MicroArch(lanes=8, stages=1)
    vs = coverage.stimulus(spec, 60, blocks=1, seed=4)
    stimulus = Stimulus.random(4, valid_p=0.7, ready_p=0.6)
    run = _model_run(spec, ua, vs, stimulus)
    assert run.passed and run.outputs.tolist() == run.trace.results
    trace, n = run.trace, vs.num_dots
    taken = np.nonzero(trace.in_valid & trace.in_ready)[0]
    trace.in_ready[taken[0]] = False
    notes = [m.note for m in check(spec, ua, vs, trace, stimulus)]
    assert notes[:3] == [f"{n - 1} of {n} beats taken in {trace.cycles} cycles",
                         f"input handshakes: {n - 1} in RTL, {n} in the model",
                         f"input handshake 0: RTL cycle {taken[1]}, model {taken[0]}"]
    assert notes[-1] == f"in_ready differs on 1 cycles, first {taken[0]}: RTL 0x0, model 0x1"
    assert all(m.kind is MismatchKind.CYCLE for m in check(spec, ua, vs, trace, stimulus))


def test_verify_amaranth_backend_passes_and_refuses_mutants(tmp_path):
    from testbenches.sim.backend import AmaranthBackend
    ua = MicroArch(lanes=16, stages=2)
    rep = verify(SMALL, ua, sim="amaranth", dots=40, chunk=20, seed=3, out_dir=tmp_path,
                 progress=False)
    assert rep.passed and rep.mode == "Amaranth simulator" and rep.dots >= 36
    assert rep.cycles > rep.beats >= rep.dots and rep.coverage.unmeasured() == []
    with pytest.raises(ValueError, match=r"^The Amaranth backend builds the unit itself, not "
                                         r"mutant 'pack-inf-sign'$"):
        AmaranthBackend().build(SMALL, ua, tmp_path, fault="pack-inf-sign")


class _WavesBackend:
    """A backend that writes a waveform on every run (cocotb with --waves), all of whose
    results are one ulp off: what verify reports as the failing set's waveform."""
    mode, what, build_seconds = "cocotb", "a stand-in", None
    design, max_blocks, takes_c, backpressure = "stand-in", None, True, True

    def build(self, spec, microarch, out_dir, *, fault=None):
        self.spec, self.ua, self.out = spec, microarch, out_dir

    def run(self, vs, stimulus, *, name="run"):
        from testbenches.sim.backend import Run
        want = fast.dot(self.spec, vs).reshape(-1)
        trace = cycle.run(cycle.UnitModel(self.spec, self.ua),
                          cycle.beats_of(self.spec, vs, want ^ 1), stimulus.gaps, stimulus.ready)
        wave = self.out / f"{name}.vcd"
        wave.write_text("$end\n")
        return Run(vs.num_dots, vs.num_dots, trace.cycles, trace,
                   [Mismatch(MismatchKind.VALUE, dot=0, rtl="0x1", model="0x0")],
                   waveform=str(wave))

    def with_waves(self):
        return None                                 # this one writes waveforms already


def test_verify_reports_the_waveform_a_waves_backend_wrote(tmp_path):
    """--replay --waves through cocotb: a backend whose runs write waveforms reruns each
    class's set through itself, and the report names that waveform, copied to a name of its
    own (a simulator writes every run's to one file; it said 'waveform none' while the file
    was there)."""
    vs = vectors.generate("normal", a_format="e5m2", b_format="e4m3", m=2, n=2, k=32,
                          scale_format="e8m0", block=32, seed=1)
    rep = verify(MXFP8, MicroArch(lanes=32, stages=1), replay=vs, out_dir=tmp_path,
                 backend=_WavesBackend(), progress=False)
    key, entry = rep.census.ordered()[0]
    wave = tmp_path / f"waves-stand-in-{MXFP8.digest()}-1-{key.slug}.vcd"
    assert rep.failing == entry.set and rep.waveform == entry.waveform == str(wave)
    assert wave.read_text() == "$end\n" and entry.reproduced      # the rerun of the set
    assert f"        waveform {wave}" in rep.format()
    assert rep.to_dict()["waveform"] == str(wave)                   # --json says so too
