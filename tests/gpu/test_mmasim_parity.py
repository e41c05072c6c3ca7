"""MMA-Sim parity (gpu/peers/mmasim_parity.py): the committed table is the JSON's, the JSON lists
every
instruction MMA-Sim models, and a sample of every row agrees again here, fast engine and
reference alike.

``make test`` installs mmasim, so these run in CI; without it they skip.
"""

import json

import pytest

from mxsim import presets, vectors

pytest.importorskip("mmasim")
from gpu.peers import mmasim_ops, mmasim_parity  # noqa: E402

DATA = json.loads(mmasim_parity.JSON.read_text())
INSTRUCTIONS = mmasim_ops.instructions()


def test_parity_table_in_the_doc_is_the_json():
    assert mmasim_parity.write_doc(DATA, check=True)
    assert DATA["totals"] == mmasim_parity.totals(DATA["rows"])
    for row in DATA["rows"]:
        if row["preset"] is not None:
            for key in ("dots", "equal", "nan_bits"):
                assert row[key] == sum(f[key] for f in row["families"].values())


def test_parity_covers_every_instruction_mmasim_models():
    """One row per MMA-Sim instruction (N folded), each with a preset or the reason none."""
    assert [r["api"] + " " + r["arch"] + " " + r["instruction"] for r in DATA["rows"]] == \
        [i.key for i in INSTRUCTIONS]
    names = 0
    for row, ins in zip(DATA["rows"], INSTRUCTIONS, strict=True):
        assert (row["preset"], row["note"]) == (ins.preset, ins.note)
        assert row["preset"] is not None or row["note"]
        names += row["variants"]
    assert names == DATA["totals"]["names"] > 4000
    assert DATA["totals"]["mismatches"] == 0
    assert {r["arch"] for r in DATA["rows"]} >= {"Volta", "Turing", "Ampere", "Ada Lovelace",
                                                 "Hopper", "Blackwell", "RTX Blackwell",
                                                 "CDNA1", "CDNA2", "CDNA3"}


def test_parity_every_mmasim_preset_has_rows():
    """A preset whose provenance is MMA-Sim's model is computed against it somewhere."""
    run = {r["preset"] for r in DATA["rows"] if r["preset"] is not None}
    mine = {p.name for p in presets.PRESETS.values() if p.provenance.startswith("MMA-Sim")}
    assert mine <= run, mine - run
    assert run <= set(presets.PRESETS)


_RUN = [(i, ins) for i, ins in enumerate(INSTRUCTIONS) if ins.preset is not None]


def _short_k(ins) -> int:
    """K of a sample: a multiple of every preset's k (32), two instructions for k64."""
    return ins.k if ins.c_format != ins.d_format else max(32, 2 * ins.k)


@pytest.mark.parametrize("chunk", range(4))
def test_parity_sample_of_every_row_agrees_again(chunk):
    """A 4 x 4 sample of every row (its family turning with the row, so every family is
    run), through MMA-Sim and the fast engine; the first row of each preset also through
    the reference engine (one row of the sample)."""
    seen: set[str] = set()
    for i, ins in _RUN[chunk::4]:
        fams = mmasim_parity.families(ins)
        vs = None
        for j in range(len(fams)):
            vs = mmasim_parity.vector_set(ins, fams[(i + j) % len(fams)], 4, seed=7,
                                          k=_short_k(ins))
            if vs is not None:
                break
        got = mmasim_parity.compare(ins, vs)
        assert got["equal"] + got["nan_bits"] == got["dots"] == 16, ins.key
        if ins.preset not in seen:
            seen.add(ins.preset)
            ref = mmasim_parity.compare(ins, vs.subset(slice(0, 1)), engine="reference")
            assert ref["equal"] + ref["nan_bits"] == ref["dots"] == 4, ins.key


def test_parity_families_follow_the_formats():
    scaled = next(i for i in INSTRUCTIONS if i.scale_format is not None)
    plain = next(i for i in INSTRUCTIONS if i.preset == "hopper-mma-f16")
    assert mmasim_parity.families(scaled) == list(vectors.FAMILIES + vectors.EXTRA_FAMILIES)
    assert "nan-scale" not in mmasim_parity.families(plain)
    assert mmasim_parity.vector_set(plain, "nan-scale", 4, 0) is None
