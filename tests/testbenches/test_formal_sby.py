"""SymbiYosys from PyPI proves, refutes and reads back counterexamples (testbenches.formal.sby):
small SystemVerilog designs under bmc and k-induction with each solver, and the VCD reader on
handwritten traces."""

import sys
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

import pytest

from mxsim.errors import MxsimError
from testbenches.formal import SOLVERS, read_trace, run_sby

ADDER = """\
module top(input logic clk, input logic [7:0] a, input logic [7:0] b, output logic [7:0] s);
  always_ff @(posedge clk) s <= a + b;
  always @* assert(a + b == b + a);
endmodule
"""

# The sum is registered: the inputs that make it 200 are a step before the failing one.
SUM_NOT_200 = """\
module top(input logic clk, input logic [7:0] a, input logic [7:0] b, output logic [7:0] s);
  initial s = 0;
  always_ff @(posedge clk) s <= a + b;
  always @* assert(s != 8'd200);
endmodule
"""

# Counts 0..49 and wraps: c < 50 is inductive at depth 1; c < 100 holds but is not inductive
# at any small depth (49 <= c < 100 is unreachable yet steps on to 100); c < 3 fails at step 3.
COUNTER = """\
module top(input logic clk, input logic en, output logic [7:0] c);
  initial c = 0;
  always_ff @(posedge clk) if (en) c <= (c == 8'd49) ? 8'd0 : c + 8'd1;
  always @* assert(c < 8'd{bound});
endmodule
"""

# With en held high, c equals the step number: c != 4 first fails at step 4, the fifth step.
STEPPER = """\
module top(input logic clk, input logic en, output logic [7:0] c);
  initial c = 0;
  always_ff @(posedge clk) if (en) c <= c + 8'd1;
  always @* assume(en);
  always @* assert(c != 8'd4);
endmodule
"""

SCRIPT = "read -formal top.sv\nprep -top top"


def _run(design: str, tmp_path, **kwargs):
    return run_sby({"top.sv": design}, SCRIPT, workdir=tmp_path / "job dir", **kwargs)


@pytest.mark.rtl
@pytest.mark.parametrize("solver", SOLVERS)
def test_sby_adder_commutes(solver, tmp_path):
    r = _run(ADDER, tmp_path, depth=3, solver=solver)
    assert (r.status, r.mode, r.depth, r.solver, r.trace) == ("PASS", "bmc", 3, solver, None)
    assert r.message == "DONE (PASS, rc=0)"
    assert r.workdir == tmp_path / "job dir" / "job" and (r.workdir / "status").is_file()
    assert r.seconds > 0 and not r.induction_failed


@pytest.mark.rtl
@pytest.mark.parametrize("solver", SOLVERS)
def test_sby_counterexample_violates_assertion(solver, tmp_path):
    r = _run(SUM_NOT_200, tmp_path, depth=4, solver=solver)
    assert r.status == "FAIL" and r.trace == r.workdir / "engine_0" / "trace.vcd"
    assert r.message.startswith("failed assertion top.") and "top.sv:4" in r.message
    steps = read_trace(r.trace, ["a", "top.b", "s"])
    assert steps[0]["s"] == 0
    # The assertion fails at the last step, on the sum of the step before's inputs.
    assert steps[-1]["s"] == 200
    assert (steps[-2]["a"] + steps[-2]["top.b"]) % 256 == 200
    assert all(step["s"] != 200 for step in steps[:-1])


@pytest.mark.rtl
@pytest.mark.parametrize("solver", SOLVERS)
def test_sby_induction_closes(solver, tmp_path):
    r = _run(COUNTER.format(bound=50), tmp_path, mode="prove", depth=2, solver=solver)
    assert (r.status, r.mode, r.trace, r.induction_failed) == ("PASS", "prove", None, False)


@pytest.mark.rtl
@pytest.mark.parametrize("solver", SOLVERS)
def test_sby_induction_fails_on_true_property(solver, tmp_path):
    r = _run(COUNTER.format(bound=100), tmp_path, mode="prove", depth=3, solver=solver)
    assert (r.status, r.trace, r.induction_failed) == ("UNKNOWN", None, True)
    assert r.message.startswith("induction step failed at depth 3: failed assertion top.")


@pytest.mark.rtl
def test_sby_prove_basecase_counterexample(tmp_path):
    r = _run(COUNTER.format(bound=3), tmp_path, mode="prove", depth=5)
    assert (r.status, r.induction_failed) == ("FAIL", False)
    assert r.trace == r.workdir / "engine_0" / "trace.vcd" and r.message.endswith("step 3")
    steps = read_trace(r.trace, ["c", "en"])
    assert [s["c"] for s in steps] == [0, 1, 2, 3]
    assert all(s["en"] == 1 for s in steps[:-1])


@pytest.mark.rtl
def test_sby_bmc_depth_is_steps(tmp_path):
    failed = _run(STEPPER, tmp_path, depth=5)
    assert failed.status == "FAIL" and failed.message.endswith("step 4")
    assert read_trace(failed.trace, ["c"]) == [{"c": k} for k in range(5)]
    # Rerun in the same folder: the old job, its trace included, is gone.
    assert _run(STEPPER, tmp_path, depth=4).status == "PASS" and not failed.trace.exists()


@pytest.mark.rtl
def test_sby_concurrent_runs_and_multiclock(tmp_path):
    def run(i: int):
        design, multiclock = [(ADDER, False), (STEPPER, True)][i]
        return run_sby({"top.sv": design}, SCRIPT, workdir=tmp_path / str(i), depth=12,
                       multiclock=multiclock)

    with ThreadPoolExecutor(2) as pool:
        adder, stepper = pool.map(run, range(2))
    assert (adder.status, adder.workdir) == ("PASS", tmp_path / "0" / "job")
    assert (stepper.status, stepper.workdir) == ("FAIL", tmp_path / "1" / "job")
    # With multiclock the solver drives the clock, one step per edge: c counts rising edges.
    steps = read_trace(stepper.trace, ["c", "clk"])
    assert steps[-1]["c"] == 4 and len(steps) <= 12
    rises = sum(now["clk"] > before["clk"] for before, now in pairwise(steps))
    assert rises >= 4


@pytest.mark.rtl
def test_sby_syntax_error(tmp_path):
    r = _run("module top(input clk);\n  wire x = ;\nendmodule\n", tmp_path, depth=1)
    assert (r.status, r.trace) == ("ERROR", None)
    assert r.message == "top.sv:2: ERROR: syntax error, unexpected ';'"


@pytest.mark.rtl
def test_sby_timeout(tmp_path):
    # A shift-and-add multiplier against `*`: hard for bit-level solvers at 32 bits.
    design = """\
module top(input logic clk, input logic [31:0] a, input logic [31:0] b);
  logic [31:0] p;
  always_comb begin
    p = 0;
    for (int i = 0; i < 32; i++) if (b[i]) p = p + (a << i);
  end
  always @* assert(p == b * a);
endmodule
"""
    r = _run(design, tmp_path, depth=1, timeout=1)
    assert (r.status, r.trace) == ("TIMEOUT", None)
    assert r.message == "Reached TIMEOUT (1 seconds). Terminating all subprocesses."


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"solver": "x"}, r"^unknown solver 'x': choose one of yices, z3$"),
    ({"solver": "abc pdr"}, r"^solver 'abc pdr' needs the abc engine, whose yosys-abc no "
                            r"wheel ships: choose one of yices, z3$"),
    ({"mode": "cover"}, r"^Mode must be one of bmc, prove, not 'cover'$"),
    ({"depth": 0}, r"^Depth must be a positive integer, not 0$"),
    ({"depth": 2.0}, r"^Depth must be a positive integer, not 2.0$"),
    ({"timeout": 0}, r"^Timeout must be a positive number of seconds, not 0$"),
], ids=["solver", "abc", "mode", "depth", "float-depth", "timeout"])
def test_sby_bad_argument(kwargs, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        _run(ADDER, tmp_path, **kwargs)
    assert not (tmp_path / "job dir").exists()


def test_sby_bad_file_name(tmp_path):
    with pytest.raises(ValueError, match=r"^Source file name must be a plain file name of "
                                         r"letters, digits and _\.\+- other than job\.sby, "
                                         r"not '\.\./top\.sv'$"):
        run_sby({"../top.sv": ADDER}, SCRIPT, workdir=tmp_path)


def test_sby_missing_tools(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MxsimError, match=r"^yowasp-sby is missing; install the rtl and formal "
                                         r"extras \(pip install -e '\.\[rtl,formal\]'\)$"):
        _run(ADDER, tmp_path)


# A trace as Yosys-SMTBMC writes it (two steps and the closing timestamp), with what other
# writers add: $dumpvars, a comment, a bit range, an escaped name, x and z bits.
SMTBMC_VCD = """\
$version Generated by Yosys-SMTBMC $end
$timescale 1ns $end
$var integer 32 t smt_step $end
$var event 1 ! smt_clock $end
$scope module top $end
$var wire 1 n0 clk $end
$var wire 4 n1 data [3:0] $end
$scope module i__payload $end
$var wire 2 n2 a $end
$upscope $end
$scope module inner $end
$var wire 2 n3 a $end
$var wire 1 n4 \\$flag $end
$upscope $end
$upscope $end
$enddefinitions $end
$comment step zero $end
#0
$dumpvars
1!
b00000000000000000000000000000000 t
b1 n0
b1x01 n1
b10 n2
bz1 n3
1n4
$end
#5
b0 n0
#10
1!
b00000000000000000000000000000001 t
b1 n0
b11 n1
b01 n2
b11 n3
0n4
#15
b0 n0
#20
1!
b00000000000000000000000000000010 t
b1 n0
"""


def test_read_trace_steps_and_names(tmp_path):
    vcd = tmp_path / "trace.vcd"
    vcd.write_text(SMTBMC_VCD)
    names = ["data", "top.i__payload.a", "inner.a", "$flag", "top.clk"]
    assert read_trace(vcd, names) == [
        {"data": 0b1001, "top.i__payload.a": 2, "inner.a": 1, "$flag": 1, "top.clk": 1},
        {"data": 3, "top.i__payload.a": 1, "inner.a": 3, "$flag": 0, "top.clk": 1},
    ]
    assert read_trace(vcd, []) == [{}, {}]


def test_read_trace_bad_names(tmp_path):
    vcd = tmp_path / "trace.vcd"
    vcd.write_text(SMTBMC_VCD)
    with pytest.raises(ValueError, match=r"^Signal 'a' is ambiguous in .*trace\.vcd: give one "
                                         r"of top\.i__payload\.a, top\.inner\.a$"):
        read_trace(vcd, ["a"])
    with pytest.raises(ValueError, match=r"^Signal must be a full dotted path or a unique tail "
                                         r"of one in .*trace\.vcd, not 'nope'$"):
        read_trace(vcd, ["data", "nope"])
    with pytest.raises(ValueError, match=r"not 'op\.clk'$"):
        read_trace(vcd, ["op.clk"])


def test_read_trace_other_writers(tmp_path):
    # Without smt_step every timestamp is a step, and the last one is kept.
    vcd = tmp_path / "plain.vcd"
    vcd.write_text("$scope module tb $end\n$var reg 3 % v [2:0] $end\n$var wire 1 # s $end\n"
                   "$upscope $end\n$enddefinitions $end\n#0\nb101 %\nx#\n#7\n1#\n#9\nb0 %\n")
    assert read_trace(vcd, ["v", "tb.s"]) == [{"v": 5, "tb.s": 0}, {"v": 5, "tb.s": 1},
                                              {"v": 0, "tb.s": 1}]
    bad = tmp_path / "bad.vcd"
    bad.write_text("not a trace\n")
    with pytest.raises(MxsimError, match=r"^.*bad\.vcd is not a VCD file \(no \$enddefinitions\)$"):
        read_trace(bad, ["v"])
    with pytest.raises(MxsimError, match=r"^Cannot read the trace .*missing\.vcd: "):
        read_trace(tmp_path / "missing.vcd", ["v"])
