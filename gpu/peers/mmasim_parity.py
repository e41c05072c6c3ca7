"""MMA-Sim parity: every instruction MMA-Sim models, run through it and through its preset.

``python -m gpu.peers.mmasim_parity`` runs every instruction of PyPI ``mmasim``
(:func:`gpu.peers.mmasim_ops.instructions`) that a preset computes on a random suite (``uniform``,
``normal``, ``llm``) and the directed suites (every other generator family the formats take,
``e-zero`` included),
through MMA-Sim and through mxsim's fast engine, compares ``d`` bit for bit, and writes
``docs/data/mmasim_parity.json`` and the table between ``<!-- fig:mmasim-parity -->`` and
``<!-- /fig -->`` in ``docs/conformance.md``. ``--check`` only checks that the table is the
JSON's. Instructions no preset computes are listed with the reason.

An AMD MFMA output counts as agreeing when both are NaN: MMA-Sim's E-FDPA returns the host's
NaN bits (x86: 0xFFC00000 for Inf - Inf, the input's payload quieted otherwise), which no spec
field states; the JSON counts those outputs apart (``nan_bits``). torch and mmasim are
imported inside functions.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import zlib
from pathlib import Path

import numpy as np

from mxsim import formats, presets, vectors
from mxsim.errors import MxsimError
from mxsim.vectors import VectorSet

from . import mmasim_ops
from .mmasim_ops import Instruction

__all__ = ["RANDOM", "families", "vector_set", "compare", "parity", "table", "write_doc",
           "main", "JSON", "DOC", "MARK"]

ROOT = Path(__file__).resolve().parents[2]
JSON = ROOT / "docs" / "data" / "mmasim_parity.json"
DOC = ROOT / "docs" / "conformance.md"
MARK = "mmasim-parity"
RANDOM = ("uniform", "normal", "llm")
_SCALED_ONLY = ("nan-scale", "scale-extremes")


def families(ins: Instruction) -> list[str]:
    """The generator families run for ``ins``: the random ones, then every directed one
    (``e-zero`` too: ladders whose outputs depend on the zero terms' exponent)."""
    return [f for f in vectors.FAMILIES + vectors.EXTRA_FAMILIES
            if ins.scale_format is not None or f not in _SCALED_ONLY]


def _k(ins: Instruction) -> int:
    """K of the sets: two instructions or more (one where C and D differ in format)."""
    if ins.c_format != ins.d_format:
        return ins.k
    return max(64, 2 * ins.k)


def _seed(ins: Instruction, family: str, seed: int) -> int:
    return (zlib.crc32(f"{ins.key} {family}".encode()) + seed) % (1 << 31)


def vector_set(ins: Instruction, family: str, size: int, seed: int,
               k: int | None = None) -> VectorSet | None:
    """A ``size`` x ``size`` set of ``family`` for ``ins``, K = ``k`` (default: see the
    JSON's ``k``); None where the family does not apply to its formats."""
    try:
        return vectors.generate(family, a_format=ins.a_format, b_format=ins.b_format,
                                m=size, n=size, k=k or _k(ins), scale_format=ins.scale_format,
                                block=ins.block, c_format=ins.c_format,
                                seed=_seed(ins, family, seed))
    except MxsimError:
        return None


def _ours(ins: Instruction, vs: VectorSet, engine: str = "fast") -> np.ndarray:
    """``d`` of the preset; a C in FP16 for a D in FP32 is widened to FP32 exactly first."""
    from mxsim.engine import fast, reference

    if ins.c_format != ins.d_format:
        wide = formats.get(ins.c_format).decode(vs.c).astype(np.float32)
        vs = vs.replace(c=wide.view(np.uint32), c_format=ins.d_format)
    spec = presets.get(ins.preset).spec_for(vs)
    return (fast if engine == "fast" else reference).dot(spec, vs)


def compare(ins: Instruction, vs: VectorSet, engine: str = "fast") -> dict[str, int]:
    """Dots, bit-equal outputs and outputs NaN in both with other bits (MFMA only)."""
    theirs = mmasim_ops.run(ins, vs)
    ours = _ours(ins, vs, engine)
    equal = theirs == ours
    nan_bits = 0
    if ins.api == "mfma":
        d = formats.get(ins.d_format)
        both = (d.classify(theirs) == formats.Class.NAN) & (d.classify(ours) == formats.Class.NAN)
        nan_bits = int((both & ~equal).sum())
    return {"dots": int(ours.size), "equal": int(equal.sum()), "nan_bits": nan_bits}


def _row(ins: Instruction) -> dict:
    return {"api": ins.api, "arch": ins.arch, "instruction": ins.name, "example": ins.example,
            "variants": ins.variants, "a": ins.a_format, "b": ins.b_format,
            "c": ins.c_format, "d": ins.d_format, "k": ins.k, "scale": ins.scale_format,
            "block": ins.block, "preset": ins.preset, "note": ins.note}


def parity(size: int = 16, seed: int = 0, only: str | None = None,
           progress: bool = False) -> dict:
    """Every instruction, run on every family it takes (``size`` x ``size`` dots each)."""
    rows = []
    for ins in mmasim_ops.instructions():
        row = _row(ins)
        if only is not None and only not in ins.key:
            continue
        if ins.preset is not None:
            row["families"] = {}
            for family in families(ins):
                vs = vector_set(ins, family, size, seed)
                if vs is not None:
                    row["families"][family] = compare(ins, vs)
            for key in ("dots", "equal", "nan_bits"):
                row[key] = sum(f[key] for f in row["families"].values())
        rows.append(row)
        if progress:
            print(f"{ins.key}: {row.get('equal', '-')}/{row.get('dots', '-')}", file=sys.stderr)
    return {"schema": "mxsim.mmasim-parity/1", "mmasim": _version("mmasim"),
            "torch": _version("torch"), "size": size, "seed": seed, "k": "max(64, 2k); k "
            "where C and D differ in format", "random": list(RANDOM),
            "command": "python -m gpu.peers.mmasim_parity", "rows": rows, "totals": totals(rows)}


def _version(package: str) -> str:
    from importlib.metadata import version
    return version(package)


def totals(rows: list[dict]) -> dict[str, int]:
    """Instructions (MMA-Sim names, folded and not), with a preset, dots and agreement."""
    run = [r for r in rows if r["preset"] is not None]
    dots = sum(r["dots"] for r in run)
    agree = sum(r["equal"] + r["nan_bits"] for r in run)
    return {"instructions": len(rows), "names": sum(r["variants"] for r in rows),
            "with_preset": len(run), "presets": len({r["preset"] for r in run}),
            "out_of_scope": sum(r["note"] == mmasim_ops.OUT_OF_SCOPE for r in rows),
            "not_expressible": sum(r["preset"] is None and r["note"] != mmasim_ops.OUT_OF_SCOPE
                                   for r in rows),
            "dots": dots, "equal": sum(r["equal"] for r in run),
            "nan_bits": sum(r["nan_bits"] for r in run), "mismatches": dots - agree}


# -- the table in docs/conformance.md ---------------------------------------------------------

_PAIRED = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "e4m3fnuz", "e5m2fnuz")
_PTX = {"fp16": "f16", "bf16": "bf16", "tf32": "tf32", "e4m3": "e4m3", "e5m2": "e5m2",
        "e3m2": "e3m2", "e2m3": "e2m3", "e2m1": "e2m1"}


def _pattern(row: dict) -> str:
    """The instruction with an FP8/FP6/FP4 operand pair written ``A.B`` (AMD: ``_A_B``)."""
    name = row["instruction"]
    if row["a"] not in _PAIRED or "mxf4" in name:
        return name
    if row["api"] == "mfma":
        return re.sub(r"_(fp8|bf8)_(fp8|bf8)$", "_A_B", name)
    return name.replace(f".{_PTX[row['a']]}.{_PTX[row['b']]}.", ".A.B.", 1) \
        if not name.endswith(f".{_PTX[row['a']]}.{_PTX[row['b']]}") \
        else name[:-len(f".{_PTX[row['a']]}.{_PTX[row['b']]}")] + ".A.B"


def _groups(rows: list[dict]) -> list[list[dict]]:
    """Rows that differ only in their FP8/6/4 operand pair, together, in MMA-Sim's order."""
    out: dict[tuple, list[dict]] = {}
    for r in rows:
        key = (r["api"], r["arch"], _pattern(r), r["preset"], r["c"], r["d"], r["note"])
        out.setdefault(key, []).append(r)
    return list(out.values())


def _operands(group: list[dict]) -> str:
    pairs = sorted({(r["a"], r["b"]) for r in group})
    if len(pairs) == 1:
        a, b = pairs[0]
        return a if a == b else f"{a} x {b}"
    names = sorted({f for p in pairs for f in p}, key=_PAIRED.index)
    return f"{len(pairs)} pairs of {'/'.join(names)}"


def _num(n: int) -> str:
    return f"{n:,}"


def table(data: dict) -> str:
    """The Markdown table (one line per instruction family) and its notes and totals."""
    notes: list[str] = []
    lines = ["| MMA-Sim op | architecture | instruction (N folded) | names | operands | C → D "
             "| preset | dots | bit-equal | mismatches |", "|---|---|---|---|---|---|---|---:|"
             "---:|---:|"]
    for g in _groups(data["rows"]):
        r = g[0]
        mark = ""
        if r["note"]:
            if r["note"] not in notes:
                notes.append(r["note"])
            mark = f" ({notes.index(r['note']) + 1})"
        names = sum(x["variants"] for x in g)
        c_d = r["d"] if r["c"] == r["d"] else f"{r['c']} → {r['d']}"
        if r["preset"] is None:
            cells = [f"none{mark}", "–", "–", "–"]
        else:
            dots = sum(x["dots"] for x in g)
            equal = sum(x["equal"] for x in g)
            nan = sum(x["nan_bits"] for x in g)
            bad = dots - equal - nan
            eq = _num(equal) + (f" (+{_num(nan)} NaN, other bits)" if nan else "")
            cells = [f"`{r['preset']}`{mark}", _num(dots), eq, _num(bad)]
        lines.append(f"| {r['api'].replace('_', '-')} | {r['arch']} | `{_pattern(r)}` | "
                     f"{names} | {_operands(g)} | {c_d} | " + " | ".join(cells) + " |")
    t = data["totals"]
    lines += ["", f"Totals: {t['instructions']} instructions ({_num(t['names'])} MMA-Sim names "
              f"with their N and M variants); {t['with_preset']} computed by {t['presets']} "
              f"presets on {_num(t['dots'])} dots: {_num(t['equal'])} bit-equal"
              + (f", {_num(t['nan_bits'])} NaN in both with other bits" if t["nan_bits"] else "")
              + f", **{_num(t['mismatches'])} mismatches**; {t['out_of_scope']} out of scope, "
              f"{t['not_expressible']} not expressible as a unit spec (notes below). "
              f"MMA-Sim {data['mmasim']}, torch {data['torch']}; {data['size']} x "
              f"{data['size']} dots per family and instruction, seed {data['seed']}, K = "
              f"{data['k']}; `{data['command']}`.", ""]
    lines += [f"{i}. {n}" for i, n in enumerate(notes, 1)]
    return "\n".join(lines)


_SPAN = re.compile(r"<!-- fig:" + MARK + r" -->(.*?)<!-- /fig -->", re.DOTALL)
_NEW_DOC = """# Conformance

## MMA-Sim parity

Every instruction PyPI `mmasim` models, run through MMA-Sim and through the preset that names
it, bit for bit (`python -m gpu.peers.mmasim_parity`; the data: `docs/data/mmasim_parity.json`).

<!-- fig:mmasim-parity -->
<!-- /fig -->
"""


def write_doc(data: dict, check: bool = False) -> bool:
    """Put :func:`table` between the markers of docs/conformance.md (a minimal file is made
    where there is none); with ``check``, change nothing. True when the doc was current."""
    text = DOC.read_text(encoding="utf-8") if DOC.exists() else _NEW_DOC
    if not _SPAN.search(text):
        text = text.rstrip("\n") + "\n\n" + _NEW_DOC.split("\n", 2)[2]
    new = _SPAN.sub(lambda m: f"<!-- fig:{MARK} -->\n{table(data)}\n<!-- /fig -->", text)
    current = DOC.exists() and new == DOC.read_text(encoding="utf-8")
    if not check and not current:
        DOC.write_text(new, encoding="utf-8")
    return current


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpu.peers.mmasim_parity",
                                description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if the table in "
                   "docs/conformance.md is not the JSON's")
    p.add_argument("--size", type=int, default=16, help="rows and columns of each set")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", help="run only instructions whose key holds this text (no files "
                   "written)")
    args = p.parse_args(argv)
    if args.check:
        ok = write_doc(json.loads(JSON.read_text()), check=True)
        print("docs/conformance.md: MMA-Sim table current" if ok else
              "docs/conformance.md: MMA-Sim table differs from docs/data/mmasim_parity.json; run "
              "python -m gpu.peers.mmasim_parity")
        return 0 if ok else 1
    data = parity(args.size, args.seed, args.only, progress=True)
    if args.only is None:
        JSON.write_text(json.dumps(data, indent=1) + "\n")
        write_doc(data)
    print(f"totals: {data['totals']}")
    return 0 if data["totals"]["mismatches"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
