"""``mxsim explore``: sweep files, the three views of one spec, the cache and resume."""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from hdl.cli import explore_synthesis, explore_verilog
from mxsim import cli, explore, formats, presets
from mxsim.array import analytic
from mxsim.engine import fast, reference

TINY = """\
[sweep]
name = "tiny"
title = "tiny"

[unit]
preset = "blackwell-mxf8f6f4"
a_format = "e2m1"
lanes = 4

[grid]
frac_bits = [6, 25]

[[point]]
label = "promoted"
frac_bits = 6
promote_every = 2

[[reference]]
label = "FP32 accumulation"
schedule = "serial"
frac_bits = "exact"
acc_rounding = "rne"

[[workload]]
name = "w1"
shape = [512, 512, 128]
sample = [6, 5]
seed = 1

[[workload]]
name = "w2"
shape = [256, 128, 256]
sample = [4, 4]
distribution = "normal"

[array]
rows = 4
cols = 4
bandwidth = 64

[cost]
fpga = "lut4"
"""


#: The area cost the CLI passes: hdl's generator and Yosys (the explore package never imports hdl).
AREA = explore.AreaCost(explore_verilog, explore_synthesis)


def _sweep(tmp_path: Path, text: str = TINY, name: str = "sweep.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- the sweep file ------------------------------------------------------------------------------

def test_load_builds_every_design_before_running(tmp_path):
    sw = explore.load(_sweep(tmp_path))
    assert [d.label for d in sw.designs] == ["frac_bits=6", "frac_bits=25", "promoted"]
    assert len(sw.points) == 6 and [w.name for w in sw.workloads] == ["w1", "w2"]
    plain, _, promoted = sw.designs
    assert plain.unit_spec is plain.spec                      # no promotion: one object
    assert promoted.spec.promote_every == 2 and promoted.unit_spec.promote_every is None
    # promotion lives outside the unit: the promoted design builds the same RTL as F=6
    assert promoted.rtl_key == plain.rtl_key
    assert promoted.unit_spec.to_dict() == plain.spec.to_dict()
    ref = sw.references[0].spec
    assert ref.frac_bits is None and len(ref.steps()) == 32 and ref.acc_rounding.value == "rne"


@pytest.mark.parametrize("old, new, line, message", [
    ('lanes = 4\n', 'lanes = 4\nfrob = 1\n', 9, "unknown parameter unit.frob; [unit] takes "),
    ('[array]', '[arrray]', 36, "unknown table [arrray]"),
    ('frac_bits = [6, 25]', 'frac_bits = [6, 25, 41]', 11,
     "grid point 'frac_bits=41': grid.frac_bits: frac_bits must be between 0 and 40"),
    ('frac_bits = [6, 25]', 'lanes = [4, 5]', 11,
     "grid point 'lanes=5': grid.lanes: lanes (5) must divide the instruction k (32)"),
    ('frac_bits = [6, 25]', 'frac_bits = 6', 11, "grid.frac_bits must be a non-empty list"),
    ('promote_every = 2', 'promote_every = 0', 16, "point 'promoted': point.promote_every: "),
    ('frac_bits = "exact"', 'frac_bits = "exact"\nalign = "sideways"', 22,
     "reference 1: reference.align: align must be one of"),
    ('shape = [512, 512, 128]', 'shape = [512, 512, 100]', 26,
     "workload 'w1' on 'frac_bits=6': K = 100 is not a multiple of the unit's k (32)"),
    ('seed = 1\n', 'seed = 1\nrecipe = "nvfp4"\n', 29,
     "workload 'w1' on 'frac_bits=6': recipe nvfp4 gives ue4m3 block scales, but the unit "
     "takes e8m0"),
    ('sample = [4, 4]', 'sample = [4]', 33, "workload.sample: must be [m, n]"),
    ('distribution = "normal"', 'distribution = "cauchy"', 34,
     "workload.distribution: must be one of normal, llm"),
    ('name = "w2"', 'name = "w1"', 31, "two workloads are named 'w1'"),
    ('fpga = "lut4"', 'fpga = "xc7"', 42, "cost.fpga must be one of ice40, lut4, none"),
    ('bandwidth = 64', 'bandwidth = -1', 39, "array.bandwidth must be a positive number"),
])
def test_load_names_the_offending_line(tmp_path, old, new, line, message):
    assert old in TINY
    path = _sweep(tmp_path, TINY.replace(old, new, 1))
    with pytest.raises(explore.SweepError) as e:
        explore.load(path)
    text = str(e.value)
    assert text.startswith(f"{path}:{line}: "), text
    assert message in text, text
    assert "\n" not in text


def test_load_rejects_broken_toml_and_missing_files(tmp_path):
    with pytest.raises(explore.SweepError, match=r"not valid TOML: .*line 2"):
        explore.load(_sweep(tmp_path, "[sweep]\nname = \n"))
    with pytest.raises(explore.SweepError, match="Cannot read sweep file"):
        explore.load(tmp_path / "missing.toml")
    with pytest.raises(explore.SweepError, match=r":1: a sweep needs at least one"):
        explore.load(_sweep(tmp_path, '[unit]\npreset = "hopper-wgmma"\n'))


def test_cli_rejects_a_bad_sweep_before_anything_runs(tmp_path, capsys):
    path = _sweep(tmp_path, TINY.replace("lanes = 4", "lanes = 3"))
    out = tmp_path / "out"
    assert cli.main(["explore", str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert re.fullmatch(rf"mxsim: error: {re.escape(str(path))}:8: .*lanes \(3\) must divide "
                        r"the instruction k \(32\).*", err), err
    assert not out.exists()                                  # nothing half-written
    assert cli.main(["explore", str(_sweep(tmp_path)), "--check"]) == 0
    assert "6 points (3 designs, 2 RTL configurations, 2 workloads), 1 references: OK" in \
        capsys.readouterr().out


def test_point_lists_sweep_within_the_point(tmp_path):
    text = TINY.replace('[[point]]\nlabel = "promoted"\nfrac_bits = 6\npromote_every = 2\n',
                        '[[point]]\nlabel = "P"\nfrac_bits = 6\npromote_every = [1, 4]\n')
    sw = explore.load(_sweep(tmp_path, text))
    assert [d.label for d in sw.designs][2:] == ["P promote_every=1", "P promote_every=4"]
    assert sw.varied == ["frac_bits", "promote_every"]
    assert {d.group for d in sw.designs} == {"", "P"}


# -- workloads and metrics -------------------------------------------------------------------------

def test_workloads_are_seeded_and_shaped():
    w = explore.Workload(name="x", shape=(4096, 6144, 4096), sample=(8, 6), seed=3)
    x, y = explore.floats(w)
    assert x.shape == (8, 4096) and y.shape == (4096, 6) and x.dtype == np.float32
    x2, _ = explore.floats(w)
    assert np.array_equal(x, x2)
    # LLM-like activations: heavy tails and a few outlier channels far above the rest
    col = np.abs(x).max(axis=0)
    assert np.sort(col)[-5:].min() > 10 * np.median(col)
    assert explore.LAYERS["llama3-8b.ffn-down"] == (4096, 14336)


def test_metrics_count_bits_ulps_and_errors():
    fp32 = formats.get("fp32")
    e = fp32.encode(np.array([1.0, -2.0, 3.0, 0.0, 1e-45]), "rne").astype(np.uint32)
    assert explore.metrics(e, e, 1.0, fp32.decode(e))["differ"] == 0.0
    d = e.copy()
    d[0] += 1                              # one ulp above 1.0
    d[1] += 3                              # three ulps below -2.0 (larger magnitude)
    d[4] = np.uint32(0x80000001)           # -min subnormal: two ulps from +min subnormal
    m = explore.metrics(d, e, 1.0, fp32.decode(e))
    assert m["differ"] == 3 / 5 and m["ulp_max"] == 3 and m["ulp_mean"] == 6 / 5
    assert m["rel_max"] == pytest.approx(2.0)          # |-1e-45 - 1e-45| / 1e-45
    assert m["total_err"] == pytest.approx(m["unit_err"])
    assert sum(m["ulp_hist"]) == 5 and m["ulp_hist"][:4] == [2, 1, 1, 1]


def test_accuracy_is_the_bit_exact_engine_against_exact():
    spec = presets.get("blackwell-mxf8f6f4").spec("e4m3", "e4m3", scale_format="e8m0",
                                                  block=32).replace(frac_bits=8)
    w = explore.Workload(name="x", shape=(64, 64, 96), sample=(3, 4), seed=5)
    vs, factor, ref = explore.quantised(w, spec)
    d = fast.dot(spec, vs)
    assert np.array_equal(d, reference.dot(spec, vs))        # the fast path's exact twin
    e = fast.dot(presets.get("exact").spec_for(vs), vs)
    got = explore.accuracy(spec, w)
    assert got == explore.metrics(d.reshape(-1), e.reshape(-1), factor, ref.reshape(-1))
    assert got["differ"] == float(np.mean(d != e)) > 0


def test_pareto_front():
    rows = [dict(workload="w", error=e, gate_equivalents=g, dots_per_cycle=t)
            for e, g, t in [(1, 10, 1), (2, 5, 1), (3, 20, 1), (1, 10, 2), (5, 1, 1)]]
    explore.mark_pareto(rows)
    assert [r["pareto"] for r in rows] == [False, True, False, True, True]


# -- running: one spec, three views; the cache; resume -------------------------------------------

@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """The tiny sweep run once in this process, recording the spec objects each view gets."""
    pytest.importorskip("amaranth")
    from hdl import verilog
    tmp = tmp_path_factory.mktemp("explore")
    seen = {"engine": [], "rtl": [], "cycle": []}
    mp = pytest.MonkeyPatch()
    real_dot, real_gen, real_est = fast.dot, verilog.generate, analytic.estimate
    mp.setattr(fast, "dot", lambda spec, vs: seen["engine"].append(spec) or real_dot(spec, vs))
    mp.setattr(verilog, "generate", lambda spec, ua, *a, **k: seen["rtl"].append((spec, ua))
               or real_gen(spec, ua, *a, **k))
    mp.setattr(analytic, "estimate", lambda arr, *a: seen["cycle"].append(
        (arr.unit, arr.microarch)) or real_est(arr, *a))
    try:
        sw = explore.load(_sweep(tmp))
        res = explore.run(sw, tmp / "out", area=AREA, jobs=1, progress=False)
    finally:
        mp.undo()
    return sw, res, seen


@pytest.mark.rtl
def test_one_spec_three_views(swept):
    """The engine, the RTL generator and the cycle model get the swept objects themselves."""
    sw, res, seen = swept
    engine_ids = {id(s) for s in seen["engine"]}
    built = {}                  # designs that share an RTL (promotion aside) build it once
    for d in sw.designs:
        built.setdefault(d.rtl_key, d)
    for d in sw.designs:
        assert id(d.spec) in engine_ids
        b = built[d.rtl_key]
        assert any(s is b.unit_spec and ua is b.microarch for s, ua in seen["rtl"])
        assert b.unit_spec.to_dict() == d.unit_spec.to_dict() and b.microarch == d.microarch
        assert any(s is d.unit_spec and ua is d.microarch for s, ua in seen["cycle"])
        if d.spec.promote_every is None:
            assert d.unit_spec is d.spec
    for r in sw.references:
        assert id(r.spec) in engine_ids
    # every point's Verilog is kept, and its header carries the digest of its unit spec
    for row, (d, _) in zip(res.rows, sw.points, strict=True):
        text = (res.out / "cache" / "rtl" / f"{row['rtl_hash']}.v").read_text()
        assert f"// spec digest {d.unit_spec.digest()}" in text.splitlines()[2]
        assert row["unit_digest"] == d.unit_spec.digest()
        assert row["spec_digest"] == d.spec.digest()


@pytest.mark.rtl
def test_the_rtl_explored_is_the_rtl_verify_checks(swept, tmp_path):
    """``mxsim verify`` builds the very Verilog whose area the sweep reports, and it passes."""
    from testbenches.unit import runner
    from testbenches.unit.verify import verify
    sw, res, _ = swept
    d = sw.designs[0]
    row = res.rows[0]
    report = verify(d.unit_spec, d.microarch, dots=64, chunk=64, seed=1,
                    out_dir=tmp_path / "verify", progress=False)
    assert report.mismatches == []
    built = next((tmp_path / "verify").rglob("mx_dot.v")).read_text()
    explored = (res.out / "cache" / "rtl" / f"{row['rtl_hash']}.v").read_text()
    assert built == runner.strip_initial_values(explored)


@pytest.mark.rtl
def test_outputs_and_promotion_share_the_area(swept):
    sw, res, _ = swept
    assert res.computed == {"area": 2, "accuracy": 8} and len(res.rows) == 6
    by = {(r["label"], r["workload"]): r for r in res.rows}
    assert by[("promoted", "w1")]["rtl_hash"] == by[("frac_bits=6", "w1")]["rtl_hash"]
    assert by[("promoted", "w1")]["promotions"] == 2 and by[("frac_bits=6", "w1")][
        "promotions"] == 0
    assert by[("frac_bits=25", "w1")]["unit_err"] < by[("frac_bits=6", "w1")]["unit_err"]
    assert by[("frac_bits=6", "w1")]["gate_equivalents"] < by[("frac_bits=25", "w1")][
        "gate_equivalents"]
    assert all(r["luts"] > 0 and r["fpga"] == "lut4" for r in res.rows)
    for f in ("results.json", "results.csv", "pareto.csv", "report.md", "error_vs_area.png",
              "error_distributions.png", "error_vs_frac_bits.png"):
        assert (res.out / f).stat().st_size > 0, f
    doc = json.loads((res.out / "results.json").read_text())
    assert doc["schema"] == explore.SCHEMA and len(doc["points"]) == 6
    assert len(doc["references"]) == 2
    report = (res.out / "report.md").read_text()
    assert "## Pareto front" in report and "![error_vs_area.png](error_vs_area.png)" in report
    csv_head = (res.out / "results.csv").read_text().splitlines()[0].split(",")
    assert {"label", "workload", "error", "gate_equivalents", "luts", "dots_per_cycle",
            "utilisation", "latency", "rtl_hash"} <= set(csv_head)


@pytest.mark.rtl
def test_resume_after_an_interrupt_recomputes_nothing_finished(swept, tmp_path):
    sw, first, _ = swept
    out = tmp_path / "out"
    shutil.copytree(first.out / "cache", out / "cache")
    for f in (out / "cache" / "accuracy").glob("*.json"):
        f.unlink()                                          # areas cached, accuracies not
    calls = []

    def stop_after_three(n):
        calls.append(n)
        if n == 3:
            raise KeyboardInterrupt

    with pytest.raises(explore.Interrupted, match="3 of 8 tasks finished"):
        explore.run(sw, out, area=AREA, jobs=1, progress=False,
                    on_done=stop_after_three)
    assert len(list((out / "cache" / "accuracy").glob("*.json"))) == 3
    assert not list(out.glob("**/.*.tmp"))                  # nothing half-written
    res = explore.run(sw, out, area=AREA, jobs=1, progress=False)      # resumed
    assert res.computed == {"area": 0, "accuracy": 5}
    assert res.reused == {"area": 2, "accuracy": 3}
    strip = ("seconds",)
    assert [{k: v for k, v in r.items() if k not in strip} for r in res.rows] == \
        [{k: v for k, v in r.items() if k not in strip} for r in first.rows]
    again = explore.run(sw, out, area=AREA, jobs=2, progress=False)
    assert again.computed == {"area": 0, "accuracy": 0}
