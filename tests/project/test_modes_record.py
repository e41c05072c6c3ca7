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


def test_bug_builds_fail_and_fitted_specs_pass_every_mode(record):
    """``run_modes.py checks``: each bug build gives the result it must in its mode (mx_fpu's
    RDN bug fails in RDN and passes in RNE), and ``fit --rtl`` of each design reproduces every
    probe output, its fitted spec then verified with no mismatch in every mode of the design."""
    bugs = {b["bug"]: b for b in record["bugs"]}
    assert set(bugs) == {"nrm_tree", "mx_fpu rd", "mx_fpu rne"}
    for b in bugs.values():
        assert b["result"].startswith(b["want"]), b
        assert (b["exit"] == 1) == (b["want"] == "FAIL"), b
        assert (b["value_mismatches"] > 0) == (b["want"] == "FAIL"), b
    modes = _run_modes().modes()
    fits = {f["design"]: f for f in record["fits"]}
    assert set(fits) == {"nrm_tree", "mx_fpu"}
    for design, f in fits.items():
        assert f["exit"] == 0 and f["exact"] and f["equal"] == f["total"] > 0, design
        rtl_map = _run_modes().FITS[design][0]
        assert {m["mode"] for m in f["modes"]} == {m for m, (p, _) in modes.items()
                                                   if p == rtl_map}, design
        for m in f["modes"]:
            assert m["exit"] == 0 and m["value_mismatches"] == 0, (design, m["mode"])
            assert m["dots"] >= 20_000 and m["result"].startswith("PASS"), (design, m["mode"])
            assert "--unit" in m["command"] and f"fitted-{design}.toml" in m["command"]
