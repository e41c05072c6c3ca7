"""docs/plans.md's and docs/gpu.md's plan figures equal what the committed data give
(python -m gpu.runs.plan_figures), and the batch-invariance record is what the plans compute
(one path's layer recomputed here; the whole record: --invariance, half a minute)."""

import json

from gpu.runs import plan_figures
from mxsim.plans.invariance import LLAMA3_8B, batch_invariance


def test_docs_hold_the_computed_figures():
    figs = plan_figures.figures()
    for doc in plan_figures.DOCS:
        _, changed = plan_figures.render(doc.read_text(), figs)
        assert not changed, f"{doc}: rerun python -m gpu.runs.plan_figures ({changed})"


def test_invariance_record_is_what_the_plans_compute():
    rec = json.loads(plan_figures.INVARIANCE.read_text())
    assert rec["ms"] == [1, 2, 3, 8, 17, 33, 128, 257, 1024]
    assert set(rec["paths"]) == {"cublas", "cublas-fast", "cublas-fp16", "cublas-bf16",
                                 "cublas-tf32"}
    name = "k_proj, v_proj"
    n, k = LLAMA3_8B[name]
    rows = batch_invariance("cublas-bf16", n, k, rec["ms"], rows=rec["rows"], cols=rec["cols"],
                            seed=rec["seed"])
    assert [r.to_dict() for r in rows] == rec["paths"]["cublas-bf16"][name]
