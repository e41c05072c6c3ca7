"""``prove_array``: the 2 x 2 array's handshake contract proven by BMC (all the values
checks, about 100 s, are left to docs/formal.md's measured run), one check by k-induction,
and each handshake mutant (testbenches.formal.array_faults, and the simulation mutants of
testbenches.array.mutants) refuted by the check it breaks."""

import pytest

pytest.importorskip("amaranth")

from hdl.formal.array import array_depth  # noqa: E402
from testbenches.array.mutants import NoBandwidth, NoChainWait  # noqa: E402
from testbenches.formal.array import prove_array, small_array  # noqa: E402
from testbenches.formal.array_faults import ARRAY_FAULTS  # noqa: E402

BEATS = "each unit's beat holds its row's and column's blocks"
CAUGHT = dict(ARRAY_FAULTS)
CAUGHT["no-chain-wait"] = (NoChainWait, "a chained wave waits for its slot's results", False)
CAUGHT["no-bandwidth"] = (NoBandwidth, "a wave is taken only with its A bytes fetched", False)


def test_prove_array_handshake_passes(tmp_path):
    arr = small_array()
    rows = prove_array(arr, split=False, timeout=300, out_dir=tmp_path)
    assert [(r.harness, r.check, r.method, r.status) for r in rows] == [
        ("array", "every check", "bmc", "PASS")], rows[0].message
    assert rows[0].depth == array_depth(arr) and rows[0].trace is None


def test_prove_array_values_check_passes(tmp_path):
    rows = prove_array(small_array(), data=True, checks=(BEATS,), timeout=300, out_dir=tmp_path)
    assert [(r.check, r.status) for r in rows] == [(BEATS, "PASS")], rows[0].message


def test_prove_array_output_timing_closes_by_induction(tmp_path):
    """k-induction proves the output's timing for every cycle, not only to the bound."""
    check = "each wave's output comes L cycles after it"
    rows = prove_array(small_array(), induction=True, checks=(check,), timeout=300,
                       out_dir=tmp_path)
    assert [(r.method, r.status) for r in rows] == [("k-induction", "PASS")], rows[0].message


@pytest.mark.parametrize("name", sorted(CAUGHT))
def test_prove_array_catches_mutant(tmp_path, name):
    cls, check, data = CAUGHT[name]
    rows = prove_array(small_array(), array_cls=cls, data=data, checks=(check,), timeout=300,
                       out_dir=tmp_path)
    assert [(r.check, r.status) for r in rows] == [(check, "FAIL")], rows[0].message
    assert rows[0].trace is not None


def test_prove_array_refuses_bad_checks(tmp_path):
    with pytest.raises(ValueError, match=r"^Check must be one of the harness's, not 'nope'$"):
        prove_array(small_array(), checks=("nope",), out_dir=tmp_path)
    with pytest.raises(ValueError, match=r"^checks must be None when split is False"):
        prove_array(small_array(), checks=(BEATS,), data=True, split=False, out_dir=tmp_path)
