"""``mxsim prove``: quick proofs that run in CI (the long ones are benchmark records,
docs/formal.md), a mutant caught with a counterexample that fails in simulation too, the RTL
finding a proof made (a sum rounded to zero gave -0), and bad input."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("amaranth")

from hdl.sim import simulate  # noqa: E402
from hdl.unit import DotProductUnit  # noqa: E402
from mxsim import vectors  # noqa: E402
from mxsim.design import resolve_design  # noqa: E402
from mxsim.engine import reference  # noqa: E402
from testbenches.formal.prove import prove_unit  # noqa: E402
from testbenches.unit.faults import unit_class  # noqa: E402

SMALL = {"k": 8, "block": 8}


def _small(lanes: int = 8, stages: int = 1):
    return resolve_design("blackwell-mxf8f6f4", "e2m1", "e2m1", SMALL, lanes, stages)


def _unit_codes(cls, spec, ua, vs) -> np.ndarray:
    ones = np.ones(64, bool)
    return np.array(simulate(cls(spec, ua), vs, ones, ones).results, np.uint32)


def test_mutant_counterexample_fails_in_simulation_too(tmp_path):
    spec, ua = _small()
    bad = unit_class("decode-sign-dropped")
    rows = prove_unit(spec, ua, unit_cls=bad, method="whole", handshake=False, timeout=300,
                      out_dir=tmp_path)
    assert [r.status for r in rows] == ["FAIL"]
    vs = vectors.load(rows[0].counterexample)
    want = np.asarray(reference.dot(spec, vs)).reshape(-1).astype(np.uint32)
    assert (_unit_codes(bad, spec, ua, vs) != want).any()
    assert (_unit_codes(DotProductUnit, spec, ua, vs) == want).all()


def test_sum_post_and_chain_obligations_close(tmp_path):
    """Through prove_unit's flattened jobs (each check's cone alone): the post obligation's
    rounding check holds only under its cut's assumption, so this also shows that deleting
    the other checks keeps the assumptions."""
    spec, ua = _small(lanes=4, stages=2)
    rows = prove_unit(spec, ua, handshake=False, obligations=("sum", "post", "chain"),
                      timeout=300, out_dir=tmp_path)
    assert [(r.harness, r.status) for r in rows] == [
        ("sum", "PASS"), ("post", "PASS"), ("post", "PASS"), ("post", "PASS"),
        ("chain", "PASS"), ("chain", "PASS")], [r.message for r in rows]
    assert rows[0].depth == ua.latency(spec) + ua.passes(spec) + 2


@pytest.mark.parametrize("fault, harness, check", [
    ("adder-carry-dropped", "sum", "the accumulator is the exact sum so far"),
    ("acc-not-cleared", "sum", "the accumulator is the exact sum so far"),
    ("chain-no-wait", "chain", "a chained block starts after the D before it"),
])
def test_a_mutant_fails_its_stage_obligation(tmp_path, fault, harness, check):
    """Mutants a single beat cannot show (an accumulator not cleared for the next block, a
    chained block that does not wait for its C) fail the streamed obligations."""
    spec, ua = _small(lanes=4, stages=1)
    rows = prove_unit(spec, ua, unit_cls=unit_class(fault), handshake=False,
                      obligations=(harness,), timeout=300, out_dir=tmp_path)
    failed = [r.check for r in rows if r.status == "FAIL"]
    assert failed == [check], [(r.check, r.status, r.message) for r in rows]


def test_a_gst_unit_is_cut_at_its_groups(tmp_path):
    """A GST-FDPA unit (NVFP4, groups of 8, two passes): the cut taps one tree input per
    group and C, its sum obligation closes, and its terms obligation checks each group."""
    from amaranth.back import rtlil

    from hdl.formal.obligations import Terms
    spec, ua = resolve_design("blackwell-mxf4nvf4", "e2m1", "e2m1", {"k": 16, "group": 8}, 8,
                              1, scale=("ue4m3", 16))
    rows = prove_unit(spec, ua, handshake=False, obligations=("sum",), timeout=300,
                      out_dir=tmp_path)
    assert [r.status for r in rows] == ["PASS"], rows[0].message
    terms = Terms(DotProductUnit, spec, ua)
    assert len(terms.taps.tree_in) == 2 and len(terms.taps.max_in) == 3
    rtlil.convert(terms, name="top", ports=terms.ports)
    assert "group 0's term, given its products" in terms.checks and len(terms.checks) == 18
    assert "group 0's product 7" in terms.checks
    assert "group 0's aligned term, given its term" in terms.checks


def test_a_sum_rounded_to_zero_is_positive_zero():
    """Found by `mxsim prove` (docs/formal.md): -2**-150 rounds toward zero to 0, and the
    spec's zero_sign positive makes it +0; the packer gave -0."""
    spec, ua = _small()
    a = np.array([[6, 3, 7, 1, 14, 11, 14, 12]], np.uint8)
    b = np.array([[0, 7, 3, 6, 6, 7, 12, 4]], np.uint8).T.copy()
    vs = vectors.VectorSet(a=a, b=b, a_format="e2m1", b_format="e2m1",
                           c=np.array([[0x80000000]], np.uint32),
                           a_scale=np.array([[0]], np.uint8),
                           b_scale=np.array([[0x68]], np.uint8), scale_format="e8m0", block=8)
    assert int(reference.dot(spec, vs)[0, 0]) == 0
    assert _unit_codes(DotProductUnit, spec, ua, vs).tolist() == [0]


@pytest.mark.parametrize("argv, words", [
    (["--unit", "hopper-wgmma", "--a-format", "fp16"], "not decoded in RTL"),
    (["--set", "align=rne"], "align rne"),
    (["--set", "k=7"], "k"),
    (["--method", "monolithic"], "invalid choice"),
    (["--timeout", "0"], "timeout"),
])
def test_prove_refuses_bad_input_in_one_line(tmp_path, argv, words):
    r = subprocess.run([sys.executable, "-m", "mxsim", "prove", *argv, "--out",
                        str(tmp_path / "p")], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert words in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) <= 2         # usage line + the error


def test_prove_mutants_from_the_command_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mxsim", "prove", "--set", "k=8", "--set",
                        "block=8", "--a-format", "e2m1", "--lanes", "8", "--stages", "1",
                        "--mutants", "decode-sign-dropped", "--json", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    import json
    row = json.loads(r.stdout)["mutants"][0]
    assert row["killed_by"] == "whole" and vectors.load(row["counterexample"]).num_dots == 1


@pytest.mark.parametrize("argv, words", [
    (["--mutants", "no-such-fault"], "no mutant 'no-such-fault'"),
    (["--cocotb"], "--cocotb works on the mutants of --mutants"),
    (["--equivalence", "60"], "--equivalence works on the mutants of --mutants"),
    (["--values"], "--values checks an array's values: give --array"),
    (["--array", "no-such-array.toml"], "no such array file"),
    (["--array", "small", "--mutants"], "--mutants does not apply to --array"),
    (["--array", "small", "--set", "k=8"], "--set does not apply to --array"),
])
def test_prove_mutants_refuses_bad_input(tmp_path, argv, words):
    r = subprocess.run([sys.executable, "-m", "mxsim", "prove", *argv, "--out",
                        str(tmp_path / "p")], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and words in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("statuses, killed_by, equivalent", [
    (["PASS", "PASS", "PASS"], None, True),
    (["PASS", "FAIL", "PASS"], "sum", False),
    (["PASS", "TIMEOUT", "PASS"], None, False),
])
def test_a_survivor_is_proven_equivalent_or_killed_or_neither(tmp_path, monkeypatch, statuses,
                                                               killed_by, equivalent):
    """``equivalence``: the survivor's full proof decides (the proofs themselves stand in:
    each real run is a committed record, docs/formal.md)."""
    from testbenches.formal import prove
    calls = []

    def fake(spec, ua, *, method="compositional", handshake=True, obligations=None, **kw):
        calls.append((method, handshake, obligations))
        if method == "compositional" and handshake and obligations is None:
            return [prove.Proof(h, "check", "bmc", 4, "yices", s, 1.0, "")
                    for h, s in zip(("terms", "sum", "post"), statuses, strict=True)]
        return [prove.Proof(method or "handshake", "every check", "bmc", 4, "yices",
                            "TIMEOUT", 2.0, "")]
    monkeypatch.setattr(prove, "prove_unit", fake)
    spec, ua = _small()
    row = prove.prove_mutant(spec, ua, "round-carry-lost", out_dir=tmp_path, equivalence=60)
    assert calls[-1] == ("compositional", True, None)
    assert (row["killed_by"], row["equivalent"]) == (killed_by, equivalent)
    assert row["equivalence_checks"] == 3 and row["equivalence_s"] == 3.0
    plain = prove.prove_mutant(spec, ua, "round-carry-lost", out_dir=tmp_path)
    assert (plain["killed_by"], plain["equivalent"]) == (None, None)
