"""The committed proof records (docs/data/formal_*): docs/formal.md states what the script
benchmarks/bench_prove.py computes from them, and each record says what it claims (every
check of the proven unit closed; each kill's counterexample failed the mutant in simulation
and passed the unit)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "formal.md").read_text()
SMALL = ROOT / "docs" / "data" / "formal_small_e2m1_2026-12-05.json"
MUTANTS = ROOT / "docs" / "data" / "formal_mutants_2026-12-05.jsonl"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_prove",
                                                  ROOT / "benchmarks/bench_prove.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_small_unit_record_is_a_proof_and_the_doc_says_so():
    report = json.loads(SMALL.read_text())
    assert report["passed"] and all(r["status"] == "PASS" for r in report["proofs"])
    assert {r["harness"] for r in report["proofs"]} == {"terms", "sum", "post", "handshake"}
    assert _flat(_bench().proof_line(report)) in _flat(DOC)


def test_the_mutant_rows_hold_and_the_doc_says_so():
    rows = [json.loads(line) for line in MUTANTS.read_text().splitlines() if line.strip()]
    assert len({r["fault"] for r in rows}) == len(rows)
    for r in rows:
        if r["counterexample"]:
            assert r["mutant_differs"] and r["unit_equal"], r["fault"]
        failed = "FAIL" in (r["whole"], r["handshake"]) or bool(r.get("cut"))
        assert bool(r["killed_by"]) == failed, r["fault"]
    assert _flat(_bench().mutant_line(rows)) in _flat(DOC)
