"""Hopper on fp16, bf16 and tf32 operands: every path against its preset, fresh seeds.

    PYTHONPATH=. python3 -m gpu.runs.collect --what hopper16 --salt NEW --out DIR [--deadline S]
    python -m gpu.runs.collect --what hopper16 --dry-run --salt dry --out /tmp/dry   # no GPU

For each operand format, every GPU path that takes it (:func:`plans`): inline-PTX
``mma.sync`` (``mma-sync-{fmt}``, C and D in FP32, and in FP16 for fp16), Triton ``tl.dot``
(``triton-dot-{fmt}``: wgmma; FP32 accumulator, and FP16 for fp16) and cuBLAS through
``torch.mm`` (``cublas-{fmt}``: FP32 output, no C), each at one instruction's K (one
``tl.dot`` for Triton) and at K = 256 (a chain), on every generator family. Each set is
regenerated from its seed (``gpu.runs.sets.seed(salt, group, path, preset, gen)``) on the GPU
machine, run, and compared there with the named preset by the fast engine. cuBLAS picks its
own kernels: each cublas-* record names the kernels it ran (torch's profiler), and where
cuBLAS splits K (:data:`SPLIT_K`, found on the first run) the preset is compared split the same
way (``gpu.runs.records.split_k``; the record says ``split_k``).

``DIR`` receives ``records.jsonl.gz`` (``gpu/runs/records.py``; the header carries the versions and
the fragment-layout check of :func:`gpu.hopper.mma_sync.layout_check`), ``samples.npz`` (a 16x8
corner of every set, inputs and GPU output, for CI to replay) and, where a set disagreed with
its preset, ``mismatches.npz`` (up to 512 disagreeing dots of each such set, whole: enough to
``mxsim fit``).

``--families e-zero`` runs H1's ``e-zero`` ladders instead (outputs that depend on the step's
LSB ``2**(e_zero - F)``), each also compared with the preset's e_zero moved by
:data:`E_ZERO_SHIFTS`: where the data can tell e_zero apart, this is where it does.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from mxsim import vectors
from mxsim.engine import fast

from .records import model_spec
from .sets import save_bundle
from .validate import Plan, PlanRunner, Recorder, gpu_runner, run_plan, versions

__all__ = ["plans", "run", "split_of", "FORMATS", "SIZES", "DRY_SIZES", "LONG_K",
           "preset_name", "SPLIT_K", "E_ZERO_SHIFTS", "SAMPLE_ROWS", "SAMPLE_COLS",
           "MAX_MISMATCH_DOTS"]

FORMATS = ("fp16", "bf16", "tf32")
UNSCALED = [f for f in vectors.FAMILIES if f != "nan-scale"]
#: The K of one instruction (mma.sync, wgmma, cuBLAS) and of one tl.dot (Triton: K >= 16).
INSTRUCTION_K = {"fp16": 16, "bf16": 16, "tf32": 8}
TRITON_K = {"fp16": 16, "bf16": 16, "tf32": 16}
#: The chain every path also runs.
LONG_K = 256
#: M = N of the one-instruction sets and of the K = 256 sets.
SIZES = {"short": 256, "long": 256}
DRY_SIZES = {"short": 64, "long": 64}
SAMPLE_ROWS, SAMPLE_COLS = 16, 8
MAX_MISMATCH_DOTS = 512
#: cuBLAS's own split-K, by (path, K, M, N): on the H200, torch.mm with TF32 on 256x256x8
#: runs cutlass_80_tensorop_s1688gemm (mma.sync m16n8k8) in two halves of K and adds them in
#: splitKreduce (found on the first run, tests/data/h200/2026-12-02/hopper16-first).
SPLIT_K = {("cublas-tf32", 8, 256, 256): 2}


def preset_name(kind: str, fmt: str) -> str:
    """``hopper-{mma|wgmma}-{f16|bf16|tf32}``: the preset of an instruction on ``fmt``."""
    return f"hopper-{kind}-{'f16' if fmt == 'fp16' else fmt}"


def _configs(fmt: str) -> list[tuple[str, str, dict[str, Any], tuple[int, ...]]]:
    """(path, preset, generator options, Ks) of every configuration on ``fmt``."""
    ki, kt = INSTRUCTION_K[fmt], TRITON_K[fmt]
    mma, wgmma = preset_name("mma", fmt), preset_name("wgmma", fmt)
    accs = ("fp32", "fp16") if fmt == "fp16" else ("fp32",)
    out = []
    for c in accs:
        out.append((f"mma-sync-{fmt}", mma, {"c_format": c}, (ki, LONG_K)))
    for c in accs:
        out.append((f"triton-dot-{fmt}", wgmma, {"c_format": c}, (kt, LONG_K)))
    out.append((f"cublas-{fmt}", wgmma, {"with_c": False}, (ki, LONG_K)))
    return out


def plans(sizes: dict[str, int] | None = None, families: list[str] | None = None
          ) -> list[Plan]:
    """Every set of the run, interleaved configuration by configuration (a deadline cuts all
    alike). A plan's group is its path, with ``/f16-acc`` where C and D are FP16. ``families``:
    the generator families (default: every one but ``nan-scale``; ``e-zero`` may be named)."""
    s = sizes or SIZES
    fams = list(families or UNSCALED)
    groups: list[list[Plan]] = []
    for fmt in FORMATS:
        for path, preset, opts, ks in _configs(fmt):
            group = path + ("/f16-acc" if opts.get("c_format") == "fp16" else "")
            for k in ks:
                size = s["long"] if k == LONG_K else s["short"]
                groups.append([Plan(group, path, preset, {
                    "family": fam, "a_format": fmt, "b_format": fmt, "m": size, "n": size,
                    "k": k, "with_c": True, **opts}) for fam in fams])
    return [g[i] for i in range(max(map(len, groups))) for g in groups if i < len(g)]


def split_of(plan: Plan) -> int | None:
    """The split-K of :data:`SPLIT_K` that a plan is compared with (None: none)."""
    g = plan.gen
    return SPLIT_K.get((plan.path, g["k"], g["m"], g["n"]))


def _mismatching(plan: Plan, res: vectors.VectorSet) -> vectors.VectorSet:
    """The first :data:`MAX_MISMATCH_DOTS` dots where ``res`` and the preset differ, whole."""
    model = fast.dot(model_spec(plan.preset, res, split_of(plan)), res)
    idx = np.flatnonzero(np.asarray(model, res.d.dtype).reshape(-1) != res.d.reshape(-1))
    part = res.take_dots(idx[:MAX_MISMATCH_DOTS])
    return part.replace(extra={**res.extra, "dots": part.extra["dots"],
                               "model_d": [int(x) for x in model.reshape(-1)[
                                   idx[:MAX_MISMATCH_DOTS]]]})


#: e_zero offsets the ``e-zero`` family's sets are also compared with (the preset's +- these).
E_ZERO_SHIFTS = (-2, -1, 1, 2)


def _also(plan: Plan, res: vectors.VectorSet) -> dict[str, int]:
    """Bit-equal outputs under other models: cuBLAS picks its own kernels (wgmma, or
    Ampere-style mma.sync), so its sets are also compared with the mma.sync preset; the
    ``e-zero`` family's sets with the preset's e_zero moved by :data:`E_ZERO_SHIFTS`
    (``"e_zero=-132"``)."""
    out = {}
    if plan.path.startswith("cublas-"):
        other = preset_name("mma", res.a_format)
        model = fast.dot(model_spec(other, res, split_of(plan)), res)
        out[other] = int((np.asarray(model, res.d.dtype) == res.d).sum())
    if plan.gen["family"] == "e-zero":
        spec = model_spec(plan.preset, res, split_of(plan))
        for dz in E_ZERO_SHIFTS:
            model = fast.dot(spec.replace(e_zero=spec.e_zero + dz), res)
            out[f"e_zero={spec.e_zero + dz}"] = int((np.asarray(model, res.d.dtype)
                                                    == res.d).sum())
    return out


_KERNELS: dict[tuple, list[str]] = {}


def _kernels(plan: Plan, runner: PlanRunner) -> list[str] | None:
    """The CUDA kernels cuBLAS ran for a cublas-* plan's shape (profiled once per shape)."""
    if runner is not gpu_runner or not plan.path.startswith("cublas-"):
        return None
    g = plan.gen
    key = (g["a_format"], g["m"], g["n"], g["k"])
    if key not in _KERNELS:
        from ..hopper.cublas import kernel_names
        try:
            _KERNELS[key] = [n for n in kernel_names(*key) if not n.startswith("cu")
                             and "Activity" not in n]
        except Exception as exc:          # provenance only: the set still runs
            _KERNELS[key] = [f"unknown: {type(exc).__name__}: {exc}"[:200]]
    return _KERNELS[key]


def _layout(runner: PlanRunner) -> list[dict[str, Any]] | None:
    if runner is not gpu_runner:
        return None
    from ..hopper.mma_sync import layout_check
    try:
        rows = layout_check()
    except Exception as exc:             # recorded; the sets still run and show any fault
        return [{"error": f"{type(exc).__name__}: {exc}"[:500]}]
    bad = [r for r in rows if r["equal"] != r["outputs"]]
    print(f"layout check: {len(rows) - len(bad)} of {len(rows)} kernels exact", flush=True)
    return rows


def run(out: Path, salt: str, *, deadline: float | None = None,
        sizes: dict[str, int] | None = None, runner: PlanRunner = gpu_runner,
        families: list[str] | None = None) -> Path:
    """Every plan (of ``families``); records, samples and mismatching dots in ``out``."""
    todo = plans(sizes, families)
    t_start = time.monotonic()
    header = {"what": "hopper16", "salt": salt, "versions": versions(),
              "command": " ".join(sys.argv), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
              "planned": len(todo), "sizes": sizes or SIZES,
              "families": list(families or UNSCALED),
              "runner": "gpu" if runner is gpu_runner else "dry run",
              "layout_check": _layout(runner)}
    rec = Recorder(out, header)
    samples: dict[str, vectors.VectorSet] = {}
    bad: dict[str, vectors.VectorSet] = {}
    ran = errors = 0
    stopped = False
    try:
        for i, plan in enumerate(todo):
            if deadline is not None and time.monotonic() - t_start > deadline:
                stopped = True
                break
            try:
                row, res = run_plan(plan, salt, runner, split_k=split_of(plan))
            except Exception as exc:            # record it and go on: one refusal spoils no run
                errors += 1
                rec.write({"kind": "error", "group": plan.group, "path": plan.path,
                           "preset": plan.preset, "gen": plan.gen, "salt": salt,
                           "seed": plan.seed(salt),
                           "error": f"{type(exc).__name__}: {exc}"[:500]})
                print(f"[{i + 1}/{len(todo)}] {plan.group} ERROR {exc}", file=sys.stderr,
                      flush=True)
                continue
            row["sample"] = f"{i:03d}"
            row["also"] = _also(plan, res)
            row["kernels"] = _kernels(plan, runner)
            rec.write(row)
            ran += 1
            samples[row["sample"]] = res.subset(slice(0, SAMPLE_ROWS), slice(0, SAMPLE_COLS))
            if row["equal"] != row["dots"]:
                bad[row["sample"]] = _mismatching(plan, res)
            if (i + 1) % 20 == 0 or row["equal"] != row["dots"]:
                print(f"[{i + 1}/{len(todo)}] {time.monotonic() - t_start:6.1f}s {plan.group} "
                      f"{row['a_format']} C={row['c_format']} {row['family']} k={row['k']} "
                      f"{row['equal']}/{row['dots']}", file=sys.stderr, flush=True)
    finally:
        gz = rec.close({"ran": ran, "errors": errors, "planned": len(todo),
                        "stopped_by_deadline": stopped, "deadline_s": deadline,
                        "seconds": round(time.monotonic() - t_start, 1),
                        "finished": time.strftime("%Y-%m-%d %H:%M:%S %Z")})
        if samples:
            save_bundle(samples, out / "samples.npz")
        if bad:
            save_bundle(bad, out / "mismatches.npz")
    print(f"hopper16: {ran} of {len(todo)} sets, {errors} errors, {len(bad)} sets with "
          f"mismatches" + (" (stopped by the deadline)" if stopped else ""), flush=True)
    return gz
