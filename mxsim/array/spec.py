"""``ArraySpec``: an array of dot-product units, as data (the one description of an array).

An array is ``rows`` x ``cols`` copies of one dot-product unit (``unit``, a :class:`UnitSpec`,
built as ``microarch``, a :class:`MicroArch`), fed from two operand buffers (A and B), with
its block scales inline or from a scale buffer, and accumulators in registers or a tensor
memory. Three views read the same object: the cycle model (:mod:`mxsim.array.cycle`), the
Amaranth RTL (``hdl.array``, for a subset) and the analytic throughput
(:mod:`mxsim.array.analytic`). It round-trips through plain data and TOML
(:meth:`ArraySpec.to_dict`, :func:`from_dict`, :meth:`ArraySpec.dumps`, :func:`load`).

Words used below. A GEMM is ``D[M, N] = A[M, K] @ B[K, N] + C[M, N]``. ``k`` is the unit's
instruction K (``unit.k``); K must be a multiple of it, and ``KB = K / k`` is the number of
*K-blocks*. A *beat* is one instruction of one unit: the K-block ``kb`` of one output
``(m, n)`` (``k`` codes of A's row m, ``k`` codes of B's column n, their ``k / block`` scale
codes each when the unit is scaled) plus C (an FP32 code), giving D (FP32 code), exactly as
``mxsim.engine`` computes one instruction of ``unit``. Every beat is an independent
instruction for the unit (``first`` = ``last`` = 1 in ``hdl.unit``'s stream); the chain over
K runs through the accumulators, not through the unit's own feedback register, so a unit can
interleave independent outputs. ``P = k / lanes`` is the unit's passes per beat and
``L = P + stages + 1`` its latency (``MicroArch.latency``).

Dataflows (how an M x N x K GEMM maps onto the array)
------------------------------------------------------
``"os"`` (output-stationary; the default)
    The outputs are cut into tiles of ``rows`` x ``cols * interleave``; tiles run one after
    another, M-tiles outer, N-tiles inner. In the tile at ``(m0, n0)`` unit ``(r, c)`` owns
    the ``interleave`` outputs ``(m0 + r, n0 + c + cols * t)``, ``t = 0 .. interleave-1``,
    and issues its beats K-block-major: ``(kb=0, t=0), (0, 1), ..., (0, I-1), (1, 0), ...``.
    Each beat takes its C from the output's accumulator (the GEMM's C, or +0 without one, on
    ``kb = 0``) and writes its D back, so each output is the chain of its ``KB``
    instructions in K order: bit-equal to the engine's dot over the whole K with C
    (``mxsim.engine.fast.dot(unit, ...)``), whatever the accumulator kind. A K-block step
    reads one A block per array row (shared by the row's units and their interleaved
    outputs) and one B block per output column of the tile. Outputs beyond M or N at the
    ragged edges are idle slots.
``"ws"`` (weight-stationary)
    B is held in the array: for the N-tile ``n0`` and the *K-tile* ``kt`` (``rows`` K-blocks),
    unit ``(r, c)`` holds B's K-block ``kb = kt * rows + r`` of column ``n0 + c``. The M rows
    of A stream through, row ``m`` in order ``m = 0 .. M-1``: array row ``r`` gets A's block
    ``kb`` of row ``m`` (one block per array row, shared by its ``cols`` units). Partial sums
    run down each column: unit ``(r, c)``'s beat for ``(m, n0 + c)`` takes as C the D of
    unit ``(r-1, c)`` for the same ``m``; the bottom unit's D is the K-tile's partial, which
    goes to the accumulator. Order: N-tiles outer, K-tiles, then the M streamed rows. A
    K-tile past the last K-block leaves its lower rows idle (ragged edge).
``"is"`` (input-stationary)
    The same with the roles of A and B swapped: for the M-tile ``m0`` and K-tile ``kt``,
    unit ``(r, c)`` holds A's K-block ``kt * rows + r`` of row ``m0 + c``; the N columns of
    B stream through (array row ``r`` gets B's block ``kb`` of column ``n``); column ``c``'s
    chain makes the partial of output ``(m0 + c, n)``. Order: M-tiles outer, K-tiles, then
    the N streamed columns. The unit still takes A on its ``a`` port and B on ``b``.

Accumulators and the order of K
-------------------------------
In ``"os"`` every beat reads C from and writes D to the accumulator of its output: the K
order is the chain, for both kinds. In ``"ws"`` and ``"is"`` the partial of each K-tile leaves
the bottom of a column. With ``"registers"`` it loops back as the C of the column's top unit
for the next K-tile (C of the GEMM, or +0, for the first): the whole K is still one chain of
instructions in K order, bit-equal to ``"os"``. With ``"tmem"`` (a tensor memory beside the
array) each K-tile's column chain starts from +0 and the memory adds its partial into the
output's FP32 total (which starts as C, or +0) with one round-to-nearest-even addition: the
engine's ``unit.replace(promote_every=rows, promote_rounding="rne")`` (the same arithmetic as
promotion). So the dataflow changes D's bits only when K-tiles are added in the accumulator.
A ``"tmem"`` accumulator serves ``read_ports`` reads and ``write_ports`` writes per cycle for
the whole array, and a read's data arrives ``latency`` cycles after it is issued; registers
are per unit, read and written in the cycle they are needed. :mod:`mxsim.array.cycle` states
the cycle-by-cycle contract.

Buffers and scales
------------------
``a_buffer`` and ``b_buffer`` give each operand buffer's capacity (``bytes``) and the bytes
per cycle it delivers into the array (``bandwidth``). A block of an operand is
``ceil(k * bits / 8)`` bytes of element codes; a scaled unit's block also has ``k / block``
scale codes of one byte each. With ``scales="inline"`` the scale bytes travel with their
block through the operand buffer (and count against its bandwidth); with ``"separate"`` they
come from ``scale_buffer`` at its own bandwidth (A's and B's scales share it; in "ws"/"is"
the stationary tile's scales load with the tile). A block is broadcast to every unit that
uses it in the same step: it is read from its buffer once per step. The cycle model reads
every operand from its buffer (refills from memory outside are not modelled), so ``bytes``
(capacity) does not change its timing; it is part of the description for the views that
count reuse and area.

``interleave`` is the number of independent outputs a unit has in flight in ``"os"`` (its
accumulators: ``interleave`` per unit). A unit's beats for one output wait for the previous
K-block's D to be written (``L + 1`` cycles with registers; tmem adds its ports and read
latency), so ``interleave >= (L + 1) / P`` hides the chain. In ``"ws"`` and ``"is"`` every
beat of a unit is another output already; ``interleave`` has no effect there (it is kept so
that sweeps can cross it with dataflow).
"""

from __future__ import annotations

import enum
import json
import math
import operator
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .. import formats
from ..errors import MxsimError
from ..microarch import MicroArch, MicroArchError
from ..microarch import check_rtl as check_unit_rtl
from ..spec import SpecError, UnitSpec
from ..spec import from_dict as spec_from_dict

__all__ = ["ArraySpec", "ArrayError", "Buffer", "Accumulators", "Dataflow", "Scales",
           "AccKind", "from_dict", "load", "check_rtl", "RTL_MAX_UNITS", "RTL_MAX_INTERLEAVE"]


class ArrayError(MxsimError, ValueError):
    """An array description that breaks a rule, or a GEMM the array cannot run (one line)."""


class Dataflow(enum.StrEnum):
    """Which operand stays in the units (see the module docstring)."""
    OS = "os"
    WS = "ws"
    IS = "is"


class Scales(enum.StrEnum):
    """How block scales reach the units: with their blocks, or from their own buffer."""
    INLINE = "inline"
    SEPARATE = "separate"


class AccKind(enum.StrEnum):
    """Where the outputs' running sums live."""
    REGISTERS = "registers"
    TMEM = "tmem"


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _positive(value: Any, what: str, low: int = 1) -> int:
    """``value`` as an int >= ``low``, or ArrayError "<what> must be ..., not <value>"."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise ArrayError(f"{what} must be an integer, not {_short(repr(value))}")
    value = operator.index(value)
    if value < low:
        raise ArrayError(f"{what} must be at least {low}, not {value}")
    return value


def _choice(kind: type[enum.StrEnum], value: Any, what: str):
    if isinstance(value, kind):
        return value
    if isinstance(value, str) and value.lower() in set(kind):
        return kind(value.lower())
    raise ArrayError(f"{what} must be one of {', '.join(kind)}, not {_short(repr(value))}")


def _table(cls, data: Any, what: str):
    """A nested dataclass from itself or a table of its fields (unknown keys named)."""
    if isinstance(data, cls):
        return data
    if not isinstance(data, Mapping):
        raise ArrayError(f"{what} must be a table, not {_short(repr(data))}")
    names = {f.name for f in fields(cls)}
    unknown = sorted(str(k) for k in set(data) - names)
    if unknown:
        raise ArrayError(f"{what}: unknown key(s) {_short(', '.join(unknown))}; it has "
                         f"{', '.join(sorted(names))}")
    try:
        return cls(**data)
    except MxsimError as exc:
        raise ArrayError(f"{what}: {exc}") from None


#: Upper bounds that keep a description a size a cycle model (and RTL) can hold.
MAX_UNITS = 1 << 16
MAX_INTERLEAVE = 1024


@dataclass(frozen=True, kw_only=True)
class Buffer:
    """An on-chip buffer: ``bytes`` of capacity and ``bandwidth`` bytes per cycle into the
    array (integers >= 1)."""
    bytes: int
    bandwidth: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "bytes", _positive(self.bytes, "buffer bytes"))
        object.__setattr__(self, "bandwidth", _positive(self.bandwidth,
                                                        "buffer bandwidth (bytes/cycle)"))

    def to_dict(self) -> dict[str, int]:
        return {"bytes": self.bytes, "bandwidth": self.bandwidth}


@dataclass(frozen=True, kw_only=True)
class Accumulators:
    """Where running sums live: ``kind`` ``"registers"`` (per unit, no port limit, no
    latency) or ``"tmem"`` (one memory for the array: ``read_ports`` reads and
    ``write_ports`` writes per cycle, read data ``latency`` cycles after the read; the port
    fields are kept but unused for registers)."""
    kind: AccKind = AccKind.REGISTERS
    read_ports: int = 1
    write_ports: int = 1
    latency: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", _choice(AccKind, self.kind, "accumulators kind"))
        for name in ("read_ports", "write_ports"):
            object.__setattr__(self, name, _positive(getattr(self, name),
                                                     f"accumulators {name}"))
        object.__setattr__(self, "latency", _positive(self.latency, "accumulators latency", 0))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "read_ports": self.read_ports,
                "write_ports": self.write_ports, "latency": self.latency}


_DEFAULT_BUFFER = Buffer(bytes=1 << 18, bandwidth=256)


@dataclass(frozen=True, kw_only=True)
class ArraySpec:
    """An array of dot-product units, its dataflow, buffers and accumulators (see the module
    docstring for each field's meaning and the mapping of a GEMM)."""
    name: str = "array"
    unit: UnitSpec                     #: the arithmetic of every unit
    microarch: MicroArch | None = None  #: lanes and stages; None: lanes = unit.k, 1 stage
    rows: int = 4
    cols: int = 4
    dataflow: Dataflow = Dataflow.OS
    a_buffer: Buffer = _DEFAULT_BUFFER
    b_buffer: Buffer = _DEFAULT_BUFFER
    scales: Scales = Scales.INLINE
    scale_buffer: Buffer | None = None  #: needed with scales="separate", refused otherwise
    accumulators: Accumulators = field(default_factory=Accumulators)
    interleave: int = 1                #: independent outputs in flight per unit ("os")

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ArrayError(f"Array name must be a string, not {_short(repr(self.name))}")
        fail = self._fail
        if not isinstance(self.unit, UnitSpec):
            raise fail(f"unit must be a UnitSpec, not {_short(repr(self.unit))}")
        if self.unit.k is None:
            raise fail(f"unit {self.unit.name!r} has no instruction k (an exact unit); an "
                       f"array needs units of a fixed k")
        ua = self.microarch if self.microarch is not None else MicroArch(lanes=self.unit.k)
        if isinstance(ua, Mapping):
            ua = MicroArch(**ua)
        if not isinstance(ua, MicroArch):
            raise fail(f"microarch must be a MicroArch, not {_short(repr(ua))}")
        if self.unit.k % ua.lanes:
            raise fail(f"lanes ({ua.lanes}) must divide the unit's k ({self.unit.k})")
        object.__setattr__(self, "microarch", ua)
        for name in ("rows", "cols"):
            object.__setattr__(self, name, _positive(getattr(self, name),
                                                     f"Array {self.name!r}: {name}"))
        if self.rows * self.cols > MAX_UNITS:
            raise fail(f"rows x cols must be at most {MAX_UNITS} units, not "
                       f"{self.rows * self.cols}")
        object.__setattr__(self, "interleave", _positive(self.interleave,
                                                         f"Array {self.name!r}: interleave"))
        if self.interleave > MAX_INTERLEAVE:
            raise fail(f"interleave must be at most {MAX_INTERLEAVE}, not {self.interleave}")
        object.__setattr__(self, "dataflow", _choice(Dataflow, self.dataflow,
                                                     f"Array {self.name!r}: dataflow"))
        object.__setattr__(self, "scales", _choice(Scales, self.scales,
                                                   f"Array {self.name!r}: scales"))
        for name in ("a_buffer", "b_buffer"):
            object.__setattr__(self, name, _table(Buffer, getattr(self, name), name))
        self._check_scales()
        object.__setattr__(self, "accumulators", _table(Accumulators, self.accumulators,
                                                        "accumulators"))

    def _fail(self, msg: str) -> ArrayError:
        return ArrayError(f"Array {self.name!r}: {msg}")

    def _check_scales(self) -> None:
        if self.scales is Scales.SEPARATE:
            if self.scale_buffer is None:
                raise self._fail('scales = "separate" needs a scale_buffer (bytes, bandwidth)')
            if self.unit.scale_format is None:
                raise self._fail(f'scales = "separate" needs a scaled unit; unit '
                                 f'{self.unit.name!r} has no block scales')
            object.__setattr__(self, "scale_buffer", _table(Buffer, self.scale_buffer,
                                                            "scale_buffer"))
        elif self.scale_buffer is not None:
            raise self._fail('a scale_buffer is used only with scales = "separate"; drop it '
                             'or set scales = "separate"')

    # -- derived sizes ----------------------------------------------------------------------

    @property
    def units(self) -> int:
        return self.rows * self.cols

    @property
    def passes(self) -> int:
        """P: cycles a beat spends in a unit's accumulate stage (``k / lanes``)."""
        return self.microarch.passes(self.unit)

    @property
    def latency(self) -> int:
        """L: cycles from a unit's input handshake to its D (no stalls)."""
        return self.microarch.latency(self.unit)

    @property
    def scales_per_block(self) -> int:
        """Scale codes (one byte each) per operand per K-block: ``k / block``, or 0."""
        if self.unit.scale_format is None:
            return 0
        return self.unit.k // (self.unit.block or self.unit.k)

    def element_bytes(self, operand: str) -> int:
        """Bytes of one K-block's element codes of ``operand`` ("a" or "b"), packed."""
        fmt = self.unit.a_format if operand == "a" else self.unit.b_format
        return math.ceil(self.unit.k * formats.get(fmt).bits / 8)

    def block_bytes(self, operand: str) -> int:
        """Bytes one K-block of ``operand`` takes from its operand buffer (with its scales
        when they are inline)."""
        inline = self.scales_per_block if self.scales is Scales.INLINE else 0
        return self.element_bytes(operand) + inline

    # -- serialisation ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain data (TOML/JSON ready): the unit and microarch as tables."""
        out: dict[str, Any] = {
            "name": self.name, "rows": self.rows, "cols": self.cols,
            "dataflow": self.dataflow.value, "interleave": self.interleave,
            "scales": self.scales.value,
            "unit": self.unit.to_dict(),
            "microarch": {"lanes": self.microarch.lanes, "stages": self.microarch.stages},
            "a_buffer": self.a_buffer.to_dict(), "b_buffer": self.b_buffer.to_dict(),
            "accumulators": self.accumulators.to_dict(),
        }
        if self.scale_buffer is not None:
            out["scale_buffer"] = self.scale_buffer.to_dict()
        return out

    def dumps(self, fmt: str = "toml") -> str:
        """The description as TOML (scalars, then one table per part) or JSON text;
        :func:`from_dict` / :func:`load` read it back equal."""
        data = self.to_dict()
        if fmt == "json":
            return json.dumps(data, indent=2)
        lines = [f"{key} = {json.dumps(value)}" for key, value in data.items()
                 if not isinstance(value, dict)]
        for key, value in data.items():
            if not isinstance(value, dict):
                continue
            lines += ["", f"[{key}]"]
            for sub, item in value.items():
                if item is None:        # TOML has no null: UnitSpec reads "none"
                    item = "none"
                lines.append(f"{sub} = {json.dumps(item)}")
        return "\n".join(lines) + "\n"

    def replace(self, **changes: Any) -> ArraySpec:
        return replace(self, **changes)


_FIELDS = {f.name for f in fields(ArraySpec)}


def _unit_of(data: Mapping[str, Any], source: str) -> UnitSpec:
    """The unit of an array table: a table of UnitSpec fields, or a unit name (a preset or a
    spec file) with the optional ``a_format`` / ``b_format`` keys beside it."""
    unit = data.get("unit")
    if isinstance(unit, UnitSpec):
        return unit
    if isinstance(unit, Mapping):
        try:
            return spec_from_dict(unit, source=f"{source}: [unit]")
        except SpecError as exc:
            text = str(exc)
            raise ArrayError(text if text.startswith(source) else f"{source}: [unit]: {text}"
                             ) from None
    if isinstance(unit, str):
        from .. import units  # a floor below; imported here to keep spec light
        try:
            return units.get(unit).spec_for_formats(data.get("a_format"), data.get("b_format"))
        except MxsimError as exc:
            raise ArrayError(f"{source}: unit: {exc}") from None
    raise ArrayError(f"{source}: unit must be a unit name or a table of unit-spec fields, "
                     f"not {_short(repr(unit))}")


def from_dict(data: Mapping[str, Any], *, source: str = "array") -> ArraySpec:
    """Build an array from plain data (as :meth:`ArraySpec.to_dict` writes it), rejecting
    unknown keys by name. ``unit`` is a table of UnitSpec fields, or a unit name with
    optional ``a_format`` / ``b_format`` keys."""
    if not isinstance(data, Mapping):
        raise ArrayError(f"{source}: an array must be a table of fields, not "
                         f"{type(data).__name__}")
    if "unit" not in data:
        raise ArrayError(f"{source}: an array needs a unit (a unit name or a [unit] table)")
    extra = {"a_format", "b_format"} if isinstance(data.get("unit"), str) else set()
    unknown = sorted(str(k) for k in set(data) - _FIELDS - extra)
    if unknown:
        raise ArrayError(f"{source}: unknown key(s) {_short(', '.join(unknown))}; an array "
                         f"has {', '.join(sorted(_FIELDS))}")
    kwargs = {k: v for k, v in data.items() if k in _FIELDS}
    kwargs["unit"] = _unit_of(data, source)
    ua = kwargs.get("microarch")
    if isinstance(ua, Mapping):
        kwargs["microarch"] = _table(MicroArch, ua, "microarch")
    if kwargs.get("scale_buffer") is not None:
        kwargs["scale_buffer"] = _table(Buffer, kwargs["scale_buffer"], "scale_buffer")
    try:
        return ArraySpec(**kwargs)
    except MxsimError as exc:
        if str(exc).startswith(f"{source}: "):
            raise
        raise ArrayError(f"{source}: {exc}") from None
    except TypeError as exc:
        raise ArrayError(f"{source}: {exc}") from None


#: Array files are a few hundred bytes; a larger one is refused before it is read.
MAX_ARRAY_FILE_BYTES = 1 << 20


def load(path: str | Path) -> ArraySpec:
    """Read an array from a ``.toml`` or ``.json`` file (UTF-8, at most 1 MiB)."""
    p = Path(path)
    if not p.is_file():
        raise ArrayError(f"{p}: no such array file")
    kind = "JSON" if p.suffix == ".json" else "TOML"
    if p.stat().st_size > MAX_ARRAY_FILE_BYTES:
        raise ArrayError(f"{p}: an array file must be at most {MAX_ARRAY_FILE_BYTES} bytes")
    try:
        text = p.read_bytes().decode("utf-8")
        data = json.loads(text) if kind == "JSON" else tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise ArrayError(f"{p}: an array file must be UTF-8 {kind} text (byte {exc.start} "
                         f"is not UTF-8)") from None
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ArrayError(f"{p}: not valid {kind} ({exc})") from None
    return from_dict(data, source=str(p))


#: The largest array and interleave the RTL generator builds (the RTL is for small sizes:
#: every unit is a whole datapath, and the testbench packs one wave per beat).
RTL_MAX_UNITS = 64
RTL_MAX_INTERLEAVE = 16


def check_rtl(array: ArraySpec) -> None:
    """Raise MicroArchError (one line) unless ``hdl.array`` builds ``array``: dataflow "os",
    register accumulators, at most :data:`RTL_MAX_UNITS` units and
    :data:`RTL_MAX_INTERLEAVE` slots, and a unit the RTL builds
    (:func:`mxsim.microarch.check_rtl`); inline and separate scales are both built."""
    def fail(msg: str) -> MicroArchError:
        return MicroArchError(f"Array {array.name!r} cannot be built as RTL: {msg}")

    if array.dataflow is not Dataflow.OS:
        raise fail(f'the RTL builds output-stationary arrays (dataflow "os"), not '
                   f'{array.dataflow.value!r}; the cycle model runs it')
    if array.accumulators.kind is not AccKind.REGISTERS:
        raise fail('the RTL builds register accumulators, not "tmem"; the cycle model runs it')
    if array.units > RTL_MAX_UNITS:
        raise fail(f"rows x cols must be at most {RTL_MAX_UNITS} for RTL, not {array.units}")
    if array.interleave > RTL_MAX_INTERLEAVE:
        raise fail(f"interleave must be at most {RTL_MAX_INTERLEAVE} for RTL, not "
                   f"{array.interleave}")
    check_unit_rtl(array.unit, array.microarch)
