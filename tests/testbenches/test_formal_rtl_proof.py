"""``mxsim prove --rtl`` on example 2 (examples/rtl/block_dot) built small with ``--param``:
the injected bug (its t2 + t3 adder truncates) fails the fraction check with a counterexample
at four elements in two blocks, and the good design is proven at one element (a lone product,
rounded once to e8m14: normal, subnormal and below the least subnormal, NaN codes and scales).

The quick tests run the checks that close in seconds; the whole proof of the small design is
a committed record (docs/data/formal_rtl_block_dot_k1_2026-12-06.json) that
tests/project/test_formal_records.py re-checks.
"""

from pathlib import Path

import pytest

pytestmark = pytest.mark.rtl
pytest.importorskip("amaranth")

from mxsim import units, vectors  # noqa: E402
from mxsim.engine import reference  # noqa: E402
from testbenches.cli import with_fields  # noqa: E402
from testbenches.foreign import portmap  # noqa: E402
from testbenches.formal.foreign import prepare, prove_rtl  # noqa: E402
from testbenches.formal.rtl_miter import SCALE_SUM_SPLIT  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rtl" / "block_dot"
SPEC = str(EXAMPLE / "block_dot_spec_e4m3.toml")
CHECKS = ("the NaN flag is set exactly when D is NaN", "the value is zero exactly when D is",
          "the sign is D's", "FP32 holds the value exactly", "the exponent field is D's",
          "the fraction field is D's (D normal)",
          *(f"the fraction field is D's (D subnormal, scale sums up to {lo}..{hi})"
            for lo, hi in SCALE_SUM_SPLIT))


def _prepared(name: str, k: int, block: int, tmp_path: Path):
    pm = portmap.load(EXAMPLE / name)
    spec = with_fields(units.get(SPEC).spec_for_formats("e4m3", "e4m3"),
                       [f"k={k}", f"block={block}", f"group={block}"])
    return prepare(pm, spec, {"K": k, "BLOCK": block}, tmp_path)


def test_formal_rtl_bug_fails_at_a_small_configuration(tmp_path):
    prep = _prepared("block_dot_bug.toml", 4, 2, tmp_path)
    assert prep.rights == {"a": 3, "b": 3, "a_scale": 1, "b_scale": 1}
    (row,) = prove_rtl(prep, out_dir=tmp_path / "proof", timeout=300, jobs=1,
                       only=(CHECKS[5],))
    assert row.status == "FAIL" and row.counterexample, row
    vs = vectors.load(row.counterexample)
    assert (vs.k, vs.block, vs.num_dots) == (4, 2, 1)
    d = int(reference.dot(prep.spec, vs).reshape(-1)[0])
    assert 0 < (d >> 23) & 0xFF < 0xFF              # a normal D, one the adder rounds up


def test_formal_rtl_good_design_quick_checks_close(tmp_path):
    """The checks that close in seconds at one element: NaN, sign, exactness."""
    prep = _prepared("block_dot.toml", 1, 1, tmp_path)
    rows = prove_rtl(prep, out_dir=tmp_path / "proof", timeout=300, jobs=2,
                     only=(CHECKS[0], CHECKS[2], CHECKS[3]))
    assert [r.status for r in rows] == ["PASS"] * 3, rows
