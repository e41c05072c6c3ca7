"""Fit a unit spec to observed outputs: the simplest spec that reproduces every bit.

:func:`fit` searches the ``UnitSpec`` space in a structured way rather than by brute force:
coordinate descent over the parameters (step schedule, fraction bits F, alignment rounding,
product normalisation, operand upcast, where C enters, accumulator format and rounding,
zero-term exponent, a reduction tree's format per level, the sign of an exact zero, and the
NaN code of D where the outputs hold NaNs of another code), from a few starting points,
scoring each candidate by the number of observed outputs it reproduces bit for bit with the
fast engine (:mod:`mxsim.probe.search`). Every parameter value is tried with the others held
at their current best, so each sweep is linear in the number of values; when a sweep stalls
short of every output, joint moves get it out of the local optimum: F with the parameters that
can compensate for it (upcast, product exponent, alignment, accumulator, C mode, schedule), the
accumulator's width with its rounding, and the operand upcast with the parameters that move
exponents; sweeps repeat until nothing improves. Ties go to the simpler value (each parameter
lists its values simplest first), so an unobservable parameter keeps its simplest setting.

The result is checked against every observed output before it is returned: either it
reproduces all of them (``Fit.exact``) or the fit says it cannot explain the data and lists the
outputs no candidate reproduced. It never returns a spec it did not check. An exact fit is
output-equivalent on the data, not necessarily the unit that produced it: ``Fit.unseparated``
lists the parameters whose other values reproduce the very same outputs (the data cannot tell
them apart), and the report prints them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .. import formats
from ..engine import fast
from ..errors import MxsimError, UnitError
from ..spec import UnitSpec, from_dict
from ..vectors import VectorSet
from .misses import miss_summaries, ulp_bins
from .search import ORDER as _ORDER
from .search import Search, by_value, canonical, schedules
from .search import candidate as _candidate
from .search import label as _label

__all__ = ["Fit", "fit", "schedules", "DEFAULT_SEARCH", "SEARCHED", "hypotheses_of", "default_k",
           "default_start", "canonical"]


#: Accumulator formats, simplest first (also each level's of a reduction tree).
_ACC_FORMATS = ["fp32", "e8m13", "fp16", "bf16", *[f"e8m{m}" for m in range(22, 9, -1)
                                                  if m != 13]]

#: The values each parameter may take, simplest first (a value's index is its complexity).
DEFAULT_SEARCH: dict[str, list[Any]] = {
    "frac_bits": [None, *range(0, 41)],
    "align": ["rz", "rd", "rne", "rz-jam"],
    "product": ["raw", "normalized"],
    "upcast": [None, "fp16"],
    "c_mode": ["step", "after"],
    "acc_format": list(_ACC_FORMATS),
    "acc_rounding": ["rz", "rne", "rd", "ru"],
    # MMA-Sim's e_zero by architecture (FP32 out -133/-132/-131, FP16 out -21/-20/-19) come
    # after the earlier values, so that a fit where e_zero ties reports what it did before.
    "e_zero": [-133, -21, -139, -127, -149, -200, -132, -20, -131, -19],
    "c_rounding": ["rne", "rz"],
    # Foreign MX units: NaN/Inf handling and overflow (searched only where the data can show
    # them, see _prune), GST groups and reduction trees.
    "specials": ["ieee", "none"],
    "overflow": ["inf", "saturate", "ieee"],
    "group": [None, 32, 16, 8],
    "reduce": ["chain", "tree"],
    # The NaN code of D: the default (all-ones payload), then the NaN codes the observed
    # outputs hold, most frequent first (added by _prune, which drops the parameter where the
    # outputs hold no other NaN code).
    "nan_code": [None],
    # The sign of an exact zero; "c" (C passes through) comes with exact terms in one step.
    "zero_sign": ["positive", "ieee", "c"],
    # A reduction tree's format per level: the accumulator's at every level (null), or one
    # level at a time changed to each of these (mxsim.probe.search tries them level by level).
    "tree_formats": [None, *_ACC_FORMATS],
}

#: The parameters the search sets (the rest come from the start spec).
SEARCHED: tuple[str, ...] = tuple(_ORDER)


@dataclass
class Fit:
    """What :func:`fit` found."""
    spec: UnitSpec
    total: int                                  #: observed outputs
    equal: int                                  #: outputs the spec reproduces bit for bit
    evidence: dict[str, dict[str, int]] = field(default_factory=dict)
    unexplained: list[tuple[int, ...]] = field(default_factory=list)   #: first mismatches
    evaluated: int = 0                          #: candidate specs scored
    #: parameter -> its other values that reproduce exactly the outputs the fitted spec does
    #: (the others as fitted): what the data cannot separate from the fitted value.
    unseparated: dict[str, list[str]] = field(default_factory=dict)
    #: the first outputs the fitted spec misses: index, observed and fitted codes, ulps and
    #: a summary of the dot's inputs (see :func:`miss_summaries`)
    misses: list[dict[str, Any]] = field(default_factory=list)
    #: how far the misses are, in ulps of d_format: bin label -> count (see :func:`ulp_bins`)
    ulps: dict[str, int] = field(default_factory=dict)
    #: the probe set's hypotheses (``meta['hypotheses']``): name -> outputs each reproduces
    hypotheses: dict[str, int] = field(default_factory=dict)
    #: what a caller learnt beyond these outputs (other modes of a design), for the report
    notes: list[str] = field(default_factory=list)

    def alternatives(self) -> list[tuple[str, UnitSpec]]:
        """``(parameter, spec)`` for each value the data cannot separate from the fitted one
        (:attr:`unseparated`, in order): the fitted spec with that value, which reproduces the
        very same outputs."""
        out = []
        for param, labels in self.unseparated.items():
            for text in labels:
                cand = _candidate(self.spec, param, _parse(param, text, self.spec.k))
                if cand is not None:
                    out.append((param, cand))
        return out

    def adopt(self, param: str, spec: UnitSpec, note: str) -> None:
        """Take ``spec``, one of :meth:`alternatives` (its ``param`` changed), as the fitted
        spec because of what ``note`` says; the value it replaces becomes unseparated."""
        old, new = _value_name(param, self.spec), _value_name(param, spec)
        self.unseparated[param] = [old, *(v for v in self.unseparated.get(param, [])
                                          if v != new)]
        self.spec = spec
        self.notes.append(note)

    @property
    def picked(self) -> list[str]:
        """The hypotheses that reproduce every output (one, for a probe set that separates
        them; none when the unit is none of them)."""
        return [name for name, equal in self.hypotheses.items() if equal == self.total]

    @property
    def exact(self) -> bool:
        return self.equal == self.total

    def report(self) -> str:
        lines = [f"fitted spec reproduces {self.equal} of {self.total} outputs"
                 + (" (every bit)" if self.exact else " -- cannot explain the rest"),
                 f"candidates scored: {self.evaluated}", "evidence (outputs reproduced by "
                                                          "each value, the others as fitted):"]
        lines[:0] = self._hypotheses_report()
        for param, scores in self.evidence.items():
            best = max(scores.values())
            shown = sorted(scores.items(), key=lambda kv: -kv[1])[:4]
            chosen = _value_name(param, self.spec)
            lines.append(f"  {param:13} = {chosen:18} " + ", ".join(
                f"{v}: {s}" + ("*" if s == best else "") for v, s in shown))
        lines += self.notes
        if self.unseparated:
            lines.append("the data cannot separate (these values reproduce the same outputs):")
            for param, values in self.unseparated.items():
                lines.append(f"  {param:13} = {_value_name(param, self.spec)} or "
                             + ", ".join(values))
        else:
            lines.append("the data separates every parameter searched (no other value "
                         "reproduces the same outputs)")
        if not self.exact:
            lines.append(f"  first outputs no candidate reproduces: {self.unexplained[:10]}")
            lines += self._misses_report()
        return "\n".join(lines)

    def _hypotheses_report(self) -> list[str]:
        """Each hypothesis of the probe set and how many outputs it reproduces."""
        if not self.hypotheses:
            return []
        picked = self.picked
        lines = [f"hypotheses of the probe set: {', '.join(picked)} reproduce(s) every output"
                 if picked else "hypotheses of the probe set: none reproduces every output "
                                "(the fitted spec below is the search's)"]
        for name, equal in sorted(self.hypotheses.items(), key=lambda kv: -kv[1]):
            lines.append(f"  {equal:8} of {self.total}  {name}")
        return lines

    def _misses_report(self) -> list[str]:
        """The closest spec, its misses and their ulp histogram."""
        d_format = self.spec.d_format
        lines = [f"closest spec: {_spec_line(self.spec)}",
                 f"its {self.total - self.equal} misses, in ulps of {d_format} "
                 f"(|observed - fitted|; 0: the sign of a zero):"]
        width = max(self.ulps.values(), default=1)
        for label, count in self.ulps.items():
            bar = "#" * max(1, round(40 * count / width)) if count else ""
            lines.append(f"  {label:>13} ulps {count:8}  {bar}")
        lines.append("first misses:")
        for m in self.misses:
            lines.append(f"  dot {m['index']}{' [' + m['family'] + ']' if m['family'] else ''}"
                         f": observed {m['observed']}, fitted {m['fitted']}, {m['ulps']} ulps;"
                         f" {m['inputs']}")
        return lines


def _parse(param: str, text: str, k: int | None) -> Any:
    """The value of ``param`` a report writes as ``text`` (:func:`_value_name`)."""
    if param == "schedule":
        return schedules(k or 1).get(text)
    if text == "None":
        return None
    if param == "nan_code":
        return int(text, 16)
    if param == "tree_formats":
        return tuple(text.split("|"))
    if param in ("frac_bits", "e_zero", "group"):
        return int(text)
    return text


def _value_name(param: str, spec: UnitSpec) -> str:
    if param == "schedule":
        for name, sched in schedules(spec.k).items():
            if sched == spec.schedule:
                return name
        return "custom"
    return _label(param, getattr(spec, param))


def fit(observed: VectorSet, *, k: int, start: UnitSpec | None = None,
        search: dict[str, list[Any]] | None = None, sweeps: int = 4,
        progress: Callable[[str], None] | None = None, pinned: Iterable[str] = (),
        admissible: Callable[[UnitSpec], bool] | None = None) -> Fit:
    """The simplest spec (instruction length ``k``) that reproduces ``observed.d`` bit for bit.

    ``observed`` holds inputs and the outputs to explain (``d`` in FP32, FP16 or BF16). With
    ``meta['compare'] = "value"`` (a design whose results carry no zero sign or NaN code) the
    outputs are compared as values: +0 equals -0 and NaN equals NaN. ``start`` fixes
    everything the search does not cover (formats, scales, promotion); by default it is a
    one-step, truncating spec for the observed formats (:func:`default_start`). The fields in
    ``pinned`` keep ``start``'s values (a design's mode, set by its ports); ``admissible``
    refuses candidates (a port map that cannot run them). Raises UnitError when the set has no
    ``d`` or its K is not a multiple of ``k``.
    """
    _check_fit_args(observed, k)
    start = start or default_start(observed, k)
    pins = {name: getattr(start, name) for name in pinned}
    search = _prune(dict(DEFAULT_SEARCH), observed, start) if search is None else dict(search)
    search.setdefault("schedule", list(schedules(k).values()))
    for name in pins:
        search.pop(name, None)
    s = Search(observed, search, pins, admissible)
    hyps = hypotheses_of(observed, k)
    scores = {name: s.score(spec) for name, spec in hyps.items()}
    # A hypothesis that reproduces every output is the first start (the search then moves
    # only to simpler specs that reproduce the very same outputs).
    first = [hyps[n] for n, v in sorted(scores.items(), key=lambda kv: -kv[1])
             if v == s.target.size][:1]
    best: UnitSpec | None = None
    for spec in first + _starts(s, start):
        spec = s.pin(spec)
        if spec is None:
            continue
        spec = s.climb(spec, sweeps, progress)
        if best is None or s.score(spec) > s.score(best):
            best = spec
        if s.score(best) == s.target.size:
            break
    assert best is not None
    if s.score(best) < s.target.size:
        # Nothing explains every output: the closest spec is the best of every one scored.
        best = max(s.cache, key=lambda c: (s.score(c), -s.complexity_of(c)))
    evidence, unseparated = s.evidence(best, k)
    ok = s.cache[best] if best in s.cache else np.zeros(s.target.shape, bool)
    final_equal = s.score(best)                # checked against every observed output
    bad = [tuple(int(i) for i in np.unravel_index(j, observed.d.shape))
           for j in np.flatnonzero(~ok)[:20]]
    misses, ulps = [], {}
    if final_equal < s.target.size:
        fitted = _outputs(best, observed)
        misses = miss_summaries(observed, fitted, bad[:5])
        ulps = ulp_bins(observed.d_format, observed.d.reshape(-1)[~ok], fitted.reshape(-1)[~ok])
    return Fit(spec=replace(best, name="fitted", provenance=f"mxsim fit on {s.target.size} "
                                                             f"outputs ({observed.producer})"),
               total=int(s.target.size), equal=final_equal, evidence=evidence,
               unexplained=bad, evaluated=len(s.cache), unseparated=unseparated,
               misses=misses, ulps=ulps, hypotheses=scores)


def default_k(observed: VectorSet) -> int:
    """The instruction k a set names (a Blackwell probe set's ``instruction_k``), else 32."""
    k = observed.extra.get("instruction_k", 32)
    return k if isinstance(k, int) and not isinstance(k, bool) and k >= 1 else 32


def hypotheses_of(observed: VectorSet, k: int) -> dict[str, UnitSpec]:
    """The unit specs a probe set carries in ``meta['hypotheses']`` (name -> spec), those of
    instruction length ``k`` and the set's formats; unreadable entries are skipped."""
    raw = observed.extra.get("hypotheses")
    out: dict[str, UnitSpec] = {}
    if not isinstance(raw, dict):
        return out
    for name, data in raw.items():
        try:
            spec = from_dict(data, source=f"hypothesis {name}")
            spec.check_vectors(observed)
        except (MxsimError, TypeError, ValueError):
            continue
        if spec.k == k:
            out[str(name)] = spec
    return out


def _outputs(spec: UnitSpec, observed: VectorSet) -> np.ndarray:
    """``spec``'s outputs on the observed inputs (NaN codes where it cannot run them)."""
    try:
        return fast.dot(spec, observed)
    except (MxsimError, ValueError):
        return np.full(observed.d.shape, formats.get(observed.d_format).code_of_nan,
                       observed.d.dtype)


def _spec_line(spec: UnitSpec) -> str:
    """The fitted fields of a spec, on one line."""
    names = ("k", "block", "group", "reduce", "frac_bits", "align", "product", "upcast",
             "c_mode", "acc_format", "acc_rounding", "overflow", "specials", "e_zero",
             "c_rounding", "nan_code", "d_format")
    sched = _value_name("schedule", spec) if spec.k else "none"
    return f"schedule {sched}, " + ", ".join(
        f"{n} {'none' if getattr(spec, n) is None else _value_name(n, spec)}" for n in names)


def _prune(search: dict[str, list[Any]], observed: VectorSet,
           start: UnitSpec) -> dict[str, list[Any]]:
    """The default search without the parameters these data cannot show: ``specials`` where no
    input code is NaN or Inf, ``overflow`` where the starting spec's outputs are the same
    under each rule, GST ``group``/``reduce``/``tree_formats`` without E8M0/UE4M3 block
    scales, ``upcast`` for fp16/bf16/tf32 operands, ``zero_sign`` and ``nan_code`` where the
    outputs are compared as values, ``zero_sign`` where no C is -0 and the starting spec's
    outputs are the same under positive and ieee zeros (C passing through differs from them
    only where C is -0), and ``nan_code`` where every NaN output has the starting
    spec's code (else its values are the default and the NaN codes observed, at most
    :data:`_NAN_CODES` of them, most frequent first)."""
    def has_special(fmt_name: str, codes: np.ndarray | None) -> bool:
        if codes is None:
            return False
        cls = formats.get(fmt_name).classify(codes)
        return bool(((cls == formats.Class.NAN) | (cls == formats.Class.INF)).any())

    block_scales = observed.scale_format in ("e8m0", "ue4m3")
    if not (has_special(observed.a_format, observed.a)
            or has_special(observed.b_format, observed.b)
            or has_special(observed.c_format, observed.c)
            or (block_scales and (has_special(observed.scale_format, observed.a_scale)
                                  or has_special(observed.scale_format, observed.b_scale)))):
        search.pop("specials", None)
    if "overflow" in search:
        outs = {_outputs(replace(start, overflow=o), observed).tobytes()
                for o in search["overflow"]}
        if len(outs) == 1:
            search.pop("overflow")
    if not block_scales:
        search.pop("group", None)
        search.pop("reduce", None)
        search.pop("tree_formats", None)
    if by_value(observed):
        search.pop("zero_sign", None)       # +0 and -0 are one value, every NaN another
        search.pop("nan_code", None)
    elif "zero_sign" in search and not _negative_zero_c(observed):
        outs = {_outputs(replace(start, zero_sign=z), observed).tobytes()
                for z in ("positive", "ieee")}
        if len(outs) == 1:
            search.pop("zero_sign")
    if not {observed.a_format, observed.b_format} <= set(formats.ELEMENT_FORMATS):
        search.pop("upcast", None)          # fp16/bf16/tf32 operands reach the unit as they are
    if "nan_code" in search:
        codes = _nan_codes(observed)
        if all(c == start.d_nan for c in codes):
            search.pop("nan_code")
        else:
            search["nan_code"] = list(dict.fromkeys([*search["nan_code"], *codes]))
    return search


def _negative_zero_c(observed: VectorSet) -> bool:
    """Whether some C of ``observed`` is -0."""
    if observed.c is None:
        return False
    fmt = formats.get(observed.c_format)
    return bool(np.any(observed.c == np.asarray(1 << fmt.sign_shift, observed.c.dtype)))


#: The most NaN codes of the observed outputs the search tries (a design that passes input
#: payloads through gives many; the spec has one NaN code, so the most frequent ones matter).
_NAN_CODES = 4


def _nan_codes(observed: VectorSet) -> list[int]:
    """The distinct NaN codes of ``observed.d``, most frequent first (ties: lower code first),
    at most :data:`_NAN_CODES`."""
    d = observed.d.reshape(-1)
    nan = d[formats.get(observed.d_format).classify(d) == formats.Class.NAN]
    codes, counts = np.unique(nan, return_counts=True)
    order = np.argsort(-counts, kind="stable")[:_NAN_CODES]
    return [int(c) for c in codes[order]]


def _check_fit_args(observed: VectorSet, k: Any) -> None:
    """Raise UnitError unless ``observed`` has outputs and ``k`` divides its K."""
    if observed.d is None:
        raise UnitError("fit needs observed outputs: the set has no 'd'")
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= observed.k:
        raise UnitError(f"The instruction k must be an integer from 1 to the set's K "
                        f"({observed.k}), not {k!r}")
    if observed.k % k:
        raise UnitError(f"K ({observed.k}) must be a multiple of the instruction k ({k})")


def default_start(observed: VectorSet, k: int) -> UnitSpec:
    """A one-step, truncating spec (F = 24) for the observed formats, rounding to FP32 by RZ
    or to FP16 by RNE (as MMA-Sim's T-FDPA does)."""
    f16 = observed.d_format == "fp16"
    return UnitSpec(
        name="fitted", instruction="fitted by mxsim fit", a_format=observed.a_format,
        b_format=observed.b_format, scale_format=observed.scale_format, block=observed.block,
        k=k, frac_bits=24, acc_format="fp16" if f16 else "fp32", d_format=observed.d_format,
        acc_rounding="rne" if f16 else "rz", e_zero=-21 if f16 else -133)


def _starts(s: Search, base: UnitSpec) -> list[UnitSpec]:
    """Starting points: the two published F values and the default, then upcast ones."""
    f16 = s.observed.d_format == "fp16"
    starts = [base] + [c for c in (
        _candidate(_candidate(base, "frac_bits", 13), "acc_format", "fp16" if f16 else "e8m13"),
        _candidate(base, "frac_bits", 25)) if c is not None]
    # An operand upcast moves exponents everywhere at once; when the plain starts do not
    # explain everything, start again from upcast ones (tried only while nothing is exact).
    for up in s.search.get("upcast", []):
        if up is not None:
            starts += [c for c in (_candidate(st, "upcast", up) for st in starts[:3])
                       if c is not None]
    return starts

