"""Shared by the port-map tests: the maps of tests/data/maps and ways to vary them."""

import shutil
from pathlib import Path

from mxsim.spec import UnitSpec
from testbenches.foreign.portmap import PortMap, load

MAPS = Path(__file__).parent / "data" / "maps"
#: Valid maps of dut.sv: valid/ready with packed operands, and a pipelined block dot with
#: arrays, a format port and a fixed-point result.
GOOD, FIXED = (MAPS / "good.toml").read_text(), (MAPS / "fixed.toml").read_text()
#: The spec good.toml's design computes (fixed.toml's with block = 16).
MXFP8_K32 = UnitSpec(name="coproc", a_format="e4m3", b_format="e4m3", scale_format="e8m0",
                     block=32, k=32, frac_bits=None, acc_format="fp32", acc_rounding="rne")


def variant(tmp_path: Path, base: str, edits) -> Path:
    """``base`` with each (old, new) edit made once, as BAD.toml beside a copy of dut.sv."""
    text = base
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    shutil.copy(MAPS / "dut.sv", tmp_path / "dut.sv")
    path = tmp_path / "BAD.toml"
    path.write_text(text)
    return path


def line_at(path: Path, needle: str) -> int:
    """The line of ``path`` where ``needle`` (found once) starts."""
    text = path.read_text()
    assert text.count(needle) == 1, needle
    return text[:text.index(needle)].count("\n") + 1


def map_in(tmp_path: Path, text: str, name: str = "map.toml") -> PortMap:
    """The map ``text`` loaded from ``tmp_path`` (beside dut.sv and a stand-in mx_dot.v)."""
    shutil.copy(MAPS / "dut.sv", tmp_path / "dut.sv")
    (tmp_path / "mx_dot.v").write_text("// sources must exist; this test elaborates nothing\n")
    (tmp_path / name).write_text(text)
    return load(tmp_path / name)
