"""Big comparison runs on the GPU machine: regenerate inputs from seeds, run, compare there.

    PYTHONPATH=. python3 -m gpu.collect --out DIR [--size N] [--long-size N]

Every vector set is rebuilt from its seed with ``mxsim.vectors.generate``, run on the local
GPU, and compared bit for bit with the matching preset by the fast engine, on the GPU machine.
What comes back is small: ``summary.json`` (counts per path, format pair, family and K, with
the first mismatches) and a few sample result files for the CI tests (``tests/data/h200``).
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

from . import cublas
from .device import device_info

UNSCALED_FAMILIES = [f for f in vectors.FAMILIES if f != "nan-scale"]
LONG_K = (64, 256, 1024, 4096)


def _seed(*parts) -> int:
    return int.from_bytes(json.dumps(parts).encode()[:7].ljust(7, b"\0"), "little") % (2 ** 31)


def _compare(vs_gpu, preset: str) -> dict:
    spec = presets.get(preset).spec_for(vs_gpu)
    model = fast.dot(spec, vs_gpu)
    report = compare(vs_gpu, model, actual_name="gpu", expected_name=preset, show=3)
    return {"dots": report.total, "equal": report.equal, "histogram": report.histogram,
            "first": [m.__dict__ for m in report.mismatches]}


def run(out: Path, size: int, long_size: int) -> dict:
    info = device_info()
    summary: dict = {"device": info, "runs": [], "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    samples: dict[str, vectors.VectorSet] = {}
    t_gpu = 0.0
    n_gpu = 0
    for a, b in cublas.PAIRS:
        # wgmma: K = 32, one k-step per output, every family.
        for fam in UNSCALED_FAMILIES:
            vs = vectors.generate(fam, a_format=a, b_format=b, m=size, n=size, k=32,
                                  with_c=False, seed=_seed("k32", a, b, fam))
            t0 = time.perf_counter()
            res = cublas.scaled_mm(vs, fast_accum=True)
            t_gpu += time.perf_counter() - t0
            n_gpu += vs.num_dots
            row = {"path": "wgmma-k32", "pair": f"{a}x{b}", "family": fam, "k": 32,
                   **_compare(res, "hopper-wgmma")}
            summary["runs"].append(row)
            samples.setdefault(f"wgmma_k32_{a}_{b}", []).append(res.subset(slice(0, 16),
                                                                           slice(0, 16)))
        # cublas: long K with and without fast accumulation.
        for k in LONG_K:
            for fam in UNSCALED_FAMILIES:
                vs = vectors.generate(fam, a_format=a, b_format=b, m=long_size, n=long_size,
                                      k=k, with_c=False, seed=_seed("long", a, b, fam, k))
                for fast_accum in (True, False):
                    res = cublas.scaled_mm(vs, fast_accum=fast_accum)
                    row = {"path": "cublas-fast" if fast_accum else "cublas", "pair": f"{a}x{b}",
                           "family": fam, "k": k, **_compare(res, "hopper-cublas-fast")}
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
    bundle = {}
    for key, sets in samples.items():
        first = sets[0]
        bundle[key] = vectors.VectorSet(
            **{**first.__dict__, "a": np.stack([s.a for s in sets]),
               "b": np.stack([s.b for s in sets]), "d": np.stack([s.d for s in sets]),
               "extra": {**first.extra, "families": [s.extra.get("family") for s in sets]}})
    groups = {"h200_wgmma_k32.npz": [k for k in bundle if k.startswith("wgmma")],
              "h200_cublas_fast.npz": [k for k in bundle if k.startswith("fast")],
              "h200_cublas_noacc.npz": [k for k in bundle if k.startswith("noacc")]}
    for fname, keys in groups.items():
        save_bundle({key: bundle[key] for key in keys}, out / fname)
    return summary


def save_bundle(sets: dict[str, vectors.VectorSet], path: Path) -> None:
    """Several vector sets in one ``.npz``: set ``key``'s arrays are stored as ``key/name``."""
    arrays = {f"{key}/{name}": arr for key, vs in sets.items()
              for name, arr in vectors.to_arrays(vs).items()}
    np.savez_compressed(path, **arrays)


def load_bundle(path: str | Path) -> dict[str, vectors.VectorSet]:
    """The vector sets of a bundle written by :func:`save_bundle`, each validated."""
    with np.load(path, allow_pickle=False) as z:
        grouped: dict[str, dict] = {}
        for name in z.files:
            key, _, member = name.rpartition("/")
            grouped.setdefault(key, {})[member] = z[name]
    return {key: vectors.from_arrays(arrays, f"{path}:{key}")
            for key, arrays in grouped.items()}


def _table(summary: dict) -> str:
    lines = ["path         pair       K      dots      equal   vs preset"]
    agg: dict = {}
    for r in summary["runs"]:
        key = (r["path"], r["pair"], r["k"])
        d, e = agg.get(key, (0, 0))
        agg[key] = (d + r["dots"], e + r["equal"])
    for (path, pair, k), (d, e) in agg.items():
        preset = "hopper-wgmma" if path == "wgmma-k32" else "hopper-cublas-fast"
        lines.append(f"{path:12} {pair:10} {k:<5} {d:>9} {e:>10}   {preset}")
    tot = {}
    for r in summary["runs"]:
        d, e = tot.get(r["path"], (0, 0))
        tot[r["path"]] = (d + r["dots"], e + r["equal"])
    for path, (d, e) in tot.items():
        lines.append(f"TOTAL {path:12} dots {d}  bit-equal {e}  mismatches {d - e}")
    lines.append(f"throughput {summary['throughput']['dots_per_second']:.3e} dots/s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpu.collect", description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, type=Path, metavar="DIR")
    p.add_argument("--size", type=int, default=256, help="M = N of the K=32 sets "
                                                         "(default: %(default)s)")
    p.add_argument("--long-size", type=int, default=64, help="M = N of the long-K sets "
                                                             "(default: %(default)s)")
    args = p.parse_args(argv)
    reason = cublas.unavailable_reason()
    if reason is not None:
        print(f"gpu.collect: cublas path unavailable: {reason}", file=sys.stderr)
        return 2
    summary = run(args.out, args.size, args.long_size)
    print(_table(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
