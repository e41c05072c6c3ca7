"""``mxsim prove --rtl`` on example 2's injected bug at the bug map's own parameters, as a record.

    python benchmarks/formal_rtl_bug.py --out docs/data/formal_rtl_bug_k128_2026-12-06

examples/rtl/block_dot with ``INJECT_BUG`` (its t2 + t3 adder truncates) at k = 128, blocks of
32: the fraction check fails with a counterexample (one SAT search, three to five minutes on
two busy cores). Writes ``record.json`` (the proof row, the design, the parameters, the
machine's tools) and ``counterexample.npz`` as the search left it;
tests/testbenches/test_formal_rtl_bug.py replays that counterexample through the Verilator
builds of the bug and of the good design (the first fails, the second passes), and the small
configuration's search stays in tests/testbenches/test_formal_rtl_proof.py.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from _timing import versions_line  # benchmarks/ is on sys.path when run as a script

from mxsim import units
from testbenches.foreign import portmap
from testbenches.formal.foreign import prepare, prove_rtl

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "rtl" / "block_dot"
SPEC = EXAMPLE / "block_dot_spec_e4m3.toml"
MAP = EXAMPLE / "block_dot_bug.toml"
#: The check a truncating adder fails: one ulp off in the fraction of a normal D.
FRACTION = "the fraction field is D's (D normal)"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for the record")
    p.add_argument("--timeout", type=float, default=1800)
    args = p.parse_args()
    spec = units.get(str(SPEC)).spec_for_formats("e4m3", "e4m3")
    with tempfile.TemporaryDirectory() as tmp:
        prep = prepare(portmap.load(MAP), spec, {}, Path(tmp))
        (row,) = prove_rtl(prep, out_dir=Path(tmp) / "proof", timeout=args.timeout, jobs=1,
                           only=(FRACTION,))
        args.out.mkdir(parents=True, exist_ok=True)
        if row.counterexample:
            shutil.copyfile(row.counterexample, args.out / "counterexample.npz")
    proof = asdict(row)
    proof["counterexample"] = "counterexample.npz" if row.counterexample else None
    proof["trace"] = None                       # the trace stayed in the temporary folder
    record = {"command": "python benchmarks/formal_rtl_bug.py --out " + str(args.out),
              "versions": versions_line().lstrip("# "),
              "rtl": str(MAP.relative_to(ROOT)), "unit": str(SPEC.relative_to(ROOT)),
              "k": spec.k, "block": spec.block, "parameters": {}, "proof": proof}
    (args.out / "record.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(proof, indent=1))
    return 0 if row.status == "FAIL" and row.counterexample else 1


if __name__ == "__main__":
    sys.exit(main())
