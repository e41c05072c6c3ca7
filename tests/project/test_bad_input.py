"""Bad input (issue 14, findings 9, 10 and 11): each case the new-user review reported, one
test each. Every verb exits 2 with one line for bad input; anything unexpected exits 3
("internal error"), never 1; small inputs cannot ask for unbounded memory or time; nonsense is
refused rather than silently accepted."""

import io
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import one_line as _one_line
from cli_helpers import run as _run

import mxsim
from mxsim import cli, compare, explore, probe, vectors
from mxsim.cli import main
from mxsim.errors import MxsimError, UnitError, VectorFileError
from mxsim.probe import fit
from mxsim.quantize import QuantizeError, to_mx

ROOT = Path(__file__).resolve().parents[2]


def _tmp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith(".tmp"))


@pytest.fixture
def d(tmp_path, capsys):
    """A folder with an input set, its result, a probe suite and its result, and a float
    array."""
    assert main(["vectors", "gen", "--family", "normal", "-o", str(tmp_path / "in.npz")]) == 0
    assert main(["probe", "-o", str(tmp_path / "probe.npz")]) == 0
    assert main(["run", str(tmp_path / "probe.npz"), "--unit", "hopper-wgmma", "-o",
                 str(tmp_path / "obs.npz")]) == 0
    np.save(tmp_path / "x.npy", np.linspace(-3, 3, 128, dtype=np.float32).reshape(2, 64))
    capsys.readouterr()
    return tmp_path


def _npz(path: Path, **arrays) -> Path:
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)
    return path


def _members(path: Path) -> dict:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


# -- finding 9: one line and exit 2 for every reported case -----------------------------------

SPEC = 'name = "mine"\na_format = "e4m3"\nb_format = "e4m3"\nk = 32\nfrac_bits = 25\n'


@pytest.mark.parametrize("content", [b"\xff\xfe\x00\x01binary",
                                     SPEC.replace("mine", "caf\xe9").encode("latin-1")],
                         ids=["binary", "latin-1"])
def test_bad_input_spec_file_not_utf8(d, capsys, content):
    (d / "u.toml").write_bytes(content)
    rc, _, err = _run(capsys, "run", d / "in.npz", "--unit", d / "u.toml", "-o", d / "o.npz")
    assert rc == 2
    _one_line(err, f"{d / 'u.toml'}: ")
    assert "UTF-8" in err                    # units.get's words, or spec.load's where it checks
    assert not (d / "o.npz").exists()


@pytest.mark.parametrize("content, text", [
    (b"\x00\x01\x02\xff", "not UTF-8 text (byte 0xff at offset 3)"),
    ('[sweep]\nname = "caf\xe9"\n'.encode("latin-1"), "not UTF-8 text (byte 0xe9 at offset 19)"),
], ids=["binary", "latin-1"])
def test_bad_input_sweep_file_not_utf8(tmp_path, capsys, content, text):
    (tmp_path / "s.toml").write_bytes(content)
    for extra in (["--check"], ["-o", str(tmp_path / "out")]):
        rc, _, err = _run(capsys, "explore", tmp_path / "s.toml", *extra)
        assert rc == 2
        _one_line(err, f"s.toml: {text}; a sweep file is TOML in UTF-8")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("meta", ["[" * 100_000 + "]" * 100_000,
                                  '{"a":' * 100_000 + "1" + "}" * 100_000,
                                  '{"x": ' + "[" * 40 + "]" * 40 + "}"],
                         ids=["array", "object", "just-too-deep"])
def test_bad_input_deeply_nested_meta(d, capsys, meta):
    arrays = _members(d / "in.npz")
    arrays["meta"] = np.array(meta)
    _npz(d / "deep.npz", **arrays)
    for argv in (["vectors", "info", d / "deep.npz"],
                 ["run", d / "deep.npz", "-o", d / "o.npz"]):
        rc, _, err = _run(capsys, *argv)
        assert rc == 2
        _one_line(err, "deep.npz: meta must be nested at most 32 levels deep")
    assert not (d / "o.npz").exists()


def test_bad_input_meta_nested_within_the_limit_loads(d):
    import json
    arrays = _members(d / "in.npz")
    meta = json.loads(str(arrays["meta"]))
    meta["note"] = json.loads('{"x": ' + "[" * 30 + "]" * 30 + "}")
    arrays["meta"] = np.array(json.dumps(meta))
    vs = vectors.load(_npz(d / "ok.npz", **arrays))
    assert vs.extra["note"] == meta["note"]


@pytest.mark.parametrize("name, text", [
    ("deep.json", "[" * 100_000 + "]" * 100_000),
    ("deep.toml", "k = " + "[" * 100_000 + "]" * 100_000 + "\n"),
])
def test_bad_input_deeply_nested_spec(d, capsys, name, text):
    (d / name).write_text(text)
    rc, _, err = _run(capsys, "run", d / "in.npz", "--unit", d / name, "-o", d / "o.npz")
    assert rc == 2
    _one_line(err, f"{name}: ")
    assert not (d / "o.npz").exists()


@pytest.mark.parametrize("verb", ["rtl", "fit"])
def test_bad_input_output_is_a_directory(d, capsys, verb):
    (d / "outdir").mkdir()
    argv = (["rtl", "-o", d / "outdir"] if verb == "rtl" else
            ["fit", d / "probe.npz", d / "obs.npz", "-o", d / "outdir"])
    rc, _, err = _run(capsys, *argv)
    assert rc == 2
    _one_line(err, "outdir: cannot write (Is a directory)")
    assert not (d / "outdir.tmp").exists() and _tmp_files(d) == []


@pytest.mark.parametrize("argv, text", [
    (["vectors", "gen", "--count", "-1"], "argument --count: must be at least 1, not -1"),
    (["vectors", "gen", "--count", "0"], "argument --count: must be at least 1, not 0"),
    (["vectors", "gen", "-m", "0"], "argument -m: must be at least 1, not 0"),
    (["vectors", "gen", "-k", "x"], "argument -k: must be an integer, not 'x'"),
    (["fit", "{d}/probe.npz", "{d}/obs.npz", "-k", "0"], "argument -k: must be at least 1, "
                                                          "not 0"),
    (["probe", "--seed", "-1"], "argument --seed: must be at least 0, not -1"),
    (["quantize", "{d}/x.npy", "--seed", "-1", "--rounding", "stochastic"],
     "argument --seed: must be at least 0, not -1"),
    (["verify", "--chunk", "0"], "argument --chunk: must be from 1 to 1000000, not 0"),
    (["verify", "--seed", "-3"], "argument --seed: must be at least 0, not -3"),
    (["compare", "{d}/in.npz", "--unit", "exact", "--show", "-1"],
     "argument --show: must be at least 0, not -1"),
    (["explore", "s.toml", "-j", "0"], "argument -j/--jobs: must be at least 1, not 0"),
    (["demo", "-k", "0"], "argument -k: must be from 32 to 8192, not 0"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_input_option_out_of_range(d, capsys, argv, text):
    argv = [a.format(d=d) for a in argv]
    rc, _, err = _run(capsys, *argv, *(["-o", str(d / "o.npz")]
                                       if argv[0] in ("vectors", "fit", "probe", "quantize")
                                       else []))
    assert rc == 2
    verb = " ".join(argv[:2] if argv[0] == "vectors" else argv[:1])
    _one_line(err, text, prefix=f"mxsim {verb}: error: ")
    assert err.endswith(f"(see `mxsim {verb} --help`)\n")
    assert not (d / "o.npz").exists()


def test_bad_input_fit_k_above_the_sets_k(d, capsys):
    rc, _, err = _run(capsys, "fit", d / "probe.npz", d / "obs.npz", "-k", "64", "-o",
                      d / "f.toml")
    assert rc == 2
    _one_line(err, "The instruction k must be an integer from 1 to the set's K (32), not 64")
    with pytest.raises(UnitError, match=r"from 1 to the set's K \(32\), not 0$"):
        fit.fit(vectors.load(d / "obs.npz"), k=0)


def test_bad_input_seeds_in_the_library():
    with pytest.raises(VectorFileError, match=r"^Seed must be a non-negative integer, not -1$"):
        probe.probe_suite(seed=-1)
    x = np.ones((2, 32), np.float32)
    with pytest.raises(QuantizeError, match=r"^Seed must be a non-negative integer or None, "
                                            r"not -1$"):
        to_mx(x, "e4m3", 32, rounding="stochastic", seed=-1)


def test_bad_input_usage_errors_are_one_line(capsys):
    rc, _, err = _run(capsys, "run")
    assert rc == 2
    assert err == ("mxsim run: error: the following arguments are required: IN.npz, "
                   "-o/--output (see `mxsim run --help`)\n")
    rc, _, err = _run(capsys, "frobnicate")
    assert rc == 2 and err.count("\n") == 1 and err.startswith("mxsim: error: argument ")


# -- the last-resort handler: exit 3, never 1 ------------------------------------------------

def _crash(args):
    raise RuntimeError("an unexpected failure\nsecond line")


def test_bad_input_internal_error_exits_3_with_one_line(monkeypatch, capsys):
    monkeypatch.setattr(cli.listing, "cmd_formats", _crash)
    rc, out, err = _run(capsys, "formats")
    assert rc == 3 and out == ""
    assert err == ("mxsim: internal error: RuntimeError: an unexpected failure (please report "
                   "it; rerun with --debug for the traceback)\n")


@pytest.mark.parametrize("where", ["before", "after"])
def test_bad_input_internal_error_traceback_under_debug(monkeypatch, capsys, where):
    monkeypatch.setattr(cli.listing, "cmd_formats", _crash)
    argv = ["--debug", "formats"] if where == "before" else ["formats", "--debug"]
    rc, _, err = _run(capsys, *argv)
    assert rc == 3
    assert err.startswith("Traceback (most recent call last):")
    assert "RuntimeError: an unexpected failure" in err
    assert err.splitlines()[-1].startswith("mxsim: internal error: RuntimeError: ")


@pytest.mark.parametrize("exc", [RecursionError("deep"), TypeError("bad"), KeyError("k"),
                                 ZeroDivisionError("x")], ids=lambda e: type(e).__name__)
def test_bad_input_any_exception_is_3_not_1(monkeypatch, capsys, exc):
    def boom(args):
        raise exc
    monkeypatch.setattr(cli.listing, "cmd_units", boom)
    rc, _, err = _run(capsys, "units")
    assert rc == 3 and err.startswith(f"mxsim: internal error: {type(exc).__name__}")
    assert "Traceback" not in err


def test_bad_input_memory_error_is_one_line(monkeypatch, capsys):
    def oom(args):
        raise MemoryError
    monkeypatch.setattr(cli.listing, "cmd_units", oom)
    rc, _, err = _run(capsys, "units")
    assert rc == 2
    _one_line(err, "out of memory")


def test_bad_input_internal_error_from_the_shell():
    code = ("import sys; from mxsim import cli\n"
            "def crash(args): raise ValueError('oops')\n"
            "cli.listing.cmd_formats = crash\n"
            "sys.exit(cli.main(sys.argv[1:]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", code, "formats"], capture_output=True, text=True,
                       check=False, env=env)
    assert p.returncode == 3
    assert p.stderr == ("mxsim: internal error: ValueError: oops (please report it; rerun "
                        "with --debug for the traceback)\n")


# -- finding 10: sizes from the headers, and documented limits --------------------------------

def _huge_npz(path: Path, shape=(50_000, 65_536), name: str = "a.npy") -> Path:
    """A small .npz whose member declares a ~3 GB uint8 array (and holds a few bytes)."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "|u1", "fortran_order": False,
                                                  "shape": shape})
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(name, header.getvalue() + b"\0" * 4096)
        z.writestr("meta.npy", _npy(np.array('{"schema": "mxsim.vectors/1"}')))
    return path


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def test_bad_input_huge_declared_array_is_refused_from_its_header(tmp_path, capsys):
    path = _huge_npz(tmp_path / "huge.npz")
    assert path.stat().st_size < 10_000
    rc, _, err = _run(capsys, "vectors", "info", path)
    assert rc == 2
    nbytes = 50_000 * 65_536 + 4 * len('{"schema": "mxsim.vectors/1"}')      # a and meta
    _one_line(err, f"huge.npz: the set holds {nbytes:,} bytes of arrays, above the limit of "
                   f"268,435,456 (see 'Size limits' in docs/vectors.md); pass --allow-large")


def _limited(argv: list[str], limit: int = 1 << 30) -> subprocess.CompletedProcess:
    """``mxsim argv`` under ``ulimit -v`` (address space)."""
    shell = ["bash", "-c", f'ulimit -v {limit >> 10} && exec "$@"', "ulimit"]
    return subprocess.run([*shell, sys.executable, "-m", "mxsim", *argv], capture_output=True,
                          text=True, check=False, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_bad_input_huge_declared_array_allocates_nothing(tmp_path):
    """Under a 1 GiB address-space limit: before, the 3 GB array was allocated (MemoryError,
    a traceback, exit 1); now the header is read and the set refused."""
    path = _huge_npz(tmp_path / "huge.npz")
    for verb in (["vectors", "info"], ["run"]):
        p = _limited([*verb, str(path), *(["-o", str(tmp_path / "o.npz")]
                                          if verb == ["run"] else [])])
        assert p.returncode == 2, p.stderr
        assert "above the limit of 268,435,456" in p.stderr and "Traceback" not in p.stderr
    # --allow-large lifts the limit: the file is then read, and its missing bytes reported.
    p = _limited(["vectors", "info", str(path), "--allow-large"], limit=8 << 30)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "above the limit" not in p.stderr


def test_bad_input_size_limits_apply_to_load_and_are_lifted_by_allow_large(d, capsys,
                                                                             monkeypatch):
    vs = vectors.load(d / "in.npz")
    nbytes = sum(np.asarray(a).nbytes for a in vectors.to_arrays(vs).values())
    default = vectors.LARGE_BYTES
    # The limits live in mxsim.vectors.schema (re-exported by mxsim.vectors).
    monkeypatch.setattr(vectors.schema, "LARGE_BYTES", nbytes - 1)
    rc, _, err = _run(capsys, "vectors", "info", d / "in.npz")
    assert rc == 2
    _one_line(err, f"in.npz: the set holds {nbytes:,} bytes of arrays, above the limit of "
                   f"{nbytes - 1:,}")
    rc, _, _ = _run(capsys, "vectors", "info", d / "in.npz", "--allow-large")
    assert rc == 0
    monkeypatch.setattr(vectors.schema, "LARGE_BYTES", default)
    products = vs.num_dots * vs.k
    monkeypatch.setattr(vectors.schema, "LARGE_PRODUCTS", products - 1)
    rc, _, err = _run(capsys, "run", d / "in.npz", "-o", d / "o.npz")
    assert rc == 2
    _one_line(err, f"the set holds {products:,} products (dots x K), above the limit of "
                   f"{products - 1:,}")
    assert not (d / "o.npz").exists()
    rc, _, _ = _run(capsys, "run", d / "in.npz", "-o", d / "o.npz", "--allow-large")
    assert rc == 0 and (d / "o.npz").exists()


def test_bad_input_gen_cannot_ask_for_unbounded_memory(tmp_path, capsys):
    rc, _, err = _run(capsys, "vectors", "gen", "-m", "100000", "-n", "100000", "-o",
                      tmp_path / "o.npz")
    assert rc == 2
    _one_line(err, "The set would hold 480,076,800,000 bytes of arrays, above the limit of "
                   "268,435,456")
    rc, _, err = _run(capsys, "vectors", "gen", "--family", "all", "--count", "100000", "-m",
                      "64", "-n", "64", "-o", tmp_path / "o.npz")
    assert rc == 2
    _one_line(err, "The set would hold")
    rc, _, err = _run(capsys, "vectors", "gen", "--family", "normal", "-m", "4096", "-n",
                      "4096", "-k", "2048", "-o", tmp_path / "o.npz")
    assert rc == 2
    _one_line(err, "The set would hold 34,359,738,368 products (dots x K), above the limit of "
                   "17,179,869,184")
    assert list(tmp_path.iterdir()) == []


def test_bad_input_gen_memory_under_ulimit(tmp_path):
    p = _limited(["vectors", "gen", "-m", "100000", "-n", "100000", "-o",
                  str(tmp_path / "o.npz")])
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert list(tmp_path.iterdir()) == []


def test_bad_input_quantize_input_header_is_read_first(tmp_path, capsys):
    path = tmp_path / "big.npy"
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "<f4", "fortran_order": False,
                                                  "shape": (1 << 20, 1 << 10)})
        fh.write(b"\0" * 64)
    rc, _, err = _run(capsys, "quantize", path, "-o", tmp_path / "o.npz")
    assert rc == 2
    _one_line(err, "big.npy: the array holds 4,294,967,296 bytes, above the limit of "
                   "268,435,456")
    assert not (tmp_path / "o.npz").exists()


def test_bad_input_quantize_identity_operand_is_bounded(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.ones((64, 1, 8192), np.float32))
    rc, _, err = _run(capsys, "quantize", tmp_path / "x.npy", "-o", tmp_path / "o.npz")
    assert rc == 2
    _one_line(err, "bytes of arrays, above the limit of 268,435,456")
    assert not (tmp_path / "o.npz").exists()


def test_bad_input_probe_k_is_bounded(tmp_path, capsys):
    rc, _, err = _run(capsys, "probe", "-k", str(10**9), "-o", tmp_path / "o.npz")
    assert rc == 2
    _one_line(err, f"K must be a multiple of 4 from 4 to {probe.MAX_K}, not 1000000000")
    assert not (tmp_path / "o.npz").exists()


def test_bad_input_size_limits_are_documented():
    doc = (ROOT / "docs" / "vectors.md").read_text()
    section = doc[doc.index("### Size limits"):]
    assert f"{vectors.LARGE_BYTES:,} bytes" in section
    assert f"{vectors.LARGE_PRODUCTS:,} products" in section
    assert "--allow-large" in section


# -- finding 11: nonsense refused ------------------------------------------------------------

def test_bad_input_matmul_refuses_float_codes():
    a = np.full((2, 32), 1.5)
    b = np.zeros((32, 2), np.uint8)
    with pytest.raises(VectorFileError, match=r"^a must be an integer array of element codes, "
                                              r"not float64; pass float values to mxsim.gemm$"):
        mxsim.matmul(a, b)


@pytest.mark.parametrize("bad, text", [(-1, "-1"), (300, "300")])
def test_bad_input_matmul_refuses_codes_out_of_range(bad, text):
    a = np.zeros((2, 32), np.int64)
    a[1, 3] = bad
    b = np.zeros((32, 2), np.uint8)
    with pytest.raises(VectorFileError, match=rf"^a must hold element codes from 0 to 255, "
                                              rf"not {text}$"):
        mxsim.matmul(a, b)
    with pytest.raises(VectorFileError, match=rf"^b must hold element codes from 0 to 15, "
                                              rf"not {text}$"):
        mxsim.matmul(b.T, a.T, a_format="e2m1")
    scales = np.full((2, 1), 127)
    bad_scales = scales.copy()
    bad_scales[0, 0] = bad
    with pytest.raises(VectorFileError, match=rf"^a_scale must hold e8m0 scale codes from 0 to "
                                              rf"255, not {text}$"):
        mxsim.matmul(np.zeros((2, 32), np.uint8), b, a_scale=bad_scales, b_scale=scales.T)


def test_bad_input_matmul_still_takes_integer_lists():
    d = mxsim.matmul([[0x38] * 32], [[0x38]] * 32)           # 1.0 x 1.0, 32 times
    assert d.view(np.float32).tolist() == [[32.0]]


@pytest.mark.parametrize("extra, text", [
    (["--block", "0"], "argument --block: must be at least 1, not 0"),
    (["--block", "0", "--compare"], "argument --block: must be at least 1, not 0"),
], ids=["write", "compare"])
def test_bad_input_quantize_block_zero(d, capsys, extra, text):
    out = [] if "--compare" in extra else ["-o", d / "q.npz"]
    rc, _, err = _run(capsys, "quantize", d / "x.npy", *extra, *out)
    assert rc == 2
    _one_line(err, text, prefix="mxsim quantize: error: ")
    assert not (d / "q.npz").exists()


@pytest.mark.parametrize("extra", [[], ["--compare"]], ids=["write", "compare"])
def test_bad_input_quantize_empty_elem(d, capsys, extra):
    out = [] if extra else ["-o", d / "q.npz"]
    rc, _, err = _run(capsys, "quantize", d / "x.npy", "--elem", "", *extra, *out)
    assert rc == 2
    _one_line(err, "Unknown format ''")
    assert not (d / "q.npz").exists()


def test_bad_input_verify_chunk_zero_before_any_build(tmp_path, capsys):
    rc, _, err = _run(capsys, "verify", "--chunk", "0", "--out", tmp_path / "v")
    assert rc == 2
    _one_line(err, "argument --chunk: must be from 1 to 1000000, not 0",
              prefix="mxsim verify: error: ")
    assert not (tmp_path / "v").exists()


def test_bad_input_zero_dot_sets_are_refused(d, capsys):
    arrays = _members(d / "in.npz")
    for name in ("a", "b", "c"):
        arrays[name] = arrays[name][None][:0]                # batch shape (0,)
    _npz(d / "empty.npz", **arrays)
    for argv in (["vectors", "info", d / "empty.npz"],
                 ["run", d / "empty.npz", "-o", d / "o.npz"],
                 ["compare", d / "empty.npz", "--unit", "exact"]):
        rc, out, err = _run(capsys, *argv)
        assert rc == 2 and "100" not in out
        _one_line(err, "empty.npz: batch dimensions must be at least 1, not (0,): the set holds "
                       "no dot product")
    assert not (d / "o.npz").exists()
    with pytest.raises(VectorFileError, match=r"^Batch dimensions must be at least 1, not "
                                              r"\(0,\)$"):
        vectors.generate("normal", batch=(0,))
    with pytest.raises(VectorFileError, match=r"^Count must be a positive integer, not 0$"):
        vectors.generate_suite(["normal"], count=0)


def test_bad_input_zero_dot_report_never_says_all_equal():
    rep = compare.Report(actual="x", expected="y", total=0, equal=0, histogram={},
                         nan_mismatches=0, mismatches=[])
    assert "bit-equal 0 (0 dots compared)" in rep.format()
    assert "100" not in rep.format()


@pytest.mark.parametrize("name", ["../../x", "/tmp/abs", "..", "a/b", "a\\\\b", " x"])
def test_bad_input_sweep_name_stays_inside_results(tmp_path, capsys, monkeypatch, name):
    from test_explore import TINY
    text = TINY.replace('name = "tiny"', f'name = "{name}"', 1)
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(explore.SweepError, match=re.escape(f"{path}:2: sweep.name must be a "
                                                           f"plain folder name")):
        explore.load(path)
    monkeypatch.chdir(tmp_path)
    rc, _, err = _run(capsys, "explore", path)
    assert rc == 2
    _one_line(err, "sweep.name must be a plain folder name (no '/', '\\', '..' or surrounding "
                   "spaces)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]


@pytest.mark.parametrize("old, new", [
    ("shape = [512, 512, 128]\nsample = [6, 5]",
     "shape = [1000000, 1000000, 128]\nsample = [1000000, 1000000]"),
    ("shape = [512, 512, 128]", f"shape = [512, 512, {2 ** 40}]"),
], ids=["sample", "k"])
def test_bad_input_sweep_workload_sample_is_bounded(tmp_path, old, new):
    """A workload's sample is drawn as float64 operands: a few numbers must not ask for
    terabytes (before, `explore` would try when it ran)."""
    from test_explore import TINY
    path = tmp_path / "s.toml"
    path.write_text(TINY.replace(old, new, 1))
    with pytest.raises(explore.SweepError, match=re.escape(f"{path}:27: workload.sample: the "
                                                           f"sample's operands (m x K + K x n = ")
                       + r"[0-9,]+ values\) must be at most 16,777,216; sample fewer outputs$"):
        explore.load(path)


@pytest.mark.parametrize("key, value", [("distribution", "[]"), ("distribution", "{ a = 1 }"),
                                        ("recipe", "[1]"), ("scale_rule", "{}"),
                                        ("layer", "[]")])
def test_bad_input_sweep_choice_given_a_list_or_table(tmp_path, capsys, key, value):
    from test_explore import TINY
    text = TINY.replace("seed = 1\n", f"seed = 1\n{key} = {value}\n", 1)
    path = tmp_path / "s.toml"
    path.write_text(text)
    rc, _, err = _run(capsys, "explore", path, "--check")
    assert rc == 2
    _one_line(err, f"workload.{key}: ")


def test_bad_input_errors_are_mxsim_errors():
    """The classes the CLI turns into exit 2."""
    from mxsim.output import OutputError
    for cls in (OutputError, VectorFileError, UnitError, QuantizeError, explore.SweepError):
        assert issubclass(cls, MxsimError)
