"""The library-GEMM device run (gpu/runs/library.py): what it plans to run, that its held-out
pairs are drawn by the stated seed and used by nothing else, and its CPU half (fit and
compare) on a folder whose outputs a plan wrote, as the GPU's would be."""

import json

import numpy as np

from gpu.runs import library
from mxsim.plans import Plan
from mxsim.plans.run import run


def test_the_run_covers_the_issue_table_heldout_torch_and_invariance():
    jobs = library._plan("s", 33_2026)
    groups = {g: [j for j in jobs if j["group"] == g] for g in
              ("table", "heldout", "torch", "invariance")}
    assert len(groups["table"]) == 30 and len(groups["heldout"]) == 30
    assert len(groups["torch"]) == 6 and len(groups["invariance"]) == 9
    shapes = {(j["gen"]["m"], j["gen"]["n"], j["gen"]["k"]) for j in groups["table"]}
    assert (1, 4096, 4096) in shapes and len(shapes) == 6
    inv = groups["invariance"]
    assert len({j["gen"]["seed"] for j in inv}) == 1       # the same first rows at every M
    assert len({j["gen"]["seed"] for j in jobs}) == len(jobs) - len(inv) + 1


def test_heldout_pairs_are_the_seeds_and_used_by_nothing_else():
    pairs = library.heldout_pairs(33_2026)
    assert pairs == library.heldout_pairs(33_2026) and len(pairs) == 30
    others = set(library.TABLE_SHAPES) | set(library.torch_shapes())
    for p in pairs:
        assert 1 <= p["m"] <= 8192 and 64 <= p["n"] <= 16384 and 64 <= p["k"] <= 16384
        assert (p["m"], p["n"], p["k"]) not in others
    assert len({p["call"] for p in pairs}) >= 3


def test_fit_half_on_a_folder_a_plan_wrote(tmp_path):
    plan = Plan(unit="hopper-mma-bf16", split=6, granule=64)
    folder = tmp_path / "library"
    (folder / "d").mkdir(parents=True)
    rec = {"kind": "result", "group": "table", "index": 0, "path": "cublas-bf16",
           "call": "mm", "out": "fp32", "bias": False,
           "gen": library._gen("bf16", 4, 8, 8192, 5), "d": "table-0.npy", "d_format": "fp32",
           "rows": 4, "record": {"call": "torch.mm(a, b, out_dtype=torch.float32) on bf16",
                                 "shape": [128, 128, 8192]}}
    np.save(folder / "d" / "table-0.npy", run(plan, library.generate(rec)))
    lines = [json.dumps({"kind": "header"}), json.dumps(rec)]
    (folder / "records.jsonl").write_text("\n".join(lines) + "\n")
    assert library.main(["fit", str(folder), "--max-split", "8"]) == 0
    row = json.loads((folder / "fits.jsonl").read_text())
    assert row["source"] == "record" and row["equal"] == row["outputs"] == 32
    assert row["fitted"]["split"] == 6


def test_engine_check_plans_are_valid_and_say_why_not_without_a_gpu():
    from mxsim.engine import gpu as gpu_engine
    from mxsim.plans import from_dict
    for _, _, fields in library.ENGINE_PLANS:
        from_dict(fields)
    if not gpu_engine.available():
        import pytest

        from mxsim.errors import MxsimError
        with pytest.raises((MxsimError, ImportError, RuntimeError)):
            library.engine_checks("s")


def test_invariance_sets_share_their_rows():
    """The invariance group draws one set at the largest M: every M's set is its first rows."""
    from gpu.runs.library import _plan, generate
    jobs = [j for j in _plan("salt", 1) if j["group"] == "invariance"]
    small, large = generate(jobs[1]), generate(jobs[-1])
    assert small.m == 2 and np.array_equal(small.a, large.a[:2]) and np.array_equal(
        small.b, large.b)


def test_the_h100_run_is_whole():
    """tests/data/h100_library_gemms: every result line has its outputs in its group's
    tarball, with the rows the line says and the shape's N."""
    import io
    import json
    import tarfile
    from pathlib import Path
    here = Path(__file__).resolve().parents[1] / "data" / "h100_library_gemms"
    lines = [json.loads(x) for x in (here / "records.jsonl").read_text().splitlines()]
    assert lines[0]["kind"] == "header" and lines[0]["salt"] == "s34-1796472724-fresh"
    results = [x for x in lines if x.get("kind") == "result"]
    assert len(results) == 73 and sum(x.get("kind") == "error" for x in lines) == 2
    assert all(x["record"]["device"]["gpu"] == "NVIDIA H100 80GB HBM3" for x in results)
    for group in ("table", "heldout", "torch", "invariance"):
        with tarfile.open(here / f"d-{group}.tar.gz") as tar:
            for x in (r for r in results if r["group"] == group):
                d = np.load(io.BytesIO(tar.extractfile(f"d/{x['d']}").read()))
                assert d.shape == (x["rows"], x["record"]["shape"][1]), x["d"]
    engine = [x for x in lines if x.get("kind") == "engine"]
    assert len(engine) == 10 and all(x["equal"] == x["outputs"] for x in engine)
