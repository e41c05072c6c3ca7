"""The parts of a port map (see :mod:`testbenches.foreign.portmap`): one frozen dataclass per table.

Every part is built by :func:`testbenches.foreign.portmap.load` from a map whose every key was
checked,
so a part that exists holds valid values. Each part remembers the map line it came from
(``line``), which the checks against the design and the unit spec name in their messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mxsim.errors import MxsimError

__all__ = ["MapError", "Design", "Clock", "Reset", "Handshake", "FormatSelect", "Field",
           "Lanes", "Scales", "Accumulator", "Result", "Tie", "Control", "Status",
           "HANDSHAKE_KINDS", "LAYOUTS", "ORDERS", "SCALE_FORMATS", "ACC_KINDS", "FP_ENCODINGS",
           "RESULT_ENCODINGS", "CONTROL_FIELDS", "STATUS_FLAGS", "MapLike", "spec_text",
           "ScaleExponent"]

HANDSHAKE_KINDS = ("valid-ready", "start-done", "pipeline", "combinational")
LAYOUTS = ("packed", "array", "ports")
ORDERS = ("lsb-first", "msb-first")
SCALE_FORMATS = ("e8m0", "ue4m3", "none")
ACC_KINDS = ("port", "internal", "none")
FP_ENCODINGS = ("fp32", "fp16", "bf16")
RESULT_ENCODINGS = FP_ENCODINGS + ("fixed",)
#: The unit-spec fields a ``[control]`` input may follow (each value spelt as in a spec file).
CONTROL_FIELDS = ("acc_rounding", "c_rounding", "d_format", "acc_format", "a_format",
                  "b_format", "scale_format", "overflow", "zero_sign", "specials", "align",
                  "promote_rounding")
#: The status flags a ``[status]`` table may map, in RISC-V fflags order (bit 4 to bit 0).
STATUS_FLAGS = ("nv", "dz", "of", "uf", "nx")


class MapError(MxsimError, ValueError):
    """A port map that is malformed or does not fit its design or unit spec.

    The message is one line, ``MAP.toml:LINE: what is wrong; what to do``.
    """


@dataclass(frozen=True)
class Design:
    """``[design]``: the sources (absolute paths, in order) and how to elaborate them."""
    sources: tuple[Path, ...]
    top: str
    include_dirs: tuple[Path, ...] = ()
    defines: Mapping[str, int | str] = None  # type: ignore[assignment]
    parameters: Mapping[str, int | str] = None  # type: ignore[assignment]
    line: int = 1

    def __post_init__(self) -> None:
        for name in ("defines", "parameters"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, {})


@dataclass(frozen=True)
class Clock:
    """``[clock]``: the clock port (rising edge)."""
    port: str
    line: int = 1


@dataclass(frozen=True)
class Reset:
    """``[reset]``: the reset port, its active level, sync/async, cycles held after start."""
    port: str
    active: str = "high"
    sync: bool = True
    cycles: int = 3
    line: int = 1

    @property
    def active_value(self) -> int:
        """The port value that resets the design (1 for active-high)."""
        return 1 if self.active == "high" else 0


@dataclass(frozen=True)
class Handshake:
    """``[handshake]``: the protocol and its ports (None: not used by this kind).

    ``latency`` is in cycles from an input handshake (issue, start) to its result (None for
    combinational); ``interval`` the fewest cycles between two issues; ``latency_is``
    ("exact" or "max") is start-done's.
    """
    kind: str
    in_valid: str | None = None
    in_ready: str | None = None
    out_valid: str | None = None
    out_ready: str | None = None
    start: str | None = None
    done: str | None = None
    latency: int | None = None
    interval: int = 1
    latency_is: str = "exact"
    line: int = 1
    lines: Mapping[str, int] = None  # type: ignore[assignment]   #: each key's map line

    def __post_init__(self) -> None:
        if self.lines is None:
            object.__setattr__(self, "lines", {})

    def line_of(self, key: str) -> int:
        """The map line of ``key`` (the table's when not written)."""
        return self.lines.get(key, self.line)

    def inputs(self) -> list[str]:
        """The handshake ports the testbench drives."""
        names = (self.in_valid, self.out_ready, self.start)
        return [n for n in names if n is not None]

    def outputs(self) -> list[str]:
        """The handshake ports the testbench reads."""
        return [n for n in (self.in_ready, self.out_valid, self.done) if n is not None]


@dataclass(frozen=True)
class FormatSelect:
    """``[format]``: how the element format (A's and B's alike) is selected.

    ``by`` is "parameter" or "port"; ``name`` the parameter or port; ``values`` maps each
    element format the design takes to the value that selects it.
    """
    by: str
    name: str
    values: Mapping[str, int]
    line: int = 1


@dataclass(frozen=True)
class Field:
    """Bits ``[msb, lsb]`` (inclusive) of a scalar port; ``bits`` None: the whole port."""
    port: str
    bits: tuple[int, int] | None = None
    line: int = 1
    what: str = ""                     #: the map key, for messages ("result.mantissa")

    @property
    def width(self) -> int | None:
        """Bits of the field (None for a whole port: the design says)."""
        return None if self.bits is None else self.bits[0] - self.bits[1] + 1


@dataclass(frozen=True)
class Lanes:
    """Per-lane codes (operands, per-block scales): ``count`` lanes of ``width`` bits.

    ``packed``: lane ``i`` at bit ``lsb + i*stride`` of one port (``msb-first``: lane 0 at
    the top, lane ``i`` at ``lsb + (count-1-i)*stride``); ``array``: element ``i`` of an
    unpacked array port, bits ``[width-1, 0]``; ``ports``: port ``port.format(i=i)``.
    """
    port: str
    layout: str
    count: int
    width: int
    lsb: int = 0
    stride: int = 0
    order: str = "lsb-first"
    line: int = 1
    what: str = ""
    #: packed operand lanes of a map whose k depends on the element format, written without
    #: ``width``: each format's lanes are its element width apart (see ``PortMap.resolve``)
    dense: bool = False
    #: ``port = ["lo", "hi"]``: packed lanes in these whole ports concatenated, the first the
    #: least significant (a lane may straddle two); ``port`` is then the first
    concat: tuple[str, ...] = ()

    def port_names(self) -> list[str]:
        """The design ports the lanes use (one per lane for ``ports``)."""
        if self.layout == "ports":
            return [self.port.format(i=i) for i in range(self.count)]
        return list(self.concat) or [self.port]

    def offsets(self) -> list[int]:
        """Bit offset of each lane in its port (element, lane port): ``packed`` only."""
        if self.layout != "packed":
            return [0] * self.count
        slots = range(self.count) if self.order == "lsb-first" else range(self.count - 1, -1, -1)
        return [self.lsb + j * self.stride for j in slots]

    @property
    def top(self) -> int:
        """The highest bit any lane uses in its port (element, lane port)."""
        return max(self.offsets()) + self.width - 1


@dataclass(frozen=True)
class Scales:
    """``[scales]``: the scale format ("none": unscaled), ``per`` "instruction" (``a``/``b``
    are :class:`Field`) or "block" (``block`` elements per scale; ``a``/``b`` are
    :class:`Lanes`, one lane per block)."""
    format: str = "none"
    per: str = "instruction"
    block: int | None = None
    a: Field | Lanes | None = None
    b: Field | Lanes | None = None
    line: int = 1
    #: ``scales.exponent``: each E8M0 scale sent as its exponent (code - 127) plus ``bias``,
    #: in ``bits`` bits, two's complement when ``signed``; None: the scale codes themselves
    exponent: ScaleExponent | None = None
    #: ``scales.sum`` (instead of ``a`` and ``b``): the pair's exponents pre-summed, one
    #: ``scales.exponent`` field per instruction or per block
    sum: Field | Lanes | None = None


@dataclass(frozen=True)
class ScaleExponent:
    """``scales.exponent``: a scale as an integer exponent field (see :class:`Scales`)."""
    bits: int
    signed: bool = True
    bias: int = 0
    line: int = 1

    @property
    def exponents(self) -> tuple[int, int]:
        """The scale exponents (E8M0 code - 127) the field holds."""
        lo, hi = (-(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1) if self.signed else \
            (0, (1 << self.bits) - 1)
        return max(lo - self.bias, -127), min(hi - self.bias, 127)

    @property
    def sums(self) -> tuple[int, int]:
        """The sums of two scale exponents (-254..254) the field holds (``scales.sum``)."""
        lo, hi = (-(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1) if self.signed else \
            (0, (1 << self.bits) - 1)
        return max(lo - self.bias, -254), min(hi - self.bias, 254)

    def encode(self, codes):
        """E8M0 codes as the field's bits (codes whose exponent is outside :attr:`exponents`
        are the caller's to refuse)."""
        import numpy as np
        return self.encode_exponents(codes.astype(np.int64) - 127)

    def encode_exponents(self, e):
        """Exponents (or their sums) as the field's bits (the caller refuses those outside
        :attr:`exponents` or :attr:`sums`)."""
        import numpy as np
        return ((np.asarray(e, np.int64) + self.bias) & ((1 << self.bits) - 1)).astype(np.uint32)


@dataclass(frozen=True)
class Accumulator:
    """``[accumulator]``: C as an input port (``c``, in ``format``; with ``first``/``last``
    flags it chains instructions, C entering with the first), an internal accumulator
    (``first``/``last`` flags, or ``clear`` with an optional ``last``; C is +0), or none."""
    kind: str = "none"
    format: str | None = None
    c: Field | None = None
    first: Field | None = None
    last: Field | None = None
    clear: Field | None = None
    line: int = 1

    @property
    def chains(self) -> bool:
        """True when a dot product may take several instructions (K a multiple of k)."""
        return self.kind == "internal" or self.first is not None


@dataclass(frozen=True)
class Result:
    """``[result]``: an FP32/FP16/BF16 bit pattern in ``field``, or ``fixed``: ``mantissa``
    (two's complement when ``mantissa_signed``, sign-magnitude when ``sign_magnitude``,
    else unsigned) times ``2**(exponent - offset)`` (``exponent`` two's complement when
    ``exponent_signed``), with an optional NaN flag ``nan``."""
    encoding: str                    #: "fp32" ... "fixed"; "spec": one of ``encodings``
    field: Field | None = None
    mantissa: Field | None = None
    exponent: Field | None = None
    nan: Field | None = None
    mantissa_signed: bool = True
    sign_magnitude: bool = False
    exponent_signed: bool = False
    offset: int = 0
    line: int = 1
    #: ``encoding = [...]``: the FP encodings the spec's d_format may choose (in the field's
    #: low bits); empty for one fixed encoding
    encodings: tuple[str, ...] = ()

    def fields(self) -> list[Field]:
        """Every field the result is read from."""
        parts = (self.field, self.mantissa, self.exponent, self.nan)
        return [f for f in parts if f is not None]


@dataclass(frozen=True)
class Tie:
    """One key of ``[tie]``: an input port held at ``value`` for the whole run, reset
    included (every element of an unpacked array port)."""
    port: str
    value: int
    line: int = 1


@dataclass(frozen=True)
class Control:
    """One table of ``[control]``: an input driven on every instruction with the value that
    ``values`` gives the unit spec's field ``source`` (``acc_rounding = "rz"`` -> 1)."""
    name: str
    field: Field
    source: str
    values: Mapping[str, int]
    line: int = 1

    def value_for(self, spec: Any) -> int | None:
        """The value for ``spec`` (None: the design has none for its ``source``)."""
        return self.values.get(spec_text(getattr(spec, self.source)))


def spec_text(value: Any) -> str:
    """A unit-spec field's value as a spec file spells it (an enum's value, a string)."""
    return str(getattr(value, "value", value)).lower()


@dataclass(frozen=True)
class Status:
    """``[status]``: one-bit outputs holding status flags (``nv``, ``dz``, ``of``, ``uf``,
    ``nx``: invalid, divide by zero, overflow, underflow, inexact), read with each result and
    checked against the flags the engine computes."""
    flags: Mapping[str, Field]
    line: int = 1


class MapLike(Protocol):
    """What packing, decoding and reading the design's ports need of a
    :class:`~testbenches.foreign.portmap.PortMap` (a protocol, so that those modules need not import
    the one that uses them)."""
    path: Path
    design: Design
    k: int
    a_format: str | None
    b_format: str | None
    format_select: FormatSelect | None
    a: Lanes
    b: Lanes
    scales: Scales
    accumulator: Accumulator
    result: Result
    instruction_line: int
    tie: tuple[Tie, ...]
    controls: tuple[Control, ...]
    status: Status | None
    int8_integer: bool
    ports: dict[str, Any]

    def element_formats(self) -> tuple[str, ...]: ...

    def data_fields(self) -> list[Field | Lanes]: ...

    def data_ports(self) -> list[str]: ...

    def parameters(self, spec: Any = None) -> dict[str, int | str]: ...
