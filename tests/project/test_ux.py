"""What a user sees: progress on stderr (and only there, only when wanted), which engine path
ran, `mxsim units --spec`, lazy start-up and the numba cache."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mxsim import cli, presets, progress, units, vectors
from mxsim.engine import _kernels, fast

ROOT = Path(__file__).resolve().parents[2]


class _Tty(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


# -- mxsim.progress -------------------------------------------------------------------------

def test_progress_follows_tty_env_and_flag(monkeypatch):
    monkeypatch.delenv("MXSIM_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert progress.wanted(None) is False               # not a terminal: off
    monkeypatch.setattr(sys, "stderr", _Tty())
    assert progress.wanted(None) is True                # a terminal: on
    assert progress.wanted(False) is False              # --json passes False
    monkeypatch.setenv("MXSIM_PROGRESS", "0")
    assert progress.wanted(None) is False
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.setenv("MXSIM_PROGRESS", "1")
    assert progress.wanted(None) is True


def test_progress_bar_says_fraction_count_elapsed_and_eta(monkeypatch):
    err = _Tty()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.delenv("MXSIM_PROGRESS", raising=False)
    with progress.Progress(20000, None, label="verify") as bar:
        bar.t0 = time.perf_counter() - 10.0              # 10 s spent on 8,000 of 20,000
        bar.update(8000)
    text = err.getvalue()
    assert "verify [" in text and " 40% 8,000/20,000 dots" in text
    assert "0:10 elapsed, ETA 0:15" in text
    assert text.endswith("\n")
    assert "100% 480/480 dots" in progress.Progress(300, True).line(480)   # outgrew 300


def test_progress_silent_when_not_wanted(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.delenv("MXSIM_PROGRESS", raising=False)
    with progress.Progress(10, None) as bar:
        bar.update(5)
    with progress.Step("building", None, delay=0):
        time.sleep(0.05)
    assert err.getvalue() == ""


def test_step_ticks_elapsed_time_then_says_done(monkeypatch):
    err = _Tty()
    monkeypatch.setattr(sys, "stderr", err)
    with progress.Step("building RTL with Verilator", True, expect=120, delay=0.0,
                       interval=0.02) as step:
        time.sleep(0.2)
    text = err.getvalue()
    assert "building RTL with Verilator... 0:00 of ~2:00" in text
    assert text.count("building RTL") >= 3               # redrawn while it runs
    assert text.endswith("building RTL with Verilator... done in 0:00\x1b[K\n")
    assert step.seconds >= 0.2


def test_step_shorter_than_its_delay_prints_nothing(monkeypatch):
    err = _Tty()
    monkeypatch.setattr(sys, "stderr", err)
    with progress.Step("building", True, delay=5.0):
        pass
    assert err.getvalue() == ""


def test_step_that_raises_says_stopped(monkeypatch):
    err = _Tty()
    monkeypatch.setattr(sys, "stderr", err)
    with pytest.raises(KeyboardInterrupt), progress.Step("synthesising", True, delay=0.0,
                                                         interval=0.01):
        time.sleep(0.05)
        raise KeyboardInterrupt
    assert "synthesising... stopped after 0:00" in err.getvalue()


# -- mxsim run: progress in row chunks, the same codes ---------------------------------------

_CHUNKED = [
    ("hopper-wgmma", dict(a_format="e4m3", with_c=True)),
    ("blackwell-mxf8f6f4", dict(a_format="e4m3", scale_format="e8m0")),
    ("hopper-cublas-rowwise", dict(a_format="e4m3", scale_format="fp32",
                                   scale_granularity="row", with_c=False)),
    ("exact", dict(a_format="e5m2", scale_format="e8m0", with_c=False)),
]


@pytest.mark.parametrize("unit,opts", _CHUNKED, ids=[u for u, _ in _CHUNKED])
def test_run_with_progress_computes_the_same_codes(unit, opts, monkeypatch):
    vs = vectors.generate("llm", m=13, n=6, k=64, batch=(2,), seed=4, **opts)
    u = units.get(unit)
    whole = u.compute(vs)
    monkeypatch.setattr(units, "_PROGRESS_TERMS", {"fast": 1, "reference": 1})
    monkeypatch.setattr(units, "_PROGRESS_CHUNKS", 5)
    assert units._row_chunks(vs, "fast") == [0, 3, 6, 9, 12]
    err = _Tty()
    monkeypatch.setattr(sys, "stderr", err)
    np.testing.assert_array_equal(u.compute(vs, progress=True), whole)
    assert "100% 156/156 dots" in err.getvalue()
    ref = u.compute(vs.subset(slice(0, 4), slice(0, 2)), engine="reference", progress=True)
    np.testing.assert_array_equal(ref, whole[..., :4, :2])


def _run_cli(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_run_progress_on_stderr_only_and_never_under_json(tmp_path, monkeypatch, capsys):
    vs = vectors.generate("normal", a_format="e4m3", m=8, n=8, k=32, seed=1)
    vectors.save(vs, tmp_path / "in.npz")
    monkeypatch.setattr(units, "_PROGRESS_TERMS", {"fast": 1, "reference": 1})
    monkeypatch.setenv("MXSIM_PROGRESS", "1")
    code, out, err = _run_cli(["run", str(tmp_path / "in.npz"), "--unit", "hopper-wgmma",
                               "-o", str(tmp_path / "a.npz")], capsys)
    assert code == 0 and "100% 64/64 dots" in err and "dots" not in out.replace(
        "dot products", "")
    code, out, err = _run_cli(["run", str(tmp_path / "in.npz"), "--unit", "hopper-wgmma",
                               "-o", str(tmp_path / "b.npz"), "--json"], capsys)
    assert code == 0 and err == ""
    json.loads(out)
    np.testing.assert_array_equal(vectors.load(tmp_path / "a.npz").d,
                                  vectors.load(tmp_path / "b.npz").d)


# -- which engine path ran --------------------------------------------------------------------

def test_cli_run_says_which_engine_path_ran(tmp_path, monkeypatch, capsys):
    vs = vectors.generate("normal", a_format="e4m3", m=4, n=4, k=32, seed=1)
    vectors.save(vs, tmp_path / "in.npz")
    argv = ["run", str(tmp_path / "in.npz"), "--unit", "hopper-wgmma", "-o",
            str(tmp_path / "o.npz")]
    code, out, _ = _run_cli(argv, capsys)
    assert code == 0 and "(fast engine: numba kernel (compiled, numba " in out
    code, out, _ = _run_cli(argv + ["--json"], capsys)
    path = json.loads(out)["engine_path"]
    assert path["path"] == "numba" and path["compiled"] is True and path["numba"]
    # Without numba the same command says it ran the slower numpy fallback.
    monkeypatch.setattr(_kernels, "version", lambda: None)
    code, out, _ = _run_cli(argv, capsys)
    assert code == 0 and f"numpy fallback, {fast.NUMPY_SLOWDOWN} slower: numba is not " \
        "installed" in out
    assert "pip install 'mxsim[fast]'" in out
    code, out, _ = _run_cli(argv + ["--json"], capsys)
    assert json.loads(out)["engine_path"]["path"] == "numpy"
    code, out, _ = _run_cli(argv + ["--engine", "reference", "--json"], capsys)
    assert json.loads(out)["engine_path"]["path"] == "reference"


def test_engine_path_of_exact_specs_has_no_kernel():
    vs = vectors.generate("normal", a_format="e4m3", m=2, n=2, k=32, seed=1)
    assert fast.path(presets.get("exact").spec_for(vs))["path"] == "numpy"
    assert fast.path(presets.get("hopper-wgmma").spec_for(vs))["path"] == "numba"


def test_cli_explore_check_says_which_engine_path(capsys):
    code, out, _ = _run_cli(["explore", str(ROOT / "docs/sweeps/alignment.toml"), "--check",
                             "--json"], capsys)
    assert code == 0
    assert json.loads(out)["engine_paths"] == {
        f"numba kernel (compiled, numba {_kernels.version()})": 31}


# -- mxsim units --spec -----------------------------------------------------------------------

def _preset_cases():
    for p in presets.PRESETS.values():
        for a, b in p.pairs:
            for scale, block in p.scales_for(a, b):
                for c in p.c_formats:
                    yield p.name, a, b, scale, block, c


@pytest.mark.parametrize("name", list(presets.PRESETS))
def test_units_spec_round_trips_through_a_toml_file(name, tmp_path, capsys):
    """`mxsim units --spec NAME ...` > FILE.toml, then `--unit FILE.toml` is the preset's
    spec, field for field, for every pair, scale pattern and C format the preset takes."""
    cases = [c for c in _preset_cases() if c[0] == name]
    for i, (_, a, b, scale, block, c) in enumerate(cases):
        argv = ["units", "--spec", name, "--a-format", a, "--b-format", b,
                "--scale-format", scale or "none", "--c-format", c]
        if block is not None:
            argv += ["--block", str(block)]
        code, out, err = _run_cli(argv, capsys)
        assert code == 0, err
        path = tmp_path / f"s{i}.toml"
        path.write_text(out)
        granularity = "row" if scale == "fp32" else None
        want = presets.get(name).spec(a, b, scale_format=scale, block=block, c_format=c,
                                      granularity=granularity)
        assert units.get(str(path)).spec_for_formats() == want, (a, b, scale, block, c)


def test_units_spec_defaults_and_json(capsys):
    code, out, _ = _run_cli(["units", "--spec", "blackwell-mxf8f6f4"], capsys)
    assert code == 0 and out.startswith("# blackwell-mxf8f6f4 for e4m3 x e4m3, e8m0 scales")
    code, out, _ = _run_cli(["units", "--spec", "hopper-wgmma", "--a-format", "e5m2",
                             "--json"], capsys)
    data = json.loads(out)
    assert (data["name"], data["a_format"], data["b_format"]) == ("hopper-wgmma", "e5m2",
                                                                  "e5m2")


@pytest.mark.parametrize("argv,message", [
    (["units", "--spec", "no-such-unit"], "Unknown unit 'no-such-unit'"),
    (["units", "--spec", "hopper-wgmma", "--a-format", "e2m1"], "does not take e2m1 x e2m1"),
    (["units", "--spec", "blackwell-mxf8f6f4", "--scale-format", "ue4m3"], "not ue4m3 scales"),
    (["units", "--b-format", "e4m3"], "--b-format goes with --spec NAME"),
    (["units", "--a-format", "e12m9"], "Unknown format 'e12m9'"),
])
def test_units_spec_bad_input_is_one_line(argv, message, capsys):
    code, out, err = _run_cli(argv, capsys)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1


# -- start-up: lazy imports and a numba cache that hits --------------------------------------

@pytest.mark.parametrize("argv", [["formats"], ["units"], ["units", "--spec", "exact"],
                                  ["--help"]])
def test_cli_verbs_that_compute_nothing_import_no_heavy_module(argv):
    code = "\n".join([
        "import sys", "from mxsim import cli", "try:", f"    cli.main({argv!r})",
        "except SystemExit:", "    pass",
        "heavy = [m for m in ('numba', 'amaranth', 'cocotb', 'torch', 'matplotlib')",
        "         if m in sys.modules]", "print('HEAVY', heavy)"])
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    assert "HEAVY []" in p.stdout


def test_kernels_close_over_nothing_so_numba_cache_hits():
    """numba keys its on-disk cache on the pickled closure of a function, which differs from
    process to process: a kernel that closed over another dispatcher was recompiled by every
    `mxsim run` (about 1.3 s)."""
    from mxsim.formats import _round_kernel
    kernel = _kernels._build()
    assert kernel.py_func.__closure__ is None
    assert _kernels.align_one.py_func.__closure__ is None
    assert _round_kernel._build().py_func.__closure__ is None
    assert kernel._cache._impl.locator is not None          # cached on disk somewhere


def test_numba_cache_falls_back_when_the_checkout_is_read_only(tmp_path, monkeypatch):
    import numba

    from mxsim import _numba
    monkeypatch.setattr(_numba, "_cache_ok", None)
    monkeypatch.setattr(numba.config, "CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    real = _numba._writable
    monkeypatch.setattr(_numba, "_writable",
                        lambda folder: False if _numba._PACKAGE in folder.parents else
                        real(folder))
    _numba.load()
    assert numba.config.CACHE_DIR == str(tmp_path / "cache" / "mxsim" / "numba")
    assert _numba.cache() is True
    monkeypatch.setattr(_numba, "_cache_ok", None)
    monkeypatch.setattr(numba.config, "CACHE_DIR", "")
    monkeypatch.setattr(_numba, "_writable", lambda folder: False)
    _numba.load()
    assert _numba.cache() is False and numba.config.CACHE_DIR == ""


# -- verify: the Verilator build says what it is doing ---------------------------------------

@pytest.mark.parametrize("bulk,expect", [(False, "building RTL with Verilator, 32 lanes (a "
                                          "first build takes ~2 min; later runs reuse it)"),
                                         (True, "building the bulk C++ harness with Verilator"
                                          ", 32 lanes (a first build takes ~1 min; later runs "
                                          "reuse it)")])
def test_verify_shows_the_build_with_its_elapsed_time(bulk, expect, tmp_path, monkeypatch):
    """`make demo` sat silent for minutes while Verilator built: the build is now a line
    whose elapsed time ticks (the build here is a stand-in that takes 1.3 s, then fails)."""
    from mxsim.errors import MxsimError
    from mxsim.microarch import MicroArch
    from testbenches.unit import bulk as bulk_mod
    from testbenches.unit import runner
    from testbenches.unit.verify import verify

    def slow_build(*args, **kwargs):
        time.sleep(1.3)
        raise MxsimError("stand-in build stops here")

    monkeypatch.setattr(bulk_mod if bulk else runner, "build", slow_build)
    err = _Tty()
    monkeypatch.setattr(sys, "stderr", err)
    spec = presets.get("blackwell-mxf8f6f4").spec("e4m3", scale_format="e8m0", block=32)
    with pytest.raises(MxsimError, match="stand-in"):
        verify(spec, MicroArch(lanes=32, stages=2), dots=10, out_dir=tmp_path, bulk=bulk,
               progress=None)
    text = err.getvalue()
    assert f"{expect}... 0:01 of ~" in text
    assert "... stopped after 0:01" in text
    err.truncate(0)
    with pytest.raises(MxsimError, match="stand-in"):                  # --json: silent
        verify(spec, MicroArch(lanes=32, stages=2), dots=10, out_dir=tmp_path, bulk=bulk,
               progress=False)
    assert err.getvalue() == ""


# -- rtl --stats: lut4 by default, and Yosys's steps shown -----------------------------------

def _fake_yosys(seconds: float):
    def run(script, files):
        time.sleep(seconds)
        return {"stat.txt": "     7 $_AND_\n     3 $_SDFF_PP0_\n     5 SB_LUT4\n",
                "ltp.txt": "Longest topological path in mx_dot (length=4):\n",
                "lut4.txt": "     6   $lut\n"}
    return run


@pytest.mark.rtl
def test_rtl_stats_defaults_to_the_lut4_estimate(monkeypatch, capsys):
    from hdl import verilog
    monkeypatch.setattr(verilog, "_yosys", _fake_yosys(0.0))
    monkeypatch.setattr(verilog, "generate", lambda spec, ua, **kw: "// fake\n")
    code, out, err = _run_cli(["rtl", "--unit", "hopper-wgmma", "--lanes", "1", "--stats",
                               "--json"], capsys)
    info = json.loads(out)
    assert code == 0 and err == ""
    assert (info["fpga"], info["lut4"], info["ice40"]) == ("lut4", 6, {})
    code, out, _ = _run_cli(["rtl", "--unit", "hopper-wgmma", "--lanes", "1", "--stats",
                             "--fpga", "ice40"], capsys)
    assert code == 0 and "yosys synth_ice40: " in out and "SB_LUT4 5" in out
    assert "abc -lut 4" not in out
    code, out, _ = _run_cli(["rtl", "--unit", "hopper-wgmma", "--lanes", "1", "--stats",
                             "--no-ice40", "--json"], capsys)
    assert json.loads(out)["fpga"] == "none"


@pytest.mark.rtl
def test_rtl_stats_says_how_long_synth_ice40_takes(monkeypatch):
    from hdl import verilog
    from mxsim.microarch import MicroArch
    monkeypatch.setattr(verilog, "_yosys", _fake_yosys(1.3))
    err = _Tty()
    monkeypatch.setattr(sys, "stderr", err)
    spec = presets.get("hopper-wgmma").spec("e4m3")
    verilog.stats(spec, MicroArch(lanes=32, stages=1), ice40=True, text="// fake\n",
                  progress=None)
    text = err.getvalue()
    assert "synthesising with Yosys (generic cells, 32 lanes; up to ~4 min at 32 lanes)... " \
           "done in 0:01" in text
    assert "synthesising for iCE40 with synth_ice40 (32 lanes; 5 to 30 min at 32 lanes)... " \
           "0:01" in text
