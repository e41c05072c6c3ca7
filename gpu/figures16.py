"""The Hopper fp16/bf16/tf32 figures of docs/gpu.md, from the committed ``hopper16`` records.

Keys (written by ``python -m gpu.figures`` with the others):

- ``table:hopper16``: one row per path, C → D and preset: operand format, K, families, sets,
  dots, bit-equal, mismatches; a total per operand format;
- ``table:hopper16-families``: dots (mismatches) per generator family and operand format;
- ``table:hopper16-layout``: the fragment-layout check on small integers, per kernel;
- ``hopper16:FMT:STAT`` (FMT ``fp16``, ``bf16``, ``tf32`` or ``all``; STAT ``dots``,
  ``mdots``, ``equal``, ``mismatches``, ``sets``) and ``versions:hopper16``.
"""

from __future__ import annotations

from typing import Any

from . import records

__all__ = ["figures", "FORMATS", "hopper16_sets"]

FORMATS = ("fp16", "bf16", "tf32")


def _n(x: int) -> str:
    return f"{x:,}"


def hopper16_sets() -> list[dict[str, Any]]:
    """Every set record of the committed ``hopper16`` runs."""
    return [s for run in records.runs("hopper16") for s in run.sets]


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
        groups.setdefault((s["a_format"], s["path"], _c_to_d(s), s["preset"]), []).append(s)
    rows = []
    for fmt in FORMATS:
        mine = [s for s in sets if s["a_format"] == fmt]
        for (f, path, cd, preset), gs in groups.items():
            if f != fmt:
                continue
            dots = sum(s["dots"] for s in gs)
            equal = sum(s["equal"] for s in gs)
            rows.append([fmt, f"`{path}`", cd, f"`{preset}`",
                         ", ".join(str(k) for k in sorted({s["k"] for s in gs})),
                         len({s["family"] for s in gs}), _n(len(gs)), _n(dots), _n(equal),
                         _n(dots - equal)])
        if mine:
            rows.append([f"**{fmt}, all paths**", "", "", "", "", "", _stat(mine, "sets"),
                         _stat(mine, "dots"), _stat(mine, "equal"), _stat(mine, "mismatches")])
    return _table(["operands", "GPU path", "C → D", "preset", "K", "families", "sets", "dots",
                   "bit-equal", "mismatches"], rows, right=4)


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


def _layout_table() -> str:
    rows: dict[str, list[int]] = {}
    for run in records.runs("hopper16"):
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


def figures() -> dict[str, str]:
    """Every ``hopper16`` figure key and its text (none without a committed run)."""
    sets = hopper16_sets()
    if not sets:
        return {}
    out = {"table:hopper16": _main_table(sets), "table:hopper16-families": _family_table(sets),
           "table:hopper16-layout": _layout_table(),
           "versions:hopper16": "; ".join(_versions(r) for r in records.runs("hopper16"))}
    for fmt in (*FORMATS, "all"):
        mine = [s for s in sets if fmt == "all" or s["a_format"] == fmt]
        for stat in ("dots", "mdots", "equal", "mismatches", "sets"):
            out[f"hopper16:{fmt}:{stat}"] = _stat(mine, stat)
    return out
