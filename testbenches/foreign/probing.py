"""Sampling a port map's ``[probes]`` in a run: what the harnesses read, and reading it back.

A **channel** is one probed signal under one strobe (:func:`channels`): in every cycle the
strobe is 1 after the inputs settle (where the harness reads results), the signal's value is
appended, so the channel's n-th sample is the n-th instruction's. The bulk C++ harness finds
each channel's Verilated variable by its scope and name (``VerilatedScope::varFind``, which
needs the variable public: :func:`vlt_text` writes a Verilator configuration file that makes
only the probed signals and strobes ``public_flat_rd``, so the rest of the design is optimised
as before) and copies its bytes; the cocotb test (:class:`Sampler`) reads cocotb handles
(``dut.u_blk.term``, ``dut.s1_t[2]``). Both write the probes file :func:`read_probes` reads
(u32 magic ``MXP1``, u32 channels, per channel u32 bits, u32 words, u64 samples, then per
channel its words, sample by sample, least significant first; little-endian).
:func:`collect` groups the channels into each probe's :class:`Samples`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mxsim.errors import MxsimError

__all__ = ["channels", "vlt_text", "harness_lines", "write_probes", "read_probes", "Samples",
           "collect", "Sampler", "PROBES_MAGIC"]

PROBES_MAGIC = 0x3150584D
_M32 = 0xFFFFFFFF


def channels(pm: Any) -> list[tuple[str, str]]:
    """The (signal, strobe) pairs the map's probes read, each once, in the probes' order."""
    out = [(sig, p.valid) for p in pm.probes for sig in p.signals()]
    return list(dict.fromkeys(out))


def vlt_text(pm: Any) -> str:
    """A Verilator configuration file making the probed signals and strobes (known after
    :func:`~testbenches.foreign.portmap.probes.check_signals`) readable through the model's
    scopes, and nothing else."""
    lines = ["`verilator_config",
             "// mxsim: the signals of the port map's [probes], readable by the bulk harness"]
    for sig, strobe in channels(pm):
        for path in (sig, strobe):
            s = pm.signals[path]
            lines.append(f'public_flat_rd -module "{s.module}" -var "{s.var}"')
    return "\n".join(dict.fromkeys(lines)) + "\n"


def _scope(top: str, path: str) -> tuple[str, str, int]:
    """(Verilator scope name, variable, element index or -1) of a signal path."""
    *scopes, last = path.split(".")
    name, _, index = last.partition("[")
    return ".".join(["TOP", top, *scopes]), name, int(index[:-1]) if index else -1


def harness_lines(pm: Any) -> list[str]:
    """The generated part of the bulk harness that names the channels (``N_PROBES`` 0
    without probes: the harness then reads nothing)."""
    chans = channels(pm)
    lines = [f"#define N_PROBES {len(chans)}"]
    if not chans:
        return lines
    lines.append("static const ProbeSpec PROBE_SPECS[N_PROBES] = {")
    for sig, strobe in chans:
        (s_scope, s_var, s_index), (v_scope, v_var, v_index) = (
            _scope(pm.design.top, sig), _scope(pm.design.top, strobe))
        lines.append(f'    {{"{s_scope}", "{s_var}", {s_index}, "{v_scope}", "{v_var}", '
                     f'{v_index}}},')
    lines.append("};")
    return lines


def write_probes(path: str | Path, chans: list[tuple[int, npt.NDArray[np.uint32]]]) -> None:
    """Write a probes file (layout in the module docstring); ``chans``: (bits, (samples,
    words)) per channel."""
    with open(path, "wb") as f:
        f.write(np.array([PROBES_MAGIC, len(chans)], "<u4").tobytes())
        for bits, a in chans:
            f.write(np.array([bits, a.shape[1]], "<u4").tobytes())
            f.write(np.uint64(len(a)).tobytes())
        for _, a in chans:
            f.write(np.ascontiguousarray(a, "<u4").tobytes())


def read_probes(path: str | Path, n: int) -> list[tuple[int, npt.NDArray[np.uint32]]]:
    """(bits, (samples, words) uint32) of each of the ``n`` channels of a probes file.

    Raises
    ------
    MxsimError
        If the file is not one whole probes file of ``n`` channels.
    """
    try:
        raw = Path(path).read_bytes()
    except OSError:
        raise MxsimError(f"{path}: the run wrote no probes file (the harness stopped before "
                         f"its end); rerun") from None
    head = np.frombuffer(raw, "<u4", 2) if len(raw) >= 8 else None
    if head is None or int(head[0]) != PROBES_MAGIC or int(head[1]) != n \
            or len(raw) < 8 + 16 * n:
        raise MxsimError(f"{path} is not a probes file of {n} channels; rerun")
    out, off = [], 8 + 16 * n
    for j in range(n):
        bits, words = (int(x) for x in np.frombuffer(raw, "<u4", 2, 8 + 16 * j))
        samples = int(np.frombuffer(raw, "<u8", 1, 16 + 16 * j)[0])
        size = 4 * samples * words
        if off + size > len(raw):
            raise MxsimError(f"{path} is cut short (channel {j}); rerun")
        out.append((bits, np.frombuffer(raw, "<u4", samples * words, off).reshape(
            samples, words).astype(np.uint32)))
        off += size
    return out


@dataclass
class Samples:
    """What a run sampled of one probe: each of its signals' words per instruction
    (``(samples, words)`` uint32, least significant first) and widths."""
    words: dict[str, npt.NDArray[np.uint32]]
    bits: dict[str, int]

    def __len__(self) -> int:
        return min((len(a) for a in self.words.values()), default=0)

    def value(self, probe: Any, n: int) -> Fraction | str:
        """Probe ``probe``'s exact value at its ``n``-th sample (instruction ``n``)."""
        ints = {sig: int.from_bytes(np.ascontiguousarray(a[n], "<u4").tobytes(), "little")
                for sig, a in self.words.items()}
        return probe.value(ints, self.bits)


def collect(pm: Any, chans: list[tuple[int, npt.NDArray[np.uint32]]]) -> dict[str, Samples]:
    """Each probe's :class:`Samples` from the channels of a probes file (in
    :func:`channels`' order)."""
    by = dict(zip(channels(pm), chans, strict=True))
    return {p.name: Samples({s: by[(s, p.valid)][1] for s in p.signals()},
                            {s: by[(s, p.valid)][0] for s in p.signals()}) for p in pm.probes}


class Sampler:
    """The cocotb test's probes: the handles of each channel (``plan``: (signal, strobe)
    paths below the top module), sampled by :meth:`sample` once a cycle after the inputs
    settle, written by :meth:`write`."""

    def __init__(self, dut: Any, plan: list[list[str]]):
        strobes: dict[str, Any] = {}
        self.channels = []
        for sig, strobe in plan:
            if strobe not in strobes:
                strobes[strobe] = _handle(dut, strobe)
            self.channels.append((_handle(dut, sig), strobe, []))
        self.strobes = list(strobes.items())

    def sample(self) -> None:
        on = {name: int(h.value) & 1 for name, h in self.strobes}
        for h, strobe, values in self.channels:
            if on[strobe]:
                values.append(int(h.value))

    def write(self, path: str) -> None:
        out = []
        for h, _, values in self.channels:
            bits = len(h)
            w = (bits + 31) // 32
            out.append((bits, np.array([[(v >> (32 * i)) & _M32 for i in range(w)]
                                        for v in values], np.uint32).reshape(len(values), w)))
        write_probes(path, out)


def _handle(dut: Any, path: str) -> Any:
    """The cocotb handle of a signal path below the top module ("u.gen[1].x", "arr[3]")."""
    h = dut
    for part in path.split("."):
        name, _, index = part.partition("[")
        h = getattr(h, name)
        if index:
            h = h[int(index[:-1])]
    return h
