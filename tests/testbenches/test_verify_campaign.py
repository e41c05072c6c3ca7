"""The verification campaign on the task layer (testbenches.campaigns.pairs through mxsim.campaign):
2 pairs x 2 chunks in this process and on a real Dask cluster (a scheduler and two worker
processes on 127.0.0.1 started here, no mocks) give the same rows field by field, coverage
merged across tasks included; a resumed campaign recomputes nothing; the build cache keyed by
the RTL hash builds a model once, however many workers ask for it at once. The runs use
Amaranth's simulator and the smallest chunks (240 dot products), so no Verilator build is paid
here (tests/testbenches/test_verify.py builds the bulk harness)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("amaranth")
distributed = pytest.importorskip("distributed")

from testbenches.campaigns import pairs as campaign  # noqa: E402
from testbenches.sim import build_cache  # noqa: E402
from testbenches.unit.coverage import Coverage  # noqa: E402
from testbenches.unit.stimulus import stimulus, stimulus_dots  # noqa: E402
from testbenches.unit.verify import chunk_plan  # noqa: E402

PAIRS = [("e2m1", "e2m1"), ("int8", "e2m1")]


def small(a: str, b: str):
    """The campaign's unit of a pair with blocks of 8 (k = 8): a third of the simulator time."""
    return campaign.spec_for_pair(a, b).replace(name="campaign-k8", k=8, block=8)


#: 2 chunks of 240 dot products per pair (the stimulus's smallest), 8 lanes: a block a cycle.
RUN = dict(dots=300, chunk=20, lanes=8, stages=1, sim="amaranth", bulk=False, seed=7,
           spec_for=small)
TIMING = ("sim_seconds", "seconds")



@pytest.fixture(scope="module")
def runs(cluster, tmp_path_factory):
    """The campaign in this process, then on the cluster (its own store, the same build
    cache), then resumed on the cluster from the second store."""
    root = tmp_path_factory.mktemp("vcamp")
    kw = dict(RUN, cache=str(root / "cache"), progress=False)
    here = campaign.run_campaign(PAIRS, store=root / "s1", executor="inprocess", **kw)
    there = campaign.run_campaign(PAIRS, store=root / "s2", scheduler=cluster.scheduler_address,
                                  **kw)
    again = campaign.run_campaign(PAIRS, store=root / "s2", scheduler=cluster.scheduler_address,
                                  **kw)
    return here, there, again


def _strip(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in TIMING}


def test_cluster_rows_equal_in_process_rows_field_by_field(runs):
    (here, hrep), (there, trep), _ = runs
    assert hrep.executor == "inprocess" and trep.executor == "scheduler" and trep.workers == 2
    assert hrep.tasks == trep.tasks == 4 and hrep.done == trep.done == 4 and not trep.failed
    assert [r["pair"] for r in there["pairs"]] == ["e2m1xe2m1", "int8xe2m1"]
    assert [_strip(r) for r in here["pairs"]] == [_strip(r) for r in there["pairs"]]
    for r in there["pairs"]:
        assert r["tasks"] == 2 and r["dots"] == 480 and r["result"] in ("PASS", "PASS with holes")
        assert r["value_mismatches"] == r["cycle_mismatches"] == 0
        assert Coverage(r["coverage"], set(r["coverage"])).holes() == r["holes"]
    # The record keeps the fields docs/verification.md renders, plus the task layer's.
    assert campaign.markdown(there).startswith("**Result: 2 format pairs, 960 dot products")
    assert there["executor"] == "scheduler" and there["workers"] == 2 and "speedup" in there


def test_a_task_s_chunks_have_the_stimulus_of_one_verify_run():
    """Chunk i of a task asks for what chunk i of one ``verify`` run asked for (that loop,
    written out here: each chunk asks for what the ones before it left), so the documented
    run's figures stay comparable: 1,000,000 dot products in chunks of 100,000 are the
    committed 1,000,080 per pair."""
    for (a, b), dots, chunk in [(("e4m3", "e4m3"), 1_000_000, 100_000),
                                (("int8", "e2m1"), 300, 20), (("e2m1", "e2m1"), 50_000, 7_000)]:
        spec = campaign.spec_for_pair(a, b)
        asked, done = [], 0
        while done < dots:
            asked.append(min(chunk, dots - done))
            done += stimulus(spec, asked[-1], blocks=1, seed=len(asked)).num_dots \
                if asked[-1] < 5000 else stimulus_dots(spec, asked[-1])
        assert chunk_plan(spec, dots, chunk) == asked
        assert stimulus(spec, 700, blocks=2, seed=1).num_dots == stimulus_dots(spec, 700)
    assert sum(map(stimulus_dots, [spec] * 12, chunk_plan(spec, 10**6, 10**5))) == 1_000_080
    assert 1_000_080 in {r["dots"] for r in json.loads(
        (Path(__file__).parents[2] / "docs/data/campaign.json").read_text())["pairs"]}


def test_a_resumed_campaign_recomputes_nothing(runs):
    (_, _), (there, _), (again, arep) = runs
    assert arep.cached == 4 and arep.done == 0 and arep.task_seconds == 0
    assert again["pairs"] == there["pairs"]


def test_a_design_s_rtl_hash_is_generated_once_per_build_cache(tmp_path):
    """The RTL hash (the build cache's key) is computed by the first task of a design and
    read back by every later one."""
    calls = []

    def compute() -> str:
        calls.append(1)
        return "h1"
    assert [build_cache.memo(tmp_path, "design", compute) for _ in range(3)] == ["h1"] * 3
    assert calls == [1] and build_cache.memo(tmp_path, "other", lambda: "h2") == "h2"


def test_a_worker_with_other_sources_refuses_the_task():
    """The key names the client's sources; a worker running other ones fails the task at once
    (a deterministic failure, reported with its replay line) instead of storing its result."""
    from testbenches.campaigns.tasks import run_chunk
    task = campaign.tasks_for(PAIRS[:1], **RUN)[0]
    assert task.args["sources"] == task.key_parts["sources"] and "python -m" in task.replay
    with pytest.raises(RuntimeError, match="run the same checkout on every worker"):
        run_chunk({**task.args, "sources": "0" * 16})


#: A worker asking the cache for model ``k1`` (a build that takes half a second), as its own
#: process that imports nothing but the cache.
_ASK = """
import sys, time
from pathlib import Path
from testbenches.sim import build_cache
def build(folder):
    with open(sys.argv[2], "a") as f:
        f.write("build\\n")
    time.sleep(0.5)
    (folder / "model").write_text("k1")
folder, _ = build_cache.ensure(Path(sys.argv[1]), "k1", build)
assert (folder / "model").read_text() == "k1"
"""


def test_the_build_cache_builds_a_model_once_for_workers_that_ask_at_once(tmp_path):
    """Two processes ask for the same model at once: one builds (under the file lock), the
    other waits and reuses it; a third, later, builds nothing; another key is built apart."""
    log = tmp_path / "log"
    procs = [subprocess.Popen([sys.executable, "-c", _ASK, str(tmp_path), str(log)],
                              cwd=Path(__file__).parents[2]) for _ in range(2)]
    assert [p.wait(60) for p in procs] == [0, 0]
    assert log.read_text() == "build\n"
    folder, built = build_cache.ensure(tmp_path, "k1", lambda f: pytest.fail("rebuilt"))
    assert not built and folder == tmp_path / "k1"
    _, built = build_cache.ensure(tmp_path, "k2", lambda f: (f / "model").write_text("k2"))
    assert built and not list(tmp_path.glob("*.tmp-*"))


def test_a_failed_build_leaves_no_model(tmp_path):
    def broken(folder: Path) -> None:
        (folder / "half").write_text("")
        raise RuntimeError("compiler died")
    with pytest.raises(RuntimeError):
        build_cache.ensure(tmp_path, "k", broken)
    assert not (tmp_path / "k").exists() and not list(tmp_path.glob("*.tmp-*"))


@pytest.mark.parametrize("args, message", [
    (["--campaign", "e4m3xfp16"], "unknown format pair 'e4m3xfp16'"),
    (["--campaign", "--scheduler", "nohost:port"], "not a scheduler address"),
    (["--campaign", "--workers", "0"], "--workers"),
    (["--workers", "2"], "go with --campaign"),
    (["--campaign", "--unit", "exact"], "takes no --unit"),
    (["--campaign", "--sim", "icarus"], "not --sim icarus"),
])
def test_verify_campaign_bad_input_is_one_line_and_exit_2(args, message, capsys):
    from mxsim.cli import main
    assert main(["verify", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.splitlines()) == 1, err
