"""``mxsim rtl observe``: a vector set through a design behind a port map, its outputs kept for
``mxsim fit IN OUT``; and ``fit --rtl --out DIR``'s probes and outputs, which fit again from
the files alone.

nrm_tree (example 5: a fixed-point result, 6-bit exponent scales inside its [domain]): fit
--rtl saves probes.npz and observed.npz and says where; observe of probes.npz gives the same
outputs, and ``mxsim fit probes.npz OUT.npz`` fits the same spec, whose codes are the outputs
bit for bit; on an in-domain random set observe gives what ``verify --rtl --replay`` passes.
mx_fpu (example 4): a mode set by ``--set`` (its rm port) and the BF16 accumulator taken from
the set's C. Bad input is one line, exit 2, no OUT. One bulk build per design for the module,
at -O0 (``quick_cxx``: the same values, a quicker build).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from cli_helpers import one_line, run

from mxsim import spec as specs
from mxsim import vectors
from mxsim.engine import fast

pytestmark = [pytest.mark.rtl, pytest.mark.slow, pytest.mark.usefixtures("quick_cxx")]

ROOT = Path(__file__).resolve().parents[3]
NRM = ROOT / "examples" / "rtl" / "nrm_tree" / "nrm_tree.toml"
NRM_SPEC = NRM.with_name("nrm_tree_spec.toml")
FPU = ROOT / "examples" / "rtl" / "mx_fpu" / "mx_fpu.toml"
FPU_SPEC = FPU.with_name("mx_fpu_spec.toml")


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("observe")


def _observe(capsys, out: Path, rtl: Path, inputs: Path, output: Path, *args
             ) -> tuple[int, dict, str]:
    rc, stdout, err = run(capsys, "rtl", "observe", rtl, inputs, "-o", output, "--bulk",
                          "--out", out / rtl.stem, "--json", *args)
    assert "Traceback" not in err, err
    return rc, json.loads(stdout) if rc == 0 else {}, err


def _verify_replay(capsys, out: Path, rtl: Path, unit: Path, replay: Path, *args) -> dict:
    rc, stdout, err = run(capsys, "verify", "--rtl", rtl, "--unit", unit, "--replay", replay,
                          *args, "--bulk", "--out", out / rtl.stem, "--json")
    rep = json.loads(stdout)
    assert rc == 0 and rep["value_mismatches"] == rep["cycle_mismatches"] == 0, err
    return rep


def _nrm_set(path: Path, *, k: int = 32, seed: int = 1, **changes) -> Path:
    """An in-domain E4M3 set of nrm_tree's shape (blocks of 8, C = +0), changed by
    ``changes`` (generate's keywords)."""
    from testbenches.foreign.portmap import load
    opts = dict(a_format="e4m3", m=4, n=4, k=k, scale_format="e8m0", block=8) | changes
    vs = vectors.generate_suite(["uniform", "normal", "cancellation", "max", "zeros"],
                                seed=seed, **opts)
    if opts["scale_format"] == "e8m0" and opts["block"] == 8:
        vs = load(NRM).domain.constrain(vs, seed)
    vectors.save(vs.replace(c=np.zeros_like(vs.c)), path)
    return path


def test_fit_rtl_saves_probes_that_observe_and_fit_reproduce(capsys, out, tmp_path):
    rc, stdout, err = run(capsys, "fit", "--rtl", NRM, "-o", tmp_path / "rtl.toml", "--out",
                          out / NRM.stem, "--json")
    assert rc == 0, err
    rep = json.loads(stdout)
    probes, observed = Path(rep["probes"]), Path(rep["observed"])
    assert (probes, observed) == (out / NRM.stem / "probes.npz", out / NRM.stem / "observed.npz")
    assert rep["refit"].startswith(f"mxsim fit {probes} {observed}")
    ins, obs = vectors.load(probes), vectors.load(observed)
    assert ins.d is None and ins.inputs_equal(obs)
    # the probes through the design again: the same outputs
    rc, info, err = _observe(capsys, out, NRM, probes, tmp_path / "again.npz")
    assert rc == 0, err
    assert (info["dots"], info["instruction_k"], info["compare"], info["mode"]) == (
        obs.num_dots, 32, "value", {})
    assert info["timing_mismatches"] == 0 and info["cycles"] >= obs.num_dots
    again = vectors.load(tmp_path / "again.npz")
    assert again.inputs_equal(ins) and np.array_equal(again.d, obs.d)
    # mxsim fit IN OUT: the spec fit --rtl wrote, reproducing every output's code
    rc, stdout, err = run(capsys, "fit", probes, tmp_path / "again.npz", "-o",
                          tmp_path / "file.toml", "--json")
    assert rc == 0 and json.loads(stdout)["exact"], err
    assert (tmp_path / "file.toml").read_text() == (tmp_path / "rtl.toml").read_text()
    fitted = specs.load(tmp_path / "file.toml")
    assert np.array_equal(fast.dot(fitted, ins), again.d)


def test_observe_gives_what_verify_replay_passes(capsys, out, tmp_path):
    inputs = _nrm_set(tmp_path / "in.npz")
    rc, info, err = _observe(capsys, out, NRM, inputs, tmp_path / "out.npz")
    assert rc == 0, err
    got = vectors.load(tmp_path / "out.npz")
    assert got.inputs_equal(vectors.load(inputs)) and got.producer.startswith("nrm_tree (RTL")
    # the design is correct against its spec: observed codes are the spec's, bit for bit
    want = fast.dot(specs.load(NRM_SPEC), got)
    assert np.array_equal(got.d, want)
    rep = _verify_replay(capsys, out, NRM, NRM_SPEC, inputs)
    assert rep["dots"] == info["dots"] == got.num_dots


def test_observe_runs_a_mode_and_takes_the_sets_c_format(capsys, out, tmp_path):
    """mx_fpu in E2M1 (64 lanes), its rm port at RDN by --set, and its acc_fmt port at BF16
    because the set's C is BF16: BF16 codes, the spec's in that mode bit for bit."""
    vs = vectors.generate_suite(["uniform", "normal", "cancellation", "specials"],
                                a_format="e2m1", m=4, n=4, k=64, scale_format="e8m0",
                                block=64, c_format="bf16", seed=3)
    vectors.save(vs, tmp_path / "in.npz")
    rc, info, err = _observe(capsys, out, FPU, tmp_path / "in.npz", tmp_path / "out.npz",
                             "--set", "acc_rounding=rd")
    assert rc == 0, err
    assert info["mode"]["acc_rounding"] == "rd" and info["mode"]["d_format"] == "bf16"
    assert (info["d_format"], info["compare"], info["instruction_k"]) == ("bf16", "bits", 64)
    got = vectors.load(tmp_path / "out.npz")
    mode = ["--set", "a_format=e2m1", "--set", "b_format=e2m1", "--set", "k=64", "--set",
            "block=64", "--set", "d_format=bf16", "--set", "acc_format=bf16", "--set",
            "nan_code=0x7FC0", "--set", "acc_rounding=rd"]
    spec = specs.from_dict({**specs.load(FPU_SPEC).to_dict(), "a_format": "e2m1",
                            "b_format": "e2m1", "k": 64, "block": 64, "d_format": "bf16",
                            "acc_format": "bf16", "nan_code": 0x7FC0, "acc_rounding": "rd"})
    assert got.d_format == "bf16" and np.array_equal(got.d, fast.dot(spec, vs))
    _verify_replay(capsys, out, FPU, FPU_SPEC, tmp_path / "in.npz", *mode)


def _text(path: Path) -> Path:
    path.write_text("not a vector set\n")
    return path


def _npz(path: Path) -> Path:
    np.savez(path, x=np.zeros(3))
    return path


@pytest.mark.parametrize("make,args,text", [
    (lambda t: t / "missing.npz", [], "missing.npz: no such file"),
    (lambda t: _text(t / "text.npz"), [], "text.npz: not an .npz file"),
    (lambda t: _npz(t / "other.npz"), [], "other.npz: unknown array(s) 'x'"),
    (lambda t: _nrm_set(t / "e5m2.npz", a_format="e5m2"), [],
     "the vector set holds e5m2 x e5m2; the design takes e4m3 x e4m3"),
    (lambda t: _nrm_set(t / "k64.npz", k=64), [],
     "the vector set has K = 64; the design needs k = 32 (one instruction per dot product"),
    (lambda t: _nrm_set(t / "b32.npz", block=32), [],
     "the vector set has e8m0 scales per 32 elements; the design takes e8m0 scales per 8"),
    (lambda t: _nrm_set(t / "noscale.npz", scale_format=None, block=None), [],
     "the vector set has no scales; the design takes e8m0 scales per 8"),
    (lambda t: _nrm_set(t / "in.npz"), ["--set", "rounding=rd"],
     "--set: 'rounding' is not a field of a unit spec"),
    (lambda t: _nrm_set(t / "in.npz"), ["--set", "acc_rounding=rd"],
     "--set acc_rounding: no input of "),
    (lambda t: _nrm_set(t / "in.npz"), ["--set", "k=64"],
     "--set k: rtl observe takes the element formats and scales from the vector set"),
], ids=["missing", "text", "other-npz", "format", "k", "block", "no-scales", "unknown-field",
        "unfollowed-field", "shape-field"])
def test_bad_input_is_one_line_and_writes_nothing(capsys, out, tmp_path, make, args, text):
    rc, _, err = _observe(capsys, out, NRM, make(tmp_path), tmp_path / "out.npz", *args)
    assert rc == 2
    one_line(err, text)
    assert not (tmp_path / "out.npz").exists()


def test_a_set_outside_the_domain_is_refused(capsys, out, tmp_path):
    inputs = tmp_path / "in.npz"
    vs = vectors.load(_nrm_set(inputs))
    vectors.save(vs.replace(a_scale=np.full_like(vs.a_scale, 127 + 31),
                            b_scale=np.full_like(vs.b_scale, 127 + 31)), inputs)
    rc, _, err = _observe(capsys, out, NRM, inputs, tmp_path / "out.npz")
    assert rc == 2
    one_line(err, "the vector set is outside [domain]: dot 0: a block's scale exponents sum "
                  "to 62, outside scale_sum [-32, 31]; observe in-domain dot products")
    assert not (tmp_path / "out.npz").exists()


@pytest.mark.parametrize("args,text", [
    (["--lint"], "--lint is an option of `mxsim rtl` (a unit's Verilog), not of `mxsim rtl "
                 "observe`"),
    (["--sim", "icarus"], "--bulk runs the C++ harness on Verilator, not --sim icarus"),
], ids=["rtl-option", "bulk-icarus"])
def test_options_it_would_not_read_are_refused(capsys, tmp_path, args, text):
    before, after = (args, []) if args == ["--lint"] else ([], args)
    rc, _, err = run(capsys, "rtl", *before, "observe", NRM, tmp_path / "in.npz", "-o",
                     tmp_path / "out.npz", "--bulk", *after)
    assert rc == 2
    one_line(err, text)


def test_fixed_results_fp32_does_not_hold_are_refused_in_one_line():
    from mxsim.errors import MxsimError
    from testbenches.foreign.characterise import fp32_results
    codes = np.array([0x3F800000, 0x4E800000], np.uint32)          # 1.0 and 2**30
    results = SimpleNamespace(encoding="fixed", fp32_codes=lambda: codes,
                              nan=np.zeros(2, bool), mant=np.array([1, (1 << 30) + 1]),
                              exp=np.array([0, 0]))
    with pytest.raises(MxsimError, match=r"^m\.toml: 1 of the design's results are not FP32 "
                                         r"values \(first: 1073741825\*2\^0\); rtl observe"):
        fp32_results(SimpleNamespace(path="m.toml"), results, why="rtl observe ...")
