"""Run SCALE-Sim v3 (PyPI ``scalesim``) on GEMM layers and read its cycle counts.

:func:`run` writes SCALE-Sim's inputs (a GEMM topology CSV ``Layer,M,N,K,``, a layout CSV,
which SCALE-Sim reads even when its custom layouts are off, and a ``.cfg``), runs it in this
process with no traces saved, and returns the rows of its ``COMPUTE_REPORT.csv`` as dicts.
:func:`read_report` reads a report (a committed one too).

SCALE-Sim 3.0.0 calls ``int(max(list_of_one_element_arrays))``, which NumPy 2.4 (our lock)
refuses ("only 0-dimensional arrays can be converted to Python scalars"; NumPy < 2.4 accepted it
with a DeprecationWarning). :func:`_numpy24_shim` gives its two memory modules a ``max`` that
returns such a one-element array's scalar, which is what NumPy < 2.4 then converted: the
numbers are SCALE-Sim's own. Its ``get_total_cycles`` is broken in 3.0.0 (it subscripts a
method), so the report CSV is what we read.
"""

from __future__ import annotations

import builtins
import contextlib
import csv
import gc
import io
import warnings
from pathlib import Path

import numpy as np

__all__ = ["run", "read_report", "config_text", "REPORT_COLUMNS"]

#: COMPUTE_REPORT.csv's columns, by our names.
REPORT_COLUMNS = {"LayerID": "layer", "Total Cycles (incl. prefetch)": "cycles_with_prefetch",
                  "Total Cycles": "cycles", "Stall Cycles": "stalls",
                  "Overall Util %": "util_pct", "Mapping Efficiency %": "mapping_pct",
                  "Compute Util %": "compute_util_pct"}

_CFG = """[general]
run_name = {name}

[architecture_presets]
ArrayHeight:    {rows}
ArrayWidth:     {cols}
IfmapSramSzkB:   {sram_kb}
FilterSramSzkB:  {sram_kb}
OfmapSramSzkB:   {sram_kb}
IfmapOffset:    0
FilterOffset:   10000000
OfmapOffset:    20000000
Bandwidth : {bandwidth}
Dataflow : {dataflow}
MemoryBanks:   1
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: 10
IfmapSRAMBankNum: 10
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: 10
FilterSRAMBankNum: 10
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport : false
SparseRep : ellpack_block
OptimizedMapping : false
BlockSize : 8
RandomNumberGeneratorSeed : 40

[run_presets]
InterfaceBandwidth: {mode}
UseRamulatorTrace: False
"""

#: One layout row per layer (read, unused with custom layouts off): SCALE-Sim's example.
_LAYOUT_ROW = "1,1,1,1,1,1,1,2,0,4,5,3,3,0,1,2,7,4,5,6,"


def config_text(name: str, rows: int, cols: int, *, dataflow: str = "os", sram_kb: int = 1024,
                bandwidth: int | None = None) -> str:
    """A SCALE-Sim .cfg: ``bandwidth`` None is its CALC mode (DRAM bandwidth estimated, so
    no stalls), a number its USER mode (words per cycle between DRAM and the SRAMs)."""
    return _CFG.format(name=name, rows=rows, cols=cols, sram_kb=sram_kb, dataflow=dataflow,
                       bandwidth=bandwidth or 10, mode="CALC" if bandwidth is None else "USER")


def _numpy24_shim() -> None:
    def one_max(*args, **kwargs):
        r = builtins.max(*args, **kwargs)
        return r.reshape(())[()] if isinstance(r, np.ndarray) and r.size == 1 else r

    import scalesim.memory.double_buffered_scratchpad_mem as dbsp
    import scalesim.memory.read_buffer as rb
    dbsp.max = one_max
    rb.max = one_max


def run(workdir: str | Path, name: str, rows: int, cols: int,
        layers: list[tuple[str, int, int, int]], **cfg) -> list[dict]:
    """Run SCALE-Sim on GEMM ``layers`` (name, M, N, K) on a rows x cols array; its inputs
    and reports are left in ``workdir`` (``workdir/name/COMPUTE_REPORT.csv``...)."""
    _numpy24_shim()
    from scalesim.scale_sim import scalesim

    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    (work / f"{name}.cfg").write_text(config_text(name, rows, cols, **cfg))
    (work / f"{name}_topology.csv").write_text(
        "Layer,M,N,K,\n" + "".join(f"{lay},{m},{n},{k},\n" for lay, m, n, k in layers))
    (work / f"{name}_layout.csv").write_text(
        "Layer name," + "x," * 20 + "\n" + "".join(f"{lay},{_LAYOUT_ROW}\n"
                                                  for lay, *_ in layers))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        sim = scalesim(save_disk_space=True, verbose=False, config=str(work / f"{name}.cfg"),
                       topology=str(work / f"{name}_topology.csv"),
                       layout=str(work / f"{name}_layout.csv"), input_type_gemm=True)
        gc.collect()
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)    # it leaves its CSVs open
        sim.run_scale(top_path=str(work))
        del sim
        gc.collect()
    return read_report(work / name / "COMPUTE_REPORT.csv")


def read_report(path: str | Path) -> list[dict]:
    """The rows of a COMPUTE_REPORT.csv: numbers by :data:`REPORT_COLUMNS` names."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    head = [h.strip() for h in rows[0]]
    out = []
    for r in rows[1:]:
        if not any(x.strip() for x in r):
            continue
        rec = {}
        for h, x in zip(head, r, strict=False):
            if h in REPORT_COLUMNS:
                rec[REPORT_COLUMNS[h]] = float(x) if "." in x else int(x)
        out.append(rec)
    return out
