"""Port maps (testbenches.portmap, testbenches.ports): every malformed map refused in one line
that names its line, packing against hdl.payload's packer and a bit-by-bit reference, and the
exact decoding and comparison of fixed-point results.

The malformed maps run as ``mxsim verify --rtl BAD.toml --unit exact`` once the CLI has
``--rtl``; until then :func:`_as_cli` runs what that command runs (load, the design's ports,
check_ports) and prints what the CLI prints. Either way: one line on stderr, exit 2, nothing
written in the out folder (a design that does not elaborate leaves only Verilator's log).
Each case elaborates dut.sv at most once with ``verilator --json-only`` (a fraction of a
second; no C++).
"""

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import one_line, run

from mxsim import presets, vectors
from mxsim.errors import MxsimError
from mxsim.spec import UnitSpec
from testbenches.portmap import MapError, load
from testbenches.ports import Port, design_ports

MAPS = Path(__file__).parent / "data" / "maps"
GOOD, FIXED = (MAPS / "good.toml").read_text(), (MAPS / "fixed.toml").read_text()
DUT_PORTS = ("clk, rst_n, in_valid, in_ready, out_valid, out_ready, rs1, rs2, rs3, fmt, a_arr, "
             "b_arr, rd, out_mant, out_exp, out_nan")


@pytest.fixture(scope="module")
def dut_ports() -> dict[str, Port]:
    """dut.sv's ports, read once for the module."""
    return design_ports(load(MAPS / "good.toml"), MAPS)


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


def _variant(tmp_path: Path, base: str, edits) -> Path:
    """``base`` with each (old, new) edit made once, as BAD.toml beside a copy of dut.sv."""
    text = base
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    shutil.copy(MAPS / "dut.sv", tmp_path / "dut.sv")
    path = tmp_path / "BAD.toml"
    path.write_text(text)
    return path


def _line(path: Path, needle: str) -> int:
    text = path.read_text()
    assert text.count(needle) == 1, needle
    return text[:text.index(needle)].count("\n") + 1


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
     "format.values must map element formats to the port values that select them"),
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
]


@pytest.mark.parametrize("base, edits, needle, text", [c[1:] for c in LOAD_CASES],
                         ids=[c[0] for c in LOAD_CASES])
def test_malformed_map(capsys, tmp_path, base, edits, needle, text):
    path = _variant(tmp_path, base, edits)
    line = _line(path, needle) if needle is not None else 1
    _refused(capsys, tmp_path, path, line, text)


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
    ("read-input", FIXED, [('port = "out_mant",', 'port = "rs1", bits = [15, 0],')],
     "mantissa = ", "port 'rs1' is an input of dut, and the map reads it; name an output"),
    ("handshake-direction", GOOD, [('in_ready = "in_ready"', 'in_ready = "clk"'),
                                   ('port = "clk"', 'port = "out_ready"'),
                                   ('out_ready = "out_ready"\n', "")],
     'in_ready = "clk"', "handshake.in_ready: port 'clk' is an input of dut"),
    ("packed-on-array", GOOD, [('port = "rs1"', 'port = "a_arr"')], 'port = "a_arr"',
     "operands.a: port 'a_arr' is an unpacked array (8 bits x 32); use layout = \"array\""),
    ("array-on-scalar", FIXED, [('port = "a_arr"', 'port = "rs1"')], 'port = "rs1"',
     "operands.a: port 'rs1' is not an unpacked array (256 bits); use layout = \"packed\""),
    ("array-length", FIXED, [("k = 32", "k = 64"), ("block = 16", "block = 32")],
     'port = "a_arr"',
     "operands.a: port 'a_arr' has 32 elements, the map puts 64 lanes there"),
    ("flag-width", FIXED, [('nan = { port = "out_nan" }', 'nan = { port = "rd" }')], "nan = ",
     "result.nan: port 'rd' has 32 bits; the map needs exactly 1"),
    ("select-value-width", FIXED, [("e4m3 = 1", "e4m3 = 4")], 'name = "fmt"',
     "format.name: port 'fmt' has 2 bits; the map needs at least 3"),
    ("whole-mantissa-width", FIXED, [('port = "out_mant"', 'port = "out_nan"'),
                                      ('nan = { port = "out_nan" }\n', "")], "mantissa = ",
     "result.mantissa: port 'out_nan' has 1 bits; the map needs 2 to 64"),
]


@pytest.mark.parametrize("base, edits, needle, text", [c[1:] for c in PORT_CASES],
                         ids=[c[0] for c in PORT_CASES])
def test_map_against_design(capsys, tmp_path, base, edits, needle, text):
    path = _variant(tmp_path, base, edits)
    _refused(capsys, tmp_path, path, _line(path, needle), text)


def test_missing_map_file(capsys, tmp_path):
    _refused(capsys, tmp_path, tmp_path / "none.toml", None,
             "the port map does not exist; check the path")


@pytest.mark.parametrize("edits, text", [
    ([("top = \"dut\"", "top = \"dutt\"")], "%Error: Specified --top-module 'dutt' was not "
                                           "found in design."),
    ([("parameters = { K = 32 }", "defines = { BROKEN = 1 }")], "%Error: "),
], ids=["wrong-top", "syntax-in-source"])
def test_design_that_does_not_elaborate(capsys, tmp_path, edits, text):
    path = _variant(tmp_path, GOOD, edits)
    dut = tmp_path / "dut.sv"
    dut.write_text("`ifdef BROKEN\nmodule broken (input logic x\n`endif\n" + dut.read_text())
    err = _refused(capsys, tmp_path, path, _line(path, "[design]"), text, log=True)
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
    path = _variant(tmp_path, GOOD, [("K = 32", "K = 4")])
    assert design_ports(load(path), tmp_path)["rs1"].width == 32
    assert not list(tmp_path.glob("*.log"))


# -- the unit spec -----------------------------------------------------------------------


MXFP8_K32 = UnitSpec(name="coproc", a_format="e4m3", b_format="e4m3", scale_format="e8m0",
                    block=32, k=32, frac_bits=None, acc_format="fp32", acc_rounding="rne")


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
    assert str(info.value).startswith(f"{path}:{_line(path, key)}: {text}"), str(info.value)


# -- packing -----------------------------------------------------------------------------

#: mxsim's generated MXFP8 unit (k = 32) behind a port map.
MX_UNIT = (MAPS / "mx_unit.toml").read_text()
MXFP8 = presets.get("blackwell-mxf8f6f4").spec("e4m3", scale_format="e8m0", block=32)


def _map(tmp_path: Path, text: str, name: str = "map.toml"):
    (tmp_path / "mx_dot.v").write_text("// sources must exist; this test elaborates nothing\n")
    (tmp_path / name).write_text(text)
    return load(tmp_path / name)


def _ints(words: np.ndarray) -> list[int]:
    """Each row of (n, words) uint32 as one integer."""
    return [sum(int(w) << (32 * j) for j, w in enumerate(row)) for row in words]


@pytest.mark.parametrize("k", [32, 96])
def test_pack_is_the_generated_units_payload(tmp_path, k):
    from hdl.payload import payload_words
    pm = _map(tmp_path, MX_UNIT)
    vs = vectors.generate("uniform", m=3, n=5, k=k, batch=(2,), scale_format="e8m0", block=32,
                          seed=k)
    beats = pm.pack(MXFP8, vs)
    assert list(beats.ports) == ["i__payload"] and beats.per_dot == k // 32
    assert beats.ports["i__payload"].dtype == np.uint32
    assert np.array_equal(beats.ports["i__payload"], payload_words(MXFP8, vs))
    assert beats.last.tolist() == [s == k // 32 - 1 for _ in range(30) for s in range(k // 32)]
    assert pm.driven_ports() == ["i__payload", "i__valid", "o__ready"]
    assert pm.read_ports() == ["o__payload", "i__ready", "o__valid"]


def test_pack_packed_fields_bit_by_bit(dut_ports):
    pm = load(MAPS / "good.toml")
    pm.check_ports(dut_ports)
    vs = vectors.generate("uniform", m=2, n=3, k=32, batch=(2,), scale_format="e8m0",
                          block=32, seed=3)
    beats = pm.pack(MXFP8, vs)
    got = {name: _ints(words) for name, words in beats.ports.items()}
    assert {name: w.shape for name, w in beats.ports.items()} == {
        "rs1": (12, 8), "rs2": (12, 8), "rs3": (12, 2)}
    n = 0
    for t in range(2):
        for i in range(2):
            for j in range(3):
                a, b = vs.a[t, i], vs.b[t, :, j]
                assert got["rs1"][n] == sum(int(a[x]) << (8 * x) for x in range(32))
                # order = "msb-first": lane 0 in the top byte.
                assert got["rs2"][n] == sum(int(b[x]) << (8 * (31 - x)) for x in range(32))
                assert got["rs3"][n] == (int(vs.c[t, i, j]) | int(vs.a_scale[t, i, 0]) << 32
                                         | int(vs.b_scale[t, 0, j]) << 40)
                n += 1


@pytest.mark.parametrize("fmt, select", [("int8", 0), ("e4m3", 1)])
def test_pack_arrays_block_scales_and_format_port(dut_ports, fmt, select):
    pm = load(MAPS / "fixed.toml")
    pm.check_ports(dut_ports)
    spec = replace(MXFP8_K32, a_format=fmt, b_format=fmt, block=16)
    vs = vectors.generate("uniform", a_format=fmt, m=2, n=2, k=32, scale_format="e8m0",
                          block=16, with_c=False, seed=5)
    beats = pm.pack(spec, vs)
    assert beats.ports["a_arr"].shape == (4, 32, 1)
    assert np.array_equal(beats.ports["a_arr"][:, :, 0], np.repeat(vs.a, 2, axis=0))
    assert np.array_equal(beats.ports["b_arr"][:, :, 0], np.tile(vs.b.T, (2, 1)))
    assert beats.ports["fmt"].tolist() == [[select]] * 4
    rs3 = _ints(beats.ports["rs3"])
    for n, (i, j) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):
        sa, sb = vs.a_scale[i], vs.b_scale[:, j]
        assert rs3[n] == (int(sa[0]) | int(sa[1]) << 8 | int(sb[0]) << 16 | int(sb[1]) << 24)


def test_pack_lane_ports_and_internal_accumulator(tmp_path):
    text = FIXED.replace('port = "a_arr"\nlayout = "array"', 'port = "a{i}"\nlayout = "ports"')
    text = text.replace('kind = "none"', 'kind = "internal"\nclear = { port = "ctl", bits = [0, 0] '
                                         '}\nlast = { port = "ctl", bits = [3, 3] }')
    text = text.replace('b = { port = "rs3", lsb = 16 }',
                        'b = { port = "rs3", lsb = 16, order = "msb-first", stride = 12 }')
    shutil.copy(MAPS / "dut.sv", tmp_path / "dut.sv")
    pm = _map(tmp_path, text)
    assert pm.data_ports() == [f"a{i}" for i in range(32)] + ["b_arr", "rs3", "ctl", "fmt"]
    spec = replace(MXFP8_K32, block=16)
    vs = vectors.generate("uniform", m=1, n=2, k=96, scale_format="e8m0", block=16,
                          with_c=False, seed=7)
    beats = pm.pack(spec, vs)
    assert beats.per_dot == 3 and beats.last.tolist() == [False, False, True] * 2
    assert beats.ports["ctl"][:, 0].tolist() == [1, 0, 8] * 2
    for n in range(6):
        j, step = divmod(n, 3)
        assert [int(beats.ports[f"a{x}"][n, 0]) for x in range(32)] == \
            vs.a[0, 32 * step:32 * step + 32].tolist()
        sb = vs.b_scale[2 * step:2 * step + 2, j]
        # Two lanes, 12 bits apart, lane 0 at the top: bits [35, 28] and [23, 16].
        assert _ints(beats.ports["rs3"])[n] >> 16 == int(sb[1]) | int(sb[0]) << 12


@pytest.mark.parametrize("name, kwargs, needle, text", [
    ("good", dict(k=64), "[accumulator]",
     "the vector set has K = 64; the design needs k = 32 (one instruction per dot product: "
     "no first/last in [accumulator])"),
    ("good", dict(b_format="e5m2"), "k = 32",
     "the vector set holds e4m3 x e5m2; the design takes e4m3"),
    ("good", dict(block=16), "[scales]",
     "the vector set has e8m0 scales per 16 elements; the design takes e8m0 scales per "
     "instruction"),
    ("fixed", dict(block=16), "[accumulator]",
     "the design has no C input (accumulator.kind = 'none': C is +0) but the vector set's C "
     "is not +0"),
])
def test_pack_refuses_a_set_that_does_not_fit(name, kwargs, needle, text):
    path = MAPS / f"{name}.toml"
    spec = replace(MXFP8_K32, block=16) if name == "fixed" else MXFP8_K32
    vs = vectors.generate("uniform", **{"m": 1, "n": 1, "k": 32, "scale_format": "e8m0",
                                        "block": 32, **kwargs})
    with pytest.raises(MapError) as info:
        load(path).pack(spec, vs)
    assert str(info.value).startswith(f"{path}:{_line(path, needle)}: {text}")


# -- decoding and comparing --------------------------------------------------------------


def _f32(x: float) -> int:
    return int(np.float32(x).view(np.uint32))


def _raw(fields: dict[str, list[int]]) -> dict[str, np.ndarray]:
    return {port: np.array(values, np.uint32).reshape(-1, 1) for port, values in fields.items()}


# fixed.toml's result: a 16-bit two's complement mantissa (whole port), an 8-bit exponent field
# with offset 141 (value = mant * 2**(field - 141)) and a NaN flag.
# (mantissa bits, exponent field, nan flag, the model's FP32 code, the mismatch or None)
FIXED_CASES = [
    (16384, 141, 0, _f32(16384.0), None),
    (0xC000, 127, 0, _f32(-1.0), None),                          # -16384 * 2**-14
    (24576, 127, 0, _f32(1.5), None),
    (0xFFFF, 138, 0, _f32(-0.125), None),                        # -1 * 2**-3
    (0, 0, 0, 0x80000000, None),                                 # +0 equals -0
    (0, 200, 1, 0x7FC00000, None),                               # NaN equals NaN
    (0, 200, 1, 0xFFC00001, None),                               # any NaN code
    (16385, 127, 0, _f32(1.0), ("16385·2^-14", "1·2^0",
                                "+1 ulps (ulp 2^-14 of the design's 15-bit mantissa); model "
                                "fp32 0x3f800000")),
    (0xBFFE, 127, 0, _f32(-1.0), ("-16386·2^-14", "-1·2^0",
                                  "-2 ulps (ulp 2^-14 of the design's 15-bit mantissa); model "
                                  "fp32 0xbf800000")),
    (3, 0, 0, 0, ("3·2^-141", "0·2^0", "+3 ulps (ulp 2^-141 of the design's 15-bit mantissa)")),
    (1, 0, 0, 0x200, ("1·2^-141", "1·2^-140",                    # 2**-140, an FP32 subnormal
                      "-1 ulps (ulp 2^-141 of the design's 15-bit mantissa)")),
    (0x7FFF, 127, 0, _f32(2.0), ("32767·2^-14", "1·2^1",     # just below 2.0's binade
                                 "-0.5 ulps (ulp 2^-13 of the design's 15-bit mantissa)")),
    (0x7FFF, 255, 0, 0x7F800000, ("32767·2^114", "+Inf",
                                  "the design's encoding has no Inf (model fp32 0x7f800000)")),
    (16384, 141, 1, _f32(16384.0), ("NaN", "1·2^14", "the design flags NaN (model fp32 "
                                                      "0x46800000)")),
    (16384, 141, 0, 0x7FC00000, ("16384·2^0", "NaN", "the model's result is NaN (model fp32 "
                                                     "0x7fc00000)")),
]


@pytest.fixture
def fixed_map(dut_ports):
    pm = load(MAPS / "fixed.toml")
    pm.check_ports(dut_ports)
    return pm


def test_fixed_results_compare_exactly_in_value(fixed_map):
    raw = _raw({"out_mant": [c[0] for c in FIXED_CASES], "out_exp": [c[1] for c in FIXED_CASES],
                "out_nan": [c[2] for c in FIXED_CASES]})
    results = fixed_map.decode(raw)
    assert (results.precision, results.e_min) == (15, -141)
    assert results.mant[:4].tolist() == [16384, -16384, 24576, -1]
    assert results.exp[:4].tolist() == [0, -14, -14, -3]
    want = np.array([c[3] for c in FIXED_CASES], np.uint32)
    got = fixed_map.compare(results, want)
    expect = [(i, c[4]) for i, c in enumerate(FIXED_CASES) if c[4] is not None]
    assert [m.dot for m in got] == [i for i, _ in expect]
    for m, (_, (rtl, model, note)) in zip(got, expect, strict=True):
        assert m.kind.value == "value" and (m.rtl, m.model) == (rtl, model)
        assert m.note.startswith(note), m.note


def test_fixed_fp32_codes(fixed_map):
    raw = _raw({"out_mant": [16384, 0xC000, 16385, 0, 0x7FFF, 5], "out_exp": [141, 127, 127, 9, 255,
                                                                          141],
                "out_nan": [0, 0, 0, 0, 0, 1]})
    codes = fixed_map.decode(raw).fp32_codes()
    assert codes.tolist() == [_f32(16384.0), _f32(-1.0), _f32(1 + 2 ** -14), 0, 0x7F800000,
                              0x7FC00000]


def test_sign_magnitude_and_signed_exponent(tmp_path):
    text = FIXED.replace('mantissa = { port = "out_mant", signed = true }',
                         'mantissa = { port = "out_mant", bits = [15, 0], sign_magnitude = true }')
    text = text.replace("bits = [7, 0], offset = 141", "bits = [7, 0], signed = true, offset = 3")
    shutil.copy(MAPS / "dut.sv", tmp_path / "dut.sv")
    pm = _map(tmp_path, text)
    results = pm.decode(_raw({"out_mant": [0x8005, 0x0005, 0x8000, 0x7FFF],
                              "out_exp": [0xFE, 0x7F, 0x80, 0x00], "out_nan": [0, 0, 0, 0]}))
    assert results.mant.tolist() == [-5, 5, 0, 32767]
    assert results.exp.tolist() == [-5, 124, -131, -3]
    assert (results.precision, results.e_min) == (15, -131)
    want = np.array([_f32(-5 * 2.0 ** -5), _f32(5 * 2.0 ** 124), 0x80000000,
                     _f32(32767 / 8)], np.uint32)
    assert pm.compare(results, want) == []


def test_whole_port_signed_mantissa_needs_the_designs_width():
    pm = load(MAPS / "fixed.toml")
    with pytest.raises(ValueError, match="call PortMap.check_ports first"):
        pm.decode(_raw({"out_mant": [1], "out_exp": [1], "out_nan": [0]}))


def test_fp_results_compare_bit_for_bit(dut_ports, tmp_path):
    pm = load(MAPS / "good.toml")
    pm.check_ports(dut_ports)
    results = pm.decode(_raw({"rd": [_f32(1.0), 0, 0x7FC00000, _f32(2.0)]}))
    assert results.fp32_codes().tolist() == [_f32(1.0), 0, 0x7FC00000, _f32(2.0)]
    got = pm.compare(results, np.array([_f32(1.0), 0x80000000, 0x7FC00000, _f32(2.0)],
                                       np.uint32))
    assert [(m.dot, m.rtl, m.model) for m in got] == [(1, "0x00000000", "0x80000000")]
    short = pm.compare(results, np.array([_f32(1.0)] * 6, np.uint32))
    assert short[0].note == "4 of 6 results were read" and short[0].dot is None
    assert [m.dot for m in short[1:]] == [1, 2, 3]

    shutil.copy(MAPS / "dut.sv", tmp_path / "dut.sv")
    half = _map(tmp_path, GOOD.replace('encoding = "fp32"', 'encoding = "fp16"').replace(
        'port = "rd"', 'port = "rd"\nbits = [15, 0]'))
    results = half.decode(_raw({"rd": [0xABCD3C00, 0x0001]}))
    assert results.codes.tolist() == [0x3C00, 0x0001]
    assert results.fp32_codes().tolist() == [_f32(1.0), _f32(2.0 ** -24)]
    got = half.compare(results, np.array([0x3C00, 0x8001], np.uint16), d_format="fp16")
    assert [(m.dot, m.rtl, m.model) for m in got] == [(1, "0x0001", "0x8001")]


def test_value_mismatches_are_listed_up_to_the_limit(fixed_map):
    n = 25
    results = fixed_map.decode(_raw({"out_mant": [16385] * n, "out_exp": [127] * n,
                                     "out_nan": [0] * n}))
    got = fixed_map.compare(results, np.full(n, _f32(1.0), np.uint32))
    assert [m.dot for m in got[:-1]] == list(range(20)) and got[-1].note == "... 25 in all"
