"""Conformance with other labs' real-GPU data: every K&M set under ``tests/data/km`` through
the preset named for its GPU, operand format and output, bit for bit.

    python -m gpu.peers.conformance            # rewrite the table in docs/conformance.md
    python -m gpu.peers.conformance --check    # exit 1 (and say where) if the doc differs
    python -m gpu.peers.conformance --unseparated   # what the data cannot separate (minutes)
    python -m gpu.peers.conformance --fit      # mxsim fit on every set -> docs/data/km_fits.json

The sets are Khattak & Mikaitis' ``model_validation`` outputs (``gpu/peers/km_import.py`` imports
them); each is replayed through :data:`PRESET` 's preset with the fast engine and its ``d``
compared code for code with the GPU's. The table sits between ``<!-- fig:km-table -->`` and
``<!-- /fig -->`` in ``docs/conformance.md``; this module writes only the ``km-`` spans (the
MMA-Sim parity span is another script's).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from mxsim import units, vectors
from mxsim.errors import MxsimError
from mxsim.probe.fit import fit, schedules
from mxsim.spec import UnitSpec

from ..runs.figures import replace_spans
from .km_import import DATA, EVIDENCE

__all__ = ["PRESET", "Row", "rows", "table", "render", "DOC", "mismatches", "replay", "sets",
           "preset_for", "figures", "FITS", "fit_set", "fit_all", "fits", "fit_table",
           "fit_figures",
           "fit_verdicts", "FOUND"]

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "conformance.md"
MARK = re.compile(r"<!-- fig:(km-[A-Za-z0-9_.:+/-]+) -->(.*?)<!-- /fig -->", re.DOTALL)
#: The order GPUs are listed in: by architecture.
GPUS = ("V100", "A100", "A2", "Ada", "L40S", "H100", "H200", "B200")
FORMATS = ("fp16", "bf16", "tf32", "e4m3", "e5m2")
_ARCH = {"V100": "volta", "A100": "ampere", "A2": "ampere", "Ada": "ada", "L40S": "ada",
         "H100": "hopper", "H200": "hopper", "B200": "blackwell"}
_SUFFIX = {"fp16": "f16", "bf16": "bf16", "tf32": "tf32"}


def preset_for(gpu: str, fmt: str, out: str) -> str:
    """The preset named for the instruction that produced a K&M set (COMMON names)."""
    arch = _ARCH[gpu]
    if fmt in _SUFFIX:                     # wmma::mma_sync: HMMA on every architecture
        return f"{arch}-mma-{_SUFFIX[fmt]}"
    if arch == "hopper":                   # FP32 output: wgmma with C = 0; FP16: mma.sync
        return "hopper-wgmma" if out == "fp32" else "hopper-mma-sync"
    if arch == "blackwell":
        return "blackwell-mma-sync-f8-legacy"
    return f"{arch}-mma-f8"


#: (GPU, operand format, output) -> preset, for every set under tests/data/km.
PRESET = {(g, f, o): preset_for(g, f, o) for g in GPUS for f in FORMATS for o in ("fp32", "fp16")}


@dataclass(frozen=True)
class Row:
    """One K&M set replayed through its preset."""
    gpu: str
    fmt: str
    out: str
    preset: str
    instruction: str
    dots: int             #: dots replayed (the committed rows)
    source_rows: int      #: rows in the K&M files
    mismatches: int | None    #: None: the preset does not exist (yet)
    note: str


def _key(path: Path) -> tuple[int, int, int]:
    gpu, fmt, out = path.stem.split("_")
    return GPUS.index(gpu), FORMATS.index(fmt), ("fp32", "fp16").index(out)


def sets() -> list[Path]:
    """The committed K&M sets, in table order."""
    return sorted(DATA.glob("*_*_*.npz"), key=_key)


def replay(vs: vectors.VectorSet, preset, engine: str = "fast") -> np.ndarray:
    """``d`` codes of ``preset`` (a name or a spec) on the K&M set's dots (in their order,
    flat). The fast engine computes the one-dot batch entries stacked (bit for bit the
    same as one at a time)."""
    return units.get(preset).compute(vs, engine=engine).reshape(-1)


def mismatches(vs: vectors.VectorSet, preset: str, engine: str = "fast") -> np.ndarray:
    """Indices of the dots whose ``d`` the preset does not reproduce bit for bit."""
    return np.flatnonzero(replay(vs, preset, engine) != vs.d.reshape(-1))


def _note(vs: vectors.VectorSet) -> str:
    meta = vs.extra
    parts = []
    if meta["padded_from"] != meta["padded_to"]:
        parts.append(f"K {meta['padded_from']} padded to {meta['padded_to']}")
    if any(n.startswith("C = +0") for n in meta["notes"]):
        parts.append("C = +0 (wgmma; Validate_TC_models.m)")
    return "; ".join(parts)


@cache
def rows() -> tuple[Row, ...]:
    """Every committed set through its preset (cached: the data does not change in a run)."""
    out = []
    for path in sets():
        gpu, fmt, d = path.stem.split("_")
        vs = vectors.load(path)
        name = PRESET[(gpu, fmt, d)]
        try:
            bad = int(mismatches(vs, name).size)
        except MxsimError:        # the preset is not defined (yet)
            bad = None
        out.append(Row(gpu, fmt, d, name, _short_instruction(vs.extra["instruction"]),
                       vs.num_dots, vs.extra.get("rows_in_source", vs.extra["rows"]), bad,
                       _note(vs)))
    return tuple(out)


def _short_instruction(text: str) -> str:
    """The instruction without the explanation in brackets (the doc gives it)."""
    return text.split(" (")[0].split(" with ")[0]


def table(rs: tuple[Row, ...] | None = None) -> str:
    """The Markdown table of :func:`rows`."""
    rs = rows() if rs is None else rs
    head = ["GPU", "A, B", "C, D", "instruction", "preset", "dots", "of", "mismatches", "notes"]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---:" if h in ("dots", "of", "mismatches") else "---"
                            for h in head) + "|"]
    for r in rs:
        bad = "no preset" if r.mismatches is None else f"{r.mismatches:,}"
        lines.append(f"| {r.gpu} | {r.fmt} | {r.out} | `{r.instruction}` | `{r.preset}` | "
                     f"{r.dots:,} | {r.source_rows:,} | {bad} | {r.note} |")
    total = sum(r.dots for r in rs)
    bad = sum(r.mismatches or 0 for r in rs)
    lines.append(f"| **all** | | | | {len(rs)} sets | {total:,} | "
                 f"{sum(r.source_rows for r in rs):,} | {bad:,} | |")
    return "\n".join(lines)


#: The FP8 presets every FP8 set is also replayed through (the evidence table).
RIVALS = ("hopper-wgmma", "hopper-mma-sync", "ada-mma-f8", "blackwell-f8f6f4")


@cache
def evidence() -> str:
    """The evidence table: each FP8 set through every FP8 preset (mismatches), and the sets
    imported with C = +0 also with the C of their c file."""
    c_files = np.load(EVIDENCE)
    head = ["set", *(f"`{p}`" for p in RIVALS), "`hopper-wgmma`, c file's C",
            "`hopper-mma-sync`, c file's C"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for path in sets():
        gpu, fmt, out = path.stem.split("_")
        if fmt not in ("e4m3", "e5m2"):
            continue
        vs = vectors.load(path)
        cells = [f"{mismatches(vs, p).size:,}" for p in RIVALS]
        key = f"{gpu}_{fmt}"
        if out == "fp32" and key in c_files:
            with_c = vs.replace(c=c_files[key].reshape(vs.c.shape))
            cells += [f"{mismatches(with_c, p).size:,}" for p in RIVALS[:2]]
        else:
            cells += ["", ""]
        lines.append(f"| {gpu} {fmt} {out} ({vs.num_dots:,}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def commands() -> str:
    """The import command of every committed set (a code block)."""
    commit = {vectors.load(p).extra["source"]["commit"] for p in sets()}
    lines = ["```sh", f"C={' '.join(sorted(map(str, commit)))}"]
    for path in sets():
        vs = vectors.load(path)
        gpu, fmt, out = path.stem.split("_")
        folder = next(p for p in vs.extra["source"]["files"] if "/a_" in p).rsplit("/", 1)[0]
        lines.append(f"mxsim vectors import --layout km {folder} --d-format {out} "
                     f"--commit $C -o {path.name}")
    return "\n".join([*lines, "```"])


def figures() -> dict[str, str]:
    rs = rows()
    return {"km-table": table(rs), "km-sets": str(len(rs)),
            "km-dots": f"{sum(r.dots for r in rs):,}",
            "km-mismatches": f"{sum(r.mismatches or 0 for r in rs):,}",
            "km-evidence": evidence(), "km-commands": commands(),
            **(fit_figures(record) if (record := fits()) else {})}


def _variants(spec) -> dict[str, list]:
    """The values :func:`unseparated` tries for each parameter of ``spec``."""
    f = spec.frac_bits
    return {"e_zero": [-133, -132, -131, -21, -20, -19, -149, -200],
            "frac_bits": [f - 2, f - 1, f + 1, f + 2] if f else [],
            "schedule": list(schedules(spec.k).items()),
            "acc_rounding": ["rz", "rne"], "align": ["rz", "rne"]}


def unseparated() -> Iterator[str]:
    """For each preset of the table, one parameter varied at a time over all its sets: the
    mismatches of each value (lines of text; minutes of work)."""
    by: dict[str, list[vectors.VectorSet]] = {}
    for path in sets():
        gpu, fmt, out = path.stem.split("_")
        by.setdefault(PRESET[(gpu, fmt, out)], []).append(vectors.load(path))
    for preset, vss in by.items():
        specs = [units.get(preset).spec_for(vs) for vs in vss]
        yield f"{preset} ({len(vss)} sets, {sum(vs.num_dots for vs in vss):,} dots)"
        for param, values in _variants(specs[0]).items():
            cells = []
            for v in values:
                label, v = v if param == "schedule" else (v, v)
                bad = sum(int(np.count_nonzero(replay(vs, s.replace(**{param: v}))
                                               != vs.d.reshape(-1)))
                          for vs, s in zip(vss, specs, strict=True))
                cells.append(f"{label}: {bad}")
            yield f"    {param:12} " + ", ".join(cells)


#: What ``--fit`` found on every set: ``mxsim fit`` blind (no preset as a start), k = the
#: set's preset's instruction k; the doc's fit table is rendered from it.
FITS = ROOT / "docs" / "data" / "km_fits.json"
#: Fields that name a spec rather than say its arithmetic (left out of the comparison).
_NAMING = ("name", "instruction", "provenance")


def _fields(spec: UnitSpec) -> dict:
    """Every field of ``spec`` as plain data (:meth:`UnitSpec.to_dict`, defaults included)."""
    out = spec.to_dict()
    for f in dataclasses.fields(spec):
        value = getattr(spec, f.name)
        out.setdefault(f.name, getattr(value, "value", value))
    return out


def _shown(param: str, value, k: int):
    """A field's value as the fitter labels it (a schedule by its name, others as text)."""
    if param == "schedule":
        return next((name for name, sched in schedules(k).items()
                     if (None if sched is None else [list(x) for x in sched]) == value),
                    "custom")
    return str(value)


def _head(vs: vectors.VectorSet, rows: int) -> vectors.VectorSet:
    """The first ``rows`` dots of a K&M set (one dot a batch entry)."""
    return vs.replace(a=vs.a[:rows], b=vs.b[:rows], c=vs.c[:rows], d=vs.d[:rows])


def fit_set(path: Path, rows: int | None = None) -> dict:
    """``mxsim fit`` on one committed set (its first ``rows`` dots; all by default), with k
    the instruction k of the set's preset: what it reproduces, whether it gives the preset's
    outputs on every dot, the fields where it differs from the preset's spec and the values
    the data cannot separate (JSON-ready; ``seconds`` is the only field that varies)."""
    gpu, fmt, out = path.stem.split("_")
    vs = vectors.load(path)
    whole = vs.num_dots
    vs = _head(vs, rows) if rows and rows < whole else vs
    name = PRESET[(gpu, fmt, out)]
    preset = units.get(name).spec_for(vs)
    t0 = time.perf_counter()
    result = fit(vs, k=preset.k)
    seconds = time.perf_counter() - t0
    same = replay(vs, result.spec) == replay(vs, name)
    mine, theirs = _fields(result.spec), _fields(preset)
    differs = {}
    for f in mine:
        if f not in _NAMING and mine[f] != theirs[f]:
            was = _shown(f, theirs[f], preset.k)
            differs[f] = {"fitted": _shown(f, mine[f], preset.k), "preset": was,
                          "unseparated": was in result.unseparated.get(f, [])}
    return {"gpu": gpu, "fmt": fmt, "out": out, "preset": name, "k": preset.k,
            "rows": vs.num_dots, "rows_in_set": whole, "reproduced": result.equal,
            "total": result.total, "same_as_preset": bool(same.all()),
            "outputs_unlike_preset": int((~same).sum()), "differs": differs,
            "unseparated": result.unseparated,
            "tried": {p: len(v) for p, v in result.evidence.items()},
            "evaluated": result.evaluated, "seconds": round(seconds, 1),
            "spec": result.spec.to_dict()}


def fit_all(fp8_rows: int | None = None, rows: int | None = None,
            only: tuple[str, ...] | None = None) -> dict:
    """:func:`fit_set` on every committed set (the FP8 sets on their first ``fp8_rows`` dots,
    the others on their first ``rows``, if given), printing a line a set; the record ``--fit``
    writes to :data:`FITS`. With ``only`` (operand formats), only those sets are fitted and
    the committed record's other entries are kept (its commands list says what ran)."""
    t0, old = time.perf_counter(), (fits() if only else None) or {}
    entries = dict(old.get("sets", {}))
    for path in sets():
        fmt = path.stem.split("_")[1]
        if only and fmt not in only:
            continue
        fp8 = fmt in ("e4m3", "e5m2")
        e = entries[path.stem] = fit_set(path, fp8_rows if fp8 else rows)
        print(f"{path.stem:16} {e['preset']:30} k {e['k']:2}: {e['reproduced']:,} of "
              f"{e['total']:,}, same as preset: {e['same_as_preset']}, differs in "
              f"{sorted(e['differs'])}, {e['seconds']} s", flush=True)
    command = ("python -m gpu.peers.conformance --fit"
               + (f" --fp8-rows {fp8_rows}" if fp8_rows else "")
               + (f" --rows {rows}" if rows else "")
               + (f" --only {','.join(only)}" if only else ""))
    commands = [c for c in old.get("commands", [old["command"]] if "command" in old else [])
                if not only or "--only" not in c or c.split("--only ")[1] != ",".join(only)]
    return {"command": "; ".join(commands + [command]), "commands": commands + [command],
            "what": "mxsim.probe.fit.fit on every committed K&M set, blind (no preset as a start), "
                    "k = the instruction k of the set's preset; fast engine",
            "fp8_rows": fp8_rows if not only or "e4m3" in only else old.get("fp8_rows"),
            "rows": rows if not only or "fp16" in only else old.get("rows"),
            "cpus": os.cpu_count(),
            "seconds": round(time.perf_counter() - t0) + (old.get("seconds", 0) if only else 0),
            "sets": {p.stem: entries[p.stem] for p in sets() if p.stem in entries}}


def fits() -> dict | None:
    """The committed record of ``--fit`` (None where there is none)."""
    return json.loads(FITS.read_text(encoding="utf-8")) if FITS.exists() else None


def _unseparated_cell(e: dict) -> str:
    """What a set cannot separate: each parameter with its other values (or how many)."""
    parts = []
    for param, values in e["unseparated"].items():
        if len(values) + 1 == e["tried"].get(param):
            parts.append(f"`{param}` (all {len(values) + 1} tried)")
        else:
            parts.append(f"`{param}` {', '.join(values)}")
    return "; ".join(parts)


def fit_table(record: dict) -> str:
    """The Markdown table of a ``--fit`` record."""
    head = ["set", "preset", "k", "`mxsim fit` reproduces", "fitted = preset",
            "fitted differs from the preset in", "the data cannot separate"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|---:|---:|---|---|---|"]
    for stem, e in record["sets"].items():
        same = "yes" if e["same_as_preset"] else f"no ({e['outputs_unlike_preset']:,} dots)"
        differs = "; ".join(f"`{f}` {d['fitted']} (preset: {d['preset']})"
                            + ("" if d["unseparated"] else " jointly")
                            for f, d in e["differs"].items())
        lines.append(f"| {stem.replace('_', ' ')} | `{e['preset']}` | {e['k']} | "
                     f"{e['reproduced']:,} / {e['total']:,} | {same} | {differs or '-'} | "
                     f"{_unseparated_cell(e)} |")
    return "\n".join(lines)


#: Presets that ``mxsim fit`` found (no preset reproduced their rows before it); the
#: others were built from MMA-Sim's parameters and the evidence, and the fit confirms them.
FOUND = ("ada-mma-f8",)


def fit_verdicts(record: dict) -> str:
    """One line a preset: found or confirmed by the fit, on how many of its sets, and the
    sets where the fit does not reach the preset's outputs."""
    by: dict[str, list[tuple[str, dict]]] = {}
    for stem, e in record["sets"].items():
        by.setdefault(e["preset"], []).append((stem.replace("_", " "), e))
    lines = []
    for preset, es in by.items():
        ok = [s for s, e in es if e["same_as_preset"] and e["reproduced"] == e["total"]]
        word = "found" if preset in FOUND else "confirmed"
        line = f"- `{preset}`: {word} by the fit on {len(ok)} of {len(es)} sets"
        missed = [f"{s} (the fit stops at {e['reproduced']:,} / {e['total']:,})"
                  for s, e in es if s not in ok]
        lines.append(line + (f"; not on {', '.join(missed)}" if missed else ""))
    return "\n".join(lines)


def fit_figures(record: dict) -> dict[str, str]:
    """The doc's ``km-fit`` spans, from a ``--fit`` record."""
    es = list(record["sets"].values())
    counts: dict[str, int] = {}
    for e in es:
        for param in e["unseparated"]:
            counts[param] = counts.get(param, 0) + 1
    return {"km-fit-table": fit_table(record), "km-fit-sets": str(len(es)),
            "km-fit-verdicts": fit_verdicts(record),
            "km-fit-exact": str(sum(e["reproduced"] == e["total"] for e in es)),
            "km-fit-same": str(sum(e["same_as_preset"] for e in es)),
            "km-fit-command": f"`{record['command']}`",
            "km-fit-minutes": f"{record['seconds'] / 60:.0f}",
            "km-fit-cpus": str(record["cpus"]),
            "km-fit-unseparated": "; ".join(f"`{p}` in {n} of {len(es)} sets"
                                            for p, n in sorted(counts.items(),
                                                               key=lambda kv: -kv[1]))}


def render(text: str, figs: dict[str, str]) -> tuple[str, list[str]]:
    """``text`` with every ``km-`` span replaced; and the keys whose text changed."""
    return replace_spans(text, MARK, figs)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpu.peers.conformance",
                                description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true",
                   help="change nothing; exit 1 if the doc's table differs from the data")
    p.add_argument("--unseparated", action="store_true",
                   help="print, for each preset, the mismatches of the other values of its "
                        "parameters (what the data cannot separate; minutes)")
    p.add_argument("--fit", action="store_true",
                   help="run mxsim fit on every set, write docs/data/km_fits.json and the "
                        "doc's fit table (minutes)")
    p.add_argument("--fp8-rows", type=int, default=None, metavar="N",
                   help="with --fit: fit the FP8 sets on their first N dots (default: all)")
    p.add_argument("--rows", type=int, default=None, metavar="N",
                   help="with --fit: fit the FP16/BF16/TF32 sets on their first N dots "
                        "(default: all)")
    p.add_argument("--only", default=None, metavar="FMT[,FMT]",
                   help="with --fit: fit only the sets of these operand formats and keep the "
                        "committed record's other entries")
    args = p.parse_args(argv)
    if args.fit:
        FITS.parent.mkdir(exist_ok=True)
        FITS.write_text(json.dumps(fit_all(
            args.fp8_rows, args.rows, tuple(args.only.split(",")) if args.only else None),
            indent=1) + "\n", encoding="utf-8")
        print(f"wrote {FITS}")
    if args.unseparated:
        for line in unseparated():
            print(line, flush=True)
        return 0
    text = DOC.read_text(encoding="utf-8")
    try:
        new, changed = render(text, figures())
    except KeyError as exc:
        print(f"gpu.peers.conformance: {DOC.name}: unknown figure key {exc.args[0]!r}",
              file=sys.stderr)
        return 2
    if not changed:
        print(f"{DOC.relative_to(ROOT)}: up to date")
        return 0
    if args.check:
        print(f"{DOC.relative_to(ROOT)}: stale: {', '.join(changed)} (run python -m "
              f"gpu.peers.conformance)", file=sys.stderr)
        return 1
    DOC.write_text(new, encoding="utf-8")
    print(f"{DOC.relative_to(ROOT)}: rewrote {', '.join(changed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
