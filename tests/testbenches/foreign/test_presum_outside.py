"""Pre-summed scale exponents (``scales.sum``) and inputs outside ``[domain]`` checked on request
(``verify --rtl --outside-domain N``), issue 34.

tests/data/foreign/presum_dot.sv takes one 8-bit two's complement field holding ea + eb: verified
through its map in bulk, it passes; a map that sends the sum with a bias the design does not
subtract fails. ``--outside-domain`` runs dots that break the domain (only those the ports can
carry) after the verdict and reports them apart: never in the verdict or the exit code (here the
design keeps results FP32 cannot hold, which the spec overflows to Inf).
Malformed uses are one line, exit 2, nothing simulated."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import one_line, run

from mxsim import spec as specs
from testbenches.foreign.outside import outside_set, rules_broken
from testbenches.foreign.portmap import load
from testbenches.foreign.portmap.domain import Domain

DATA = Path(__file__).resolve().parents[2] / "data" / "foreign"
MAP, SPEC = DATA / "presum_dot.toml", str(DATA / "presum_dot_spec.toml")
FPU = Path(__file__).resolve().parents[3] / "examples" / "rtl" / "mx_fpu"


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("presum")


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    text = MAP.read_text()
    assert text.count(old) == 1, old
    shutil.copy(DATA / "presum_dot.sv", tmp_path / "presum_dot.sv")
    path = tmp_path / "presum_dot.toml"
    path.write_text(text.replace(old, new))
    return path


def _verify(capsys, out, rtl_map, *args):
    rc, stdout, err = run(capsys, "verify", "--rtl", rtl_map, "--unit", SPEC, "--bulk",
                          "--out", out, "--json", *args)
    assert "Traceback" not in err, err
    return rc, json.loads(stdout)


def test_presummed_exponents_verify_and_outside_is_apart(capsys, out):
    rc, rep = _verify(capsys, out, MAP, "--vectors", "6000", "--outside-domain", "400")
    assert rc == 0 and rep["passed"] and rep["value_mismatches"] == 0, rep["mismatches"][:3]
    od = rep["outside_domain"]
    assert od["dots"] == 400 and od["rules"] == {"scale_sum": 400}
    # Outside the domain a sum above 100 can take the exact result past FP32's largest value:
    # the design keeps every bit, the spec overflows to Inf. Reported apart, exit 0.
    assert od["value_mismatches"] > 0 and od["cycle_mismatches"] == 0
    assert all(m["model"] in ("+Inf", "-Inf") for m in od["first"]), od["first"]


def test_a_bias_the_design_does_not_subtract_fails(capsys, out, tmp_path):
    bad = _edited(tmp_path, "exponent = { bits = 8, signed = true }",
                  "exponent = { bits = 8, signed = true, bias = 1 }")
    bad.write_text(bad.read_text().replace("scale_sum = [-100, 100]", "scale_sum = [-100, 99]"))
    rc, rep = _verify(capsys, out / "bias", bad, "--vectors", "2000")
    assert rc == 1 and rep["value_mismatches"] > 0


def test_outside_set_breaks_the_domain_and_fits_the_ports():
    pm = load(MAP)
    spec = specs.load(SPEC)
    fits = Domain(scale_sum=pm.scales.exponent.sums)
    vs = outside_set(pm.domain, spec, 300, seed=4, with_c=False, fits=fits)
    bad, _ = pm.domain.violations(vs)
    assert vs.num_dots == 300 and bad.all()
    assert not fits.violations(vs)[0].any()
    assert rules_broken(pm.domain, vs) == {"scale_sum": 300}
    assert (vs.c == 0).all()
    # a domain that only what the ports cannot carry breaks (NaN scales): nothing is drawn
    assert outside_set(Domain(scale_sum=(-254, 254)), spec, 50, seed=1, fits=fits) is None


def test_presum_packs_the_sum_of_exponents():
    from mxsim.vectors import VectorSet
    pm = load(MAP)
    spec = specs.load(SPEC)
    rng = np.random.default_rng(0)
    sa = rng.integers(127 - 50, 127 + 50, (1, 6, 1), dtype=np.uint8)
    sb = rng.integers(127 - 50, 127 + 50, (1, 1, 1), dtype=np.uint8)
    vs = VectorSet(a=rng.integers(0, 256, (1, 6, 4), dtype=np.uint8),
                   b=rng.integers(0, 256, (1, 4, 1), dtype=np.uint8), a_format="int8",
                   b_format="int8", a_scale=sa, b_scale=sb, scale_format="e8m0", block=4)
    beats = pm.pack(spec, vs)
    want = (sa.reshape(-1).astype(int) - 127 + int(sb.reshape(-1)[0]) - 127) & 0xFF
    assert beats.ports["e_sum"].reshape(-1).tolist() == want.tolist()


SUM = "sum = { port = \"e_sum\" }                 # ea + eb, one field per instruction"


@pytest.mark.parametrize("old,new,text", [
    (SUM, SUM + '\na = { port = "e_sum" }',
     "scales.a is not used by scales.sum (the design takes the pair's exponents pre-summed"),
    ("exponent = { bits = 8, signed = true }\n", "",
     "scales.sum sends the sum of the two scale exponents; say how in scales.exponent"),
    ("scale_sum = [-100, 100]", "scale_sum = [-100, 200]",
     "scales.exponent holds sums of scale exponents -128..127 only (scales.sum); declare "
     "[domain] scale_sum = [-128, 127]"),
    ("scale_sum = [-100, 100]", 'a = ["zero", "normal"]',
     "declare [domain] scale_sum"),
    ('sum = { port = "e_sum" }', 'sum = { port = "e_sum", bits = [8, 0] }',
     "scales.sum.bits [8, 0] hold 9 bits; scales.sum needs 8"),
], ids=["with-a", "no-exponent", "sum-beyond-field", "no-sum-range", "port-width"])
def test_malformed_scales_sum_is_one_line(capsys, tmp_path, old, new, text):
    path = _edited(tmp_path, old, new)
    rc, _, err = run(capsys, "verify", "--rtl", path, "--unit", SPEC, "--bulk", "--out",
                     tmp_path / "o")
    assert rc == 2, err
    one_line(err, text)
    assert not (tmp_path / "o").exists() or not [p for p in (tmp_path / "o").rglob("*")
                                                   if p.is_file() and p.name != "ports.log"]


def test_outside_domain_refusals_are_one_line(capsys, tmp_path):
    for args, text in (
            (["--rtl", FPU / "mx_fpu.toml", "--unit", FPU / "mx_fpu_spec.toml", "--a-format",
              "e4m3", "--outside-domain", "10"], "--outside-domain needs a [domain] in the map"),
            (["--unit", "blackwell-mxf8f6f4", "--outside-domain", "10"],
             "--outside-domain checks inputs outside a port map's [domain]; give --rtl"),
            (["--rtl", MAP, "--unit", SPEC, "--outside-domain", "0"], "--outside-domain"),
    ):
        rc, _, err = run(capsys, "verify", *args, "--bulk", "--out", tmp_path / "o2")
        assert rc == 2, err
        assert "Traceback" not in err and err.count("\n") == 1 and text in err, err


def _fpu_with(tmp_path: Path, domain: str) -> Path:
    shutil.copy(FPU / "mx_fpu.sv", tmp_path / "mx_fpu.sv")
    path = tmp_path / "mx_fpu.toml"
    path.write_text((FPU / "mx_fpu.toml").read_text() + f"\n[domain]\n{domain}\n")
    return path


def test_c_exponent_keeps_c_in_its_binades(capsys, tmp_path):
    """``c_exponent``: stimulus C in 2**-20 .. 2**21 (zeros, Infs and NaNs are classes, not
    binades: ``c`` limits those); outside-domain dots each have a C beyond it."""
    path = _fpu_with(tmp_path, "c_exponent = [-20, 20]")
    rc, stdout, err = run(capsys, "verify", "--rtl", path, "--unit", FPU / "mx_fpu_spec.toml",
                          "--a-format", "e4m3", "--bulk", "--vectors", "3000",
                          "--outside-domain", "300", "--out", tmp_path / "o", "--json")
    rep = json.loads(stdout)
    assert rc == 0 and rep["passed"], (err, rep["mismatches"][:2])
    assert rep["outside_domain"]["dots"] == 300
    assert rep["outside_domain"]["rules"] == {"c_exponent": 300}
    pm = load(path)
    from mxsim import formats
    from testbenches.foreign.portmap.domain import c_exponents
    from testbenches.unit.coverage import stimulus
    vs = pm.domain.constrain(stimulus(specs.load(FPU / "mx_fpu_spec.toml"), 4000, seed=5), 5)
    e = c_exponents(formats.get("fp32"), vs.c)
    live = e > -(1 << 20)
    assert live.sum() > 1000 and e[live].min() == -20 and e[live].max() == 20
    assert pm.domain.first_outside(vs) is None


@pytest.mark.parametrize("domain,text", [
    ("c_exponent = [5, 1]", "domain.c_exponent must be [lo, hi], integers with -200 <= lo"),
    ("c_exponent = [0, 300]", "domain.c_exponent must be [lo, hi]"),
    ('c_exponent = "small"', "domain.c_exponent must be [lo, hi]"),
])
def test_malformed_c_exponent_is_one_line(capsys, tmp_path, domain, text):
    path = _fpu_with(tmp_path, domain)
    rc, _, err = run(capsys, "verify", "--rtl", path, "--unit", FPU / "mx_fpu_spec.toml",
                     "--a-format", "e4m3", "--bulk", "--out", tmp_path / "o")
    assert rc == 2
    one_line(err, text)
    assert err.startswith(f"mxsim: error: {path}:")
