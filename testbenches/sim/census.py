"""The census of a verification run: every mismatch of every chunk, classified and counted.

:func:`observe` reads one backend :class:`~testbenches.sim.backend.Run` whole (the model's
result of every dot, the design's, C, and the run's mismatch list) and makes one record per
mismatch, each with its class (:class:`ClassKey`) and the vocabulary of a waiver predicate
(:mod:`testbenches.sim.waive`). The counts are the true ones: values are compared again from
the full want/got arrays (never from a capped list), and a capped list's closing entry is one
record of the weight it stands for. A class is keyed by

- ``kind``: ``value`` (a result's value), ``flags`` (``[status]`` flags), ``missing`` (results
  that never came), ``cycle`` (timing) or ``envelope`` (a conformance check's verdict);
- ``family``: for results in an IEEE format (codes of the spec's ``d_format``): ``sign of
  zero`` (both zeros), ``NaN code`` (both NaN), ``sign differs`` (want and got differ in the
  sign bit alone), ``finite off by N ulp`` (both finite), ``class differs: want X got Y``
  (X, Y among finite, Inf, NaN; a zero is finite); for a fixed-point result the same families
  by value (no sign of zero, no NaN code); ``status flags differ``, ``result missing``,
  ``cycle``, ``outside the dot-product envelope``;
- the format pair (``a_format`` x ``b_format``);
- ``detail``: the ulp bucket of ``finite off by N ulp`` (:data:`BUCKETS`: 1, 2-3, 4-15, 16+;
  the distance counted exactly in codes of the result format, or for a fixed-point result the
  value difference in units of its LSB at the model's value, rounded up), the two flag sets,
  the timing rule, or the envelope.

:class:`Census` adds the records of every chunk up, per class and per waiver, and keeps, for
each, the chunk and dots where it first showed: :mod:`testbenches.unit.failing` writes the
failing sets from them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from mxsim import formats
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

from .backend import Mismatch, MismatchKind, Run
from .waive import ATTRIBUTES, Num, Waiver

__all__ = ["ClassKey", "Records", "Entry", "Census", "observe", "bucket", "canonical",
           "BUCKETS", "OFF_BY", "KEPT_DOTS", "KINDS"]

#: The ulp-distance buckets of ``finite off by N ulp``: (least, label).
BUCKETS = ((1, "1"), (2, "2-3"), (4, "4-15"), (16, "16+"))
OFF_BY = "finite off by N ulp"
#: Dots of a class kept from the chunk where it first showed (the set of a class that one dot
#: does not reproduce).
KEPT_DOTS = 20
KINDS = ("value", "flags", "missing", "cycle", "envelope")
_FLAGS = (("NV", 0x10), ("DZ", 0x08), ("OF", 0x04), ("UF", 0x02), ("NX", 0x01))
_CLASSES = ("finite", "Inf", "NaN")
#: The value families by number: then ``class differs`` for each (want, got) pair of _CLASSES.
_FAMILIES = ("NaN code", "sign of zero", "sign differs", OFF_BY) + tuple(
    f"class differs: want {x} got {y}" for x in _CLASSES for y in _CLASSES)
#: A code's index in _CLASSES by its :class:`mxsim.formats.Class` value (a zero is finite).
_CLASS_OF = np.array([0, 0, 0, 1, 2], np.int64)


@dataclass(frozen=True)
class ClassKey:
    """A class of mismatches (see the module docstring)."""
    kind: str
    family: str
    a_format: str
    b_format: str
    detail: str = ""

    @property
    def name(self) -> str:
        if self.family == OFF_BY:
            return f"finite off by {self.detail} ulp" + ("" if self.detail == "1" else "s")
        return f"{self.family} ({self.detail})" if self.detail else self.family

    @property
    def slug(self) -> str:
        """The name in file names."""
        return re.sub(r"[^a-z0-9+]+", "-", self.name.lower()).replace("+", "plus").strip("-")

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "family": self.family,
                "a_format": self.a_format, "b_format": self.b_format,
                "detail": self.detail or None}


def bucket(ulps: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The index in :data:`BUCKETS` of each ulp distance (>= 1)."""
    u = np.asarray(ulps)
    return np.searchsorted([b for b, _ in BUCKETS], u, side="right").astype(np.int64) - 1


@dataclass
class Records:
    """The mismatches of one run, one record each: its class (``keys[key[i]]``), the dot it
    names (-1: none), its weight (a capped list's closing entry stands for several), the index
    of the run's mismatch entry it comes from (-1: found in the result arrays), and ``env``,
    the waiver vocabulary of every record."""
    keys: list[ClassKey]
    key: npt.NDArray[np.int64]
    dot: npt.NDArray[np.int64]
    weight: npt.NDArray[np.int64]
    entry: npt.NDArray[np.int64]
    env: dict[str, Any]
    #: Bits of the result format's codes (how the report lists them).
    bits: int = 32

    def __len__(self) -> int:
        return len(self.key)

    @property
    def kinds(self) -> npt.NDArray[np.int64]:
        """Each record's kind, as its index in ``KINDS`` (value, flags, missing, cycle)."""
        table = np.array([KINDS.index(k.kind) for k in self.keys] or [0], np.int64)
        return table[self.key]

    def of(self, *kinds: str) -> npt.NDArray[np.bool_]:
        """Which records are of these kinds."""
        return np.isin(self.kinds, [KINDS.index(k) for k in kinds])

    def waived_by(self, waivers: list[Waiver]) -> npt.NDArray[np.int64]:
        """The index of the first waiver that waives each record (-1: none)."""
        out = np.full(len(self), -1, np.int64)
        for i, w in enumerate(waivers):
            if not len(self):
                break
            ok = (out < 0) & self.of(*(k for k in KINDS[:4] if w.applies(k)))
            if ok.any():
                out[ok & w.matches(self.env, len(self))] = i
        return out


class _Builder:
    """Records gathered part by part (value, flags, missing, cycle), then joined."""

    def __init__(self, spec: UnitSpec):
        self.pair = (spec.a_format, spec.b_format)
        self.bits = 32
        self.keys: list[ClassKey] = []
        self.parts: list[tuple] = []

    def key_id(self, kind: str, family: str, detail: str = "") -> int:
        key = ClassKey(kind, family, *self.pair, detail)
        if key not in self.keys:
            self.keys.append(key)
        return self.keys.index(key)

    def add(self, key, dot, weight, entry, env: dict[str, Any], n: int) -> None:
        self.parts.append((np.broadcast_to(np.asarray(key, np.int64), (n,)),
                           np.broadcast_to(np.asarray(dot, np.int64), (n,)),
                           np.broadcast_to(np.asarray(weight, np.int64), (n,)),
                           np.broadcast_to(np.asarray(entry, np.int64), (n,)), env, n))

    def records(self) -> Records:
        cols = [np.concatenate([p[i] for p in self.parts] or [np.zeros(0, np.int64)])
                for i in range(4)]
        envs, sizes = [p[4] for p in self.parts], [p[5] for p in self.parts]
        env = _join(envs, sizes)
        env.update(a_format=self.pair[0], b_format=self.pair[1])
        return Records(self.keys, *cols, env, self.bits)


def _join(envs: list[dict], sizes: list[int]) -> dict[str, Any]:
    """One vocabulary of the parts' vocabularies (each of its own size)."""
    def cat(values: list, n: list[int]) -> Any:
        if isinstance(values[0], dict):
            return {a: cat([v[a] for v in values], n) for a in values[0]}
        if isinstance(values[0], Num):
            return Num(np.concatenate([np.broadcast_to(np.asarray(v.values, np.int64), (k,))
                                       for v, k in zip(values, n, strict=True)]),
                       np.concatenate([np.broadcast_to(np.asarray(v.defined, bool), (k,))
                                       for v, k in zip(values, n, strict=True)]))
        return np.concatenate([np.broadcast_to(np.asarray(v), (k,))
                               for v, k in zip(values, n, strict=True)])
    if not envs:
        return _blank(0)
    return {name: cat([e[name] for e in envs], sizes) for name in envs[0]}


def _operand(fmt: formats.Format, codes: npt.NDArray) -> dict[str, Any]:
    """The vocabulary of codes of ``fmt``: zero, neg_zero, ..., code."""
    cls = fmt.classify(codes.astype(fmt.code_dtype))
    neg = fmt.sign(codes.astype(fmt.code_dtype)).astype(bool)
    zero, nan, inf = cls == formats.Class.ZERO, cls == formats.Class.NAN, \
        cls == formats.Class.INF
    return {"zero": zero, "neg_zero": zero & neg, "pos_zero": zero & ~neg, "nan": nan,
            "inf": inf, "neg": neg, "finite": ~(nan | inf), "code": Num(codes.astype(np.int64))}


def _none(n: int) -> dict[str, Any]:
    """An operand with no value: every test false, its code undefined."""
    false = np.zeros(n, bool)
    return {**{a: false for a in ATTRIBUTES if a != "code"}, "code": Num(0, False)}


def _blank(n: int, **tests: Any) -> dict[str, Any]:
    false = np.zeros(n, bool)
    env = {"want": _none(n), "got": _none(n), "c": _none(n), "ulp": Num(0, False),
           "sign_only": false, "missing": false, "flags": false, "cycle": false,
           "rule": np.full(n, "", object)}
    env.update(tests)
    return env


def observe(spec: UnitSpec, vs: VectorSet, run: Run, want: npt.NDArray) -> Records:
    """The records of every mismatch of ``run`` (the design's run of ``vs``, whose model
    results are ``want``, codes of ``spec.d_format``); see the module docstring."""
    b = _Builder(spec)
    fmt = formats.get(spec.d_format)
    b.bits = fmt.bits
    want = np.asarray(want).reshape(-1)
    res = getattr(run, "results", None)
    fixed = res is not None and res.encoding == "fixed"
    n_got = len(res) if res is not None else len(run.trace.results)
    n = min(n_got, len(want))
    c = _c_operand(vs, n)
    if fixed:
        _fixed_part(b, fmt, want[:n], res, c)
    else:
        got = res.codes if res is not None else run.outputs
        _codes_part(b, fmt, want[:n].astype(np.int64), np.asarray(got[:n], np.int64), c)
    if res is not None and res.flags is not None:
        _flags_part(b, spec, vs, res, n)
    last, per_dot = "", max(1, vs.k // spec.k)
    for j, m in enumerate(run.mismatches):
        if m.kind is MismatchKind.VALUE:
            if m.dot is None and m.cycle is None and m.unlisted is None:
                # "N of M results left": every dot without a result counts
                b.add(b.key_id("missing", "result missing"), n_got if n_got < len(want) else -1,
                      max(1, abs(len(want) - n_got)), j, _blank(1, missing=np.ones(1, bool)), 1)
            continue
        last = _rule(m, last)
        dot = m.dot if m.dot is not None else -1 if m.beat is None else m.beat // per_dot
        b.add(b.key_id("cycle", "cycle", last), dot, m.unlisted or 1, j,
              _blank(1, cycle=np.ones(1, bool), rule=np.array([last], object)), 1)
    return b.records()


def _c_operand(vs: VectorSet, n: int) -> dict[str, Any]:
    if vs.c is None:
        return _operand(formats.get("fp32"), np.zeros(n, np.int64))
    return _operand(formats.get(vs.c_format), np.asarray(vs.c).reshape(-1)[:n].astype(np.int64))


def _codes_part(b: _Builder, fmt: formats.Format, want: npt.NDArray[np.int64],
                got: npt.NDArray[np.int64], c: dict[str, Any]) -> None:
    """Results in an IEEE format: codes compared bit for bit."""
    dots = np.flatnonzero(want != got)
    if not len(dots):
        return
    w, g = want[dots], got[dots]
    wo, go = _operand(fmt, w), _operand(fmt, g)
    sign = np.int64(1 << (fmt.bits - 1))
    order = lambda x: np.where(x & sign, -(x & (sign - 1)), x & (sign - 1))  # noqa: E731
    ulps = np.abs(order(w) - order(g))
    both = wo["finite"] & go["finite"]
    sign_only = (w ^ g) == sign
    wc, gc = (_CLASS_OF[fmt.classify(x.astype(fmt.code_dtype))] for x in (w, g))
    family = np.select([wo["nan"] & go["nan"], wo["zero"] & go["zero"], sign_only, both],
                       [0, 1, 2, 3], 4 + 3 * wc + gc)
    _add_values(b, dots, family, np.where(both, ulps, 0), both, sign_only, wo, go,
                _take(c, dots))


def _take(operand: dict[str, Any], dots: npt.NDArray) -> dict[str, Any]:
    """An operand's vocabulary at ``dots``."""
    return {k: Num(v.values[dots], v.defined) if isinstance(v, Num) else v[dots]
            for k, v in operand.items()}


def _fixed_part(b: _Builder, fmt: formats.Format, want: npt.NDArray, res: Any,
                c: dict[str, Any]) -> None:
    """A fixed-point result (``mant * 2**exp``, a NaN flag) against the model's codes,
    compared exactly in value: NaN equals NaN, +0 equals -0, Inf equals nothing."""
    n = len(want)
    wo = _operand(fmt, want.astype(np.int64))
    f = fmt.fields(want.astype(fmt.code_dtype))
    special = wo["nan"] | wo["inf"]
    w_mant = np.where(special, 0, np.where(f.sign == 1, -f.sig.astype(np.int64),
                                           f.sig.astype(np.int64)))
    w_exp = np.where(special, 0, f.e.astype(np.int64) - fmt.man_bits)
    g_mant, g_exp, g_nan = (res.mant[:n].astype(np.int64), res.exp[:n].astype(np.int64),
                            res.nan[:n].astype(bool))
    cw, cg, cneg = canonical(w_mant, w_exp), canonical(g_mant, g_exp), \
        canonical(-g_mant, g_exp)
    equal = (cg[0] == cw[0]) & (cg[1] == cw[1])
    same = np.where(g_nan | wo["nan"], g_nan & wo["nan"], ~wo["inf"] & equal)
    dots = np.flatnonzero(~same)
    if not len(dots):
        return
    w_fin, g_fin = ~special[dots], ~g_nan[dots]
    both = w_fin & g_fin
    sign_only = both & (w_mant[dots] != 0) & (cneg[0][dots] == cw[0][dots]) & \
        (cneg[1][dots] == cw[1][dots])
    ulps = _lsb_ulps(w_mant[dots], w_exp[dots], g_mant[dots], g_exp[dots], res)
    wc = np.where(wo["nan"][dots], 2, np.where(wo["inf"][dots], 1, 0))
    family = np.select([sign_only, both], [2, 3], 4 + 3 * wc + np.where(g_nan[dots], 2, 0))
    zero = (g_mant[dots] == 0) & g_fin
    go = {"zero": zero, "neg_zero": np.zeros(len(dots), bool), "pos_zero": zero,
          "nan": ~g_fin, "inf": np.zeros(len(dots), bool), "neg": g_mant[dots] < 0,
          "finite": g_fin, "code": Num(0, False)}
    _add_values(b, dots, family, np.where(both, ulps, 0), both, sign_only, _take(wo, dots), go,
                _take(c, dots))


def _add_values(b: _Builder, dots, family, ulps, both, sign_only, wo, go, c) -> None:
    """Value records of ``dots``, one class per family (``_FAMILIES`` number) and ulp
    bucket."""
    detail = np.where(family == _FAMILIES.index(OFF_BY),
                      np.clip(bucket(np.maximum(ulps, 1)), 0, len(BUCKETS) - 1) + 1, 0)
    codes, inverse = np.unique(family * 8 + detail, return_inverse=True)
    ids = np.array([b.key_id("value", _FAMILIES[int(x) // 8],
                             BUCKETS[int(x) % 8 - 1][1] if x % 8 else "") for x in codes],
                   np.int64)
    env = _blank(len(dots), want=wo, got=go, c=c, ulp=Num(ulps, both), sign_only=sign_only)
    b.add(ids[inverse.reshape(-1)], dots, 1, -1, env, len(dots))


def canonical(mant: npt.NDArray[np.int64], exp: npt.NDArray[np.int64]) -> tuple:
    """``mant * 2**exp`` as (odd mantissa, exponent), or (0, 0) for zero: equal values give
    equal pairs (how fixed-point results are compared, here and in
    :mod:`testbenches.foreign.portmap.codec`)."""
    mant, exp = mant.astype(np.int64), exp.astype(np.int64)
    zero = mant == 0
    low = np.where(zero, 1, mant & -mant)
    # low is a power of two below 2**63: float64 holds it exactly, and frexp gives its log2.
    tz = (np.frexp(np.abs(low.astype(np.float64)))[1] - 1).astype(np.int64)
    return np.where(zero, 0, mant >> tz), np.where(zero, 0, exp + tz)


def _lsb_ulps(w_mant, w_exp, g_mant, g_exp, res: Any) -> npt.NDArray[np.int64]:
    """|got - want| in units of the fixed-point result's LSB at want (the ulp the report's
    notes use: ``2**(floor(log2|want|) - (P - 1))``, never below the smallest exponent),
    rounded up, in exact integers (at most 2**62: far-apart values)."""
    cap = 1 << 62
    out = np.empty(len(w_mant), np.int64)
    for n, (wm, we, gm, ge) in enumerate(zip(w_mant.tolist(), w_exp.tolist(), g_mant.tolist(),
                                             g_exp.tolist(), strict=True)):
        e = res.e_min if wm == 0 else max(abs(wm).bit_length() - 1 + we - (res.precision - 1),
                                           res.e_min)
        low = min(we, ge, e)
        if max(we, ge, e) - low > 4096:                 # apart by far more than 2**62 ulps
            out[n] = cap
            continue
        diff = abs((gm << (ge - low)) - (wm << (we - low)))
        unit = 1 << (e - low)
        out[n] = min(-(-diff // unit), cap)
    return out


def _flags_part(b: _Builder, spec: UnitSpec, vs: VectorSet, res: Any, n: int) -> None:
    from mxsim.engine.flags import status_flags
    mask = np.uint8(res.flag_mask)
    got = res.flags[:n] & mask
    want = status_flags(spec, vs).reshape(-1)[:n] & mask
    dots = np.flatnonzero(got != want)
    if not len(dots):
        return
    text = lambda x: "|".join(f for f, bit in _FLAGS if x & bit) or "none"  # noqa: E731
    ids = [b.key_id("flags", "status flags differ",
                    f"want {text(int(want[i]))}, got {text(int(got[i]))}") for i in dots]
    b.add(ids, dots, 1, -1, _blank(len(dots), flags=np.ones(len(dots), bool)), len(dots))


def _rule(m: Mismatch, last: str) -> str:
    """The timing rule a cycle mismatch breaks, as its note names it (a capped list's
    closing entry: the rule of the entries before it)."""
    note = m.note
    if note is None:
        return "scoreboard"                # a cycle the cocotb scoreboard compared
    if note.startswith("..."):
        return last or "unlisted"
    for pattern, form in ((r"(\w+) differs on", "{} differs"),
                          (r"\d+ of \d+ (\w+) taken", "{} taken")):
        hit = re.match(pattern, note)
        if hit:
            return form.format(hit.group(1))
    return re.sub(r"\s*\d+$", "", note.split(":")[0]).strip() or "other"


@dataclass
class Entry:
    """One class of the census (or what one waiver waived): its true count, where it first
    showed (``chunk``, ``dot``), and, from that chunk, ``pick`` (the one dot, for a class of
    single dots) and ``dots``/``kept`` (up to :data:`KEPT_DOTS` of its dots, as a set).
    :mod:`testbenches.unit.failing` fills in the set it wrote and how."""
    count: int = 0
    chunk: int | None = None
    dot: int | None = None
    dots: list[int] = field(default_factory=list)
    pick: VectorSet | None = None
    kept: VectorSet | None = None
    set: str | None = None
    set_dots: int | None = None
    how: str | None = None
    reproduced: bool | None = None
    replay: str | None = None
    waveform: str | None = None
    #: The coverage bins the kept dots hit (coverpoint -> {bin: hits}), where measured.
    bins: dict[str, dict[str, int]] = field(default_factory=dict)
    #: With a design's probes: the first wrong node of each localised dot of the class
    #: (node -> dots; "no probed node differs" where every probe agreed).
    nodes: dict[str, int] = field(default_factory=dict)

    def first(self, chunk: int, vs: VectorSet, dots: npt.NDArray[np.int64],
              per_dot: bool) -> None:
        """Where the class first showed: the dots it names in ``chunk`` (none: the chunk's
        first four)."""
        named = sorted(set(int(d) for d in dots if 0 <= d < vs.num_dots))
        self.chunk, self.dot = chunk, (named[0] if named else None)
        self.dots = named[:KEPT_DOTS] or list(range(min(4, vs.num_dots)))
        take = lambda ds: vs.take_dots(ds).replace(  # noqa: E731
            d=None, producer="mxsim verify (failing dot products)")
        self.kept = take(self.dots)
        self.pick = take(self.dots[:1]) if per_dot and named else None

    def to_dict(self) -> dict:
        return {"count": self.count, "chunk": self.chunk, "dot": self.dot, "set": self.set,
                "set_dots": self.set_dots, "how": self.how, "reproduced": self.reproduced,
                "replay": self.replay, "waveform": self.waveform, "bins": self.bins,
                "kept_dots": len(self.dots), "first_wrong_node": self.nodes}


@dataclass
class Census:
    """Every class of mismatch of a run (first showing first) and every waiver's catch."""
    classes: dict[ClassKey, Entry] = field(default_factory=dict)
    waivers: list[tuple[Waiver, Entry]] = field(default_factory=list)
    chunks: int = 0
    failing_chunks: int = 0
    #: How many classes get their sets shrunk and waveforms (the first, in order).
    detailed: int = 8
    #: What the failing sets are, in one line (filled in when they are written).
    sets_note: str | None = None

    @classmethod
    def of(cls, waivers: list[Waiver], detailed: int = 8) -> Census:
        return cls(waivers=[(w, Entry()) for w in waivers], detailed=detailed)

    def add(self, chunk: int, vs: VectorSet, rec: Records, waived_by: npt.NDArray) -> None:
        """One chunk's records (``waived_by``: :meth:`Records.waived_by`)."""
        self.chunks += 1
        if not len(rec):
            return
        if ((waived_by < 0) & ~rec.of("envelope")).any():
            self.failing_chunks += 1
        for kid in np.unique(rec.key[waived_by < 0]):
            key = rec.keys[int(kid)]
            self._count(self.classes.setdefault(key, Entry()), chunk, vs, rec,
                        (rec.key == kid) & (waived_by < 0), key.kind in ("value", "flags"))
        for i, (_, entry) in enumerate(self.waivers):
            mask = waived_by == i
            if mask.any():
                per_dot = bool(rec.of("value", "flags")[mask].all())
                self._count(entry, chunk, vs, rec, mask, per_dot)

    @staticmethod
    def _count(entry: Entry, chunk: int, vs: VectorSet, rec: Records, mask, per_dot) -> None:
        entry.count += int(rec.weight[mask].sum())
        if entry.chunk is None:
            entry.first(chunk, vs, rec.dot[mask], per_dot)

    def add_outside(self, chunk: int, vs: VectorSet, spec: UnitSpec, dots: npt.NDArray,
                    envelope: str) -> None:
        """A conformance check's results outside its envelope (``dots``, every one)."""
        if len(dots):
            key = ClassKey("envelope", "outside the dot-product envelope", spec.a_format,
                           spec.b_format, envelope)
            self._count(self.classes.setdefault(key, Entry()), chunk, vs,
                        Records([key], np.zeros(len(dots), np.int64), np.asarray(dots),
                                np.ones(len(dots), np.int64), np.full(len(dots), -1), {}),
                        np.ones(len(dots), bool), True)

    def ordered(self) -> list[tuple[ClassKey, Entry]]:
        """The classes, first showing first."""
        return sorted(self.classes.items(), key=lambda kv: (
            kv[1].chunk, -1 if kv[1].dot is None else kv[1].dot, KINDS.index(kv[0].kind)))

    def total(self, *kinds: str) -> int:
        """Unwaived mismatches of these kinds."""
        return sum(e.count for k, e in self.classes.items() if k.kind in kinds)

    @property
    def waived(self) -> int:
        return sum(e.count for _, e in self.waivers)

    def lines(self) -> list[str]:
        """The report's census and waived sections."""
        out = []
        classes = self.ordered()
        if classes:
            out.append(f"  census      {len(classes)} class{'es' if len(classes) != 1 else ''}"
                       f" of mismatch in {self.failing_chunks} of {self.chunks} chunk"
                       f"{'s' if self.chunks != 1 else ''} run"
                       + (f"; {self.sets_note}" if self.sets_note else ""))
            for key, e in classes:
                out += _entry_lines(f"{e.count:,}  {key.name} ({key.a_format} x "
                                    f"{key.b_format}, {key.kind})", e)
        if self.waivers:
            out.append(f"  waived      {self.waived:,} mismatch{'es' if self.waived != 1 else ''}"
                       f" by {len(self.waivers)} waiver{'s' if len(self.waivers) != 1 else ''}"
                       f" (counted apart: not in the verdict)")
        for w, e in self.waivers:
            head = f"{e.count:,}  {w.name!r} (when {w.when}; {w.source})"
            out += _entry_lines(head + ("" if e.count else ": matched nothing"), e)
        return out

    def to_dict(self) -> dict:
        return {"chunks": self.chunks, "failing_chunks": self.failing_chunks,
                "sets": self.sets_note,
                "classes": [{**k.to_dict(), **e.to_dict()} for k, e in self.ordered()],
                "waivers": [{**w.to_dict(), **e.to_dict(), "matched_nothing": not e.count}
                            for w, e in self.waivers]}


def _entry_lines(head: str, e: Entry) -> list[str]:
    out = ["    " + head]
    if e.set:
        how = f" ({e.how})" if e.how else ""
        out.append(f"        set      {e.set}{how}")
        out.append(f"        replay   {e.replay}")
    if e.waveform:
        out.append(f"        waveform {e.waveform}")
    if e.nodes:
        out.append(f"        node     first wrong node of {sum(e.nodes.values())} dot"
                   f"{'s' if sum(e.nodes.values()) != 1 else ''} localised by probes: "
                   + ", ".join(f"{n} {c}" for n, c in sorted(e.nodes.items(),
                                                            key=lambda kv: -kv[1])))
    if e.bins:
        shown = "; ".join(f"{point} " + ", ".join(f"{b} {n}" for b, n in list(bins.items())[:6])
                          for point, bins in list(e.bins.items())[:4])
        out.append(f"        bins     of its {len(e.dots)} kept dot"
                   f"{'s' if len(e.dots) != 1 else ''}: {shown}"
                   + (" ..." if len(e.bins) > 4 else ""))
    return out
