"""What probing internal signals costs the bulk harness: nrm_tree's dot products checked per
second with its seven probes sampled, against the same design and vectors with probes off,
measured in the same run.

    python benchmarks/bench_probes.py [--dots N] [--repeat R]

The design is examples/rtl/nrm_tree (E4M3, k = 32, blocks of 8, a two-level rounding tree;
a 2-stage pipeline, one dot product a cycle) behind examples/rtl/nrm_tree/nrm_tree_probes.toml,
whose [probes] name the four block terms, the two level-1 adders and the level-2 adder (seven
50-bit signals under two strobes). Probes on: the Verilated model has those signals (and the
strobes) public_flat_rd through a generated .vlt file, and the harness copies each in every
cycle its strobe is 1 and writes them to a file read back after the run. Probes off: the map's
[probes] ignored, the model and harness of a map without them. Both builds are -O2 as
`mxsim verify --bulk` makes them; every output is checked against the engine. The rate is the
harness run (stimulus file in, trace, results and probes files out), as `mxsim verify`
reports it; the best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _timing import versions_line  # noqa: E402

from mxsim import spec as specs  # noqa: E402
from mxsim import vectors  # noqa: E402

NRM = ROOT / "examples" / "rtl" / "nrm_tree"


def _rate(backend, spec, vs, work: Path, repeat: int) -> tuple[float, int]:
    """Dot products per second of ``backend``'s harness on ``vs`` (best of ``repeat``, every
    output equal to the model's), and the probe samples it kept."""
    from testbenches.sim.backend import Stimulus

    backend.build(spec, None, work)
    best, kept = 0.0, 0
    for _ in range(repeat):
        run = backend.run(vs, Stimulus.random(1, valid_p=1.0, ready_p=1.0), name="bench")
        assert run.passed, run.mismatches[:3]
        assert run.dots == vs.num_dots
        best = max(best, run.dots / run.loop_seconds)
        kept = sum(len(s) for s in run.probes.values())
    return best, kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dots", type=int, default=250_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from testbenches.foreign import portmap
    from testbenches.foreign.bulk import ForeignBulkBackend

    pm = portmap.load(NRM / "nrm_tree_probes.toml")
    spec = specs.load(NRM / "nrm_tree_spec.toml")
    side = int(args.dots ** 0.5)
    vs = vectors.generate("normal", a_format="e4m3", m=side, n=side, k=32,
                          scale_format="e8m0", block=8, with_c=False, seed=1)
    vs = pm.domain.constrain(vs, 1)
    print(versions_line())
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        out["probes off"] = _rate(ForeignBulkBackend(pm, probes=False), spec, vs,
                                  Path(tmp) / "off", args.repeat)
        out["probes on (7 signals)"] = _rate(ForeignBulkBackend(pm), spec, vs,
                                             Path(tmp) / "on", args.repeat)
    base = out["probes off"][0]
    print(f"\nnrm_tree through the bulk C++ harness: {vs.num_dots:,} dot products, best of "
          f"{args.repeat}")
    print(f"{'path':24} {'dots/s':>12} {'samples':>12} {'vs probes off':>14}")
    for name, (rate, kept) in out.items():
        print(f"{name:24} {rate:12,.0f} {kept:12,} {rate / base:13.2f}x")


if __name__ == "__main__":
    main()
