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


def test_post_and_sum_obligations_close(tmp_path):
    from amaranth.back import rtlil

    from hdl.formal.obligations import Post, Sum
    from testbenches.formal.sby import run_sby
    spec, ua = _small(lanes=4, stages=2)
    for cls in (Sum, Post):
        h = cls(DotProductUnit, spec, ua)
        text = rtlil.convert(h, name="top", ports=h.ports)
        res = run_sby({"top.il": text}, "read_rtlil top.il\nprep -top top",
                      workdir=tmp_path / cls.__name__, depth=ua.latency(spec) + 1,
                      timeout=300)
        assert res.status == "PASS", (cls.__name__, res.message)


def test_an_adder_mutant_fails_the_sum_obligation(tmp_path):
    from amaranth.back import rtlil

    from hdl.formal.obligations import Sum
    from testbenches.formal.sby import run_sby
    spec, ua = _small(lanes=4, stages=1)
    h = Sum(unit_class("adder-carry-dropped"), spec, ua)
    text = rtlil.convert(h, name="top", ports=h.ports)
    res = run_sby({"top.il": text}, "read_rtlil top.il\nprep -top top", workdir=tmp_path,
                  depth=ua.latency(spec) + 1, timeout=300)
    assert res.status == "FAIL", res.message


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
    (["--cocotb"], "--cocotb replays the counterexamples of --mutants"),
])
def test_prove_mutants_refuses_bad_input(tmp_path, argv, words):
    r = subprocess.run([sys.executable, "-m", "mxsim", "prove", *argv, "--out",
                        str(tmp_path / "p")], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and words in r.stderr and "Traceback" not in r.stderr, r.stderr
