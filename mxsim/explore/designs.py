"""A sweep's designs: the spec the engine runs, the unit the RTL builds and its micro-architecture.

A design's parameters (a base unit, ``preset`` or ``spec``, and UnitSpec fields, ``lanes`` and
``stages``) become one :class:`Design`. The spec is named ``BASE[key=value,...]`` after what the
design changes. Promotion (``promote_every``) is done outside the unit (an FP32 add per P
instructions, as on Hopper's CUDA cores), so the RTL and the cycle model take ``unit_spec``, the
spec less promotion; without promotion ``unit_spec`` *is* ``spec``. The unit and its MicroArch
come from :func:`mxsim.design.resolve_design`, which checks that the RTL builds them.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .. import presets
from .. import spec as spec_mod
from ..array.spec import AccKind, ArraySpec, Buffer, Dataflow
from ..design import resolve_design
from ..errors import MxsimError
from ..microarch import MicroArch
from ..spec import SpecError, UnitSpec

__all__ = ["CACHE_VERSION", "SPEC_KEYS", "ARRAY_KEYS", "ARRAY_DEFAULTS", "Design", "Reference",
           "ParameterError", "design", "reference", "array_of", "stable_hash", "hdl_version"]

#: Bumped when a cached figure's meaning changes (old cache entries are then not reused).
CACHE_VERSION = 1

#: The UnitSpec fields a sweep may set (the name, instruction and provenance are the base's).
SPEC_KEYS = frozenset(f.name for f in fields(UnitSpec)) - {"name", "instruction", "provenance"}
_OPTIONAL = {f.name for f in fields(UnitSpec) if "None" in str(f.type)}
_NOT_IN_NAME = {"preset", "spec", "label", "lanes", "stages"}

#: The [array] keys (mxsim.array.ArraySpec, flattened), which [grid] and [[point]] may vary.
ARRAY_DEFAULTS: dict[str, Any] = {
    "rows": 16, "cols": 16, "dataflow": "os", "interleave": 1, "accumulators": "registers",
    "bandwidth": 256, "a_bandwidth": None, "b_bandwidth": None, "buffer_kib": 256,
    "scales": "inline", "scale_bandwidth": None, "tmem_ports": 1, "tmem_latency": 1}
ARRAY_KEYS = frozenset(ARRAY_DEFAULTS)


class ParameterError(MxsimError, ValueError):
    """A design parameter that cannot be, where the message need not name it (an unknown
    preset, a spec file that does not load): ``key`` names it, for the sweep file's line."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


def stable_hash(obj: Any) -> str:
    """16 hex digits of the SHA-256 of ``obj`` as sorted JSON: the cache's file names."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


@functools.cache
def hdl_version() -> str:
    """A hash of the RTL generator's source (``hdl/*.py``, read as text, never imported): a
    cached RTL hash is stale when it changes."""
    root = Path(__file__).resolve().parents[2] / "hdl"
    text = "".join(p.read_text() for p in sorted(root.glob("*.py")))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, eq=False)
class Design:
    """One unit design: the spec the engine runs, the unit the RTL builds, its microarch."""
    label: str
    spec: UnitSpec
    unit_spec: UnitSpec          #: ``spec`` less promotion (``spec`` itself when it has none)
    microarch: MicroArch
    params: dict[str, Any] = field(default_factory=dict)     #: the values swept
    group: str = ""              #: the [[point]] label it comes from ("" for the grid)
    array: ArraySpec | None = None   #: the array of ``unit_spec`` units its throughput is of

    @property
    def rtl_key(self) -> str:
        """Identifies the RTL to build (before it is generated): unit spec, microarch, hdl."""
        return stable_hash({"unit": self.unit_spec.to_dict(), "lanes": self.microarch.lanes,
                            "stages": self.microarch.stages, "hdl": hdl_version(),
                            "v": CACHE_VERSION})


@dataclass(frozen=True, eq=False)
class Reference:
    """A unit measured for accuracy only (no RTL), drawn as a line: e.g. FP32 accumulation."""
    label: str
    spec: UnitSpec


def _none(value: Any) -> Any:
    """``None`` for the words a sweep file writes for it ("none", "exact"), else ``value``."""
    return None if isinstance(value, str) and value.lower() in ("none", "exact") else value


def design(label: str, params: dict[str, Any], varied: dict[str, Any], group: str,
           array: dict[str, Any] | None = None) -> Design:
    """The design a point's merged parameters name, on the array ``array`` (the [array]
    table's keys, overridden by the point's own array keys); raises the spec's errors,
    SpecError for a non-FP32 output, MicroArchError for lanes, stages or a unit the RTL does
    not build, and ArrayError for an array that cannot be.

    A weight- or input-stationary array with its accumulators in a tensor memory adds each
    K-tile (``rows`` instructions) into the FP32 total with one RNE add: the engine's
    promotion (``promote_every = rows``, ``promote_rounding = "rne"``, done outside the
    unit), so the design's ``spec`` gets those two fields (see :mod:`mxsim.array.numerics`).
    """
    arr = {**ARRAY_DEFAULTS, **(array or {}),
           **{k: v for k, v in params.items() if k in ARRAY_KEYS}}
    params = {k: v for k, v in params.items() if k not in ARRAY_KEYS}
    if _tiles(arr):
        if _none(params.get("promote_every")) is not None:
            raise SpecError(f"a {arr['dataflow']} array with tmem accumulators "
                            f"adds every K-tile of rows = {arr['rows']} instructions in FP32 "
                            f"already; drop promote_every or use registers")
        params = {**params, "promote_every": arr["rows"], "promote_rounding": "rne"}
    spec, unit = _specs(params)
    if spec.d_format != "fp32":
        raise SpecError(f"d_format must be fp32 for a sweep (the RTL outputs FP32), "
                        f"not {spec.d_format}")
    stages = params.get("stages")
    unit, ua = resolve_design(unit, lanes=params.get("lanes"),
                              stages=1 if stages is None else stages)
    return Design(label, spec, unit, ua, dict(varied), group, array_of(unit, ua, arr))


def _tiles(arr: dict[str, Any]) -> bool:
    return (str(arr.get("dataflow")).lower() in ("ws", "is")
            and str(arr.get("accumulators")).lower() == "tmem")


def array_of(unit: UnitSpec, ua: MicroArch, arr: dict[str, Any]) -> ArraySpec:
    """The ArraySpec of the flattened [array] keys ``arr`` (every key of
    :data:`ARRAY_DEFAULTS`) of ``unit`` units built as ``ua`` (the very objects)."""
    def bw(key: str) -> int:
        if arr.get(key) is None:              # unset: the bandwidth of every buffer
            key = "bandwidth"
        value = arr[key]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParameterError(key, f"{key} must be a whole number of bytes per cycle, not "
                                      f"{value!r}")
        return value

    size = arr["buffer_kib"]
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise MxsimError(f"buffer_kib must be a positive integer (KiB per operand buffer), "
                         f"not {size!r}")
    separate = str(arr["scales"]).lower() == "separate"
    kind = str(arr["accumulators"]).lower()
    if kind not in set(AccKind):
        raise MxsimError(f"accumulators must be one of {', '.join(AccKind)}, not "
                         f"{arr['accumulators']!r}")
    if str(arr["dataflow"]).lower() not in set(Dataflow):
        raise MxsimError(f"dataflow must be one of {', '.join(Dataflow)}, not "
                         f"{arr['dataflow']!r}")
    return ArraySpec(
        name="sweep", unit=unit, microarch=ua, rows=arr["rows"], cols=arr["cols"],
        dataflow=arr["dataflow"], interleave=arr["interleave"],
        a_buffer=Buffer(bytes=size << 10, bandwidth=bw("a_bandwidth")),
        b_buffer=Buffer(bytes=size << 10, bandwidth=bw("b_bandwidth")),
        scales=arr["scales"],
        scale_buffer=(Buffer(bytes=size << 10, bandwidth=bw("scale_bandwidth"))
                      if separate else None),
        accumulators={"kind": kind, "read_ports": arr["tmem_ports"],
                      "write_ports": arr["tmem_ports"], "latency": arr["tmem_latency"]})


def reference(params: dict[str, Any]) -> UnitSpec:
    """The spec a reference's merged parameters name (no RTL: lanes and stages are ignored)."""
    spec, _ = _specs({k: v for k, v in params.items() if k not in ("lanes", "stages")})
    if spec.d_format != "fp32":
        raise SpecError(f"d_format must be fp32, not {spec.d_format}")
    return spec


def _specs(params: dict[str, Any]) -> tuple[UnitSpec, UnitSpec]:
    """The spec and the unit spec (the spec less promotion; the spec itself without it)."""
    p = {k: v for k, v in params.items() if k not in _NOT_IN_NAME - {"preset", "spec"}}
    base, p = _base(p)
    changes = {}
    for key, value in p.items():
        value = _none(value) if key in _OPTIONAL else value
        if key == "schedule" and value == "serial":        # one product per fused step
            k = p.get("k", base.k)
            value = tuple((i,) for i in range(k)) if isinstance(k, int) else value
        changes[key] = value
    name = _name(base.name, params)
    spec = replace(base, name=name, **changes) if changes or name != base.name else base
    if spec.promote_every is None:
        return spec, spec
    # the unit the RTL builds is named without promotion, which is done outside it
    default_rounding = UnitSpec.__dataclass_fields__["promote_rounding"].default
    unit = replace(spec, name=_name(base.name, params, unit=True), promote_every=None,
                   promote_rounding=default_rounding)
    return spec, unit


def _base(p: dict[str, Any]) -> tuple[UnitSpec, dict[str, Any]]:
    """The base spec a design starts from (a preset's, for its formats and scale pattern, a
    spec file's, or the default UnitSpec's) and the parameters left to apply to it."""
    p = dict(p)
    preset, path = p.pop("preset", None), p.pop("spec", None)
    a, b = p.pop("a_format", None), p.pop("b_format", None)
    if preset is not None and path is not None:
        raise ParameterError("spec", "give preset or spec, not both")
    if path is not None:
        if not isinstance(path, str):
            raise ParameterError("spec", f"spec must be a spec file's path, not {path!r}")
        try:
            base = spec_mod.load(path)
        except MxsimError as e:
            raise ParameterError("spec", str(e)) from None
        return base.replace(a_format=a or base.a_format, b_format=b or a or base.b_format), p
    if preset is None:
        return UnitSpec(a_format=a or "e4m3", b_format=b or a or "e4m3"), p
    if not isinstance(preset, str):
        raise ParameterError("preset", f"preset must be a unit's name (see `mxsim units`), not "
                                       f"{preset!r}")
    try:
        pre = presets.get(preset)
    except MxsimError as e:
        raise ParameterError("preset", str(e)) from None
    a, b = a or "e4m3", b or a or "e4m3"
    default = pre.scales[0]
    scale = (_none(p["scale_format"]) if "scale_format" in p else default[0],
             _none(p["block"]) if "block" in p else default[1])
    if scale not in pre.scales:          # set as overrides on the preset's first pattern
        return pre.spec(a, b, scale_format=default[0], block=default[1]), p
    p.pop("scale_format", None)
    p.pop("block", None)
    return pre.spec(a, b, scale_format=scale[0], block=scale[1]), p


def _name(base: str, params: dict[str, Any], unit: bool = False) -> str:
    """``BASE[key=value,...]``: the base's name and what the design changes (the unit's name
    leaves out promotion, which is done outside the unit)."""
    skip = set(_NOT_IN_NAME)
    if unit or _none(params.get("promote_every")) is None:
        skip |= {"promote_every", "promote_rounding"}
    shown = {k: v for k, v in params.items() if k not in skip}
    return base + ("[" + ",".join(f"{k}={v}" for k, v in shown.items()) + "]" if shown else "")
