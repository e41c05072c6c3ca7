"""Fit sweeps as campaign tasks (mxsim.probe.sweep, `mxsim fit --campaign`): the same fits in this
process and on a real two-worker Dask cluster on the loopback address, a second run free, and
bad input refused in one line before any task runs."""

import json

import numpy as np
import pytest

from mxsim import campaign, presets, probe, vectors
from mxsim.cli import main
from mxsim.engine import fast
from mxsim.probe import sweep as fitsweep

pytest.importorskip("distributed")


def _observed(tmp_path, name, spec):
    suite = probe.probe_suite(k=32).subset(slice(0, 8))
    path = tmp_path / f"{name}.npz"
    vectors.save(suite.with_result(fast.dot(spec, suite), producer=name), path)
    return path


@pytest.fixture(scope="module")
def observed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("obs")
    base = presets.get("blackwell-f8f6f4").spec("e5m2", "e4m3")
    return [_observed(tmp, "f25", base), _observed(tmp, "f25rne", base.replace(
        acc_rounding="rne"))]


def _fits(report, tasks):
    return [{k: v for k, v in report.results[t.key].items() if k != "report"} for t in tasks]


def test_fit_tasks_equal_in_process_and_on_two_workers_and_resume_free(observed, tmp_path):
    tasks = fitsweep.fit_tasks(observed, k=32)
    here = campaign.run(tasks, tmp_path / "a", executor="inprocess", progress=False)
    assert here.done == 2 and not here.failed
    there = campaign.run(tasks, tmp_path / "b", executor="local", workers=2, progress=False)
    assert (there.executor, there.workers, there.done) == ("local", 2, 2)
    assert _fits(there, tasks) == _fits(here, tasks)
    assert all(f["exact"] and f["equal"] == f["total"] > 0 for f in _fits(here, tasks))
    again = campaign.run(tasks, tmp_path / "b", executor="local", workers=2, progress=False)
    assert (again.done, again.cached) == (0, 2)
    assert _fits(again, tasks) == _fits(here, tasks)


def test_fit_campaign_cli_writes_each_exact_fit(observed, tmp_path, capsys):
    out = tmp_path / "fitted"
    rc = main(["fit", "--campaign", *map(str, observed), "-o", str(out), "--workers", "1",
               "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and [f["exact"] for f in data["fits"]] == [True, True]
    for path, fit in zip(observed, data["fits"], strict=True):
        spec = fitsweep.spec_of(fit)
        assert (out / f"{path.stem}.toml").read_text() == spec.dumps("toml")
        vs = vectors.load(path)
        assert np.array_equal(fast.dot(spec, vs).view(np.uint32), vs.d.view(np.uint32))


@pytest.mark.parametrize("argv, words", [
    (["--campaign", "{missing}"], "no such file"),
    (["--campaign", "{obs0}", "{obs0}"], "two observed sets are named"),
    (["{obs0}", "--campaign", "{obs1}"], "give no IN.npz"),
])
def test_fit_campaign_bad_input_is_one_line(observed, tmp_path, capsys, argv, words):
    names = {"missing": str(tmp_path / "none.npz"), "obs0": str(observed[0]),
             "obs1": str(observed[1])}
    out = tmp_path / "fitted"
    rc = main(["fit", *[a.format(**names) for a in argv], "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and words in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_drawn_trials_are_the_studys_and_draw_from_their_own_seeds():
    """drawn_tasks keys each trial by seed, rows and the sources; draw(seed) is reproducible
    and draws the whole search space (tests/mxsim/probe/test_fit.py runs the study itself)."""
    tasks = fitsweep.drawn_tasks(3, rows=8, first=5)
    assert [t.args["seed"] for t in tasks] == [5, 6, 7] and len({t.key for t in tasks}) == 3
    assert fitsweep.draw(5) == fitsweep.draw(5) != fitsweep.draw(6)
    drawn = [fitsweep.draw(s) for s in range(40)]
    assert {d.align.value for d in drawn} == {"rz", "rd", "rne"}
    assert {d.upcast for d in drawn} == {None, "fp16"}
    counts = fitsweep.summarise_drawn([
        {"exact": True, "identical": True, "named": True, "fresh_equal": True},
        {"exact": True, "identical": False, "named": True, "fresh_equal": False},
        {"exact": False, "identical": False, "named": False, "fresh_equal": False}])
    assert counts == {"drawn": 3, "output-equivalent": 2, "identical": 1,
                      "differences named": 2, "fresh-equal": 1}


def test_recovery_study_at_scale_in_the_docs_is_the_committed_run():
    """docs/findings.md's paragraph is mxsim.probe.sweep.markdown of the committed record (the
    16-worker run), whose counts follow from its trials."""
    import re
    from pathlib import Path
    root = Path(__file__).parents[3]
    text = (root / "docs" / "findings.md").read_text()
    blocks = re.findall(r"<!-- fitsweep: (\S+) -->\n(.*?)\n<!-- fitsweep: end -->", text, re.S)
    assert len(blocks) == 1
    record = json.loads((root / blocks[0][0]).read_text())
    assert blocks[0][1] == fitsweep.markdown(record)
    assert fitsweep.summarise_drawn(record["trials"]) == record["counts"]
    assert record["campaign"]["done"] == record["counts"]["drawn"] == len(record["trials"])
    # the words "differ in two or more parameters at once" hold for every unnamed fit
    assert all(len(t["differ"]) >= 2 for t in record["trials"] if t["exact"] and not t["named"])
    seeds = sorted(t["seed"] for t in record["trials"])
    assert seeds == list(range(len(seeds)))
