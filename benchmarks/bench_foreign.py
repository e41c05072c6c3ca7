"""Throughput through a port map: dot products checked per second when mxsim drives a design
as foreign RTL, against its own generated-RTL path measured in the same run.

    python benchmarks/bench_foreign.py [--dots N] [--bulk-dots N]

The design is mxsim's MXFP8 unit (blackwell-mxf8f6f4, e4m3, E8M0 blocks of 32, k = 32, 32
lanes, 1 stage: one dot product a cycle when nothing stalls), run four ways on the same vectors:
the generated-RTL backends (cocotb testbench, bulk C++ harness) and the foreign-RTL backends
driving it through examples/rtl/mxsim_unit/mxsim_unit.toml. With --coproc, the hand-written
example-1 unit at K = 32 (examples/rtl/mxfp8_coproc/mxfp8_coproc_k32.toml) runs through the
foreign backends too. Every path checks every output against the engine (and the foreign ones
every declared timing rule); the rates are the simulation loop alone (stimulus, engine and
model are prepared before and checked after), as `mxsim verify` reports them.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _timing import versions_line  # noqa: E402

from mxsim import presets, units, vectors  # noqa: E402
from mxsim.microarch import MicroArch  # noqa: E402

MAP = ROOT / "examples" / "rtl" / "mxsim_unit" / "mxsim_unit.toml"
COPROC = ROOT / "examples" / "rtl" / "mxfp8_coproc"


def _rate(backend, spec, ua, vs, work: Path) -> float:
    """Dot products per second of ``backend``'s clocked loop on ``vs`` (every output checked
    and equal to the model's)."""
    from testbenches.sim.backend import Stimulus

    ones = np.ones(64, bool)
    backend.build(spec, ua, work)
    run = backend.run(vs, Stimulus(ones, ones, 1), name="bench")
    assert run.passed, run.mismatches[:3]
    assert run.dots == vs.num_dots
    return run.dots / run.loop_seconds


def _paths(spec, pm, tmp: Path, cocotb_vs, bulk_vs, ua) -> dict[str, float]:
    from testbenches.foreign.backend import ForeignBackend
    from testbenches.foreign.bulk import ForeignBulkBackend
    from testbenches.unit.bulk import BulkBackend
    from testbenches.unit.runner import CocotbBackend

    out = {}
    if pm is None or pm.design.top == "mx_dot":
        out["generated RTL, cocotb"] = _rate(CocotbBackend(), spec, ua, cocotb_vs, tmp / "gc")
        out["generated RTL, bulk"] = _rate(BulkBackend(), spec, ua, bulk_vs, tmp / "gb")
    out["port map, cocotb"] = _rate(ForeignBackend(pm), spec, ua, cocotb_vs, tmp / "fc")
    out["port map, bulk"] = _rate(ForeignBulkBackend(pm), spec, ua, bulk_vs, tmp / "fb")
    return out


def _table(title: str, out: dict[str, float], base: str) -> None:
    print(f"\n{title}")
    print(f"{'path':28} {'dots/s':>12} {'vs ' + base:>28}")
    for name, rate in out.items():
        print(f"{name:28} {rate:12,.0f} {rate / out[base]:27.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dots", type=int, default=100_000, help="cocotb paths")
    ap.add_argument("--bulk-dots", type=int, default=1_000_000, help="bulk paths")
    ap.add_argument("--coproc", action="store_true", help="also example 1 at K = 32")
    args = ap.parse_args()
    from hdl import verilog
    from testbenches.foreign import portmap

    spec = presets.get("blackwell-mxf8f6f4").spec("e4m3", scale_format="e8m0", block=32)
    ua = MicroArch(lanes=32, stages=1)
    side, big = int(np.sqrt(args.dots)), int(np.sqrt(args.bulk_dots))
    cocotb_vs = vectors.generate("normal", m=side, n=side, k=32, scale_format="e8m0",
                                 block=32, seed=1)
    bulk_vs = vectors.generate("normal", m=big, n=big, k=32, scale_format="e8m0", block=32,
                               seed=2)
    print(versions_line())
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "mx_dot.v").write_text(verilog.generate(spec, ua))
        shutil.copy(MAP, tmp / MAP.name)
        pm = portmap.load(tmp / MAP.name)
        out = _paths(spec, pm, tmp, cocotb_vs, bulk_vs, ua)
        _table(f"mxsim's MXFP8 unit (k = 32, 32 lanes): {cocotb_vs.num_dots:,} dots through "
               f"cocotb, {bulk_vs.num_dots:,} in bulk", out, "generated RTL, cocotb")
        if args.coproc:
            pm = portmap.load(COPROC / "mxfp8_coproc_k32.toml")
            cspec = units.get(str(COPROC / "mxfp8_coproc_spec.toml")).spec_for_formats(
                "e4m3", "e4m3").replace(k=32, block=32)
            c_vs = cocotb_vs.replace(block=32)
            out = _paths(cspec, pm, tmp / "coproc", c_vs, bulk_vs, MicroArch(lanes=32))
            _table("example 1, the hand-written coprocessor unit at K = 32", out,
                   "port map, cocotb")


if __name__ == "__main__":
    main()
