"""GEMM plans: a library call (cuBLAS, Triton) as data around exact units.

An instruction preset models one chain of MMAs. A library GEMM is a *plan* around such chains,
chosen per shape: how K is cut into chunks, which unit runs each chunk, how the partial sums
are reduced, and the epilogue. :class:`Plan` says it in the unit-spec language::

    K = 8192, split = 6, granule = 64      chunks of ceil(ceil(K/64)/6)*64 = 1408, the last 1152
    unit = "hopper-wgmma-bf16"             each chunk one chain of that preset, from +0
    partial_format = "fp32"                each partial rounded to this first (RNE)
    merge = "forward", sum_format = "fp32" P0 + P1, then + P2, ... each sum rounded (RNE)
    alpha, beta, out_format                D = round(alpha * S + beta * C) in out_format

:func:`run` computes a plan with the ``reference``, ``fast`` or ``gpu`` engine (module
:mod:`.run`); tests hold the three bit-equal. Plans round-trip through TOML like unit specs;
:mod:`.table` keys recorded plans by (GPU path, shape).
"""

from __future__ import annotations

import enum
import json
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MxsimError, printable
from ..spec.checks import short

__all__ = ["Plan", "Merge", "PlanError", "chunk_bounds", "load", "from_dict", "loads",
           "SUM_FORMATS", "OUT_FORMATS"]

#: Formats a partial or a running sum may be rounded to.
SUM_FORMATS = ("fp32", "bf16", "fp16")
#: Formats the epilogue may write D in.
OUT_FORMATS = ("fp32", "bf16", "fp16")


class PlanError(MxsimError, ValueError):
    """A plan that is not valid, or cannot run on the vectors it was given."""


class Merge(enum.Enum):
    """How the chunks' partial sums are reduced."""
    #: P0 + P1, then + P2, ...: forward from partial 0 (cuBLASLt's splitKreduce_kernel).
    FORWARD = "forward"
    #: adjacent pairs, level by level ((P0 + P1) + (P2 + P3)), an odd last one carried up.
    TREE = "tree"
    #: one chain: chunk i's MMAs start from the running sum (a serial split-K).
    SERIAL = "serial"


@dataclass(frozen=True, kw_only=True)
class Plan:
    """A library GEMM as chunks of an exact unit, a reduction and an epilogue."""
    name: str = "custom"
    call: str = ""                     #: the library call it models
    unit: str = "hopper-wgmma"         #: preset name or spec file run on each chunk
    split: int = 1                     #: number of K chunks asked for (SPLITK_NUM)
    granule: int | None = None         #: G: chunks are whole multiples of G (None: unit k)
    partial_format: str = "fp32"       #: each partial rounded (RNE) to this before merging
    merge: Merge = Merge.FORWARD
    sum_format: str = "fp32"           #: the running sum rounded (RNE) to this after each add
    alpha: float = 1.0                 #: D = alpha * S + beta * C (each op FP32, RNE)
    beta: float = 1.0                  #: only where the set has C
    out_format: str = "fp32"           #: D rounded (RNE) to this
    kernels: tuple[str, ...] = ()      #: the kernels a GPU record saw for this plan
    provenance: str = ""
    verified: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.merge, str):
            object.__setattr__(self, "merge", _enum(Merge, self.merge, "merge"))
        if isinstance(self.kernels, list):
            object.__setattr__(self, "kernels", tuple(self.kernels))
        for name in ("name", "call", "unit", "provenance", "verified"):
            if not isinstance(getattr(self, name), str):
                raise PlanError(f"plan {name} must be text, not "
                                f"{type(getattr(self, name)).__name__}")
        if not self.unit:
            raise PlanError("a plan needs a unit: a preset name (mxsim units) or a spec file")
        if not all(isinstance(k, str) for k in self.kernels):
            raise PlanError("plan kernels must be a list of kernel names (text)")
        _count("split", self.split)
        if self.granule is not None:
            _count("granule", self.granule)
        for name, allowed in (("partial_format", SUM_FORMATS), ("sum_format", SUM_FORMATS),
                              ("out_format", OUT_FORMATS)):
            if getattr(self, name) not in allowed:
                raise PlanError(f"plan {name} must be one of {', '.join(allowed)}, not "
                                f"{printable(repr(getattr(self, name)))}")
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise PlanError(f"plan {name} must be a number, not {printable(repr(value))}")
            if not np.isfinite(value) or float(np.float32(value)) != float(value):
                raise PlanError(f"plan {name} must be a finite FP32 value, not {value!r}")
            object.__setattr__(self, name, float(value))

    # -- shape --------------------------------------------------------------------------------

    def bounds(self, k: int, unit_k: int | None = None) -> list[tuple[int, int]]:
        """The K chunks ``[(start, stop), ...]`` this plan cuts a K of ``k`` into."""
        return chunk_bounds(k, self.split, self.granule or unit_k or 1)

    # -- serialisation ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, enum.Enum):
                value = value.value
            elif isinstance(value, tuple):
                value = list(value)
            if value is None or (value in ("", []) and f.name != "unit"):
                continue                          # an empty default: left out
            out[f.name] = value
        return out

    def dumps(self, fmt: str = "toml") -> str:
        """The plan as TOML or JSON text (fields at their empty default are left out)."""
        data = self.to_dict()
        if fmt == "json":
            return json.dumps(data, indent=2)
        return "".join(f"{key} = {json.dumps(value)}\n" for key, value in data.items())

    def digest(self) -> str:
        import hashlib
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()
                              ).hexdigest()[:16]

    def replace(self, **changes: Any) -> Plan:
        return replace(self, **changes)

    def describe(self) -> str:
        """One line: the plan's arithmetic in words."""
        parts = [f"{self.unit}"]
        if self.split > 1:
            parts.append(f"split-K {self.split}" + (f" (G = {self.granule})"
                                                     if self.granule else ""))
            merge = {"forward": "forward", "tree": "pairwise", "serial": "serial"}[
                self.merge.value]
            if self.partial_format != "fp32":
                parts.append(f"partials rounded to {self.partial_format}")
            parts.append(f"{merge} merge in {self.sum_format}")
        if self.alpha != 1.0:
            parts.append(f"alpha {self.alpha:g}")
        parts.append(f"{self.out_format} out")
        return ", ".join(parts)


def _enum(kind: type[enum.Enum], value: Any, label: str) -> enum.Enum:
    try:
        return kind(value)
    except ValueError:
        raise PlanError(f"plan {label} must be one of {', '.join(m.value for m in kind)}, "
                        f"not {printable(repr(value))}") from None


def _count(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PlanError(f"plan {name} must be a positive whole number, not "
                        f"{printable(repr(value))}")


def chunk_bounds(k: int, split: int, granule: int) -> list[tuple[int, int]]:
    """``K`` cut as cuBLASLt's split-K cuts it: chunks of ``ceil(ceil(K/G)/split)*G``, the
    last one taking the remainder (so fewer than ``split`` chunks when they run out)."""
    _count("K", k)
    _count("split", split)
    _count("granule", granule)
    granules = -(-k // granule)                 # ceil(K / G)
    chunk = -(-granules // split) * granule
    return [(start, min(start + chunk, k)) for start in range(0, k, chunk)]


_FIELDS = {f.name for f in fields(Plan)}


def from_dict(data: Any, *, source: str = "plan") -> Plan:
    """A plan from plain data, rejecting unknown keys by name."""
    if not isinstance(data, dict):
        raise PlanError(f"{source}: a plan must be a table of fields, not {type(data).__name__}")
    unknown = sorted(str(k) for k in set(data) - _FIELDS)
    if unknown:
        raise PlanError(f"{source}: unknown key(s) {short(printable(', '.join(unknown)))}; a "
                        f"plan has {', '.join(sorted(_FIELDS))}")
    try:
        return Plan(**data)
    except PlanError as exc:
        raise PlanError(f"{source}: {exc}") from None
    except TypeError as exc:
        raise PlanError(f"{source}: {exc}") from None


def loads(text: str, *, source: str = "plan") -> Plan:
    try:
        data = json.loads(text) if text.lstrip().startswith("{") else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PlanError(f"{source}: not a valid plan file ({exc})") from None
    return from_dict(data, source=source)


def load(path: str | Path) -> Plan:
    """A plan from a ``.toml`` or ``.json`` file (UTF-8, at most 1 MiB)."""
    p = Path(path)
    if not p.is_file():
        raise PlanError(f"{p}: no such plan file")
    if p.stat().st_size > 1 << 20:
        raise PlanError(f"{p}: a plan file must be at most 1 MiB")
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlanError(f"{p}: a plan file must be UTF-8 text (byte {exc.start} is not)"
                        ) from None
    except OSError as exc:
        raise PlanError(f"{p}: cannot read the plan file ({exc.strerror or exc})") from None
    return loads(text, source=str(p))
