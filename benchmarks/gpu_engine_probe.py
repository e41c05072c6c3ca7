"""A first device check of the GPU engine: ``engine="gpu"`` == the fast engine, and its speed.

    python benchmarks/gpu_engine_probe.py [--out DIR] [--budget SECONDS] [--quick]

On a machine with CuPy and an NVIDIA GPU: (1) every preset x operand pair x scale pattern x
C format x generator family (small sets), the GPU engine with its CUDA step kernel and with
the numpy-style step against the fast engine (numba) on the host, bit for bit; (2) specs
drawn by the random-spec strategy of tests/mxsim/engine/test_engine.py; (3) long K (up to 65,536);
(4)
speed: hopper-wgmma K = 32 dots per second on the GPU and on the host (same run), and a
4096 x 4096 x 4096 hopper-cublas GEMM. Each part stops at its share of ``--budget``; the
summary (JSON, ``probe.json`` in ``--out``) says how much ran. The final device check of the
project is gpu/engine/check.py; this is the engine's first look at the device.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from mxsim import presets, vectors  # noqa: E402
from mxsim.engine import fast, gpu  # noqa: E402


def _sync() -> None:
    import cupy
    cupy.cuda.runtime.deviceSynchronize()


def _compare(spec, vs, record: dict, where: str, kernels=(True, False)) -> None:
    """GPU (kernel and numpy-style step) against the host's fast engine; mismatches noted."""
    want = fast.dot(spec, vs)
    for kernel in kernels:
        got = gpu.dot(spec, vs, kernel=kernel)
        bad = int((got != want).sum()) if got.shape == want.shape else want.size
        record["dots"] += want.size
        if bad:
            record["mismatches"] += bad
            if len(record["examples"]) < 20:
                record["examples"].append(f"{where} kernel={kernel}: {bad} of {want.size}")


def _k_for(spec, block: int | None) -> int:
    """A K of two instructions (or one past the first promotion), a multiple of the block."""
    k = spec.k * (spec.promote_every + 1 if spec.promote_every else 2)
    step = block or 1
    return -(-k // step) * step


def _preset_sets(name: str, m: int, n: int, first: bool):
    """(label, vectors) for every operand pair, scale pattern and C format of a preset: the
    first with every generator family (``first``), or the others with two families each."""
    p = presets.get(name)
    combos = []
    for a, b in p.pairs:
        for scale, block in p.scales_for(a, b):
            grans = ["block"] if block == 128 else (["tensor", "row"] if scale == "fp32"
                                                    else ["block"])
            combos += [(a, b, scale, block, g, c) for g in grans for c in p.c_formats]
    turn = 0
    for i, (a, b, scale, block, gran, c_format) in enumerate(combos):
        if (i == 0) != first:
            continue
        fams = [f for f in vectors.FAMILIES if f != "nan-scale" or scale is not None]
        if i:
            fams = [fams[(turn + j) % len(fams)] for j in range(2)]
            turn += 2
        spec = p.spec(a, b, scale_format=scale, block=block, c_format=c_format,
                      granularity=None if scale != "fp32" else gran)
        k = 256 if name == "exact" else _k_for(spec, block)
        for family in fams:
            vs = vectors.generate(family, a_format=a, b_format=b, m=m, n=n, k=k,
                                  scale_format=scale, block=block, scale_granularity=gran,
                                  with_c=p.no_c is None, c_format=c_format, seed=7)
            yield f"{name} {a}x{b} {scale}/{block}/{gran} c={c_format} K={k} {family}", vs


def part_presets(budget: float, quick: bool) -> dict:
    record = {"dots": 0, "mismatches": 0, "sets": 0, "examples": [], "errors": [],
              "presets_done": []}
    t0 = time.time()
    for name, first in [(n, True) for n in presets.names()] + [
            (n, False) for n in presets.names()]:
        for label, vs in _preset_sets(name, 8, 128, first):
            if time.time() - t0 > budget:
                record["stopped"] = f"budget at {label}"
                return record
            try:
                _compare(presets.get(name).spec_for(vs), vs, record, label)
            except Exception as exc:          # noqa: BLE001 -- recorded, the run goes on
                record["errors"].append(f"{label}: {type(exc).__name__}: {exc}"[:400])
                if len(record["errors"]) == 1:
                    record["first_traceback"] = traceback.format_exc()[-3000:]
            record["sets"] += 1
            if quick:
                break
        record["presets_done"].append(f"{name} ({'first' if first else 'other'} combos)")
    return record


def part_drawn(budget: float, examples: int) -> dict:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from test_engine import _fp16_c, _specs

    record = {"dots": 0, "mismatches": 0, "specs": 0, "examples": [], "errors": []}
    t0 = time.time()

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(spec=_specs(), family=st.sampled_from(vectors.FAMILIES),
           seed=st.integers(0, 2 ** 16), n_inst=st.integers(1, 3), with_c=st.booleans())
    def run(spec, family, seed, n_inst, with_c):
        if time.time() - t0 > budget:
            return
        if family == "nan-scale" and spec.scale_format is None:
            family = "scale-extremes"
        vs = vectors.generate(family, a_format=spec.a_format, b_format=spec.b_format, m=8,
                              n=16, k=spec.k * n_inst, scale_format=spec.scale_format,
                              block=spec.block, with_c=with_c, seed=seed)
        if spec.d_format == "fp16" and with_c:
            vs = _fp16_c(vs)
        record["specs"] += 1
        try:
            _compare(spec, vs, record, f"drawn {spec.dumps()!r} {family}")
        except Exception as exc:              # noqa: BLE001
            record["errors"].append(f"{type(exc).__name__}: {exc}"[:400])
            if len(record["errors"]) == 1:
                record["first_traceback"] = traceback.format_exc()[-3000:]

    run()
    return record


def part_tree(budget: float, examples: int) -> dict:
    """Reduction-tree units drawn by tests/mxsim/test_tree.py's strategy."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from test_tree import _tree_specs

    record = {"dots": 0, "mismatches": 0, "specs": 0, "examples": [], "errors": []}
    t0 = time.time()

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(spec=_tree_specs(), family=st.sampled_from(vectors.FAMILIES),
           seed=st.integers(0, 2 ** 16), n_inst=st.integers(1, 3))
    def run(spec, family, seed, n_inst):
        if time.time() - t0 > budget:
            return
        vs = vectors.generate(family, a_format=spec.a_format, b_format=spec.b_format, m=8,
                              n=16, k=spec.k * n_inst, scale_format=spec.scale_format,
                              block=spec.block, with_c=spec.d_format == "fp32", seed=seed)
        record["specs"] += 1
        try:
            _compare(spec, vs, record, f"tree {spec.dumps()!r} {family}")
        except Exception as exc:              # noqa: BLE001
            record["errors"].append(f"{type(exc).__name__}: {exc}"[:400])

    run()
    return record


def part_long_k(budget: float) -> dict:
    record = {"dots": 0, "mismatches": 0, "examples": [], "errors": [], "runs": []}
    t0 = time.time()
    for name, k in (("hopper-wgmma", 65536), ("exact", 65536), ("hopper-cublas", 65536),
                    ("blackwell-mxf8f6f4", 65536), ("hopper-cublas-blockwise", 16384),
                    ("hopper-mma-bf16", 16384)):
        if time.time() - t0 > budget:
            break
        p = presets.get(name)
        a, b = p.pairs[0]
        scale, block = p.scales_for(a, b)[0]
        vs = vectors.generate("normal", a_format=a, b_format=b, m=2,
                              n=128 if block == 128 else 4, k=k, scale_format=scale,
                              block=block, with_c=p.no_c is None, seed=3, allow_large=True)
        try:
            t1 = time.time()
            _compare(p.spec_for(vs), vs, record, f"{name} K={k}", (True,))
            record["runs"].append(f"{name} K={k}: {time.time() - t1:.1f} s")
        except Exception as exc:              # noqa: BLE001
            record["errors"].append(f"{name} K={k}: {type(exc).__name__}: {exc}"[:400])
    return record


def part_round() -> dict:
    """round_to on the GPU (the CUDA twin) against the numpy path on the same CuPy arrays,
    every format, mode and policy (tests/mxsim/formats/test_gpu_round.py's inputs)."""
    import cupy
    from test_gpu_round import _MODES, _inputs

    from mxsim import formats
    record = {"values": 0, "mismatches": 0, "examples": []}
    for name in formats.names() + ["e8m13"]:
        fmt = formats.get(name)
        rng = np.random.default_rng([7, sum(map(ord, name))])
        args = [cupy.asarray(x) for x in _inputs(fmt, rng)]
        policies = ["saturate"] + (["ieee", "inf"] if fmt.has_inf or fmt.has_nan else [])
        for mode in _MODES:
            for overflow in policies:
                got = formats.round_to(fmt, *args, mode, overflow)
                want = formats.round_to(fmt, *args, mode, overflow, kernel=False)
                bad = int((got != want).sum()) + int(got.dtype != want.dtype)
                record["values"] += got.size
                if bad:
                    record["mismatches"] += bad
                    record["examples"].append(f"{name} {mode} {overflow}: {bad}")
    return record


def _rate(fn, dots: int, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return dots / best


def part_speed(big: int) -> dict:
    out = {}
    p = presets.get("hopper-wgmma")
    vs = vectors.generate("normal", m=big, n=big, k=32, with_c=False, seed=1, allow_large=True)
    spec = p.spec_for(vs)
    from mxsim.engine.gpu.array import to_device
    dvs = to_device(vs)

    def on_gpu(kernel=True):
        gpu.dot(spec, dvs, device_out=True, kernel=kernel)
        _sync()

    on_gpu()
    out["wgmma_k32_gpu_dots_per_s"] = _rate(on_gpu, vs.num_dots)
    big2 = vectors.generate("normal", m=2 * big, n=2 * big, k=32, with_c=False, seed=1,
                            allow_large=True)
    dbig2 = [to_device(big2)]

    def on_gpu2():
        gpu.dot(spec, dbig2[0], device_out=True)
        _sync()

    on_gpu2()
    out["wgmma_k32_gpu_dots_per_s_4x"] = _rate(on_gpu2, big2.num_dots)
    out["wgmma_k32_dots_4x"] = big2.num_dots
    dbig2.clear()
    out["wgmma_k32_gpu_numpy_style_dots_per_s"] = _rate(lambda: on_gpu(False), vs.num_dots, 1)
    out["wgmma_k32_dots"] = vs.num_dots
    t = time.perf_counter()
    d_host = gpu.dot(spec, vs)
    out["wgmma_k32_gpu_with_transfers_s"] = time.perf_counter() - t
    small = vs.subset(slice(0, 1024), slice(0, 1024))
    fast.dot(spec, small)
    out["wgmma_k32_cpu_dots_per_s"] = _rate(lambda: fast.dot(spec, small), small.num_dots, 2)
    out["wgmma_k32_equal_on_1024_rows"] = bool(
        (fast.dot(spec, vs.subset(slice(0, 64))) == d_host[:64]).all())
    out["ratio_gpu_over_cpu"] = out["wgmma_k32_gpu_dots_per_s"] / out["wgmma_k32_cpu_dots_per_s"]
    return out


def part_gemm(size: int) -> dict:
    p = presets.get("hopper-cublas")
    vs = vectors.generate("normal", m=size, n=size, k=size, with_c=False, seed=2,
                          allow_large=True)
    spec = p.spec_for(vs)
    from mxsim.engine.gpu.array import to_device
    warm = vectors.generate("normal", m=256, n=256, k=size, with_c=False, seed=2)
    gpu.dot(spec, warm)                   # CuPy compiles its kernels on first use
    dvs = to_device(vs)
    _sync()
    t = time.perf_counter()
    d = gpu.dot(spec, dvs, device_out=True)
    _sync()
    out = {"cublas_gemm": f"{size}x{size}x{size}", "cublas_gemm_s": time.perf_counter() - t}
    rows = vs.subset(slice(0, 2))
    out["cublas_gemm_rows_equal_cpu"] = bool((fast.dot(spec, rows) == d[:2].get()).all())
    return out


def _profile(size: int) -> str:
    """Where the time of one hopper-cublas GEMM goes (cProfile, top by total time)."""
    import cProfile
    import io
    import pstats
    vs = vectors.generate("normal", m=size, n=size, k=512, with_c=False, seed=2,
                          allow_large=True)
    spec = presets.get("hopper-cublas").spec_for(vs)
    from mxsim.engine.gpu.array import to_device
    dvs = to_device(vs)
    gpu.dot(spec, dvs, device_out=True)
    prof = cProfile.Profile()
    prof.enable()
    gpu.dot(spec, dvs, device_out=True)
    _sync()
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
    return s.getvalue()[-6000:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--budget", type=float, default=420.0)
    ap.add_argument("--parts",
                    default="env,round,speed,gemm,profile,presets,drawn,tree,longk")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--big", type=int, default=4096)
    ap.add_argument("--examples", type=int, default=200)
    args = ap.parse_args(argv)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = args.parts.split(",")
    share = {"presets": 0.45, "drawn": 0.25, "longk": 0.2}
    summary: dict = {}
    jobs = {
        "env": lambda: _env(),
        "round": part_round,
        "speed": lambda: part_speed(args.big),
        "presets": lambda: part_presets(args.budget * share["presets"], args.quick),
        "drawn": lambda: part_drawn(args.budget * share["drawn"], args.examples),
        "longk": lambda: part_long_k(args.budget * share["longk"]),
        "tree": lambda: part_tree(30.0, 80),
        "gemm": lambda: part_gemm(4096),
        "profile": lambda: _profile(4096),
    }
    for name in parts:
        t = time.time()
        try:
            summary[name] = jobs[name]()
        except Exception as exc:              # noqa: BLE001
            summary[name] = {"error": f"{type(exc).__name__}: {exc}"[:500],
                             "traceback": traceback.format_exc()[-3000:]}
        summary.setdefault("seconds", {})[name] = round(time.time() - t, 1)
        (out_dir / "probe.json").write_text(json.dumps(summary, indent=1, default=str))
        print(name, json.dumps(summary[name], default=str)[:1500], flush=True)
    return 0


def _env() -> dict:
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(0)
    return {"gpu": props["name"].decode(), "cupy": cupy.__version__,
            "numpy": np.__version__, "available": gpu.available()}


if __name__ == "__main__":
    raise SystemExit(main())
