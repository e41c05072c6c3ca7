"""A Llama-sized FP8 linear layer through ``torch._scaled_mm`` against ``mxsim.torch``, bit for bit.

The real-GPU check of the whole route (issue 18, item 4)::

    python -m gpu.engine.torch_layer --out DIR [--quick | --shape M K N] [--seed S] [--budget SEC]

Inputs are drawn from the seed with numpy (so a CPU can draw any part of them again): the
activations X (M, K) of Llama-3-8B's down projection (K = 14336, N = 4096; M = 4096 tokens)
and its weight W, stored as B = W.T (K, N). Each is quantised to E4M3 by the recipe of the
scale granularity (:mod:`mxsim.quantize.recipes`): ``fp8-tensor`` (torchao's amax scale),
``fp8-row`` (per row of X and column of B; FP32 scales, not powers of two, so the epilogue
rounds), ``fp8-block`` (DeepSeek-V3: 1 x 128 and 128 x 128). Every configuration
(``use_fast_accum`` True/False x per-tensor / row-wise / block-wise x bf16 / fp32 output)
runs ``torch._scaled_mm`` (a refusal is recorded with torch's message) and
``mxsim.torch.scaled_mm(..., engine=...)`` on the same CUDA tensors, and their output bits are
compared on the device. One configuration failing does not lose the others; the summary is
rewritten after each. Before the first, every configuration runs once on a small draw
(``warmup_s``; ``--no-warmup`` leaves it out), so that each configuration's seconds are its
own and not the process's start-up.

Written to ``--out``: ``torch_layer.json`` (per configuration: shapes, seed, sha256 of
torch's and of mxsim's output bits, mismatches, times, the first mismatching entries) and
``torch_layer.npz`` (``SAMPLE_ROWS`` whole rows of every real output, mxsim's where they
differ, and the sample's rows and column tiles). :func:`replay` draws the sample's inputs again
on a CPU and holds ``mxsim.torch`` (fast engine) equal to the recorded rows
(tests/gpu/test_gpu_torch_layer.py). ``--resume`` keeps the finished configurations of an earlier
run in ``--out`` (after a timeout) and runs the rest.

How the draw makes a sample cheap to redraw: row r of X comes from its own generator, and
so does each tile of 128 columns of B; X[0, 0] and B[0, 0] hold the tensors' largest
magnitudes (every other value is clipped below them), so a per-tensor amax is known from row 0
and tile 0 alone, which every sample includes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SHAPE", "QUICK", "configs", "activations", "weights", "quantise", "sample",
           "run", "replay", "main"]

#: Llama-3-8B's down projection: 4096 tokens, K = the FFN width 14336, N = the hidden 4096.
SHAPE = (4096, 14336, 4096)
#: ``--quick``: the smallest shape every granularity takes (block-wise: K/128 a multiple of 4).
QUICK = (256, 1024, 512)
TILE = 128
#: Activations: normal x a per-channel scale (log-normal, 0.5% outlier channels x 32),
#: clipped to X_CLIP, X[0, 0] = X_PLANT. Weights: normal x W_STD clipped, B[0, 0] = W_PLANT.
X_CLIP, X_PLANT = 200.0, 256.0
W_STD, W_CLIP, W_PLANT = 0.015, 0.25, 0.3
GRANULARITIES = ("tensor", "row", "block")
OUTS = ("bfloat16", "float32")
SAMPLE_ROWS, SAMPLE_TILES = 4, 2
_RECIPES = {"tensor": ("fp8-tensor", {}), "row": ("fp8-row", {"pow2_scales": False}),
            "block": ("fp8-block", {})}


def configs() -> list[tuple[str, str, bool]]:
    """(out dtype, granularity, use_fast_accum) of every configuration, bf16 outputs first."""
    return [(out, gran, fast) for out in OUTS for gran in GRANULARITIES for fast in (False, True)]


def key(out: str, gran: str, fast: bool) -> str:
    return f"{gran}-{'fast' if fast else 'nofast'}-{'bf16' if out == 'bfloat16' else 'fp32'}"


def _channels(seed: int, k: int) -> np.ndarray:
    rng = np.random.default_rng([seed, 2])
    scale = rng.lognormal(-1.0, 0.6, k)
    scale[rng.random(k) < 0.005] *= 32.0
    return scale.astype(np.float32)


def activations(seed: int, rows: Any, k: int) -> np.ndarray:
    """Rows ``rows`` of X (float32), each from its own generator."""
    ch = _channels(seed, k)
    out = np.empty((len(rows), k), np.float32)
    for i, r in enumerate(rows):
        x = np.random.default_rng([seed, 0, int(r)]).standard_normal(k, dtype=np.float32) * ch
        out[i] = np.clip(x, -X_CLIP, X_CLIP)
        if r == 0:
            out[i, 0] = X_PLANT
    return out


def weights(seed: int, k: int, tiles: Any) -> np.ndarray:
    """Column tiles ``tiles`` (TILE columns each) of B = W.T (K, N), float32."""
    out = np.empty((k, TILE * len(tiles)), np.float32)
    for i, t in enumerate(tiles):
        w = np.random.default_rng([seed, 1, int(t)]).standard_normal((k, TILE), dtype=np.float32)
        w = np.clip(w * np.float32(W_STD), -W_CLIP, W_CLIP)
        if t == 0:
            w[0, 0] = W_PLANT
        out[:, i * TILE:(i + 1) * TILE] = w
    return out


def quantise(x: np.ndarray, b: np.ndarray, gran: str) -> tuple[np.ndarray, ...]:
    """E4M3 codes and FP32 scales of X and B by the granularity's recipe: (ca, sa, cb, sb)."""
    from mxsim.quantize.recipes import recipe
    name, opts = _RECIPES[gran]
    qa = recipe(name).quantise(x, "a", **opts)
    qb = recipe(name).quantise(b, "b", **opts)
    return qa.codes, qa.scale, qb.codes, qb.scale


def sample(seed: int, m: int, n: int) -> tuple[list[int], list[int]]:
    """The sample's rows (row 0 first) and column tiles (tile 0 first)."""
    rng = np.random.default_rng([seed, 9])
    rows = [0] + sorted(int(r) for r in rng.choice(np.arange(1, m), SAMPLE_ROWS - 1,
                                                   replace=False))
    tiles = [0] + sorted(int(t) for t in rng.choice(np.arange(1, n // TILE), SAMPLE_TILES - 1,
                                                    replace=False))
    return rows, tiles


def torch_operands(torch: Any, ca: np.ndarray, sa: np.ndarray, cb: np.ndarray, sb: np.ndarray,
                   gran: str, device: str) -> tuple[Any, ...]:
    """a (M, K) row-major, b (K, N) column-major, and the scales, as torch._scaled_mm takes
    them on ``device`` (block-wise scales outer-dim-major, as cuBLASLt reads them)."""
    a = torch.from_numpy(np.ascontiguousarray(ca)).to(device).view(torch.float8_e4m3fn)
    b = torch.from_numpy(np.ascontiguousarray(cb.T)).to(device).view(torch.float8_e4m3fn).t()
    if gran == "block":
        ta = torch.from_numpy(np.ascontiguousarray(sa.T)).to(device).t()
        tb = torch.from_numpy(np.ascontiguousarray(sb.T)).to(device).t()
    else:
        ta = torch.from_numpy(np.ascontiguousarray(sa)).to(device)
        tb = torch.from_numpy(np.ascontiguousarray(sb)).to(device)
    return a, b, ta, tb


def real_scaled_mm(torch: Any, a: Any, b: Any, sa: Any, sb: Any, out_dtype: Any,
                   fast: bool) -> Any:
    """The real thing: ``torch._scaled_mm`` (a CPU test stands mxsim in for it)."""
    out = torch._scaled_mm(a, b, sa, sb, out_dtype=out_dtype, use_fast_accum=fast)
    if out.is_cuda:
        torch.cuda.synchronize()
    return out


def _bits(torch: Any, t: Any) -> Any:
    return t.view(torch.int16 if t.dtype == torch.bfloat16 else torch.int32)


def _sha(torch: Any, t: Any) -> str:
    return hashlib.sha256(_bits(torch, t).cpu().numpy().tobytes()).hexdigest()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"


def _mismatches(torch: Any, real: Any, mine: Any, limit: int = 8) -> tuple[int, list]:
    """How many output bits differ, and the first few (row, col, real hex, mxsim hex)."""
    rb, mb = _bits(torch, real), _bits(torch, mine)
    neq = rb != mb
    count = int(neq.sum().item())
    first = []
    if count:
        mask = 0xFFFF if real.dtype == torch.bfloat16 else 0xFFFFFFFF
        for r, c in neq.nonzero()[:limit].tolist():
            first.append([r, c, f"{int(rb[r, c]) & mask:#x}", f"{int(mb[r, c]) & mask:#x}"])
    return count, first


def _profiled(torch: Any, fn: Any) -> tuple[Any, list[str]]:
    """``fn()`` and the names of the CUDA kernels it ran (torch's profiler; none on a CPU)."""
    if not torch.cuda.is_available():
        return fn(), []
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            out = fn()
        names = sorted({e.key for e in prof.key_averages()
                        if not any(w in e.key.lower() for w in ("memcpy", "memset"))})
        return out, names
    except Exception as exc:                           # noqa: BLE001 (the profiler is extra:
        return fn(), [f"profiler failed: {_first_line(exc)}"]   # run fn again without it)


def _unit_name(gran: str, fast: bool) -> str:
    from mxsim import units
    from mxsim.torch.functions import fp32_unit
    from mxsim.torch.scaled import scaled_unit
    return fp32_unit(units.get(scaled_unit(gran, fast)), "e4m3", "e4m3", gran).name


def run_config(torch: Any, ops: tuple, cfg: tuple[str, str, bool], engine: str,
               rows: list[int]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """One configuration: torch._scaled_mm and mxsim.torch.scaled_mm, compared on the device."""
    import mxsim.torch as mt
    out, gran, fast = cfg
    dtype = getattr(torch, out)
    rec: dict[str, Any] = {"key": key(*cfg), "out_dtype": out, "scales": gran,
                           "use_fast_accum": fast}
    arrays: dict[str, np.ndarray] = {}
    t0 = time.perf_counter()
    try:
        real = real_scaled_mm(torch, *ops, dtype, fast)
        again, rec["torch_kernels"] = _profiled(torch, lambda: real_scaled_mm(
            torch, *ops, dtype, fast))
        rec["torch_repeat_equal"] = bool(torch.equal(_bits(torch, real), _bits(torch, again)))
        del again
    except RuntimeError as exc:
        rec["torch_refused"] = _first_line(exc)
        real = None
    rec["torch_s"] = round(time.perf_counter() - t0, 3)
    try:
        rec["mxsim_unit"] = _unit_name(gran, fast)
    except Exception as exc:                           # noqa: BLE001 (recorded, not raised)
        rec["mxsim_unit_refused"] = _first_line(exc)
    t0 = time.perf_counter()
    try:
        mine = mt.scaled_mm(*ops, out_dtype=dtype, use_fast_accum=fast, engine=engine)
    except Exception as exc:                           # noqa: BLE001 (recorded, not raised)
        rec["mxsim_refused"] = _first_line(exc)
        mine = None
    rec["mxsim_s"] = round(time.perf_counter() - t0, 3)
    if real is not None:
        rec["torch_sha256"] = _sha(torch, real)
        arrays["real"] = _bits(torch, real)[rows].cpu().numpy()
    if mine is not None:
        rec["mxsim_sha256"] = _sha(torch, mine)
    if real is not None and mine is not None:
        rec["dots"] = int(real.numel())
        rec["mismatches"], rec["first_mismatches"] = _mismatches(torch, real, mine)
    if mine is not None and (real is None or rec["mismatches"]):
        arrays["mxsim"] = _bits(torch, mine)[rows].cpu().numpy()     # kept where they differ
    return rec, arrays


def _write(out: Path, summary: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """The summary and the sample, each written to a temporary file and renamed."""
    tmp = out / "torch_layer.json.tmp"
    tmp.write_text(json.dumps(summary, indent=1, default=str) + "\n")
    os.replace(tmp, out / "torch_layer.json")
    with open(out / "torch_layer.npz.tmp", "wb") as fh:
        np.savez_compressed(fh, **arrays)
    os.replace(out / "torch_layer.npz.tmp", out / "torch_layer.npz")


def _header(args: argparse.Namespace, shape: tuple[int, int, int]) -> dict[str, Any]:
    head: dict[str, Any] = {"command": "python -m gpu.engine.torch_layer " + " ".join(args.argv),
                            "shape": {"m": shape[0], "k": shape[1], "n": shape[2]},
                            "seed": args.seed, "engine": args.engine, "device": args.device,
                            "draw": {"x_clip": X_CLIP, "x_plant": X_PLANT, "w_std": W_STD,
                                     "w_clip": W_CLIP, "w_plant": W_PLANT, "tile": TILE},
                            "recipes": {g: [r, o] for g, (r, o) in _RECIPES.items()}}
    try:
        from ..runs.validate import versions
        head["versions"] = versions()
    except Exception as exc:                           # noqa: BLE001 (recorded, not raised)
        head["versions"] = {"error": _first_line(exc)}
    return head


def _previous(out: Path, shape: tuple[int, int, int], seed: int
              ) -> tuple[dict[str, dict[str, Any]], dict[str, np.ndarray]]:
    """The finished configurations of an earlier run of the same draw in ``out`` (``--resume``),
    and its sample arrays; nothing when there is none."""
    path = out / "torch_layer.json"
    if not path.exists():
        return {}, {}
    old = json.loads(path.read_text())
    if (old["shape"]["m"], old["shape"]["k"], old["shape"]["n"]) != tuple(shape) \
            or old["seed"] != seed:
        return {}, {}
    done = {c["key"]: c for c in old["configs"] if "mismatches" in c or "torch_refused" in c}
    with np.load(out / "torch_layer.npz") as z:
        arrays = {name: z[name] for name in z.files if name.split("/")[0] in done}
    return done, arrays


def warm_up(torch: Any, grans: Any, shape: tuple[int, int, int], engine: str,
            device: str) -> None:
    """Every configuration of the scale granularities ``grans`` once, torch._scaled_mm and
    mxsim.torch.scaled_mm, on an M x 512 x N draw of seed 1 (``shape`` is the layer's M, K,
    N; K = 512 is the shortest every granularity takes): CUDA's, cuBLAS's and the kernels'
    start-up (their compilation included) and the memory pools' growth to the output's size,
    before the first timed configuration."""
    import mxsim.torch as mt
    m, k, n = shape
    k = min(k, 512)
    x, b = activations(1, range(m), k), weights(1, k, range(n // TILE))
    for gran in grans:
        ops = torch_operands(torch, *quantise(x, b, gran), gran, device)
        for out, g, fast in configs():
            if g != gran:
                continue
            try:
                real_scaled_mm(torch, *ops, getattr(torch, out), fast)
            except Exception:                          # noqa: BLE001 (recorded when timed)
                pass
            try:
                mt.scaled_mm(*ops, out_dtype=getattr(torch, out), use_fast_accum=fast,
                             engine=engine)
            except Exception:                          # noqa: BLE001 (recorded when timed)
                pass
    if device == "cuda":
        torch.cuda.synchronize()


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every configuration on one draw; the summary and sample written after each."""
    import torch
    m, k, n = args.shape
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    done, arrays = _previous(out, (m, k, n), args.seed) if args.resume else ({}, {})
    rows, tiles = sample(args.seed, m, n)
    summary = _header(args, (m, k, n))
    summary.update(rows=rows, tiles=tiles, configs=[], resumed=sorted(done))
    arrays.update({"rows": np.asarray(rows), "tiles": np.asarray(tiles),
                   "seed": np.asarray(args.seed, np.uint64), "shape": np.asarray((m, k, n))})
    start = time.perf_counter()
    x = activations(args.seed, range(m), k)
    b = weights(args.seed, k, range(n // TILE))
    summary["draw_s"] = round(time.perf_counter() - start, 3)
    ops: dict[str, Any] = {}
    for gran in GRANULARITIES:
        if all(key(*c) in done for c in configs() if c[1] == gran):
            continue
        t0 = time.perf_counter()
        try:
            ops[gran] = torch_operands(torch, *quantise(x, b, gran), gran, args.device)
        except Exception as exc:                       # noqa: BLE001 (recorded, not raised)
            summary[f"quantise_{gran}_error"] = _first_line(exc)
        summary[f"quantise_{gran}_s"] = round(time.perf_counter() - t0, 3)
    del x, b
    if args.warmup:
        t0 = time.perf_counter()
        warm_up(torch, [g for g in GRANULARITIES if g in ops], (m, k, n), args.engine,
                args.device)
        summary["warmup_s"] = round(time.perf_counter() - t0, 3)
        summary["warmup_shape"] = f"{m} x {min(k, 512)} x {n}"
    for cfg in configs():
        name = key(*cfg)
        if name in done:
            rec, arr = done[name], {}
        elif cfg[1] not in ops:
            rec, arr = {"key": name, "error": summary[f"quantise_{cfg[1]}_error"]}, {}
        elif time.perf_counter() - start > args.budget:
            rec, arr = {"key": name, "skipped": "time budget"}, {}
        else:
            try:
                rec, arr = run_config(torch, ops[cfg[1]], cfg, args.engine, rows)
            except Exception as exc:                   # noqa: BLE001 (recorded, not raised)
                rec, arr = {"key": name, "error": _first_line(exc)}, {}
            print(json.dumps(rec, default=str), flush=True)
        summary["configs"].append(rec)
        arrays.update({f"{name}/{a}": v for a, v in arr.items()})
        _write(out, summary, arrays)
        if args.device == "cuda":
            torch.cuda.empty_cache()
    summary["total_s"] = round(time.perf_counter() - start, 3)
    _write(out, summary, arrays)
    return summary


def replay(summary: dict[str, Any], arrays: Any, *, rows: int = 2,
           keys: Any = None) -> dict[str, tuple[int, int]]:
    """mxsim.torch (CPU, fast engine) on the sample's inputs drawn again, against the
    recorded real outputs: {config key: (equal, total)} over the first ``rows`` sample rows
    and the sample's column tiles."""
    import torch

    import mxsim.torch as mt
    m, k, n = (summary["shape"][d] for d in "mkn")
    seed, rws, tiles = summary["seed"], summary["rows"][:rows], summary["tiles"]
    x = activations(seed, rws, k)
    b = weights(seed, k, tiles)
    cols = np.concatenate([np.arange(t * TILE, (t + 1) * TILE) for t in tiles])
    cols_local = np.arange(len(cols))
    out: dict[str, tuple[int, int]] = {}
    for gran in GRANULARITIES:
        ops = torch_operands(torch, *quantise(x, b, gran), gran, "cpu")
        for cfg in [c for c in configs() if c[1] == gran]:
            name = key(*cfg)
            if (keys is not None and name not in keys) or f"{name}/real" not in arrays:
                continue
            real = np.asarray(arrays[f"{name}/real"])[:rows][:, cols]
            mine = mt.scaled_mm(*ops, out_dtype=getattr(torch, cfg[0]), use_fast_accum=cfg[2],
                                engine="fast")
            got = _bits(torch, mine).numpy()[:, cols_local]
            out[name] = (int((got == real).sum()), int(real.size))
    return out


# -- the figures of docs/torch.md, from the committed run ---------------------------------------

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "h200" / "2026-12-02-torch"
DOC = ROOT / "docs" / "torch.md"
NOT_RUN = ("_not yet run on the H200: `python -m gpu.engine.torch_layer --out "
           "tests/data/h200/2026-12-02-torch` writes the files this table is computed from_")


def _row(c: dict[str, Any]) -> list[str]:
    fast = "on" if c.get("use_fast_accum") else "off"
    out = {"bfloat16": "bf16", "float32": "fp32"}.get(c.get("out_dtype"), "?")
    if "torch_refused" in c:
        torch_col = f"refused: {c['torch_refused'].split(': ', 1)[-1]}"
    else:
        torch_col = "skipped" if "skipped" in c else "error" if "error" in c else "ran"
    unit = c.get("mxsim_unit") or ("refused" if "mxsim_unit_refused" in c else "")
    dots = f"{c['dots']:,}" if "dots" in c else ""
    mism = f"{c['mismatches']:,}" if "mismatches" in c else ""
    secs = (f"{c['torch_s']:.3f} / {c['mxsim_s']:.2f}" if "mismatches" in c else "")
    return [c.get("scales", "?"), fast, out, torch_col, f"`{unit}`" if unit else "", dots, mism,
            secs]


def figures(data: Path = DATA) -> dict[str, str]:
    """The figure spans of docs/torch.md (``torch:layer``, ``torch:device``), computed from
    the committed summary, or saying that the run has not been committed."""
    path = data / "torch_layer.json"
    if not path.exists():
        return {"torch:layer": NOT_RUN, "torch:device": "not run", "torch:kernels": "not run"}
    summary = json.loads(path.read_text())
    head = ["scales", "fast accum", "out", "torch._scaled_mm", "mxsim.torch unit", "outputs",
            "mismatches", "seconds (torch / mxsim)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 5 + "---:|" * 3]
    lines += ["| " + " | ".join(_row(c)) + " |" for c in summary["configs"]]
    shape = summary["shape"]
    dev = summary.get("versions", {}).get("device", {})
    device = (f"{dev.get('gpu', '?')}, torch {dev.get('torch', '?')}, CUDA {dev.get('cuda', '?')},"
              f" cuBLAS {dev.get('cublas', '?')}; M x K x N = {shape['m']} x {shape['k']} x "
              f"{shape['n']}, seed {summary['seed']}, engine {summary['engine']}")
    kernels = sorted({k for c in summary["configs"] for k in c.get("torch_kernels", [])})
    return {"torch:layer": "\n".join(lines), "torch:device": device,
            "torch:kernels": ", ".join(f"`{k}`" for k in kernels) or "none recorded"}


def render_doc(check: bool, doc: Path = DOC, data: Path = DATA) -> int:
    """Fill (or, with ``check``, compare) the figure spans of docs/torch.md: 0 when they
    are current, 1 when ``check`` finds one stale."""
    from ..runs.figures import render
    text = doc.read_text()
    new, changed = render(text, figures(data))
    if check:
        return 1 if changed else 0
    if new != text:
        doc.write_text(new)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gpu.engine.torch_layer", description=__doc__.split(
        "\n\n")[0])
    p.add_argument("--out", metavar="DIR", help="where the summary goes")
    p.add_argument("--figures", action="store_true",
                   help="fill docs/torch.md's figures from the committed run, and stop")
    p.add_argument("--check", action="store_true", help="with --figures: only compare")
    p.add_argument("--shape", type=int, nargs=3, metavar=("M", "K", "N"), default=SHAPE,
                   help="M K N (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help=f"shape {QUICK}")
    p.add_argument("--seed", type=int, default=20261202, help="(default: %(default)s)")
    p.add_argument("--engine", default="gpu", help="mxsim engine (default: %(default)s)")
    p.add_argument("--device", default="cuda", help="torch device (default: %(default)s)")
    p.add_argument("--resume", action="store_true",
                   help="keep the finished configurations of an earlier run of the same draw "
                        "in --out and run the rest")
    p.add_argument("--no-warmup", dest="warmup", action="store_false",
                   help="time the first configuration with CUDA's and the kernels' start-up "
                        "in it (by default every configuration runs once first on an M x 512 x "
                        "N draw, timed apart as warmup_s)")
    p.add_argument("--budget", type=float, default=480.0, metavar="SEC",
                   help="skip configurations started after this many seconds "
                        "(default: %(default)s)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    args.argv = argv
    if args.figures:
        return render_doc(args.check)
    if not args.out:
        print("gpu.engine.torch_layer: error: --out DIR is required", file=sys.stderr)
        return 2
    if args.quick:
        args.shape = QUICK
    m, k, n = args.shape
    if k % 512 or n % TILE or m < SAMPLE_ROWS or n // TILE < SAMPLE_TILES:
        print(f"gpu.engine.torch_layer: error: --shape needs K a multiple of 512, N of {TILE} (at "
              f"least {SAMPLE_TILES * TILE}) and M >= {SAMPLE_ROWS}", file=sys.stderr)
        return 2
    summary = run(args)
    bad = [c["key"] for c in summary["configs"] if c.get("mismatches")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
