"""The committed record of examples 4 and 5 in every mode (docs/data/foreign_rtl_modes_*.json,
written by examples/rtl/run_modes.py): every mode the script knows ran at least a million
in-domain dot products through the bulk harness with no mismatch, each command selects its mode,
and docs/foreign-rtl.md's table is the one the script prints from the record."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "foreign-rtl.md"
RECORDS = sorted((ROOT / "docs" / "data").glob("foreign_rtl_modes_*.json"))


def _run_modes():
    spec = importlib.util.spec_from_file_location("run_modes",
                                                  ROOT / "examples/rtl/run_modes.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def record() -> dict:
    assert RECORDS, "no docs/data/foreign_rtl_modes_*.json"
    return json.loads(RECORDS[-1].read_text())


def test_every_mode_ran_a_million_clean_in_domain_vectors(record):
    modes = _run_modes().modes()
    runs = {r["mode"]: r for r in record["runs"]}
    assert set(runs) == set(modes) and len(modes) == 41
    for mode, (rtl_map, args) in modes.items():
        r = runs[mode]
        assert r["dots"] >= 1_000_000, mode
        assert r["exit"] == 0 and r["result"] in ("PASS", "PASS with holes"), mode
        assert r["value_mismatches"] == r["cycle_mismatches"] == 0, mode
        cmd = r["command"].split()
        assert cmd[:4] == ["mxsim", "verify", "--rtl", rtl_map] and "--bulk" in cmd, mode
        assert " ".join(args) in r["command"], mode
        assert r["machine"], mode


def test_the_docs_table_is_the_records(record):
    text = DOC.read_text()
    shown = re.search(r"<!-- modes-table -->\n(.*?)\n<!-- /modes-table -->", text, re.S)
    assert shown is not None
    assert shown.group(1) == _run_modes().table(record)
    assert RECORDS[-1].name in text
