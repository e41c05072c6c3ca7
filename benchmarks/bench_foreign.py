"""Throughput through a port map: dot products checked per second when mxsim drives a design
as foreign RTL, against its own generated-RTL path measured in the same run.

    python benchmarks/bench_foreign.py [--dots N] [--bulk-dots N] [--coproc] [--json PATH]

The design is mxsim's MXFP8 unit (blackwell-mxf8f6f4, e4m3, E8M0 blocks of 32, k = 32, 32
lanes, 1 stage: one dot product a cycle when nothing stalls), run four ways on the same vectors:
the generated-RTL backends (cocotb testbench, bulk C++ harness) and the foreign-RTL backends
driving it through examples/rtl/mxsim_unit/mxsim_unit.toml. With --coproc, the hand-written
example-1 unit at K = 32 (examples/rtl/mxfp8_coproc/mxfp8_coproc_k32.toml) runs through the
foreign backends too. Every path checks every output against the engine (and the foreign ones
every declared timing rule); the rates are the simulation loop alone (stimulus, engine and
model are prepared before and checked after), as `mxsim verify` reports them. The builds and
the harnesses' trace and result files are in /dev/shm where the machine has one.

Each path is printed against its peer (a foreign path against the generated-RTL path of the
same kind; the generated paths against generated cocotb) and against the ceiling of its design:
the bulk executable run with ``--ceiling`` (Verilator driving the same model with the stimulus
in memory and nothing recorded or checked; its dots/s are its cycles/s times the dots per cycle
of the checked bulk run). With ``--json`` the rows are written as a self-describing record.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
from datetime import date
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _timing import memory_dir, versions_line  # noqa: E402

from mxsim import presets, units, vectors  # noqa: E402
from mxsim.microarch import MicroArch  # noqa: E402

MAP = ROOT / "examples" / "rtl" / "mxsim_unit" / "mxsim_unit.toml"
COPROC = ROOT / "examples" / "rtl" / "mxfp8_coproc"


def _rate(backend, spec, ua, vs, work: Path, ceilings: dict | None = None) -> float:
    """Dot products per second of ``backend``'s clocked loop on ``vs`` (every output checked
    and equal to the model's); with ``ceilings``, a bulk backend's ceiling (best of 3) too,
    under the backend's mode."""
    from testbenches.sim.backend import Stimulus

    ones = np.ones(64, bool)
    backend.build(spec, ua, work)
    run = backend.run(vs, Stimulus(ones, ones, 1), name="bench")
    assert run.passed, run.mismatches[:3]
    assert run.dots == vs.num_dots
    if ceilings is not None:
        best = max((backend.ceiling(vs) for _ in range(3)), key=lambda x: x["cycles_per_s"])
        best["dots_per_s"] = best["cycles_per_s"] * run.dots / run.cycles
        best["harness_phases"] = run.phases
        ceilings[work.name] = best
    return run.dots / run.loop_seconds


#: Each path's peer: the same kind of run on the generated RTL (the generated paths: cocotb).
PEERS = {"generated RTL, cocotb": "generated RTL, cocotb",
         "generated RTL, bulk": "generated RTL, cocotb",
         "port map, cocotb": "generated RTL, cocotb", "port map, bulk": "generated RTL, bulk"}


def _paths(spec, pm, tmp: Path, cocotb_vs, bulk_vs, ua) -> tuple[dict, dict]:
    from testbenches.foreign.backend import ForeignBackend
    from testbenches.foreign.bulk import ForeignBulkBackend
    from testbenches.unit.bulk import BulkBackend
    from testbenches.unit.runner import CocotbBackend

    out, ceilings = {}, {}
    if pm is None or pm.design.top == "mx_dot":
        out["generated RTL, cocotb"] = _rate(CocotbBackend(), spec, ua, cocotb_vs, tmp / "gc")
        out["generated RTL, bulk"] = _rate(BulkBackend(), spec, ua, bulk_vs, tmp / "gb",
                                           ceilings)
    out["port map, cocotb"] = _rate(ForeignBackend(pm), spec, ua, cocotb_vs, tmp / "fc")
    out["port map, bulk"] = _rate(ForeignBulkBackend(pm), spec, ua, bulk_vs, tmp / "fb",
                                  ceilings)
    # The ceiling of the design: Verilator alone on the foreign bulk build (the same Verilog).
    return out, ceilings["fb"]


def _table(title: str, out: dict[str, float], ceiling: dict, fallback: str) -> list[dict]:
    rows = []
    for name, rate in out.items():
        peer = PEERS[name] if PEERS[name] in out else fallback
        rows.append({"path": name, "dots_per_s": round(rate), "peer": peer,
                     "vs_peer": round(rate / out[peer], 2),
                     "ceiling_dots_per_s": round(ceiling["dots_per_s"]),
                     "fraction_of_ceiling": round(rate / ceiling["dots_per_s"], 4)})
    print(f"\n{title}")
    print(f"# ceiling: {ceiling['cycles_per_s']:,.0f} cycles/s, {ceiling['dots_per_s']:,.0f} "
          f"dots/s (Verilator alone on the port map's bulk build)")
    print(f"{'path':24} {'dots/s':>12} {'vs peer':>9}  {'peer':24} {'of ceiling':>10}")
    for r in rows:
        print(f"{r['path']:24} {r['dots_per_s']:12,} {r['vs_peer']:8.2f}x  {r['peer']:24} "
              f"{r['fraction_of_ceiling']:10.1%}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dots", type=int, default=100_000, help="cocotb paths")
    ap.add_argument("--bulk-dots", type=int, default=1_000_000, help="bulk paths")
    ap.add_argument("--coproc", action="store_true", help="also example 1 at K = 32")
    ap.add_argument("--json", metavar="PATH", help="also write the record here")
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
    designs = []
    with tempfile.TemporaryDirectory(dir=memory_dir()) as tmp:   # builds and harness files
        tmp = Path(tmp)
        (tmp / "mx_dot.v").write_text(verilog.generate(spec, ua))
        shutil.copy(MAP, tmp / MAP.name)
        pm = portmap.load(tmp / MAP.name)
        out, ceiling = _paths(spec, pm, tmp, cocotb_vs, bulk_vs, ua)
        rows = _table(f"mxsim's MXFP8 unit (k = 32, 32 lanes): {cocotb_vs.num_dots:,} dots "
                      f"through cocotb, {bulk_vs.num_dots:,} in bulk", out, ceiling,
                      "generated RTL, cocotb")
        designs.append({"design": "examples/rtl/mxsim_unit/mxsim_unit.toml (mxsim's MXFP8 "
                                  "unit, 32 lanes, 1 stage)", "rows": rows, "ceiling": ceiling})
        if args.coproc:
            pm = portmap.load(COPROC / "mxfp8_coproc_k32.toml")
            cspec = units.get(str(COPROC / "mxfp8_coproc_spec.toml")).spec_for_formats(
                "e4m3", "e4m3").replace(k=32, block=32)
            c_vs = cocotb_vs.replace(block=32)
            out, ceiling = _paths(cspec, pm, tmp / "coproc", c_vs, bulk_vs, MicroArch(lanes=32))
            rows = _table("example 1, the hand-written coprocessor unit at K = 32", out,
                          ceiling, "port map, cocotb")
            designs.append({"design": "examples/rtl/mxfp8_coproc/mxfp8_coproc_k32.toml",
                            "rows": rows, "ceiling": ceiling})
    if args.json:
        record = {"schema": "mxsim.bench_foreign/1", "date": date.today().isoformat(),
                  "command": "python benchmarks/bench_foreign.py " + " ".join(sys.argv[1:]),
                  "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                  "versions": versions_line().lstrip("# "),
                  "notes": __doc__.split("\n\n", 2)[2].strip(), "designs": designs}
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
