"""The Blackwell probe suite: every two hypotheses disagree on some probe, and fit picks the one
that produced the outputs.

Outputs "from the GPU" are made here with each hypothesis' spec (the fast engine); the suite is
useful only if `mxsim fit` can tell every hypothesis from every other on its vectors.
"""

import itertools

import numpy as np
import pytest

from gpu.paths import for_set
from mxsim import vectors
from mxsim.cli import main
from mxsim.engine import fast
from mxsim.errors import MxsimError
from mxsim.probe import blackwell as bw
from mxsim.probe.fit import default_k, fit, hypotheses_of

#: One instruction per distinct vector set (the sm120 twins of the tcgen05 ones get the same
#: codes, checked below); the legacy mma.sync shares f8f6f4's codes with other hypotheses.
DISTINCT = ["tcgen05-f8f6f4", "tcgen05-mxf8f6f4", "tcgen05-mxf4", "tcgen05-mxf4nvf4",
            "tcgen05-mxf4nvf4-ue8m0", "sm100-mma-sync-f8-legacy"]


@pytest.fixture(scope="module")
def suites():
    return {name: bw.blackwell_suite(name) for name in DISTINCT}


@pytest.mark.parametrize("name", DISTINCT)
def test_every_pair_of_hypotheses_disagrees_on_some_probe(name, suites):
    vs = suites[name]
    hyps = bw.hypotheses(name)
    assert len(hyps) >= 13 and next(iter(hyps)).startswith("model (blackwell-")
    outs = {h: fast.dot(spec, vs).reshape(-1) for h, spec in hyps.items()}
    same = [(x, y) for x, y in itertools.combinations(outs, 2)
            if np.array_equal(outs[x], outs[y])]
    assert same == []
    # ...on many dots, not one that a single flaky output could fake
    assert min(int((outs[x] != outs[y]).sum())
               for x, y in itertools.combinations(outs, 2)) >= 20


def test_hypothesis_sets_cover_the_open_questions():
    mx = bw.hypotheses("tcgen05-mxf8f6f4")
    for name in ("F=13", "F=23", "F=24", "F=26", "F=35", "F=exact", "RNE", "C after",
                 "e_zero=-127", "e_zero=-139", "groups of 8", "groups of 16", "groups of 32",
                 "NaN scales as numbers"):
        assert name in mx, name
    fp4 = bw.hypotheses("tcgen05-mxf4")
    model = fp4["model (blackwell-mxf4)"]
    assert (model.group, model.frac_bits, model.e_zero) == (16, 35, -139)
    assert {"F=25", "F=exact", "groups of 8", "groups of 32", "scales folded into products",
            "e_zero=-133"} <= set(fp4)
    # UE4M3 scales stop at 2**-9: no product can fall below any e_zero, so none is offered
    assert not any(n.startswith("e_zero") for n in bw.hypotheses("tcgen05-mxf4nvf4"))


@pytest.mark.parametrize("name", DISTINCT)
def test_the_set_carries_its_hypotheses_for_fit(name, suites, tmp_path):
    # fit reads the hypotheses from the file's meta (it cannot import the probe module): the
    # specs that come back through save/load are the very specs the separation test ran.
    vectors.save(suites[name], tmp_path / "p.npz")
    vs = vectors.load(tmp_path / "p.npz")
    assert default_k(vs) == bw.INSTRUCTIONS[name].k
    assert hypotheses_of(vs, default_k(vs)) == bw.hypotheses(name)
    assert hypotheses_of(vs, 16) == {}


@pytest.mark.parametrize("name, truth", [("tcgen05-f8f6f4", "C after"),
                                         ("tcgen05-mxf8f6f4", "e_zero=-139")])
def test_fit_recovers_a_hypothesis_end_to_end(name, truth, suites):
    vs = suites[name]
    spec = bw.hypotheses(name)[truth]
    observed = vs.with_result(fast.dot(spec, vs), producer="test")
    result = fit(observed, k=default_k(observed))
    assert result.exact and result.picked == [truth]
    np.testing.assert_array_equal(fast.dot(result.spec, observed), observed.d)
    assert f"{truth} reproduce(s) every output" in result.report()


def test_sm120_sets_equal_their_tcgen05_twins_and_name_their_paths(suites):
    for name, ins in bw.INSTRUCTIONS.items():
        if name.startswith("sm120-"):
            twin = bw.blackwell_suite(name)
            ref = suites["tcgen05-" + name[len("sm120-"):]]
            assert twin.inputs_equal(ref)
            assert twin.extra["gpu_path"] == ins.gpu_path == "mma-sync-" + \
                name[len("sm120-"):].removesuffix("-ue8m0")
            assert twin.extra["arch"] == "sm_120a"
    for name in DISTINCT:
        vs = suites[name]
        assert for_set(vs).name == vs.extra["gpu_path"] == bw.INSTRUCTIONS[name].gpu_path
        if vs.extra["gpu_path"] != "mma-sync":            # the Blackwell runners pack it
            assert for_set(vs).pack(vs)["variant"].k == vs.extra["instruction_k"]
    with pytest.raises(MxsimError, match="built for GPU path tcgen05-mxf4.*leave --path out"):
        for_set(suites["tcgen05-mxf4"], "mma-sync-mxf4")


def test_cli_probe_run_fit_round_trip(tmp_path, capsys, suites):
    assert main(["probe", "--kind", "blackwell", "--instruction", "sm120-mxf8f6f4",
                 "-o", str(tmp_path / "probes")]) == 0
    assert "mxsim gpu run" in capsys.readouterr().out
    vs = vectors.load(tmp_path / "probes" / "sm120-mxf8f6f4.npz")
    assert vs.inputs_equal(suites["tcgen05-mxf8f6f4"])
    # what the GPU would send back: here, the published model's outputs
    spec = bw.hypotheses("sm120-mxf8f6f4")["model (blackwell-mxf8f6f4)"]
    vectors.save(vs.with_result(fast.dot(spec, vs), producer="gpu (simulated)"),
                 tmp_path / "out.npz")
    code = main(["fit", str(tmp_path / "out.npz"), "-o", str(tmp_path / "fitted.toml")])
    out = capsys.readouterr().out
    assert code == 0 and "model (blackwell-mxf8f6f4) reproduce(s) every output" in out
    assert main(["probe", "--kind", "blackwell", "--instruction", "sm130-x",
                 "-o", str(tmp_path / "p2")]) == 2
    assert "Blackwell instruction must be one of" in capsys.readouterr().err
