"""Campaigns: long runs as content-addressed tasks, a result store, and executors.

A campaign is a list of :class:`Task` (a top-level function by dotted path, its JSON-able
args, and what determines its result: the task's :attr:`Task.key`); :func:`run` skips the tasks
whose result the :class:`Store` (a directory) already holds, runs the rest in this process, on
a pool of local worker processes, on a local Dask cluster, on a running scheduler or on a
dask-jobqueue cluster (SLURM, LSF, ...), stores each result as it arrives, and returns a
:class:`Report`. docs/campaigns.md has the model, the executors and the faults.

Dask is imported inside the executors only: ``import mxsim.campaign`` needs nothing more than
``import mxsim``.
"""

from .executors import (
    ClusterError,
    ClusterSpec,
    add_executor_arguments,
    executor_names,
    load_cluster_spec,
    scheduler_address,
)
from .report import Failure, Report
from .runner import Interrupted, run
from .store import DamagedFile, Store, StoreError, read_regular
from .task import Task, canonical_json, sources_digest

__all__ = ["Task", "Store", "run", "Report", "Failure", "Interrupted", "executor_names",
           "ClusterError", "ClusterSpec", "StoreError", "load_cluster_spec", "canonical_json",
           "sources_digest", "add_executor_arguments", "DamagedFile", "read_regular",
           "scheduler_address"]
