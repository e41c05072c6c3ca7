"""``mxsim fit --rtl`` on the designs described in their own terms (examples/rtl/mx_fpu and
nrm_tree), as a user runs it: fit a mode, then verify the fitted spec against the design in
that mode.

mx_fpu: element formats by its port (k per format; E2M1 64 lanes under one scale pair), the
rounding-mode port and the BF16 accumulator picked with ``--set``, C passing through where the
products sum to zero (``zero_sign = "c"``, which only the probe suite's C = -0 dots show) and
the canonical NaN in FP32 and BF16 codes; the RNE fit, held to the other rm and acc_fmt modes,
verifies in them too. nrm_tree: a fixed-point result (compared as values), 6-bit exponent
scales kept inside the map's [domain], a tree of two level formats. Bad input is one line with
exit 2. One Verilator build per design for the module (the bulk harness).
"""

import json
from pathlib import Path

import pytest
from cli_helpers import one_line, run

from mxsim import spec as specs

pytestmark = [pytest.mark.rtl, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
FPU = ROOT / "examples" / "rtl" / "mx_fpu" / "mx_fpu.toml"
NRM = ROOT / "examples" / "rtl" / "nrm_tree" / "nrm_tree.toml"
#: (mode, fit arguments, fields the fitted spec must have)
MODES = [
    ("e4m3 fp32 rne", ["--a-format", "e4m3"],
     dict(k=32, block=32, acc_format="fp32", acc_rounding="rne", d_format="fp32",
          nan_code=0x7FC00000, overflow="ieee")),
    ("e2m1 k64 rd", ["--a-format", "e2m1", "--set", "acc_rounding=rd", "--one-mode"],
     dict(k=64, block=64, acc_rounding="rd", overflow="ieee")),
    ("int8 bf16 ru", ["--a-format", "int8", "--set", "d_format=bf16", "--set",
                      "acc_rounding=ru", "--one-mode"],
     dict(k=32, acc_format="bf16", d_format="bf16", acc_rounding="ru", nan_code=0x7FC0)),
]
#: The e4m3 RNE fit held to other modes by verify's --set, as examples/rtl/run_modes.py does
OTHER_MODES = [["--set", "a_format=e5m2", "--set", "b_format=e5m2", "--set", "acc_rounding=rd"],
               ["--set", "a_format=e2m1", "--set", "b_format=e2m1", "--set", "k=64", "--set",
                "block=64", "--set", "d_format=bf16", "--set", "acc_format=bf16", "--set",
                "nan_code=0x7FC0", "--set", "acc_rounding=rz"]]


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fit-rtl")


def _fit(capsys, out: Path, rtl: Path, fitted: Path, *args) -> tuple[int, dict, str]:
    rc, stdout, err = run(capsys, "fit", "--rtl", rtl, *args, "-o", fitted, "--out",
                          out / rtl.stem, "--json")
    assert "Traceback" not in err, err
    return rc, json.loads(stdout) if rc in (0, 1) else {}, err


def _verify(capsys, out: Path, rtl: Path, unit: Path, *args) -> dict:
    rc, stdout, err = run(capsys, "verify", "--rtl", rtl, "--unit", unit, *args, "--bulk",
                          "--vectors", "3000", "--out", out / rtl.stem, "--json")
    rep = json.loads(stdout)
    assert rc == 0, rep["mismatches"][:3]
    return rep


def _field(spec, name: str):
    value = getattr(spec, name)
    return getattr(value, "value", value)


@pytest.mark.parametrize("mode,args,want", MODES, ids=[m for m, _, _ in MODES])
def test_mx_fpu_fit_verifies_in_its_mode(capsys, out, tmp_path, mode, args, want):
    fitted = tmp_path / "fitted.toml"
    rc, rep, err = _fit(capsys, out, FPU, fitted, *args)
    assert rc == 0 and rep["exact"], err
    got = specs.load(fitted)
    assert (got.frac_bits, _field(got, "zero_sign"), _field(got, "specials")) == (
        None, "c", "ieee")
    for name, value in want.items():
        assert _field(got, name) == value, name
    # the C = -0 dots separate C passing through from +0 and IEEE zeros
    assert max(rep["evidence"]["zero_sign"][z] for z in ("positive", "ieee")) < rep["total"]
    fmt = args[1]
    check = _verify(capsys, out, FPU, fitted, "--a-format", fmt)
    assert check["value_mismatches"] == check["cycle_mismatches"] == 0
    if "--one-mode" in args:
        return
    # RNE leaves overflow inf or ieee open; the other rm and acc_fmt modes decide it, so the
    # one spec holds in other modes too
    assert any(n.startswith("other modes decide overflow = ieee") for n in rep["notes"])
    for other in OTHER_MODES:
        check = _verify(capsys, out, FPU, fitted, *other)
        assert check["value_mismatches"] == 0


def test_nrm_tree_fit_verifies_inside_its_domain(capsys, out, tmp_path):
    fitted = tmp_path / "fitted.toml"
    rc, rep, err = _fit(capsys, out, NRM, fitted)
    assert rc == 0 and rep["exact"], err
    got = specs.load(fitted)
    assert (got.group, _field(got, "reduce"), got.tree_formats, _field(got, "specials"),
            _field(got, "acc_rounding")) == (8, "tree", ("e8m11", "e8m14"), "none", "rne")
    # a fixed-point result carries no zero sign or NaN code: neither is searched
    assert "zero_sign" not in rep["evidence"] and "nan_code" not in rep["evidence"]
    observed = out / NRM.stem / "observed.npz"
    from mxsim import vectors
    from testbenches.foreign.portmap import load
    obs = vectors.load(observed)
    moved, total = obs.extra["domain_redrawn"]
    assert 0 < moved < total and load(NRM).domain.first_outside(obs) is None
    check = _verify(capsys, out, NRM, fitted)
    assert check["value_mismatches"] == 0


@pytest.mark.parametrize("args,text", [
    (["--a-format", "e4m3", "--set", "rounding=rd"],
     "--set: 'rounding' is not a field of a unit spec"),
    (["--a-format", "e4m3", "--set", "acc_rounding"], "--set takes FIELD=VALUE"),
    (["--a-format", "e4m3", "--set", "a_format=e5m2"],
     "--set a_format: fit --rtl takes the element formats from --a-format/--b-format"),
    (["--a-format", "e3m2"], "multiplies e3m2 x e3m2; the design selects one format for A "
                             "and B among e4m3, e5m2, e2m1, int8"),
    (["--a-format", "e4m3", "--set", "d_format=fp16"],
     "accumulator.format is fp32 or bf16 but unit"),
    (["--a-format", "e4m3", "--set", "acc_rounding=stochastic"],
     "control.rm sets acc_rounding to rne, rz, rd, ru, rna but unit"),
    (["--a-format", "e2m1", "-k", "32"], "-k 32 differs from the port map's k = 64 for e2m1"),
], ids=["unknown-field", "no-value", "format-by-set", "format-not-driven", "d-format",
        "no-control-value", "k"])
def test_fit_rtl_refuses_bad_modes_in_one_line(capsys, out, tmp_path, args, text):
    rc, _, err = _fit(capsys, out, FPU, tmp_path / "f.toml", *args)
    assert rc == 2
    one_line(err, text)
    assert not (tmp_path / "f.toml").exists()


@pytest.mark.parametrize("flag", [["--set", "acc_rounding=rd"], ["--one-mode"]],
                         ids=["set", "one-mode"])
def test_modes_need_rtl(capsys, tmp_path, flag):
    rc, _, err = run(capsys, "fit", tmp_path / "in.npz", *flag, "-o", tmp_path / "f.toml")
    assert rc == 2
    one_line(err, f"{flag[0]} picks the mode a design behind --rtl runs in; give --rtl "
                  f"MAP.toml")


def test_a_fitted_spec_in_another_mode():
    """fit --rtl holds a spec to the design's other modes as verify --set would run it: the
    control's field changed, and with d_format the accumulator that followed it and the NaN
    code in the new format (sign, quiet bit, top payload bits)."""
    from testbenches.foreign.characterise import _in_mode
    spec = specs.load(FPU.parent / "mx_fpu_spec.toml")
    bf16 = _in_mode(spec, {"d_format": "bf16"})
    assert (bf16.d_format, bf16.acc_format, bf16.nan_code) == ("bf16", "bf16", 0x7FC0)
    back = _in_mode(bf16, {"d_format": "fp32"})
    assert (back.acc_format, back.nan_code) == ("fp32", 0x7FC00000)
    assert _field(_in_mode(spec, {"acc_rounding": "rd"}), "acc_rounding") == "rd"
    assert _in_mode(spec, {"frac_bits": 3}) is None         # zero_sign c needs exact terms
