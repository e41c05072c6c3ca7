"""``mxsim verify --rtl``'s report says where a failing dot goes wrong (issue 35): nrm_tree's
node-bug build (its level-1 adder U1, the model's L1.n1, drops its last bit), through the bulk
harness and cocotb, with its map's probes (the report names i0.L1.n1, both values, its inputs)
and with --no-probes (the report names what each failing result is consistent with, and the
one hypothesis every explained dot shares: that node one unit in its last place smaller)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_helpers import one_line, run

pytestmark = [pytest.mark.rtl, pytest.mark.slow, pytest.mark.usefixtures("quick_cxx")]
pytest.importorskip("cocotb")

ROOT = Path(__file__).resolve().parents[3]
NRM = ROOT / "examples" / "rtl" / "nrm_tree"
SHARED = "tree node L1.n1 one unit in its last place smaller in magnitude"


@pytest.mark.parametrize("harness", ["bulk", "cocotb"])
@pytest.mark.parametrize("probes", [True, False], ids=["probes", "no-probes"])
def test_the_report_names_the_wrong_node(capsys, tmp_path_factory, harness, probes):
    out = tmp_path_factory.mktemp(f"{harness}-{probes}")
    args = ["verify", "--rtl", NRM / "nrm_tree_node_bug.toml", "--unit",
            NRM / "nrm_tree_spec.toml", "--vectors", "400", "--chunk", "200", "--out", out,
            *(["--bulk"] if harness == "bulk" else []),
            *([] if probes else ["--no-probes"])]
    rc, text, _ = run(capsys, *args)
    assert rc == 1, text
    rep = json.loads(next(out.glob("report-*.json")).read_text())
    found = rep["localised"]
    assert 1 <= len(found) <= 5 and "  localised   dot " in text
    # the first localised dot's intermediates, in the JSON (every node) and the text (the tree)
    nodes = rep["intermediates"]["nodes"]
    assert rep["intermediates"]["dot"] == found[0]["dot"] and nodes[-1]["op"] == "result"
    assert {"i0.L1.n0", "i0.L1.n1", "i0.L2.n0"} <= {n["name"] for n in nodes}
    assert "  model       dot " in text and "i0.L1.n1    tree" in text
    classes = rep["census"]["classes"]
    assert classes and all(c["bins"].get("output_class") for c in classes), classes
    assert sum(sum(c["bins"]["output_class"].values()) == c["kept_dots"] for c in classes)
    if probes:
        # the census: every localised dot of every class goes wrong first at i0.L1.n1
        for c in classes:
            assert set(c["first_wrong_node"]) == {"i0.L1.n1"}, c
            assert 1 <= c["first_wrong_node"]["i0.L1.n1"] <= min(c["count"], 32)
        for f in found:
            assert f["node"] == "i0.L1.n1" and f["probe"] == "u1", f
            assert {x["name"] for x in f["inputs"]} == {"i0.g16", "i0.g24"}
            assert f["model"] != f["design"]
        assert "the first wrong node is i0.L1.n1 (probe u1)" in text
    else:
        assert all(not c["first_wrong_node"] for c in classes)
        assert all(f["node"] is None and f["consistent"] for f in found)
        if len(found) > 1:
            assert "every dot explained is consistent with: " in text and SHARED in text


def test_no_probes_needs_a_map(capsys, tmp_path):
    rc, _, err = run(capsys, "verify", "--unit", "hopper-wgmma", "--no-probes", "--out",
                     tmp_path)
    assert rc == 2
    one_line(err, "--no-probes leaves a port map's [probes] unread")


DOC = ROOT / "docs" / "foreign-rtl.md"


def _walkthrough() -> str:
    text = DOC.read_text()
    return text[text.index("## 10. From FAIL"):text.index("## Port map reference")]


def test_the_walkthrough_shows_what_verify_prints(capsys, tmp_path_factory):
    """docs/foreign-rtl.md section 10 (and section 8's probed line): the census counts, the
    shrunk set, the localised dots with both codes and the shared hypothesis are what the
    documented commands print (2,000 vectors, seed 0, bulk)."""
    doc = _walkthrough()
    base = ["verify", "--rtl", NRM / "nrm_tree_node_bug.toml", "--unit",
            NRM / "nrm_tree_spec.toml", "--bulk", "--vectors", "2000"]
    rc, text, _ = run(capsys, *base, "--no-probes", "--out", tmp_path_factory.mktemp("w0"))
    assert rc == 1
    counts = re.findall(r"^    (\d[\d,]*)  (finite off by [^(]+) \(e4m3 x e4m3, value\)$", doc,
                        re.M)
    assert len(counts) == 4
    for n, name in counts:
        assert f"    {n}  {name} (e4m3 x e4m3, value)\n" in text, (n, name)
    assert "(1 dot, shrunk: 30 of 32 element pairs zeroed; shows the class alone)" in text
    dots = re.findall(r"dot (\d+): the design's result (0x[0-9a-f]+) \(the model's "
                      r"(0x[0-9a-f]+)\)", doc)
    assert len(dots) == 3
    for dot, design, model in dots:
        assert f"dot {dot}: the design's result {design} (the model's {model})" in text
    shared = re.search(r"^ +(every dot explained is consistent with: .*)$", doc, re.M).group(1)
    assert shared in text
    rc, text, _ = run(capsys, *base, "--out", tmp_path_factory.mktemp("w1"))
    assert rc == 1
    section8 = DOC.read_text().split("## 8. Probes")[1].split("## 9.")[0]
    probed = re.search(r"localised   (dot 3: the first wrong node is .*)$", section8,
                       re.M).group(1)
    assert probed in text
