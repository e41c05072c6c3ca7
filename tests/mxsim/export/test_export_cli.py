"""``mxsim export-c`` from the command line: the files, ``--check`` (compiled with -Werror and
held equal to the fast engine), and bad input in one line with nothing written."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cli_helpers import one_line, run  # noqa: E402


def test_a_preset_is_exported_and_checked(tmp_path, capsys):
    out = tmp_path / "nvfp4"
    rc, text, err = run(capsys, "export-c", "--unit", "blackwell-mxf4nvf4", "--scale",
                        "ue4m3/16", "-o", out, "--check", 600, "--json")
    assert rc == 0, err
    rep = json.loads(text)
    assert rep["prefix"] == "blackwell_mxf4nvf4_e2m1_e2m1_ue4m3_16"
    assert len(rep["files"]) == 6 and all(Path(f).is_file() for f in rep["files"])
    assert rep["checks"][0]["compiler"] == "gcc"
    assert rep["checks"][0]["mismatches"] == 0 and rep["checks"][0]["dots"] >= 600
    assert "#define BLACKWELL_MXF4NVF4_E2M1_E2M1_UE4M3_16_SCALES 4" in (
        out / "blackwell_mxf4nvf4_e2m1_e2m1_ue4m3_16.h").read_text()


def test_a_spec_file_and_the_text_report(tmp_path, capsys):
    spec = Path(__file__).resolve().parents[3] / "examples" / "my_unit.toml"
    rc, text, _ = run(capsys, "export-c", "--unit", spec, "-o", tmp_path, "--prefix", "mine",
                      "--check", 200)
    assert rc == 0
    assert "as mine: 6 files" in text and "0 mismatches with the fast engine" in text
    assert "From spec file" in (tmp_path / "mine.h").read_text()


@pytest.mark.parametrize("args, message", [
    (("--unit", "nope"), "Unknown unit 'nope'"),
    (("--unit", "hopper-wgmma", "--prefix", "9x"), "is not a C identifier"),
    (("--unit", "hopper-wgmma", "--a-format", "e2m1"), "does not take e2m1 x e2m1"),
    (("--unit", "blackwell-mxf4nvf4", "--scale", "ue4m3"), "--scale must be FMT/BLOCK"),
    (("--unit", "blackwell-mxf4nvf4", "--scale", "e8m0/64"), "not e8m0 scales in blocks of 64"),
    (("--unit", "hopper-wgmma", "--c-format", "bf16"), "not bf16"),
    (("--unit", "exact", "--scale", "e8m0/32", "--k", 48), "multiple of its block (32)"),
    (("--unit", "examples/my_unit.toml", "--c-format", "fp16"), "takes C as fp32, not fp16"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, args, message):
    out = tmp_path / "out"
    rc, _, err = run(capsys, "export-c", *args, "-o", out)
    assert rc == 2
    one_line(err, message)
    assert not out.exists() or not any(out.iterdir())


def test_an_output_that_is_a_file_is_refused(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    rc, _, err = run(capsys, "export-c", "--unit", "hopper-wgmma", "-o", f / "sub")
    assert rc == 2
    one_line(err, "cannot write the export")
