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

import importlib.util
import logging
import os
import socket
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import MxsimError

__all__ = ["executor_names", "ClusterError", "ClusterSpec", "load_cluster_spec", "Connection",
           "connect", "ALLOWED_FAILURES", "add_executor_arguments", "dask_installed"]

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


class ClusterError(MxsimError, ValueError):
    """A cluster that cannot be reached or built, or a bad cluster-spec file."""


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
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ClusterError(f"{path}: cannot read the cluster spec ({exc.strerror})") from None
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
    except (TypeError, ValueError) as exc:
        raise ClusterError(f"cannot build {spec.cls}: {exc}") from None


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
    """Fail in a second, not after Dask's 20 s of retries, when nothing listens at a
    ``tcp://HOST:PORT`` address (a typo, a scheduler not started yet). An address without a
    scheme is TCP, as Dask reads it."""
    if "://" not in address:
        address = "tcp://" + address
    if not address.startswith("tcp://"):
        return
    rest = address[len("tcp://"):]
    host, sep, port = rest.rpartition(":")
    if not sep or rest.endswith("]"):
        host, port = rest, "8786"                # Dask's default scheduler port
    if not host or not port.isdigit():
        raise ClusterError(f"a scheduler address is tcp://HOST:PORT, not {address!r}")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except OSError as exc:
        raise ClusterError(f"cannot reach the Dask scheduler at {address} "
                           f"({exc.strerror or exc})") from None


def _start(workers: int | None, scheduler: str | None,
           cluster_spec: str | os.PathLike | None) -> tuple[Any, Any, int, str]:
    """(cluster or None, client, workers, kind)."""
    from distributed import Client
    if scheduler:
        _reachable(scheduler)
        try:
            client = Client(scheduler, timeout="20s", set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise ClusterError(f"cannot reach the Dask scheduler at {scheduler} ({exc})") from None
        return None, client, len(client.scheduler_info().get("workers", {})), "scheduler"
    if cluster_spec:
        spec = load_cluster_spec(cluster_spec)
        cluster = build_jobqueue(spec)
        cluster.scale(n=workers or spec.workers)
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
