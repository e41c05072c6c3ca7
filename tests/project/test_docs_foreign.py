"""docs/foreign-rtl.md: its measured table is the one examples/rtl/run_all.py prints from the
committed record, the record shows what the documented runs claim (a million clean vectors
through the bulk harness per example, a cocotb run without coverage holes, the injected bug
caught and replayed, the fit), and the tutorial's port map is a valid map of example 1."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "foreign-rtl.md"
RECORD = ROOT / "docs" / "data" / "foreign_rtl_2026-12-01.json"


def _run_all():
    spec = importlib.util.spec_from_file_location("run_all", ROOT / "examples/rtl/run_all.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def record() -> dict:
    return json.loads(RECORD.read_text())


def test_the_docs_table_is_the_records(record):
    text = DOC.read_text()
    shown = re.search(r"<!-- foreign-table -->\n(.*?)\n<!-- /foreign-table -->", text, re.S)
    assert shown is not None
    assert shown.group(1) == _run_all().table(record)
    assert RECORD.name in text


def test_every_example_ran_a_million_clean_vectors_and_caught_its_bug(record):
    names = {r["name"] for r in record["runs"]}
    assert names == {"mxfp8_coproc", "block_dot e4m3", "block_dot int8", "mxsim_unit"}
    for r in record["runs"]:
        b, c, g = r["bulk"], r["cocotb"], r["bug"]
        assert b["dots"] >= 1_000_000 and b["result"] == "PASS", r["name"]
        assert b["value_mismatches"] == b["cycle_mismatches"] == 0, r["name"]
        assert "--bulk" in b["command"] and "--rtl" in b["command"]
        assert c["result"] == "PASS" and c["holes"] == 0, r["name"]
        assert c["value_mismatches"] == c["cycle_mismatches"] == 0
        assert g["result"] == "FAIL" and g["replay_result"] == "FAIL", r["name"]
        assert g["value_mismatches"] + g["cycle_mismatches"] > 0
        assert 1 <= g["failing_dots"] <= 20


def test_fit_recovers_each_examples_numerics_from_its_outputs(record):
    fits = {r["name"]: r["fit"] for r in record["runs"]}
    for name, fit in fits.items():
        assert fit["exact"] and fit["equal"] == fit["total"] > 0, name
    assert fits["mxfp8_coproc"]["spec"] == {
        "frac_bits": None, "acc_format": "fp32", "acc_rounding": "rne", "specials": "none",
        "overflow": "saturate", "group": None, "reduce": None}
    # blackwell-mxf8f6f4 (MMA-Sim's parameters): F = 25, RZ into FP32, Inf on overflow.
    assert fits["mxsim_unit"]["spec"] == {
        "frac_bits": 25, "acc_format": "fp32", "acc_rounding": "rz", "specials": None,
        "overflow": "inf", "group": None, "reduce": None}
    for name in ("block_dot e4m3", "block_dot int8"):
        assert fits[name]["spec"] == {
            "frac_bits": None, "acc_format": "e8m14", "acc_rounding": "rne", "specials": None,
            "overflow": "saturate", "group": 32, "reduce": "tree"}, name


@pytest.mark.rtl
def test_the_tutorial_map_is_a_valid_map_of_example_1(tmp_path):
    from testbenches.foreign import portmap
    from testbenches.foreign.portmap import ports
    block = re.search(r"## 2\. Write its port map.*?```toml\n(.*?)```", DOC.read_text(), re.S)
    example = ROOT / "examples" / "rtl" / "mxfp8_coproc"
    text = block.group(1).replace('"mxfp8_coproc.sv"', json.dumps(str(example /
                                                                      "mxfp8_coproc.sv")))
    (tmp_path / "tutorial.toml").write_text(text)
    pm = portmap.load(tmp_path / "tutorial.toml")
    pm.check_ports(ports.design_ports(pm, tmp_path))
    shipped = portmap.load(example / "mxfp8_coproc.toml")
    for part in ("handshake", "k", "a", "b", "scales", "accumulator", "result"):
        assert _plain(getattr(pm, part)) == _plain(getattr(shipped, part)), part


def _plain(x):
    """A map part without the line numbers it was read from."""
    if hasattr(x, "__dataclass_fields__"):
        return {k: _plain(v) for k, v in vars(x).items() if k not in ("line", "lines")}
    return x
