"""mxsim.campaign on a real Dask cluster: a scheduler and two worker processes on 127.0.0.1,
started here (no mocks). Results equal the in-process run field by field; a worker killed
mid-run (SIGKILL) costs nothing; a resumed run recomputes nothing; a deterministic failure is
reported once with its replay command and never retried; Ctrl-C exits 130 leaving only
finished results in the store.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mxsim.campaign import (
    ClusterError,
    Interrupted,
    Store,
    StoreError,
    Task,
    canonical_json,
    load_cluster_spec,
    run,
)
from mxsim.campaign.demo import demo_tasks, spin
from mxsim.campaign.executors import build_jobqueue

distributed = pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[2]



def _attempts(folder: Path) -> dict[int, int]:
    return {int(p.stem): len(p.read_text().split()) for p in folder.glob("*.log")}


def _inprocess(tasks, tmp_path):
    return run(tasks, tmp_path / "inprocess", executor="inprocess", progress=False)


# --- the task layer, no cluster -------------------------------------------------------------

def test_a_key_is_the_hash_of_what_determines_the_result():
    a = Task("mxsim.campaign.demo:spin", {"seed": 1, "rounds": 5})
    assert a.key == Task("mxsim.campaign.demo:spin", {"rounds": 5, "seed": 1}, label="x").key
    assert a.key != Task("mxsim.campaign.demo:spin", {"seed": 2, "rounds": 5}).key
    assert a.key != Task("mxsim.campaign.demo:spin", {"seed": 1, "rounds": 5},
                         key_parts={"rtl": "abc"}).key
    # key_parts that say "all": the args (a cache path, a sleep) are not part of the key.
    k = {"all": True, "seed": 1}
    assert (Task("mxsim.campaign.demo:spin", {"seed": 1, "cache": "/a"}, key_parts=k).key
            == Task("mxsim.campaign.demo:spin", {"seed": 1, "cache": "/b"}, key_parts=k).key)
    assert canonical_json({"b": [1, (2, 3)], "a": "é"}) == '{"a":"\\u00e9","b":[1,[2,3]]}'
    assert len(a.key) == 64 and a.name == a.key[:12]
    with pytest.raises(ValueError, match="package.module:function"):
        Task("not a path", {})
    with pytest.raises(TypeError, match="JSON-able"):
        Task("mxsim.campaign.demo:spin", {"seed": object()})


def test_the_store_keeps_whole_results_only(tmp_path):
    store = Store(tmp_path / "s")
    key = "ab" * 32
    assert store.get(key) is None and key not in store
    store.put(key, {"x": [1, 2]}, label="t")
    assert store.get(key) == {"x": [1, 2]} and key in store and list(store.keys()) == [key]
    assert not list((tmp_path / "s").rglob("*.tmp"))
    (tmp_path / "s" / "cd").mkdir()
    (tmp_path / "s" / "cd" / f"{'cd' * 32}.json").write_text('{"half')   # not ours: absent
    assert Store(tmp_path / "s").get("cd" * 32) is None
    (tmp_path / "file").write_text("")
    with pytest.raises(StoreError, match="must be a directory"):
        Store(tmp_path / "file")


def test_inprocess_runs_stores_and_resumes(tmp_path):
    tasks = demo_tasks(3, 200)
    first = run(tasks, tmp_path / "s", executor="inprocess", progress=False)
    assert (first.tasks, first.done, first.cached, first.failed) == (3, 3, 0, [])
    assert list(first.results.values()) == [spin(t.args) for t in tasks]
    again = run(tasks, tmp_path / "s", progress=False)
    assert (again.done, again.cached, again.results) == (0, 3, first.results)
    d = again.to_dict()
    assert d["tasks"] == 3 and "| 3 | 0 | 3 | 0 |" in again.markdown()


# --- a real cluster ------------------------------------------------------------------------

def test_the_cluster_gives_the_in_process_results_field_by_field(cluster, tmp_path):
    tasks = demo_tasks(6, 2000)
    here = _inprocess(tasks, tmp_path)
    there = run(tasks, tmp_path / "dask", scheduler=cluster.scheduler_address, progress=False)
    assert there.executor == "scheduler" and there.workers == 2
    assert there.results == here.results
    assert list(there.results) == [t.key for t in tasks]
    store = Store(tmp_path / "dask")
    for t in tasks:
        assert store.get(t.key) == here.results[t.key]
    assert {w for _, _, w in there.timings} != {w for _, _, w in here.timings}


def _demo(*args: str) -> subprocess.Popen:
    """``python -m mxsim.campaign demo ARGS --json`` in a process of its own."""
    return subprocess.Popen([sys.executable, "-m", "mxsim.campaign", "demo", *args, "--json"],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_worker_killed_mid_run_loses_nothing(cluster, tmp_path):
    attempts, store = tmp_path / "attempts", Store(tmp_path / "dask")
    attempts.mkdir()
    tasks = demo_tasks(4, 2000)
    with distributed.Client(cluster.scheduler_address, set_as_default=False) as client:
        workers = set(client.run(os.getpid).values())
    proc = _demo("--tasks", "4", "--rounds", "2000", "--sleep", "1.2", "--attempts",
                 str(attempts), "--store", str(store.path), "--scheduler",
                 cluster.scheduler_address)
    deadline = time.monotonic() + 20
    running: dict[int, int] = {}
    while not running and time.monotonic() < deadline:
        # A task that has started (its attempt line names the worker) and not finished: it
        # sleeps 1.2 s after writing that line, so its worker dies mid-task.
        for p in attempts.glob("*.log"):
            pids = [int(x) for x in p.read_text().split()]
            if pids and pids[0] in workers and tasks[int(p.stem)].key not in store:
                running[int(p.stem)] = pids[0]
        time.sleep(0.02)
    assert running, "no task started"
    seed, pid = min(running.items())
    os.kill(pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["failed"] == [] and report["done"] == 4
    assert report["results"] == _inprocess(tasks, tmp_path).results
    assert _attempts(attempts)[seed] == 2                   # the killed task ran again, once


def test_a_resumed_run_recomputes_nothing(cluster, tmp_path):
    attempts = tmp_path / "attempts"
    attempts.mkdir()
    tasks = demo_tasks(5, 500, attempts=str(attempts))
    first = run(tasks[:3], tmp_path / "s", scheduler=cluster.scheduler_address, progress=False)
    assert first.done == 3
    second = run(tasks, tmp_path / "s", scheduler=cluster.scheduler_address, progress=False)
    assert (second.done, second.cached) == (2, 3)
    third = run(tasks, tmp_path / "s", scheduler=cluster.scheduler_address, progress=False)
    assert (third.done, third.cached, third.task_seconds) == (0, 5, 0.0)
    assert _attempts(attempts) == {s: 1 for s in range(5)}
    assert third.results == second.results == _inprocess(tasks, tmp_path).results


def test_a_deterministic_failure_is_reported_once_with_its_replay(cluster, tmp_path):
    attempts = tmp_path / "attempts"
    attempts.mkdir()
    tasks = demo_tasks(4, 500, fail=frozenset({2}), attempts=str(attempts))
    report = run(tasks, tmp_path / "s", scheduler=cluster.scheduler_address, progress=False)
    assert report.done == 3 and len(report.failed) == 1
    label, error, replay = report.failed[0]
    assert label == "spin#2" and "planted failure" in error
    assert replay.endswith("--first 2 --tasks 1 --rounds 500 --executor inprocess --fail 2")
    assert _attempts(attempts)[2] == 1                       # not retried
    assert tasks[2].key not in Store(tmp_path / "s")         # never stored
    assert "replay: `python -m mxsim.campaign demo --first 2" in report.markdown()
    replayed = subprocess.run([sys.executable, "-m", "mxsim.campaign", *replay.split()[3:],
                               "--store", str(tmp_path / "replay")], capture_output=True,
                              text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert replayed.returncode == 1 and "planted failure" in replayed.stdout


def _terminal_sigint() -> None:
    """SIGINT as a terminal's foreground process has it. A test run started in the background
    of a non-interactive shell (CI) inherits SIGINT ignored, which exec keeps: the campaign
    would never see the Ctrl-C this test sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_exits_130_and_keeps_only_finished_results(tmp_path):
    """Ctrl-C on a terminal: SIGINT to the whole process group, the campaign's own local
    cluster (2 worker processes started by `run`) included; no worker prints a traceback."""
    store = tmp_path / "s"
    proc = subprocess.Popen([sys.executable, "-m", "mxsim.campaign", "demo", "--tasks", "8",
                             "--rounds", "500", "--sleep", "2", "--store", str(store),
                             "--executor", "local", "--workers", "2"],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_terminal_sigint)
    # The first result shows the cluster is up; the other tasks (2 s each, 2 workers) still
    # need seconds, so the signal lands mid-run even on a loaded machine.
    deadline = time.monotonic() + 90
    while not list(store.glob("??/*.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the campaign ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err == "mxsim: interrupted\n" and out == ""
    stored = list(store.glob("??/*.json"))
    assert 1 <= len(stored) < 8
    assert not list(store.rglob("*.tmp"))
    expected = {t.key: spin(t.args) for t in demo_tasks(8, 500)}
    for path in stored:                      # a local cluster's results, field by field
        assert json.loads(path.read_text())["result"] == expected[path.stem]


# --- cluster specs ---------------------------------------------------------------------------

def test_a_cluster_spec_builds_a_jobqueue_cluster(tmp_path):
    pytest.importorskip("dask_jobqueue")
    spec = tmp_path / "slurm.toml"
    spec.write_text('kind = "slurm"\nworkers = 16\n[options]\ncores = 1\nmemory = "2GB"\n'
                    'queue = "normal"\nwalltime = "01:00:00"\n'
                    'job_script_prologue = ["source /opt/mxsim/.venv/bin/activate"]\n'
                    'scheduler_options = {host = "127.0.0.1", dashboard_address = ":0"}\n')
    parsed = load_cluster_spec(spec)
    assert (parsed.kind, parsed.workers, parsed.cls) == ("slurm", 16, "SLURMCluster")
    yml = tmp_path / "lsf.yaml"
    yml.write_text("kind: lsf\nworkers: 4\noptions: {cores: 1, memory: 2GB, queue: normal}\n")
    assert load_cluster_spec(yml).cls == "LSFCluster"
    built = build_jobqueue(parsed)                      # no job is submitted before scale()
    try:
        script = built.job_script()
    finally:
        built.close()
    assert "#SBATCH -p normal" in script and "source /opt/mxsim/.venv/bin/activate" in script


@pytest.mark.parametrize("text, message", [
    ('kind = "k8s"\nworkers = 2\n', "kind must be one of"),
    ('kind = "slurm"\nworkers = 0\n', "workers must be a positive integer"),
    ('kind = "slurm"\nworkers = 2\nqueue = "x"\n', "unknown key 'queue'"),
    ('kind = "slurm"\nworkers = [\n', "not valid TOML"),
])
def test_a_bad_cluster_spec_is_one_line(tmp_path, text, message):
    spec = tmp_path / "c.toml"
    spec.write_text(text)
    with pytest.raises(ClusterError, match=message):
        load_cluster_spec(spec)


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "f").write_text("")
    for extra in (["--store", str(tmp_path / "f")],
                  ["--executor", "inprocess", "--scheduler", "tcp://127.0.0.1:1"],
                  ["--scheduler", "tcp://127.0.0.1:1"]):           # refused: at once
        r = subprocess.run([sys.executable, "-m", "mxsim.campaign", "demo", "--tasks", "2",
                            *extra], capture_output=True, text=True, cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert r.stderr.startswith("mxsim: error: ")
    with pytest.raises(Interrupted.__mro__[1]):                 # Interrupted is a Ctrl-C
        raise Interrupted()


# --- docs/campaigns.md -----------------------------------------------------------------------

def test_the_docs_tables_are_the_committed_benchmark_runs():
    """docs/campaigns.md's tables = `bench_campaign.py --render` of the JSON files they name."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_campaign
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    doc = (ROOT / "docs" / "campaigns.md").read_text()
    assert doc.count("<!-- bench_campaign: docs/data/") >= 1
    assert bench_campaign.render(doc, ROOT) == doc


def test_the_docs_cluster_specs_parse(tmp_path):
    doc = (ROOT / "docs" / "campaigns.md").read_text()
    blocks = [b.split("```")[0] for b in doc.split("```toml\n")[1:]]
    kinds = []
    for i, text in enumerate(blocks):
        (tmp_path / f"{i}.toml").write_text(text)
        kinds.append(load_cluster_spec(tmp_path / f"{i}.toml").kind)
    assert kinds == ["slurm", "lsf"]


def test_local_workers_drop_only_the_heartbeat_failure_record():
    """The worker preload drops distributed's heartbeat-failure record (a scheduler closed
    by a stopped client) and passes every other record of the worker's logger."""
    import logging
    import signal

    from mxsim.campaign import workerinit
    log = logging.getLogger("distributed.worker")
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    log.addHandler(handler)
    before, sigint = list(log.filters), signal.getsignal(signal.SIGINT)
    try:
        workerinit.dask_setup(None)
        log.error("Failed to communicate with scheduler during heartbeat.")
        log.error("Compute Failed")
    finally:
        log.removeHandler(handler)
        log.filters[:] = before
        signal.signal(signal.SIGINT, sigint)       # the preload ignores SIGINT
    assert seen == ["Compute Failed"]
