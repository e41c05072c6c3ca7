"""Fit a unit spec to observed outputs: the simplest spec that reproduces every bit.

:func:`fit` searches the ``UnitSpec`` space in a structured way rather than by brute force:
coordinate descent over the parameters (step schedule, fraction bits F, alignment rounding,
product normalisation, operand upcast, where C enters, accumulator format and rounding,
zero-term exponent, and the NaN code of D where the outputs hold NaNs of another code), from a
few starting points, scoring each candidate by the number of observed outputs it reproduces bit
for bit with the fast engine. Every parameter value is tried with the others held at their
current best, so each sweep is linear in the number of values; when a sweep stalls short of
every output, joint moves get it out of the local optimum: F with the parameters that can
compensate for it (upcast, product exponent, alignment, accumulator, C mode, schedule), the
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

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .. import formats
from ..engine import fast
from ..errors import MxsimError, UnitError
from ..spec import SpecError, UnitSpec, from_dict
from ..vectors import VectorSet

__all__ = ["Fit", "fit", "schedules", "DEFAULT_SEARCH", "SEARCHED", "hypotheses_of", "default_k"]


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


#: The values each parameter may take, simplest first (a value's index is its complexity).
DEFAULT_SEARCH: dict[str, list[Any]] = {
    "frac_bits": [None, *range(0, 41)],
    "align": ["rz", "rd", "rne", "rz-jam"],
    "product": ["raw", "normalized"],
    "upcast": [None, "fp16"],
    "c_mode": ["step", "after"],
    "acc_format": ["fp32", "e8m13", "fp16", "bf16", *[f"e8m{m}" for m in range(22, 9, -1)
                                                       if m != 13]],
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
}

#: Order of the coordinate sweeps: the parameters that move the most bits first.
_ORDER = ["schedule", "frac_bits", "acc_format", "acc_rounding", "align", "c_mode", "product",
          "upcast", "e_zero", "c_rounding", "specials", "overflow", "group", "reduce",
          "nan_code"]
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


def _value_name(param: str, spec: UnitSpec) -> str:
    if param == "schedule":
        for name, sched in schedules(spec.k).items():
            if sched == spec.schedule:
                return name
        return "custom"
    return _label(param, getattr(spec, param))


def _label(param: str, value: Any) -> str:
    """How reports write ``value`` of ``param`` (a NaN code in hex, as codes are written)."""
    if param == "nan_code" and value is not None:
        return f"{value:#x}"
    return str(getattr(value, "value", value))


def _candidate(spec: UnitSpec, param: str, value: Any) -> UnitSpec | None:
    try:
        if param == "schedule":
            return replace(spec, schedule=value)
        if param == "frac_bits" and value is None:
            return replace(spec, frac_bits=None)
        if param == "reduce" and value == "tree" and spec.reduce != "tree":
            # A tree adds exact group terms, C after: one joint move.
            return replace(spec, reduce="tree", group=spec.group or spec.block, frac_bits=None,
                           schedule=None, c_mode="after")
        return replace(spec, **{param: value})
    except (SpecError, ValueError):
        return None                      # a combination the spec space does not allow


def fit(observed: VectorSet, *, k: int, start: UnitSpec | None = None,
        search: dict[str, list[Any]] | None = None, sweeps: int = 4,
        progress: Callable[[str], None] | None = None) -> Fit:
    """The simplest spec (instruction length ``k``) that reproduces ``observed.d`` bit for bit.

    ``observed`` holds inputs and the outputs to explain (``d`` in FP32 or FP16). ``start``
    fixes everything the search does not cover (formats, scales, promotion); by default it is
    a one-step, truncating spec for the observed formats. Raises UnitError when the set has no
    ``d`` or its K is not a multiple of ``k``.
    """
    _check_fit_args(observed, k)
    start = start or _default_start(observed, k)
    search = _prune(dict(DEFAULT_SEARCH), observed, start) if search is None else dict(search)
    search.setdefault("schedule", list(schedules(k).values()))
    s = _Search(observed, search)
    hyps = hypotheses_of(observed, k)
    scores = {name: s.score(spec) for name, spec in hyps.items()}
    # A hypothesis that reproduces every output is the first start (the search then moves
    # only to simpler specs that reproduce the very same outputs).
    first = [hyps[n] for n, v in sorted(scores.items(), key=lambda kv: -kv[1])
             if v == s.target.size][:1]
    best: UnitSpec | None = None
    for spec in first + _starts(s, start):
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


#: Bins of the ulp histogram: (label, smallest, largest) distances in d_format's codes.
_ULP_BINS = [("0", 0, 0), ("1", 1, 1), ("2", 2, 2), ("3-4", 3, 4), ("5-16", 5, 16),
             ("17-256", 17, 256), ("257-2^16", 257, 1 << 16), ("2^16-2^24", (1 << 16) + 1,
                                                               1 << 24),
             (">2^24", (1 << 24) + 1, 1 << 62)]


def ulp_bins(d_format: str, observed: np.ndarray, fitted: np.ndarray) -> dict[str, int]:
    """How many pairs of codes of ``d_format`` lie how many ulps apart, by bin.

    The distance counts the representable values between them (±0 are one value, so +0
    against -0 is 0 ulps; the largest finite value and Inf are 1 apart); a pair where one side
    is NaN and the other is not counts under ``NaN``, and two NaNs of different codes (a unit
    whose NaN is not the fitted spec's) under ``NaN code``. So each pair of different codes
    counts in exactly one bin."""
    fmt = formats.get(d_format)

    def key(codes: np.ndarray) -> np.ndarray:
        c = codes.astype(np.int64)
        mag = c & ((1 << fmt.sign_shift) - 1)
        return np.where(c >> fmt.sign_shift, -mag, mag)

    nan_o = fmt.classify(observed) == formats.Class.NAN
    nan_f = fmt.classify(fitted) == formats.Class.NAN
    dist = np.abs(key(observed) - key(fitted))
    live = ~(nan_o | nan_f)
    out = {label: int(((dist >= lo) & (dist <= hi) & live).sum()) for label, lo, hi in _ULP_BINS}
    out["NaN"] = int((nan_o != nan_f).sum())
    out["NaN code"] = int((nan_o & nan_f & (observed != fitted)).sum())
    return out


def miss_summaries(observed: VectorSet, fitted: np.ndarray,
                   indices: list[tuple[int, ...]]) -> list[dict[str, Any]]:
    """One line of facts per missed output: its index and family, the observed and fitted
    codes (with values), their distance in ulps and what the dot's inputs hold."""
    fmt = formats.get(observed.d_format)
    out = []
    for idx in indices:
        o, f = int(observed.d[idx]), int(fitted[idx])
        ulps = ulp_bins(observed.d_format, np.array([o], observed.d.dtype),
                        np.array([f], observed.d.dtype))
        out.append({"index": idx, "family": _family(observed, idx),
                    "observed": f"{o:#x} ({_value(fmt, o)})",
                    "fitted": f"{f:#x} ({_value(fmt, f)})",
                    # Equal codes (where no spec could run, the fitted outputs are NaN
                    # codes) are 0 ulps apart; any two different codes fall in one bin.
                    "ulps": next((label for label, n in ulps.items() if n), "0"),
                    "inputs": _inputs_summary(observed, idx)})
    return out


def _family(vs: VectorSet, idx: tuple[int, ...]) -> str:
    """The family of the dot at ``idx`` where the set's ``families`` provenance names it (a
    list of one string per batch entry, as the generators write it), else blank: provenance
    is free-form, so any other value (a number, a table, nested lists) names none."""
    families = vs.extra.get("families")
    if len(idx) != 3 or not isinstance(families, list | tuple) or idx[0] >= len(families):
        return ""
    family = families[idx[0]]
    return family if isinstance(family, str) else ""


def _value(fmt: formats.Format, code: int) -> str:
    return f"{float(fmt.decode(np.array([code], fmt.code_dtype))[0]):.9g}"


def _inputs_summary(vs: VectorSet, idx: tuple[int, ...]) -> str:
    """What dot ``idx``'s inputs hold: non-zero and NaN/Inf element codes, scale codes, C."""
    *bt, i, j = idx
    bt = tuple(bt)
    parts = []
    for name, codes in (("A", vs.a[bt + (i,)]), ("B", vs.b[bt + (slice(None), j)])):
        f = formats.get(vs.a_format if name == "A" else vs.b_format)
        cls = f.classify(codes)
        special = int(((cls == formats.Class.NAN) | (cls == formats.Class.INF)).sum())
        parts.append(f"{name} {int((f.decode(codes) != 0).sum())} of {codes.size} non-zero"
                     + (f", {special} NaN/Inf codes" if special else ""))
    if vs.scale_format in ("e8m0", "ue4m3"):
        sa, sb = vs.a_scale[bt + (i,)], vs.b_scale[bt + (slice(None), j)]
        parts.append("scales A " + " ".join(f"{int(x):02x}" for x in sa[:8])
                     + ", B " + " ".join(f"{int(x):02x}" for x in sb[:8]))
    if vs.c is not None:
        c = int(vs.c[idx])
        parts.append(f"C {c:#x} ({_value(formats.get(vs.c_format), c)})")
    return "; ".join(parts)


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
    under each rule, GST ``group``/``reduce`` without E8M0/UE4M3 block scales, ``upcast``
    for fp16/bf16/tf32 operands, and ``nan_code`` where every NaN output has the starting
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
    if not {observed.a_format, observed.b_format} <= set(formats.ELEMENT_FORMATS):
        search.pop("upcast", None)          # fp16/bf16/tf32 operands reach the unit as they are
    if "nan_code" in search:
        codes = _nan_codes(observed)
        if all(c == start.d_nan for c in codes):
            search.pop("nan_code")
        else:
            search["nan_code"] = list(dict.fromkeys([*search["nan_code"], *codes]))
    return search


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


def _default_start(observed: VectorSet, k: int) -> UnitSpec:
    """A one-step, truncating spec (F = 24) for the observed formats, rounding to FP32 by RZ
    or to FP16 by RNE (as MMA-Sim's T-FDPA does)."""
    f16 = observed.d_format == "fp16"
    return UnitSpec(
        name="fitted", instruction="fitted by mxsim fit", a_format=observed.a_format,
        b_format=observed.b_format, scale_format=observed.scale_format, block=observed.block,
        k=k, frac_bits=24, acc_format="fp16" if f16 else "fp32", d_format=observed.d_format,
        acc_rounding="rne" if f16 else "rz", e_zero=-21 if f16 else -133)


def _starts(s: _Search, base: UnitSpec) -> list[UnitSpec]:
    """Starting points: the two published F values and the default, then upcast ones."""
    f16 = s.observed.d_format == "fp16"
    starts = [base, replace(base, frac_bits=13, acc_format="fp16" if f16 else "e8m13"),
              replace(base, frac_bits=25)]
    # An operand upcast moves exponents everywhere at once; when the plain starts do not
    # explain everything, start again from upcast ones (tried only while nothing is exact).
    for up in s.search.get("upcast", []):
        if up is not None:
            starts += [c for c in (_candidate(st, "upcast", up) for st in starts[:3])
                       if c is not None]
    return starts


class _Search:
    """The state of one fit: the observed set, the search space and every spec scored."""

    def __init__(self, observed: VectorSet, search: dict[str, list[Any]]):
        self.observed = observed
        self.search = search
        self.target = observed.d.reshape(-1)
        self.cache: dict[UnitSpec, np.ndarray] = {}

    def score(self, spec: UnitSpec) -> int:
        """How many observed outputs ``spec`` reproduces (0 for a spec that cannot run)."""
        if spec not in self.cache:
            try:
                self.cache[spec] = fast.dot(spec, self.observed).reshape(-1) == self.target
            except (MxsimError, ValueError):
                self.cache[spec] = np.zeros(self.target.shape, bool)
        return int(self.cache[spec].sum())

    def complexity(self, param: str, spec: UnitSpec) -> int:
        """The position of ``spec``'s value of ``param`` in the search (earlier: simpler)."""
        values = self.search.get(param, [])
        current = spec.schedule if param == "schedule" else getattr(spec, param)
        current = getattr(current, "value", current)
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
        for param in _ORDER:
            if param not in self.search:
                continue
            here = self.score(spec)
            for value in self.search[param]:
                cand = _candidate(spec, param, value)
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
                    cand = _candidate(spec, param, value)
                    cand = cand and _candidate(cand, "frac_bits", fb)
                    if cand is not None and self.score(cand) > here:
                        spec, here, improved = cand, self.score(cand), True
        # Pairs that trade off without F: the accumulator's width against its rounding, and an
        # operand upcast against the parameters that move exponents.
        for p1, p2 in (("acc_format", "acc_rounding"), ("upcast", "align"), ("upcast", "product"),
                       ("upcast", "schedule"), ("upcast", "acc_rounding"),
                       ("upcast", "c_mode"), ("align", "acc_rounding")):
            for v1 in self.search.get(p1, []):
                for v2 in self.search.get(p2, []):
                    cand = _candidate(spec, p1, v1)
                    cand = cand and _candidate(cand, p2, v2)
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
        for param in _ORDER:
            if param not in self.search:
                continue
            scores = {}
            for value in self.search[param]:
                cand = _candidate(best, param, value)
                if cand is not None:
                    label = (names.get(value, "custom") if param == "schedule"
                             else _label(param, value))
                    scores[label] = self.score(cand)
                    if cand != best and np.array_equal(self.cache[cand], self.cache[best]):
                        unseparated.setdefault(param, []).append(label)
            evidence[param] = scores
        return evidence, unseparated
