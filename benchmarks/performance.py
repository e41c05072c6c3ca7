"""docs/performance.md's figures and plot, computed from the committed benchmark records.

    python benchmarks/performance.py            # rewrite the figures and docs/img/performance.svg
    python benchmarks/performance.py --check    # exit 1 if the page differs from the records

Every row comes from a record written by a benchmark (its command is in the record and in
the row): nothing on the page is typed by hand. tests/project/test_performance_doc.py runs
``--check``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "performance.md"
PLOT = ROOT / "docs" / "img" / "performance.svg"
DATA = ROOT / "docs" / "data"
#: The last run on the final code (run 6, minutes before it on the same code, is committed
#: beside it: the two differ by this shared machine's noise; runs 3 to 5 are earlier code).
ENGINE = DATA / "bench_engine_2026-12-06_run7.json"
#: Four runs on H100 machines: run 1 at commit 12e8bf1, run 2 with the whole-dot kernels
#: final (the same arithmetic), run 3 with the sides packed on the device (pack.cu), run 4
#: with fma.cu and the CPU changes of the same session (benchmarks/gpu_issue39.sh); the table
#: shows the last, the text all four.
GPU_RUNS = (DATA / "bench_gpu_engine_2026-12-06_h100_run1.json",
            DATA / "bench_gpu_engine_2026-12-06_h100_run2.json",
            DATA / "bench_gpu_engine_2026-12-06_h100_run3.json",
            DATA / "bench_gpu_engine_2026-12-06_h100_run4.json")
GPU = GPU_RUNS[-1]
GPU_INT = DATA / "gpu_int_ceiling_2026-12-06_h100_run4.json"
#: The last run: every configuration after the tool's warm-up (benchmarks/gpu_issue39.sh).
TORCH = ROOT / "tests" / "data" / "h100" / "2026-12-06-torch-warm" / "torch_layer.json"
TORCH_H200 = ROOT / "tests" / "data" / "h200" / "2026-12-02-torch" / "torch_layer.json"
CHECK = ROOT / "tests" / "data" / "h100" / "2026-12-06-engine-fma" / "engine_check.json"
QUANT = DATA / "bench_quantize_2026-12-06_part4.txt"
VERIFY = DATA / "bench_verify_2026-12-06.json"
FOREIGN = DATA / "bench_foreign_2026-12-06_run2.json"


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def _row(rows: list[dict], start: str) -> dict:
    return next(r for r in rows if r["what"].startswith(start))


def _n(x: float) -> str:
    """A rate in engineering style: 1.31e+07 -> 13.1 M."""
    for div, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g} {unit}"
    return f"{x:.3g}"


def _rel(path: Path) -> str:
    return f"`{path.relative_to(ROOT)}`"


def _engine_rows() -> list[list[str]]:
    e = _load(ENGINE)
    rows = e["rows"]
    ours, cli = _row(rows, "hopper-wgmma, in-process"), _row(rows, "hopper-wgmma, `mxsim run`")
    big = [r for r in rows if r["what"].startswith("hopper-wgmma, `mxsim run` (CLI), ")]
    ceil = _row(rows, "ceiling")["dots_per_s"]
    bw = _row(rows, "blackwell-mxf8f6f4")
    npy, step = _row(rows, "hopper-wgmma, numpy fallback"), _row(rows, "hopper-wgmma, step kernel")
    integer = _row(rows, "hopper-wgmma, numpy integer step")
    src = _rel(ENGINE)
    return [
        ["CPU engine, hopper-wgmma K=32, in-process", f"{_n(ours['dots_per_s'])} dots/s",
         f"{ours['ratio']:.1f}x MMA-Sim", f"{_n(ceil)} dots/s (bare step loop)",
         f"{ours['dots_per_s'] / ceil:.2f}", "-", src],
        [f"CPU engine, hopper-wgmma K=32, `mxsim run` on {cli['dots']:,} dots",
         f"{_n(cli['dots_per_s'])} dots/s",
         f"{cli['ratio']:.1f}x MMA-Sim", f"{_n(ceil)} dots/s", f"{cli['dots_per_s'] / ceil:.2f}",
         ">= 20 M dots/s, >= 17x MMA-Sim", src],
        *[[f"CPU engine, hopper-wgmma K=32, `mxsim run` on {b['dots']:,} dots, "
           + b["what"].split(", ")[-1], f"{_n(b['dots_per_s'])} dots/s",
           f"{b['ratio']:.1f}x MMA-Sim (its rate above)", f"{_n(ceil)} dots/s",
           f"{b['dots_per_s'] / ceil:.2f}", ">= 20 M dots/s, >= 17x MMA-Sim", src]
          for b in big],
        ["CPU engine, blackwell-mxf8f6f4 K=32 (E8M0), in-process",
         f"{_n(bw['dots_per_s'])} dots/s", "-", f"{_n(ceil)} dots/s",
         f"{bw['dots_per_s'] / ceil:.2f}", "same order as hopper-wgmma", src],
        ["CPU engine before (step kernel + numpy passes)", f"{_n(step['dots_per_s'])} dots/s",
         f"whole-dot kernel {ours['dots_per_s'] / step['dots_per_s']:.2f}x", "-", "-", "-",
         src],
        ["CPU engine, numpy fallback (no numba: engine.wide)", f"{_n(npy['dots_per_s'])} dots/s",
         f"{e['numpy_slowdown']:.1f}x slower than the kernel on the same {e['numpy_dots']:,} "
         "dots", "-", "-", "within 5x of the kernel", src],
        ["CPU engine, numpy integer step (the fallback before)",
         f"{_n(integer['dots_per_s'])} dots/s",
         f"engine.wide {npy['dots_per_s'] / integer['dots_per_s']:.1f}x", "-", "-", "-", src],
    ]


def _gpu_rows() -> list[list[str]]:
    g = _load(GPU)
    rows = g["rows"]
    k32, k32s = _row(rows, "hopper-wgmma K=32, gpu engine,"), None
    k32 = _row(rows, "hopper-wgmma K=32, gpu engine")
    k32s = _row(rows, "hopper-wgmma K=32, gpu engine, step")
    k4k = _row(rows, "hopper-wgmma K=4096, gpu engine")
    gemm = _row(rows, "hopper-cublas 4096x4096x4096")
    imad = _load(GPU_INT)["imad_per_s"] if GPU_INT.exists() else None
    ceiling = f"{_n(imad)} int32 IMAD/s" if imad else "not measured (see below)"

    def per(dots: float, k: int) -> str:
        return f"{imad / (dots * k):.0f} IMAD slots per product" if imad else "-"
    src = _rel(GPU)
    out = [
        [f"GPU engine, hopper-wgmma K=32 ({g['device']})", f"{_n(k32['dots_per_s'])} dots/s",
         f"{k32['ratio']}; step kernel before {_n(k32s['dots_per_s'])}", ceiling,
         per(k32["dots_per_s"], 32), ">= 10 G dots/s (on the H200)", src],
        ["GPU engine, hopper-wgmma K=4096 chain", f"{_n(k4k['dots_per_s'])} dots/s "
         f"({_n(k4k['dots_per_s'] * 4096)} products/s)", k4k["ratio"], ceiling,
         per(k4k["dots_per_s"], 4096), "-", src],
        ["GPU engine, hopper-cublas 4096^3 GEMM", f"{gemm['seconds']:.3f} s", "-", ceiling,
         per(gemm["dots_per_s"], 4096), "-", src],
    ]
    cli = [r for r in rows if r["what"].startswith("`mxsim run`")]
    for gpu_row, fast_row in zip(cli[::2], cli[1::2], strict=True):
        out.append([f"`mxsim run --engine gpu`, {gpu_row['dots']:,} dots (process)",
                    f"{gpu_row['seconds']:.2f} s", f"{gpu_row['ratio']} (fast "
                    f"{fast_row['seconds']:.2f} s)", "-", "-",
                    "faster than --engine fast from 10^5 dots", src])
    return out


def _torch_rows() -> list[list[str]]:
    t = _load(TORCH)
    ran = [c for c in t["configs"] if "torch_sha256" in c]
    block = [c for c in ran if c["scales"] == "block"]
    other = [c for c in ran if c["scales"] != "block"]
    src = _rel(TORCH)

    def span(cs: list[dict], key: str) -> str:
        lo, hi = min(c[key] for c in cs), max(c[key] for c in cs)
        return f"{lo:.2f}-{hi:.2f} s" if f"{lo:.2f}" != f"{hi:.2f}" else f"{lo:.2f} s"
    over = [f"{c['key']} {c['mxsim_s']:.3f} s" for c in ran if c["mxsim_s"] > 1.0]
    return [
        [f"mxsim.torch, Llama-3-8B down projection ({len(other)} configurations, tensor/row "
         "scales)", span(other, "mxsim_s"), f"torch._scaled_mm {span(other, 'torch_s')}", "-",
         "-", "<= 1 s in every configuration", src],
        [f"mxsim.torch, the same, block-wise scales ({len(block)} configurations)",
         span(block, "mxsim_s"), f"torch._scaled_mm {span(block, 'torch_s')}", "-", "-",
         "<= 1 s", src],
        ["mxsim.torch, the same, over 1 s", "; ".join(over) or "none", "-", "-", "-",
         "<= 1 s", src],
        ["mxsim.torch, the process's warm-up before them (every configuration once on a "
         f"{t.get('warmup_shape', '256 x K x 256')} draw: CUDA's, cuBLAS's and the kernels' "
         "start-up)", f"{t['warmup_s']:.2f} s", "-", "-", "-", "-", src],
    ]


_QROW = re.compile(r"^\|\s*(q|dq) ([^|]+?)\s*\|\s*([\d.]+)\s*\|\s*([\d.-]+)\s*\|\s*([\d.-]+)\s*\|"
                   r"\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|")


def _quant_rows() -> list[list[str]]:
    out = []
    for line in QUANT.read_text().splitlines():
        m = _QROW.match(line)
        if not m:
            continue
        kind, path, ours, _, ratio, ceil, frac = m.groups()
        target = ""
        if kind == "q" and path.startswith("mxfp8"):
            target = ">= 1 G el/s"
        elif kind == "q" and path.startswith("nvfp4"):
            target = ">= 700 M el/s"
        elif kind == "dq" and path.startswith(("mxfp8", "nvfp4")):
            target = "likewise"
        verb = "quantise" if kind == "q" else "dequantise"
        peer = f"{ratio}x torchao" if ratio != "-" else "no peer"
        out.append([f"{verb} {path}", f"{float(ours):.0f} M el/s", peer,
                    f"{float(ceil):.0f} M el/s", frac, target or "-", _rel(QUANT)])
    return out


def _rtl_rows() -> list[list[str]]:
    v = _load(VERIFY)
    out = []
    for r in v["rows"]:
        if r["path"].startswith("ceiling"):
            continue
        target = {"bulk C++ harness": ">= 5 M dots/s or >= 70% of the ceiling",
                  "cocotb + verilator (loop)": ">= 30 k dots/s"}.get(r["path"], "-")
        out.append([f"RTL, generated MXFP8 unit: {r['path']}", f"{_n(r['dots_per_s'])} dots/s",
                    f"{r['vs_peer']:,.0f}x Amaranth pysim",
                    f"{_n(r['ceiling_dots_per_s'])} dots/s (Verilator alone)",
                    f"{r['fraction_of_ceiling']:.2f}", target, _rel(VERIFY)])
    for d in _load(FOREIGN)["designs"]:
        name = d["design"].split(" ")[0]
        for r in d["rows"]:
            if "bulk" not in r["path"] or "generated" in r["path"]:
                continue
            out.append([f"RTL, foreign bulk: {name}", f"{_n(r['dots_per_s'])} dots/s",
                        f"{r['vs_peer']:.2f}x {r['peer']}",
                        f"{_n(r['ceiling_dots_per_s'])} dots/s",
                        f"{r['fraction_of_ceiling']:.2f}", "likewise", _rel(FOREIGN)])
    return out


def _table(rows: list[list[str]]) -> str:
    head = ["path", "figure", "against its peer", "ceiling", "of ceiling", "issue 39's target",
            "record"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n" + "\n".join(lines) + "\n"


def _sweep_table() -> str:
    e = _load(ENGINE)
    lines = ["| unit | K | dots | products/s | dots/s | products/s of hopper-wgmma's K = 32 |",
             "|---|---:|---:|---:|---:|---:|"]
    base = next(r["products_per_s"] for r in e["k_sweep"]
                if (r["unit"], r["k"]) == ("hopper-wgmma", 32))
    for r in e["k_sweep"]:
        lines.append(f"| {r['unit']} | {r['k']:,} | {r['dots']:,} | "
                     f"{_n(r['products_per_s'])} | {_n(r['dots_per_s'])} | "
                     f"{r['products_per_s'] / base:.2f} |")
    return "\n" + "\n".join(lines) + "\n"


def _applies() -> str:
    """How many presets the whole-dot kernel computes (every spec, or some)."""
    sys.path.insert(0, str(ROOT))
    from mxsim import presets
    from mxsim.engine.fast import fused
    every = some = 0
    for name in presets.names():
        hits = [fused.applies(s) for s in presets.get(name).all_specs()]
        every += all(hits)
        some += any(hits) and not all(hits)
    more = f" and some specs of {some} more" if some else ""
    return f"every spec of {every} of the {len(presets.names())} presets{more}"


def _check_summary() -> str:
    t = _load(CHECK)["totals"]
    return (f"all {t['cases']} cases ({t['dots']:,} dots, {t['presets']} presets, "
            f"{t['drawn_specs']} drawn specs, K up to {t['max_k']:,}) with {t['mismatches']} "
            f"mismatches")


def _llama_summary() -> str:
    ran = [c for c in _load(TORCH)["configs"] if "torch_sha256" in c]
    h200 = {c["key"]: c.get("mxsim_sha256") for c in _load(TORCH_H200)["configs"]}
    same = sum(c["mxsim_sha256"] == c["torch_sha256"] == h200.get(c["key"]) for c in ran)
    return f"{same} of the {len(ran)} configurations torch ran, every bit equal to torch's"


def _gpu_run(path: Path) -> str:
    rows = _load(path)["rows"]
    k32 = _row(rows, "hopper-wgmma K=32, gpu engine")["dots_per_s"]
    k4k = _row(rows, "hopper-wgmma K=4096, gpu engine")["dots_per_s"]
    return f"{_rel(path)}: K = 32 {_n(k32)} dots/s, K = 4096 {_n(k4k)} dots/s"


PROFILE_GPU = DATA / "profiles" / "gpu_engine_2026-12-06_h100.txt"
PROFILE_TORCH = (DATA / "profiles" / "torch_layer_2026-12-06_h100_before.txt",
                 DATA / "profiles" / "torch_layer_2026-12-06_h100.txt")


def _gpu_profile() -> str:
    """profile_gpu_engine.py's K = 32 line: the call, its kernels, the old operand path."""
    line = next(x for x in PROFILE_GPU.read_text().splitlines() if x.startswith("K=32 "))
    call, kernel, ops = (float(v) for v in re.findall(r"([\d.]+) ms", line))
    return (f"`gpu.dot` {call:.2f} ms, its kernels {kernel:.2f} ms, the operand path before "
            f"(timed beside them) {ops:.2f} ms")


def _torch_profile(path: Path, copy: bool) -> str:
    """profile_torch_layer.py's per-granularity seconds and kernels' seconds (and numpy's
    ascontiguousarray in the first, where ``copy``)."""
    text = path.read_text()
    parts = re.findall(r"== (\w+): ([\d.]+) s \(under cProfile\), whole-dot kernels ([\d.]+) s",
                       text)
    out = "; ".join(f"{g} {t} s, kernels {k} s" for g, t, k in parts)
    if copy:
        tensor = text.split("== tensor")[1].split("==")[0]
        m = re.search(r"\n\s*\d+\s+([\d.]+)\s+[\d.]+\s+([\d.]+)\s+[\d.]+ \{built-in method "
                      r"numpy.ascontiguousarray\}", tensor)
        out += f"; numpy's ascontiguousarray {m.group(2)} s of the tensor call"
    return out


def figures() -> dict[str, str]:
    e, g = _load(ENGINE), _load(GPU)
    return {
        "perf:applies": _applies(),
        "perf:gpu-profile": _gpu_profile(),
        "perf:torch-before": _torch_profile(PROFILE_TORCH[0], True),
        "perf:torch-after": _torch_profile(PROFILE_TORCH[1], False),
        "perf:check": _check_summary(),
        "perf:llama": _llama_summary(),
        "perf:table": _table(_engine_rows() + _gpu_rows() + _torch_rows() + _quant_rows()
                             + _rtl_rows()),
        "perf:ksweep": _sweep_table(),
        "perf:cpu": f"{e['versions']}; {e['cpus']} CPUs; MMA-Sim on {e['mmasim_threads']} "
                    f"torch threads; `mxsim run` start-up {e['cli_startup_s']:.2f} s, of which "
                    f"numba's own import and first cached call {e['numba_floor_s']:.2f} s",
        "perf:gpu": f"{g['device']}; {g['versions']}",
        "perf:gpu-runs": "; ".join(_gpu_run(path) for path in GPU_RUNS),
        "perf:imad": (f"{_n(_load(GPU_INT)['imad_per_s'])} int32 multiply-adds/s"
                      if GPU_INT.exists() else "not measured in this session"),
    }


def plot(path: Path) -> None:
    """Products/s against K (CPU sweep, GPU points) and `mxsim run` seconds against dots."""
    import matplotlib
    matplotlib.use("svg")
    import matplotlib.pyplot as plt
    e, g = _load(ENGINE), _load(GPU)
    plt.rcParams["svg.hashsalt"] = "mxsim-performance"
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for unit in dict.fromkeys(r["unit"] for r in e["k_sweep"]):
        pts = [(r["k"], r["products_per_s"]) for r in e["k_sweep"] if r["unit"] == unit]
        left.plot(*zip(*pts, strict=True), marker="o", label=f"CPU, {unit}")
    gpu = [(32, _row(g["rows"], "hopper-wgmma K=32, gpu engine")["dots_per_s"] * 32),
           (4096, _row(g["rows"], "hopper-wgmma K=4096, gpu engine")["dots_per_s"] * 4096)]
    left.plot(*zip(*gpu, strict=True), marker="s", label=f"GPU ({g['device']}), hopper-wgmma")
    left.set(xscale="log", yscale="log", xlabel="K", ylabel="products / s",
             title="Cost per product against K")
    left.legend(fontsize=7)
    cli = [r for r in g["rows"] if r["what"].startswith("`mxsim run`")]
    for engine, rows in (("gpu", cli[::2]), ("fast", cli[1::2])):
        right.plot([r["dots"] for r in rows], [r["seconds"] for r in rows], marker="o",
                   label=f"--engine {engine}")
    right.set(xscale="log", xlabel="dots (hopper-wgmma, K = 32)", ylabel="seconds",
              title=f"`mxsim run` on {g['device']}'s machine")
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="compare only; exit 1 if they differ")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    from mxsim.output import update_marked
    rc = update_marked(DOC, figures(), check=args.check, source="the benchmark records",
                       command="python benchmarks/performance.py")
    if not args.check:
        plot(PLOT)
    elif not PLOT.exists():
        print(f"{PLOT}: missing; run python benchmarks/performance.py", file=sys.stderr)
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
