"""Every hardware figure in the docs, recomputed from the committed H200 records.

    python -m gpu.runs.figures            # rewrite the figures in the docs
    python -m gpu.runs.figures --check    # exit 1 (and say where) if a doc differs from the data
    python -m gpu.runs.figures --rederive # re-derive every record's model hash on this CPU
    (minutes)

A figure sits between markers in a Markdown file: ``<!-- fig:KEY -->...<!-- /fig -->``
(inline, or around a table). :func:`figures` computes every key from the records under
``tests/data/h200`` (``gpu/runs/records.py``), the held-out sample, the bias run and the fitting
samples; nothing in a marked span is typed by hand. Keys:

- ``table:validation``, ``table:validation-detail``, ``table:heldout``, ``table:bias``,
  ``table:blockwise-order``: tables;
- ``versions:validate``: the validation run's device and library versions;
- ``preset:P1+P2:STAT`` and ``group:G:STAT``, STAT one of ``dots``, ``mdots`` (millions),
  ``equal``, ``mismatches``, ``sets``: sums over the validation records of those presets or
  groups; ``total:STAT`` over all of them, ``generated:STAT`` over all but the operand map;
  ``heldout:STAT`` over the held-out sample;
- ``map:entries``, ``map:distinct``, ``map:dots``, ``map:mismatches``: the operand map;
- the Hopper fp16/bf16/tf32 run's keys (``table:hopper16``, ``hopper16:FMT:STAT``, ...):
  ``gpu/runs/dtype_figures.py``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from . import dtype_figures as figures16
from . import records

__all__ = ["figures", "render", "DOCS", "bias_scores", "blockwise_order_scores", "rederive"]

ROOT = Path(__file__).resolve().parents[2]
#: The documents whose marked spans this module writes.
DOCS = ("docs/gpu.md", "docs/findings.md", "docs/units.md", "README.md")
#: ``fig:plans:...`` spans are gpu.runs.plan_figures' (docs/plans.md, docs/gpu.md's library
#: section), left alone here.
MARK = re.compile(r"<!-- fig:(?!plans:)([A-Za-z0-9_.:+/-]+) -->(.*?)<!-- /fig -->", re.DOTALL)
BIAS_RUN = records.DATA / "2026-12-01" / "bias-bf16" / "bias.npz"


def _n(x: int) -> str:
    return f"{x:,}"


def _validation() -> list[dict[str, Any]]:
    return [s for run in records.runs("validate") for s in run.sets]


def _table(head: list[str], rows: Iterable[list[Any]], right: int = 0) -> str:
    """A Markdown table; the last ``right`` columns are numbers (right-aligned)."""
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" if i < len(head) - right else "---:"
                            for i in range(len(head))) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _pairs(sets) -> str:
    pairs = sorted({(s["a_format"], s["b_format"]) for s in sets})
    return ", ".join(f"{a}×{b}" for a, b in pairs)


def _c_to_d(s) -> str:
    return f"{s['c_format'] if s['with_c'] else 'no C'} → {s['d_format']}"


def _scales(s) -> str:
    if s["scale_format"] is None:
        return "none"
    if s["scale_format"] == "fp32":
        return {"tensor": "FP32 per tensor", "row": "FP32 row-wise",
                "block": "FP32 1×128 / 128×128"}[s["scale_granularity"]]
    return f"{s['scale_format'].upper()} blocks of {s['block']}"


def _group_by(sets, key) -> dict:
    out: dict = {}
    for s in sets:
        out.setdefault(key(s), []).append(s)
    return out


def _sum(sets, stat: str) -> str:
    dots = sum(s["dots"] for s in sets)
    equal = sum(s["equal"] for s in sets)
    if stat == "dots":
        return _n(dots)
    if stat == "mdots":
        return f"{dots / 1e6:.1f} M"
    if stat == "equal":
        return _n(equal)
    if stat == "mismatches":
        return _n(dots - equal)
    if stat == "sets":
        return _n(len(sets))
    raise KeyError(stat)


def _validation_table(sets) -> str:
    rows = []
    for group, gs in _group_by(sets, lambda s: s["group"]).items():
        dots = sum(s["dots"] for s in gs)
        equal = sum(s["equal"] for s in gs)
        ks = sorted({s["k"] for s in gs})
        rows.append([f"`{group}`", ", ".join(sorted({f"`{s['path']}`" for s in gs})),
                     ", ".join(sorted({f"`{s['preset']}`" for s in gs})), _pairs(gs),
                     ", ".join(sorted({_c_to_d(s) for s in gs})),
                     ", ".join(sorted({_scales(s) for s in gs})),
                     ", ".join(map(str, ks)), len({s["family"] for s in gs}), _n(len(gs)),
                     _n(dots), _n(equal), _n(dots - equal)])
    gen = _generated(sets)
    dots = sum(s["dots"] for s in gen)
    equal = sum(s["equal"] for s in gen)
    rows.append(["**all generated sets** (not the map)", "", "", "", "", "", "", "",
                 _n(len(gen)), _n(dots), _n(equal), _n(dots - equal)])
    return _table(["validation", "GPU path", "preset", "operand pairs", "C → D", "scales", "K",
                   "families", "sets", "dots", "bit-equal", "mismatches"], rows, right=4)


def _generated(sets) -> list[dict[str, Any]]:
    """The sets drawn by the generator (the operand map is a fixed table of repeats)."""
    return [s for s in sets if "operand_map" not in s["gen"]]


def _detail_table(sets) -> str:
    def key(s):
        return (s["group"], s["path"], s["preset"], f"{s['a_format']}×{s['b_format']}",
                _c_to_d(s), _scales(s), s["m"], s["n"], s["k"])

    groups = list(dict.fromkeys(s["group"] for s in sets))     # in the order they ran
    configs = sorted(_group_by(sets, key).items(), key=lambda kv: (
        groups.index(kv[0][0]), kv[0][1:6], kv[0][8], kv[0][6], kv[0][7]))
    rows = []
    for (group, path, preset, pair, cd, sc, m, n, k), gs in configs:
        dots = sum(s["dots"] for s in gs)
        equal = sum(s["equal"] for s in gs)
        rows.append([group, path, preset, pair, cd, sc, f"{m}×{n}×{k}", len(gs), _n(dots),
                     _n(equal)])
    return _table(["validation", "path", "preset", "pair", "C → D", "scales", "M×N×K",
                   "families", "dots", "bit-equal"], rows, right=3)


def _heldout_table() -> str:
    rows = []
    total = [0, 0, 0]
    for run in records.runs("heldout"):
        for group, gs in _group_by(run.sets, lambda s: s["group"]).items():
            dots = sum(s["dots"] for s in gs)
            equal = sum(s["equal"] for s in gs)
            rows.append([f"`{group}`", ", ".join(sorted({f"`{s['preset']}`" for s in gs})),
                         ", ".join(sorted({s["family"] for s in gs})), _n(len(gs)), _n(dots),
                         _n(equal)])
            total = [total[0] + len(gs), total[1] + dots, total[2] + equal]
    rows.append(["**all**", "", "", _n(total[0]), _n(total[1]), _n(total[2])])
    return _table(["validation", "preset", "families", "sets", "dots", "bit-equal"], rows,
                  right=3)


def _versions(run: records.Run) -> str:
    v = run.header["versions"]
    d = v["device"]
    commit = (v.get("git_commit") or "unknown")[:7]
    return (f"{d['gpu']} (compute capability {d['capability']}, driver {d['driver']}, "
            f"CUDA {d['cuda']}), torch {d['torch']}, cuBLAS {d['cublas']}, Triton "
            f"{v['triton']}, numpy {v['numpy']}, ml_dtypes {v['ml_dtypes']}, numba "
            f"{v['numba']} (engine: {v['engine']}); checkout {commit}, salt "
            f"`{run.header['salt']}`, started {run.header['started']}")


def _map_figures(sets) -> dict[str, str]:
    from .sets import operand_map_sets
    maps = [s for s in sets if s["group"].endswith("/operand-map")]
    distinct = entries = 0
    for fmt in sorted({s["gen"]["operand_map"] for s in maps}):
        for side, vs in operand_map_sets(fmt).items():
            if not any(s["gen"] == {"operand_map": fmt, "side": side} for s in maps):
                continue
            if side == "b":
                codes, scales = vs.b[:, 0, :], vs.b_scale[:, 0, :]
            else:
                codes, scales = vs.a[:, :, 0], vs.a_scale[:, :, 0]
            pairs = codes.astype(np.int32) * 256 + scales.astype(np.int32)
            entries += pairs.size
            distinct += np.unique(pairs).size
    dots = sum(s["dots"] for s in maps)
    equal = sum(s["equal"] for s in maps)
    return {"map:entries": _n(entries), "map:distinct": _n(distinct), "map:dots": _n(dots),
            "map:mismatches": _n(dots - equal)}


# -- analyses of raw samples -------------------------------------------------------------------

def bias_scores() -> dict[str, dict[str, tuple[int, int]]]:
    """How ``torch._scaled_mm``'s bias enters (see :func:`_bias_scores`); a fresh copy."""
    return {g: dict(h) for g, h in _bias_scores().items()}


@cache
def _bias_scores() -> dict[str, dict[str, tuple[int, int]]]:
    """How ``torch._scaled_mm``'s bias enters, scored on the bias run (bf16 output).

    For each scale granularity, hypotheses -> (outputs reproduced, outputs). ``D32`` is
    ``hopper-cublas-rowwise``'s FP32 result (scales applied), ``acc`` the unscaled
    ``hopper-cublas`` sum; every FP32 operation is rounded once to nearest even, and the
    bf16 output is the FP32 value rounded to nearest even.
    """
    from mxsim import formats, presets, vectors
    from mxsim.engine import fast
    from mxsim.engine.fast import fma_fp32, mul_fp32

    bf16 = formats.get("bf16")

    def to_bf16(bits):
        return bf16.encode(bits.view(np.float32).astype(np.float64), "rne",
                           saturate=False).astype(np.uint16)

    scores: dict[str, dict[str, list[int]]] = {}
    with np.load(BIAS_RUN, allow_pickle=False) as z:
        keys = sorted({k.split("/")[0] for k in z.files})
        for key in keys:
            arrs = {k.split("/", 1)[1]: z[k] for k in z.files if k.startswith(key + "/")}
            vs = vectors.from_arrays({k: arrs[k] for k in ("a", "b", "a_scale", "b_scale",
                                                          "meta")}, f"{BIAS_RUN}:{key}")
            gran = "per tensor" if vs.a_scale.ndim == 0 else "row-wise"
            d32 = fast.dot(presets.get("hopper-cublas-rowwise").spec_for(vs), vs)
            plain = vectors.VectorSet(a=vs.a, b=vs.b, a_format=vs.a_format,
                                      b_format=vs.b_format)
            acc = fast.dot(presets.get("hopper-cublas").spec_for(plain), plain)
            shape = acc.shape
            bias = np.broadcast_to((arrs["bias"].astype(np.uint32) << 16)[None, :],
                                   shape).copy()
            one = np.full(shape, np.float32(1).view(np.uint32))
            sa = np.broadcast_to(np.asarray(vs.a_scale, np.float32), shape).copy() \
                .view(np.uint32)
            sb = np.broadcast_to(np.asarray(vs.b_scale, np.float32), shape).copy() \
                .view(np.uint32)

            def add(x, y, one=one):
                return fma_fp32(x, one, y)        # x + y rounded once

            if gran == "per tensor":
                alpha = mul_fp32(sa, sb)
                scaled_first = fma_fp32(alpha, acc, bias)
                bias_first = mul_fp32(alpha, add(acc, bias))
                names = ("bf16(fma(fl(sa·sb), acc, bias))", "bf16(fl(fl(sa·sb)·fl(acc + bias)))")
            else:
                scaled_first = fma_fp32(mul_fp32(acc, sb), sa, bias)
                bias_first = mul_fp32(mul_fp32(add(acc, bias), sb), sa)
                names = ("bf16(fma(fl(acc·sb), sa, bias))",
                         "bf16(fl(fl(fl(acc + bias)·sb)·sa)), bias where C would be")
            hyps = {
                "bf16(D32) without a bias (`d_plain_bf16`)": (to_bf16(d32), "d_plain_bf16"),
                "D32 without a bias (`d_plain_fp32`)": (d32, "d_plain_fp32"),
                "**bf16(fl(D32 + bias))**": (to_bf16(add(d32, bias)), "d_bias_bf16_bf16"),
                names[0]: (to_bf16(scaled_first), "d_bias_bf16_bf16"),
                "bf16(bf16(D32) + bias)": (to_bf16(add(to_bf16(d32).astype(np.uint32) << 16,
                                                       bias)), "d_bias_bf16_bf16"),
                names[1]: (to_bf16(bias_first), "d_bias_bf16_bf16"),
            }
            for name, (model, which) in hyps.items():
                got = scores.setdefault(gran, {}).setdefault(name, [0, 0])
                got[0] += int((model == arrs[which]).sum())
                got[1] += int(arrs[which].size)
    return {g: {k: (v[0], v[1]) for k, v in h.items()} for g, h in scores.items()}


def _bias_table() -> str:
    rows = []
    for gran, hyps in bias_scores().items():
        for name, (equal, total) in hyps.items():
            rows.append([gran, name, _n(equal), _n(total)])
    return _table(["scales", "H200 output ← model", "equal", "of"], rows, right=2)


def blockwise_order_scores() -> dict[str, int]:
    """How a block-wise-scaled partial P enters the FP32 total (docs/findings.md §7).

    Scored on the fitting sample ``cublas_e4m3_e4m3_fp32_k512_block`` of
    ``tests/data/h200/h200_paths.npz``; every FP32 operation rounded once (RNE).
    """
    return dict(_blockwise_order_scores())


@cache
def _blockwise_order_scores() -> dict[str, int]:
    from mxsim import presets
    from mxsim.engine import fast
    from mxsim.engine.fast import block_slices, fma_fp32, mul_fp32

    from .sets import load_bundle
    vs = load_bundle(records.DATA / "h200_paths.npz")["cublas_e4m3_e4m3_fp32_k512_block"]
    inner, blocks = block_slices(presets.get("hopper-cublas-blockwise").spec_for(vs), vs)
    shape = vs.d.shape
    one = np.full(shape, np.float32(1).view(np.uint32))

    def add(x, y):
        return fma_fp32(x, one, y)                # x + y rounded once

    def scales(kb):
        sa = np.asarray(vs.a_scale, np.float32)[..., kb][..., :, None]
        sb = np.repeat(np.asarray(vs.b_scale, np.float32)[..., kb, :], 128, -1)[..., None, :]
        return (np.broadcast_to(sa, shape).copy().view(np.uint32),
                np.broadcast_to(sb, shape).copy().view(np.uint32))

    hypotheses = {
        "`fma(P, fl(sa·sb), total)`": lambda p, sa, sb, t: fma_fp32(p, mul_fp32(sa, sb), t),
        "`fl(total + fl(P·fl(sa·sb)))`":
            lambda p, sa, sb, t: add(t, mul_fp32(p, mul_fp32(sa, sb))),
        "`fma(fl(P·sb), sa, total)`": lambda p, sa, sb, t: fma_fp32(mul_fp32(p, sb), sa, t),
        "`fma(fl(P·sa), sb, total)`": lambda p, sa, sb, t: fma_fp32(mul_fp32(p, sa), sb, t),
        "`fl(total + fl(fl(P·sb)·sa))`":
            lambda p, sa, sb, t: add(t, mul_fp32(mul_fp32(p, sb), sa)),
        "`fl(total + fl(fl(P·sa)·sb))`":
            lambda p, sa, sb, t: add(t, mul_fp32(mul_fp32(p, sa), sb)),
    }
    parts = [fast.dot(inner, plain) for plain, _ in blocks]
    scores = {}
    for name, h in hypotheses.items():
        t = np.zeros(shape, np.uint32)
        for kb, p in enumerate(parts):
            t = h(p, *scales(kb), t)
        scores[name] = int((t == vs.d).sum())
    return scores


def _blockwise_table() -> str:
    scores = blockwise_order_scores()
    total = max(scores.values())
    rows = [[f"**{k}**" if v == total else k, f"**{_n(v)}**" if v == total else _n(v)]
            for k, v in scores.items()]
    return _table(["total ←", "bit-equal"], rows, right=1)


# -- all figures -------------------------------------------------------------------------------

def figures() -> dict[str, str]:
    """Every figure key and its text, computed from the committed data."""
    sets = _validation()
    out = {"table:validation": _validation_table(sets),
           "table:validation-detail": _detail_table(sets),
           "table:heldout": _heldout_table(),
           "table:bias": _bias_table(),
           "table:blockwise-order": _blockwise_table(),
           "versions:validate": "; ".join(_versions(r) for r in records.runs("validate"))}
    for stat in ("dots", "mdots", "equal", "mismatches", "sets"):
        out[f"total:{stat}"] = _sum(sets, stat)
        out[f"generated:{stat}"] = _sum(_generated(sets), stat)
        held = [s for r in records.runs("heldout") for s in r.sets]
        out[f"heldout:{stat}"] = _sum(held, stat)
    out.update(_map_figures(sets))
    out.update(figures16.figures())
    return out


def _lookup(key: str, figs: dict[str, str]) -> str:
    if key in figs:
        return figs[key]
    kind, _, rest = key.partition(":")
    names, _, stat = rest.rpartition(":")
    if kind in ("preset", "group") and names:
        wanted = set(names.split("+"))
        sets = [s for s in _validation() if s[kind] in wanted]
        missing = wanted - {s[kind] for s in sets}
        if not missing:
            return _sum(sets, stat)
    raise KeyError(key)


def replace_spans(text: str, mark: re.Pattern, figs: dict[str, str]
                  ) -> tuple[str, list[str]]:
    """``text`` with every span ``mark`` matches (group 1 the key, group 2 the old text)
    replaced by ``figs[key]`` (KeyError for a key it lacks); and the keys whose text changed.
    A figure of several lines sits on lines of its own between the markers."""
    changed = []

    def sub(m: re.Match) -> str:
        key, old = m.group(1), m.group(2)
        new = figs[key]
        if "\n" in old or "\n" in new:
            new = "\n" + new + "\n"
        if new != old:
            changed.append(key)
        return f"<!-- fig:{key} -->{new}<!-- /fig -->"

    return mark.sub(sub, text), changed


def render(text: str, figs: dict[str, str]) -> tuple[str, list[str]]:
    """``text`` with every marked span replaced; and the keys whose text changed."""
    changed = []

    def sub(m: re.Match) -> str:
        key, old = m.group(1), m.group(2)
        new = _lookup(key, figs)
        if "\n" in old or new.count("\n"):
            new = "\n" + new + "\n"
        if new != old:
            changed.append(key)
        return f"<!-- fig:{key} -->{new}<!-- /fig -->"

    return MARK.sub(sub, text), changed


def rederive() -> int:
    """Regenerate every record's inputs and model output here; the number that differ."""
    bad = 0
    for run in records.runs():
        for i, rec in enumerate(run.sets):
            vs = records.regenerate(rec)
            d = records.model_d(rec, vs)
            ok = (records.inputs_sha256(vs) == rec["inputs_sha256"]
                  and records.d_sha256(d) == rec["model_sha256"]
                  and (rec["equal"] != rec["dots"] or rec["gpu_sha256"] == rec["model_sha256"]))
            bad += not ok
            print(f"{run.name} {i + 1}/{len(run.sets)} {rec['group']} {rec['family']} "
                  f"k={rec['k']} {'ok' if ok else 'DIFFERS'}", flush=True)
    return bad


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpu.runs.figures",
                                description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true",
                   help="change nothing; exit 1 if a doc's figures differ from the data")
    p.add_argument("--rederive", action="store_true",
                   help="regenerate every record's inputs and model output on this CPU and "
                        "compare the hashes (minutes)")
    args = p.parse_args(argv)
    if args.rederive:
        bad = rederive()
        print(f"{bad} records differ" if bad else "every record re-derived")
        return 1 if bad else 0
    figs = figures()
    stale = []
    for doc in DOCS:
        path = ROOT / doc
        text = path.read_text(encoding="utf-8")
        try:
            new, changed = render(text, figs)
        except KeyError as exc:
            print(f"gpu.runs.figures: {doc}: unknown figure key {exc.args[0]!r}", file=sys.stderr)
            return 2
        if changed:
            stale.append(f"{doc}: {', '.join(changed)}")
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for line in stale:
        print(("stale " if args.check else "updated ") + line)
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
