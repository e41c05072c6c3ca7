"""Big comparison runs on the GPU machine: regenerate inputs from seeds, run, compare there.

    PYTHONPATH=. python3 -m gpu.runs.collect --out DIR [--size N] [--long-size N]
    PYTHONPATH=. python3 -m gpu.runs.collect --what validate --salt NEW --out DIR   #
    gpu/runs/validate.py
    PYTHONPATH=. python3 -m gpu.runs.collect --what hopper16 --salt NEW --out DIR   #
    gpu/runs/dtypes.py

Every vector set is rebuilt from its seed with ``mxsim.vectors.generate``, run on the local
GPU, and compared bit for bit with the matching preset by the fast engine, on the GPU machine.
A seed is a hash of everything that names its set (salt, path, formats, family, K, ...), so
no two sets of a run, and no two salts, share one. The ``validate``, ``heldout`` and ``bias``
modes (``gpu/runs/validate.py``) write one JSON record per vector set, as committed under
``tests/data/h200/<run>/``; the older modes write summaries and samples.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from mxsim import presets, vectors
from mxsim.compare import compare
from mxsim.engine import fast

from ..device import device_info
from ..hopper import cublas
from ..paths import get as get_path
from .sets import SHAPES, load_bundle, operand_map_sets, save_bundle, stack
from .sets import seed as seed_of

__all__ = ["run", "run_paths", "paths_plans", "run_operand_map", "run_probe", "run_shapes",
           "main", "CANDIDATES", "SHAPES", "load_bundle", "operand_map_sets", "save_bundle"]

UNSCALED_FAMILIES = [f for f in vectors.FAMILIES if f != "nan-scale"]
LONG_K = (64, 256, 1024, 4096)


def _compare(vs_gpu, preset: str) -> dict:
    spec = presets.get(preset).spec_for(vs_gpu)
    model = fast.dot(spec, vs_gpu)
    report = compare(vs_gpu, model, actual_name="gpu", expected_name=preset, show=3)
    return {"dots": report.total, "equal": report.equal, "histogram": report.histogram,
            "first": [m.__dict__ for m in report.mismatches]}


def run(out: Path, size: int, long_size: int, salt: str = "") -> dict:
    info = device_info()
    summary: dict = {"device": info, "runs": [], "salt": salt,
                     "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    samples: dict[str, list[vectors.VectorSet]] = {}
    wgmma, cublas_fast = get_path("wgmma"), get_path("cublas-fast")
    t_gpu = 0.0
    n_gpu = 0
    for a, b in cublas.PAIRS:
        # wgmma: K = 32, one k-step per output, every family.
        for fam in UNSCALED_FAMILIES:
            seed = seed_of(salt, "k32", a, b, fam)
            vs = vectors.generate(fam, a_format=a, b_format=b, m=size, n=size, k=32,
                                  with_c=False, seed=seed)
            t0 = time.perf_counter()
            res = cublas.scaled_mm(vs, fast_accum=True)
            t_gpu += time.perf_counter() - t0
            n_gpu += vs.num_dots
            row = {"path": "wgmma-k32", "pair": f"{a}x{b}", "family": fam, "k": 32,
                   "salt": salt, "seed": seed, **_compare(res, wgmma.preset)}
            summary["runs"].append(row)
            samples.setdefault(f"wgmma_k32_{a}_{b}", []).append(res.subset(slice(0, 16),
                                                                           slice(0, 16)))
        # cublas: long K with and without fast accumulation.
        for k in LONG_K:
            for fam in UNSCALED_FAMILIES:
                seed = seed_of(salt, "long", a, b, fam, k)
                vs = vectors.generate(fam, a_format=a, b_format=b, m=long_size, n=long_size,
                                      k=k, with_c=False, seed=seed)
                for fast_accum in (True, False):
                    res = cublas.scaled_mm(vs, fast_accum=fast_accum)
                    row = {"path": "cublas-fast" if fast_accum else "cublas", "pair": f"{a}x{b}",
                           "family": fam, "k": k, "salt": salt, "seed": seed,
                           **_compare(res, cublas_fast.preset)}
                    if not fast_accum:
                        row["vs_exact"] = _compare(res, "exact")
                    summary["runs"].append(row)
                    # Samples for CI (8 x 8 outputs each): K = 1024 for every pair, K = 4096
                    # for e4m3 x e4m3.
                    if (fam, k) in (("normal", 1024), ("cancellation", 1024)) or (
                            (fam, k) in (("normal", 4096), ("llm", 4096))
                            and (a, b) == ("e4m3", "e4m3")):
                        key = f"{'fast' if fast_accum else 'noacc'}_k{k}_{a}_{b}_{fam}"
                        samples[key] = [res.subset(slice(0, 8), slice(0, 8))]
        print(f"{a}x{b} done", file=sys.stderr, flush=True)
    # GPU runner throughput, transfers included: one large K = 32 set.
    big = vectors.generate("uniform", a_format="e4m3", m=4096, n=4096, k=32, with_c=False,
                           seed=7)
    cublas.scaled_mm(big)                                          # warm-up
    t0 = time.perf_counter()
    cublas.scaled_mm(big)
    dt = time.perf_counter() - t0
    summary["throughput"] = {"dots": big.num_dots, "seconds": dt,
                             "dots_per_second": big.num_dots / dt,
                             "note": "torch._scaled_mm K=32 e4m3, host->device->host included"}
    summary["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    # Samples: each key's sets stacked on a batch axis (same shapes), a few files in all.
    bundle = {key: stack(sets) for key, sets in samples.items()}
    groups = {"h200_wgmma_k32.npz": [k for k in bundle if k.startswith("wgmma")],
              "h200_cublas_fast.npz": [k for k in bundle if k.startswith("fast")],
              "h200_cublas_noacc.npz": [k for k in bundle if k.startswith("noacc")]}
    for fname, keys in groups.items():
        save_bundle({key: bundle[key] for key in keys}, out / fname)
    return summary


# Candidate presets per path: the closest is the probe-and-fit issue's starting point.
CANDIDATES = {
    "mma-sync": ["hopper-mma-sync", "hopper-wgmma", "blackwell-f8f6f4", "exact"],
    "triton-dot": ["hopper-cublas-fast", "blackwell-f8f6f4", "exact"],
    "triton-dot-scaled": ["triton-dot-scaled-hopper", "blackwell-mxf8f6f4", "ocp-fp32",
                          "exact"],
    "cublas-fast": ["exact"], "cublas": ["hopper-cublas", "exact"],
}


def _vs_candidates(res, path: str, candidates: list[str] | None = None) -> dict:
    out = {}
    for preset in candidates or CANDIDATES[path]:
        if res.d_format != "fp32" and preset in ("exact", "hopper-cublas-fast",
                                                 "blackwell-mxf8f6f4", "ocp-fp32"):
            continue
        name = "hopper-wgmma" if (preset == "hopper-cublas-fast" and res.k == 32) else preset
        try:
            spec = presets.get(name).spec_for(res)
        except Exception as exc:        # a preset that cannot take these operands
            out[name] = {"error": str(exc)}
            continue
        try:
            model = fast.dot(spec, res)
            rep = compare(res, model, expected_format=spec.d_format, actual_name=path,
                          expected_name=name, show=2)
        except Exception as exc:     # record it and go on: one bad comparison spoils no run
            out[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        out[name] = {"dots": rep.total, "equal": rep.equal, "histogram": rep.histogram,
                     "first": [m.__dict__ for m in rep.mismatches]}
    return out


def _fp8_plans() -> list[tuple[str, dict]]:
    """mma-sync, triton-dot and triton-dot-scaled: every operand pair, C format and K."""
    plans = []
    for a in ("e4m3", "e5m2"):
        for b in ("e4m3", "e5m2"):
            for c_format in ("fp32", "fp16"):
                for k in (32, 256):
                    plans.append(("mma-sync", dict(a_format=a, b_format=b, k=k,
                                                   c_format=c_format)))
            if (a, b) != ("e5m2", "e5m2"):
                for k in (32, 256):
                    plans.append(("triton-dot", dict(a_format=a, b_format=b, k=k)))
    for a in ("e4m3", "e5m2", "e2m1"):
        for b in ("e4m3", "e5m2", "e2m1"):
            for k in ((128, 1024) if a == b else (128,)):
                plans.append(("triton-dot-scaled", dict(a_format=a, b_format=b, k=k,
                                                        scale_format="e8m0")))
    return plans


def _cublas_plans() -> list[tuple[str, dict]]:
    """cublas-fast and cublas with FP32 scales of every granularity, and cublas unscaled."""
    plans = []
    for gran in ("tensor", "row", "block"):
        for path in ("cublas-fast", "cublas"):
            # K/128 must be a multiple of 4 for cuBLASLt's block-wise modes; block-wise
            # scales also run a long K (16 scaled partials).
            for k in ((512, 2048) if gran == "block" and path == "cublas" else
                      (512,) if gran == "block" else (256,)):
                for a, b in cublas_pairs():
                    plans.append((path, dict(a_format=a, b_format=b, k=k, with_c=False,
                                             scale_format="fp32", scale_granularity=gran)))
    for a, b in cublas_pairs():
        for k in (256, 1024, 4096):
            plans.append(("cublas", dict(a_format=a, b_format=b, k=k, with_c=False)))
    return plans


def paths_plans(only: str | None = None, pairs: list[str] | None = None
                ) -> list[tuple[str, dict]]:
    """Every (path, generator options) of the paths mode, in run order.

    ``only``: the plans whose ``path:granularity`` contains any of its comma-separated parts;
    ``pairs``: the plans of these ``AxB`` operand pairs.
    """
    plans = _fp8_plans() + _cublas_plans()
    if only:
        plans = [(p, o) for p, o in plans if any(
            part in f"{p}:{o.get('scale_granularity', '')}" for part in only.split(","))]
    if pairs:
        plans = [(p, o) for p, o in plans if f"{o['a_format']}x{o['b_format']}" in pairs]
    return plans


def _families(opts: dict, families: list[str] | None) -> list[str]:
    """The generator families a plan runs (NaN scales only where the scales are codes)."""
    return [fam for fam in vectors.FAMILIES
            if not (fam == "nan-scale" and opts.get("scale_format") in (None, "fp32"))
            and (not families or fam in families)]


def _sample(res: vectors.VectorSet, o: dict) -> vectors.VectorSet:
    """The part of a run kept for CI: 8 or 16 rows, 16 columns (128 for block-wise scales,
    whose B scales cover 128 columns)."""
    cols = slice(0, 128 if o.get("scale_granularity") == "block" else 16)
    rows = slice(0, 8 if o.get("scale_format") == "fp32" else 16)
    return res.subset(rows, cols)


def run_paths(out: Path, size: int, only: str | None = None, salt: str = "",
              candidates: list[str] | None = None, families: list[str] | None = None,
              pairs: list[str] | None = None) -> dict:
    """Every Hopper path on every family: agreement with each candidate preset, and samples."""
    summary: dict = {"device": device_info(), "runs": [], "errors": [],
                     "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    out.mkdir(parents=True, exist_ok=True)
    samples: dict[str, list] = {}
    for path, opts in paths_plans(only, pairs):
        p = get_path(path)
        reason = p.unavailable_reason()
        if reason is not None:
            summary["errors"].append({"path": path, "error": reason})
            continue
        n = 128 if opts.get("scale_granularity") == "block" else size
        for fam in _families(opts, families):
            o = dict(opts)
            o.setdefault("with_c", True)
            seed = seed_of(salt, path, fam, size, n, o)
            try:
                vs = vectors.generate(fam, m=size, n=n, seed=seed, **o)
                res = p.run(vs)
            except Exception as exc:
                summary["errors"].append({"path": path, "family": fam, "opts": o,
                                          "error": f"{type(exc).__name__}: {exc}"[:500]})
                continue
            finally:
                # Written as we go: a crash later keeps what was measured.
                (out / "paths_summary.json").write_text(json.dumps(summary, default=str))
            summary["runs"].append({"path": path, "family": fam, **{k: str(v) for k, v in
                                                                    o.items()},
                                    "salt": salt, "seed": seed,
                                    "vs": _vs_candidates(res, path, candidates)})
            key = f"{path}_{o['a_format']}_{o['b_format']}_{o.get('c_format', 'fp32')}_" \
                  f"k{o['k']}_{o.get('scale_granularity', 'none')}"
            if _keep_sample(path, o, fam):
                samples.setdefault(key, []).append(_sample(res, o))
        print(f"{path} {opts} done", file=sys.stderr, flush=True)
    summary["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    out.mkdir(parents=True, exist_ok=True)
    (out / "paths_summary.json").write_text(json.dumps(summary, indent=1, default=str))
    if samples:
        save_bundle({key: stack(sets) for key, sets in samples.items()}, out / "h200_paths.npz")
    return summary


def run_operand_map(out: Path) -> dict:
    """tl.dot_scaled's operand upcast, every element code under every E8M0 scale."""
    from ..hopper.triton_dot import run_dot_scaled
    summary: dict = {"device": device_info(), "rows": [],
                     "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    maps = {}
    for fmt in ("e4m3", "e5m2", "e2m1"):
        for side, vs in operand_map_sets(fmt).items():
            res = run_dot_scaled(vs)
            spec = presets.get(get_path("triton-dot-scaled").preset).spec_for(res)
            model = fast.dot(spec, res)
            d = res.d[:, :, 0] if side != "b" else res.d[:, 0, :]
            maps[f"{fmt}/{side}"] = d
            summary["rows"].append({"format": fmt, "side": side, "dots": int(res.d.size),
                                    "equal": int((model == res.d).sum())})
            print(summary["rows"][-1], flush=True)
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / "triton_operand_map.npz", **maps)
    (out / "operand_map_summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary


def run_probe(out: Path) -> dict:
    """The fp8 probe suite (mxsim.probe) through the paths that take its e5m2 x e4m3 + C."""
    from mxsim.probe import probe_suite

    out.mkdir(parents=True, exist_ok=True)
    suite = probe_suite("fp8")
    vectors.save(suite, out / "probe_fp8.npz")
    summary: dict = {"device": device_info(), "rows": []}
    # tl.dot's chain is hopper-wgmma at the probe's K = 32 (the runner names no one preset:
    # beyond one instruction it is hopper-cublas-fast).
    pairs = (("triton-dot", "hopper-wgmma"), ("mma-sync", get_path("mma-sync").preset))
    for path, preset in pairs:
        res = get_path(path).run(suite)
        vectors.save(res, out / f"probe_fp8_{path}.npz")
        model = fast.dot(presets.get(preset).spec_for(res), res)
        summary["rows"].append({"path": path, "preset": preset, "dots": int(res.d.size),
                                "equal": int((model == res.d).sum())})
        print(summary["rows"][-1], flush=True)
    (out / "probe_summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary


def cublas_pairs():
    return cublas.PAIRS


def run_shapes(out: Path, preset: str, fast_accum: bool, salt: str = "") -> dict:
    """One cuBLASLt path on several M, N, K: where does ``preset`` hold?"""
    summary: dict = {"device": device_info(), "preset": preset, "fast_accum": fast_accum,
                     "salt": salt, "rows": []}
    for m, n, k in SHAPES:
        for fam in ("normal", "llm", "cancellation"):
            seed = seed_of(salt, "shape", m, n, k, fam)
            vs = vectors.generate(fam, a_format="e4m3", b_format="e4m3", m=m, n=n, k=k,
                                  with_c=False, seed=seed)
            res = cublas.scaled_mm(vs, fast_accum=fast_accum)
            spec = presets.get(preset).spec_for(res)
            eq = int((fast.dot(spec, res) == res.d).sum())
            summary["rows"].append({"m": m, "n": n, "k": k, "family": fam, "dots": res.d.size,
                                    "equal": eq, "salt": salt, "seed": seed})
            print(f"{m:5} {n:5} {k:5} {fam:13} {res.d.size:8} {eq:8}", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"shapes_{preset}.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary


def _keep_sample(path: str, o: dict, family: str) -> bool:
    """Which runs leave a sample for CI (a few hundred KB in all)."""
    if o.get("scale_format") == "fp32":
        return family == "normal" and (o["scale_granularity"] != "block"
                                       or (path == "cublas" and o["k"] == 512))
    if path == "triton-dot-scaled":
        # The operand upcast's special rules (scale 0x00, bf16 over/underflow, E5M2 Inf/NaN)
        # show in scale-extremes and specials.
        return o["k"] == 128 and o["a_format"] == o["b_format"] and family in (
            "normal", "specials", "scale-extremes")
    if o["k"] > 128 and not (path == "mma-sync" and o["a_format"] == o["b_format"] == "e4m3"
                             and o.get("c_format", "fp32") == "fp32"):
        return False
    return family in ("normal", "specials", "one-large")


def _paths_table(summary: dict) -> str:
    agg: dict = {}
    for r in summary["runs"]:
        for preset, v in r["vs"].items():
            if "dots" not in v:
                continue
            key = (r["path"], r["a_format"], r["b_format"], r.get("c_format", "fp32"), r["k"],
                   r.get("scale_granularity", "-"), preset)
            d, e = agg.get(key, (0, 0))
            agg[key] = (d + v["dots"], e + v["equal"])
    lines = ["path               a    b    C     K    scales  preset               dots   equal"]
    for (path, a, b, c, k, g, preset), (d, e) in agg.items():
        lines.append(f"{path:18} {a} {b} {c:5} {k:4} {g:7} {preset:18} {d:7} {e:7}")
    for err in summary["errors"][:20]:
        lines.append(f"ERROR {err}")
    return "\n".join(lines)


def _table(summary: dict) -> str:
    lines = ["path         pair       K      dots      equal   vs preset"]
    agg: dict = {}
    for r in summary["runs"]:
        key = (r["path"], r["pair"], r["k"])
        d, e = agg.get(key, (0, 0))
        agg[key] = (d + r["dots"], e + r["equal"])
    for (path, pair, k), (d, e) in agg.items():
        preset = get_path("wgmma" if path == "wgmma-k32" else "cublas-fast").preset
        lines.append(f"{path:12} {pair:10} {k:<5} {d:>9} {e:>10}   {preset}")
    tot = {}
    for r in summary["runs"]:
        d, e = tot.get(r["path"], (0, 0))
        tot[r["path"]] = (d + r["dots"], e + r["equal"])
    for path, (d, e) in tot.items():
        lines.append(f"TOTAL {path:12} dots {d}  bit-equal {e}  mismatches {d - e}")
    lines.append(f"throughput {summary['throughput']['dots_per_second']:.3e} dots/s")
    return "\n".join(lines)


def _records_mode(args: argparse.Namespace) -> int:
    """The modes that write records (gpu/runs/validate.py, gpu/runs/dtypes.py)."""
    from . import validate
    if args.what != "bias" and not args.salt:
        print("gpu.runs.collect: --salt must be a new, non-empty string for a validation run "
              "(it changes every seed)", file=sys.stderr)
        return 2
    runner = validate.model_runner if args.dry_run else validate.gpu_runner
    if args.what == "hopper16":
        from . import dtypes as hopper16
        hopper16.run(args.out, args.salt, deadline=args.deadline, runner=runner,
                     sizes=hopper16.DRY_SIZES if args.dry_run else None,
                     families=args.families.split(",") if args.families else None)
    elif args.what == "validate":
        validate.validate(args.out, args.salt, deadline=args.deadline, runner=runner,
                          sizes=validate.DRY_SIZES if args.dry_run else None)
    elif args.what == "heldout":
        validate.heldout(args.out, args.salt, runner=runner)
    else:
        validate.bias(args.out, args.salt or "bias")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpu.runs.collect",
                                description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, type=Path, metavar="DIR")
    p.add_argument("--size", type=int, default=256, help="M = N of the K=32 sets "
                                                         "(default: %(default)s)")
    p.add_argument("--long-size", type=int, default=64, help="M = N of the long-K sets "
                                                             "(default: %(default)s)")
    p.add_argument("--what", choices=("hopper", "paths", "shapes", "operand-map", "probe",
                                      "validate", "heldout", "bias", "hopper16"),
                   default="hopper",
                   help="validate: every hardware validation the docs cite, one record per "
                        "vector set (gpu/runs/validate.py); heldout: small sets of every "
                        "configuration with their GPU outputs, for CI to replay; bias: "
                        "torch._scaled_mm with a bias vector; hopper: the hopper-wgmma/"
                        "hopper-cublas-fast validation as a summary; paths: every path against "
                        "its candidate presets; operand-map: tl.dot_scaled's operand upcast, "
                        "every code under every scale; probe: the fp8 probe suite through "
                        "triton-dot and mma-sync (default: %(default)s)")
    p.add_argument("--dry-run", action="store_true",
                   help="validate/heldout/hopper16: no GPU; each plan's preset stands in for "
                        "it, on tiny "
                        "sets (checks the plans and the record writing)")
    p.add_argument("--deadline", type=float, default=None, metavar="SECONDS",
                   help="validate/hopper16: start no new set after this many seconds (the "
                        "records "
                        "say the run was cut)")
    p.add_argument("--families", default=None, metavar="F1,F2",
                   help="paths and hopper16 modes: run only these generator families "
                        "(hopper16: e-zero too)")
    p.add_argument("--only", metavar="TEXT", default=None,
                   help="paths mode: run only the plans whose 'path:granularity' contains "
                        "TEXT (several, comma-separated: any of them)")
    p.add_argument("--pairs", default=None, metavar="AxB,...",
                   help="paths mode: run only these operand pairs (e.g. e4m3xe5m2)")
    p.add_argument("--salt", default="", help="changes every seed: fresh vectors for a "
                                               "validation run (default: none)")
    p.add_argument("--candidates", default=None, metavar="P1,P2",
                   help="paths mode: compare with these presets only")
    args = p.parse_args(argv)
    if args.what in ("validate", "heldout", "bias", "hopper16"):
        return _records_mode(args)
    if args.what == "shapes":
        run_shapes(args.out, args.candidates or "hopper-cublas", fast_accum=False,
                   salt=args.salt)
        return 0
    if args.what == "operand-map":
        run_operand_map(args.out)
        return 0
    if args.what == "probe":
        run_probe(args.out)
        return 0
    if args.what == "paths":
        summary = run_paths(args.out, args.size, args.only, args.salt,
                            args.candidates.split(",") if args.candidates else None,
                            args.families.split(",") if args.families else None,
                            args.pairs.split(",") if args.pairs else None)
        print(_paths_table(summary))
        return 0
    reason = cublas.unavailable_reason()
    if reason is not None:
        print(f"gpu.runs.collect: cublas path unavailable: {reason}", file=sys.stderr)
        return 2
    summary = run(args.out, args.size, args.long_size, args.salt)
    print(_table(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
