"""Port maps: how a foreign RTL design's ports carry mxsim's instructions and results.

A port map is a TOML file the user writes for their design (the schema, table by table, is
"Port map reference" in ``docs/foreign-rtl.md``). :func:`load` reads it and checks every key;
:meth:`PortMap.check_ports` checks it against the design's ports (read by
:func:`testbenches.foreign.portmap.ports.design_ports`) and :meth:`PortMap.check_spec` against a
unit spec. Then :meth:`PortMap.pack` turns every instruction of a vector set into port values,
:meth:`PortMap.decode` reads the design's result ports back into exact values, and
:meth:`PortMap.compare` checks them against the model's D codes: bit for bit for FP32/FP16/
BF16 results, exactly in value for a fixed-point result (with the difference in ulps of the
design's own encoding).

Every problem with a map is a :class:`MapError` whose message is one line,
``MAP.toml:LINE: what is wrong; what to do``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from mxsim import formats
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

from ...sim.backend import Mismatch
from .codec import Beats, Results, compare_results, decode_results, pack_instructions, port_words
from .domain import Domain
from .parse import FORMAT_BITS, parse
from .parts import (
    Accumulator,
    Clock,
    Control,
    Design,
    Field,
    FormatSelect,
    Handshake,
    Lanes,
    MapError,
    Reset,
    Result,
    Scales,
    Status,
    Tie,
    spec_text,
)
from .ports import Port
from .probes import Probe

__all__ = ["MapError", "PortMap", "Beats", "Results", "load", "port_words", "Design", "Clock",
           "Reset", "Handshake", "FormatSelect", "Field", "Lanes", "Scales", "Accumulator",
           "Result", "Tie", "Control", "Status", "Domain", "Probe"]


@dataclass(frozen=True)
class _Use:
    """One way the map uses a design port, as :meth:`PortMap.check_ports` checks it."""
    port: str
    what: str
    line: int
    driven: bool
    top: int | None = None          #: highest bit used (scalar port), None: the whole port
    exact: int | None = None        #: the width a whole port must have
    least: int = 1                  #: the width a whole port needs at least
    most: int | None = None         #: the width a whole port may have at most
    elements: int | None = None     #: an unpacked array of this many elements
    any_shape: bool = False         #: a scalar port or a one-dimensional array alike


def _bits(encoding: str) -> int:
    """Bits of a C or result field: the widest of its encodings ("fp32|bf16": 32)."""
    return max(FORMAT_BITS[e] for e in encoding.split("|"))


def load(path: str | Path) -> PortMap:
    """The port map in the TOML file at ``path``, every key checked.

    Paths in the map are relative to the map's folder; they come back absolute.

    Raises
    ------
    MapError
        One line, ``MAP.toml:LINE: what is wrong; what to do``, for the first problem: a
        missing or unreadable file, a TOML syntax error, an unknown table or key, a wrong
        type or enum value, a key the chosen handshake/layout/kind needs or refuses, a bit
        range that is malformed, too narrow or overlaps another field, a scale block that does
        not divide k, a source file that does not exist, a [tie] value that is not an
        integer >= 0 or a tie of a port the map uses otherwise.
    """
    return PortMap(**parse(Path(path)))


@dataclass(frozen=True)
class PortMap:
    """A checked port map (see the module docstring); build it with :func:`load`.

    ``a_format``/``b_format`` are the element formats when fixed (None when ``format_select``
    chooses them); ``a``/``b`` the operand lanes; ``tie`` the inputs held at a constant. After
    :meth:`check_ports`, the map knows the design's port widths (whole-port fields and the
    words :meth:`pack` gives use them).
    """
    path: Path
    design: Design
    clock: Clock | None
    reset: Reset | None
    handshake: Handshake
    k: int
    a_format: str | None
    b_format: str | None
    format_select: FormatSelect | None
    a: Lanes
    b: Lanes
    scales: Scales
    accumulator: Accumulator
    result: Result
    instruction_line: int = 1
    tie: tuple[Tie, ...] = ()
    #: ``instruction.k`` per element format (None: one k for all)
    k_by_format: Mapping[str, int] | None = None
    controls: tuple[Control, ...] = ()
    status: Status | None = None
    domain: Domain | None = None
    #: ``instruction.int8 = "integer"``: the design reads INT8 codes as whole integers
    int8_integer: bool = False
    #: ``[probes]``: internal signals and the model nodes they hold
    probes: tuple[Probe, ...] = ()
    #: ``[[waive]]``: the design's known deviations (:mod:`testbenches.sim.waive`)
    waivers: tuple[Any, ...] = ()
    ports: dict[str, Port] = field(default_factory=dict, compare=False, repr=False)
    #: each probed signal (:class:`~.ports.Signal`) by path, after :func:`~.probes.check_signals`
    signals: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def _fail(self, line: int, msg: str) -> MapError:
        return MapError(f"{self.path}:{line}: {msg}")

    # -- the design's ports ----------------------------------------------------------------

    def element_formats(self) -> tuple[str, ...]:
        """The element formats the design takes (A's and B's)."""
        if self.format_select is not None:
            return tuple(self.format_select.values)
        return tuple(dict.fromkeys((self.a_format, self.b_format)))

    def data_fields(self) -> list[Field | Lanes]:
        """Every field the testbench drives with each instruction, in a fixed order."""
        acc = self.accumulator
        parts = [self.a, self.b, self.scales.a, self.scales.b, self.scales.sum, acc.c,
                 acc.first, acc.last, acc.clear]
        return [p for p in parts if p is not None]

    def data_ports(self) -> list[str]:
        """The ports each instruction drives: the keys of :attr:`Beats.ports` (the tied ones
        last, the same value in every instruction)."""
        names = [n for f in self.data_fields()
                 for n in (f.port_names() if isinstance(f, Lanes) else [f.port])]
        if self.format_select is not None and self.format_select.by == "port":
            names.append(self.format_select.name)
        names += [c.field.port for c in self.controls]
        names += [t.port for t in self.tie]
        return list(dict.fromkeys(names))

    def driven_ports(self) -> list[str]:
        """Every input port the testbench drives (the clock and reset excepted): the
        instructions' data ports and the handshake's inputs."""
        return list(dict.fromkeys(self.data_ports() + self.handshake.inputs()))

    def read_ports(self) -> list[str]:
        """Every output port the testbench reads: the result's and the handshake's."""
        names = [f.port for f in self.output_fields()] + self.handshake.outputs()
        return list(dict.fromkeys(names))

    def output_fields(self) -> list[Field]:
        """Every field read with a result: the result's, then the status flags'."""
        flags = [] if self.status is None else list(self.status.flags.values())
        return self.result.fields() + flags

    def parameters(self, spec: UnitSpec | None = None) -> dict[str, int | str]:
        """The top-level parameters to elaborate the design with: ``design.parameters``, and
        the format-select parameter's value for ``spec``'s element format."""
        out = dict(self.design.parameters)
        sel = self.format_select
        if spec is not None and sel is not None and sel.by == "parameter":
            self.check_spec(spec)
            out[sel.name] = sel.values[spec.a_format]
        return out

    def _uses(self) -> Iterator[_Use]:
        hs = self.handshake
        for key in ("in_valid", "in_ready", "out_valid", "out_ready", "start", "done"):
            if getattr(hs, key) is not None:
                yield _Use(getattr(hs, key), f"handshake.{key}", hs.line_of(key), key in
                           ("in_valid", "out_ready", "start"), exact=1)
        for part, what in ((self.clock, "clock.port"), (self.reset, "reset.port")):
            if part is not None:
                yield _Use(part.port, what, part.line, True, exact=1)
        sel = self.format_select
        if sel is not None and sel.by == "port":
            yield _Use(sel.name, "format.name", sel.line, True,
                       least=max(sel.values.values()).bit_length() or 1)
        for tie in self.tie:
            yield _Use(tie.port, f"tie.{tie.port}", tie.line, True,
                       least=tie.value.bit_length() or 1, any_shape=True)
        for ctl in self.controls:
            yield self._field_use(ctl.field, True,
                                  least=max(ctl.values.values()).bit_length() or 1)
        if self.status is not None:
            for f in self.status.flags.values():
                yield self._field_use(f, False, exact=1)
        acc, sc = self.accumulator, self.scales
        for part in self.data_fields():
            if isinstance(part, Lanes):
                yield from self._lane_uses(part)
            elif part is acc.c:
                yield self._field_use(part, True, exact=_bits(acc.format))
            elif part is sc.a or part is sc.b or part is sc.sum:
                yield self._field_use(part, True,
                                      least=8 if sc.exponent is None else sc.exponent.bits)
            else:
                yield self._field_use(part, True, exact=1)
        res = self.result
        if res.field is not None:
            yield self._field_use(res.field, False,
                                  exact=_bits("|".join(res.encodings) or res.encoding))
        else:
            yield self._field_use(res.mantissa, False, least=2 if res.mantissa_signed else 1,
                                  most=64 if res.mantissa_signed else 63)
            yield self._field_use(res.exponent, False, most=32)
            if res.nan is not None:
                yield self._field_use(res.nan, False, exact=1)

    @staticmethod
    def _field_use(f: Field, driven: bool, *, exact: int | None = None, least: int = 1,
                   most: int | None = None) -> _Use:
        if f.bits is not None:
            return _Use(f.port, f.what, f.line, driven, top=f.bits[0])
        return _Use(f.port, f.what, f.line, driven, exact=exact, least=least, most=most)

    @staticmethod
    def _lane_uses(lanes: Lanes) -> Iterator[_Use]:
        if lanes.concat:
            for name in lanes.concat:
                yield _Use(name, lanes.what, lanes.line, True)
        elif lanes.layout == "packed":
            yield _Use(lanes.port, lanes.what, lanes.line, True, top=lanes.top)
        elif lanes.layout == "array":
            yield _Use(lanes.port, lanes.what, lanes.line, True, least=lanes.width,
                       elements=lanes.count)
        else:
            for name in lanes.port_names():
                yield _Use(name, lanes.what, lanes.line, True, least=lanes.width)

    def check_ports(self, ports: Mapping[str, Port]) -> None:
        """Check the map against the design's ports (name ->
        :class:`~testbenches.foreign.portmap.ports.Port`)
        and remember their widths.

        Raises
        ------
        MapError
            One line naming the map's line, for the first port the map names that the design
            lacks (the message lists the design's ports), that is an output where the map
            drives it or an input where it reads it, that is (or is not) an unpacked array
            where the layout says otherwise, or whose width or length does not fit the lanes
            and bit ranges the map puts there; then for the design's inputs the map does not
            drive.
        """
        used = set()
        for use in self._uses():
            port = ports.get(use.port)
            if port is None:
                listed = ", ".join(ports) or "none"
                raise self._fail(use.line, f"{use.what}: port {use.port!r} is not a port of "
                                           f"{self.design.top}; its ports: {listed}")
            self._check_use(use, port)
            used.add(use.port)
        self._check_undriven(ports, used)
        for lanes in (self.a, self.b):
            if lanes.concat:
                total = sum(ports[n].width for n in lanes.concat)
                top = lanes.lsb + max(k * w for k, w in self._lane_extents(lanes)) - 1
                if top >= total:
                    raise self._fail(lanes.line, f"{lanes.what}: ports {', '.join(lanes.concat)}"
                                                 f" hold {total} bits together, the lanes use "
                                                 f"bit {top}; fix the ports or the lanes")
        self.ports.clear()
        self.ports.update(ports)

    def _lane_extents(self, lanes: Lanes) -> list[tuple[int, int]]:
        """(lanes, bits a lane takes) of every element format the lanes may hold, so that
        ``lsb + lanes * bits - 1`` is their top bit."""
        if lanes.dense and self.k_by_format:
            return [(k, formats.get(f).bits) for f, k in self.k_by_format.items()]
        return [(1, lanes.top - lanes.lsb + 1)]

    def _check_undriven(self, ports: Mapping[str, Port], used: set[str]) -> None:
        """Refuse a design input the map does not drive: left alone, it would hold whatever
        each simulator gives an undriven input (cocotb's Verilator a random value, the bulk
        harness another), so the two harnesses would not run the same design."""
        undriven = [p.name for p in ports.values()
                    if p.direction in ("input", "inout") and p.name not in used]
        if not undriven:
            return
        names = ", ".join(repr(n) for n in undriven[:8]) + (
            f" and {len(undriven) - 8} more" if len(undriven) > 8 else "")
        many = len(undriven) > 1
        raise self._fail(self.design.line, f"{self.design.top} has input{'s' if many else ''} "
                                            f"{names} that the map does not drive; map "
                                            f"{'each' if many else 'it'}, or hold "
                                            f"{'them' if many else 'it'} at a constant under "
                                            f"[tie] (e.g. {undriven[0]} = VALUE)")

    def _check_use(self, use: _Use, port: Port) -> None:
        want = "input" if use.driven else "output"
        if port.direction != want:
            raise self._fail(use.line, f"{use.what}: port {use.port!r} is an "
                                       f"{port.direction} of {self.design.top}, and the map "
                                       f"{'drives' if use.driven else 'reads'} it; name an "
                                       f"{want}")
        shape = f"{port.width} bits" + (f" x {port.elements}" if port.elements else "")
        if port.elements is not None and (len(port.dims) > 1 or (use.elements is None
                                                                 and not use.any_shape)):
            raise self._fail(use.line, f"{use.what}: port {use.port!r} is an unpacked array "
                                       f"({shape}); "
                                       + ("mxsim drives one-dimensional arrays only" if
                                          len(port.dims) > 1 else "use layout = \"array\""))
        if use.elements is not None:
            if port.elements is None:
                raise self._fail(use.line, f"{use.what}: port {use.port!r} is not an unpacked "
                                           f"array ({shape}); use layout = \"packed\"")
            if port.elements != use.elements:
                raise self._fail(use.line, f"{use.what}: port {use.port!r} has "
                                           f"{port.elements} elements, the map puts "
                                           f"{use.elements} lanes there; make them agree")
        if use.top is not None and port.width <= use.top:
            raise self._fail(use.line, f"{use.what}: port {use.port!r} has {port.width} bits "
                                       f"([{port.width - 1}, 0]), the map uses bit {use.top}; "
                                       f"fix the bit range or the port")
        if use.top is None:
            rule = (f"exactly {use.exact}" if use.exact is not None else
                    f"{use.least} to {use.most}" if use.most is not None else
                    f"at least {use.least}")
            if (port.width != use.exact if use.exact is not None else
                    port.width < use.least or (use.most is not None and port.width > use.most)):
                fix = ("format.values" if use.what == "format.name" else
                       "tie a value that fits" if use.any_shape else "give bits")
                raise self._fail(use.line, f"{use.what}: port {use.port!r} has {port.width} "
                                           f"bit{'s' if port.width > 1 else ''}; the map needs "
                                           f"{rule}; fix the port or {fix}")

    # -- the unit spec ---------------------------------------------------------------------

    def check_spec(self, spec: UnitSpec) -> None:
        """Check that ``spec`` describes an instruction this design runs: k, the element
        formats (fixed, or among the format select's values), the scale format and block, and
        the C and result formats (FP32/FP16/BF16 ones must be the spec's ``d_format``).

        Raises
        ------
        MapError
            One line naming the map's line, for the first disagreement.
        """
        unit = f"unit {spec.name!r}"
        k_line = self.instruction_line
        k = self.k if self.k_by_format is None else self.k_by_format.get(spec.a_format)
        if k is not None and spec.k != k:
            per = "" if self.k_by_format is None else f" for {spec.a_format}"
            raise self._fail(k_line, f"instruction.k is {k}{per} but {unit} has k = {spec.k}; "
                                     f"use a unit spec with k = {k}")
        sel = self.format_select
        if sel is not None:
            if spec.a_format != spec.b_format or spec.a_format not in sel.values:
                raise self._fail(sel.line, f"{unit} multiplies {spec.a_format} x "
                                           f"{spec.b_format}; the design selects one format "
                                           f"for A and B among {', '.join(sel.values)}")
        else:
            for name in ("a_format", "b_format"):
                if getattr(spec, name) != getattr(self, name):
                    raise self._fail(k_line, f"instruction.{name} is {getattr(self, name)} but "
                                             f"{unit} has {getattr(spec, name)}; use a unit "
                                             f"spec with {getattr(self, name)}")
        self._check_spec_scales(spec, unit)
        acc, res = self.accumulator, self.result
        for what, fmt, line in (("accumulator.format", acc.format, acc.line),
                                ("result.encoding", "|".join(res.encodings) or res.encoding,
                                 res.line)):
            if fmt is not None and fmt != "fixed" and spec.d_format not in fmt.split("|"):
                one = "|" not in fmt
                raise self._fail(line, f"{what} is {fmt.replace('|', ' or ')} but {unit} has "
                                       f"d_format {spec.d_format}; use a unit spec with "
                                       f"d_format {fmt if one else 'among those'}")
        for ctl in self.controls:
            if ctl.value_for(spec) is None:
                have = spec_text(getattr(spec, ctl.source))
                raise self._fail(ctl.line, f"control.{ctl.name} sets {ctl.source} to "
                                           f"{', '.join(ctl.values)} but {unit} has "
                                           f"{ctl.source} {have}; add {have} = VALUE to "
                                           f"control.{ctl.name}.values, or use a unit spec "
                                           f"the design runs")
        if self.status is not None:
            from mxsim.engine.flags import check_flags
            from mxsim.spec import SpecError
            try:
                check_flags(spec)
            except SpecError as exc:
                raise self._fail(self.status.line, f"[status] checks flags, but {unit}: "
                                                   f"{exc}") from None

    def resolve(self, spec: UnitSpec) -> PortMap:
        """This map for ``spec`` (checked against it first): k and the operand lanes of its
        element format, and C and result in its d_format, where the map leaves them to the
        spec."""
        self.check_spec(spec)
        out = self
        if self.k_by_format is not None:
            k, bits = self.k_by_format[spec.a_format], formats.get(spec.a_format).bits
            lanes = {name: replace(ln, count=k, width=bits, stride=bits) if ln.dense else
                     replace(ln, count=k) for name, ln in (("a", self.a), ("b", self.b))}
            out = replace(out, k=k, k_by_format=None, **lanes)
        if self.result.encodings:
            out = replace(out, result=replace(self.result, encoding=spec.d_format,
                                              encodings=()))
        if self.accumulator.format is not None and "|" in self.accumulator.format:
            out = replace(out, accumulator=replace(self.accumulator, format=spec.d_format))
        if self.int8_integer and spec.a_format == "int8" and self.scales.format == "none":
            # whole-integer codes make results 2**12 times MXINT8's: read them 2**12 smaller
            out = replace(out, result=replace(out.result, offset=out.result.offset + 12))
        if out is not self:
            out.ports.update(self.ports)
            out.signals.update(self.signals)
        return out

    def _check_spec_scales(self, spec: UnitSpec, unit: str) -> None:
        sc = self.scales
        mine = None if sc.format == "none" else sc.format
        if spec.scale_format != mine:
            raise self._fail(sc.line, f"scales.format is {sc.format} but {unit} has "
                                      f"scale_format {spec.scale_format or 'none'}; use a "
                                      f"unit spec with scale_format {sc.format}")
        if mine is None:
            return
        k = self.k if self.k_by_format is None else self.k_by_format.get(spec.a_format, self.k)
        block = k if sc.per == "instruction" else sc.block
        if spec.block != block:
            how = ("one scale per instruction of k" if sc.per == "instruction" else
                   "scales.block")
            raise self._fail(sc.line, f"the design has a scale per {block} elements ({how}) "
                                      f"but {unit} has block = {spec.block}; use a unit spec "
                                      f"with block = {block}")

    # -- instructions in, results out ------------------------------------------------------

    def pack(self, spec: UnitSpec, vs: VectorSet) -> Beats:
        """Every instruction of ``vs`` as the values of the data ports (see :class:`Beats`):
        dot products in batch, row, column order, each ``vs.k / k`` instructions in K order
        (one, unless the accumulator is internal). Numpy over all instructions at once.

        Raises
        ------
        MapError
            If ``spec`` does not fit the map (:meth:`check_spec`), or ``vs`` does not fit the
            design: its formats, block, K (a multiple of k; k itself unless the accumulator is
            internal), C's format (or a non-zero C where the design has no C input).
        """
        return pack_instructions(self.resolve(spec), vs, spec)

    def decode(self, raw: Mapping[str, np.ndarray]) -> Results:
        """The results in ``raw`` (result port -> ``(n, words)`` uint32, least significant
        word first), decoded exactly (see :class:`Results`)."""
        return decode_results(self, raw)

    def compare(self, results: Results, want: np.ndarray, *, d_format: str = "fp32",
                ) -> list[Mismatch]:
        """Every value mismatch of ``results`` against ``want`` (the model's D codes in
        ``d_format``, one per dot product): bit for bit for an FP32/FP16/BF16 result; exactly
        in value for a fixed-point one (NaN equals NaN, +0 equals -0), with the difference in
        ulps of the design's encoding in the note. At most ``VALUE_LIMIT`` are listed, then
        one entry stands for the rest (:func:`testbenches.sim.backend.not_listed`); a count of
        results that differs from ``len(want)`` comes first."""
        return compare_results(self, results, np.asarray(want), formats.get(d_format))

    def describe(self) -> dict[str, Any]:
        """A short summary for reports: top, handshake, k, formats, result encoding, the
        declared input domain."""
        return {"map": str(self.path), "top": self.design.top, "handshake": self.handshake.kind,
                "k": dict(self.k_by_format) if self.k_by_format else self.k,
                "formats": list(self.element_formats()),
                "result": "|".join(self.result.encodings) or self.result.encoding,
                "domain": None if self.domain is None else self.domain.describe()}

    def check_domain(self, vs: VectorSet, *, fix: str = "replay in-domain dot products, or "
                                                        "drop [domain] to check every input",
                     ) -> None:
        """Refuse ``vs`` when a dot product lies outside ``[domain]`` (MapError naming the
        first, and why, then ``fix``: what to do)."""
        if self.domain is None:
            return
        first = self.domain.first_outside(vs)
        if first is not None:
            raise self._fail(self.domain.line, f"the vector set is outside [domain]: {first}; "
                                               f"{fix}")
