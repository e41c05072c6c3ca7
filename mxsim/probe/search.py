"""The coordinate search of a fit: candidate specs, their scores, and the moves between them.

:class:`Search` scores each candidate unit spec by the observed outputs it reproduces bit for
bit (as values, +0 equal to -0 and NaN to NaN, for a design whose results carry neither: see
:func:`canonical`), refusing candidates that change a pinned field or that a caller's
``admissible`` rejects; it climbs by coordinate sweeps over :data:`ORDER` with joint moves
where a sweep stalls, and gives the evidence for each value. :func:`mxsim.probe.fit.fit` owns
the search space and the starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from .. import formats
from ..engine import fast
from ..errors import MxsimError
from ..spec import Reduce, SpecError, UnitSpec, ZeroSign, rules
from ..vectors import VectorSet

__all__ = ["Search", "schedules", "canonical", "by_value", "candidate", "label", "ORDER"]


def schedules(k: int) -> dict[str, tuple[tuple[int, ...], ...] | None]:
    """Candidate step schedules for an instruction of ``k`` indices, simplest first.

    One fused step; contiguous steps of 16, 8 and 4; and interleavings of two steps (even and
    odd indices; pairs of indices; the low and high halves of each group of four, which is how
    one FP8 register of four bytes unpacks into two FP16 registers).
    """
    out: dict[str, tuple[tuple[int, ...], ...] | None] = {"one step": None}
    for size in (16, 8, 4):
        if k % size == 0 and size < k:
            out[f"steps of {size}"] = tuple(tuple(range(s, s + size)) for s in range(0, k, size))
    if k % 2 == 0:
        out["even|odd"] = (tuple(range(0, k, 2)), tuple(range(1, k, 2)))
    if k % 4 == 0:
        out["pairs 01|23"] = (tuple(i for i in range(k) if i % 4 < 2),
                              tuple(i for i in range(k) if i % 4 >= 2))
        out["pairs 23|01"] = tuple(reversed(out["pairs 01|23"]))
    if k % 32 == 0 and k > 16:
        lo = tuple(i for i in range(k) if i % 32 < 16)
        out["16 of each 32"] = (lo, tuple(i for i in range(k) if i % 32 >= 16))
    return out


#: Order of the coordinate sweeps: the parameters that move the most bits first.
ORDER = ["schedule", "frac_bits", "acc_format", "acc_rounding", "align", "c_mode", "product",
         "upcast", "e_zero", "c_rounding", "specials", "overflow", "group", "reduce",
         "tree_formats", "zero_sign", "nan_code"]


def label(param: str, value: Any) -> str:
    """How reports write ``value`` of ``param`` (a NaN code in hex, as codes are written)."""
    if param == "nan_code" and value is not None:
        return f"{value:#x}"
    if param == "tree_formats" and value is not None:
        return "|".join(value)
    return str(getattr(value, "value", value))


def candidate(spec: UnitSpec | None, param: str, value: Any) -> UnitSpec | None:
    """``spec`` with ``param`` set to ``value`` (a tree and C passing through as the joint
    moves they need), or None where the spec space refuses it (or ``spec`` is None)."""
    if spec is None:
        return None
    try:
        if param == "schedule":
            return replace(spec, schedule=value)
        if param == "frac_bits" and value is None:
            return replace(spec, frac_bits=None)
        if param == "reduce" and value == "tree" and spec.reduce != "tree":
            # A tree adds exact group terms, C after: one joint move.
            return replace(spec, reduce="tree", group=spec.group or spec.block, frac_bits=None,
                           schedule=None, c_mode="after")
        if param == "zero_sign" and value == "c" and spec.zero_sign is not ZeroSign.C:
            # C passes through where the exact products sum to zero: exact terms, one step.
            return replace(spec, zero_sign="c", frac_bits=None, schedule=None)
        return replace(spec, **{param: value})
    except (SpecError, ValueError):
        return None                      # a combination the spec space does not allow


def by_value(observed: VectorSet) -> bool:
    """Whether ``observed``'s outputs are compared as values (``meta['compare']``)."""
    return observed.extra.get("compare") == "value"


def canonical(codes: np.ndarray, d_format: str) -> np.ndarray:
    """``codes`` of ``d_format`` with -0 as +0 and every NaN as the format's NaN: equal
    exactly where the values are (NaN equal to NaN), as a result without zero sign or NaN
    payload reads."""
    fmt = formats.get(d_format)
    out = np.array(codes, copy=True)
    cls = fmt.classify(out)
    out[cls == formats.Class.ZERO] = 0
    out[cls == formats.Class.NAN] = fmt.code_of_nan
    return out


def _tree_values(spec: UnitSpec, level_formats: list[Any]) -> list[tuple[str, ...] | None]:
    """``tree_formats`` one move from ``spec``'s: null (every level the accumulator's), its own,
    and each level alone changed to each of ``level_formats`` (a tree of two or more levels
    only)."""
    if spec.reduce is not Reduce.TREE or spec.group is None:
        return []
    levels = rules.tree_levels(spec.k, spec.group)
    if levels < 2:
        return []
    now = list(spec.tree_level_formats())
    out: list[tuple[str, ...] | None] = [None]
    if spec.tree_formats is not None:
        out.append(spec.tree_formats)
    for i in range(levels):
        for fmt in level_formats:
            if fmt is not None and fmt != now[i]:
                out.append(tuple(now[:i] + [fmt] + now[i + 1:]))
    return out


class Search:
    """The state of one fit: the observed set, the search space and every spec scored."""

    def __init__(self, observed: VectorSet, search: dict[str, list[Any]],
                 pins: dict[str, Any] | None = None,
                 admissible: Callable[[UnitSpec], bool] | None = None):
        self.observed = observed
        self.search = search
        self.pins = pins or {}
        self.admissible = admissible
        self.by_value = by_value(observed)
        self.target = self._codes(observed.d.reshape(-1))
        self.cache: dict[UnitSpec, np.ndarray] = {}

    def _codes(self, codes: np.ndarray) -> np.ndarray:
        return canonical(codes, self.observed.d_format) if self.by_value else codes

    def pin(self, spec: UnitSpec) -> UnitSpec | None:
        """``spec`` with the pinned fields' values (None where the spec space refuses it)."""
        try:
            return replace(spec, **self.pins) if self.pins else spec
        except (SpecError, ValueError):
            return None

    def score(self, spec: UnitSpec) -> int:
        """How many observed outputs ``spec`` reproduces (0 for a spec that cannot run, that
        changes a pinned field or that is not admissible)."""
        if spec not in self.cache:
            self.cache[spec] = np.zeros(self.target.shape, bool)
            ok = all(getattr(spec, n) == v for n, v in self.pins.items()) and (
                self.admissible is None or self.admissible(spec))
            try:
                if ok:
                    out = self._codes(fast.dot(spec, self.observed).reshape(-1))
                    self.cache[spec] = out == self.target
            except (MxsimError, ValueError):
                pass                    # a spec the engine cannot run reproduces nothing
        return int(self.cache[spec].sum())

    def values(self, param: str, spec: UnitSpec) -> list[Any]:
        """The values of ``param`` to try from ``spec``."""
        if param == "tree_formats":
            return _tree_values(spec, self.search[param])
        return self.search[param]

    def complexity(self, param: str, spec: UnitSpec) -> int:
        """The position of ``spec``'s value of ``param`` in the search (earlier: simpler; a
        tree's level formats: 0 for null, else 1 + the sum of their positions)."""
        values = self.search.get(param, [])
        current = spec.schedule if param == "schedule" else getattr(spec, param)
        current = getattr(current, "value", current)
        if param == "tree_formats" and current is not None:
            return 1 + sum(values.index(f) if f in values else len(values) for f in current)
        return values.index(current) if current in values else len(values)

    def complexity_of(self, spec: UnitSpec) -> int:
        """The sum of ``spec``'s complexities over the searched parameters."""
        return sum(self.complexity(param, spec) for param in self.search)

    def climb(self, spec: UnitSpec, sweeps: int,
              progress: Callable[[str], None] | None) -> UnitSpec:
        """Up to ``sweeps`` sweeps from ``spec``, with joint moves where a sweep stalls."""
        for _ in range(sweeps):
            spec, improved = self.sweep(spec)
            if self.score(spec) < self.target.size and not improved:
                spec, improved = self.pair_moves(spec)
            if progress:
                progress(f"sweep: {self.score(spec)} of {self.target.size}")
            if not improved or self.score(spec) == self.target.size:
                break
        return spec

    def sweep(self, spec: UnitSpec) -> tuple[UnitSpec, bool]:
        """One pass over every parameter, each value tried with the others held."""
        improved = False
        for param in ORDER:
            if param not in self.search:
                continue
            here = self.score(spec)
            for value in self.values(param, spec):
                cand = candidate(spec, param, value)
                if cand is None or cand == spec:
                    continue
                s = self.score(cand)
                if s > here or (s == here and self.complexity(param, cand)
                                < self.complexity(param, spec)):
                    spec, here, improved = cand, s, True
        return spec, improved

    def pair_moves(self, spec: UnitSpec) -> tuple[UnitSpec, bool]:
        """Joint moves of F (a window around its value) with each parameter that can
        compensate for it; coordinate sweeps alone stall where two of them trade off."""
        here = self.score(spec)
        f = spec.frac_bits if spec.frac_bits is not None else 24
        window = [v for v in self.search.get("frac_bits", [])
                  if v is not None and abs(v - f) <= 3]
        improved = False
        # e_zero too: where zeros lead a step, the LSB is 2**(e_zero - F).
        for param in ("upcast", "product", "align", "acc_format", "c_mode", "schedule", "e_zero"):
            for value in self.search.get(param, []):
                for fb in window:
                    cand = candidate(spec, param, value)
                    cand = cand and candidate(cand, "frac_bits", fb)
                    if cand is not None and self.score(cand) > here:
                        spec, here, improved = cand, self.score(cand), True
        # Pairs that trade off without F: the accumulator's width against its rounding, and an
        # operand upcast against the parameters that move exponents.
        for p1, p2 in (("acc_format", "acc_rounding"), ("upcast", "align"), ("upcast", "product"),
                       ("upcast", "schedule"), ("upcast", "acc_rounding"),
                       ("upcast", "c_mode"), ("align", "acc_rounding")):
            for v1 in self.search.get(p1, []):
                for v2 in self.search.get(p2, []):
                    cand = candidate(spec, p1, v1)
                    cand = cand and candidate(cand, p2, v2)
                    if cand is not None and self.score(cand) > here:
                        spec, here, improved = cand, self.score(cand), True
        return spec, improved

    def evidence(self, best: UnitSpec, k: int
                 ) -> tuple[dict[str, dict[str, int]], dict[str, list[str]]]:
        """Each value of each parameter scored with the others as fitted, and the values
        that the observed outputs cannot tell apart from the fitted one."""
        evidence: dict[str, dict[str, int]] = {}
        unseparated: dict[str, list[str]] = {}
        names = {v: n for n, v in schedules(k).items()}
        self.score(best)
        for param in ORDER:
            if param not in self.search:
                continue
            scores = {}
            for value in self.values(param, best):
                cand = candidate(best, param, value)
                if cand is not None:
                    name = (names.get(value, "custom") if param == "schedule"
                            else label(param, value))
                    scores[name] = self.score(cand)
                    if cand != best and np.array_equal(self.cache[cand], self.cache[best]):
                        unseparated.setdefault(param, []).append(name)
            if scores:                      # a tree's levels: none without a tree
                evidence[param] = scores
        return evidence, unseparated
