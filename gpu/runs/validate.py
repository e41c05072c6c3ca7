"""Rerun every hardware validation the docs cite, on fresh vectors, one record per vector set.

    PYTHONPATH=. python3 -m gpu.runs.collect --what validate --salt NEW --out DIR [--deadline S]
    PYTHONPATH=. python3 -m gpu.runs.collect --what heldout --salt NEW --out DIR
    PYTHONPATH=. python3 -m gpu.runs.collect --what bias --out DIR

``validate`` runs, for each preset fitted to or checked on the H200, every operand pair,
generator family and K its validation covers (:func:`plans`), through the GPU path it models,
and compares there with the fast engine. Each set's seed is
``gpu.runs.sets.seed(salt, group, path, preset, gen)``, so a new salt gives new vectors for every
set. Records (``gpu/runs/records.py``) are written as each set finishes, so a run stopped by its
deadline or killed keeps what it measured; ``records.jsonl`` is gzipped when the run ends.

``heldout`` writes the same records for a small set of every configuration, and the sets
themselves, inputs and GPU outputs (``heldout.npz``): no fit ever reads them; the tests replay
them bit for bit. ``bias`` runs ``torch._scaled_mm`` with a bias vector (per-tensor and
row-wise FP32 scales) and keeps the raw outputs (``bias.npz``) for docs/gpu.md.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mxsim import presets, vectors
from mxsim.compare import compare
from mxsim.engine import fast
from mxsim.versions import installed

from .records import d_sha256, inputs_sha256, model_spec
from .sets import SHAPES, operand_map_sets, save_bundle
from .sets import seed as seed_of

__all__ = ["Plan", "plans", "heldout_plans", "validate", "heldout", "bias", "bias_sets",
           "gpu_runner", "model_runner", "run_plan", "PlanRunner", "SIZES", "DRY_SIZES",
           "versions"]

UNSCALED = [f for f in vectors.FAMILIES if f != "nan-scale"]
CUBLAS_PAIRS = (("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3"))
FP8_PAIRS = tuple((a, b) for a in ("e4m3", "e5m2") for b in ("e4m3", "e5m2"))
MX_FORMATS = ("e4m3", "e5m2", "e2m1")

#: M = N (or M, with N fixed by the path) of each validation's sets, sized for about
#: 20 G multiply-adds in the model: minutes on the 16 cores of the GPU machine.
SIZES = {"wgmma": 256, "fast": 96, "cublas": 128, "rowwise": 256, "blockwise": 256,
         "mma": 128, "triton": 128, "scaled": 128, "shapes": SHAPES, "operand_map": True}
#: A local dry run's sizes (every plan, tiny sets).
DRY_SIZES = {"wgmma": 16, "fast": 16, "cublas": 16, "rowwise": 16, "blockwise": 16,
             "mma": 16, "triton": 64, "scaled": 64, "shapes": ((16, 16, 256),),
             "operand_map": False}


@dataclass(frozen=True)
class Plan:
    """One vector set to run: which validation, path and preset, and how to generate it."""
    group: str                    #: the validation it belongs to (a preset, or preset/part)
    path: str                     #: the GPU path (gpu.paths), e.g. "cublas"
    preset: str                   #: the preset the GPU result is compared with
    gen: dict[str, Any] = field(hash=False)   #: vectors.generate's arguments, seed excluded

    def seed(self, salt: str) -> int | None:
        if "operand_map" in self.gen:
            return None                        # a fixed table: every code under every scale
        return seed_of(salt, self.group, self.path, self.preset, self.gen)

    def make(self, salt: str) -> vectors.VectorSet:
        gen = dict(self.gen)
        if "operand_map" in gen:
            return operand_map_sets(gen["operand_map"])[gen["side"]]
        return vectors.generate(gen.pop("family"), seed=self.seed(salt), **gen)


def _gen(family, a, b, m, n, k, **kw) -> dict[str, Any]:
    return {"family": family, "a_format": a, "b_format": b, "m": m, "n": n, "k": k, **kw}


def _hopper_plans(s: dict[str, Any]) -> Iterator[Plan]:
    """cuBLASLt (wgmma, fast, promoted, row-wise, block-wise scales) and tl.dot, every pair."""
    for a, b in CUBLAS_PAIRS:
        # hopper-wgmma: cuBLASLt with K = 32 is one wgmma k32 step per output.
        for fam in UNSCALED:
            yield Plan("hopper-wgmma", "wgmma", "hopper-wgmma",
                       _gen(fam, a, b, s["wgmma"], s["wgmma"], 32, with_c=False))
        for k in (64, 256, 1024, 4096):
            for fam in UNSCALED:
                yield Plan("hopper-cublas-fast", "cublas-fast", "hopper-cublas-fast",
                           _gen(fam, a, b, s["fast"], s["fast"], k, with_c=False))
        for k in (256, 1024, 4096):
            for fam in UNSCALED:
                yield Plan("hopper-cublas", "cublas", "hopper-cublas",
                           _gen(fam, a, b, s["cublas"], s["cublas"], k, with_c=False))
        for gran in ("tensor", "row"):
            for fam in UNSCALED:
                yield Plan("hopper-cublas-rowwise", "cublas", "hopper-cublas-rowwise",
                           _gen(fam, a, b, s["rowwise"], s["rowwise"], 256, with_c=False,
                                scale_format="fp32", scale_granularity=gran))
        for k in (512, 2048):          # K/128 a multiple of 4, as cuBLASLt wants
            for fam in UNSCALED:
                yield Plan("hopper-cublas-blockwise", "cublas", "hopper-cublas-blockwise",
                           _gen(fam, a, b, s["blockwise"], 128, k, with_c=False,
                                scale_format="fp32", scale_granularity="block"))
        # triton-dot: tl.dot's chain is hopper-wgmma at K = 32, hopper-cublas-fast beyond.
        for k, preset in ((32, "hopper-wgmma"), (256, "hopper-cublas-fast")):
            for fam in UNSCALED:
                yield Plan("triton-dot", "triton-dot", preset,
                           _gen(fam, a, b, s["triton"], s["triton"], k))


def _emulated_plans(s: dict[str, Any]) -> Iterator[Plan]:
    """The shapes sweep, FP8 mma.sync (emulated on sm_90) and tl.dot_scaled (emulated)."""
    for m, n, k in s["shapes"]:
        for fam in ("normal", "llm", "cancellation"):
            yield Plan("hopper-cublas/shapes", "cublas", "hopper-cublas",
                       _gen(fam, "e4m3", "e4m3", m, n, k, with_c=False))
    for a, b in FP8_PAIRS:
        for c_format in ("fp32", "fp16"):
            for k in (32, 256):
                for fam in UNSCALED:
                    yield Plan("hopper-mma-sync", "mma-sync", "hopper-mma-sync",
                               _gen(fam, a, b, s["mma"], s["mma"], k, c_format=c_format))
    for a in MX_FORMATS:
        for b in MX_FORMATS:
            for k in ((128, 1024) if a == b else (128,)):
                for fam in vectors.FAMILIES:
                    yield Plan("triton-dot-scaled-hopper", "triton-dot-scaled",
                               "triton-dot-scaled-hopper",
                               _gen(fam, a, b, s["scaled"], s["scaled"], k, scale_format="e8m0"))
    if s["operand_map"]:
        for fmt in MX_FORMATS:
            for side in ("a", "a-lift", "b"):
                yield Plan("triton-dot-scaled-hopper/operand-map", "triton-dot-scaled",
                           "triton-dot-scaled-hopper", {"operand_map": fmt, "side": side})


def _groups(sizes: dict[str, Any]) -> dict[str, list[Plan]]:
    """Every validation the docs cite, as lists of plans (one list per group)."""
    g: dict[str, list[Plan]] = {}
    for plan in (*_hopper_plans(sizes), *_emulated_plans(sizes)):
        g.setdefault(plan.group, []).append(plan)
    return g


def plans(sizes: dict[str, Any] | None = None) -> list[Plan]:
    """Every validation's plans, interleaved group by group (a deadline cuts all alike)."""
    groups = list(_groups(sizes or SIZES).values())
    out = []
    for i in range(max(len(p) for p in groups)):
        out.extend(p[i] for p in groups if i < len(p))
    return out


def heldout_plans() -> list[Plan]:
    """One small set of every configuration of :func:`plans`, the family rotating.

    M = N = 64 (N = 128 for block-wise scales), K capped at 256 (512 for block-wise scales,
    whose K/128 must be a multiple of 4); the shapes sweep and the operand map (a fixed
    table) have no held-out sets.
    """
    seen: dict[str, Plan] = {}
    for p in plans(DRY_SIZES | {"shapes": (), "operand_map": False}):
        block = p.gen.get("scale_granularity") == "block"
        gen = {k: v for k, v in p.gen.items() if k != "family"}
        gen.update(m=64, n=128 if block else 64, k=min(p.gen["k"], 512 if block else 256))
        key = json.dumps([p.group, p.path, p.preset, gen], sort_keys=True)
        seen.setdefault(key, Plan(p.group, p.path, p.preset, gen))
    out = []
    for i, p in enumerate(seen.values()):
        fams = UNSCALED if p.gen.get("scale_format") in (None, "fp32") else vectors.FAMILIES
        out.append(Plan(p.group, p.path, p.preset, dict(p.gen, family=fams[(i * 5) % len(fams)])))
    return out


# -- versions and records -------------------------------------------------------------------

def versions() -> dict[str, Any]:
    """Device and library versions, and the checkout's commit (``MXSIM_GIT_COMMIT``)."""
    from ..device import device_info
    info: dict[str, Any] = {"device": device_info()}
    info.update(installed(("torch", "triton", "cupy-cuda13x", "cupy-cuda12x", "numpy",
                           "ml_dtypes", "numba", "llvmlite")))
    info["engine"] = "numba" if fast.kernel_available() else "numpy"
    info["git_commit"] = os.environ.get("MXSIM_GIT_COMMIT") or None
    info["python"] = sys.version.split()[0]
    info["cpus"] = os.cpu_count()
    return info


class Recorder:
    """``records.jsonl`` written line by line (flushed), gzipped by :meth:`close`."""

    def __init__(self, out: Path, header: dict[str, Any]):
        out.mkdir(parents=True, exist_ok=True)
        self.path = out / "records.jsonl"
        self._fh = open(self.path, "w", encoding="utf-8")
        self.write({"kind": "header", **header})

    def write(self, row: dict[str, Any]) -> None:
        self._fh.write(json.dumps(row, sort_keys=True, default=str) + "\n")
        self._fh.flush()

    def close(self, footer: dict[str, Any]) -> Path:
        self.write({"kind": "footer", **footer})
        self._fh.close()
        gz = self.path.with_suffix(".jsonl.gz")
        with open(self.path, "rb") as src, gzip.open(gz, "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
        self.path.unlink()
        return gz


#: What runs a plan's set: the GPU path (:func:`gpu_runner`) or a stand-in for it.
PlanRunner = Callable[[Plan, vectors.VectorSet], vectors.VectorSet]


def gpu_runner(plan: Plan, vs: vectors.VectorSet) -> vectors.VectorSet:
    """The plan's GPU path (gpu.paths) applied to ``vs``."""
    from ..paths import get as get_path
    return get_path(plan.path).run(vs)


def model_runner(plan: Plan, vs: vectors.VectorSet) -> vectors.VectorSet:
    """A stand-in for the GPU in dry runs: the plan's preset itself, by the fast engine."""
    spec = presets.get(plan.preset).spec_for(vs)
    return vs.with_result(fast.dot(spec, vs), d_format=spec.d_format,
                          producer=f"dry run: {plan.preset} standing in for {plan.path}",
                          path=plan.path)


def run_plan(plan: Plan, salt: str, runner: PlanRunner = gpu_runner, *,
             split_k: int | None = None) -> tuple[dict[str, Any], vectors.VectorSet]:
    """Run one plan on the GPU (or ``runner``) and compare; the record and the GPU result.

    ``split_k``: the preset's K split in that many parts added in FP32, as a library's split-K
    GEMM does (:func:`gpu.runs.records.split_k`); recorded as ``split_k``.
    """
    vs = plan.make(salt)
    t0 = time.perf_counter()
    res = runner(plan, vs)
    t1 = time.perf_counter()
    spec = model_spec(plan.preset, res, split_k)
    model = fast.dot(spec, res)
    t2 = time.perf_counter()
    rep = compare(res, model, expected_format=spec.d_format, actual_name=plan.path,
                  expected_name=plan.preset, show=3)
    gen = plan.gen
    rec = {"kind": "set", "group": plan.group, "path": plan.path, "preset": plan.preset,
           "a_format": vs.a_format, "b_format": vs.b_format, "c_format": vs.c_format,
           "d_format": res.d_format, "with_c": vs.c is not None,
           "scale_format": vs.scale_format,
           "scale_granularity": gen.get("scale_granularity") if vs.scale_format == "fp32"
           else None,
           "block": vs.block, "m": vs.m, "n": vs.n, "k": vs.k,
           "family": gen.get("family", f"operand-map:{gen.get('operand_map')}/"
                                       f"{gen.get('side')}"),
           "salt": salt if "operand_map" not in gen else None, "seed": plan.seed(salt),
           "gen": gen, "dots": rep.total, "equal": rep.equal, "histogram": rep.histogram,
           "nan_mismatches": rep.nan_mismatches,
           "inputs_sha256": inputs_sha256(vs), "gpu_sha256": d_sha256(res.d),
           "model_sha256": d_sha256(model), "first": [m.__dict__ for m in rep.mismatches],
           "seconds": {"gpu": round(t1 - t0, 4), "model": round(t2 - t1, 4)}}
    if split_k is not None:
        rec["split_k"] = split_k
    return rec, res


def _loop(out: Path, what: str, salt: str, todo: list[Plan], deadline: float | None,
          runner: PlanRunner, keep: Callable[[int, Plan, vectors.VectorSet], None]
          | None = None, header_extra: dict | None = None) -> Path:
    t_start = time.monotonic()
    rec = Recorder(out, {"what": what, "salt": salt, "versions": versions(),
                         "command": " ".join(sys.argv),
                         "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                         "planned": len(todo), **(header_extra or {})})
    ran = errors = 0
    stopped = False
    totals: dict[str, list[int]] = {}
    try:
        for i, plan in enumerate(todo):
            if deadline is not None and time.monotonic() - t_start > deadline:
                stopped = True
                break
            try:
                row, res = run_plan(plan, salt, runner)
            except Exception as exc:            # record it and go on: one refusal spoils no run
                errors += 1
                rec.write({"kind": "error", "group": plan.group, "path": plan.path,
                           "preset": plan.preset, "gen": plan.gen, "salt": salt,
                           "seed": plan.seed(salt),
                           "error": f"{type(exc).__name__}: {exc}"[:500]})
                print(f"[{i + 1}/{len(todo)}] {plan.group} {plan.gen} ERROR {exc}",
                      file=sys.stderr, flush=True)
                continue
            rec.write(row)
            if keep is not None:
                keep(i, plan, res)
            ran += 1
            t = totals.setdefault(plan.group, [0, 0])
            t[0] += row["dots"]
            t[1] += row["equal"]
            if (i + 1) % 25 == 0 or row["equal"] != row["dots"]:
                print(f"[{i + 1}/{len(todo)}] {time.monotonic() - t_start:6.1f}s "
                      f"{plan.group} {row['family']} k={row['k']} {row['equal']}/{row['dots']}",
                      file=sys.stderr, flush=True)
    finally:
        gz = rec.close({"ran": ran, "errors": errors, "planned": len(todo),
                        "stopped_by_deadline": stopped, "deadline_s": deadline,
                        "seconds": round(time.monotonic() - t_start, 1),
                        "finished": time.strftime("%Y-%m-%d %H:%M:%S %Z")})
    for group, (d, e) in totals.items():
        print(f"{group:40} dots {d:>10}  equal {e:>10}  mismatches {d - e}", flush=True)
    print(f"{what}: {ran} of {len(todo)} sets, {errors} errors"
          + (" (stopped by the deadline)" if stopped else ""), flush=True)
    return gz


def validate(out: Path, salt: str, *, deadline: float | None = None,
             sizes: dict[str, Any] | None = None, runner: PlanRunner = gpu_runner) -> Path:
    """Every validation of :func:`plans`; ``records.jsonl.gz`` in ``out``."""
    return _loop(out, "validate", salt, plans(sizes), deadline, runner,
                 header_extra={"sizes": sizes or SIZES,
                               "runner": "gpu" if runner is gpu_runner else "dry run"})


def heldout(out: Path, salt: str, *, runner: PlanRunner = gpu_runner) -> Path:
    """Small sets of every configuration: records, and inputs with GPU outputs in heldout.npz."""
    kept: dict[str, vectors.VectorSet] = {}

    def keep(i: int, plan: Plan, res: vectors.VectorSet) -> None:
        kept[f"{i:03d}"] = res

    gz = _loop(out, "heldout", salt, heldout_plans(), None, runner, keep,
               header_extra={"runner": "gpu" if runner is gpu_runner else "dry run"})
    save_bundle(kept, out / "heldout.npz")
    return gz


# -- torch._scaled_mm with a bias -----------------------------------------------------------

BIAS_FAMILIES = ("normal", "llm", "cancellation", "scale-extremes")


def bias_sets(salt: str = "bias") -> list[tuple[str, vectors.VectorSet, np.ndarray]]:
    """e4m3 x e4m3, K = 256, 128 x 128, per-tensor and row-wise FP32 scales, and a bf16 bias.

    The bias (one bf16 per column, as torch takes it) cycles through four kinds along N: of the
    size of a typical output (the model's median magnitude), ±0, 2**20 times larger, 2**-20
    times smaller.
    """
    from mxsim import formats
    bf16 = formats.get("bf16")
    rowwise = presets.get("hopper-cublas-rowwise")
    out = []
    for gran in ("tensor", "row"):
        for fam in BIAS_FAMILIES:
            gen = _gen(fam, "e4m3", "e4m3", 128, 128, 256, with_c=False, scale_format="fp32",
                       scale_granularity=gran)
            seed = seed_of(salt, "bias", gen)
            vs = vectors.generate(gen.pop("family"), seed=seed, **gen)
            rng = np.random.default_rng([seed, 7])
            d = np.abs(fast.dot(rowwise.spec_for(vs), vs).view(np.float32).astype(np.float64))
            d = d[np.isfinite(d) & (d > 0)]
            typical = float(np.median(d)) if d.size else 1.0
            x = rng.standard_normal(vs.n) * typical
            kind = np.arange(vs.n) % 4
            x = np.where(kind == 1, np.where(rng.random(vs.n) < 0.5, 0.0, -0.0), x)
            x = np.where(kind == 2, x * 2.0 ** 20, x)
            x = np.where(kind == 3, x * 2.0 ** -20, x)
            bias = bf16.encode(x, "rne", saturate=False).astype(np.uint16)
            out.append((f"{gran}_{fam}", vs, bias))
    return out


def bias(out: Path, salt: str = "bias") -> dict[str, Any]:
    """``torch._scaled_mm(..., bias=...)`` on the H200 (no fast accumulation), raw outputs kept.

    For every set of :func:`bias_sets`: D without a bias in FP32 and bf16 (``d_plain_fp32``,
    ``d_plain_bf16``), and D with the bias given as bf16 or FP32 for FP32 and bf16 outputs
    (``d_bias_<bias>_<out>``), or torch's refusal. Written to ``bias.npz`` (set arrays under
    ``KEY/``, and ``KEY/bias``) and ``bias.json``.
    """
    import torch

    from ..device import device_info
    from ..hopper import cublas
    out.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    summary: dict[str, Any] = {"versions": versions(), "salt": salt, "rows": [],
                               "device": device_info()}
    dtypes = {"fp32": (torch.float32, torch.int32, np.uint32),
              "bf16": (torch.bfloat16, torch.int16, np.uint16)}
    for key, vs, bias_bits in bias_sets(salt):
        row: dict[str, Any] = {"key": key, "seed": vs.extra["seed"]}
        for out_name in ("fp32", "bf16"):
            arrays[f"{key}/d_plain_{out_name}"] = cublas.scaled_mm(
                vs, fast_accum=False, out_format=out_name).d
        a = torch.from_numpy(vs.a).cuda().view(torch.float8_e4m3fn)
        b = torch.from_numpy(np.ascontiguousarray(vs.b.T)).cuda().view(torch.float8_e4m3fn).t()
        sa, sb = cublas.scale_tensors(torch, vs, 1, 0)
        bias_bf16 = torch.from_numpy(bias_bits.view(np.int16)).cuda().view(torch.bfloat16)
        for bias_name in ("bf16", "fp32"):
            bias_t = bias_bf16.to(dtypes[bias_name][0])
            for out_name, (out_dtype, raw, np_raw) in dtypes.items():
                name = f"{bias_name}_{out_name}"
                try:
                    d = torch._scaled_mm(a, b, sa, sb, bias=bias_t, out_dtype=out_dtype,
                                         use_fast_accum=False)
                except RuntimeError as exc:
                    row[f"{name}_error"] = str(exc).strip().splitlines()[0][:300]
                    continue
                arrays[f"{key}/d_bias_{name}"] = d.view(raw).cpu().numpy().view(np_raw)
                row[f"{name}_ran"] = True
        for name, arr in vectors.to_arrays(vs).items():
            arrays[f"{key}/{name}"] = arr
        arrays[f"{key}/bias"] = bias_bits
        summary["rows"].append(row)
        print(row, flush=True)
    np.savez_compressed(out / "bias.npz", **arrays)
    (out / "bias.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary
