"""``mxsim prove --rtl``'s refusals: each bad input is one line naming what to fix, exit 2, no
traceback, before any proof starts (a missing map, a design Yosys cannot read, a spec no
reference circuit renders, --param and --set that disagree, options that do not apply)."""

from pathlib import Path

import pytest

pytest.importorskip("amaranth")

from mxsim.cli import main  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rtl" / "block_dot"
MAP, SPEC = str(EXAMPLE / "block_dot.toml"), str(EXAMPLE / "block_dot_spec_e4m3.toml")
SMALL = ["--set", "k=8", "--set", "block=2", "--set", "group=2"]

#: A design Verilator elaborates and Yosys (read_slang) refuses: a real variable.
REAL_SV = """module realdot (input logic [31:0] a, input logic [31:0] b, output logic [31:0] d);
    real r;
    always_comb begin
        r = a * 0.5;
        d = 32'(int'(r)) + b;
    end
endmodule
"""
REAL_MAP = """[design]
sources = ["realdot.sv"]
top = "realdot"
[handshake]
kind = "combinational"
[instruction]
k = 4
a_format = "int8"
b_format = "int8"
[operands.a]
port = "a"
[operands.b]
port = "b"
[scales]
format = "none"
[accumulator]
kind = "none"
[result]
encoding = "fp32"
port = "d"
"""
REAL_SPEC = """name = "int8-k4"
a_format = "int8"
b_format = "int8"
k = 4
frac_bits = 30
acc_format = "fp32"
acc_rounding = "rne"
"""


def _refused(capsys, argv: list[str], tmp_path: Path) -> str:
    code = main(["prove", *argv, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mxsim: error: "), err
    return lines[0]


@pytest.mark.parametrize("argv, words", [
    (["--rtl", "no_such_map.toml", "--unit", SPEC], "no_such_map.toml: the port map does not "
                                                    "exist"),
    (["--rtl", MAP], "prove --rtl needs --unit"),
    (["--rtl", MAP, "--unit", SPEC, "--a-format", "e4m3", "--mutants"],
     "--mutants does not apply to --rtl"),
    (["--rtl", MAP, "--unit", SPEC, "--a-format", "e4m3", "--set", "specials=none"],
     "the tree reference circuit does not render specials none"),
    (["--rtl", MAP, "--unit", SPEC, "--a-format", "e4m3", *SMALL],
     "the unit has k = 8, block = 2, the map k = 128, block = 32; build the design for the "
     "unit with --param"),
    (["--rtl", MAP, "--unit", SPEC, "--a-format", "e4m3", *SMALL, "--param", "K=16",
      "--param", "BLOCK=2"],
     "port 'a' has 16 elements, the map puts 8 lanes there; make them agree (the design built "
     "with --param K=16 --param BLOCK=2: do --param and --set agree?)"),
    (["--rtl", MAP, "--unit", SPEC, "--param", "K"], "--param takes NAME=VALUE"),
    (["--param", "K=8"], "--param sets a parameter of your design: give --rtl"),
], ids=["missing-map", "no-unit", "mutants", "spec-not-rendered", "set-without-param",
        "param-set-disagree", "bad-param", "param-without-rtl"])
def test_formal_rtl_cli_refuses_in_one_line(capsys, tmp_path, argv, words):
    assert words in _refused(capsys, argv, tmp_path)
    assert not (tmp_path / "out").exists()             # nothing written on a refusal


def test_formal_rtl_cli_quotes_yosys_first_error(capsys, tmp_path):
    """A design Verilator reads and Yosys does not: Yosys's first error line, and its log."""
    (tmp_path / "realdot.sv").write_text(REAL_SV)
    (tmp_path / "realdot.toml").write_text(REAL_MAP)
    (tmp_path / "int8_k4.toml").write_text(REAL_SPEC)
    line = _refused(capsys, ["--rtl", str(tmp_path / "realdot.toml"), "--unit",
                             str(tmp_path / "int8_k4.toml")], tmp_path)
    assert "realdot.toml:1: Yosys (read_slang) cannot read the design (ERROR: Feature " \
           "unimplemented" in line, line
    assert (tmp_path / "out" / "yosys-read.log").is_file()
