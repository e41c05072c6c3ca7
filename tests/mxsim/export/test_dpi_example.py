"""examples/dpi: the SV benches in Verilator with the exported DPI-C models, clean on the good
designs (the generated RTL; the same bench on examples/rtl/mxsim_unit; examples/rtl/block_dot)
and reporting the mismatch on the bug builds (a mutant of the generated RTL, the examples'
INJECT_BUG); examples/dpi/dot_from_c.c."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def bench(tmp_path, *args):
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "dpi" / "run.py"), "--json",
                           "--work", str(tmp_path), "--dots", "400", *args],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    text = proc.stdout
    return proc.returncode, json.loads(text[:text.rindex("]") + 1]), text, proc.stderr


def test_clean_on_the_good_designs(tmp_path):
    rc, rows, text, err = bench(tmp_path)
    assert rc == 0, err
    assert [r["bench"] for r in rows] == ["unit", "mxsim_unit", "block_dot"]
    assert [r["bench_file"] for r in rows] == ["tb_unit.sv", "tb_unit.sv", "tb_block_dot.sv"]
    for r in rows:
        assert r["passed"] and r["checked"] == 400 and r["mismatches"] == 0, r
    assert "unit: PASS, 400 results checked against the DPI-C model, 0 mismatches" in text


def test_the_bug_builds_report_the_mismatch(tmp_path):
    rc, rows, text, _ = bench(tmp_path, "--bug")
    assert rc == 1
    for r in rows:
        assert not r["passed"] and r["mismatches"] > 0 and r["first_mismatches"], r
        assert r["first_mismatches"][0].startswith("MISMATCH ")
    assert [r["fault"] for r in rows] == ["align-drops-lsb", "INJECT_BUG", "INJECT_BUG"]
    assert any("design D=00000000" in m or "design D=80000000" in m
               for m in rows[1]["first_mismatches"])          # a subnormal flushed to zero
    assert "model D=" in text and "design D=" in text


def test_a_bad_option_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "dpi" / "run.py"), "--dots",
                           "0", "--work", str(tmp_path)], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_the_c_example_runs_as_docs_dpi_says(tmp_path):
    """examples/dpi/dot_from_c.c against an export: D = 32.5 (0x42020000), K = 128 chained."""
    from mxsim import units
    from mxsim.export import export
    from mxsim.export.build import STRICT
    spec = units.get("blackwell-mxf8f6f4").spec_for_formats("e4m3", "e4m3")
    export(spec, tmp_path, "dut_model", source="test")
    exe = tmp_path / "dot_from_c"
    subprocess.run(["gcc", *STRICT, "-O2", "-I", str(tmp_path),
                    str(ROOT / "examples" / "dpi" / "dot_from_c.c"), str(tmp_path / "dut_model.c"),
                    str(tmp_path / "mxsim_dot.c"), "-o", str(exe)], check=True)
    proc = subprocess.run([str(exe)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == ["D = 0x42020000", "step 0: E = 0, LSB 2^-25, aligned sum "
                                        "1090519040", "K = 128: D = 0x43008000"]


def test_every_presets_sv_package_is_lint_clean_and_its_glue_matches_verilators_prototypes(
        tmp_path):
    """One spec of every preset (and the exact unit with block-wise FP32 scales): the package
    through `verilator --cc -Wall` without a warning, and the DPI glue compiled strictly
    against the prototypes Verilator writes for it (V..__Dpi.h)."""
    from hdl.toolchain import verilator_command, verilator_env, verilator_root
    from mxsim import presets, units
    from mxsim.export import export
    from mxsim.export.build import STRICT
    specs = [units.get(n).spec_for_formats(None, None) for n in presets.names()]
    specs.append(presets.get("exact").spec("e4m3", "e4m3", scale_format="fp32", block=128))
    for n, spec in enumerate(specs):
        folder = tmp_path / f"u{n}"
        export(spec, folder, f"u{n}", source="test")
        proc = subprocess.run([*verilator_command(), "--cc", "-Wall", f"u{n}_pkg.sv", "--Mdir",
                               "obj"], cwd=folder, env=verilator_env(), capture_output=True,
                              text=True, check=False)
        assert proc.returncode == 0 and "%Warning" not in proc.stderr, (spec.name, proc.stderr)
        glue = subprocess.run(["gcc", *STRICT, "-fsyntax-only", "-I", str(folder), "-I",
                               str(verilator_root() / "include" / "vltstd"), "-include",
                               str(folder / "obj" / f"Vu{n}_pkg__Dpi.h"),
                               str(folder / f"u{n}_dpi.c")], capture_output=True, text=True,
                              check=False)
        assert glue.returncode == 0 and not glue.stderr, (spec.name, glue.stderr)
