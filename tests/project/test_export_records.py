"""The committed export records (docs/data/export_*): docs/dpi.md states what
benchmarks/bench_export.py computes from them, and the record covers what the issue asks for:
every spec of every preset as it stands now, compiled with -Werror, at least 100,000 dots per
preset, every family that applies, 0 mismatches; the speed rows bit-equal."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from mxsim import presets
from mxsim.export import default_prefix
from mxsim.export.check import families_for

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "docs" / "data" / "export_c_2026-12-06.json"
SPEED = ROOT / "docs" / "data" / "export_speed_2026-12-06.json"


def _bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("bench_export",
                                                      ROOT / "benchmarks" / "bench_export.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return mod


def test_the_doc_is_computed_from_the_records():
    assert _bench().main(["table", "--check"]) == 0


def test_the_record_covers_every_spec_of_every_preset_as_it_is_now():
    bench = _bench()
    rec = json.loads(RECORD.read_text())
    assert rec["schema"] == "mxsim.export_record/1" and rec["complete"]
    assert {"-std=c99", "-Wall", "-Wextra", "-Werror"} <= set(rec["flags"])
    assert "gcc" in rec["compilers"]
    assert [r["preset"] for r in rec["presets"]] == presets.names()
    assert rec["dots_per_preset"] >= 100_000
    for row in rec["presets"]:
        specs = bench.preset_specs(row["preset"])
        assert row["specs"] == len(specs) == len(row["per_spec"])
        assert [(s["prefix"], s["digest"]) for s in row["per_spec"]] == [
            (default_prefix(s), s.digest()) for s in specs]
        assert row["dots"] == sum(s["dots"] for s in row["per_spec"]) >= 100_000
        assert row["mismatches"] == 0 and all(s["mismatches"] == 0 for s in row["per_spec"])
        assert all(c["warnings"] == 0 for c in row["compilers"].values())
        wanted = set().union(*(families_for(s) for s in specs))
        assert set(row["families"]) == wanted
        ref = row["reference"]
        assert ref["prefix"] == default_prefix(specs[0]) and ref["mismatches"] == 0
        assert set(ref["families"]) == set(families_for(specs[0])) and ref["dots"] > 0


def test_the_speed_record_is_bit_equal_beside_the_engine():
    rec = json.loads(SPEED.read_text())
    assert [r["unit"] for r in rec["rows"]] == [u[0] for u in _bench().SPEED_UNITS]
    for r in rec["rows"]:
        assert r["bit_equal"] and r["dots"] >= 65_536
        assert abs(r["ratio_c_over_engine"] / (r["c_dots_s"] / r["engine_dots_s"]) - 1) < 1e-9
