"""Hold a compiled export equal to the engines: seeded vector sets of every generator family
for one spec, run through the C library and through the fast (or reference) engine, compared
code for code.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from ..engine import fast, reference
from ..errors import VectorFileError
from ..spec import UnitSpec
from ..vectors import EXTRA_FAMILIES, FAMILIES, VectorSet, generate
from .build import Library

__all__ = ["CheckResult", "vector_sets", "check", "FAMILIES_CHECKED", "shape_for",
           "families_for"]

#: Every generator family, the random ones and the directed ones.
FAMILIES_CHECKED = FAMILIES + EXTRA_FAMILIES


@dataclass
class CheckResult:
    """Dots compared and mismatching, per family; the first mismatch's place."""
    dots: int = 0
    mismatches: int = 0
    per_family: dict[str, int] = field(default_factory=dict)
    first: str | None = None


def _granularity(spec: UnitSpec, seed: int) -> str:
    if spec.scale_format != "fp32":
        return "block"
    if spec.block == 128:
        return "block"
    if spec.epilogue == "alpha":
        return "tensor"
    if spec.epilogue == "col-row":
        return "row"
    return ("tensor", "row")[seed % 2]


def families_for(spec: UnitSpec) -> tuple[str, ...]:
    """The families that apply to ``spec``'s vectors: ``nan-scale`` needs block scales,
    ``e-zero`` float operands whose ladders it can build."""
    out = [f for f in FAMILIES if f != "nan-scale" or spec.scale_format in ("e8m0", "ue4m3")]
    try:
        generate("e-zero", a_format=spec.a_format, b_format=spec.b_format, m=1, n=1, k=32)
        out.append("e-zero")
    except VectorFileError:
        pass
    return tuple(out)


def shape_for(spec: UnitSpec, seed: int, dots: int) -> tuple[int, int, int]:
    """(m, n, k) of one set: K one to four instructions (a multiple of 128 for block-wise
    FP32 scales, with 1 x 128 dots); 8 x 8 dots, or 4 x 4 where ``dots`` is too few to give
    every family four sets of 64."""
    rng = np.random.default_rng([seed, 7])
    if spec.scale_format == "fp32" and spec.block == 128:
        return 1, 128, 128 * int(rng.integers(1, 3))       # N too: B's 128 x 128 blocks
    unit = spec.k or max(spec.block or 1, 16)
    side = 8 if dots >= 4 * 64 * len(FAMILIES_CHECKED) else 4
    return side, side, unit * int(rng.integers(1, 5))


def vector_sets(spec: UnitSpec, dots: int, seed: int = 0) -> Iterator[VectorSet]:
    """Seeded sets of every family in turn, for ``spec``'s formats, until ``dots`` dots."""
    made, i = 0, 0
    families = families_for(spec)
    while made < dots:
        family = families[i % len(families)]
        s = seed * 100_003 + i
        m, n, k = shape_for(spec, s, dots)
        ts = 0.75 if spec.exact and spec.scale_format == "ue4m3" and i % 3 == 0 else None
        vs = generate(family, a_format=spec.a_format, b_format=spec.b_format, m=m, n=n, k=k,
                      scale_format=spec.scale_format, block=spec.block,
                      scale_granularity=_granularity(spec, s), c_format=spec.d_format,
                      with_c=i % 5 != 4, tensor_scale=ts, seed=s)
        made += m * n
        i += 1
        yield vs


def check(spec: UnitSpec, lib: Library, dots: int, seed: int = 0, *,
          engine: str = "fast") -> CheckResult:
    """Compare ``lib`` with the engine on ``dots`` dots of :func:`vector_sets`."""
    dot = fast.dot if engine == "fast" else reference.dot
    out = CheckResult()
    for vs in vector_sets(spec, dots, seed):
        want = np.asarray(dot(spec, vs))
        got = lib.dot(vs)
        bad = want != got
        family = vs.extra["family"]
        out.dots += want.size
        out.mismatches += int(bad.sum())
        out.per_family[family] = out.per_family.get(family, 0) + want.size
        if bad.any() and out.first is None:
            where = tuple(int(x) for x in np.argwhere(bad)[0])
            out.first = (f"{family} seed {vs.extra['seed']} k {vs.k} dot {where}: engine "
                         f"0x{int(want[where]):X}, C 0x{int(got[where]):X}")
    return out
