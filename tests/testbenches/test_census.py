"""verify's census, waivers and mixed handshake patterns, with no simulator (issue 35).

The waiver language (what it takes, what it refuses, how it evaluates), the classifier (every
family and ulp bucket, from want/got codes and from fixed-point results), and whole verify
runs through stand-in backends (the cycle model as the design, some results corrupted as
the test says): true counts past the listed cap, every chunk run (or the first failing one
with ``stop_at_first``), waivers counted apart, and a failing set shrunk to the one element
pair a bug needs.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from cli_helpers import one_line, run

from mxsim import presets, vectors
from mxsim.engine import fast
from mxsim.microarch import MicroArch, cycle
from testbenches.sim.backend import (
    PRESSURE,
    SEGMENT,
    VALUE_LIMIT,
    Mismatch,
    MismatchKind,
    Run,
    Stimulus,
    check,
    count,
    mixed_patterns,
)
from testbenches.sim.census import BUCKETS, ClassKey, bucket, observe
from testbenches.sim.waive import Num, Waiver, WaiverError, compile_when, parse_option
from testbenches.unit.verify import chunk_plan, verify

SMALL = presets.get("blackwell-mxf8f6f4").spec("e2m1", "e2m1", scale_format="e8m0", block=32)
UA = MicroArch(lanes=8, stages=2)
FP32 = SimpleNamespace(a_format="e4m3", b_format="e4m3", d_format="fp32", k=32)


# -- the waiver language -------------------------------------------------------------------

@pytest.mark.parametrize("when", [
    "want.zero and got.zero and c.neg_zero",
    "ulp <= 1", "1 <= ulp < 4", "not sign_only", "got.code == 0x7FC00000",
    "a_format == 'e4m3' and b_format != \"int8\"", "want.nan == got.nan",
    "(want.inf or got.inf) and not (c.nan)", "cycle and rule == 'rule 3'", "missing", "flags",
    "got.code != -1", "want.pos_zero or want.neg or want.finite",
])
def test_waiver_language_takes(when):
    tree, uses = compile_when(when)
    assert uses and tree is not None


@pytest.mark.parametrize("when, message", [
    ("len(got)", "calls are not allowed ('len(got)')"),
    ("__import__('os').system('x')", "calls are not allowed"),
    ("got.code.__class__", "only want, got and c have attributes"),
    ("wnt.zero", "unknown name 'wnt'"),
    ("zero", "unknown name 'zero'"),
    ("want.zeroo", "unknown attribute want.zeroo; want has zero, neg_zero"),
    ("want", "want needs an attribute"),
    ("ulp", "'ulp' is an integer, not a test"),
    ("ulp + 1 > 2", "'ulp + 1' is not allowed"),
    ("want.code[0] == 1", "is not allowed"),
    ("[x for x in ulp]", "is not allowed"),
    ("lambda: 1", "is not allowed"),
    ("a_format < 'e4m3'", "strings compare with == and != only"),
    ("ulp == 'x'", "cannot compare an integer with a string"),
    ("not ulp", "not takes tests, not an integer"),
    ("want.zero and", "syntax error"),
    ("True", "'True' is not allowed"),
    ("1.5 < ulp", "'1.5' is not allowed"),
    ("ulp in 3", "'In' is not a comparison a waiver takes"),
    ("", "the predicate is empty"),
])
def test_waiver_language_refuses(when, message):
    with pytest.raises(WaiverError) as exc:
        Waiver.of("w", when, "--waive 1")
    assert str(exc.value).startswith("--waive 1: ") and message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_waiver_evaluates_on_arrays_and_undefined_integers_compare_false():
    env = {"want": {"zero": np.array([1, 1, 0], bool), "code": Num(np.array([0, 1, 2]))},
           "got": {"zero": np.array([1, 0, 0], bool)}, "c": {"neg_zero": np.array([1, 1, 1], bool)},
           "ulp": Num(np.array([1, 5, 0]), np.array([True, True, False])), "a_format": "e4m3"}
    match = lambda when: Waiver.of("w", when, "x").matches(env, 3).tolist()  # noqa: E731
    assert match("want.zero and got.zero and c.neg_zero") == [True, False, False]
    assert match("ulp <= 1") == [True, False, False]          # undefined: false
    assert match("not ulp <= 1") == [False, True, True]
    assert match("0 < ulp < 9") == [True, True, False]
    assert match("a_format == 'e4m3'") == [True, True, True]
    assert match("want.code <= 0x1_0000_0000_0000_0000") == [True, True, True]   # > int64
    assert match("want.code == -1 or want.code > 1") == [False, False, True]


def test_a_value_waiver_never_waives_timing_flags_or_missing_results():
    value = Waiver.of("v", "not want.zero", "x")
    timing = Waiver.of("t", "cycle and rule == 'rule 3'", "x")
    assert [value.applies(k) for k in ("value", "flags", "missing", "cycle")] == [
        True, False, False, False]
    assert timing.applies("cycle") and not timing.applies("flags")
    assert Waiver.of("m", "missing", "x").applies("missing")


def test_waive_option_names():
    w = parse_option("exact-zero result, C = -0: sign may differ: want.zero and got.zero", 2)
    assert (w.name, w.when) == ("exact-zero result, C = -0: sign may differ",
                                "want.zero and got.zero")
    assert w.source.startswith("--waive 2 (") and w.option.endswith("got.zero")
    assert parse_option("ulp <= 1", 1).name == "ulp <= 1"
    with pytest.raises(WaiverError, match=r"^--waive 1 \('name: '\): give --waive"):
        parse_option("name: ", 1)


# -- the classifier --------------------------------------------------------------------------

def _codes_run(want, got, c=None, mismatches=()):
    """A stand-in run whose outputs are ``got`` (FP32 codes), of a set with C ``c``."""
    trace = SimpleNamespace(results=[int(x) for x in got])
    vs = SimpleNamespace(c=None if c is None else np.asarray(c, np.uint32).reshape(-1, 1, 1),
                         c_format="fp32", k=32)
    run = Run(len(want), len(want), 0, trace, list(mismatches))
    return vs, run


def _classes(want, got, c=None, mismatches=()):
    vs, r = _codes_run(want, got, c, mismatches)
    rec = observe(FP32, vs, r, np.asarray(want, np.uint32))
    return rec, [(rec.keys[k].name, int(d), int(w)) for k, d, w in
                 zip(rec.key, rec.dot, rec.weight, strict=True)]


def test_classifier_families_and_ulp_buckets():
    one, inf, nan = 0x3F800000, 0x7F800000, 0x7FC00000
    want = [0x80000000, nan, one, one, one, one, one, 0x00000000, one, inf, one, 5]
    got = [0x00000000, 0x7FFFFFFF, one + 1, one - 3, one + 15, one + 16, one | 1 << 31,
           0x00000001, inf, one, nan, 5]
    rec, got_classes = _classes(want, got)
    assert got_classes == [
        ("sign of zero", 0, 1), ("NaN code", 1, 1), ("finite off by 1 ulp", 2, 1),
        ("finite off by 2-3 ulps", 3, 1), ("finite off by 4-15 ulps", 4, 1),
        ("finite off by 16+ ulps", 5, 1), ("sign differs", 6, 1),
        ("finite off by 1 ulp", 7, 1), ("class differs: want finite got Inf", 8, 1),
        ("class differs: want Inf got finite", 9, 1), ("class differs: want finite got NaN",
                                                       10, 1)]
    ulp = rec.env["ulp"]
    assert ulp.defined.tolist() == [True, False, True, True, True, True, True, True, False,
                                    False, False]
    assert ulp.values[2:6].tolist() == [1, 3, 15, 16] and ulp.values[7] == 1
    assert rec.env["sign_only"].tolist()[:7] == [True, False, False, False, False, False, True]
    assert [b for _, b in BUCKETS] == ["1", "2-3", "4-15", "16+"]
    assert bucket([1, 2, 3, 4, 15, 16, 10**9]).tolist() == [0, 1, 1, 2, 2, 3, 3]


def test_classifier_vocabulary_of_c_and_a_waiver_on_records():
    want, got = [0x80000000, 0x80000000, 0x3F800000], [0, 0, 0x3F800001]
    rec, _ = _classes(want, got, c=[0x80000000, 0, 0x80000000])
    assert rec.env["c"]["neg_zero"].tolist() == [True, False, True]
    w = Waiver.of("z", "want.zero and got.zero and c.neg_zero", "x")
    assert rec.waived_by([w]).tolist() == [0, -1, -1]
    # the first waiver that matches takes a mismatch; the second gets what is left
    both = [w, Waiver.of("any sign", "sign_only", "x")]
    assert rec.waived_by(both).tolist() == [0, 1, -1]


def test_classifier_counts_missing_results_and_timing_rules():
    value, cyc = MismatchKind.VALUE, MismatchKind.CYCLE
    from testbenches.sim.backend import not_listed
    entries = [Mismatch(value, note="2 of 4 results left in 30 cycles"),
               Mismatch(cyc, note="input handshake 4: RTL cycle 8, model 9"),
               *[Mismatch(cyc, note=f"valid-ready rule 3 (latency): result {i}")
                 for i in range(10)],
               not_listed(cyc, 25, 10, "valid-ready rule 3 (latency): "),
               Mismatch(cyc, note="in_ready differs on 7 cycles, first 3: RTL 0x0, model 0x1"),
               Mismatch(cyc, cycle=5, beat=2, rtl=[0, 1, "0x0"], model=[1, 1, "0x0"])]
    rec, _ = _classes([1, 2, 3, 4], [1, 2], mismatches=entries)
    totals: dict[str, int] = {}
    for k, w in zip(rec.key, rec.weight, strict=True):
        totals[rec.keys[k].name] = totals.get(rec.keys[k].name, 0) + int(w)
    assert totals == {"result missing": 2, "cycle (input handshake)": 1,
                      "cycle (valid-ready rule 3 (latency))": 25,
                      "cycle (in_ready differs)": 1, "cycle (scoreboard)": 1}
    assert sum(totals.values()) - 2 == count(entries, cyc)
    timing = Waiver.of("late results", "cycle and rule == 'valid-ready rule 3 (latency)'", "x")
    waived = rec.waived_by([timing])
    assert int(rec.weight[waived == 0].sum()) == 25


def test_classifier_of_fixed_point_results():
    """A fixed-point result is compared in value: +0 equals -0, NaN equals NaN; a difference
    is counted in units of the result's LSB at the model's value."""
    want = np.array([0x80000000, 0x3F800000, 0x3F800000, 0x3F800000, 0x7F800000, 0x7FC00000,
                     0x40000000], np.uint32)
    # mant * 2**exp with a 16-bit signed mantissa (15 magnitude bits)
    mant = np.array([0, 1 << 14, (1 << 14) + 1, (1 << 14) + 40, 0, 0, -(1 << 14)], np.int64)
    exp = np.array([0, -14, -14, -14, 0, 0, -13], np.int64)
    nan = np.array([False, False, False, False, False, True, False])
    res = type("Results", (), {"encoding": "fixed", "mant": mant, "exp": exp, "nan": nan,
                               "precision": 15, "e_min": -128, "flags": None,
                               "__len__": lambda self: len(mant)})()
    r = Run(7, 7, 0, SimpleNamespace(results=[0] * 7), [])
    r.results = res
    vs = SimpleNamespace(c=None, k=32)
    rec = observe(FP32, vs, r, want)
    got = [(rec.keys[k].name, int(d)) for k, d in zip(rec.key, rec.dot, strict=True)]
    assert got == [("finite off by 1 ulp", 2), ("finite off by 16+ ulps", 3),
                   ("class differs: want Inf got finite", 4), ("sign differs", 6)]
    assert rec.env["ulp"].values[:2].tolist() == [1, 40]
    assert not rec.env["got"]["code"].defined.any()        # a fixed-point result has no code


# -- whole runs through stand-in backends ----------------------------------------------------

class _Corrupt:
    """The Backend protocol with the cycle model as the design: every result ``corrupt``
    marks (a function of the set and the model's results) has its last bit flipped; values
    checked as a backend without a scoreboard checks them."""
    mode, what, build_seconds = "cycle model", "nothing", None
    design, max_blocks, takes_c, backpressure = None, None, True, True

    def __init__(self, corrupt):
        self.corrupt, self.runs, self.flipped = corrupt, [], 0

    def build(self, spec, microarch, out_dir, *, fault=None):
        self.spec, self.ua = spec, microarch

    def run(self, vs, stimulus, *, name="run"):
        want = fast.dot(self.spec, vs).reshape(-1)
        bad = self.corrupt(vs, want)
        got = np.where(bad, want ^ 1, want).astype(np.uint32)
        trace = cycle.run(cycle.UnitModel(self.spec, self.ua),
                          cycle.beats_of(self.spec, vs, got), stimulus.gaps, stimulus.ready)
        self.runs.append((name, vs.num_dots))
        if name.startswith("chunk"):
            self.flipped += int(bad.sum())
        return Run(vs.num_dots, vs.num_dots, trace.cycles, trace,
                   check(self.spec, self.ua, vs, trace, stimulus, timing=False, want=want),
                   want=want)

    def with_waves(self):
        return None


def _every_seventh(vs, want):
    return np.arange(vs.num_dots) % 7 == 3


def test_census_counts_are_true_past_the_listed_cap_and_every_chunk_runs(tmp_path):
    backend = _Corrupt(_every_seventh)
    rep = verify(SMALL, UA, dots=900, chunk=300, seed=4, out_dir=tmp_path, backend=backend,
                 progress=False)
    plan = chunk_plan(SMALL, 900, 300)
    assert rep.chunks == len(plan) == rep.census.failing_chunks == 4
    assert [n for n, _ in backend.runs[:4]] == ["chunk0", "chunk1", "chunk2", "chunk3"]
    # every flipped result counted once, though each run lists VALUE_LIMIT of them
    assert rep.value_mismatches == backend.flipped > 4 * VALUE_LIMIT
    classes = rep.census.ordered()
    assert sum(e.count for _, e in classes) == rep.value_mismatches
    assert count(rep.mismatches, MismatchKind.VALUE) == rep.value_mismatches
    listed = sum(m.unlisted is None for m in rep.mismatches)
    assert listed == 4 * VALUE_LIMIT < rep.value_mismatches
    text = rep.format()
    assert f"  mismatches  {rep.value_mismatches} value, 0 cycle" in text
    assert f"the JSON report lists {listed} of the {rep.value_mismatches})" in text
    d = json.loads(json.dumps(rep.to_dict()))
    assert sum(c["count"] for c in d["census"]["classes"]) == d["value_mismatches"]
    assert d["chunks"] == 4 and d["census"]["failing_chunks"] == 4
    # one set per class, each replayable and shrunk on this (cheap) backend
    for _, entry in classes:
        assert entry.set and entry.replay.endswith(f"--replay {entry.set} --waves")
        assert vectors.load(entry.set).num_dots == entry.set_dots
    assert rep.failing == classes[0][1].set


def test_stop_at_first_keeps_the_old_behaviour(tmp_path):
    rep = verify(SMALL, UA, dots=900, chunk=300, seed=4, out_dir=tmp_path,
                 backend=_Corrupt(_every_seventh), progress=False, stop_at_first=True)
    assert rep.chunks == 1 and rep.stopped and not rep.passed
    assert "in 1 chunk (stopped at the first with a mismatch)" in rep.format()


def test_waivers_are_counted_apart_and_never_hide_the_rest(tmp_path):
    one_ulp = Waiver.of("off by one", "ulp == 1 and not want.nan", "--waive 1")
    nothing = Waiver.of("NaN payload", "want.nan and got.nan and want.inf", "--waive 2")
    rep = verify(SMALL, UA, dots=600, chunk=300, seed=4, out_dir=tmp_path,
                 backend=_Corrupt(_every_seventh), progress=False, waivers=[one_ulp, nothing])
    waived = {w.name: e.count for w, e in rep.census.waivers}
    unwaived = {k.name: e.count for k, e in rep.census.ordered()}
    assert waived["off by one"] > 0 and waived["NaN payload"] == 0
    assert "finite off by 1 ulp" not in unwaived
    assert rep.waived_mismatches == waived["off by one"]
    assert rep.value_mismatches == sum(unwaived.values())
    assert rep.value_mismatches + rep.waived_mismatches == _flipped(tmp_path)
    assert count(rep.waived, MismatchKind.VALUE) == rep.waived_mismatches
    text = rep.format()
    assert "'NaN payload' (when want.nan and got.nan and want.inf; --waive 2): matched " \
           "nothing" in text
    line = text.splitlines()[-1]
    if rep.passed:
        assert line.endswith(f"({rep.waived_mismatches:,} waived: "
                             f"{rep.waived_mismatches:,} off by one)")
    else:
        assert line.startswith("  result      FAIL (") and "waived: " in line
    d = rep.to_dict()
    assert d["waived"] == rep.waived_mismatches
    assert [w["matched_nothing"] for w in d["census"]["waivers"]] == [False, True]


def _flipped(tmp_path):
    """How many results the same run flips (a fresh stand-in, the same stimulus)."""
    b = _Corrupt(_every_seventh)
    verify(SMALL, UA, dots=600, chunk=300, seed=4, out_dir=tmp_path / "again", backend=b,
           progress=False, keep_failing=False)
    return b.flipped


def test_a_waiver_of_everything_passes_with_the_count_in_the_result_line(tmp_path):
    every = Waiver.of("known", "not cycle", "--waive 1")
    rep = verify(SMALL, UA, dots=300, chunk=300, seed=4, out_dir=tmp_path,
                 backend=_Corrupt(_every_seventh), progress=False, waivers=[every])
    assert rep.passed and rep.value_mismatches == 0 and rep.waived_mismatches > 0
    assert rep.format().splitlines()[-1].startswith("  result      PASS")
    assert rep.format().splitlines()[-1].endswith(
        f" ({rep.waived_mismatches:,} waived: {rep.waived_mismatches:,} known)")


def test_a_failing_set_is_shrunk_to_the_element_pair_the_bug_needs(tmp_path):
    """A bug that corrupts a result whenever element 5 of A and of B are both non-zero: the
    class's set is one dot with every other element pair zeroed (but those its class needs: a
    result that overflows to Inf keeps a product that makes it overflow)."""
    def lane5(vs, want):
        dots = vs.take_dots(slice(None))
        return (dots.a[:, 0, 5] != 0) & (dots.b[:, 5, 0] != 0)
    rep = verify(SMALL, UA, dots=300, chunk=300, seed=4, out_dir=tmp_path,
                 backend=_Corrupt(lane5), progress=False)
    assert not rep.passed
    for key, entry in rep.census.ordered():
        if key.kind != "value":
            continue
        vs = vectors.load(entry.set)
        assert vs.num_dots == 1 and entry.reproduced, entry.how
        a, b = vs.a[0, 0], vs.b[0, :, 0]
        assert a[5] != 0 and b[5] != 0, entry.how
        others = np.delete((a != 0) & (b != 0), 5)
        assert others.sum() <= (0 if key.name == "finite off by 1 ulp" else 1), entry.how
        assert entry.how.startswith("1 dot, shrunk: ") and "shows the class alone" in entry.how
    assert "finite off by 1 ulp" in {k.name for k, _ in rep.census.ordered()}


def test_mixed_patterns_put_back_pressure_and_gaps_in_every_chunk():
    for start in range(len(PRESSURE)):
        gaps, ready = mixed_patterns(9, start=start)
        assert len(gaps) == len(ready) == 4096
        seg = lambda x, j: x[j * SEGMENT:(j + 1) * SEGMENT]  # noqa: E731
        first = PRESSURE[start % len(PRESSURE)]
        assert seg(gaps, 0).all() == (first[0] == 1.0) and seg(ready, 0).all() == (
            first[1] == 1.0)
        # within the first 5 segments (640 cycles): full throughput, gaps and back-pressure
        assert not gaps[:5 * SEGMENT].all() and not ready[:5 * SEGMENT].all()
        assert any(seg(gaps, j).all() and seg(ready, j).all() for j in range(5))
    a, b = Stimulus.mixed(3, start=0), Stimulus.mixed(3, start=0)
    assert np.array_equal(a.gaps, b.gaps) and np.array_equal(a.ready, b.ready)
    assert not np.array_equal(Stimulus.mixed(4).ready, a.ready)


def test_verify_cli_refuses_a_malformed_waiver_in_one_line(capsys, tmp_path):
    rc, out, err = run(capsys, "verify", "--unit", "blackwell-mxf8f6f4", "--a-format", "e2m1",
                       "--lanes", "8", "--waive", "ok: ulp <= 1", "--waive", "len(got) > 1",
                       "--out", tmp_path / "v")
    assert rc == 2 and out == ""
    one_line(err, "--waive 2 ('len(got) > 1'): calls are not allowed ('len(got)')")
    assert not (tmp_path / "v").exists()                            # nothing built or run
    rc, _, err = run(capsys, "verify", "--campaign", "--waive", "ulp <= 1")
    assert rc == 2 and "takes no --waive" in err


def test_class_key_names_and_slugs():
    key = ClassKey("value", "finite off by N ulp", "e4m3", "e5m2", "16+")
    assert (key.name, key.slug) == ("finite off by 16+ ulps", "finite-off-by-16plus-ulps")
    assert ClassKey("cycle", "cycle", "e4m3", "e4m3", "rule 3").name == "cycle (rule 3)"


@pytest.mark.parametrize("rtl", [False, True], ids=["generated", "map"])
def test_waivers_and_a_conformance_check_do_not_go_together(capsys, tmp_path, rtl):
    """The envelope judges the values under --conformance; a waiver waives mismatches
    against the spec: both at once is one line, exit 2, nothing built."""
    target = (["--rtl", "examples/rtl/nrm_tree/nrm_tree.toml", "--unit",
               "examples/rtl/nrm_tree/nrm_tree_spec.toml"] if rtl else ["--unit", "hopper-wgmma"])
    rc, _, err = run(capsys, "verify", *target, "--waive", "z: want.zero and got.zero",
                     "--conformance", "ocp", "--out", tmp_path / "v")
    assert rc == 2
    one_line(err, "--waive and --conformance do not go together")
    assert not (tmp_path / "v").exists() or not any((tmp_path / "v").rglob("*.json"))
