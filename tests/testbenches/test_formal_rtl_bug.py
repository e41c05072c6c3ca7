"""``mxsim prove --rtl`` on example 2's injected bug (examples/rtl/block_dot, ``INJECT_BUG``:
the t2 + t3 adder truncates): at the bug map's own parameters (k = 128, blocks of 32) a check
fails with a counterexample, which ``mxsim verify --rtl --replay`` runs through the Verilator
build of the same design as a failure, and through the good design as a pass.

One SAT search and two Verilator builds: about three minutes on two busy cores (so `slow`).
"""

from pathlib import Path

import pytest

pytestmark = [pytest.mark.rtl, pytest.mark.slow]
pytest.importorskip("amaranth")

from mxsim import units, vectors  # noqa: E402
from mxsim.cli import main  # noqa: E402
from testbenches.foreign import portmap  # noqa: E402
from testbenches.formal.foreign import prepare, prove_rtl  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rtl" / "block_dot"
SPEC = str(EXAMPLE / "block_dot_spec_e4m3.toml")
#: The check a truncating adder fails: one ulp off in the fraction of a normal D.
FRACTION = "the fraction field is D's (D normal)"


def test_formal_rtl_bug_counterexample_replays_as_a_failure(tmp_path):
    pm = portmap.load(EXAMPLE / "block_dot_bug.toml")
    spec = units.get(SPEC).spec_for_formats("e4m3", "e4m3")
    prep = prepare(pm, spec, {}, tmp_path)
    (row,) = prove_rtl(prep, out_dir=tmp_path / "proof", timeout=900, jobs=1,
                       only=(FRACTION,))
    assert row.status == "FAIL" and row.counterexample, row
    vs = vectors.load(row.counterexample)
    assert (vs.k, vs.num_dots, vs.a_format, vs.block) == (128, 1, "e4m3", 32)
    for name, want in (("block_dot_bug.toml", 1), ("block_dot.toml", 0)):
        code = main(["verify", "--rtl", str(EXAMPLE / name), "--unit", SPEC, "--a-format",
                     "e4m3", "--replay", row.counterexample, "--out",
                     str(tmp_path / f"verify-{name}")])
        assert code == want, name
