"""``mxsim verify --conformance ocp``: every result judged against the OCP MX dot-product
envelope beside the exact check. A stand-in design (another spec's arithmetic, values checked
as a foreign design's are, no simulator) shows the verdicts: more accurate than the spec is
CONFORMANT (exit 0), a coarse one FAILs with its outside results in the failing set, and a spec
outside the envelope FAILs a design that matches it bit for bit. One slow test runs the
mx_fpu example through the bulk harness against ``ocp-fp32``."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from mxsim import units, vectors
from mxsim.cli import main
from mxsim.microarch import MicroArch, cycle
from testbenches.sim.backend import Run, check
from testbenches.unit.verify import verify

ROOT = Path(__file__).resolve().parents[3]
OCP = units.get("ocp-fp32").spec_for_formats("e4m3", "e4m3")
UA = MicroArch(lanes=8, stages=2)


class _Design:
    """The Backend protocol with the cycle model of ``design`` as the design and values checked
    as a foreign design's are (no trace-payload comparison): a design that computes another
    spec's arithmetic than the one verify holds it to."""
    mode, what, build_seconds = "cycle model", "nothing", None
    design, max_blocks, takes_c, backpressure = "stand-in", None, True, True

    def __init__(self, design):
        self.design_spec = design

    def build(self, spec, microarch, out_dir, *, fault=None):
        self.spec, self.ua = spec, microarch

    def run(self, vs, stimulus, *, name="run"):
        beats = cycle.beats_of(self.design_spec, vs)
        trace = cycle.run(cycle.UnitModel(self.design_spec, self.ua), beats, stimulus.gaps,
                          stimulus.ready)
        return Run(vs.num_dots, len(beats), trace.cycles, trace,
                   check(self.spec, self.ua, vs, trace, stimulus, timing=False), 0.0, 0.0)

    def with_waves(self):
        return None


def _verify(design, tmp_path, spec=OCP):
    return verify(spec, UA, dots=600, chunk=300, seed=1, out_dir=tmp_path,
                  backend=_Design(design), progress=False, conformance="ocp")


def test_conformance_a_design_more_accurate_than_the_spec_is_conformant(tmp_path):
    """Block results rounded toward zero and C added rounding up, against ocp-fp32's
    nearest-even: values differ, every one inside; the run goes on past the first chunk."""
    rep = _verify(replace(OCP, name="directed", acc_rounding="rz", c_rounding="ru"), tmp_path)
    assert rep.passed and rep.value_mismatches > 0 and rep.cycle_mismatches == 0
    assert rep.result in ("CONFORMANT", "CONFORMANT with holes")
    assert rep.dots == rep.conformance.results == rep.conformance.inside == 720
    assert rep.failing is None and {m.chunk for m in rep.mismatches} == {0, 1, 2}
    text = rep.format()
    assert "  conformance ocp: 720 of 720 results inside the OCP MX dot-product envelope (|r - " \
           "x| <= gamma_n*S + n*eta*(1 + gamma_n), u = 2^-23, eta = 2^-149 (fp32), n = 33, 65, " \
           "97 (K products and C))" in text
    assert f"(exact FAIL: {rep.value_mismatches:,} value mismatches against the spec, but " \
           f"every result inside the OCP MX dot-product envelope" in text
    d = json.loads(json.dumps(rep.to_dict()))
    assert d["passed"] and d["conformance"]["passed"] and d["conformance"]["listed"] == []
    assert (d["conformance"]["results"], d["conformance"]["terms"]) == (720, [33, 65, 97])


def test_conformance_a_coarse_design_fails_with_its_outside_results(tmp_path):
    rep = _verify(replace(OCP, name="coarse", frac_bits=4, acc_rounding="rz"), tmp_path)
    assert not rep.passed and rep.result == "FAIL" and rep.conformance.outside > 0
    first = rep.conformance.listed[0]
    assert first.chunk == 0 and first.why == "beyond the bound" and first.error_ulps > 1
    failing = vectors.load(rep.failing)
    assert first.dot in failing.extra["dots"]
    assert rep.replay.endswith(f" --conformance ocp --replay {rep.failing} --waves")
    assert "OUTSIDE the OCP MX dot-product envelope (first: dot " in rep.format()


def test_conformance_a_spec_outside_the_envelope_fails_its_own_design(tmp_path):
    coarse = replace(OCP, name="coarse", frac_bits=4, acc_rounding="rz")
    rep = _verify(coarse, tmp_path, spec=coarse)
    assert rep.value_mismatches == 0 and not rep.passed
    assert rep.format().splitlines()[-1].startswith(
        "  result      FAIL (exact PASS against the spec, but ")


def test_conformance_unknown_envelope_is_an_argparse_error(capsys):
    assert main(["verify", "--conformance", "ieee"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "mxsim verify: error: argument --conformance: invalid choice: 'ieee' (choose from "
        "'ocp') (see `mxsim verify --help`)"]


def test_conformance_goes_with_one_run_not_a_campaign(capsys):
    assert main(["verify", "--campaign", "--conformance", "ocp"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "mxsim: error: --campaign runs the documented unit of every pair; it takes " \
                  "no --conformance"


@pytest.mark.rtl
@pytest.mark.slow
def test_conformance_mx_fpu_against_ocp_fp32_is_conformant(tmp_path):
    """mx_fpu adds C and every product exactly, rounding once; ocp-fp32 rounds each block
    and then C + block: exact FAIL, CONFORMANT, exit 0."""
    ex = "examples/rtl/mx_fpu"
    p = subprocess.run([sys.executable, "-m", "mxsim", "verify", "--rtl", f"{ex}/mx_fpu.toml",
                        "--unit", "ocp-fp32", "--a-format", "e4m3", "--bulk", "--vectors",
                        "2000", "--out", str(tmp_path), "--conformance", "ocp", "--json"],
                       cwd=ROOT, capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["result"].startswith("CONFORMANT") and rep["value_mismatches"] > 0
    assert rep["conformance"]["inside"] == rep["conformance"]["results"] == rep["dots"]
