"""Where tasks run: in this process, on a local Dask cluster, or on an existing cluster.

* ``inprocess``: one task after another, here (tests, debugging, a single pending task).
* ``local``: a ``distributed.LocalCluster`` on 127.0.0.1, one worker process per core (or
  ``workers``), one thread each; the scheduler runs in this process. Without Dask installed,
  ``local`` (and ``auto``) run on ``pool`` instead.
* ``pool``: worker processes of the standard library's pool (:mod:`.pool`), no Dask needed.
* a running scheduler (``scheduler="tcp://HOST:8786"``): its workers must run the same mxsim
  (the same checkout or installed version).
* a cluster-spec file (``cluster_spec=PATH``, TOML or YAML): a ``dask-jobqueue`` cluster
  (SLURM, LSF, PBS, SGE, HTCondor) built from the file and scaled to its ``workers``.

Dask is imported inside these functions only: ``import mxsim`` never needs it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import re
import shlex
import shutil
import socket
import tomllib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import MxsimError
from .store import DamagedFile, read_regular

__all__ = ["executor_names", "ClusterError", "ClusterSpec", "load_cluster_spec", "Connection",
           "connect", "ALLOWED_FAILURES", "add_executor_arguments", "scheduler_address",
           "SCHEMES", "dask_installed"]

executor_names = ("auto", "inprocess", "local", "pool")


def add_executor_arguments(parser: Any, store: str) -> None:
    """The options of a ``python -m`` campaign command that say where it runs: ``--store``
    (default ``store``), ``--executor``, ``--workers``, ``--scheduler``, ``--cluster-spec``
    (``parser``: an ``argparse`` parser, the arguments of :func:`mxsim.campaign.run`)."""
    parser.add_argument("--store", default=store, help="result store folder")
    parser.add_argument("--executor", default="auto", choices=executor_names)
    parser.add_argument("--workers", type=int, default=None,
                        help="local workers (default: cores)")
    parser.add_argument("--scheduler", default=None,
                        help="tcp://HOST:8786 of a running scheduler")
    parser.add_argument("--cluster-spec", default=None,
                        help="a dask-jobqueue spec file (TOML/YAML)")

# How many workers may die while running one task before Dask gives up on it (KilledWorker):
# a worker killed mid-task (SIGKILL, a lost node) costs a rerun elsewhere, not the task.
ALLOWED_FAILURES = 3

# dask-jobqueue's cluster classes by the name a spec file gives.
JOBQUEUE = {"slurm": "SLURMCluster", "lsf": "LSFCluster", "pbs": "PBSCluster",
            "sge": "SGECluster", "htcondor": "HTCondorCluster", "oar": "OARCluster",
            "moab": "MoabCluster"}


#: The schemes of a scheduler address that Dask's communication layer speaks.
SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
#: A cluster spec is a few lines; a larger file is not one (and is not read whole).
MAX_SPEC_BYTES = 1 << 20
#: How long the scheduler has to answer a connection with Dask's handshake.
HANDSHAKE_SECONDS = 10.0

_HOST_PORT = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[\w.\-]+))(?::(?P<port>\d+))?$")


class ClusterError(MxsimError, ValueError):
    """A cluster that cannot be reached or built, or a bad cluster-spec file."""


def scheduler_address(address: str) -> str:
    """``address`` as ``SCHEME://HOST:PORT`` (no scheme is TCP, as Dask reads it; no port is
    Dask's 8786), or a one-line :class:`ClusterError` for an empty address, a scheme Dask does
    not speak (:data:`SCHEMES`) or a malformed host or port. Nothing is contacted."""
    text = address.strip()
    if not text:
        raise ClusterError("the scheduler address is empty; give tcp://HOST:PORT")
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "tcp", text
    if scheme.lower() not in SCHEMES:
        raise ClusterError(f"{address!r} is not a scheduler address (unknown scheme "
                           f"{scheme!r}; Dask speaks {', '.join(SCHEMES)}); give tcp://HOST:PORT")
    m = _HOST_PORT.match(rest)
    port = int(m["port"]) if m and m["port"] else 8786 if m else 0
    if m is None or not 1 <= port <= 65535:
        raise ClusterError(f"{address!r} is not a scheduler address (not HOST:PORT after "
                           f"{scheme}://); give tcp://HOST:PORT")
    host = f"[{m['v6']}]" if m["v6"] else m["host"]
    return f"{scheme.lower()}://{host}:{port}"


@dataclass(frozen=True)
class ClusterSpec:
    """A dask-jobqueue cluster: the kind (``slurm``...), its class keyword arguments (cores,
    memory, queue, walltime, job_script_prologue, ...), and how many workers to ask for."""

    kind: str
    workers: int
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def cls(self) -> str:
        return JOBQUEUE[self.kind]


def _read_spec(path: Path) -> Any:
    try:
        data = read_regular(path, MAX_SPEC_BYTES, follow=True)
    except FileNotFoundError:
        raise ClusterError(f"{path}: cannot read the cluster spec (No such file or "
                           f"directory)") from None
    except DamagedFile as exc:                   # a FIFO would block, /dev/zero never end
        raise ClusterError(f"{path}: not a cluster spec ({exc}); give a TOML or YAML "
                           f"file") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ClusterError(f"{path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
                           f"offset {exc.start}); a cluster spec is TOML or YAML in "
                           f"UTF-8") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml  # PyYAML comes with dask
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ClusterError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ClusterError(f"{path}: not valid TOML ({exc})") from None


def load_cluster_spec(path: str | os.PathLike) -> ClusterSpec:
    """Read a cluster-spec file: ``kind`` (slurm, lsf, pbs, sge, htcondor, oar, moab),
    ``workers`` (a positive count) and an ``options`` table passed to the cluster class."""
    if not os.fspath(path):
        raise ClusterError("the cluster-spec path is empty; give a TOML or YAML file")
    path = Path(path)
    data = _read_spec(path)
    if not isinstance(data, dict):
        raise ClusterError(f"{path}: a cluster spec is a table with kind, workers and options")
    unknown = sorted(set(data) - {"kind", "workers", "options"})
    if unknown:
        raise ClusterError(f"{path}: unknown key {unknown[0]!r}; the keys are kind, workers "
                           f"and options")
    kind = str(data.get("kind", "")).lower()
    if kind not in JOBQUEUE:
        raise ClusterError(f"{path}: kind must be one of {', '.join(JOBQUEUE)}, not "
                           f"{data.get('kind')!r}")
    workers = data.get("workers")
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ClusterError(f"{path}: workers must be a positive integer, not {workers!r}")
    options = data.get("options", {})
    if not isinstance(options, dict):
        raise ClusterError(f"{path}: options must be a table of {JOBQUEUE[kind]} arguments")
    return ClusterSpec(kind, workers, dict(options))


def build_jobqueue(spec: ClusterSpec) -> Any:
    """The dask-jobqueue cluster of ``spec`` (not scaled yet)."""
    try:
        import dask_jobqueue
    except ImportError:
        raise ClusterError("a cluster spec needs dask-jobqueue: pip install "
                           "'mxsim[cluster]'") from None
    try:
        return getattr(dask_jobqueue, spec.cls)(**spec.options)
    except Exception as exc:        # the spec's options, passed as they are: bad input
        text = str(exc).strip()
        unknown = re.match(r"Got unexpected keyword argument '(\w+)'", text)
        if unknown:
            raise ClusterError(f"unknown {spec.cls} option {unknown[1]!r} in the cluster "
                               f"spec's options; see dask-jobqueue's {spec.cls} for the "
                               f"options it takes") from None
        raise ClusterError(f"cannot build {spec.cls} from the cluster spec's options "
                           f"({_first_line(exc)})") from None


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    # dask-jobqueue's texts go on with an example after "..., for example:"
    return lines[0].rstrip(":").removesuffix(", for example") if lines else type(exc).__name__


def _submitter(spec: ClusterSpec) -> str:
    """The batch system's submit command of ``spec`` (``sbatch``...), or a one-line
    ClusterError when it is not on this machine's PATH: dask-jobqueue would print the
    FileNotFoundError's traceback on its event loop and the campaign wait for workers that
    never come."""
    import dask_jobqueue
    command = getattr(getattr(dask_jobqueue, spec.cls).job_cls, "submit_command", None)
    name = shlex.split(command)[0] if command else ""
    if name and shutil.which(name) is None:
        raise ClusterError(f"cannot submit workers ({name}: not found); run the campaign on a "
                           f"machine of the {spec.kind} cluster (a login node)")
    return name


def _submit(cluster: Any, n: int, submitter: str) -> None:
    """Submit ``n`` worker jobs and wait for the batch system to take them (not for them to
    start). ``cluster.scale`` would only schedule the submission on the cluster's event loop,
    where a refusal (an unknown queue, an account over its limits) is logged as a traceback
    and forgotten while the campaign waits forever; this is what ``SpecCluster.__init__``
    does with the workers it is given, so a refusal is raised here."""
    while len(cluster.worker_spec) < n:
        cluster.worker_spec.update(cluster.new_worker_spec())
    try:
        cluster.sync(cluster._correct_state)
    except Exception as exc:
        from distributed.core import Status
        for job in cluster.workers.values():     # never submitted: nothing for close to stop
            if getattr(job, "job_id", None) is None:
                job.status = Status.failed
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        # dask-jobqueue's text: "Command exited with non-zero exit code. ... stderr: ..."
        said = lines[lines.index("stderr:") + 1:] if "stderr:" in lines else lines
        why = said[-1] if said else f"{submitter} failed"
        raise ClusterError(f"cannot submit workers ({why})") from None


def dashboard_wanted() -> bool:
    """Whether the scheduler can serve a dashboard (bokeh installed)."""
    return importlib.util.find_spec("bokeh") is not None


@dataclass
class Connection:
    """A Dask client and what the report says about it."""

    client: Any
    workers: int
    dashboard: str | None
    kind: str


def _dashboard(client: Any) -> str | None:
    try:
        if "dashboard" in client.scheduler_info().get("services", {}):
            return str(client.dashboard_link)
    except Exception:                          # the link is a convenience, never a failure
        pass
    return None


def _local_cluster(workers: int) -> Any:
    from distributed import LocalCluster
    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                        # A random port for the scheduler's HTTP server (metrics, and the
                        # dashboard when bokeh is there): 8787 may be taken.
                        host="127.0.0.1", dashboard_address=":0",
                        scheduler_kwargs={"dashboard": dashboard_wanted()},
                        silence_logs=logging.ERROR, preload=["mxsim.campaign.workerinit"])


def _reachable(address: str) -> None:
    """Fail in seconds, not after Dask's 20 s of retries or never, when no Dask scheduler
    answers at a ``tcp://HOST:PORT`` address (:func:`scheduler_address`'s form): nothing
    listens (a typo, a scheduler not started yet), or something else does (a web server),
    which Dask's own connect would wait on forever for its handshake."""
    scheme, _, rest = address.partition("://")
    if scheme == "ucx":                          # not a TCP socket
        return
    host, _, port = rest.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except OSError as exc:
        raise ClusterError(f"cannot reach the Dask scheduler at {address} "
                           f"({exc.strerror or exc})") from None
    if scheme != "tcp":                          # TLS and websockets: Dask's own connect
        return
    from distributed.comm import connect as dask_connect

    async def handshake() -> None:
        comm = await asyncio.wait_for(dask_connect(address, timeout=HANDSHAKE_SECONDS),
                                      HANDSHAKE_SECONDS)
        await comm.close()

    # In a thread of its own: the caller may be running an event loop (a notebook).
    with ThreadPoolExecutor(1) as pool:
        try:
            pool.submit(asyncio.run, handshake()).result()
        except Exception as exc:                 # whatever answered, it is not a scheduler
            why = (f"no Dask handshake within {HANDSHAKE_SECONDS:.0f} s"
                   if isinstance(exc, TimeoutError) else
                   "the connection was closed without a Dask handshake"
                   if isinstance(exc, OSError) else "it answered, but not with a Dask handshake")
            raise ClusterError(f"cannot reach the Dask scheduler at {address} ({why}); is it "
                               f"a Dask scheduler's address?") from None


def _client(cls: Any, address: str) -> Any:
    """A ``cls`` (Dask's Client) on ``address``, or a one-line ClusterError for any failure
    to start one (no TLS certificates for tls://, a scheduler that went away...). The client
    is made in two steps so that one whose start failed can be marked closed: its
    ``__del__`` would wait 40 s on a connection that never was, then print a traceback."""
    client = cls.__new__(cls)
    try:
        client.__init__(address, timeout="20s", set_as_default=False)
    except Exception as exc:
        client.status = "closed"
        raise ClusterError(f"cannot reach the Dask scheduler at {address} "
                           f"({_first_line(exc)})") from None
    return client


def _start(workers: int | None, scheduler: str | None,
           cluster_spec: str | os.PathLike | None) -> tuple[Any, Any, int, str]:
    """(cluster or None, client, workers, kind)."""
    from distributed import Client
    if scheduler is not None:
        address = scheduler_address(scheduler)
        _reachable(address)
        client = _client(Client, address)
        return None, client, len(client.scheduler_info().get("workers", {})), "scheduler"
    if cluster_spec is not None:
        spec = load_cluster_spec(cluster_spec)
        # Without dask-jobqueue, build_jobqueue says how to install it.
        submitter = _submitter(spec) if importlib.util.find_spec("dask_jobqueue") else ""
        cluster = build_jobqueue(spec)
        try:
            _submit(cluster, workers or spec.workers, submitter)
        except BaseException:
            with suppress(Exception):
                cluster.close(timeout=10)
            raise
        return cluster, Client(cluster, set_as_default=False), workers or spec.workers, spec.kind
    n = workers or os.cpu_count() or 1
    cluster = _local_cluster(n)
    return cluster, Client(cluster, set_as_default=False), n, "local"


@contextmanager
def connect(workers: int | None = None, scheduler: str | None = None,
            cluster_spec: str | os.PathLike | None = None) -> Iterator[Connection]:
    """A Dask client on the cluster asked for; the client (and a cluster started here) are
    closed on the way out, Ctrl-C included."""
    import dask
    with dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES}):
        cluster, client, n, kind = _start(workers, scheduler, cluster_spec)
    try:
        yield Connection(client, n, _dashboard(client), kind)
    finally:
        with suppress(Exception):
            client.close(timeout=10)
        if cluster is not None:
            with suppress(Exception):
                cluster.close(timeout=10)


def dask_installed() -> bool:
    """Whether Dask's ``distributed`` can be imported (the ``cluster`` extra): an import, not
    a look-up, so that a broken installation counts as none."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True
