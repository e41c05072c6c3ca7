"""Test-suite setup: the tests folder is importable (for helpers such as mmasim_adapter), the
run's header names the version of every peer the suite compares with, ``quick_cxx`` builds
Verilated models at -O0 where a module asks for it, and ``cluster`` is a two-worker Dask
cluster on the loopback address."""

import os
import sys
from pathlib import Path

import pytest

# The helpers beside this file, and every test folder: a test may import another's
# fixtures by module name (from test_engine import CONFIGS), wherever each lives.
for _folder in sorted({p.parent for p in Path(__file__).parent.rglob("test_*.py")},
                      reverse=True) + [Path(__file__).parent]:
    sys.path.insert(0, str(_folder))

from mxsim import versions  # noqa: E402


def pytest_report_header(config) -> list[str]:
    return [f"peers: {versions.describe()}"]


@pytest.fixture(scope="module")
def quick_cxx():
    """Verilated models compiled at -O0 for the module's tests (make takes Verilator's OPT_*
    variables from MAKEFLAGS, also in subprocesses): a build takes a fraction of the -Os time
    and the short runs of these tests are about as fast; the values are the same, only the
    C++ compiler's optimisation differs."""
    flags = os.environ.get("MAKEFLAGS", "")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MAKEFLAGS", f"{flags} OPT_FAST=-O0 OPT_SLOW=-O0 OPT_GLOBAL=-O0".strip())
        yield


@pytest.fixture(scope="module")
def cluster():
    """A real Dask cluster for a module's tests: one scheduler and two single-threaded worker
    processes on the loopback address (no dashboard)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=":0",
                                  scheduler_kwargs={"dashboard": False}) as c:
        yield c
