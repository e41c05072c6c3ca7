"""The command line: every verb, its JSON output, and its exit codes (0, 1, 2)."""

import json
import subprocess
import sys

import numpy as np
import pytest
from cli_helpers import one_line as _one_line_error
from cli_helpers import run as _run

from mxsim import formats, vectors


def test_cli_formats_lists_every_format(capsys):
    rc, out, _ = _run(capsys, "formats")
    assert rc == 0
    for name in formats.names():
        assert f"\n{name} " in out
    rc, out, _ = _run(capsys, "formats", "--json")
    rows = json.loads(out)
    assert [r["name"] for r in rows] == formats.names()
    assert {r["name"]: r["max"] for r in rows}["e4m3"] == 448.0


def test_cli_units_lists_presets_with_provenance(capsys):
    from mxsim import presets

    rc, out, _ = _run(capsys, "units", "--json")
    assert rc == 0
    rows = json.loads(out)
    assert [r["name"] for r in rows] == presets.names()
    for row in rows:
        assert row["provenance"] and row["verified"] and row["pairs"], row
    wgmma = {r["name"]: r for r in rows}["hopper-wgmma"]
    assert wgmma["pairs"] == ["e4m3xe4m3", "e4m3xe5m2", "e5m2xe4m3", "e5m2xe5m2"]
    assert wgmma["c_d_formats"] == ["fp32", "fp16"]
    rc, out, _ = _run(capsys, "units")
    assert "hopper-wgmma\n  Hopper FP8 wgmma" in out and "provenance: MMA-Sim" in out


def test_cli_units_brief_and_filtered_by_a_format(capsys):
    from mxsim import presets

    rc, out, _ = _run(capsys, "units", "--brief")
    assert rc == 0 and len(out.splitlines()) == len(presets.names())
    assert out.splitlines()[1].split()[0] == presets.names()[1]
    rc, out, _ = _run(capsys, "units", "--a-format", "fp4", "--json")
    names = [r["name"] for r in json.loads(out)]
    assert names == [n for n in presets.names()
                     if any(a == "e2m1" for a, _ in presets.get(n).pairs)]
    assert "blackwell-mxf4" in names and "hopper-wgmma" not in names


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "tf32"])
def test_cli_runs_16_bit_operands_through_exact_and_a_named_unit(fmt, capsys, tmp_path):
    from mxsim import presets
    from mxsim.engine import reference

    vin, vout = tmp_path / "in.npz", tmp_path / "out.npz"
    k = 8 if fmt == "tf32" else 16
    rc, _, _ = _run(capsys, "vectors", "gen", "--family", "normal,subnormal,specials",
                    "--a-format", fmt, "-k", str(k), "-m", "4", "-n", "4", "-o", str(vin))
    assert rc == 0
    rc, _, _ = _run(capsys, "run", str(vin), "-o", str(vout))      # the default unit: exact
    assert rc == 0
    vs = vectors.load(vout)
    assert vs.a.dtype == formats.get(fmt).code_dtype
    spec = presets.get("exact").spec_for(vs)
    assert np.array_equal(vs.d, reference.dot(spec, vectors.load(vin)))
    rc, _, _ = _run(capsys, "run", str(vin), "--unit", f"hopper-mma-{fmt.replace('fp', 'f')}",
                    "-o", str(vout))
    assert rc == 0
    rc, out, _ = _run(capsys, "compare", str(vout), "--unit", "exact")
    assert rc == 1 and "outputs   48" in out        # F=25 truncation is not exact


def test_cli_gen_run_compare_agree(capsys, tmp_path):
    vin, vout = tmp_path / "in.npz", tmp_path / "out.npz"
    rc, out, _ = _run(capsys, "vectors", "gen", "--family", "normal,specials", "--a-format",
                      "e5m2", "--b-format", "e4m3", "--scale-format", "e8m0", "-k", "64",
                      "--count", "2", "-o", vin, "--json")
    assert rc == 0 and json.loads(out)["dots"] == 2 * 2 * 16 * 8
    rc, out, _ = _run(capsys, "vectors", "info", vin, "--json")
    info = json.loads(out)
    assert rc == 0 and info["families"] == ["normal", "specials"] and info["k"] == 64
    rc, out, _ = _run(capsys, "run", vin, "--unit", "exact", "-o", vout)
    assert rc == 0 and "wrote" in out
    res = vectors.load(vout)
    assert res.producer == "mxsim unit exact" and res.extra["unit"] == "exact"
    rc, out, _ = _run(capsys, "compare", vout, "--unit", "exact")
    assert rc == 0 and "bit-equal 512 (100.0000%)" in out
    # The reference engine through the CLI gives the same file contents.
    vref = tmp_path / "ref.npz"
    assert _run(capsys, "run", vin, "--engine", "reference", "-o", vref)[0] == 0
    rc, out, _ = _run(capsys, "compare", vout, vref, "--json")
    assert rc == 0 and json.loads(out)["agree"] is True


def test_cli_compare_reports_mismatches(capsys, tmp_path):
    vin, vout, bad = tmp_path / "in.npz", tmp_path / "out.npz", tmp_path / "bad.npz"
    _run(capsys, "vectors", "gen", "--family", "normal", "-k", "32", "-o", vin)
    _run(capsys, "run", vin, "-o", vout)
    res = vectors.load(vout)
    d = res.d.copy()
    d[0, 1] ^= 1              # one ulp
    d[2, 3] ^= 0x80000000     # sign flip
    vectors.save(res.with_result(d, producer="tampered"), bad)
    rc, out, _ = _run(capsys, "compare", bad, "--unit", "exact", "--show", "1")
    assert rc == 1
    assert "bit-equal 126 (98.4375%)" in out and "differ    2" in out
    assert "d[0,1] = " in out and "1 ulp" in out and "a[0,:] (e4m3)" in out
    assert "d[2,3]" not in out                         # --show 1
    rc, out, _ = _run(capsys, "compare", bad, vout, "--json")
    report = json.loads(out)
    assert rc == 1 and report["equal"] == 126 and report["histogram"]["1"] == 1
    assert report["mismatches"][1]["index"] == [2, 3]


def test_cli_compare_rejects_different_inputs(capsys, tmp_path):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    _run(capsys, "vectors", "gen", "--family", "normal", "--seed", "1", "-o", a)
    _run(capsys, "vectors", "gen", "--family", "normal", "--seed", "2", "-o", b)
    _run(capsys, "run", a, "-o", a)
    _run(capsys, "run", b, "-o", b)
    rc, _, err = _run(capsys, "compare", a, b)
    assert rc == 2
    _one_line_error(err, "hold different inputs")
    rc, _, err = _run(capsys, "compare", a)
    assert rc == 2
    _one_line_error(err, "either OTHER.npz or --unit NAME")
    gen_only = tmp_path / "g.npz"
    _run(capsys, "vectors", "gen", "--family", "normal", "-o", gen_only)
    rc, _, err = _run(capsys, "compare", gen_only, "--unit", "exact")
    assert rc == 2
    _one_line_error(err, "has no result 'd'")


@pytest.mark.parametrize("argv,text", [
    (["run", "{tmp}/missing.npz", "-o", "{tmp}/o.npz"], "missing.npz: no such file"),
    (["run", "{tmp}/text.npz", "-o", "{tmp}/o.npz"], "not an .npz file"),
    (["run", "{tmp}/in.npz", "--unit", "nope", "-o", "{tmp}/o.npz"], "Unknown unit 'nope'"),
    (["run", "{tmp}/in.npz", "-o", "{tmp}/no/such/dir/o.npz"], "directory does not exist"),
    (["vectors", "gen", "--a-format", "e12m9", "-o", "{tmp}/o.npz"], "Unknown format 'e12m9'"),
    (["vectors", "gen", "--a-format", "fp32", "-o", "{tmp}/o.npz"], "a_format must be one of"),
    (["vectors", "gen", "--scale-format", "e8m0", "-k", "48", "-o", "{tmp}/o.npz"],
     "K (48) must be a multiple of the block (32)"),
    (["vectors", "gen", "--family", "nope", "-o", "{tmp}/o.npz"], "Family must be one of"),
    (["vectors", "gen", "--family", "nan-scale,uniform", "-o", "{tmp}/o.npz"],
     "Family 'nan-scale' needs block scales; pass a scale format"),
    (["vectors", "gen", "--tensor-scale", "0.5", "-o", "{tmp}/o.npz"],
     "tensor_scale is the NVFP4 per-tensor scale and needs scale_format ue4m3"),
])
def test_cli_bad_input_is_one_line_exit_2(capsys, tmp_path, argv, text):
    (tmp_path / "text.npz").write_text("hello")
    _run(capsys, "vectors", "gen", "--family", "normal", "-o", tmp_path / "in.npz")
    rc, out, err = _run(capsys, *[a.format(tmp=tmp_path) for a in argv])
    assert rc == 2
    _one_line_error(err, text)
    assert not (tmp_path / "o.npz").exists()


def test_cli_gen_nvfp4_tensor_scale(capsys, tmp_path):
    out = tmp_path / "nvfp4.npz"
    rc, _, _ = _run(capsys, "vectors", "gen", "--family", "normal", "--a-format", "e2m1",
                    "--scale-format", "ue4m3", "-k", "64", "--tensor-scale", "0.1", "-o", out)
    vs = vectors.load(out)
    assert rc == 0 and vs.block == 16 and vs.tensor_scale == np.float32(0.1)


def test_cli_demo_runs_and_checks(capsys, tmp_path):
    rc, out, _ = _run(capsys, "demo", "--out", tmp_path, "-k", "64")
    assert rc == 0
    assert "fast engine vs fraction reference" in out and "bit-equal" in out
    res = vectors.load(tmp_path / "demo_exact.npz")
    assert res.d is not None and res.scale_format == "e8m0"


def test_cli_python_dash_m_and_help():
    for argv in (["--help"], ["run", "--help"], ["compare", "--help"], ["vectors", "gen",
                                                                         "--help"]):
        p = subprocess.run([sys.executable, "-m", "mxsim", *argv], capture_output=True,
                           text=True, check=False)
        assert p.returncode == 0 and "usage: mxsim" in p.stdout


def test_import_mxsim_stays_light():
    code = ("import sys, mxsim; heavy = [m for m in ('torch', 'amaranth', 'cocotb', 'numba') "
            "if m in sys.modules]; print(heavy)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert p.stdout.strip() == "[]"


def test_api_matmul_matches_unit():
    vs = vectors.generate("normal", a_format="e4m3", b_format="e5m2", m=4, n=3, k=64,
                          scale_format="e8m0", seed=3)
    import mxsim
    d = mxsim.matmul(vs.a, vs.b, vs.c, a_format="e4m3", b_format="e5m2", a_scale=vs.a_scale,
                     b_scale=vs.b_scale)
    from mxsim.engine import fast
    np.testing.assert_array_equal(d, fast.matmul_exact(vs))
    # float32 C values are taken bit for bit; block is inferred from the scale shape.
    d2 = mxsim.matmul(vs.a, vs.b, vs.c.view(np.float32), a_format="e4m3", b_format="e5m2",
                      a_scale=vs.a_scale, b_scale=vs.b_scale)
    np.testing.assert_array_equal(d2, d)
    with pytest.raises(mxsim.VectorFileError, match=r"^Pass both a_scale and b_scale, or "
                                                    r"neither$"):
        mxsim.matmul(vs.a, vs.b, a_scale=vs.a_scale)


def test_cli_run_presets_and_spec_files(capsys, tmp_path):
    from mxsim import presets

    vin = tmp_path / "in.npz"
    _run(capsys, "vectors", "gen", "--family", "normal,specials", "--a-format", "e4m3",
         "--b-format", "e5m2", "-k", "64", "-o", vin)
    out = tmp_path / "wgmma.npz"
    rc, text, _ = _run(capsys, "run", vin, "--unit", "hopper-wgmma", "-o", out)
    assert rc == 0
    res = vectors.load(out)
    assert res.extra["unit"] == "hopper-wgmma" and res.extra["instruction"].startswith("wgmma")
    assert _run(capsys, "compare", out, "--unit", "hopper-wgmma", "--engine", "reference")[0] == 0
    # The same spec, written to a TOML file, is a unit too.
    spec_file = tmp_path / "mine.toml"
    spec_file.write_text(presets.get("hopper-wgmma").spec("e4m3", "e5m2").dumps())
    rc, text, _ = _run(capsys, "compare", out, "--unit", spec_file)
    assert rc == 0 and "bit-equal 256 (100.0000%)" in text
    # hopper-wgmma and exact differ on these vectors: exit 1, with the histogram.
    rc, text, _ = _run(capsys, "compare", out, "--unit", "exact")
    assert rc == 1 and "ulp distance of differing outputs" in text
    rc, _, err = _run(capsys, "run", vin, "--unit", "blackwell-mxf4", "-o", tmp_path / "x.npz")
    assert rc == 2
    _one_line_error(err, "Unit blackwell-mxf4 does not take e4m3 x e5m2; it takes e2m1xe2m1")
    bad_spec = tmp_path / "bad.toml"
    bad_spec.write_text("frac_bits = 99\n")
    rc, _, err = _run(capsys, "run", vin, "--unit", bad_spec, "-o", tmp_path / "x.npz")
    assert rc == 2
    _one_line_error(err, "frac_bits must be between 0 and 40 (or null for exact), not 99")


def test_cli_fp16_accumulate_unit(capsys, tmp_path):
    """C in FP16 selects the FP16-output variant of hopper-wgmma; D comes back as FP16."""
    vin, out = tmp_path / "in.npz", tmp_path / "out.npz"
    rc, _, _ = _run(capsys, "vectors", "gen", "--family", "normal", "--c-format", "fp16",
                    "-k", "64", "-o", vin)
    assert rc == 0 and vectors.load(vin).c.dtype == np.uint16
    rc, _, _ = _run(capsys, "run", vin, "--unit", "hopper-wgmma", "-o", out)
    res = vectors.load(out)
    assert rc == 0 and res.d_format == "fp16" and res.d.dtype == np.uint16
    assert _run(capsys, "compare", out, "--unit", "hopper-wgmma", "--engine", "reference")[0] \
        == 0
    rc, _, err = _run(capsys, "run", vin, "--unit", "blackwell-mxf8f6f4", "-o", out)
    assert rc == 2
    _one_line_error(err, "Unit blackwell-mxf8f6f4 takes e8m0 scales in blocks of 32")


def test_cli_compare_shows_fp32_scales_of_every_granularity(capsys, tmp_path):
    from mxsim.engine import fast

    for gran, n in (("tensor", 8), ("row", 8), ("block", 128)):
        vs = vectors.generate("normal", m=4, n=n, k=128, scale_format="fp32",
                              scale_granularity=gran, with_c=False, seed=1)
        d = fast.matmul_exact(vs)
        d[0, 0] ^= 1
        path = tmp_path / f"{gran}.npz"
        vectors.save(vs.with_result(d, producer="tampered"), path)
        rc, out, _ = _run(capsys, "compare", path, "--unit", "exact", "--show", "1")
        assert rc == 1 and "a_scale (fp32) = [" in out and "b_scale (fp32) = [" in out


def test_cli_compare_plot_writes_a_png(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    vin, out, png = tmp_path / "in.npz", tmp_path / "out.npz", tmp_path / "err.png"
    _run(capsys, "vectors", "gen", "--family", "normal", "-k", "64", "-o", vin)
    _run(capsys, "run", vin, "--unit", "hopper-wgmma", "-o", out)
    rc, text, _ = _run(capsys, "compare", out, "--unit", "hopper-wgmma", "--plot", png)
    assert rc == 0 and f"plot       {png}" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10000
    from mxsim.plot import error_distribution
    curves = error_distribution(vectors.load(out), tmp_path / "again.png")
    assert set(curves) == {"mxsim unit hopper-wgmma", "preset hopper-wgmma",
                           "preset hopper-cublas-fast", "preset hopper-cublas",
                           "preset hopper-mma-sync", "preset blackwell-f8f6f4",
                           "preset blackwell-mma-sync-f8-legacy", "preset ada-mma-f8",
                           "preset rtx-blackwell-mma-sync-f8",
                           "preset rtx-blackwell-mma-sync-f8-k16"}
