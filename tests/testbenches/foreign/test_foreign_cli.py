"""``mxsim verify --rtl`` and ``mxsim fit --rtl`` as a user runs them, on example 1
(examples/rtl/mxfp8_coproc): a pass with its numerics stated, the injected bug caught with a
failing set whose printed replay command fails again on its own, and a fit that recovers the
documented numerics (no NaN/Inf handling, saturation, one exact rounding) from RTL outputs
alone. One output folder for the module, so the bulk build is made once per variant."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from mxsim import spec as specs

ROOT = Path(__file__).resolve().parents[3]
EX = "examples/rtl/mxfp8_coproc"
UNIT = ["--unit", f"{EX}/mxfp8_coproc_spec.toml"]

pytestmark = [pytest.mark.rtl, pytest.mark.slow]


def _mxsim(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mxsim", *args], cwd=ROOT, capture_output=True,
                          text=True, check=False)


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("foreign-cli")


def test_verify_rtl_passes_and_states_the_numerics(out):
    p = _mxsim("verify", "--rtl", f"{EX}/mxfp8_coproc.toml", *UNIT, "--bulk", "--vectors",
               "3000", "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "mismatches  0 value, 0 cycle" in p.stdout
    assert "result      PASS" in p.stdout
    assert ("numerics    one step, exact terms, rounded to fp32 rne; no NaN/Inf (every code "
            "reads as the number its bits spell); overflow saturate") in p.stdout
    assert f"design      {EX}/mxfp8_coproc.toml (top mxfp8_coproc)" in p.stdout


def test_verify_rtl_catches_the_injected_bug_and_its_replay_fails_again(out):
    p = _mxsim("verify", "--rtl", f"{EX}/mxfp8_coproc_bug.toml", *UNIT, "--bulk", "--vectors",
               "3000", "--out", str(out), "--json")
    assert p.returncode == 1, p.stderr
    rep = json.loads(p.stdout)
    assert rep["result"] == "FAIL" and rep["value_mismatches"] > 0
    assert rep["cycle_mismatches"] == 0
    first = rep["mismatches"][0]
    assert int(first["rtl"], 16) == int(first["model"], 16) - 1      # one ulp low: no sticky
    assert Path(rep["failing"]).exists()
    replay = shlex.split(rep["replay"])
    assert replay[:4] == ["mxsim", "verify", "--rtl", f"{EX}/mxfp8_coproc_bug.toml"]
    assert replay[-1] == "--waves"
    again = _mxsim(*replay[1:-1], "--bulk", "--out", str(out), "--json")
    assert again.returncode == 1, again.stderr
    rerun = json.loads(again.stdout)
    assert rerun["result"] == "FAIL" and rerun["dots"] <= 20


def test_fit_rtl_recovers_the_documented_numerics(out, tmp_path):
    fitted = tmp_path / "fitted.toml"
    p = _mxsim("fit", "--rtl", f"{EX}/mxfp8_coproc.toml", "-o", str(fitted), "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "fitted spec reproduces 32768 of 32768 outputs (every bit)" in p.stdout
    got = specs.load(fitted)
    want = specs.load(ROOT / EX / "mxfp8_coproc_spec.toml")
    for name in ("k", "frac_bits", "acc_format", "acc_rounding", "c_mode", "specials",
                 "overflow", "schedule"):
        assert getattr(got, name) == getattr(want, name), name
    assert (out / "observed.npz").exists()


def test_fit_rtl_refuses_inputs_and_a_k_the_map_contradicts(out, tmp_path):
    p = _mxsim("fit", "--rtl", f"{EX}/mxfp8_coproc.toml", "in.npz", "o.npz", "-o",
               str(tmp_path / "f.toml"))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "give no IN.npz" in p.stderr
    p = _mxsim("fit", "--rtl", f"{EX}/mxfp8_coproc.toml", "-k", "32", "-o",
               str(tmp_path / "f.toml"), "--out", str(out))
    assert p.returncode == 2 and "-k 32 differs from the port map's k = 8" in p.stderr
    p = _mxsim("verify", "--rtl", f"{EX}/mxfp8_coproc.toml", "--out", str(tmp_path / "v"))
    assert p.returncode == 2 and "verify --rtl needs --unit" in p.stderr
    assert not (tmp_path / "f.toml").exists()
