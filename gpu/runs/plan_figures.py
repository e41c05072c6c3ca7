"""The figures of docs/plans.md and docs/gpu.md's library section, computed from committed
data: the three H200 library results and their fitted plans (replayed here), the plan table
and its rule's held-out score, the recovery study's record, the kernels the H200 ran by shape,
and the Llama-3-8B batch-invariance record.

    python -m gpu.runs.plan_figures                 # rewrite the marked spans
    python -m gpu.runs.plan_figures --check         # exit 1 when a doc differs
    python -m gpu.runs.plan_figures --invariance    # recompute docs/data/batch_invariance.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from mxsim import vectors
from mxsim.plans import load
from mxsim.plans.invariance import INVARIANCE_MS_DOC, LLAMA3_8B, OPERAND_FORMAT, batch_invariance
from mxsim.plans.run import run
from mxsim.plans.table import entries, held_out

from .figures import replace_spans

__all__ = ["figures", "render", "invariance_record", "DOCS", "INVARIANCE"]

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "docs" / "plans.md", ROOT / "docs" / "gpu.md")
INVARIANCE = ROOT / "docs" / "data" / "batch_invariance.json"
RECOVERY = ROOT / "tests" / "data" / "plan_recovery_20.json"
KERNELS = ROOT / "tests" / "data" / "h200_library_gemms" / "kernels_h200.json"
LIB = ROOT / "tests" / "data" / "h200_library_gemms"
MARK = re.compile(r"<!-- fig:(plans:[A-Za-z0-9_.:+/-]+) -->(.*?)<!-- /fig -->", re.DOTALL)


def _table(head: list[str], rows: list[list[Any]]) -> str:
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] +
                     ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def _fitted() -> str:
    rows = []
    for toml in sorted((ROOT / "tests" / "data" / "plans").glob("h200-*.toml")):
        name = toml.stem.removeprefix("h200-")
        plan = load(toml)
        vs = vectors.load(LIB / f"{name}.out.npz")
        equal = int((np.asarray(run(plan, vs)) == vs.d).sum())
        rows.append([f"`{name}.out.npz`", plan.call, plan.describe(),
                     f"{equal:,} of {vs.d.size:,}"])
    return _table(["result file", "call", "plan `mxsim fit --plan` found", "equal bits"], rows)


def _plan_table() -> str:
    rows = [[e.path, f"{e.m}×{e.n}×{e.k}", e.plan.describe(), e.evidence.split(", records")[0]
             .split(" of tests/")[0]] for e in entries()]
    return _table(["path", "M×N×K", "plan", "evidence"], rows)


def _held_out() -> str:
    rows = [[p, f"{r} of {of}" if of else "no shape to hold out"]
            for p, (r, of) in held_out().items()]
    return _table(["path", "nearest-shape rule right on recorded shapes held out"], rows)


def _recovery() -> str:
    rows = json.loads(RECOVERY.read_text())["trials"]
    fresh = sum(r["fresh_equal"] for r in rows)
    same = sum(r["identical"] for r in rows)
    return (f"{fresh} of {len(rows)} fitted plans equal the drawn ones on fresh inputs; "
            f"{same} of {len(rows)} are the same plan")


def _kernels() -> str:
    data = json.loads(KERNELS.read_text())
    rows = []
    for c in data["cases"]:
        names = [k.split("(")[0].removeprefix("void ") for k in c["kernels"]]
        names = [re.sub(r"<.*", "<…>", n) for n in names]
        split = "split-K" if any("splitK" in n for n in names) else "one kernel"
        rows.append([c["dtype"], f"{c['m']}×{c['n']}×{c['k']}", c["out"].removeprefix("torch."),
                     ", ".join(f"`{n}`" for n in names), split])
    return _table(["dtype", "M×N×K", "out", "kernels (torch profiler)", "kind"], rows)


#: The kernel records' dtypes as library paths.
_KERNEL_PATHS = {"bf16": "cublas-bf16", "fp16": "cublas-fp16", "tf32": "cublas-tf32",
                 "fp8fast": "cublas-fast", "fp8": "cublas"}


def _kernel_agreement() -> str:
    """Does the table's rule split K where the H200's kernel records saw split-K kernels, at
    the shapes the rule (not a record) answers?"""
    from mxsim.plans.table import lookup

    rows, agree, asked = [], 0, 0
    for c in json.loads(KERNELS.read_text())["cases"]:
        found = lookup(_KERNEL_PATHS[c["dtype"]], c["m"], c["n"], c["k"])
        if found.source != "rule":
            continue
        seen = any("splitK" in k for k in c["kernels"])
        said = len(found.plan.bounds(c["k"], 16)) > 1
        asked += 1
        agree += seen == said
        rows.append([_KERNEL_PATHS[c["dtype"]], f"{c['m']}×{c['n']}×{c['k']}",
                     "split-K" if seen else "one kernel", "split-K" if said else "one chain",
                     "yes" if seen == said else "**no**"])
    table = _table(["path", "M×N×K", "the H200 ran", "the rule says", "agree"], rows)
    return f"{table}\n\nThe rule agrees at {agree} of {asked} shapes."


def invariance_record() -> dict[str, Any]:
    """The Llama-3-8B batch-invariance table, every path, from plans alone."""
    out: dict[str, Any] = {"command": "python -m gpu.runs.plan_figures --invariance",
                           "ms": list(INVARIANCE_MS_DOC), "rows": 4, "cols": 64, "seed": 0,
                           "paths": {}}
    for path in OPERAND_FORMAT:
        out["paths"][path] = {name: [r.to_dict() for r in batch_invariance(
            path, n, k, list(INVARIANCE_MS_DOC))] for name, (n, k) in LLAMA3_8B.items()}
    return out


def _invariance() -> str:
    rec = json.loads(INVARIANCE.read_text())
    ms = rec["ms"]
    blocks = []
    for path, layers in rec["paths"].items():
        rows = []
        for name, rs in layers.items():
            n, k = LLAMA3_8B[name]
            cells = []
            for r in rs:
                cell = "=" if r["differ"] == 0 else \
                    f"{r['differ']}/{r['outputs']}, {r['median_ulp']:g}"
                cells.append(cell + ("" if r["source"] == "record" else "ᵣ"))
            rows.append([f"{name} ({n}×{k})"] + cells)
        blocks.append(f"**{path}**\n\n" + _table(["layer (N×K)"] + [f"M={m}" for m in ms],
                                                 rows))
    return "\n\n".join(blocks)


def figures() -> dict[str, str]:
    return {"plans:fitted": _fitted(), "plans:table": _plan_table(),
            "plans:held-out": _held_out(), "plans:recovery": _recovery(),
            "plans:kernels": _kernels(), "plans:invariance": _invariance(),
            "plans:kernel-agreement": _kernel_agreement()}


def render(text: str, figs: dict[str, str]) -> tuple[str, list[str]]:
    """``text`` with every ``plans:`` span replaced; and the keys whose text changed."""
    return replace_spans(text, MARK, figs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpu.runs.plan_figures",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--invariance", action="store_true",
                    help="recompute docs/data/batch_invariance.json first (a minute or two)")
    args = ap.parse_args(argv)
    if args.invariance:
        INVARIANCE.write_text(json.dumps(invariance_record(), indent=1) + "\n")
        print(f"wrote {INVARIANCE}")
    figs = figures()
    bad = 0
    for doc in DOCS:
        text = doc.read_text()
        new, changed = render(text, figs)
        if args.check:
            if changed:
                print(f"{doc}: figures differ from the data: {', '.join(changed)}; rewrite "
                      f"with `python -m gpu.runs.plan_figures`", file=sys.stderr)
                bad += 1
        elif new != text:
            doc.write_text(new)
            print(f"{doc}: rewrote {', '.join(changed)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
