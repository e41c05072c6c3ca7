"""K&M conformance: every committed K&M set replayed through the preset named for it, bit for
bit, and docs/conformance.md's figures equal to the ones computed from the data."""

import json
import re

import numpy as np
import pytest

from gpu.peers import conformance
from gpu.peers.km_import import DATA
from mxsim import units, vectors

SETS = conformance.sets()
#: Every GPU x operand format x output of the K&M data (the d files its folders hold).
EXPECTED = {
    *(f"{g}_fp16_{o}" for g in conformance.GPUS for o in ("fp32", "fp16")),
    *(f"{g}_{f}_fp32" for g in conformance.GPUS if g != "V100" for f in ("bf16", "tf32")),
    *(f"{g}_{f}_{o}" for g in ("Ada", "H100", "H200", "B200") for f in ("e4m3", "e5m2")
      for o in ("fp32", "fp16")),
    *(f"L40S_{f}_fp32" for f in ("e4m3", "e5m2")),
}


def test_every_gpu_format_output_is_committed():
    assert {p.stem for p in SETS} == EXPECTED


def test_every_set_carries_its_provenance():
    for path in SETS:
        vs = vectors.load(path)
        meta = vs.extra
        gpu, fmt, out = path.stem.split("_")
        assert vs.producer == f"K&M MATLAB-tensor-core model_validation, {gpu}"
        assert (meta["gpu"], vs.a_format, vs.d_format) == (gpu, fmt, out)
        assert meta["source"]["repository"].endswith("north-numerical-computing/"
                                                     "MATLAB-tensor-core")
        assert meta["source"]["commit"] == "b12b5a700957655375a1b0c1d0c26e76065da015"
        files = meta["source"]["files"]
        assert any(p.endswith(f"/d_{gpu}_{out}.txt") for p in files)
        assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in files.values())
        assert meta["rows"] == vs.num_dots and vs.k == meta["padded_to"]
        assert meta["instruction"] and meta["converted_inexact"] == 0


def test_every_row_reproduced_by_its_preset_and_the_doc_says_so():
    rows = conformance.rows()
    assert len(rows) == len(EXPECTED)
    for r in rows:
        assert r.mismatches == 0, r
    assert sum(r.dots for r in rows) >= 100_000
    text = conformance.DOC.read_text(encoding="utf-8")
    new, changed = conformance.render(text, conformance.figures())
    assert changed == [], f"docs/conformance.md is stale in {changed}: run python -m " \
                          f"gpu.peers.conformance"
    assert "<!-- fig:mmasim-parity -->" in text       # the other script's span, left alone


def test_check_exits_1_when_the_doc_differs(tmp_path, monkeypatch, capsys):
    doc = tmp_path / "conformance.md"
    text = conformance.DOC.read_text(encoding="utf-8")
    doc.write_text(text.replace("<!-- fig:km-mismatches -->0<", "<!-- fig:km-mismatches -->7<"),
                   encoding="utf-8")
    monkeypatch.setattr(conformance, "DOC", doc)
    monkeypatch.setattr(conformance, "ROOT", tmp_path)
    # The figures as the committed doc has them (the test above checks they are the data's):
    # this test is about --check and the rewrite, not the replay.
    spans = {m.group(1): m.group(2).strip("\n") for m in conformance.MARK.finditer(text)}
    monkeypatch.setattr(conformance, "figures", lambda: spans)
    assert conformance.main(["--check"]) == 1
    assert "km-mismatches" in capsys.readouterr().err
    assert conformance.main([]) == 0 and doc.read_text(encoding="utf-8") == text
    assert conformance.main(["--check"]) == 0


def test_evidence_separates_the_fp8_instructions():
    """The rival FP8 presets each miss where the table's preset does not (the doc's claims)."""
    lines = [line for line in conformance.evidence().splitlines()[2:]]
    cells = {line.split(" | ")[0].strip("| ").split(" (")[0]: line.split(" | ")[1:]
             for line in lines}
    num = [[int(x.strip(" |").replace(",", "") or -1) for x in row] for row in cells.values()]
    table = dict(zip(cells, num, strict=True))
    assert table["H200 e4m3 fp32"][0] == 0 and min(table["H200 e4m3 fp32"][4:]) > 0
    assert table["B200 e4m3 fp32"][1] == 0 and table["B200 e4m3 fp32"][3] > 0
    assert table["Ada e4m3 fp32"][2] == 0 and table["Ada e4m3 fp32"][0] > 0


@pytest.mark.parametrize("path", SETS, ids=[p.stem for p in SETS])
def test_reference_engine_on_a_sample(path):
    """The reference engine, one dot a batch entry as imported, on the first dots."""
    vs = vectors.load(path)
    head = vs.replace(a=vs.a[:3], b=vs.b[:3], c=vs.c[:3], d=vs.d[:3])
    name = conformance.PRESET[tuple(path.stem.split("_"))]
    ref = units.get(name).compute(head, engine="reference").reshape(-1)
    assert np.array_equal(ref, head.d.reshape(-1))


def test_fit_spans_are_what_the_fit_record_renders():
    """docs/conformance.md's km-fit spans equal docs/data/km_fits.json rendered, and the
    record covers every committed set."""
    record = conformance.fits()
    assert record is not None and set(record["sets"]) == EXPECTED
    spans = {m.group(1): m.group(2).strip("\n")
             for m in conformance.MARK.finditer(conformance.DOC.read_text(encoding="utf-8"))}
    figs = conformance.fit_figures(record)
    assert {k for k in spans if k.startswith("km-fit")} == set(figs)
    for key, text in figs.items():
        assert spans[key] == text, f"docs/conformance.md's {key} is stale: run python -m " \
                                   f"gpu.peers.conformance"
    for stem, e in record["sets"].items():
        assert e["preset"] == conformance.PRESET[tuple(stem.split("_"))]
        assert e["same_as_preset"] == (e["outputs_unlike_preset"] == 0)


def test_one_real_fit_equals_its_record():
    """mxsim fit, blind, on one committed set (V100 fp16 fp32, its first 1,000 dots as the
    record's --rows says, some seconds): the same spec, counts and unseparated values as
    docs/data/km_fits.json records."""
    stem = "V100_fp16_fp32"
    record = conformance.fits()
    assert record["rows"] == 1000
    entry = json.loads(json.dumps(conformance.fit_set(DATA / f"{stem}.npz", record["rows"])))
    recorded = dict(conformance.fits()["sets"][stem])
    entry.pop("seconds"), recorded.pop("seconds")
    assert entry == recorded
    assert entry["reproduced"] == entry["total"] == 1000 and entry["same_as_preset"]
    assert "e_zero" in entry["unseparated"]
