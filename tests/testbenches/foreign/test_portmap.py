"""Port maps (testbenches.foreign.portmap, testbenches.foreign.portmap.ports): every malformed map
refused in one line
that names its line, the design's ports, the unit spec, and reading maps (the locator of key
lines, each handshake kind). Packing and results: test_portmap_codec.py.

The malformed maps run as ``mxsim verify --rtl BAD.toml --unit exact`` once the CLI has
``--rtl``; until then :func:`_as_cli` runs what that command runs (load, the design's ports,
check_ports) and prints what the CLI prints. Either way: one line on stderr, exit 2, nothing
written in the out folder (a design that does not elaborate leaves only Verilator's log).
Each case elaborates dut.sv at most once with ``verilator --json-only`` (a fraction of a
second; no C++).
"""

from dataclasses import replace
from pathlib import Path

import pytest
from cli_helpers import one_line, run
from portmap_helpers import FIXED, GOOD, MAPS, MXFP8_K32, line_at, variant

from mxsim.errors import MxsimError
from testbenches.foreign.portmap import MapError, load
from testbenches.foreign.portmap.ports import Port, design_ports

DUT_PORTS = ("clk, rst_n, in_valid, in_ready, out_valid, out_ready, rs1, rs2, rs3, fmt, a_arr, "
             "b_arr, rd, out_mant, out_exp, out_nan")


@pytest.fixture(scope="module")
def dut_ports(tmp_path_factory) -> dict[str, Port]:
    """dut.sv's ports, read once for the module."""
    return design_ports(load(MAPS / "good.toml"), tmp_path_factory.mktemp("ports"))


def _cli_has_rtl() -> bool:
    from mxsim.cli.parser import build_parser
    ns, _ = build_parser().parse_known_args(["verify", "--rtl", "MAP.toml"])
    return hasattr(ns, "rtl")


def _as_cli(map_path: Path, out: Path) -> tuple[int, str]:
    """What ``mxsim verify --rtl MAP --unit exact --out OUT`` does before simulating, with the
    CLI's exit code and stderr."""
    try:
        pm = load(map_path)
        pm.check_ports(design_ports(pm, out / "build"))
    except MxsimError as exc:
        return 2, f"mxsim: error: {exc}\n"
    return 0, ""


def _refused(capsys, tmp_path: Path, path: Path, line: int | None, text: str, *,
             log: bool = False) -> str:
    """The map at ``path`` is refused: exit 2, one line ``mxsim: error: PATH:LINE: ...``
    containing ``text``, nothing in the out folder (but Verilator's log when ``log``)."""
    out = tmp_path / "out"
    if _cli_has_rtl():
        rc, _, err = run(capsys, "verify", "--rtl", path, "--unit", "exact", "--out", out)
    else:
        rc, err = _as_cli(path, out)
    assert rc == 2, err
    one_line(err, text)
    where = f"{path}:{line}: " if line is not None else f"{path}: "
    assert err.startswith(f"mxsim: error: {where}"), err
    written = [p.name for p in out.rglob("*") if p.is_file()] if out.exists() else []
    assert written == (["ports.log"] if log else []), written
    return err


# (id, base map, edits, the text whose line the message names (None: no line), message)
LOAD_CASES = [
    ("unknown-table", GOOD, [("[clock]", "[timing]\nskew = 1\n\n[clock]")], "[timing]",
     "unknown table or key 'timing'; a port map has design, clock"),
    ("unknown-key", GOOD, [("latency = 5", "latency = 5\nlatncy = 5")], "latncy",
     "unknown key 'handshake.latncy'; [handshake] takes kind, in_valid"),
    ("unknown-inline-key", GOOD, [("bits = [39, 32]", "bitz = [39, 32]")], "bitz",
     "unknown key 'scales.a.bitz'; [scales.a] takes port, bits"),
    ("unknown-operand", GOOD, [("[operands.b]", "[operands.c]")], "[operands.c]",
     "unknown key 'operands.c'"),
    ("bad-enum", GOOD, [('kind = "valid-ready"', 'kind = "valid_ready"')], "valid_ready",
     "handshake.kind must be one of valid-ready, start-done, pipeline, combinational, not "
     "'valid_ready'"),
    ("bad-layout", GOOD, [('port = "rs1"', 'port = "rs1"\nlayout = "packd"')], "packd",
     "operands.a.layout must be one of packed, array, ports, not 'packd'"),
    ("wrong-type-int", GOOD, [("k = 32", 'k = "32"')], 'k = "32"',
     "instruction.k must be an integer >= 1 and <= 65536, not '32'"),
    ("wrong-type-bool", GOOD, [("sync = true", 'sync = "yes"')], '"yes"',
     "reset.sync must be true or false, not 'yes'"),
    ("bool-as-int", GOOD, [("cycles = 4", "cycles = true")], "cycles = true",
     "reset.cycles must be an integer >= 1"),
    ("not-a-table", GOOD, [("[clock]\nport = \"clk\"\n", ""),
                           ("[design]", "clock = 3\n[design]")], "clock = 3",
     "clock must be a table, not 3"),
    ("missing-key", GOOD, [('in_ready = "in_ready"\n', "")], "[handshake]",
     "handshake.in_ready is missing; add it to [handshake]"),
    ("missing-table", GOOD, [("[result]\nencoding = \"fp32\"\nport = \"rd\"\n", "")], None,
     "[result] is missing; add the table"),
    ("refused-by-kind", GOOD, [('kind = "valid-ready"', 'kind = "pipeline"')], "in_ready =",
     "handshake.in_ready is not used by handshake 'pipeline'; remove it"),
    ("clock-combinational", GOOD,
     [('kind = "valid-ready"\nin_valid = "in_valid"\nin_ready = "in_ready"\n'
       'out_valid = "out_valid"\nout_ready = "out_ready"\nlatency = 5',
       'kind = "combinational"')], "[clock]",
     "[clock] is not used by handshake 'combinational' (no clock); remove it"),
    ("unknown-format", GOOD, [('a_format = "e4m3"', 'a_format = "e4m4"')], "e4m4",
     "instruction.a_format must be one of e4m3, e5m2, e3m2, e2m3, e2m1, int8, not 'e4m4'"),
    ("select-unknown-format", FIXED, [("int8 = 0", "int9 = 0")], "int9",
     "format.values: 'int9' is not an element format"),
    ("select-without-values", FIXED, [("values = { int8 = 0, e4m3 = 1 }\n", "")], "[format]",
     "format.values is missing; add it to [format]"),
    ("select-duplicate-value", FIXED, [("e4m3 = 1", "e4m3 = 0")], "e4m3 = 0",
     "format.values: e4m3 and int8 are both 0"),
    ("select-and-fixed", FIXED, [("k = 32", 'k = 32\na_format = "e4m3"')], 'a_format',
     "instruction.a_format is not used when [format] selects the format by port"),
    ("block-not-dividing", FIXED, [("block = 16", "block = 3")], "block = 3",
     "scales.block 3 does not divide instruction.k 32; use a divisor of k"),
    ("block-per-instruction", GOOD, [('per = "instruction"', 'per = "instruction"\nblock = 8')],
     "block = 8", "scales.block is not used by scales.per = 'instruction'"),
    ("bits-reversed", GOOD, [("[39, 32]", "[32, 39]")], "[32, 39]",
     "scales.a.bits must be [msb, lsb] with msb >= lsb >= 0, not [32, 39]"),
    ("bits-negative", GOOD, [("[31, 0]", "[31, -1]")], "[31, -1]",
     "accumulator.bits must be [msb, lsb] with msb >= lsb >= 0"),
    ("bits-narrow-scale", GOOD, [("[39, 32]", "[35, 32]")], "[35, 32]",
     "scales.a.bits [35, 32] hold 4 bits; scales.a needs 8"),
    ("bits-wrong-c", GOOD, [("[31, 0]", "[15, 0]")], "[15, 0]",
     "accumulator.bits [15, 0] hold 16 bits; its format needs 32"),
    ("overlap-scales", GOOD, [("[47, 40]", "[40, 33]")], "[40, 33]",
     "scales.b overlaps scales.a in port 'rs3' (bits [40, 33] and [39, 32])"),
    ("overlap-c", GOOD, [("[31, 0]", "[63, 32]")], "port = \"rs3\"\nbits",
     "accumulator overlaps scales.a in port 'rs3' (bits [63, 32] and [39, 32])"),
    ("overlap-operands", GOOD, [('port = "rs2"', 'port = "rs1"')], 'port = "rs1"\norder',
     "operands.b overlaps operands.a in port 'rs1'"),
    ("overlap-result-fields", FIXED, [('nan = { port = "out_nan" }',
                                       'nan = { port = "out_exp", bits = [7, 7] }')],
     "nan = ", "result.nan overlaps result.exponent in port 'out_exp'"),
    ("overlap-handshake", GOOD, [('out_ready = "out_ready"', 'out_ready = "in_valid"')],
     'out_ready = "in_valid"', "handshake.out_ready overlaps handshake.in_valid in port "
                               "'in_valid' (the whole port)"),
    ("read-and-driven", GOOD, [('port = "rd"', 'port = "rs3"\nbits = [95, 64]')],
     'port = "rs3"\nbits = [95', "port 'rs3' is read and driven (result and scales.a)"),
    ("stride-below-width", GOOD, [('port = "rs1"', 'port = "rs1"\nstride = 6')], "stride = 6",
     "operands.a.stride 6 is less than its width 8, so lanes overlap"),
    ("width-below-code", GOOD, [('port = "rs1"', 'port = "rs1"\nwidth = 4')], "width = 4",
     "operands.a.width 4 is narrower than the 8 bits of an element code"),
    ("array-with-lsb", FIXED, [('layout = "array"\n\n[operands.b]',
                                'layout = "array"\nlsb = 0\n\n[operands.b]')], "lsb = 0\n",
     "operands.a.lsb is not used by layout 'array'"),
    ("ports-without-i", GOOD, [('port = "rs1"', 'port = "rs1"\nlayout = "ports"')],
     'port = "rs1"', "operands.a.port must name one port per lane with {i} for the lane"),
    ("internal-first-only", FIXED, [('kind = "none"', 'kind = "internal"\nfirst = { port = '
                                                      '"rs1", bits = [0, 0] }')],
     "[accumulator]", "accumulator.last is missing"),
    ("internal-with-format", FIXED, [('kind = "none"', 'kind = "internal"\nformat = "fp32"')],
     'format = "fp32"', "accumulator.format is not used by accumulator.kind = 'internal'"),
    ("flag-two-bits", FIXED, [('nan = { port = "out_nan" }',
                               'nan = { port = "out_nan", bits = [1, 0] }')], "nan = ",
     "result.nan.bits [1, 0] hold 2 bits; result.nan needs 1"),
    ("sign-magnitude-unsigned", FIXED, [("signed = true", "signed = false, sign_magnitude = "
                                                          "true")], "signed = false",
     "result.mantissa: sign_magnitude = true is signed; remove signed = false"),
    ("mantissa-too-wide", FIXED, [('port = "out_mant",', 'port = "out_mant", bits = [64, 0],')],
     "bits = [64, 0]", "result.mantissa.bits [64, 0] hold 65 bits; use 2 to 64"),
    ("define-float", GOOD, [("parameters = { K = 32 }", "defines = { X = 1.5 }")], "1.5",
     "design.defines.X must be an integer or a string, not 1.5"),
    ("parameter-name", GOOD, [("parameters = { K = 32 }", 'parameters = { "8K" = 8 }')], "8K",
     "design.parameters: '8K' is not a Verilog identifier"),
    ("port-not-identifier", GOOD, [('port = "clk"', 'port = "clk[0]"')], "clk[0]",
     "clock.port must be a Verilog identifier, not 'clk[0]'"),
    ("missing-source", GOOD, [('sources = ["dut.sv"]', 'sources = ["nope.sv"]')], "nope.sv",
     "design.sources: file 'nope.sv' does not exist"),
    ("no-sources", GOOD, [('sources = ["dut.sv"]', "sources = []")], "sources = []",
     "design.sources must be a list of file paths (relative to the map) with at least one"),
    ("missing-include-dir", GOOD, [('sources = ["dut.sv"]',
                                    'sources = ["dut.sv"]\ninclude_dirs = ["inc"]')], '["inc"]',
     "design.include_dirs: folder 'inc' does not exist"),
    ("toml-syntax", GOOD, [("k = 32", "k = = 32")], "k = = 32", "TOML syntax error: Invalid value"),
    ("tie-negative", GOOD, [("fmt = 0", "fmt = -1")], "fmt = -1",
     "tie.fmt must be an integer >= 0, not -1"),
    ("tie-string", GOOD, [("fmt = 0", 'fmt = "1"')], 'fmt = "1"',
     "tie.fmt must be an integer >= 0, not '1'"),
    ("tie-not-a-table", GOOD, [("[tie]\nfmt = 0\na_arr = 0\nb_arr = 0\n", ""),
                               ("[design]", "tie = 1\n[design]")], "tie = 1",
     "tie must be a table of input ports and their values (e.g. ce = 1), not 1"),
    ("tie-not-an-identifier", GOOD, [("fmt = 0", 'fmt = 0\n"a b" = 0')], '"a b"',
     "tie: 'a b' is not a Verilog identifier; name an input port of the design"),
    ("tie-mapped-port", GOOD, [("fmt = 0", "fmt = 0\nrs1 = 0")], "rs1 = 0",
     "tie.rs1 overlaps operands.a in port 'rs1' (the whole port); give each field bits of its "
     "own"),
    ("tie-clock", GOOD, [("fmt = 0", "fmt = 0\nclk = 0")], "clk = 0",
     "tie.clk overlaps clock.port in port 'clk' (the whole port)"),
]


@pytest.mark.parametrize("base, edits, needle, text", [c[1:] for c in LOAD_CASES],
                         ids=[c[0] for c in LOAD_CASES])
def test_malformed_map(capsys, tmp_path, base, edits, needle, text):
    path = variant(tmp_path, base, edits)
    _refused(capsys, tmp_path, path, line_at(path, needle) if needle is not None else 1, text)


# Maps that load but do not fit dut.sv's ports.
PORT_CASES = [
    ("missing-port", GOOD, [('port = "rs1"', 'port = "rs4"')], 'port = "rs4"',
     f"operands.a: port 'rs4' is not a port of dut; its ports: {DUT_PORTS}"),
    ("missing-handshake-port", GOOD, [('out_ready = "out_ready"', 'out_ready = "o_ready"')],
     "o_ready", "handshake.out_ready: port 'o_ready' is not a port of dut; its ports: clk"),
    ("result-width", GOOD, [('port = "rd"', 'port = "out_mant"')], 'port = "out_mant"',
     "result: port 'out_mant' has 16 bits; the map needs exactly 32"),
    ("bits-beyond-port", GOOD, [("[31, 0]", "[95, 64]")], 'port = "rs3"\nbits = [95',
     "accumulator: port 'rs3' has 64 bits ([63, 0]), the map uses bit 95"),
    ("lanes-beyond-port", GOOD, [('port = "rs1"', 'port = "rs1"\nlsb = 8')], 'port = "rs1"',
     "operands.a: port 'rs1' has 256 bits ([255, 0]), the map uses bit 263"),
    ("driven-output", GOOD, [('port = "rs1"', 'port = "out_mant"')], 'port = "out_mant"',
     "operands.a: port 'out_mant' is an output of dut, and the map drives it; name an input"),
    ("read-input", FIXED, [('port = "out_mant",', 'port = "rs1", bits = [15, 0],'),
                           ('rs1 = 0\n', '')],
     "mantissa = ", "port 'rs1' is an input of dut, and the map reads it; name an output"),
    ("handshake-direction", GOOD, [('in_ready = "in_ready"', 'in_ready = "clk"'),
                                   ('port = "clk"', 'port = "out_ready"'),
                                   ('out_ready = "out_ready"\n', "")],
     'in_ready = "clk"', "handshake.in_ready: port 'clk' is an input of dut"),
    ("packed-on-array", GOOD, [('port = "rs1"', 'port = "a_arr"'), ('a_arr = 0\n', '')],
     'port = "a_arr"',
     "operands.a: port 'a_arr' is an unpacked array (8 bits x 32); use layout = \"array\""),
    ("array-on-scalar", FIXED, [('port = "a_arr"', 'port = "rs1"'), ('rs1 = 0\n', '')],
     'port = "rs1"',
     "operands.a: port 'rs1' is not an unpacked array (256 bits); use layout = \"packed\""),
    ("array-length", FIXED, [("k = 32", "k = 64"), ("block = 16", "block = 32")],
     'port = "a_arr"',
     "operands.a: port 'a_arr' has 32 elements, the map puts 64 lanes there"),
    ("flag-width", FIXED, [('nan = { port = "out_nan" }', 'nan = { port = "rd" }')], "nan = ",
     "result.nan: port 'rd' has 32 bits; the map needs exactly 1"),
    ("select-value-width", FIXED, [("e4m3 = 1", "e4m3 = 4")], 'name = "fmt"',
     "format.name: port 'fmt' has 2 bits; the map needs at least 3; fix the port or "
     "format.values"),
    ("whole-mantissa-width", FIXED, [('port = "out_mant"', 'port = "out_nan"'),
                                      ('nan = { port = "out_nan" }\n', "")], "mantissa = ",
     "result.mantissa: port 'out_nan' has 1 bit; the map needs 2 to 64"),
    # An input the map does not drive would read differently in each harness: refused.
    ("undriven-input", GOOD, [("fmt = 0\n", "")], "[design]",
     "dut has input 'fmt' that the map does not drive; map it, or hold it at a constant under "
     "[tie] (e.g. fmt = VALUE)"),
    ("undriven-inputs", FIXED, [("out_ready = 0\n", ""), ("rs2 = 0\n", "")], "[design]",
     "dut has inputs 'out_ready', 'rs2' that the map does not drive; map each, or hold them at "
     "a constant under [tie] (e.g. out_ready = VALUE)"),
    ("undriven-handshake-input", GOOD, [('out_ready = "out_ready"\n', "")], "[design]",
     "dut has input 'out_ready' that the map does not drive"),
    ("tie-too-wide", GOOD, [("fmt = 0", "fmt = 4")], "fmt = 4",
     "tie.fmt: port 'fmt' has 2 bits; the map needs at least 3; fix the port or tie a value "
     "that fits"),
    ("tie-array-too-wide", GOOD, [("a_arr = 0", "a_arr = 256")], "a_arr = 256",
     "tie.a_arr: port 'a_arr' has 8 bits; the map needs at least 9"),
    ("tie-not-a-port", GOOD, [("fmt = 0", "fmt = 0\nfnt = 1")], "fnt = 1",
     f"tie.fnt: port 'fnt' is not a port of dut; its ports: {DUT_PORTS}"),
    ("tie-output", GOOD, [("fmt = 0", "fmt = 0\nout_nan = 1")], "out_nan = 1",
     "tie.out_nan: port 'out_nan' is an output of dut, and the map drives it; name an input"),
]


@pytest.mark.parametrize("base, edits, needle, text", [c[1:] for c in PORT_CASES],
                         ids=[c[0] for c in PORT_CASES])
def test_map_against_design(capsys, tmp_path, base, edits, needle, text):
    path = variant(tmp_path, base, edits)
    _refused(capsys, tmp_path, path, line_at(path, needle), text)


def test_missing_map_file(capsys, tmp_path):
    _refused(capsys, tmp_path, tmp_path / "none.toml", None,
             "the port map does not exist; check the path")


@pytest.mark.parametrize("edits, text", [
    ([("top = \"dut\"", "top = \"dutt\"")], "%Error: Specified --top-module 'dutt' was not "
                                           "found in design."),
    ([("parameters = { K = 32 }", "defines = { BROKEN = 1 }")], "%Error: "),
], ids=["wrong-top", "syntax-in-source"])
def test_design_that_does_not_elaborate(capsys, tmp_path, edits, text):
    path = variant(tmp_path, GOOD, edits)
    dut = tmp_path / "dut.sv"
    dut.write_text("`ifdef BROKEN\nmodule broken (input logic x\n`endif\n" + dut.read_text())
    err = _refused(capsys, tmp_path, path, line_at(path, "[design]"), text, log=True)
    assert "Verilator cannot elaborate the design" in err and "the log is" in err
    log = Path(err.rstrip().rsplit("the log is ", 1)[1])
    assert log.name == "ports.log" and "%Error" in log.read_text()


# -- the design's ports ------------------------------------------------------------------


def test_design_ports(dut_ports):
    assert ", ".join(dut_ports) == DUT_PORTS
    assert dut_ports["rs1"] == Port("rs1", "input", 256)
    assert dut_ports["a_arr"] == Port("a_arr", "input", 8, 32, (32,), 0)
    assert dut_ports["rd"] == Port("rd", "output", 32)
    assert dut_ports["out_nan"] == Port("out_nan", "output", 1)


def test_parameters_reach_the_design(tmp_path):
    path = variant(tmp_path, GOOD, [("K = 32", "K = 4")])
    assert design_ports(load(path), tmp_path)["rs1"].width == 32
    assert not list(tmp_path.glob("*.log"))


# -- the unit spec -----------------------------------------------------------------------


def test_check_spec_accepts_matching_spec():
    load(MAPS / "good.toml").check_spec(MXFP8_K32)
    load(MAPS / "fixed.toml").check_spec(replace(MXFP8_K32, block=16))
    load(MAPS / "fixed.toml").check_spec(replace(MXFP8_K32, a_format="int8", b_format="int8",
                                                 block=16))


@pytest.mark.parametrize("name, change, key, text", [
    ("good", {"k": 16, "block": 16}, "k = 32",
     "instruction.k is 32 but unit 'coproc' has k = 16; use a unit spec with k = 32"),
    ("good", {"b_format": "e5m2"}, "k = 32",
     "instruction.b_format is e4m3 but unit 'coproc' has e5m2"),
    ("good", {"scale_format": "ue4m3"}, "[scales]",
     "scales.format is e8m0 but unit 'coproc' has scale_format ue4m3"),
    ("good", {"scale_format": None, "block": None}, "[scales]",
     "scales.format is e8m0 but unit 'coproc' has scale_format none"),
    ("fixed", {}, "[scales]",
     "the design has a scale per 16 elements (scales.block) but unit 'coproc' has block = 32"),
    ("good", {"d_format": "fp16", "acc_format": "fp16"}, "[accumulator]",
     "accumulator.format is fp32 but unit 'coproc' has d_format fp16"),
    ("fixed", {"a_format": "e5m2", "b_format": "e5m2", "block": 16}, 'name = "fmt"',
     "unit 'coproc' multiplies e5m2 x e5m2; the design selects one format for A and B among "
     "int8, e4m3"),
    ("fixed", {"b_format": "int8", "block": 16}, 'name = "fmt"',
     "unit 'coproc' multiplies e4m3 x int8"),
])
def test_check_spec_refuses(name, change, key, text):
    path = MAPS / f"{name}.toml"
    with pytest.raises(MapError) as info:
        load(path).check_spec(replace(MXFP8_K32, **change))
    assert str(info.value).startswith(f"{path}:{line_at(path, key)}: {text}"), str(info.value)


# -- reading maps ------------------------------------------------------------------------


def test_key_lines_of_tricky_toml():
    import tomllib

    from testbenches.foreign.portmap.locate import key_lines, line_of
    text = '\n'.join([
        '# a comment with [brackets] and key = value',        # 1
        'title = "a # not a comment = [x]"  # comment',     # 2
        '[design]',                                          # 3
        'sources = [',                                       # 4
        '  "a.sv",  # first',                                # 5
        '  "b.sv",',                                         # 6
        ']',                                                 # 7
        'defines = { A = 1, "B.C" = "x}y", D = { E = 2 } }', # 8
        '"quoted key" = \'lit\'',                            # 9
        'dotted.key = """multi',                             # 10
        'line = "not a key"',                                # 11
        '"""',                                               # 12
        '[ operands . "a" ]',                                # 13
        'port = "rs1"',                                      # 14
        '[[array]]',                                         # 15
        'x = 1',                                             # 16
    ])
    tomllib.loads(text)
    lines = key_lines(text)
    assert lines[("title",)] == 2 and lines[("design",)] == 3
    assert lines[("design", "sources")] == 4 and lines[("design", "defines")] == 8
    assert lines[("design", "defines", "B.C")] == 8 and lines[("design", "defines", "D", "E")] == 8
    assert lines[("design", "quoted key")] == 9 and lines[("design", "dotted", "key")] == 10
    assert ("design", "line") not in lines
    assert lines[("operands", "a")] == 13 and lines[("operands", "a", "port")] == 14
    assert lines[("array", "x")] == 16
    assert line_of(lines, ("operands", "a", "missing")) == 13
    assert line_of(lines, ("operands",)) == 13 and line_of(lines, ("nowhere",)) == 1


@pytest.mark.parametrize("edits, check", [
    ([('kind = "valid-ready"\nin_valid = "in_valid"\nin_ready = "in_ready"\n'
       'out_valid = "out_valid"\nout_ready = "out_ready"\nlatency = 5',
       'kind = "start-done"\nstart = "in_valid"\ndone = "out_valid"\nlatency = 9\n'
       'latency_is = "max"'), ('[tie]\n', '[tie]\nout_ready = 0\n')],
     lambda pm: (pm.handshake.kind, pm.handshake.start, pm.handshake.done, pm.handshake.latency,
                 pm.handshake.latency_is, pm.driven_ports()[-1]) == (
         "start-done", "in_valid", "out_valid", 9, "max", "in_valid")),
    ([('kind = "valid-ready"\nin_valid = "in_valid"\nin_ready = "in_ready"\n'
       'out_valid = "out_valid"\nout_ready = "out_ready"\nlatency = 5', 'kind = "combinational"'),
      ('[clock]\nport = "clk"\n\n[reset]\nport = "rst_n"\nactive = "low"\nsync = true\n'
       'cycles = 4\n', ""),
      ('[tie]\n', '[tie]\nclk = 0\nrst_n = 1\nin_valid = 0\nout_ready = 0\n')],
     lambda pm: pm.clock is None and pm.reset is None and pm.handshake.latency is None
     and pm.driven_ports() == ["rs1", "rs2", "rs3", "clk", "rst_n", "in_valid", "out_ready",
                               "fmt", "a_arr", "b_arr"]),
    ([('out_ready = "out_ready"\nlatency = 5', 'latency = 5\ninterval = 4'),
      ('active = "low"\nsync = true\ncycles = 4\n', ""), ('[tie]\n', '[tie]\nout_ready = 0\n')],
     lambda pm: (pm.handshake.out_ready, pm.handshake.interval, pm.reset.active,
                 pm.reset.active_value, pm.reset.sync, pm.reset.cycles) == (
         None, 4, "high", 1, True, 3)),
], ids=["start-done", "combinational", "defaults"])
def test_handshake_kinds_load(tmp_path, dut_ports, edits, check):
    pm = load(variant(tmp_path, GOOD, edits))
    pm.check_ports(dut_ports)
    assert check(pm)
