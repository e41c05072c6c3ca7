"""Test-suite setup: the tests folder is importable (for helpers such as mmasim_adapter), the
run's header names the version of every peer the suite compares with, ``quick_cxx`` builds
Verilated models at -O0 where a module asks for it, ``cluster`` is a two-worker Dask
cluster on the loopback address, and the files run longest first."""

import json
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


def pytest_collection_modifyitems(session, config, items) -> None:
    """The longest files first (tests/file_durations.json, made by tests/file_durations.py),
    each file's tests kept together and in their order: the two workers of ``make test`` take
    whole files in this order, so a long file never starts last."""
    record = Path(__file__).with_name("file_durations.json")
    if not record.is_file():
        return
    seconds = json.loads(record.read_text())
    root = Path(str(config.rootpath))
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        first.setdefault(_file_of(item, root), i)
    items.sort(key=lambda item: (-seconds.get(_file_of(item, root), 0.0),
                                 first[_file_of(item, root)]))


def _file_of(item, root: Path) -> str:
    path = Path(str(item.path))
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else path.as_posix()


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
