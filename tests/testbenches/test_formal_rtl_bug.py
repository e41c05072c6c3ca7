"""``mxsim prove --rtl`` on example 2's injected bug (examples/rtl/block_dot, ``INJECT_BUG``:
the t2 + t3 adder truncates) at the bug map's own parameters (k = 128, blocks of 32): the
committed record (docs/data/formal_rtl_bug_k128_2026-12-06, made by
``python benchmarks/formal_rtl_bug.py``: one SAT search of three to five minutes) says the
fraction check failed with a counterexample, and that counterexample, as the search wrote it,
runs through ``mxsim verify --rtl --replay`` on the Verilator build of the bug as a failure and
on the good design as a pass. The search itself runs in CI at a small configuration
(test_formal_rtl_proof.py).
"""

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.rtl, pytest.mark.slow]
pytest.importorskip("amaranth")

from mxsim import vectors  # noqa: E402
from mxsim.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "rtl" / "block_dot"
SPEC = str(EXAMPLE / "block_dot_spec_e4m3.toml")
RECORD = ROOT / "docs" / "data" / "formal_rtl_bug_k128_2026-12-06"


def test_formal_rtl_bug_record_is_a_failure_at_k128():
    record = json.loads((RECORD / "record.json").read_text())
    assert (record["rtl"], record["unit"]) == (str((EXAMPLE / "block_dot_bug.toml").relative_to(
        ROOT)), str(Path(SPEC).relative_to(ROOT)))
    assert (record["k"], record["block"], record["parameters"]) == (128, 32, {})
    proof = record["proof"]
    assert (proof["check"], proof["status"], proof["counterexample"]) == (
        "the fraction field is D's (D normal)", "FAIL", "counterexample.npz")
    doc = " ".join((ROOT / "docs" / "formal.md").read_text().split())
    assert f"The search ({round(proof['seconds'])} s of yices) is the record" in doc
    vs = vectors.load(RECORD / "counterexample.npz")
    assert (vs.k, vs.num_dots, vs.a_format, vs.block) == (128, 1, "e4m3", 32)


def test_formal_rtl_bug_counterexample_replays_as_a_failure(tmp_path):
    cex = str(RECORD / "counterexample.npz")
    for name, want in (("block_dot_bug.toml", 1), ("block_dot.toml", 0)):
        code = main(["verify", "--rtl", str(EXAMPLE / name), "--unit", SPEC, "--a-format",
                     "e4m3", "--replay", cex, "--out", str(tmp_path / f"verify-{name}")])
        assert code == want, name
