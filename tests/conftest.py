"""Test-suite setup: the tests folder is importable (for helpers such as mmasim_adapter), and
the run's header names the version of every peer the suite compares with."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from mxsim import versions  # noqa: E402


def pytest_report_header(config) -> list[str]:
    return [f"peers: {versions.describe()}"]
