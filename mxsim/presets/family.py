"""A preset: a named family of unit specs for one hardware path, and the preset of one spec.

:class:`Preset` yields a :class:`~mxsim.spec.UnitSpec` for each operand pair, scale pattern
and C/D format it takes and refuses the others in one line; :class:`SpecPreset` (from
:func:`from_spec`) is a spec file or a UnitSpec used as a unit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import UnitError
from ..formats import ELEMENT_FORMATS
from ..spec import UnitSpec

__all__ = ["Preset", "SpecPreset", "from_spec", "MMASIM", "UNVERIFIED"]

MMASIM = "MMA-Sim (microsoft/MMA-Sim, arXiv 2511.10909; PyPI mmasim 2.1.1)"
#: The ``verified`` of a preset whose only evidence is a published model.
UNVERIFIED = "MMA-Sim's model only; not verified on hardware"


@dataclass(frozen=True)
class Preset:
    """A family of specs for one hardware path.

    Each spec is built once per process: the same formats give the same (immutable) spec.
    ``granular``: ``make`` takes the FP32 scale granularity (``"row"`` or ``"tensor"``);
    ``no_c``: why the hardware path takes no C (a vector set with C is refused), or None.
    """
    name: str
    summary: str
    provenance: str
    verified: str                      #: on which hardware, how many vectors, or "no"
    pairs: tuple[tuple[str, str], ...]
    scales: tuple[tuple[str | None, int | None], ...]   #: (scale_format, block) accepted
    c_formats: tuple[str, ...]
    make: Callable[..., UnitSpec]
    granular: bool = field(default=False, kw_only=True)
    no_c: str | None = field(default=None, kw_only=True)

    def spec(self, a_format: str, b_format: str | None = None, *,
             scale_format: str | None = None, block: int | None = None,
             c_format: str = "fp32", granularity: str | None = None) -> UnitSpec:
        """The spec for one operand-format pair (raises UnitError for one it lacks)."""
        b_format = b_format or a_format
        if (a_format, b_format) not in self.pairs:
            pairs = ", ".join(f"{a}x{b}" for a, b in self.pairs)
            raise UnitError(f"Unit {self.name} does not take {a_format} x {b_format}; it "
                            f"takes {pairs}")
        if (scale_format, block) not in self.scales_for(a_format, b_format):
            want = " or ".join(f"{s} scales in blocks of {b}" if s else "no block scales"
                               for s, b in self.scales_for(a_format, b_format))
            got = f"{scale_format} scales in blocks of {block}" if scale_format \
                else "no block scales"
            raise UnitError(f"Unit {self.name} takes {want}, not {got}")
        if c_format not in self.c_formats:
            raise UnitError(f"Unit {self.name} takes C and D as {' or '.join(self.c_formats)}"
                            f", not {c_format}")
        if scale_format == "fp32" and self.granular:
            return _built(self.make, a_format, b_format, scale_format, block, c_format,
                          granularity=granularity or "row")
        return _built(self.make, a_format, b_format, scale_format, block, c_format)

    def all_specs(self) -> list[UnitSpec]:
        """Every spec of the family: each operand pair, scale pattern it takes, C format and
        (FP32 scales of a granular preset) granularity, in that order."""
        out = []
        for a, b in self.pairs:
            for s, block in self.scales_for(a, b):
                for c in self.c_formats:
                    for g in (("row", "tensor") if s == "fp32" and self.granular else (None,)):
                        out.append(self.spec(a, b, scale_format=s, block=block, c_format=c,
                                             granularity=g))
        return out

    def scales_for(self, a_format: str, b_format: str) -> tuple[tuple[str | None, int | None],
                                                                 ...]:
        """The scale patterns the pair takes: :attr:`scales`, less every scale for a pair
        that is not two MX element formats (FP16, BF16 and TF32 operands take none)."""
        if a_format in ELEMENT_FORMATS and b_format in ELEMENT_FORMATS:
            return self.scales
        return tuple((s, b) for s, b in self.scales if s is None)

    def spec_for(self, vs) -> UnitSpec:
        """The spec that applies to a vector set's formats (and FP32 scale granularity).

        Raises UnitError for a set with C on a preset whose hardware path takes none
        (``no_c``).
        """
        if vs.c is not None and self.no_c is not None:
            raise UnitError(f"Unit {self.name} takes no C: {self.no_c}")
        granularity = None
        if vs.scale_format == "fp32":
            granularity = "tensor" if vs.a_scale.ndim == 0 else "row"
        return self.spec(vs.a_format, vs.b_format, scale_format=vs.scale_format,
                         block=vs.block, c_format=vs.c_format, granularity=granularity)

    def spec_for_formats(self, a_format: str | None = None,
                         b_format: str | None = None) -> UnitSpec:
        """The spec for A in ``a_format`` and B in ``b_format`` (default A's), with the
        preset's first scale pattern and C format: for the RTL generator, which has no vector
        set to read formats from. ``a_format`` defaults to E4M3 where the preset takes
        E4M3 x E4M3, else to its first pair."""
        if a_format is None:
            a_format, first_b = (("e4m3", "e4m3") if ("e4m3", "e4m3") in self.pairs
                                 else self.pairs[0])
            b_format = b_format or first_b
        scale, block = self.scales[0]
        return self.spec(a_format, b_format or a_format, scale_format=scale, block=block,
                         c_format=self.c_formats[0])


@functools.lru_cache(maxsize=1024)
def _built(make: Callable[..., UnitSpec], *args: Any, **kwargs: Any) -> UnitSpec:
    """``make(*args, **kwargs)``, built once (a spec is immutable; building one checks it)."""
    return make(*args, **kwargs)


@dataclass(frozen=True)
class SpecPreset(Preset):
    """A preset of one spec (a spec file, or a UnitSpec used as a unit).

    It takes the spec's operand pair, scales and C format only, and refuses others in the
    words of :meth:`~mxsim.spec.UnitSpec.check_operands`; a vector set without C runs whatever
    its ``c_format`` says.
    """
    only: UnitSpec | None = field(default=None, kw_only=True)

    def spec(self, a_format: str, b_format: str | None = None, *,
             scale_format: str | None = None, block: int | None = None,
             c_format: str | None = None, granularity: str | None = None) -> UnitSpec:
        """The spec, when it takes these formats (``c_format`` None: no C); raises UnitError
        otherwise."""
        self.only.check_operands(a_format, b_format or a_format, scale_format, block, c_format)
        return self.only

    def scales_for(self, a_format: str, b_format: str) -> tuple[tuple[str | None, int | None],
                                                                 ...]:
        """The scale patterns the pair takes: :attr:`scales`, less every scale for a pair
        that is not two MX element formats (FP16, BF16 and TF32 operands take none)."""
        if a_format in ELEMENT_FORMATS and b_format in ELEMENT_FORMATS:
            return self.scales
        return tuple((s, b) for s, b in self.scales if s is None)

    def spec_for(self, vs) -> UnitSpec:
        """The spec, when it takes the vector set's formats; raises UnitError otherwise."""
        return self.spec(vs.a_format, vs.b_format, scale_format=vs.scale_format,
                         block=vs.block, c_format=None if vs.c is None else vs.c_format)

    def spec_for_formats(self, a_format: str | None = None,
                         b_format: str | None = None) -> UnitSpec:
        """The spec itself (no ``a_format``), or the spec when it is for A in ``a_format`` and
        B in ``b_format`` (default A's)."""
        if a_format is None:
            return self.only
        return self.spec(a_format, b_format or a_format, scale_format=self.only.scale_format,
                         block=self.only.block, c_format=self.only.d_format)


def _the_spec(spec: UnitSpec, *args: Any, **kwargs: Any) -> UnitSpec:
    return spec


def from_spec(spec: UnitSpec, *, summary: str, provenance: str) -> SpecPreset:
    """The preset of one spec: named after it, its formats the only ones it takes, not
    verified on hardware."""
    return SpecPreset(name=spec.name, summary=summary, provenance=provenance, verified="no",
                      pairs=((spec.a_format, spec.b_format),),
                      scales=((spec.scale_format, spec.block),), c_formats=(spec.d_format,),
                      make=functools.partial(_the_spec, spec), only=spec)
