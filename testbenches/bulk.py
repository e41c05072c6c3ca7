"""Bulk mode: millions of dot products through the Verilog with no Python per cycle.

A small C++ harness (``harness.cpp``) is built with the Verilated model. Everything is prepared
with numpy before it runs: the packed payload of every beat (one row of 32-bit words), the
valid-gap and ready patterns. The harness drives the testbenches' driver protocol and records
every handshake (the cycle each beat was taken, the cycle and value of each result) and the
whole trace (every cycle's valid and ready bits and output payload). Python then checks the
values against the numerics engine bit for bit, and the handshake cycles and every cycle of the
trace against the cycle model, every one of them; the trace also gives the handshake coverage.
Registers start random (``Verilated::randReset(2)``) with their initial values stripped from
the Verilog, so only the reset gives them a value.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from mxsim import cycle, formats
from mxsim.engine import fast
from mxsim.errors import MxsimError
from mxsim.microarch import MicroArch, check_rtl
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

__all__ = ["payload_words", "build", "run", "BulkResult"]

HARNESS = Path(__file__).with_name("harness.cpp")
MAGIC = 0x3142584D


def payload_words(spec: UnitSpec, vs: VectorSet) -> npt.NDArray[np.uint32]:
    """Every beat's ``i__payload`` as 32-bit words (least significant first), in the order of
    :func:`mxsim.cycle.beats_of`; the layout of ``hdl.unit.block_layout``."""
    fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)
    k, nblk = spec.k, vs.k // spec.k
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n = vs.m, vs.n
    shape = (nb, m, n, nblk)
    a = np.broadcast_to(vs.a.reshape(nb, m, 1, nblk, k), shape + (k,))
    b = np.broadcast_to(vs.b.reshape(nb, 1, nblk, k, n).transpose(0, 1, 4, 2, 3), shape + (k,))
    c = vs.c.reshape(nb, m, n) if vs.c is not None else np.zeros((nb, m, n), np.uint32)
    c = np.broadcast_to(c[..., None], shape)
    blk = np.broadcast_to(np.arange(nblk), shape)

    def bits(x, width):
        x = np.asarray(x, np.uint64)
        return ((x[..., None] >> np.arange(width, dtype=np.uint64)) & 1).astype(np.uint8)

    parts = [bits(a, fa.bits).reshape(shape + (-1,)), bits(b, fb.bits).reshape(shape + (-1,))]
    if spec.scale_format is not None:
        sa = np.broadcast_to(vs.a_scale.reshape(nb, m, 1, nblk), shape)
        sb = np.broadcast_to(vs.b_scale.reshape(nb, 1, nblk, n).transpose(0, 1, 3, 2), shape)
        parts += [bits(sa, 8), bits(sb, 8)]
    parts += [bits(c, 32), bits(blk == 0, 1), bits(blk == nblk - 1, 1)]
    allbits = np.concatenate(parts, axis=-1).reshape(-1, sum(p.shape[-1] for p in parts))
    words = (allbits.shape[1] + 31) // 32
    padded = np.zeros((allbits.shape[0], words * 32), np.uint8)
    padded[:, :allbits.shape[1]] = allbits
    return np.packbits(padded, axis=1, bitorder="little").view("<u4").copy()


def build(spec: UnitSpec, microarch: MicroArch, build_dir: str | Path, *,
          fault: str | None = None) -> Path:
    """Verilate the unit with the bulk harness; the executable (``fault``: a mutant)."""
    from .faults import verilog_text
    from .runner import strip_initial_values
    from .toolchain import verilator_env, verilator_root

    check_rtl(spec, microarch)
    out = Path(build_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    src = out / "mx_dot.v"
    text = strip_initial_values(verilog_text(spec, microarch, fault))
    exe = out / "obj" / "Vmx_dot"
    if exe.exists() and src.exists() and src.read_text() == text and \
            (out / "harness.cpp").read_text() == HARNESS.read_text():
        return exe                                   # built from this very Verilog already
    src.write_text(text)
    shutil.copy(HARNESS, out / "harness.cpp")
    cmd = [str(verilator_root() / "bin" / "verilator"), "--cc", "--exe", "--build", "-O3",
           "--top-module", "mx_dot", "--x-assign", "unique", "--x-initial", "unique",
           "-Wno-fatal", "-Wno-lint", "-Wno-style", "-j", str(os.cpu_count() or 2),
           "-CFLAGS", "-O2", "--Mdir", str(out / "obj"), str(src), str(out / "harness.cpp")]
    p = subprocess.run(cmd, env=verilator_env(), capture_output=True, text=True, check=False)
    (out / "build.log").write_text(p.stdout + p.stderr)
    if p.returncode or not exe.exists():
        raise MxsimError(f"Verilator failed to build the bulk harness; see {out / 'build.log'}")
    return exe


@dataclass
class BulkResult:
    """One bulk run: counts, the mismatches found (value and timing), the RTL's trace (for
    the handshake coverage), and speed."""
    dots: int
    beats: int
    cycles: int
    value_mismatches: list = field(default_factory=list)
    timing_mismatches: list = field(default_factory=list)
    sim_seconds: float = 0.0
    check_seconds: float = 0.0
    trace: cycle.Trace | None = None

    @property
    def passed(self) -> bool:
        return not self.value_mismatches and not self.timing_mismatches

    @property
    def dots_per_second(self) -> float:
        return self.dots / self.sim_seconds if self.sim_seconds else 0.0


def run(exe: str | Path, spec: UnitSpec, microarch: MicroArch, vs: VectorSet, *,
        seed: int = 0, valid_p: float = 1.0, ready_p: float = 1.0,
        check_timing: bool = True) -> BulkResult:
    """Simulate every dot product of ``vs`` on the bulk executable and check every result."""
    exe = Path(exe)
    work = exe.parent
    words = payload_words(spec, vs)
    beats = words.shape[0]
    gaps, ready = cycle.patterns(4096, valid_p=valid_p, ready_p=ready_p, seed=seed)
    stim = work / "stimulus.bin"
    with open(stim, "wb") as f:
        np.array([MAGIC, beats, words.shape[1], len(gaps), seed], "<u4").tofile(f)
        gaps.astype(np.uint8).tofile(f)
        ready.astype(np.uint8).tofile(f)
        words.tofile(f)
    want = fast.dot(spec, vs).reshape(-1)
    result = work / "result.bin"
    t0 = time.perf_counter()
    p = subprocess.run([str(exe), str(stim), str(result), str(len(want))],
                       capture_output=True, text=True, check=False)
    sim_s = time.perf_counter() - t0
    if p.returncode not in (0, 1) or not result.exists():
        raise MxsimError(f"the bulk harness failed: {p.stderr.strip()[:300]}")
    raw = result.read_bytes()
    cycles = int(np.frombuffer(raw, "<u8", 1, 0)[0])
    n_in, n_out = (int(x) for x in np.frombuffer(raw, "<u4", 2, 8))
    in_cycles = np.frombuffer(raw, "<u8", n_in, 16)
    at = 16 + 8 * n_in
    out = np.frombuffer(raw, np.dtype([("cycle", "<u8"), ("value", "<u4")]), n_out, at)
    at += 12 * n_out
    if len(raw) != at + 5 * cycles:
        raise MxsimError(f"the bulk harness wrote {len(raw)} bytes, not the {at + 5 * cycles} "
                         f"of {cycles} cycles' trace; rebuild it (delete {work.parent})")
    flags = np.frombuffer(raw, np.uint8, cycles, at)
    trace = cycle.Trace(*(((flags >> bit) & 1).astype(bool) for bit in range(4)),
                        np.frombuffer(raw, "<u4", cycles, at + cycles).astype(np.uint32),
                        out["value"].tolist())
    t1 = time.perf_counter()
    res = BulkResult(len(want), beats, cycles, sim_seconds=sim_s, trace=trace)
    if n_in != beats:
        res.timing_mismatches.append(f"{n_in} of {beats} beats taken in {cycles} cycles")
    if n_out != len(want):
        res.value_mismatches.append(f"{n_out} of {len(want)} results left in {cycles} cycles")
    got = out["value"][:len(want)]
    bad = np.nonzero(got != want[:len(got)])[0]
    res.value_mismatches += [{"dot": int(i), "rtl": f"{int(got[i]):#010x}",
                              "model": f"{int(want[i]):#010x}"} for i in bad[:20]]
    if len(bad) > 20:
        res.value_mismatches.append(f"... {len(bad)} in all")
    if check_timing:
        model = cycle.run(cycle.UnitModel(spec, microarch), cycle.beats_of(spec, vs, want),
                          gaps, ready)
        m_in = np.nonzero(model.in_valid & model.in_ready)[0]
        m_out = np.nonzero(model.out_valid & model.out_ready)[0]
        for name, rtl, mod in (("input handshake", in_cycles, m_in),
                               ("output handshake", out["cycle"], m_out)):
            n = min(len(rtl), len(mod))
            diff = np.nonzero(rtl[:n] != mod[:n])[0]
            if len(rtl) != len(mod):
                res.timing_mismatches.append(f"{name}s: {len(rtl)} in RTL, {len(mod)} in the "
                                             f"model")
            res.timing_mismatches += [f"{name} {int(i)}: RTL cycle {int(rtl[i])}, model "
                                      f"{int(mod[i])}" for i in diff[:10]]
        # Every cycle, as the cocotb scoreboard checks it: i.ready, o.valid, and o.payload
        # held while o.ready is low (the values that leave are checked above).
        n = min(trace.cycles, model.cycles)
        if trace.cycles != model.cycles:
            res.timing_mismatches.append(f"trace: {trace.cycles} cycles in RTL, "
                                         f"{model.cycles} in the model")
        held = trace.out_valid[:n] & model.out_valid[:n] & ~trace.out_ready[:n]
        for name in ("in_ready", "out_valid", "out_payload"):
            rtl, mod = getattr(trace, name)[:n], getattr(model, name)[:n]
            diff = np.nonzero((rtl != mod) & (held if name == "out_payload" else True))[0]
            if len(diff):
                i = int(diff[0])
                res.timing_mismatches.append(
                    f"{name} differs on {len(diff)} cycles, first {i}: RTL "
                    f"{int(getattr(trace, name)[i]):#x}, model {int(getattr(model, name)[i]):#x}")
    res.check_seconds = time.perf_counter() - t1
    return res
