"""``[probes]``: internal signals of a foreign design sampled in a run, and the first model node
a failing dot product goes wrong at (issue 35, item 2).

nrm_tree (examples/rtl/nrm_tree) built with NRM_TREE_NODE_BUG: its level-1 adder of blocks 2
and 3 drops the last of its 12 significant bits. Through the bulk C++ harness and through
cocotb, with its map's probes (the four block terms, both level-1 adders, the level-2 adder)
the localisation names i0.L1.n1 with both values (one ulp apart) and its inputs (which the
design holds right); with probes off it says which nearby computations the result is
consistent with, and each is checked by running the model that way. The correct design's
probes equal the model's nodes on 288 dot products in both harnesses. A malformed probe is one
line naming the map's line, exit 2, before anything is simulated. One build per design,
harness and probes setting for the module, at -O0 (``quick_cxx``).
"""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import one_line, run

from mxsim import spec as specs
from mxsim import vectors
from mxsim.engine import explain as explaining
from mxsim.engine import fast

pytestmark = [pytest.mark.rtl, pytest.mark.slow, pytest.mark.usefixtures("quick_cxx")]
pytest.importorskip("cocotb")

from testbenches.foreign import portmap  # noqa: E402
from testbenches.foreign.backend import ForeignBackend, design_key  # noqa: E402
from testbenches.foreign.bulk import ForeignBulkBackend  # noqa: E402
from testbenches.foreign.localise import exact_value, format_localised, localise  # noqa: E402
from testbenches.foreign.probing import read_probes, write_probes  # noqa: E402
from testbenches.sim.backend import MismatchKind, Stimulus  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
NRM = ROOT / "examples" / "rtl" / "nrm_tree"
SPEC = specs.load(NRM / "nrm_tree_spec.toml")
#: the probed nodes of nrm_tree's maps, in the order the engine computes them
NODES = ["i0.g0", "i0.g8", "i0.g16", "i0.g24", "i0.L1.n0", "i0.L1.n1", "i0.L2.n0"]


def _set(m: int, seed: int, families: tuple[str, ...] = ("uniform", "normal", "cancellation")):
    """An in-domain set of nrm_tree's shape (E4M3, blocks of 8, no C), a batch per family."""
    vs = vectors.generate_suite(list(families), a_format="e4m3", m=m,
                                n=m, k=32, scale_format="e8m0", block=8, seed=seed)
    return portmap.load(NRM / "nrm_tree.toml").domain.constrain(vs, seed).replace(c=None)


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("probes")


def _run(backend, out: Path, vs, seed: int = 3):
    backend.build(SPEC, None, out)
    return backend.run(vs, Stimulus.random(seed, valid_p=0.7, ready_p=1.0))


@pytest.fixture(scope="module", params=["bulk", "cocotb"])
def node_bug(request, out):
    """The node-bug build with its probes, through either harness: (map, vectors, run)."""
    pm = portmap.load(NRM / "nrm_tree_node_bug.toml")
    backend = ForeignBulkBackend(pm) if request.param == "bulk" else ForeignBackend(pm)
    vs = _set(14, 5)
    return pm, vs, _run(backend, out / request.param, vs)


def _failing(run) -> list[int]:
    return [m.dot for m in run.mismatches if m.kind is MismatchKind.VALUE and m.dot is not None]


def test_node_bug_is_localised_to_its_node(node_bug):
    pm, vs, got = node_bug
    assert set(got.probes) == {"t0", "t1", "t2", "t3", "u0", "u1", "d"}
    assert all(len(s) == vs.num_dots for s in got.probes.values())
    failing = _failing(got)
    assert failing and not any(m.kind is MismatchKind.CYCLE for m in got.mismatches)
    found = localise(pm, SPEC, vs, got, failing[:6])
    for f in found:
        nodes = {n.name: n for n in explaining.explain(SPEC, vs, f["dot"]).nodes}
        assert (f["node"], f["probe"]) == ("i0.L1.n1", "u1"), f
        assert f["agree"] == NODES[:5]                      # every node before it is right
        model = exact_value(nodes["i0.L1.n1"].value)
        assert exact_value(f["model"].split(" ")[0]) == model
        # the design dropped the last of 12 significant bits: one ulp towards zero
        design = exact_value(f["design"].split(" ")[0])
        ulp = Fraction(2) ** (abs(model).numerator.bit_length()
                              - abs(model).denominator.bit_length() - 11)
        if abs(model) < Fraction(2) ** (abs(model).numerator.bit_length()
                                        - abs(model).denominator.bit_length()):
            ulp /= 2
        assert abs(model) - abs(design) == ulp and design * model > 0
        assert [x["name"] for x in f["inputs"]] == ["i0.g16", "i0.g24"]
        for x in f["inputs"]:
            assert exact_value(x["value"].split(" ")[0]) == exact_value(nodes[x["name"]].value)
            assert x["design"] == x["value"]                # probed, and the design agrees
    text = format_localised(found[:1])
    assert text.startswith(f"dot {found[0]['dot']}: the first wrong node is i0.L1.n1 (probe "
                           f"u1): the design holds ")
    assert "its inputs: i0.g16 = " in text and "(probed: the design agrees)" in text


def test_without_probes_the_result_is_explained_by_what_reproduces_it(out):
    pm = portmap.load(NRM / "nrm_tree_node_bug.toml")
    backend = ForeignBulkBackend(pm, probes=False)
    vs = _set(14, 5)
    got = _run(backend, out / "off", vs)
    # probes off: the model and harness of a map without [probes], nothing sampled
    assert got.probes == {}
    assert backend.executable.parent.name == (
        f"foreign-bulk-nrm_tree-{design_key(pm, pm.parameters(SPEC), 'bulk')}")
    assert not (backend.executable.parent / "probes.vlt").exists()
    failing = _failing(got)
    found = localise(pm, SPEC, vs, got, failing[:8])
    seen = 0
    for f in found:
        assert f["node"] is None and f["agree"] == []
        observed = int(f["result"]["design"], 16)
        assert observed == int(got.results.take(np.array([f["dot"]])).fp32_codes()[0])
        assert observed != int(f["result"]["model"], 16)
        # whatever it says is true: each hypothesis's computation gives the design's code
        one = vs.take_dots([f["dot"]])
        made = {h.what: (s, v) for h, s, v in explaining._hypotheses(SPEC, one)}
        for h in f["consistent"]:
            assert _reproduces(h, one, made) == observed, h
            seen += 1
    assert "is consistent with" in format_localised(found)
    assert seen, "no failing dot had a nearby computation to check"


def _reproduces(h: dict, one, made: dict) -> int:
    """The code the computation of hypothesis ``h`` (a dict of explain's) gives for ``one``:
    inputs or spec changed (the engine's own list of them), or one node computed otherwise
    (the reference engine told which)."""
    from mxsim.engine import reference
    from mxsim.engine.reference import trace
    if h["kind"] == "node":
        change = {k: v for k, v in h["changes"].items() if k != "node"}
        with trace.recording({h["changes"]["node"]: change}):
            return int(reference.dot(SPEC, one).reshape(-1)[0])
    s, v = made[h["what"]]
    return int(fast.dot(s, v).reshape(-1)[0])


@pytest.mark.parametrize("harness", ["bulk", "cocotb"])
def test_correct_designs_probes_equal_the_models_nodes(out, harness):
    pm = portmap.load(NRM / "nrm_tree_probes.toml")
    backend = ForeignBulkBackend(pm) if harness == "bulk" else ForeignBackend(pm)
    vs = _set(12, 7, ("uniform", "normal"))
    got = _run(backend, out / f"ok-{harness}", vs, seed=9)
    assert got.passed, got.mismatches[:3]
    found = localise(pm, SPEC, vs, got, list(range(vs.num_dots)))
    assert len(found) == vs.num_dots == 288
    for f in found:
        assert f["node"] is None and f["agree"] == NODES and f["missing"] == [], f
        assert f["result"]["design"] == f["result"]["model"] and f["consistent"] == []


BAD = [
    ('signal = "s1_u1"', 'signal = "s1_u9"', "probes.u1.signal: 's1_u9': nrm_tree has no "
     "signal 's1_u9' (close: s1_u1"),
    ('signal = "s1_t[3]"', 'signal = "s1_t[4]"', "s1_t is an unpacked array of elements 0..3"),
    ('valid = "v1"\nencoding = { kind = "fixed", mantissa = { bits = [49, 10], sign_magnitude = '
     'true }, exponent = { bits = [9, 0], signed = true } }\n\n[probes.u1]',
     'valid = "s1_u0"\nencoding = { kind = "fixed", mantissa = { bits = [49, 10], '
     'sign_magnitude = true }, exponent = { bits = [9, 0], signed = true } }\n\n[probes.u1]',
     "probes.u0.valid: signal 's1_u0' has 50 bits; a strobe has 1"),
    ('node = "L1.n1"', 'node = "L1.n9"', "probes.u1.node 'L1.n9' is not a node of unit "
     "'nrm-tree'; its nodes: scale0, g0"),
    ('node = "L1.n1"', 'node = "tree1"', "probes.u1.node 'tree1' is not a node of the model"),
    ('node = "L1.n1"', 'node = "i0.L1.n1"', "names an instruction; write it as within one "
     "('L1.n1')"),
    ('node = "L1.n1"', 'node = "L1.n0"', "probes.u1 and probes.u0 both hold node L1.n0"),
    ('node = "L2.n0"\nvalid = "v1"\nencoding = { kind = "fixed"',
     'node = "L2.n0"\nvalid = "v1"\nencoding = { kind = "fixd"',
     "probes.d.encoding.kind must be one of fixed, float, not 'fixd'"),
    ('node = "L2.n0"\nvalid = "v1"\nencoding = { kind = "fixed", mantissa = { bits = [49, 10]',
     'node = "L2.n0"\nvalid = "v1"\nencoding = { kind = "fixed", mantissa = { bits = [59, 10]',
     "probes.d: signal 's2_d' has 50 bits ([49, 0]), the encoding uses bit 59"),
]


@pytest.mark.parametrize("old,new,text", BAD, ids=["signal", "index", "strobe", "node-unit",
                                                   "node-name", "node-prefix", "node-twice",
                                                   "kind", "bits"])
def test_a_malformed_probe_is_one_line_and_exit_2(capsys, tmp_path, old, new, text):
    src = (NRM / "nrm_tree_probes.toml").read_text()
    assert old in src
    (tmp_path / "nrm_tree.sv").write_text((NRM / "nrm_tree.sv").read_text())
    bad = tmp_path / "bad.toml"
    bad.write_text(src.replace(old, new, 1))
    rc, stdout, err = run(capsys, "verify", "--rtl", bad, "--unit", NRM / "nrm_tree_spec.toml",
                          "--bulk", "--vectors", "100", "--out", tmp_path / "out")
    assert rc == 2, err
    one_line(err, text)
    # the line named is in the table of the probe the message names first
    named = int(err.split(f"{bad}:", 1)[1].split(":", 1)[0])
    probe = re.search(r"probes\.(\w+)", err).group(1)
    lines = bad.read_text().splitlines()
    header = lines.index(f"[probes.{probe}]") + 1
    assert header <= named <= header + 4, (named, header)
    assert not list((tmp_path / "out").glob("**/*.stim"))      # nothing simulated


def test_probe_values_and_the_probes_file(tmp_path):
    from testbenches.foreign.portmap.probes import Probe, ProbeField
    fixed = Probe("a", "g0", "x", "v", "fixed", ProbeField("x", None, True), lsb=-4)
    assert fixed.value({"x": 0b1111_1101}, {"x": 8}) == Fraction(-3, 16)
    sm = Probe("b", "g0", "x", "v", "fixed", ProbeField("x", (9, 4), True, True),
               ProbeField("y", (2, 0), True), lsb=-1)
    assert sm.value({"x": 0b100011 << 4, "y": 0b110}, {"x": 10, "y": 3}) == Fraction(-3, 8)
    fp = Probe("c", "to_d", "z", "v", "float", ProbeField("z", (31, 0)), format="fp32")
    assert fp.value({"z": 0xC0400000}, {"z": 32}) == -3
    assert fp.value({"z": 0x7FC00000}, {"z": 32}) == "nan"
    assert fp.value({"z": 0xFF800000}, {"z": 32}) == "-inf"
    chans = [(50, np.arange(6, dtype=np.uint32).reshape(3, 2)), (1, np.zeros((0, 1), np.uint32))]
    write_probes(tmp_path / "p.bin", chans)
    back = read_probes(tmp_path / "p.bin", 2)
    assert [b for b, _ in back] == [50, 1]
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(chans, back, strict=True))
