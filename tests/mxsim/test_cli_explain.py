"""``mxsim explain``: a result file's differing dots explained, its JSON, its one-line errors."""

import json

import numpy as np
from cli_helpers import one_line, run

from mxsim import vectors


def _files(tmp_path):
    vs = vectors.generate("normal", a_format="e4m3", m=2, n=2, k=64, scale_format="e8m0",
                          seed=4)
    vectors.save(vs, tmp_path / "in.npz")
    return vs


def test_cli_explain_a_result_that_differs(capsys, tmp_path):
    """A result of one unit explained through another: the dots that differ, each with its
    intermediates and what the observed code is consistent with (here: other roundings)."""
    _files(tmp_path)
    assert run(capsys, "run", tmp_path / "in.npz", "--unit", "ocp-fp32", "-o",
               tmp_path / "r.npz")[0] == 0
    rc, out, _ = run(capsys, "explain", tmp_path / "r.npz", "--unit", "blackwell-mxf8f6f4")
    assert rc == 0
    first = out.splitlines()[0]
    assert first.startswith("observed: the result the file holds (mxsim unit ocp-fp32); ")
    assert "i1.s0.round" in out and "scale1" in out and "d  " in out
    assert "consistent with acc_rounding = rne" in out
    rc, out, _ = run(capsys, "explain", tmp_path / "r.npz", "--unit", "blackwell-mxf8f6f4",
                     "--json", "--dot", "0", "3")
    data = json.loads(out)
    assert [d["dot"] for d in data["dots"]] == [0, 3]
    assert data["differ"] >= 1
    node = data["dots"][0]["nodes"][-1]
    assert node["op"] == "result" and node["code"] == data["dots"][0]["code"]


def test_cli_explain_a_code_and_a_plain_set(capsys, tmp_path):
    _files(tmp_path)
    rc, out, _ = run(capsys, "explain", tmp_path / "in.npz", "--unit", "exact", "--dot", "2")
    assert rc == 0 and out.startswith("dot 2 (batch/row/column 1, 0) through exact: D = 0x")
    assert "observed" not in out
    rc, out, _ = run(capsys, "explain", tmp_path / "in.npz", "--unit", "exact", "--observed",
                     "0x7fc00000", "--dot", "1")
    assert rc == 0 and "observed 0x7fc00000, the model 0x" in out


def test_cli_explain_bad_input(capsys, tmp_path):
    vs = _files(tmp_path)
    cases = [
        (("--dot", "4"), "--dot 4: "),
        (("--observed", "0x100000000"), "fp32 result codes are 0 to 0xffffffff"),
        (("--observed", str(tmp_path / "missing.npz")), "no such file"),
        (("--unit", "nope"), "Unknown unit 'nope'"),
    ]
    other = vs.replace(a=np.zeros_like(vs.a))
    vectors.save(other.replace(d=np.zeros(vs.out_shape, np.uint32), d_format="fp32"),
                 tmp_path / "other.npz")
    cases.append((("--observed", str(tmp_path / "other.npz")), "holds other inputs"))
    for extra, text in cases:
        args = ["explain", tmp_path / "in.npz", "--unit", "exact", *extra]
        if "--unit" in extra:
            args = ["explain", tmp_path / "in.npz", *extra]
        rc, _, err = run(capsys, *args)
        assert rc == 2, extra
        one_line(err, text)
