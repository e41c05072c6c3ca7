"""The Hopper fp16/bf16/tf32 figures of docs/gpu.md, from the committed ``hopper16`` records.

Keys (written by ``python -m gpu.runs.figures`` with the others):

- ``table:hopper16``: one row per path, C → D and preset: operand format, K, families, sets,
  dots, bit-equal, mismatches; a total per operand format;
- ``table:hopper16-families``: dots (mismatches) per generator family and operand format;
- ``table:hopper16-layout``: the fragment-layout check on small integers, per kernel;
- ``table:hopper16-cublas``: the kernels cuBLAS ran, per operand format and M×N×K;
- ``hopper16:triton-ptx``: the tensor-core PTX instructions Triton emitted (from the samples);
- ``hopper16:FMT:STAT`` (FMT ``fp16``, ``bf16``, ``tf32`` or ``all``; STAT ``dots``,
  ``mdots``, ``equal``, ``mismatches``, ``sets``) and ``versions:hopper16``;
- the first run (:data:`FIRST`), whose cuBLAS tf32 sets at K = 8 disagreed with the unsplit
  preset: ``table:hopper16-first`` (those sets), ``hopper16-first:STAT`` (all its sets),
  ``hopper16-first:others-mismatches`` (every other set) and ``hopper16-first:split-k`` (its
  kept cuBLAS tf32 K = 8 outputs, samples and mismatching dots, that the split-K model
  reproduces, "N of M");
- the ``e-zero`` ladders (:data:`EZERO`): ``table:hopper16-ezero``, ``hopper16-ezero:STAT``
  and ``versions:hopper16-ezero``.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from . import records

__all__ = ["figures", "FORMATS", "RUN", "FIRST", "EZERO", "hopper16_sets", "first_split_k_scores",
           "triton_ptx"]

FORMATS = ("fp16", "bf16", "tf32")
#: The run the docs' Hopper 16-bit figures come from, the first run before it, and the e_zero
#: ladders.
RUN, FIRST, EZERO = "2026-12-02/hopper16", "2026-12-02/hopper16-first", "2026-12-02/hopper16-ezero"


def _n(x: int) -> str:
    return f"{x:,}"


def _run(name: str) -> records.Run | None:
    folder = records.DATA / name
    return records.read(folder) if folder.is_dir() else None


def hopper16_sets() -> list[dict[str, Any]]:
    """Every set record of the committed run :data:`RUN` (none before it exists)."""
    run = _run(RUN)
    return run.sets if run else []


def _table(head: list[str], rows: list[list[Any]], right: int) -> str:
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" if i < len(head) - right else "---:"
                            for i in range(len(head))) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _stat(sets: list[dict[str, Any]], stat: str) -> str:
    dots = sum(s["dots"] for s in sets)
    equal = sum(s["equal"] for s in sets)
    return {"dots": _n(dots), "mdots": f"{dots / 1e6:.1f} M", "equal": _n(equal),
            "mismatches": _n(dots - equal), "sets": _n(len(sets))}[stat]


def _c_to_d(s: dict[str, Any]) -> str:
    return f"{s['c_format'] if s['with_c'] else 'no C'} → {s['d_format']}"


def _main_table(sets: list[dict[str, Any]]) -> str:
    groups: dict[tuple, list] = {}
    for s in sets:
        groups.setdefault((s["a_format"], s["path"], _c_to_d(s), s["preset"],
                           s.get("split_k")), []).append(s)
    rows = []
    for fmt in FORMATS:
        mine = [s for s in sets if s["a_format"] == fmt]
        for (f, path, cd, preset, split), gs in groups.items():
            if f != fmt:
                continue
            dots = sum(s["dots"] for s in gs)
            equal = sum(s["equal"] for s in gs)
            also = sorted({p for s in gs for p in s.get("also", {})})
            rows.append([fmt, f"`{path}`", cd,
                         f"`{preset}`" + (f", split-K {split}" if split else ""),
                         "; ".join(f"`{p}`: {_n(sum(s['also'][p] for s in gs))}" for p in also),
                         ", ".join(str(k) for k in sorted({s["k"] for s in gs})),
                         len({s["family"] for s in gs}), _n(len(gs)), _n(dots), _n(equal),
                         _n(dots - equal)])
        if mine:
            rows.append([f"**{fmt}, all paths**", "", "", "", "", "", "", _stat(mine, "sets"),
                         _stat(mine, "dots"), _stat(mine, "equal"), _stat(mine, "mismatches")])
    return _table(["operands", "GPU path", "C → D", "preset", "also bit-equal to", "K",
                   "families", "sets", "dots", "bit-equal", "mismatches"], rows, right=4)


def _family_table(sets: list[dict[str, Any]]) -> str:
    families = sorted({s["family"] for s in sets})
    rows = []
    for fam in families:
        row: list[Any] = [fam]
        for fmt in FORMATS:
            gs = [s for s in sets if s["family"] == fam and s["a_format"] == fmt]
            dots = sum(s["dots"] for s in gs)
            row.append(f"{_n(dots)} ({_n(dots - sum(s['equal'] for s in gs))})")
        rows.append(row)
    return _table(["family"] + [f"{f}: dots (mismatches)" for f in FORMATS], rows, right=3)


def _layout_table(run: records.Run) -> str:
    rows: dict[str, list[int]] = {}
    if run:
        for r in run.header.get("layout_check") or []:
            if "kernel" not in r:
                rows.setdefault(f"error: {r.get('error')}", [0, 0, 0])
                continue
            t = rows.setdefault(f"`{r['kernel']}`", [0, 0, 0])
            t[0] += 1
            t[1] += r["outputs"]
            t[2] += r["equal"]
    return _table(["kernel", "runs", "outputs", "exact"],
                  [[k, _n(a), _n(b), _n(c)] for k, (a, b, c) in rows.items()], right=3)


def _versions(run: records.Run) -> str:
    v = run.header["versions"]
    d = v["device"]
    return (f"{d['gpu']} (compute capability {d['capability']}, driver {d['driver']}, CUDA "
            f"{d['cuda']}), torch {d['torch']}, cuBLAS {d['cublas']}, Triton {v['triton']}, "
            f"CuPy {v.get('cupy-cuda13x') or v.get('cupy-cuda12x')}, numpy {v['numpy']}, numba "
            f"{v['numba']} (engine: {v['engine']}); checkout "
            f"{(v.get('git_commit') or 'unknown')[:7]}, salt `{run.header['salt']}`, started "
            f"{run.header['started']}")


def _cublas_table(sets: list[dict[str, Any]]) -> str:
    rows = {}
    for s in sets:
        if s.get("kernels"):
            rows.setdefault((s["a_format"], s["m"], s["n"], s["k"]),
                            ", ".join(f"`{_kernel(k)}`" for k in s["kernels"]))
    return _table(["operands", "M×N×K", "kernels cuBLAS ran"],
                  [[f, f"{m}×{n}×{k}", ks] for (f, m, n, k), ks in sorted(rows.items())], right=0)


def _kernel(name: str) -> str:
    """A kernel's name without its template arguments and parameters."""
    name = name.removeprefix("void ")
    return name.split("<")[0] + ("<…>" if "<" in name else "") if "(" in name or "<" in name \
        else name


def _first_split(sets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in sets if s["path"] == "cublas-tf32" and s["k"] == 8]


def first_split_k_scores() -> tuple[int, int]:
    """The first run's kept cuBLAS tf32 K = 8 outputs (the 16x8 samples and the mismatching
    dots, whole) that ``hopper-mma-tf32`` split-K in 2 reproduces: (equal, of)."""
    return _first_split_k_scores()


@cache
def _first_split_k_scores() -> tuple[int, int]:
    import numpy as np

    from mxsim import vectors
    from mxsim.engine import fast

    from .sets import load_bundle
    keys = {s["sample"] for s in _first_split(_run(FIRST).sets)}
    equal = total = 0
    for name in ("samples.npz", "mismatches.npz"):
        for key, vs in load_bundle(records.DATA / FIRST / name).items():
            if key not in keys:
                continue
            if name == "mismatches.npz":
                # Dots one by one are one batch entry each (slow in the chain engine): in
                # blocks of 64 as products of their rows and columns, the diagonals the dots.
                f = vs.flat()
                n = f.d.size // 64 * 64
                a = f.a[:n, 0, :].reshape(-1, 64, f.k)
                b = np.swapaxes(f.b[:n, :, 0].reshape(-1, 64, f.k), 1, 2)
                vs = vectors.VectorSet(a=a, b=b, a_format="tf32", b_format="tf32")
                d = np.diagonal(fast.dot(records.model_spec("hopper-mma-tf32", vs, 2), vs),
                                axis1=1, axis2=2).reshape(-1)
                want = f.d.reshape(-1)[:n]
            else:
                d = fast.dot(records.model_spec("hopper-mma-tf32", vs, 2), vs)
                want = vs.d
            equal += int((d == want).sum())
            total += int(want.size)
    return equal, total


def _first_figures() -> dict[str, str]:
    run = _run(FIRST)
    if run is None:
        return {}
    split = _first_split(run.sets)
    others = [s for s in run.sets if s not in split]
    rows = [[s["family"], f"{s['m']}×{s['n']}×{s['k']}", f"`{s['preset']}`", _n(s["dots"]),
             _n(s["equal"]), _n(s["also"].get("hopper-mma-tf32", 0))] for s in split]
    equal, total = first_split_k_scores()
    out = {"table:hopper16-first": _table(
        ["family", "M×N×K", "preset", "dots", "bit-equal", "bit-equal to hopper-mma-tf32"],
        rows, right=3), "hopper16-first:others-mismatches": _stat(others, "mismatches"),
        "hopper16-first:split-k": f"{_n(equal)} of {_n(total)}"}
    for stat in ("dots", "mdots", "equal", "mismatches", "sets"):
        out[f"hopper16-first:{stat}"] = _stat(run.sets, stat)
    return out


def triton_ptx() -> list[str]:
    """The tensor-core PTX instructions Triton emitted, as the run's samples record them."""
    from .sets import load_bundle
    seen: set[str] = set()
    for vs in load_bundle(records.DATA / RUN / "samples.npz").values():
        seen.update(vs.extra.get("ptx_mma") or [])
    return sorted(seen)


def _ezero_figures() -> dict[str, str]:
    """The e_zero ladders: per path, operands and C → D, the outputs equal to the preset and
    to the preset with e_zero moved (the preset's e_zero in the header)."""
    run = _run(EZERO)
    if run is None:
        return {}
    groups: dict[tuple, list] = {}
    for s in run.sets:
        groups.setdefault((s["a_format"], s["path"], _c_to_d(s), s["preset"],
                           s.get("split_k")), []).append(s)
    rows = []
    for (fmt, path, cd, preset, split), gs in groups.items():
        shifts = sorted({k for s in gs for k in s["also"] if k.startswith("e_zero=")},
                        key=lambda k: int(k.split("=")[1]))
        here = (int(shifts[1].split("=")[1]) + int(shifts[2].split("=")[1])) // 2
        rows.append([fmt, f"`{path}`", cd,
                     f"`{preset}`" + (f", split-K {split}" if split else ""), str(here),
                     ", ".join(str(s["k"]) for s in gs), _n(sum(s["dots"] for s in gs)),
                     _n(sum(s["equal"] for s in gs)),
                     ", ".join(f"{k.split('=')[1]}: {_n(sum(s['also'][k] for s in gs))}"
                               for k in shifts)])
    out = {"table:hopper16-ezero": _table(
        ["operands", "GPU path", "C → D", "preset", "its e_zero", "K", "dots", "bit-equal",
         "bit-equal with e_zero moved to"], rows, right=2),
        "versions:hopper16-ezero": _versions(run)}
    for stat in ("dots", "mismatches", "sets"):
        out[f"hopper16-ezero:{stat}"] = _stat(run.sets, stat)
    return out


def figures() -> dict[str, str]:
    """Every ``hopper16`` figure key and its text (none without a committed run)."""
    run = _run(RUN)
    if run is None:
        return {}
    sets = run.sets
    out = {"table:hopper16": _main_table(sets), "table:hopper16-families": _family_table(sets),
           "table:hopper16-layout": _layout_table(run),
           "table:hopper16-cublas": _cublas_table(sets), "versions:hopper16": _versions(run),
           "hopper16:triton-ptx": ", ".join(f"`{x}`" for x in triton_ptx())}
    for fmt in (*FORMATS, "all"):
        mine = [s for s in sets if fmt == "all" or s["a_format"] == fmt]
        for stat in ("dots", "mdots", "equal", "mismatches", "sets"):
            out[f"hopper16:{fmt}:{stat}"] = _stat(mine, stat)
    out.update(_first_figures())
    out.update(_ezero_figures())
    return out
