"""Examples 4 and 5 (examples/rtl/mx_fpu, examples/rtl/nrm_tree): designs described in their
own terms (issue 34), verified through the CLI as docs/foreign-rtl.md's tutorial does.

nrm_tree: 6-bit exponent scales and a declared domain, a tree rounding to 12 then 15 bits, a
fixed-point result; its bug (the exponent sum saturating at +30) is reached only at the domain's
edge, which the constrained stimulus puts one scale pair in sixteen on. mx_fpu: one build runs
every mode through [control] (the format port, FP32/BF16 accumulator, rounding mode) with every
flag of [status] checked; its bug (RDN ignoring the sticky bit of negative results) fails RDN
and passes RNE. One Verilator build per design and variant for the module (the bulk harness;
the long runs of a million dot products per mode are examples/rtl/run_all.py's).
"""

import json
from pathlib import Path

import pytest
from cli_helpers import run

ROOT = Path(__file__).resolve().parents[2]
NRM = ROOT / "examples" / "rtl" / "nrm_tree"
FPU = ROOT / "examples" / "rtl" / "mx_fpu"
FPU_SPEC = str(FPU / "mx_fpu_spec.toml")
#: (mode, --set arguments) of mx_fpu: every format, both accumulators, every rounding mode
MODES = [
    ("e4m3 fp32 rne", ["--a-format", "e4m3"]),
    ("e5m2 fp32 rna", ["--set", "a_format=e5m2", "--set", "b_format=e5m2",
                       "--set", "acc_rounding=rna"]),
    ("e2m1 fp32 rd", ["--set", "a_format=e2m1", "--set", "b_format=e2m1", "--set", "k=64",
                      "--set", "block=64", "--set", "acc_rounding=rd"]),
    ("int8 bf16 ru", ["--set", "a_format=int8", "--set", "b_format=int8",
                      "--set", "d_format=bf16", "--set", "acc_format=bf16",
                      "--set", "nan_code=0x7FC0", "--set", "acc_rounding=ru"]),
    ("e4m3 bf16 rz", ["--a-format", "e4m3", "--set", "d_format=bf16", "--set",
                      "acc_format=bf16", "--set", "nan_code=0x7FC0", "--set",
                      "acc_rounding=rz"]),
]


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("own_terms")


def _verify(capsys, out: Path, *args) -> tuple[int, dict]:
    rc, stdout, err = run(capsys, "verify", "--rtl", *args, "--bulk", "--out", out, "--json")
    assert "Traceback" not in err, err
    return rc, json.loads(stdout)


def test_nrm_tree_passes_inside_its_domain(capsys, out):
    rc, rep = _verify(capsys, out, NRM / "nrm_tree.toml", "--unit",
                      NRM / "nrm_tree_spec.toml", "--vectors", "20000")
    assert rc == 0 and rep["result"] == "PASS", rep["result"]
    assert rep["value_mismatches"] == rep["cycle_mismatches"] == 0 and rep["holes"] == 0
    assert rep["dots"] >= 20000


def test_nrm_tree_bug_is_caught_at_the_domains_edge(capsys, out):
    rc, rep = _verify(capsys, out, NRM / "nrm_tree_bug.toml", "--unit",
                      NRM / "nrm_tree_spec.toml", "--vectors", "20000")
    assert rc == 1 and rep["result"] == "FAIL" and rep["value_mismatches"] > 0
    assert rep["cycle_mismatches"] == 0
    # the failing set it wrote is in the domain, and every dot of it reaches a sum of 31
    from mxsim import vectors
    from testbenches.foreign.portmap import load
    failing = vectors.load(rep["failing"])
    dom = load(NRM / "nrm_tree.toml").domain
    assert dom.first_outside(failing) is None
    sums = failing.a_scale.astype(int) - 127 + (failing.b_scale.astype(int) - 127).swapaxes(
        -1, -2)
    assert (sums == 31).any(axis=-1).all()


@pytest.mark.parametrize("mode,args", MODES, ids=[m for m, _ in MODES])
def test_mx_fpu_passes_every_mode_with_flags(capsys, out, mode, args):
    rc, rep = _verify(capsys, out, FPU / "mx_fpu.toml", "--unit", FPU_SPEC, *args,
                      "--vectors", "8000")
    assert rc == 0, rep["mismatches"][:3]
    assert rep["value_mismatches"] == rep["cycle_mismatches"] == 0


def test_mx_fpu_bug_fails_rdn_only(capsys, out):
    rc, rep = _verify(capsys, out, FPU / "mx_fpu_bug.toml", "--unit", FPU_SPEC,
                      "--a-format", "e4m3", "--set", "acc_rounding=rd", "--vectors", "20000")
    assert rc == 1 and rep["value_mismatches"] > 0 and rep["cycle_mismatches"] == 0
    rc, rep = _verify(capsys, out, FPU / "mx_fpu_bug.toml", "--unit", FPU_SPEC,
                      "--a-format", "e4m3", "--vectors", "8000")
    assert rc == 0 and rep["value_mismatches"] == 0


def test_set_is_refused_in_one_line(capsys, out):
    for args, text in (
            (["--set", "acc_rounding"], "--set takes FIELD=VALUE"),
            (["--set", "rounding=rd"], "--set: 'rounding' is not a field of a unit spec"),
            (["--a-format", "e4m3", "--set", "acc_rounding=up"], "--set: "),
            (["--a-format", "int8", "--set", "a_format=e2m1"],
             "--a-format/--b-format (int8 x e4m3) and --set (e2m1 x e4m3) disagree")):
        rc, _, err = run(capsys, "verify", "--rtl", FPU / "mx_fpu.toml", "--unit", FPU_SPEC,
                         *args, "--bulk", "--out", out / "refused")
        assert rc == 2 and err.count("\n") == 1 and text in err, err
