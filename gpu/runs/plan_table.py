"""The H200 plan table (``mxsim/plans/data/h200.json``), computed from committed records.

Entries come from two kinds of evidence, both committed under ``tests/data/``:

- validation runs (``tests/data/h200/<run>/records.jsonl.gz``) of a library path (``cublas``,
  ``cublas-fast``, ``cublas-{fp16,bf16,tf32}``) at a shape where every set of every family was
  bit-equal to a preset (split-K as recorded): the plan is that preset over K, split as
  recorded;
- library results at shapes where no preset alone matches (``tests/data/h200_library_gemms/``),
  each with the plan ``mxsim fit --plan`` found from the file alone
  (``tests/data/plans/h200-<file>.toml``), replayed here on every output.

Sets with FP32 scales (row-wise, block-wise) are left out: split plans do not apply scales yet.

    python -m gpu.runs.plan_table            # rewrite the table
    python -m gpu.runs.plan_table --check    # exit 1 when the committed table differs
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from mxsim import vectors
from mxsim.plans import Plan, load
from mxsim.plans.run import run

from .records import runs

__all__ = ["build", "TABLE", "LIBRARY_PATHS"]

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "mxsim" / "plans" / "data" / "h200.json"
LIBRARY = ROOT / "tests" / "data" / "h200_library_gemms"
PLANS = ROOT / "tests" / "data" / "plans"
#: The GPU paths that are library calls (the others run one instruction per output).
LIBRARY_PATHS = ("cublas", "cublas-fast", "cublas-fp16", "cublas-bf16", "cublas-tf32")
CALLS = {
    "cublas": "torch._scaled_mm(a, b, 1, 1, out_dtype=torch.float32, use_fast_accum=False)",
    "cublas-fast": "torch._scaled_mm(a, b, 1, 1, out_dtype=torch.float32, use_fast_accum=True)",
    "cublas-fp16": "torch.mm(a, b, out_dtype=torch.float32), FP16 operands",
    "cublas-bf16": "torch.mm(a, b, out_dtype=torch.float32), BF16 operands",
    "cublas-tf32": "torch.mm(a, b) on FP32, allow_tf32",
}


def _from_records() -> list[dict[str, Any]]:
    groups: dict[tuple, dict[str, Any]] = {}
    for r in runs():
        for s in r.sets:
            if s.get("path") not in LIBRARY_PATHS or s.get("scale_granularity") or \
                    s.get("scale_format"):
                continue
            key = (s["path"], s["m"], s["n"], s["k"], s["preset"], s.get("split_k"))
            g = groups.setdefault(key, {"runs": set(), "sets": 0, "equal": 0, "dots": 0,
                                        "kernels": set(), "formats": set()})
            g["runs"].add(r.name)
            g["sets"] += 1
            g["equal"] += s["equal"]
            g["dots"] += s["dots"]
            g["kernels"].update(s.get("kernels") or ())
            g["formats"].add(f"{s['a_format']}x{s['b_format']}")
    out = []
    for (path, m, n, k, preset, split), g in sorted(groups.items(), key=str):
        if g["equal"] != g["dots"]:
            continue                         # a preset that missed somewhere is no plan
        parts = split or 1
        plan = Plan(name=f"h200-{path}-{m}x{n}x{k}", call=CALLS[path], unit=preset,
                    split=parts, granule=k // parts if parts > 1 else None,
                    kernels=tuple(sorted(g["kernels"])),
                    provenance=f"validation records {', '.join(sorted(g['runs']))}: the "
                               f"preset {preset}" + (f" split-K {parts}" if parts > 1 else ""),
                    verified=f"H200: {g['equal']:,} of {g['dots']:,} outputs in {g['sets']} "
                             f"sets ({', '.join(sorted(g['formats']))})")
        a_format, b_format = sorted(g["formats"])[0].split("x")
        out.append({"path": path, "m": m, "n": n, "k": k, "a_format": a_format,
                    "b_format": b_format, "plan": plan.to_dict(),
                    "evidence": f"{g['equal']:,} of {g['dots']:,} outputs, {g['sets']} sets, "
                                f"records {', '.join(sorted(g['runs']))}"})
    return out


def _from_fits() -> list[dict[str, Any]]:
    out = []
    for toml in sorted(PLANS.glob("h200-*.toml")):
        name = toml.stem.removeprefix("h200-")
        vs = vectors.load(LIBRARY / f"{name}.out.npz")
        plan = load(toml)
        equal = int((np.asarray(run(plan, vs)) == vs.d).sum())
        path = str(vs.extra["path"])
        out.append({"path": path, "m": vs.m, "n": vs.n, "k": vs.k, "a_format": vs.a_format,
                    "b_format": vs.b_format,
                    "plan": plan.replace(call=CALLS.get(path, plan.call)).to_dict(),
                    "evidence": f"{equal:,} of {vs.d.size:,} outputs of "
                                f"tests/data/h200_library_gemms/{name}.out.npz, plan fitted "
                                f"from that file alone"})
    return out


def build() -> dict[str, Any]:
    """The table, as the JSON it is written as."""
    from mxsim.plans.table import held_out_of

    entries = _from_records() + _from_fits()
    head = next(r.header for r in runs() if "versions" in r.header)
    dev = head["versions"]["device"]
    table = {"device": f"{dev['gpu']}, {dev['multiprocessors']} SMs, torch {dev['torch']}, "
                       f"CUDA {dev['cuda']}, cuBLAS {dev['cublas']}",
             "generated_by": "python -m gpu.runs.plan_table",
             "rule": "the plan of the nearest recorded shape of the same path "
                     "(log2 of M x N, log2 of K)",
             "entries": sorted(entries, key=lambda e: (e["path"], e["m"], e["n"], e["k"]))}
    table["held_out"] = {p: list(v) for p, v in held_out_of(table).items()}
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpu.runs.plan_table", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the committed table")
    args = ap.parse_args(argv)
    text = json.dumps(build(), indent=1) + "\n"
    if args.check:
        if not TABLE.exists() or TABLE.read_text() != text:
            print(f"{TABLE} differs from the records; rewrite it with "
                  f"`python -m gpu.runs.plan_table`", file=sys.stderr)
            return 1
        print(f"{TABLE}: up to date")
        return 0
    TABLE.write_text(text)
    print(f"wrote {TABLE}: {len(json.loads(text)['entries'])} entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
