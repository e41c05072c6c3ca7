"""The GPU engine against the CPU engines, on the device: every preset x family, drawn specs,
millions of dots and K up to 65,536 (issue 18).

    python -m gpu.engine.check --out DIR [--quick] [--shard I/N]   # on the GPU machine
    python -m gpu.engine.check --check DIR [--sample N]            # CPU replay of a summary
    python -m gpu.engine.check --figures [--check-docs]            # docs/engine.md's figures

The run computes every case of :mod:`gpu.engine.cases` with ``engine="gpu"``
(``mxsim.engine.gpu.dot``) and with the CPU fast engine, counts the output codes that differ,
and runs the reference engine (exact fractions) against both on a 2 x 2 corner of every small
case. It writes ``DIR/engine_check.json``: per case the recipe (unit or the drawn spec, its
digest, formats, family, shape, seed), the dots, the sha256 of the GPU's and the CPU's output
codes, the mismatches and the seconds (a case that raises: its error, every dot counted as a
mismatch); and the totals. Without a GPU (or CuPy) it exits 2 with
one line. ``--stand-in-cpu`` computes the "GPU" side with the fast engine (a fixture for the
replay test until the device summary exists; the summary says so).

``--check`` recomputes on this CPU the small cases of a summary (or ``--sample`` of them) from
their recipes and compares the codes' sha256 with the summary's GPU hashes; exit 1 on any
difference.
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

from mxsim import versions
from mxsim.engine import fast, reference
from mxsim.errors import MxsimError

from . import cases as engine_cases
from .cases import FIXTURE, STAND_IN, SUMMARY

__all__ = ["FIXTURE", "STAND_IN", "SUMMARY", "check", "codes_sha256", "main", "merge", "run",
           "write"]

def codes_sha256(d: np.ndarray) -> str:
    """sha256 of output codes (dtype and shape in the hash: equal hashes, equal arrays)."""
    d = np.ascontiguousarray(d)
    h = hashlib.sha256(f"{d.dtype.str}{d.shape}".encode())
    h.update(d.tobytes())
    return h.hexdigest()


def _gpu_dot(stand_in: bool):
    if stand_in:
        return lambda spec, vs: fast.dot(spec, vs)
    from mxsim.engine import gpu
    return gpu.dot


def _corner(vs):
    """The first 2 x 2 dots; None for block-wise FP32 scales (a cut keeps 128 columns, too
    many for the reference engine here; tests/mxsim/engine/test_engine.py holds it there)."""
    if vs.scale_format == "fp32" and vs.block == 128:
        return None
    return vs.subset(slice(0, min(2, vs.m)), slice(0, min(2, vs.n)))


def _run_case(case: dict[str, Any], dev_dot) -> dict[str, Any]:
    vs = engine_cases.vector_set(case)
    spec = engine_cases.unit_spec(case, vs)
    t0 = time.perf_counter()
    d_dev = np.asarray(dev_dot(spec, vs))
    t1 = time.perf_counter()
    d_cpu = fast.dot(spec, vs)
    t2 = time.perf_counter()
    same_dtype = d_dev.dtype == d_cpu.dtype and d_dev.shape == d_cpu.shape
    mismatches = int((d_dev != d_cpu).sum()) if same_dtype else vs.num_dots
    out = dict(case, digest=spec.digest(), dots=vs.num_dots, gpu_sha256=codes_sha256(d_dev),
               cpu_sha256=codes_sha256(d_cpu), mismatches=mismatches,
               gpu_s=round(t1 - t0, 4), cpu_s=round(t2 - t1, 4))
    sub = _corner(vs) if case["size"] == "small" else None
    if sub is not None and same_dtype:
        # The corner's dots are the first ones of the whole set's (dots are independent).
        d_ref = reference.dot(spec, sub).reshape(sub.out_shape)
        cut = (..., slice(0, sub.m), slice(0, sub.n))
        out["ref_dots"] = sub.num_dots
        out["ref_mismatches"] = int((d_dev[cut] != d_ref).sum() + (d_cpu[cut] != d_ref).sum())
    return out


def _device() -> str:
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def _totals(results: list[dict[str, Any]]) -> dict[str, Any]:
    kinds: dict[str, dict[str, int]] = {}
    for r in results:
        t = kinds.setdefault(r["kind"], dict(cases=0, dots=0, mismatches=0, max_k=0))
        t["cases"] += 1
        t["dots"] += r["dots"]
        t["mismatches"] += r["mismatches"]
        t["max_k"] = max(t["max_k"], r["k"])
    return dict(cases=len(results), dots=sum(r["dots"] for r in results),
                mismatches=sum(r["mismatches"] for r in results),
                errors=sum("error" in r for r in results),
                ref_dots=sum(r.get("ref_dots", 0) for r in results),
                ref_mismatches=sum(r.get("ref_mismatches", 0) for r in results),
                presets=len({r["unit"] for r in results if r["kind"] == "preset"}),
                drawn_specs=len({r["digest"] for r in results if r["kind"] == "drawn"}),
                families=len({r["family"] for r in results}),
                max_k=max((r["k"] for r in results), default=0), by_kind=kinds)


def _shard(text: str | None) -> tuple[int, int]:
    if text is None:
        return 0, 1
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        i, n = -1, 0
    if not 0 <= i < n:
        raise ValueError(f"--shard must be I/N with 0 <= I < N, not {text!r}")
    return i, n


def run(out_dir: Path, quick: bool, stand_in: bool, shard: str | None = None) -> dict[str, Any]:
    """Every case (of shard I/N) on the device and the CPU; the summary, also written."""
    i, n = _shard(shard)
    dev_dot = _gpu_dot(stand_in)
    t0 = time.time()
    cases = engine_cases.all_cases(quick=quick)[i::n]
    head = dict(tool="gpu/engine/check.py", engine=STAND_IN if stand_in else "gpu",
                device="CPU" if stand_in else _device(), versions=versions.describe(),
                quick=quick, shard=f"{i}/{n}")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / ("engine_check.json" if n == 1 else f"engine_check-{i}of{n}.json")
    results: list[dict[str, Any]] = []
    summary = dict(head, seconds=0.0, totals=_totals(results), cases=results)
    for c in cases:
        try:
            r = _run_case(c, dev_dot)
        except Exception as exc:  # noqa: BLE001 - one failing case must not lose the run
            dots = c["m"] * c["n"]
            r = dict(c, digest=None, dots=dots, gpu_sha256=None, cpu_sha256=None,
                     mismatches=dots, error=f"{type(exc).__name__}: {exc}"[:300])
        results.append(r)
        if r["mismatches"] or r.get("ref_mismatches"):
            print(f"MISMATCH case {r['id']} {r['unit']} {r['family']} k={r['k']}: "
                  f"{r['mismatches']} (reference {r.get('ref_mismatches')}) "
                  f"{r.get('error', '')}", flush=True)
        # Written every 100 small cases and after every bulk or chain case (the costly
        # ones), so that a run stopped at its time limit keeps what it finished.
        if len(results) % 100 == 0 or len(results) == len(cases) or c["size"] != "small":
            summary = dict(head, seconds=round(time.time() - t0, 1), totals=_totals(results),
                           cases=results)
            write(summary, path)
            t = summary["totals"]
            print(f"{len(results)}/{len(cases)} cases, {t['dots']:,} dots, "
                  f"{t['mismatches']} mismatches, {summary['seconds']} s", flush=True)
    return summary


def write(summary: dict[str, Any], path: Path) -> None:
    """The summary as JSON, one case per line (diffs and reviews stay readable)."""
    head = {k: v for k, v in summary.items() if k != "cases"}
    text = json.dumps(head, indent=1)[:-2]
    cases = ",\n".join(json.dumps(c, separators=(",", ":")) for c in summary["cases"])
    path.write_text(f'{text},\n "cases": [\n{cases}\n ]\n}}\n')


def merge(paths: list[Path], out: Path) -> dict[str, Any]:
    """Shard summaries merged into one (cases by id)."""
    parts = [json.loads(p.read_text()) for p in paths]
    results = sorted((c for p in parts for c in p["cases"]), key=lambda c: c["id"])
    summary = dict(parts[0], shard=f"merged {len(parts)}",
                   seconds=round(sum(p["seconds"] for p in parts), 1),
                   totals=_totals(results), cases=results)
    write(summary, out)
    return summary


def check(path: Path, sample: int | None = None, log=print) -> int:
    """Recompute a summary's small cases (or ``sample`` of them, evenly spread) on this CPU;
    the number of cases whose codes differ from the GPU's hashes (or whose summary
    disagrees with itself)."""
    summary = json.loads(path.read_text())
    cases = summary["cases"]
    bad = sum(c["gpu_sha256"] != c["cpu_sha256"] or c["mismatches"] != 0 for c in cases)
    if summary["totals"] != _totals(cases):
        log(f"{path}: totals differ from its cases")
        bad += 1
    small = [c for c in cases if c["size"] == "small"]
    if sample is not None and sample < len(small):
        small = [small[(j * len(small)) // sample] for j in range(sample)]
    for c in small:
        vs = engine_cases.vector_set(c)
        spec = engine_cases.unit_spec(c, vs)
        got = codes_sha256(fast.dot(spec, vs))
        if spec.digest() != c["digest"] or got != c["gpu_sha256"]:
            bad += 1
            log(f"case {c['id']} ({c['unit']} {c['family']} k={c['k']}): differs")
    log(f"{path}: {len(small)} cases replayed on the CPU, {bad} differ "
        f"({summary['totals']['dots']:,} dots in the summary, engine {summary['engine']})")
    return bad


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gpu.engine.check",
                                description=__doc__.split("\n")[0])
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--out", type=Path, help="run on the device; write DIR/engine_check.json")
    what.add_argument("--check", type=Path, metavar="DIR",
                      help="replay DIR/engine_check.json's small cases on this CPU")
    what.add_argument("--merge", type=Path, nargs="+", metavar="JSON",
                      help="merge shard summaries into the --into file")
    what.add_argument("--figures", action="store_true", help="rewrite docs/engine.md's figures")
    p.add_argument("--quick", action="store_true", help="small sizes (a minute)")
    p.add_argument("--shard", help="I/N: run every N-th case from the I-th (several calls)")
    p.add_argument("--stand-in-cpu", action="store_true",
                   help="the fast engine in place of the GPU engine (test fixture only)")
    p.add_argument("--sample", type=int, help="--check: replay this many small cases")
    p.add_argument("--into", type=Path, help="--merge: the merged summary's path")
    p.add_argument("--check-docs", action="store_true",
                   help="--figures: change nothing; exit 1 if the docs differ")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.figures:
            from . import figures as engine_figures
            return engine_figures.main(check_only=args.check_docs)
        if args.check is not None:
            path = args.check / "engine_check.json" if args.check.is_dir() else args.check
            if not path.exists():
                raise ValueError(f"--check must name a folder with engine_check.json, not "
                                 f"{str(args.check)!r}")
            return 1 if check(path, args.sample) else 0
        if args.merge:
            if args.into is None:
                raise ValueError("--merge needs --into PATH")
            t = merge(args.merge, args.into)["totals"]
            print(f"{t['cases']} cases, {t['dots']:,} dots, {t['mismatches']} mismatches")
            return 0
        if not args.stand_in_cpu:
            from mxsim.engine import gpu
            if not gpu.available():
                print("gpu.engine.check: no CUDA device or CuPy here; run it on the GPU "
                      "machine (or --check DIR on a CPU)", file=sys.stderr)
                return 2
        t = run(args.out, args.quick, args.stand_in_cpu, args.shard)["totals"]
    except (ValueError, MxsimError, OSError) as exc:
        print(f"gpu.engine.check: {exc}", file=sys.stderr)
        return 2
    print(f"{t['cases']} cases, {t['dots']:,} dots, {t['mismatches']} mismatches, reference "
          f"{t['ref_dots']:,} dots {t['ref_mismatches']} mismatches")
    return 1 if t["mismatches"] or t["ref_mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
