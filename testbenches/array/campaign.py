"""The documented array RTL run: 4 x 4 arrays through cocotb + Verilator against the cycle model.

    python -m testbenches.array.campaign run      # build and run every case (minutes),
                                                  # write docs/data/array_rtl.json
    python -m testbenches.array.campaign render   # rewrite the figures of docs/array.md
    python -m testbenches.array.campaign --check  # exit 1 if docs/array.md differs from the data

Each case is one array (:data:`DESIGNS`), one GEMM shape and one operand family: the RTL is
compared with :func:`mxsim.array.cycle.simulate` in every cycle (a wave taken, results valid,
every unit's D code in that cycle: intermediate and final), by :mod:`testbenches.array.tb`.
The JSON keeps, per case, the cycles, waves and outputs compared, the mismatches, the model's
cycles and utilisation, and the seconds; :func:`figures` computes the docs' figures from it
(keys ``array-rtl:table`` and ``array-rtl:STAT``), and a test re-derives the model's numbers.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from mxsim import presets, units, vectors
from mxsim.array import ArraySpec, Buffer, from_dict
from mxsim.array.cycle import simulate
from mxsim.microarch import MicroArch

__all__ = ["DESIGNS", "SHAPES", "FAMILIES", "cases", "run", "model_numbers", "figures",
           "render", "main", "DATA", "DOC"]

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "data" / "array_rtl.json"
DOC = ROOT / "docs" / "array.md"
MARK = re.compile(r"<!-- fig:(array-rtl[A-Za-z0-9_.:+/-]*) -->(.*?)<!-- /fig -->", re.DOTALL)


def _designs() -> dict[str, ArraySpec]:
    plain = units.get("hopper-wgmma").spec_for_formats("e4m3", "e4m3")
    scaled = presets.get("blackwell-mxf8f6f4").spec("e2m1", "e4m3", scale_format="e8m0",
                                                     block=32)
    return {
        "4x4-e4m3-i2": ArraySpec(name="4x4-e4m3-i2", unit=plain, rows=4, cols=4,
                                 interleave=2, microarch=MicroArch(lanes=8, stages=2),
                                 a_buffer=Buffer(bytes=1 << 16, bandwidth=64),
                                 b_buffer=Buffer(bytes=1 << 16, bandwidth=48)),
        "4x4-mxf4f8-sep-i3": ArraySpec(name="4x4-mxf4f8-sep-i3", unit=scaled, rows=4, cols=4,
                                       interleave=3, microarch=MicroArch(lanes=16, stages=1),
                                       a_buffer=Buffer(bytes=1 << 16, bandwidth=64),
                                       b_buffer=Buffer(bytes=1 << 16, bandwidth=96),
                                       scales="separate",
                                       scale_buffer=Buffer(bytes=1 << 10, bandwidth=3)),
    }


DESIGNS = _designs()
#: GEMM shapes (M, N, K): whole tiles, ragged rows and columns, one K-block, long K, larger.
SHAPES = [(4, 8, 128), (7, 13, 96), (16, 24, 64), (5, 3, 32), (8, 8, 320), (13, 29, 160),
          (32, 40, 256)]
FAMILIES = ["normal", "specials", "cancellation", "one-large", "scale-extremes"]


def cases() -> list[tuple[str, tuple[int, int, int], str]]:
    """Every (design, shape, family) of the run (scale-extremes only for scaled units)."""
    out = []
    for name, arr in DESIGNS.items():
        for shape in SHAPES:
            for fam in FAMILIES:
                if fam == "scale-extremes" and arr.unit.scale_format is None:
                    continue
                out.append((name, shape, fam))
    return out


def _operands(arr: ArraySpec, shape, family: str, seed: int):
    u, (m, n, k) = arr.unit, shape
    return vectors.generate(family, a_format=u.a_format, b_format=u.b_format, m=m, n=n, k=k,
                            scale_format=u.scale_format, block=u.block, seed=seed)


def model_numbers(arr: ArraySpec, shape) -> dict[str, Any]:
    """The cycle model's cycles and utilisation for a case (timing needs no operands)."""
    run_ = simulate(arr, *shape)
    return {"model_cycles": run_.cycles, "utilisation": round(run_.utilisation, 6),
            "stalls": run_.stalls}


def run(cache: str | None = None, limit: int | None = None) -> dict[str, Any]:
    """Every case, built and run (each design built once); the summary that goes to
    :data:`DATA`."""
    from ..sim.toolchain import verilator_version
    from .runner import check
    rows = []
    with tempfile.TemporaryDirectory(prefix="mxsim-array-run-") as tmp:
        for i, (name, shape, fam) in enumerate(cases()[:limit]):
            arr = DESIGNS[name]
            vs = _operands(arr, shape, fam, seed=i)
            res = check(arr, *shape, vs, Path(tmp) / f"case{i}", cache=cache, seed=i)
            row = {"design": name, "m": shape[0], "n": shape[1], "k": shape[2],
                   "family": fam, "seed": i, "cycles": res.cycles, "waves": res.waves,
                   "outputs": res.outputs, "codes": shape[0] * shape[1] * shape[2]
                   // arr.unit.k, "mismatches": len(res.mismatches),
                   "first_mismatches": res.mismatches[:3], "seconds": round(res.seconds, 2),
                   **model_numbers(arr, shape)}
            rows.append(row)
            print(f"{i + 1}/{len(cases())} {name} {shape} {fam}: {res.cycles} cycles, "
                  f"{len(res.mismatches)} mismatches", flush=True)
    return {"schema": "mxsim.array_rtl/1",
            "date": datetime.date.today().isoformat(),
            "command": "python -m testbenches.array.campaign run",
            "verilator": ".".join(map(str, verilator_version())),
            "designs": {n: a.to_dict() for n, a in DESIGNS.items()},
            "cases": rows}


def figures(data: dict[str, Any]) -> dict[str, str]:
    """Every ``array-rtl:*`` figure of docs/array.md, from the run's summary."""
    rows = data["cases"]
    out = {
        "array-rtl:cases": str(len(rows)),
        "array-rtl:designs": str(len(data["designs"])),
        "array-rtl:shapes": str(len({(r["m"], r["n"], r["k"]) for r in rows})),
        "array-rtl:cycles": f"{sum(r['cycles'] for r in rows):,}",
        "array-rtl:codes": f"{sum(r['codes'] for r in rows):,}",
        "array-rtl:mismatches": str(sum(r["mismatches"] for r in rows)),
        "array-rtl:date": data["date"],
        "array-rtl:verilator": data["verilator"],
    }
    lines = ["| design | GEMM M x N x K | families | cycles (RTL = model) | waves | D codes "
             "compared | utilisation | mismatches |", "|---|---|---|---:|---:|---:|---:|---:|"]
    groups: dict[tuple, list] = {}
    for r in rows:
        groups.setdefault((r["design"], r["m"], r["n"], r["k"]), []).append(r)
    for (design, m, n, k), rs in groups.items():
        same = all(r["cycles"] == r["model_cycles"] for r in rs)
        lines.append(f"| {design} | {m} x {n} x {k} | {len(rs)} | {rs[0]['model_cycles']:,}"
                     f"{'' if same else ' (differs)'} | {rs[0]['waves']} | "
                     f"{sum(r['codes'] for r in rs):,} | {rs[0]['utilisation']:.1%} | "
                     f"{sum(r['mismatches'] for r in rs)} |")
    out["array-rtl:table"] = "\n".join(lines)
    return out


def render(text: str, figs: dict[str, str]) -> tuple[str, list[str]]:
    """``text`` with every ``array-rtl`` span replaced; the keys whose text changed."""
    changed = []

    def sub(mt: re.Match) -> str:
        key, old = mt.group(1), mt.group(2)
        if key not in figs:
            raise KeyError(f"docs/array.md names an unknown figure {key!r}")
        new = figs[key]
        if "\n" in new:
            new = "\n" + new + "\n"
        if new != old:
            changed.append(key)
        return f"<!-- fig:{key} -->{new}<!-- /fig -->"

    return MARK.sub(sub, text), changed


def load(path: Path = DATA) -> dict[str, Any]:
    """The committed summary; each design's description is read back (one that no longer
    validates fails here)."""
    data = json.loads(path.read_text())
    for desc in data["designs"].values():
        from_dict(desc)
    return data


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m testbenches.array.campaign",
                                description=__doc__.split("\n")[0])
    p.add_argument("what", nargs="?", choices=["run", "render"], default="render")
    p.add_argument("--check", action="store_true",
                   help="change nothing; exit 1 if docs/array.md differs from the data")
    p.add_argument("--cache", default=None, help="build cache folder (default: the user's)")
    p.add_argument("--limit", type=int, default=None, help="run only the first N cases")
    args = p.parse_args(argv)
    if args.what == "run" and not args.check:
        data = run(args.cache, args.limit)
        DATA.write_text(json.dumps(data, indent=1) + "\n")
        bad = sum(r["mismatches"] for r in data["cases"])
        print(f"{len(data['cases'])} cases, {bad} mismatches -> {DATA}")
    text = DOC.read_text()
    new, changed = render(text, figures(load()))
    if args.check:
        if changed:
            print(f"docs/array.md differs from {DATA.name} at: {', '.join(changed)}")
            return 1
        return 0
    if changed:
        DOC.write_text(new)
    print(f"docs/array.md: {len(changed)} figures updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
