"""The library-GEMM run (issue 33): library calls at users' shapes on the H200, what ran
recorded, and afterwards, on any CPU, the plans that reproduce them.

On the GPU machine (one batched call, ``bash gpu/runs/h200_library.sh OUT``)::

    PYTHONPATH=. python3 -m gpu.runs.library run --salt SALT --out OUT/library

runs four groups, every input drawn from (salt, group, index) with the ``llm`` generator, no
C unless a bias is asked:

- ``table``: the six shapes x five paths of issue 33's table (M = 1 included);
- ``heldout``: 30 (shape, call) pairs drawn by ``--heldout-seed`` from the grid's range and
  used by nothing else (M = 1..8192, N and K 64..16384 with LLM sizes and ragged ones);
- ``torch``: torch.mm on BF16 at three decode and three prefill shapes of Llama-3-8B's
  q_proj (what ``mxsim.torch.matmul(x, w, unit="cublas-bf16")`` must equal);
- ``invariance``: one layer (4096 x 4096, BF16, FP32 out) at M in {1, 2, 3, 8, 17, 33, 128,
  257, 1024}, the same first rows each time: which M change those rows' bits;
- ``engine`` lines: plans of every reduction kind through mxsim's GPU engine and its fast
  engine on the device, equal outputs counted (:func:`engine_checks`).

Each result is one JSON line in ``records.jsonl`` (the call, shape, generator arguments, the
record of what ran: kernels, cuBLASLt heuristic, switches, device) plus its outputs in
``d/<group>-<index>.npy``, whole up to ``KEEP`` outputs, else as many first rows as fit in
``KEEP`` (at least one; the record says how many, and holds the SHA-256 of the whole D).
Nothing is compared on the GPU: the inputs are regenerated here.

On a CPU, afterwards::

    python -m gpu.runs.library fit OUT/library      # fit and compare every record

fits a plan to every record (``mxsim fit --plan``'s search on the regenerated inputs and the
GPU's outputs) and compares each record with the plan the table predicts for it, writing
``fits.jsonl`` beside the records.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from mxsim import vectors

__all__ = ["TABLE_SHAPES", "TABLE_PATHS", "heldout_pairs", "torch_shapes", "INVARIANCE_MS",
           "generate", "engine_checks", "ENGINE_PLANS", "main"]

TABLE_SHAPES = ((1, 4096, 4096), (16, 4096, 4096), (128, 128, 8192), (64, 64, 64),
                (256, 128, 512), (2048, 64, 128))
TABLE_PATHS = ("cublas", "cublas-fast", "cublas-fp16", "cublas-bf16", "cublas-tf32")
INVARIANCE_MS = (1, 2, 3, 8, 17, 33, 128, 257, 1024)
#: Outputs of D kept per result: the device tool brings back 64 MiB, so a larger D keeps its
#: first ``KEEP // N`` rows (the fit needs rows, not all of them).
KEEP = 1 << 17
_SIZES = (64, 96, 128, 256, 384, 512, 1000, 1024, 1536, 2048, 3000, 4096, 5120, 8192, 11008,
          14336, 16384)
_FORMAT = {"cublas": "e4m3", "cublas-fast": "e4m3", "cublas-fp16": "fp16",
           "cublas-bf16": "bf16", "cublas-tf32": "tf32"}
#: The calls a held-out pair may draw: (path, call, out, bias).
_CALLS = (("cublas-bf16", "mm", "fp32", False), ("cublas-bf16", "mm", "own", False),
          ("cublas-bf16", "linear", "own", True), ("cublas-fp16", "mm", "fp32", False),
          ("cublas-fp16", "matmul", "own", False), ("cublas-tf32", "mm", "own", False),
          ("cublas-fast", "scaled_mm", "fp32", False), ("cublas", "scaled_mm", "fp32", False),
          ("cublas-fast", "scaled_mm", "bf16", False))


def _seed(salt: str, *parts: Any) -> int:
    text = "/".join(map(str, (salt,) + parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def generate(rec: dict[str, Any]) -> vectors.VectorSet:
    """The inputs of a record, regenerated from its ``gen`` arguments."""
    gen = dict(rec["gen"])
    bias = gen.pop("bias", False)
    rows = gen.pop("rows_of", None)
    if rows is not None:            # the first m rows of a set drawn with M = rows_of
        m, gen["m"] = gen["m"], rows
        vs = vectors.generate(gen.pop("family"), allow_large=True, **gen)
        return vs.subset(slice(0, m))
    vs = vectors.generate(gen.pop("family"), allow_large=True, **gen)
    if bias:                                    # F.linear's bias: C's first row, repeated
        c = np.broadcast_to(vs.c[..., :1, :], vs.c.shape).copy()
        vs = vs.replace(c=c)
    return vs


def _gen(fmt: str, m: int, n: int, k: int, seed: int, bias: bool = False) -> dict[str, Any]:
    return {"family": "llm", "a_format": fmt, "m": m, "n": n, "k": k, "seed": seed,
            "with_c": bias, "c_format": fmt if bias else "fp32", "bias": bias}


def heldout_pairs(seed: int, count: int = 30) -> list[dict[str, Any]]:
    """The held-out (shape, call) pairs: M log-uniform in 1..8192, N and K from the grid's
    sizes, a call from :data:`_CALLS`; pairs whose operands would pass 2^28 bytes redrawn."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        m = int(np.exp2(rng.uniform(0, 13)))
        n, k = (int(rng.choice(_SIZES)) for _ in range(2))
        path, fn, o, bias = _CALLS[int(rng.integers(len(_CALLS)))]
        if (m * k + k * n) * 4 > 1 << 28:
            continue
        out.append({"path": path, "call": fn, "out": o, "bias": bias, "m": m, "n": n, "k": k})
    return out


def torch_shapes() -> list[tuple[int, int, int]]:
    """Three decode and three prefill shapes of Llama-3-8B's q_proj (N = K = 4096)."""
    return [(m, 4096, 4096) for m in (1, 2, 8, 128, 512, 2048)]


def _plan(salt: str, heldout_seed: int) -> list[dict[str, Any]]:
    jobs = []
    for i, ((m, n, k), path) in enumerate((s, p) for s in TABLE_SHAPES for p in TABLE_PATHS):
        call = "scaled_mm" if _FORMAT[path] == "e4m3" else "mm"
        jobs.append({"group": "table", "index": i, "path": path, "call": call, "out": "fp32"
                     if path != "cublas-tf32" else "own", "bias": False,
                     "gen": _gen(_FORMAT[path], m, n, k, _seed(salt, "table", i))})
    for i, p in enumerate(heldout_pairs(heldout_seed)):
        jobs.append({"group": "heldout", "index": i, "path": p["path"], "call": p["call"],
                     "out": p["out"], "bias": p["bias"],
                     "gen": _gen(_FORMAT[p["path"]], p["m"], p["n"], p["k"],
                                 _seed(salt, "heldout", i), p["bias"])})
    for i, (m, n, k) in enumerate(torch_shapes()):
        jobs.append({"group": "torch", "index": i, "path": "cublas-bf16", "call": "mm",
                     "out": "own", "bias": False,
                     "gen": _gen("bf16", m, n, k, _seed(salt, "torch", i))})
    for i, m in enumerate(INVARIANCE_MS):       # one draw at the largest M: the same rows
        gen = _gen("bf16", m, 4096, 4096, _seed(salt, "invariance"))
        jobs.append({"group": "invariance", "index": i, "path": "cublas-bf16", "call": "mm",
                     "out": "fp32", "bias": False, "gen": {**gen, "rows_of": max(INVARIANCE_MS)}})
    return jobs


def _run(args: argparse.Namespace) -> int:
    from gpu.hopper.library import Call, run_call

    out = Path(args.out)
    (out / "d").mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    with open(out / "records.jsonl", "w") as fh:
        fh.write(json.dumps({"kind": "header", "salt": args.salt,
                             "heldout_seed": args.heldout_seed, "command": " ".join(sys.argv),
                             "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())})
                 + "\n")
        for job in _plan(args.salt, args.heldout_seed):
            if time.time() - t0 > args.deadline:
                fh.write(json.dumps({"kind": "deadline", "at": job["group"]}) + "\n")
                break
            rec = dict(job, kind="result")
            try:
                vs = generate(job)
                if job["gen"]["a_format"] == "e4m3":        # scaled_mm takes no C
                    vs = vs.replace(c=None)
                res = run_call(vs, job["path"], Call(job["call"], out=job["out"],
                                                     fast_accum=job["path"] == "cublas-fast",
                                                     bias=job["bias"]))
                d = np.asarray(res.d)
                rows = d.shape[-2] if d.size <= KEEP else max(1, KEEP // d.shape[-1])
                name = f"{job['group']}-{job['index']}.npy"
                np.save(out / "d" / name, d[..., :rows, :])
                rec.update(record=res.extra["record"], d=name, d_format=res.d_format,
                           rows=rows, d_sha256=hashlib.sha256(d.tobytes()).hexdigest())
            except Exception as exc:                    # recorded: the library's own words
                rec.update(kind="error", error=f"{type(exc).__name__}: {exc}")
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            print(rec["group"], rec["index"], rec["path"], rec["gen"]["m"], rec["gen"]["n"],
                  rec["gen"]["k"], rec.get("error", "ok"), flush=True)
        try:
            for line in engine_checks(args.salt):
                fh.write(json.dumps(line) + "\n")
                print("engine", line["format"], line["k"], line["family"], line["equal"], "/",
                      line["outputs"], flush=True)
        except Exception as exc:                        # no CuPy there: say so, keep the rest
            fh.write(json.dumps({"kind": "engine-error", "error": f"{type(exc).__name__}: "
                                                                  f"{exc}"}) + "\n")
    return 0


#: Plans the GPU engine runs beside the fast one on the device (``engine`` lines): one per
#: reduction kind, as tests/mxsim/plans/test_plans.py's CASES hold fast and reference equal.
ENGINE_PLANS = (
    ("bf16", 8192, {"unit": "hopper-mma-bf16", "split": 6, "granule": 64}),
    ("e4m3", 8192, {"unit": "hopper-wgmma", "split": 3, "granule": 128}),
    ("tf32", 64, {"unit": "hopper-mma-tf32", "split": 2, "granule": 16}),
    ("bf16", 1024, {"unit": "hopper-mma-bf16", "split": 4, "granule": 64, "merge": "tree",
                    "partial_format": "bf16", "out_format": "bf16"}),
    ("fp16", 1024, {"unit": "hopper-mma-f16", "split": 4, "granule": 64, "merge": "serial",
                    "sum_format": "fp16", "out_format": "fp16"}),
)


def engine_checks(salt: str) -> list[dict[str, Any]]:
    """The plans of :data:`ENGINE_PLANS` through the GPU engine and the fast engine, on
    ``llm`` and ``specials`` sets: equal outputs of each (run where CuPy and a GPU are)."""
    from mxsim.plans import from_dict
    from mxsim.plans.run import run

    out = []
    for i, (fmt, k, fields) in enumerate(ENGINE_PLANS):
        plan = from_dict(fields)
        for family in ("llm", "specials"):
            vs = vectors.generate(family, a_format=fmt, m=64, n=64, k=k, with_c=False,
                                  seed=_seed(salt, "engine", i, family))
            gpu_d, fast_d = np.asarray(run(plan, vs, "gpu")), np.asarray(run(plan, vs, "fast"))
            out.append({"kind": "engine", "plan": fields, "format": fmt, "k": k,
                        "family": family, "equal": int((gpu_d == fast_d).sum()),
                        "outputs": int(fast_d.size)})
    return out


def _fit(args: argparse.Namespace) -> int:
    """Every record: the plan the table predicts, compared; and the plan fitted to it."""
    from mxsim.plans import PlanError
    from mxsim.plans.run import run
    from mxsim.plans.table import lookup
    from mxsim.probe.planfit import fit_plan

    folder = Path(args.folder)
    lines = [json.loads(x) for x in (folder / "records.jsonl").read_text().splitlines()]
    with open(folder / "fits.jsonl", "w") as fh:
        for rec in lines:
            if rec.get("kind") != "result":
                continue
            vs = generate(rec)
            if rec["gen"]["a_format"] == "e4m3":
                vs = vs.replace(c=None)
            d = np.load(folder / "d" / rec["d"])
            vs = vs.subset(slice(0, rec["rows"])).with_result(d, d_format=rec["d_format"],
                                                             producer=rec["record"]["call"])
            row: dict[str, Any] = {"group": rec["group"], "index": rec["index"],
                                   "path": rec["path"], "shape": rec["record"]["shape"],
                                   "call": rec["record"]["call"]}
            try:
                found = lookup(rec["path"], *rec["record"]["shape"])
                got = run(found.plan, vs)
                row.update(predicted=found.plan.describe(), source=found.source,
                           equal=int((np.asarray(got) == d).sum()), outputs=int(d.size))
            except PlanError as exc:
                row.update(predicted=None, error=str(exc))
            fit = fit_plan(vs, max_split=args.max_split)
            row.update(fitted=None if fit.plan is None else fit.plan.to_dict(),
                       fit_equal=fit.equal, fit_report=fit.report())
            fh.write(json.dumps(row) + "\n")
            print(row["group"], row["index"], row["path"], row["shape"],
                  row.get("equal"), "/", row.get("outputs"), "fitted:",
                  None if fit.plan is None else fit.plan.describe(), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpu.runs.library", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run", help="on the GPU: run every group, write records and outputs")
    r.add_argument("--salt", required=True, help="a salt no earlier run used (fresh seeds)")
    r.add_argument("--heldout-seed", type=int, default=33_2026,
                   help="seed of the held-out pairs (default: %(default)s)")
    r.add_argument("--deadline", type=float, default=480, help="seconds (default: 480)")
    r.add_argument("--out", required=True)
    f = sub.add_parser("fit", help="on a CPU: compare every record with its plan, fit one")
    f.add_argument("folder")
    f.add_argument("--max-split", type=int, default=64)
    args = ap.parse_args(argv)
    return _run(args) if args.what == "run" else _fit(args)


if __name__ == "__main__":
    sys.exit(main())
