"""Inputs outside a port map's ``[domain]``, checked on request and reported apart.

A design's ``[domain]`` keeps the verdict to the inputs it is built for; what the design does
outside it is still worth knowing (does an overflowing scale sum wrap as the spec says, or
does a NaN scale come out as a NaN?). ``mxsim verify --rtl MAP --outside-domain N`` runs, after
the verdict, N dot products that each break at least one rule of the domain through the same
build, checks them against the same spec and reports them on their own line and in their own
JSON object: they never change the verdict or the exit code.

The dots are the verify stimulus of the spec (:func:`testbenches.unit.coverage.stimulus`, one
block each), drawn without the domain and kept where the domain refuses them
(:meth:`testbenches.foreign.portmap.domain.Domain.violations`), and only those the design's
ports can carry (a scale exponent an N-bit ``scales.exponent`` field cannot hold is not
drawn); the report counts the dots that break each rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from mxsim.errors import MxsimError
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

from ..sim.backend import MismatchKind, Stimulus
from .portmap.domain import Domain

__all__ = ["Outside", "outside_set", "rules_broken", "check_outside", "DRAWS"]

#: Stimulus draws before giving up on finding enough dots outside the domain.
DRAWS = 16


@dataclass
class Outside:
    """The outside-the-domain check: how many dots ran, how many of their results differ
    from the spec (values, and cycles), the rules the dots broke (rule: dots) and the first
    few mismatches."""
    dots: int
    value_mismatches: int
    cycle_mismatches: int
    rules: dict[str, int] = field(default_factory=dict)
    first: list[dict] = field(default_factory=list)

    def line(self) -> str:
        """The report's line."""
        if self.dots == 0:
            return "no dot product outside the domain could be drawn"
        rules = ", ".join(f"{rule} {n:,}" for rule, n in self.rules.items())
        verdict = ("every result equals the spec" if not self.value_mismatches
                   and not self.cycle_mismatches else
                   f"{self.value_mismatches:,} value and {self.cycle_mismatches:,} cycle "
                   f"mismatches against the spec")
        return (f"{self.dots:,} dot products outside the domain (rules broken: {rules}): {verdict} "
                f"(reported apart: not part of the verdict)")

    def to_dict(self) -> dict:
        return {"dots": self.dots, "value_mismatches": self.value_mismatches,
                "cycle_mismatches": self.cycle_mismatches, "rules": dict(self.rules),
                "first": self.first}


def outside_set(domain: Any, spec: UnitSpec, dots: int, seed: int, *, with_c: bool = True,
                fits: Any = None) -> VectorSet | None:
    """Up to ``dots`` dot products of ``spec``'s stimulus (each a 1 x 1 batch entry) that the
    domain refuses: drawn ``dots`` at a time, four times more on each of :data:`DRAWS`
    tries until enough are found; the most a draw found, or None (never one it allows).
    ``with_c=False``: C is +0 (a design that takes no C). ``fits``: a domain of what the
    design's ports can carry at all (e.g. the range of its scale-exponent fields): the
    stimulus is first put inside it (:meth:`Domain.constrain`), then the dots the domain
    refuses are kept."""
    from ..unit.coverage import stimulus
    best, n = None, max(dots, 256)
    for i in range(DRAWS):
        vs = stimulus(spec, n, blocks=1, seed=seed + 7919 * (i + 1), with_c=with_c)
        if fits is not None:                 # what the ports can carry: redrawn inside it
            vs = fits.constrain(vs, seed + i)
        bad = domain.violations(vs)[0]
        picked = np.flatnonzero(bad)[:dots]
        if len(picked) and (best is None or len(picked) > best.num_dots):
            best = vs.take_dots(picked.tolist())
        if len(picked) >= dots:
            break
        n = min(4 * n, 1 << 22)
    return best


def rules_broken(domain: Any, vs: VectorSet) -> dict[str, int]:
    """How many dots of ``vs`` break each rule of the domain (a dot may break several)."""
    out = {}
    for key in ("a", "b", "c", "a_scale", "b_scale", "scale_sum", "c_exponent"):
        if getattr(domain, key, None) is None:
            continue
        one = replace(domain, **{k: None for k in ("a", "b", "c", "a_scale", "b_scale",
                                                   "scale_sum", "c_exponent")
                                 if k != key and hasattr(domain, k)})
        n = int(one.violations(vs)[0].sum())
        if n:
            out[key] = n
    return out


def check_outside(pm: Any, backend: Any, spec: UnitSpec, dots: int, seed: int,
                  out_dir: str | Path) -> Outside:
    """Run :func:`outside_set` through ``backend`` (already built for ``spec``) and count
    what differs from the spec; nothing here changes a verdict."""
    if pm.domain is None:
        raise MxsimError(f"{pm.path}: --outside-domain needs a [domain] in the map (every "
                         f"input is inside a map without one)")
    ex = pm.scales.exponent
    fits = (None if ex is None else Domain(scale_sum=ex.sums) if pm.scales.sum is not None
            else Domain(a_scale=ex.exponents, b_scale=ex.exponents))
    vs = outside_set(pm.domain, spec, dots, seed, with_c=backend.takes_c, fits=fits)
    if vs is None:
        return Outside(0, 0, 0)
    rules = rules_broken(pm.domain, vs)
    run = backend.run(vs, Stimulus.random(seed), name="outside")
    value = [m for m in run.mismatches if m.kind is MismatchKind.VALUE]
    cycle = [m for m in run.mismatches if m.kind is not MismatchKind.VALUE]
    return Outside(vs.num_dots, len(value), len(cycle), rules,
                   [m.to_dict() for m in run.mismatches[:5]])
