"""``[domain]``: the inputs a foreign design is built for, and stimulus kept inside them.

A design is rarely built for every input an MX format can spell: an 8-bit scale-exponent sum
wraps, a unit without NaN handling never sees NaN codes. The map's ``[domain]`` says which
inputs count:

- ``a``, ``b``, ``c``: the operand classes (as the ``a_class`` coverage bins name them:
  ``zero``, ``subnormal``, ``normal``, ``max``, ``nan``, ``inf``; C: ``zero``, ``subnormal``,
  ``normal``, ``nan``, ``inf``) each may hold (default: every class);
- ``a_scale``, ``b_scale``: ``[lo, hi]``, the range of each operand's scale exponent (E8M0:
  code - 127; a range excludes the NaN code 0xFF), and ``scale_sum``: the range of the two
  exponents' sum in each block.

:meth:`Domain.check` finds the dot products outside it (``--replay`` refuses a set holding
one, naming the first); :meth:`Domain.constrain` turns any vector set into one inside it (each
dot product its own 1 x 1 entry, out-of-domain codes redrawn among the allowed ones, scale
pairs redrawn inside the ranges with one in eight placed on an edge of the sum's range), so
stimulus, coverage and probe suites stay inside; :meth:`Domain.unreachable` names the
coverage bins no in-domain input can hit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from mxsim import formats
from mxsim.vectors import VectorSet

from .parts import MapError

__all__ = ["Domain", "ELEMENT_CLASSES", "C_CLASSES", "element_classes"]

#: The classes an operand may be declared to hold (the a_class/b_class coverage bins).
ELEMENT_CLASSES = ("zero", "subnormal", "normal", "max", "nan", "inf")
#: The classes of C.
C_CLASSES = ("zero", "subnormal", "normal", "nan", "inf")
_FCLASS = {formats.Class.ZERO: "zero", formats.Class.SUBNORMAL: "subnormal",
           formats.Class.NORMAL: "normal", formats.Class.INF: "inf", formats.Class.NAN: "nan"}
#: One repaired scale pair in this many is put on an edge of the sum's range.
EDGE_ONE_IN = 8


def element_classes(fmt: formats.Format, codes: npt.NDArray) -> npt.NDArray:
    """Each code's class name index into :data:`ELEMENT_CLASSES` (``max``: the largest finite
    magnitude; INT8: 127 and -128), as the coverage bins count them."""
    cls = fmt.classify(codes)
    out = np.full(codes.shape, ELEMENT_CLASSES.index("normal"), np.int8)
    for fc, name in _FCLASS.items():
        out[cls == fc] = ELEMENT_CLASSES.index(name)
    normal = out == ELEMENT_CLASSES.index("normal")
    if fmt.kind == "float":
        mag = codes & ((1 << (fmt.bits - 1)) - 1) if fmt.signed else codes
        top = fmt.code_of_max & ((1 << (fmt.bits - 1)) - 1)
        out[normal & (mag == top)] = ELEMENT_CLASSES.index("max")
    else:
        i = codes.astype(np.uint8).view(np.int8)
        out[normal & ((i == 127) | (i == -128))] = ELEMENT_CLASSES.index("max")
    return out


def _c_classes(fmt: formats.Format, codes: npt.NDArray) -> npt.NDArray:
    cls = fmt.classify(codes)
    out = np.zeros(codes.shape, np.int8)
    for fc, name in _FCLASS.items():
        out[cls == fc] = C_CLASSES.index(name)
    return out


#: :func:`c_exponents` of a zero, Inf or NaN
_NO_EXPONENT = -(1 << 20)


def c_exponents(fmt: formats.Format, codes: npt.NDArray) -> npt.NDArray[np.int64]:
    """floor(log2 |C|) of every finite non-zero code (exact: FP32/FP16/BF16 values are
    float64 values); :data:`_NO_EXPONENT` for zeros, Infs and NaNs."""
    v = fmt.decode(codes).astype(np.float64)
    live = np.isfinite(v) & (v != 0)
    _, e = np.frexp(np.where(live, v, 1.0))
    return np.where(live, e.astype(np.int64) - 1, _NO_EXPONENT)


def _c_in_binades(fmt: formats.Format, count: int, lo: int, hi: int,
                  rng: np.random.Generator) -> npt.NDArray:
    """``count`` codes of ``fmt`` with random sign, binade in [lo, hi] and significand: each
    an integer q of the bits the binade holds times a power of two, so exact in ``fmt``."""
    emin = 1 - fmt.bias                                      # the smallest normal binade
    lo, hi = max(lo, emin - fmt.man_bits), min(hi, fmt.emax)
    if lo > hi:
        raise MapError(f"domain.c_exponent holds no {fmt.name} value of C; widen it")
    e = rng.integers(lo, hi + 1, count)
    bits = np.where(e >= emin, fmt.man_bits, fmt.man_bits - (emin - e))    # below: subnormal
    q = (np.int64(1) << bits) + rng.integers(0, 1 << 62, count) % (np.int64(1) << bits)
    v = np.ldexp(q.astype(np.float64), (e - bits).astype(np.int64))
    v = np.where(rng.integers(0, 2, count) == 1, -v, v)
    return fmt.encode(v, "rne", saturate=False)


@dataclass(frozen=True)
class Domain:
    """A checked ``[domain]`` table (see the module docstring); None ranges and classes mean
    "every"."""
    a: tuple[str, ...] | None = None
    b: tuple[str, ...] | None = None
    c: tuple[str, ...] | None = None
    a_scale: tuple[int, int] | None = None
    b_scale: tuple[int, int] | None = None
    scale_sum: tuple[int, int] | None = None
    #: the binades a finite non-zero C may lie in: lo <= floor(log2 |C|) <= hi
    c_exponent: tuple[int, int] | None = None
    line: int = 1
    lines: Mapping[str, int] | None = None

    def line_of(self, key: str) -> int:
        return (self.lines or {}).get(key, self.line)

    @property
    def scaled(self) -> bool:
        """Whether the domain limits the scales."""
        return any(r is not None for r in (self.a_scale, self.b_scale, self.scale_sum))

    def describe(self) -> str:
        """One line for reports."""
        parts = []
        for key in ("a", "b", "c"):
            if getattr(self, key) is not None:
                parts.append(f"{key} {'/'.join(getattr(self, key))}")
        for key in ("a_scale", "b_scale", "scale_sum", "c_exponent"):
            rng = getattr(self, key)
            if rng is not None:
                parts.append(f"{key} {rng[0]}..{rng[1]}")
        return "; ".join(parts) or "every input"

    # -- which dot products are inside ---------------------------------------------------

    def violations(self, vs: VectorSet) -> tuple[npt.NDArray[np.bool_], list[str]]:
        """A mask over ``vs``'s dot products (flat, batch-row-column order) of those outside
        the domain, and for each rule the reason text of the first dot it catches."""
        f = vs.flat()
        nb, m, n, k = f.a.shape[0], vs.m, vs.n, vs.k
        bad = np.zeros((nb, m, n), bool)
        why: list[tuple[int, str]] = []

        def note(mask: npt.NDArray[np.bool_], text: str) -> None:
            nonlocal bad
            if mask.any():
                why.append((int(np.flatnonzero(mask.reshape(-1))[0]), text))
                bad = bad | mask

        for key, codes, fmt, axis in (("a", f.a, vs.a_format, 2), ("b", f.b, vs.b_format, 1)):
            allowed = getattr(self, key)
            if allowed is None:
                continue
            names = np.array(ELEMENT_CLASSES)
            cls = element_classes(formats.get(fmt), codes)
            out = ~np.isin(cls, [ELEMENT_CLASSES.index(x) for x in allowed])
            row = out.any(axis=axis)                   # (nb, m) for A, (nb, n) for B
            mask = row[:, :, None] if key == "a" else row[:, None, :]
            if mask.any():
                first = np.argwhere(out)[0]
                what = names[cls[tuple(first)]]
                note(np.broadcast_to(mask, bad.shape),
                     f"{key.upper()} holds a {what} element ({key} allows "
                     f"{', '.join(allowed)})")
        if self.c is not None and f.c is not None:
            cls = _c_classes(formats.get(vs.c_format), f.c)
            out = ~np.isin(cls, [C_CLASSES.index(x) for x in self.c])
            if out.any():
                what = C_CLASSES[int(cls[out][0])]
                note(out, f"C is {what} (c allows {', '.join(self.c)})")
        if self.c_exponent is not None and f.c is not None:
            lo, hi = self.c_exponent
            e = c_exponents(formats.get(vs.c_format), f.c)
            out = (e != _NO_EXPONENT) & ((e < lo) | (e > hi))
            if out.any():
                note(out, f"C is 2**{int(e[out][0])} or more (floor(log2|C|) = "
                          f"{int(e[out][0])}), outside c_exponent [{lo}, {hi}]")
        if self.scaled and vs.a_scale is not None and vs.scale_format == "e8m0":
            blocks = k // vs.block
            sa = f.a_scale.astype(np.int64).reshape(nb, m, 1, blocks)
            sb = np.swapaxes(f.b_scale.astype(np.int64).reshape(nb, blocks, n), 1, 2)[:, None]
            ea, eb = sa - 127, sb - 127
            for key, e, nan in (("a_scale", ea, sa == 0xFF), ("b_scale", eb, sb == 0xFF)):
                rng = getattr(self, key)
                if rng is not None:
                    each = nan | (e < rng[0]) | (e > rng[1])
                    if each.any():
                        first = tuple(np.argwhere(each)[0])
                        what = "the NaN scale 0xFF" if nan[first] else \
                            f"scale exponent {int(e[first])}"
                        note(np.broadcast_to(each.any(axis=-1), bad.shape),
                             f"{key[0].upper()} has {what}, outside {key} "
                             f"[{rng[0]}, {rng[1]}]")
            if self.scale_sum is not None:
                lo, hi = self.scale_sum
                s = ea + eb
                each = (sa == 0xFF) | (sb == 0xFF) | (s < lo) | (s > hi)
                if each.any():
                    first = tuple(np.argwhere(each)[0])
                    note(each.any(axis=-1), f"a block's scale exponents sum to "
                                            f"{int(s[first])}, outside scale_sum [{lo}, {hi}]")
        why.sort()
        return bad.reshape(-1), [text for _, text in why]

    def first_outside(self, vs: VectorSet) -> str | None:
        """``dot N: why`` for the first dot product of ``vs`` outside the domain, or None."""
        bad, _ = self.violations(vs)
        if not bad.any():
            return None
        first = int(np.flatnonzero(bad)[0])
        _, reasons = self.violations(vs.take_dots([first]))
        return f"dot {first}: {reasons[0]}"

    # -- stimulus inside -----------------------------------------------------------------

    def constrain(self, vs: VectorSet, seed: int) -> VectorSet:
        """``vs`` with every dot product inside the domain: each dot its own batch entry
        (``take_dots``), codes of a class the domain excludes redrawn among the allowed
        codes, out-of-range scale pairs redrawn inside every range (one in
        :data:`EDGE_ONE_IN` on an edge of the sum's range). In-domain values are kept."""
        rng = np.random.default_rng(seed)
        out = vs.take_dots(slice(None)) if (vs.m, vs.n) != (1, 1) else vs.flat()
        changes = {}
        for key, fmt_name in (("a", vs.a_format), ("b", vs.b_format)):
            allowed = getattr(self, key)
            if allowed is None:
                continue
            fmt = formats.get(fmt_name)
            codes = getattr(out, key)
            table = np.arange(1 << fmt.bits, dtype=codes.dtype)
            keep = np.isin(element_classes(fmt, table), [ELEMENT_CLASSES.index(x)
                                                          for x in allowed])
            pool = table[keep]
            cls = element_classes(fmt, codes)
            redo = ~np.isin(cls, [ELEMENT_CLASSES.index(x) for x in allowed])
            new = codes.copy()
            new[redo] = rng.choice(pool, int(redo.sum()))
            changes[key] = new
        if self.c is not None and out.c is not None:
            fmt = formats.get(out.c_format)
            cls = _c_classes(fmt, out.c)
            redo = ~np.isin(cls, [C_CLASSES.index(x) for x in self.c])
            if redo.any():
                new = out.c.copy()
                new[redo] = self._draw_c(fmt, int(redo.sum()), rng).astype(new.dtype)
                changes["c"] = new
        if self.c_exponent is not None and out.c is not None:
            fmt = formats.get(out.c_format)
            c = changes.get("c", out.c)
            e = c_exponents(fmt, c)
            lo, hi = self.c_exponent
            redo = (e != _NO_EXPONENT) & ((e < lo) | (e > hi))
            if redo.any():
                c = c.copy()
                c[redo] = _c_in_binades(fmt, int(redo.sum()), lo, hi, rng).astype(c.dtype)
                changes["c"] = c
        if self.scaled and out.a_scale is not None and out.scale_format == "e8m0":
            changes.update(self._scales(out, rng))
        return out.replace(**changes) if changes else out

    def _draw_c(self, fmt: formats.Format, count: int, rng: np.random.Generator
                ) -> npt.NDArray:
        """``count`` C codes of the allowed classes (random codes, rejected until inside)."""
        got = np.zeros(0, np.uint64)
        want = [C_CLASSES.index(x) for x in self.c]
        if want == [C_CLASSES.index("zero")]:
            # +0 and -0 alone: one random code in 2**(bits - 1) is a zero, so draw the sign
            return rng.integers(0, 2, count, dtype=np.uint64) << np.uint64(fmt.bits - 1)
        while len(got) < count:
            draw = rng.integers(0, 1 << fmt.bits, 4 * count + 16, dtype=np.uint64)
            # small exponents are rare among random codes: also draw zeros and subnormals
            draw[::4] &= np.uint64((1 << fmt.man_bits) - 1) if fmt.kind == "float" else \
                np.uint64((1 << fmt.bits) - 1)
            got = np.concatenate([got, draw[np.isin(_c_classes(fmt, draw), want)]])
        return got[:count]

    def _output_bins(self, spec, takes_c: bool) -> dict[str, set[str]]:
        (lo_a, hi_a), (lo_b, hi_b) = self.exponent_ranges()
        lo = max(lo_a + lo_b, self.scale_sum[0]) if self.scale_sum else lo_a + lo_b
        hi = min(hi_a + hi_b, self.scale_sum[1]) if self.scale_sum else hi_a + hi_b
        mags = []
        for name, allowed in ((spec.a_format, self.a), (spec.b_format, self.b)):
            fmt = formats.get(name)
            codes = np.arange(1 << fmt.bits)
            if allowed is not None:
                codes = codes[np.isin(element_classes(fmt, codes),
                                      [ELEMENT_CLASSES.index(x) for x in allowed])]
            sign, e, sig = fmt.fields(codes)
            # every code as the number its bits spell (a unit without specials reads NaN and
            # Inf codes so; one with them never has a finite result from them)
            value = np.ldexp(sig.astype(np.float64), e.astype(np.int64) - fmt.man_bits)
            nz = value[value > 0]
            if not len(nz):
                return {}
            mags.append((nz.min(), nz.max()))
        (min_a, max_a), (min_b, max_b) = mags
        out_fmt = formats.get(spec.d_format)
        bins: set[str] = set()
        if min_a * min_b * 2.0 ** lo >= out_fmt.min_normal:
            bins.add("subnormal")
        top = spec.k * max_a * max_b * 2.0 ** hi
        if not takes_c and top < out_fmt.max / 2:
            bins.add("overflow")
        return {"output_class": bins} if bins else {}

    def exponent_ranges(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """The scale exponents A and B can have inside every range (E8M0: -127..127)."""
        wide = (-127, 127)
        la, ha = self.a_scale or wide
        lb, hb = self.b_scale or wide
        ls, hs = self.scale_sum or (la + lb, ha + hb)
        return (max(la, ls - hb), min(ha, hs - lb)), (max(lb, ls - ha), min(hb, hs - la))

    def _scales(self, out: VectorSet, rng: np.random.Generator) -> dict:
        """Scale pairs of a 1 x 1-dot set redrawn where any range is broken."""
        wide = (-127, 127)
        la, ha = self.a_scale or wide
        lb, hb = self.b_scale or wide
        ls, hs = self.scale_sum or (la + lb, ha + hb)
        # exponents of A that leave B a value: la..ha within ls - hb .. hs - lb
        lo_a, hi_a = max(la, ls - hb), min(ha, hs - lb)
        if lo_a > hi_a:
            raise ValueError("the domain's scale ranges admit no scale pair")
        sa = out.a_scale.astype(np.int64)               # (D, 1, blocks)
        sb = np.swapaxes(out.b_scale.astype(np.int64), 1, 2)   # (D, 1, blocks)
        ea, eb = sa - 127, sb - 127
        bad = (sa == 0xFF) | (sb == 0xFF) | (ea < la) | (ea > ha) | (eb < lb) | (eb > hb) | (
            ea + eb < ls) | (ea + eb > hs)
        # a pair in EDGE_ONE_IN goes to an edge of the sum's range, inside or not before
        bad |= rng.integers(0, EDGE_ONE_IN, bad.shape) == 0
        count = int(bad.sum())
        if count:
            new_a = rng.integers(lo_a, hi_a + 1, count)
            lo_b = np.maximum(lb, ls - new_a)
            hi_b = np.minimum(hb, hs - new_a)
            new_b = lo_b + (rng.random(count) * (hi_b - lo_b + 1)).astype(np.int64)
            new_b = np.minimum(new_b, hi_b)
            edge = rng.integers(0, 2, count) == 0
            top = rng.integers(0, 2, count) == 1
            # an edge: the sum at hs (or ls), B taking what A leaves, both inside their ranges
            want = np.where(top, hs, ls)
            e_a = np.clip(want - rng.integers(lb, hb + 1, count), la, ha)
            e_b = want - e_a
            ok = edge & (e_b >= lb) & (e_b <= hb)
            new_a = np.where(ok, e_a, new_a)
            new_b = np.where(ok, e_b, new_b)
            ea[bad], eb[bad] = new_a, new_b
        dtype = out.a_scale.dtype
        return {"a_scale": (ea + 127).astype(dtype),
                "b_scale": np.swapaxes(eb + 127, 1, 2).astype(dtype)}

    def unreachable(self, spec=None, *, takes_c: bool = True) -> dict[str, set[str]]:
        """Coverage bins (coverpoint -> bin names; ``a_class``/``b_class`` bins by class) that
        no input inside the domain can hit. With the unit ``spec`` (and ``takes_c=False``: a
        design without C) also the output classes the scale ranges put out of reach: every
        in-domain result is a multiple of the smallest product times 2**lo (lo: the smallest
        scale sum), so none is subnormal when that unit is a normal number, and none
        overflows when k * max|a| * max|b| * 2**hi is finite in the output format."""
        out: dict[str, set[str]] = {}
        if spec is not None and self.scaled:
            out.update(self._output_bins(spec, takes_c))
        for key in ("a", "b"):
            allowed = getattr(self, key)
            if allowed is not None:
                out[f"{key}_class"] = set(ELEMENT_CLASSES) - set(allowed)
        scale = set()
        if self.scaled:
            (lo_a, hi_a), (lo_b, hi_b) = self.exponent_ranges()
            scale.add("nan")
            if min(lo_a, lo_b) > -127:
                scale.add("min")
            if max(hi_a, hi_b) < 127:
                scale.add("max")
        if scale:
            out["scale_class"] = scale
            out["group_scale"] = set(scale)
        no_nan = all(getattr(self, key) is not None and "nan" not in getattr(self, key)
                     for key in ("a", "b")) and self.scaled
        no_inf = all(getattr(self, key) is not None and "inf" not in getattr(self, key)
                     for key in ("a", "b"))
        special = set()
        if no_nan:
            special.add("nan-operand")
        if no_inf:
            special |= {"inf-times-zero", "inf-minus-inf", "inf-only"}
        if special:
            out["special_case"] = special
        return out
