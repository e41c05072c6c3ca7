"""The census and waivers on a design with one known deviation and one real bug (issue 35).

tests/data/foreign/census_dot.sv (hand-written for these tests) gives +0 for an exact-zero sum
where its spec passes C through (-0 with C = -0): a deviation a waiver names. Its map
census_dot.toml also builds a bug (lane 2's product dropped when its A code is -128). A run
reports both classes with their true counts (checked here against the stimulus and the
design's arithmetic in numpy, not against the census) and a shrunk failing set for each; with
the waiver it FAILs for the bug alone; the map without the bug, which waives the deviation in
its own [[waive]] table, PASSes with the waived count in its result line. Every chunk runs
unless --stop-at-first. Malformed waivers are one line, exit 2, nothing simulated.
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import one_line, run

from mxsim import spec as specs
from mxsim import vectors
from mxsim.engine import fast
from testbenches.foreign.backend import MapDesign
from testbenches.foreign.portmap import load
from testbenches.sim.census import OFF_BY
from testbenches.unit.verify import _chunks, chunk_plan

pytestmark = [pytest.mark.rtl]
pytest.importorskip("cocotb")

DATA = Path(__file__).resolve().parents[2] / "data" / "foreign"
BUGGY, FIXED = DATA / "census_dot.toml", DATA / "census_dot_fixed.toml"
SPEC = DATA / "census_dot_spec.toml"
DEVIATION = "exact-zero result, C = -0: sign may differ"
WAIVE = f"{DEVIATION}: want.zero and got.zero and c.neg_zero"


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    """One folder for the module: each design's Verilator build is made once."""
    return tmp_path_factory.mktemp("waive")


def _verify(capsys, out: Path, rtl_map: Path, *args, json_out: bool = True):
    rc, stdout, err = run(capsys, "verify", "--rtl", rtl_map, "--unit", SPEC, "--out", out,
                          *(["--json"] if json_out else []), *args)
    assert "Traceback" not in err, err
    return rc, (json.loads(stdout) if json_out else stdout)


def _expected(vectors_asked: int, chunk: int = 4000, seed: int = 0, *, bug: bool = True):
    """(deviations, bugs): the dots where the design gives +0 for the spec's -0, and those
    where its dropped product changes the value, over the stimulus verify drives (the same
    chunks), by the design's arithmetic in numpy."""
    spec = specs.load(SPEC)
    design = MapDesign()
    design.pm = load(BUGGY)
    deviations = bugs = 0
    for _, vs, _ in _chunks(spec, vectors_asked, chunk, seed, None, design):
        dots = vs.take_dots(slice(None))
        a = dots.a[:, 0, :].view(np.int8).astype(np.int64)
        b = dots.b[:, :, 0].view(np.int8).astype(np.int64)
        c = np.asarray(dots.c).reshape(-1)
        exact = (a * b).sum(axis=1)
        built = exact - np.where(a[:, 2] == -128, a[:, 2] * b[:, 2], 0) if bug else exact
        assert ((c == 0) | (c == 0x80000000)).all()        # the map's domain: C is +0 or -0
        want = fast.dot(spec, vs).reshape(-1)
        assert (want[(exact == 0) & (c == 0x80000000)] == 0x80000000).all()
        deviations += int(((built == exact) & (exact == 0) & (c == 0x80000000)).sum())
        bugs += int((built != exact).sum())
    return deviations, bugs


def _classes(rep: dict) -> dict[str, dict]:
    return {c["name"]: c for c in rep["census"]["classes"]}


def test_a_bug_and_a_deviation_each_get_a_class_with_true_counts_and_a_shrunk_set(capsys,
                                                                                   out):
    rc, rep = _verify(capsys, out, BUGGY, "--bulk", "--vectors", "6000")
    deviations, bugs = _expected(6000)
    assert rc == 1 and rep["result"] == "FAIL" and deviations > 20 and bugs > 20
    classes = _classes(rep)
    zero = classes.pop("sign of zero")
    assert zero["count"] == deviations
    assert {c["family"] for c in classes.values()} <= {OFF_BY, "sign differs"}
    assert sum(c["count"] for c in classes.values()) == bugs
    # the headline is the true count, far past what the JSON lists
    assert rep["value_mismatches"] == deviations + bugs == sum(
        c["count"] for c in rep["census"]["classes"])
    assert len(rep["mismatches"]) < rep["value_mismatches"]
    # each class's set: one dot, shrunk, that shows its class alone
    zset = vectors.load(zero["set"])
    assert zset.num_dots == 1 and zero["reproduced"]
    assert not zset.a.any() and not zset.b.any() and int(zset.c.reshape(-1)[0]) == 0x80000000
    for c in classes.values():
        s = vectors.load(c["set"])
        assert s.num_dots == 1 and c["reproduced"] and c["how"].startswith("1 dot, shrunk"), c
        a, b = s.a[0, 0].view(np.int8), s.b[0, :, 0].view(np.int8)
        assert a[2] == -128 and b[2] != 0 and not np.delete(a * b.astype(int), 2).any()
    # the bug's set replays on its own and fails again, with that one class
    bug = next(iter(classes.values()))
    replay = shlex.split(bug["replay"])
    assert replay[-1] == "--waves"
    rc, again = _verify(capsys, out, BUGGY, *replay[6:-1], "--bulk")
    assert rc == 1 and again["dots"] == 1 and again["value_mismatches"] == 1
    assert [c["name"] for c in again["census"]["classes"]] == [bug["name"]]


def test_with_the_waiver_only_the_bug_fails(capsys, out):
    rc, text = _verify(capsys, out, BUGGY, "--bulk", "--vectors", "6000", "--waive", WAIVE,
                       json_out=False)
    deviations, bugs = _expected(6000)
    assert rc == 1
    result = next(x for x in text.splitlines() if x.startswith("  result      "))
    assert result == f"  result      FAIL ({deviations:,} waived: {deviations:,} {DEVIATION})"
    assert f"  mismatches  {bugs} value, 0 cycle" in text
    assert f"  waived      {deviations:,} mismatches by 1 waiver" in text
    rc, rep = _verify(capsys, out, BUGGY, "--bulk", "--vectors", "6000", "--waive", WAIVE)
    assert "sign of zero" not in _classes(rep)
    assert rep["value_mismatches"] == bugs and rep["waived"] == deviations
    (w,) = rep["census"]["waivers"]
    assert (w["name"], w["count"], w["matched_nothing"]) == (DEVIATION, deviations, False)
    assert w["source"].startswith("--waive 1 (") and vectors.load(w["set"]).num_dots == 1
    assert f"--waive {shlex.quote(WAIVE)}" in w["replay"]
    assert all(m["kind"] == "value" for m in rep["waived_mismatches"])


def test_the_fixed_design_passes_with_its_map_s_waivers(capsys, out):
    rc, text = _verify(capsys, out, FIXED, "--bulk", "--vectors", "6000", json_out=False)
    deviations, _ = _expected(6000, bug=False)
    assert rc == 0, text
    result = next(x for x in text.splitlines() if x.startswith("  result      "))
    assert result.startswith("  result      PASS") and result.endswith(
        f" ({deviations:,} waived: {deviations:,} {DEVIATION})")
    assert "  mismatches  0 value, 0 cycle" in text
    assert f"'NaN payloads may differ' (when want.nan and got.nan; {FIXED}:" in text
    assert text.count("matched nothing") == 1


def test_every_chunk_runs_unless_stop_at_first(capsys, out):
    rc, rep = _verify(capsys, out, BUGGY, "--bulk", "--vectors", "3000", "--chunk", "1000")
    plan = chunk_plan(specs.load(SPEC), 3000, 1000)
    assert rc == 1 and rep["chunks"] == len(plan) == rep["census"]["failing_chunks"] >= 3
    assert {m["chunk"] for m in rep["mismatches"]} >= set(range(len(plan)))
    assert rep["value_mismatches"] == sum(_expected(3000, 1000))
    rc, first = _verify(capsys, out, BUGGY, "--bulk", "--vectors", "3000", "--chunk", "1000",
                        "--stop-at-first")
    assert rc == 1 and first["chunks"] == 1 and first["stopped_at_first"]


@pytest.mark.parametrize("old, new, message", [
    ('when = "want.nan and got.nan"', 'when = "want.nan and len(got)"',
     "waive.when: calls are not allowed ('len(got)')"),
    ('when = "want.nan and got.nan"', 'when = "want.nan and gott.nan"',
     "waive.when: unknown name 'gott'"),
    ('when = "want.nan and got.nan"', 'when = "want.nan and"', "waive.when: syntax error"),
    ('when = "want.nan and got.nan"', 'if = "want.nan"', "unknown key 'waive.if'"),
    ('when = "want.nan and got.nan"', 'name2 = 1', "unknown key 'waive.name2'"),
])
def test_a_malformed_waiver_in_a_map_is_one_line_and_nothing_runs(capsys, tmp_path, old, new,
                                                                    message):
    text = FIXED.read_text()
    assert text.count(old) == 1
    shutil.copy(DATA / "census_dot.sv", tmp_path / "census_dot.sv")
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(old, new))
    line = text[:text.index(old)].count("\n") + 1
    rc, stdout, err = run(capsys, "verify", "--rtl", bad, "--unit", SPEC, "--bulk", "--out",
                          tmp_path / "v")
    assert rc == 2 and stdout == ""
    one_line(err, f"{bad}:{line}: {message}")
    assert not (tmp_path / "v").exists()


def test_a_malformed_waive_option_is_one_line_and_nothing_runs(capsys, tmp_path):
    rc, stdout, err = run(capsys, "verify", "--rtl", BUGGY, "--unit", SPEC, "--bulk", "--waive",
                          "x: want.zero and got.sign", "--out", tmp_path / "v")
    assert rc == 2 and stdout == ""
    one_line(err, "--waive 1 ('x: want.zero and got.sign'): unknown attribute got.sign")
    assert not (tmp_path / "v").exists()


@pytest.mark.slow
def test_cocotb_counts_the_same_and_keeps_a_waveform_per_class(capsys, out):
    """The cocotb testbench on the same stimulus: the same true counts; each class's set is
    its one failing dot (reruns cost a simulator start-up: not shrunk), rerun with a waveform
    (--waves: the backend writes them itself) that says it shows the class alone."""
    rc, rep = _verify(capsys, out, BUGGY, "--vectors", "1500", "--waive", WAIVE, "--waves")
    deviations, bugs = _expected(1500)
    assert rc == 1 and rep["value_mismatches"] == bugs and rep["waived"] == deviations
    assert "sets of one failing dot, not shrunk (cocotb" in rep["census"]["sets"]
    for c in rep["census"]["classes"]:
        assert c["set_dots"] == 1 and c["reproduced"], c
        assert c["waveform"] and Path(c["waveform"]).is_file()
        assert Path(c["waveform"]).name.startswith("waves-census_dot-")
