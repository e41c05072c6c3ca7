"""The documented GST-FDPA run: Blackwell's FP4 units through the bulk harness.

    python -m testbenches.campaigns.gst [--dots 1000000] [--lanes 64 --stages 1] [--json OUT]
                                       [--configs 0,1,2,3] [--workers N]
    python -m testbenches.campaigns.gst --markdown docs/data/campaign_gst.json   # the docs
    python -m testbenches.campaigns.gst --mutants-markdown docs/data/mutants_gst.json
    python -m testbenches.campaigns.gst --render docs/verification.md   # both, in place
    python -m testbenches.campaigns.gst --collect-mutants "LABEL=run.json" ... --json OUT

The four FP4 designs (:data:`CONFIGS`): ``blackwell-mxf4`` (E2M1 x E2M1, E8M0 blocks of 32)
and ``blackwell-mxf4nvf4`` with each of its scale configurations (E8M0 blocks of 32, E8M0
blocks of 16, UE4M3 blocks of 16: NVFP4), all K = 64, groups of 16, F = 35, RZ FP32. Each runs
``dots`` dot products of ``mxsim verify --bulk`` stimulus (the grouped constructions of
:mod:`testbenches.unit.group_coverage` included), every output checked bit for bit against the
engine and every cycle against the cycle model, with the same task layer, result store and
build cache as :mod:`testbenches.campaigns.pairs`. :func:`markdown` renders docs/verification.md's
section from the JSON, so no figure there is typed by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mxsim.campaign import run
from mxsim.design import resolve_design
from mxsim.output import write_text
from mxsim.spec import UnitSpec

from .pairs import SEED, record_of, summary, tasks_for_specs

__all__ = ["CONFIGS", "SECTIONS", "designs", "main", "markdown", "mutants_markdown", "label_of",
           "collect_mutants",
           "markers", "section", "render"]

#: (unit, scale format, block) of every design the run covers
CONFIGS: tuple[tuple[str, str, int], ...] = (
    ("blackwell-mxf4", "e8m0", 32),
    ("blackwell-mxf4nvf4", "e8m0", 32),
    ("blackwell-mxf4nvf4", "e8m0", 16),
    ("blackwell-mxf4nvf4", "ue4m3", 16),
)


def label_of(unit: str, scale: str, block: int) -> str:
    """A design's row name: ``blackwell-mxf4nvf4 ue4m3/16``."""
    return f"{unit} {scale}/{block}"


def designs(indices: list[int] | None = None) -> list[tuple[str, UnitSpec]]:
    """``(label, spec)`` of the chosen :data:`CONFIGS` (all by default)."""
    out = []
    for i in indices if indices is not None else range(len(CONFIGS)):
        unit, scale, block = CONFIGS[i]
        spec, _ = resolve_design(unit, "e2m1", "e2m1", scale=(scale, block))
        out.append((label_of(unit, scale, block), spec))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbenches.campaigns.gst",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--dots", type=int, default=1_000_000)
    ap.add_argument("--chunk", type=int, default=100_000)
    ap.add_argument("--lanes", type=int, default=64)
    ap.add_argument("--stages", type=int, default=1)
    ap.add_argument("--configs", default=None, help="indices into CONFIGS, e.g. 0,3 (default: "
                                                    "all)")
    ap.add_argument("--out", default="build/campaign_gst")
    ap.add_argument("--store", default=None, help="result store (default: OUT/store)")
    ap.add_argument("--cache", default=None, help="build cache (default: per user)")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--executor", default="auto", choices=("auto", "inprocess", "local"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--markdown", default=None, metavar="JSON",
                    help="print docs/verification.md's GST section from a run's JSON")
    ap.add_argument("--mutants-markdown", default=None, metavar="JSON",
                    help="print the grouping mutants' table from docs/data/mutants_gst.json")
    ap.add_argument("--render", default=None, metavar="DOC.md",
                    help="write both sections into DOC.md between their markers, from "
                         "docs/data/campaign_gst.json and docs/data/mutants_gst.json")
    ap.add_argument("--collect-mutants", nargs="+", default=None, metavar="LABEL=JSON",
                    help="write --json from mutant runs (python -m testbenches.unit.mutants --json "
                         "...), each under its design's label")
    args = ap.parse_args(argv)
    if args.collect_mutants:
        out = collect_mutants(dict(item.split("=", 1) for item in args.collect_mutants))
        write_text(args.json or "docs/data/mutants_gst.json", json.dumps(out, indent=1) + "\n")
        return 0
    if args.render:
        render(args.render)
        return 0
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())), end="")
        return 0
    if args.mutants_markdown:
        print(mutants_markdown(json.loads(Path(args.mutants_markdown).read_text())), end="")
        return 0
    picked = [int(x) for x in args.configs.split(",")] if args.configs else None
    kw = dict(dots=args.dots, chunk=args.chunk, lanes=args.lanes, stages=args.stages,
              sim="verilator", bulk=True, seed=SEED)
    tasks = tasks_for_specs(designs(picked), cache=args.cache, out=args.out, **kw)
    rep = run(tasks, args.store or Path(args.out) / "store", executor=args.executor,
              workers=args.workers)
    command = "python -m testbenches.campaigns.gst " + " ".join(
        argv if argv is not None else sys.argv[1:])
    record = record_of(tasks, rep, command=command, **kw)
    print(summary(record, rep), flush=True)
    if args.json:
        write_text(args.json, json.dumps(record, indent=1))
    bad = sum(len(r["mismatches"]) for r in record["pairs"])
    return 1 if bad or rep.failed else 0


#: The sections of docs/verification.md this module writes: marker name -> (its JSON, renderer)
SECTIONS = {"campaign_gst": ("docs/data/campaign_gst.json", "--markdown"),
            "mutants_gst": ("docs/data/mutants_gst.json", "--mutants-markdown")}


def markers(name: str) -> tuple[str, str]:
    """The begin and end markers of section ``name`` of docs/verification.md."""
    data, flag = SECTIONS[name]
    return (f"<!-- {name}: generated by python -m testbenches.campaigns.gst {flag} {data} -->",
            f"<!-- {name}: end -->")


def section(name: str, root: Path) -> str:
    """Section ``name`` rendered from its committed JSON under ``root``."""
    data = json.loads((root / SECTIONS[name][0]).read_text())
    return markdown(data) if name == "campaign_gst" else mutants_markdown(data)


def render(doc: str | Path, root: Path | None = None) -> None:
    """Write every section of :data:`SECTIONS` into ``doc`` between its markers."""
    root = root or Path(__file__).resolve().parents[2]
    text = Path(doc).read_text()
    for name in SECTIONS:
        begin, end = markers(name)
        head, rest = text.split(begin)
        _, tail = rest.split(end)
        text = f"{head}{begin}\n{section(name, root)}{end}{tail}"
    write_text(doc, text)


def markdown(run_: dict) -> str:
    """docs/verification.md's GST-FDPA section, every figure from ``run_`` (the JSON that
    :func:`main` writes)."""
    rows = run_["pairs"]
    dots = sum(r["dots"] for r in rows)
    value = sum(r["value_mismatches"] for r in rows)
    cyc = sum(r["cycle_mismatches"] for r in rows)
    holed = [r for r in rows if r["holes"]]
    short = [r for r in rows if r["dots"] < run_["dots_asked"]]
    out = [f"**Result: {len(rows)} FP4 design{'s' if len(rows) != 1 else ''}, {dots:,} dot "
           f"products, {value} value and {cyc} cycle mismatches; "
           + (f"{len(holed)} with coverage holes.**" if holed
              else "every coverpoint hit in every design (0 holes).**"), "",
           "| | |", "|---|---|",
           f"| run | {run_['date']}, `{run_['command'].strip()}`, commit "
           f"`{run_['commit'][:12]}`; "
           f"{', '.join(f'{k} {v}' for k, v in run_['versions'].items())}; "
           f"{run_['seconds'] / 60:.0f} min in all on {run_['workers']} worker"
           f"{'s' if run_['workers'] != 1 else ''} |",
           f"| stimulus | `mxsim verify --bulk` chunks of {run_['chunk']:,} from seed "
           f"{run_['seed']}, {run_['dots_asked']:,} dot products asked per design; "
           f"{run_['lanes']} lanes, {run_['stages']} stage{'s' if run_['stages'] != 1 else ''}"
           + (f"; short of it: {', '.join(r['pair'] for r in short)}" if short else "") + " |",
           "", "| design | dot products | cycles | value / cycle mismatches | coverage holes "
           "| group_scale bins hit | group_case bins hit | harness (s) |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['pair']} | {r['dots']:,} | {r['cycles']:,} | "
                   f"{r['value_mismatches']} / {r['cycle_mismatches']} | {len(r['holes'])} | "
                   f"{_hit(r, 'group_scale')} | {_hit(r, 'group_case')} | {r['sim_seconds']:.1f} |")
    out += ["", "| design | " + " | ".join(_CASES) + " |", "|---|" + "---|" * len(_CASES)]
    for r in rows:
        case = r["coverage"].get("group_case", {})
        out.append(f"| {r['pair']} | " + " | ".join(
            f"{case[c]:,}" if c in case else "n/a" for c in _CASES) + " |")
    return "\n".join(out) + "\n"


def collect_mutants(files: dict[str, str]) -> dict[str, list[dict]]:
    """Design label -> the rows of its mutant run's JSON (fault, where, killed, dots to kill,
    seconds), as docs/data/mutants_gst.json holds them."""
    keep = ("fault", "where", "killed", "dots_to_kill", "seconds")
    return {label: [{k: r[k] for k in keep} for r in json.loads(Path(path).read_text())]
            for label, path in files.items()}


def mutants_markdown(runs: dict[str, list[dict]]) -> str:
    """docs/verification.md's table of the grouping mutants from ``runs`` (design label ->
    the rows ``python -m testbenches.unit.mutants --json`` wrote for it)."""
    labels = list(runs)
    faults = list(dict.fromkeys(r["fault"] for rows in runs.values() for r in rows))
    out = ["| mutant | fault | " + " | ".join(labels) + " |",
           "|---|---|" + "---|" * len(labels)]
    for fault in faults:
        cells = []
        for label in labels:
            row = next((r for r in runs[label] if r["fault"] == fault), None)
            cells.append("not run" if row is None else
                         f"killed ({row['dots_to_kill']:,})" if row["killed"] else
                         "survived")
        where = next(r["where"] for rows in runs.values() for r in rows if r["fault"] == fault)
        out.append(f"| `{fault}` | {where} | " + " | ".join(cells) + " |")
    killed = sum(r["killed"] for rows in runs.values() for r in rows)
    total = sum(len(rows) for rows in runs.values())
    out += ["", f"{killed} of {total} mutant runs killed."]
    return "\n".join(out) + "\n"


_CASES = ("different-scales", "all-zero-group", "all-zero-group-leads", "cancelling-group",
          "cancelling-group-leads", "zero-scale-group", "group-sum-top")


def _hit(row: dict, point: str) -> str:
    from ..unit.coverage import COVERPOINTS
    bins = row["coverage"].get(point, {})
    need = COVERPOINTS[point][1]
    return f"{sum(n >= need for n in bins.values())}/{len(bins)}"


if __name__ == "__main__":
    raise SystemExit(main())
