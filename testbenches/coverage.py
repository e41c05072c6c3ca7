"""Constrained-random stimulus and functional coverage for the dot-product unit.

:func:`stimulus` mixes the vector-set generator families with block-level constructions the
families do not make (cancellation inside one block, same-sign carries), so every coverpoint
below is reachable. :func:`measure` computes the coverpoints of a run from its stimulus, the
model's per-block results and the cycle trace, all with numpy before or after simulation (no
per-cycle Python), and :class:`Coverage` reports hits and holes against the minimum hits per
bin fixed in ``COVERPOINTS`` (docs/verification.md lists the same table).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from mxsim import cycle, formats, vectors
from mxsim.engine import fast
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

__all__ = ["COVERPOINTS", "Coverage", "stimulus", "measure"]

CLASSES = ("zero", "subnormal", "normal", "max", "nan", "inf")

#: coverpoint -> (bins, minimum hits per bin, what it means)
COVERPOINTS: dict[str, tuple[tuple[str, ...], int, str]] = {
    "a_class": (CLASSES, 4, "A's operand class at every lane position (lane x class)"),
    "b_class": (CLASSES, 4, "B's operand class at every lane position (lane x class)"),
    "scale_class": (("min", "max", "nan", "typical"), 4,
                    "scale codes of A and B: E8M0 0x00, 0xFE, 0xFF, others; UE4M3 (sign bit "
                    "ignored) 0x00-0x01, 0x7E, 0x7F, others"),
    "spread": (("0", "1-3", "4-15", "16+"), 4,
               "products truncated away entirely in a block (aligned below the LSB)"),
    "cancellation": (("none", "partial", "deep", "exact-zero"), 4,
                     "a block's result below its largest term: no, by 1-7 binades, by 8 or "
                     "more, or to exact zero with non-zero terms"),
    "carry_out": (("no", "yes"), 4, "the block's sum above its largest term's binade "
                                    "(carries out of the adder tree)"),
    "special_case": (("inf-times-zero", "inf-minus-inf", "inf-only", "nan-operand"), 4,
                     "blocks whose specials decide the result: an Inf times a zero (and no "
                     "NaN), +Inf and -Inf products, only Inf products of one sign, a NaN "
                     "operand (formats with Inf/NaN only)"),
    "round_carry": (("yes",), 4, "rounding to nearest carries into the exponent (the result "
                                 "a power of two that truncation would not give; RNE units)"),
    "output_class": (("zero", "subnormal", "normal", "overflow", "inf", "nan"), 4,
                     "class of each block's result; overflow: Inf from finite operands"),
    "backpressure": (("stall", "stall-run-3", "gap", "in-and-out", "back-to-back"), 4,
                     "cycles with o.valid and not o.ready, runs of 3+ such, input gaps, an "
                     "input and an output handshake together, input handshakes in "
                     "consecutive cycles"),
}


@dataclass
class Coverage:
    """Hits per bin of every coverpoint, and the holes: bins under their minimum, and every
    coverpoint the run should have measured but did not (``expected``), which is a hole too."""
    hits: dict[str, dict[str, int]] = field(default_factory=dict)
    expected: set[str] = field(default_factory=set)

    def unmeasured(self) -> list[str]:
        """Coverpoints expected of the run that it never measured."""
        return sorted(self.expected - set(self.hits))

    def holes(self) -> list[str]:
        out = [f"{point}: not measured" for point in self.unmeasured()]
        for point, bins in self.hits.items():
            minimum = COVERPOINTS[point.split("@")[0]][1]
            out += [f"{point}:{b} ({n} < {minimum})" for b, n in bins.items() if n < minimum]
        return out

    def merge(self, other: Coverage) -> None:
        self.expected |= other.expected
        for point, bins in other.hits.items():
            mine = self.hits.setdefault(point, {})
            for b, n in bins.items():
                mine[b] = mine.get(b, 0) + n

    def summary(self) -> str:
        lines = []
        for point, bins in self.hits.items():
            hit = sum(1 for b, n in bins.items()
                      if n >= COVERPOINTS[point.split("@")[0]][1])
            lines.append(f"  {point:14} {hit}/{len(bins)} bins   " + ", ".join(
                f"{b} {n}" for b, n in list(bins.items())[:8])
                + (" ..." if len(bins) > 8 else ""))
        lines += [f"  {point:14} not measured" for point in self.unmeasured()]
        holes = self.holes()
        lines.append(f"  holes: {len(holes)}" + (": " + ", ".join(holes[:12]) if holes else ""))
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"hits": self.hits, "holes": self.holes(), "unmeasured": self.unmeasured()}


def _classes(fmt: formats.Format, codes: npt.NDArray) -> npt.NDArray:
    """Index into CLASSES of each code."""
    cls = fmt.classify(codes)
    out = np.full(codes.shape, CLASSES.index("normal"))
    out[cls == formats.Class.ZERO] = CLASSES.index("zero")
    out[cls == formats.Class.SUBNORMAL] = CLASSES.index("subnormal")
    out[cls == formats.Class.NAN] = CLASSES.index("nan")
    out[cls == formats.Class.INF] = CLASSES.index("inf")
    if fmt.kind == "float":
        mag = codes & ((1 << (fmt.bits - 1)) - 1) if fmt.signed else codes
        out[(mag == (fmt.code_of_max & ((1 << (fmt.bits - 1)) - 1))) & (out == 2)] = 3
    else:
        i = codes.astype(np.uint8).view(np.int8)
        out[(i == 127) | (i == -128)] = CLASSES.index("max")
    return out


def _applicable(fmt: formats.Format) -> tuple[str, ...]:
    has = {"nan": fmt.has_nan, "inf": fmt.has_inf,
           "subnormal": fmt.kind == "float" and fmt.subnormals}
    return tuple(c for c in CLASSES if has.get(c, True))


def stimulus(spec: UnitSpec, dots: int, *, blocks: int = 2, seed: int = 0) -> VectorSet:
    """About ``dots`` dot products of ``blocks`` K-blocks each, constrained-random: every
    generator family, plus constructions the families do not make (each commented below):
    blocks that cancel inside themselves, same-sign blocks, INT8 -128 x -128 blocks, Inf x 0
    and +Inf - Inf blocks, C just below a power of two (round carries), sparse blocks under a
    dominant C, one-binade overflows and FP32-subnormal C values."""
    fams = [f for f in vectors.FAMILIES
            if spec.scale_format is not None or f not in ("nan-scale", "scale-extremes")]
    side = 16 if dots >= 20000 else 4           # big sets: fewer, larger batch entries
    per = max(1, dots // (len(fams) + 2) // (side * side))
    kw = dict(a_format=spec.a_format, b_format=spec.b_format, m=side, n=side, k=spec.k * blocks,
              scale_format=spec.scale_format, block=spec.block)
    vs = vectors.generate_suite(fams + ["normal", "max"], count=per, seed=seed, **kw)
    rng = np.random.default_rng([seed, 8])
    fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)
    a, b = vs.a.copy(), vs.b.copy()
    nb = a.shape[0]
    # Half the normal entries cancel inside each block: B's second half of every block
    # is the negated first half, A's second half repeats its first.
    k, h = spec.k, spec.k // 2
    chosen = [i for i, f in enumerate(vs.extra["families"]) if f == "normal"]
    for i in chosen[: max(1, len(chosen) // 2)]:
        for blk in range(blocks):
            lo = blk * k
            a[i, :, lo + h:lo + k] = a[i, :, lo:lo + h]
            b[i, lo + h:lo + k, :] = b[i, lo:lo + h, :] ^ (1 << (fb.bits - 1) if fb.kind ==
                                                           "float" else 0)
            if fb.kind == "int":
                vals = b[i, lo:lo + h, :].astype(np.uint8).view(np.int8).astype(np.int16)
                b[i, lo + h:lo + k, :] = np.clip(-vals, -127, 127).astype(np.int8).view(np.uint8)
    # Same-sign blocks (carries): the "max" entries with positive signs.
    for i, f in enumerate(vs.extra["families"]):
        if f == "max" and rng.random() < 0.5 and fb.kind == "float":
            a[i] &= (1 << (fa.bits - 1)) - 1
            b[i] &= (1 << (fb.bits - 1)) - 1
    # INT8 x INT8: blocks of -128 x -128 products, the largest sums the adder tree holds.
    if fa.kind == "int" and fb.kind == "int":
        mx = [i for i, f in enumerate(vs.extra["families"]) if f == "max"]
        for i in mx[::2]:
            a[i, :, :k] = 0x80
            b[i, :k, :] = 0x80
    # Inf x 0 and +Inf - Inf blocks (no NaN in them) where a format has Inf: half the uniform
    # entries, the two constructions in turn.
    one_a = int(fa.encode(np.array([1.0]))[0])          # the codes of 1.0
    one_b = int(fb.encode(np.array([1.0]))[0])
    inf_side = "a" if fa.has_inf else "b" if fb.has_inf else None
    if inf_side is not None:
        fi = fa if inf_side == "a" else fb
        pos, neg = fi.code_of_inf, fi.code_of_inf | (1 << (fi.bits - 1))
        uni = [i for i, f in enumerate(vs.extra["families"]) if f == "uniform"]
        for n, i in enumerate(uni[: max(2, len(uni) // 2)]):
            for blk in range(blocks):
                k0, k1 = blk * k, blk * k + 1
                if inf_side == "a":
                    a[i, :, k0] = pos
                    b[i, k0, :] = 0 if n % 2 == 0 else one_b
                    if n % 2:
                        a[i, :, k1], b[i, k1, :] = neg, one_b
                else:
                    b[i, k0, :] = pos
                    a[i, :, k0] = 0 if n % 2 == 0 else one_a
                    if n % 2:
                        b[i, k1, :], a[i, :, k1] = neg, one_a
    # Single-block llm entries: C just below a power of two, one binade above the products'
    # sum, so that rounding to nearest carries into the exponent.
    c = vs.c.copy()
    if blocks == 1:
        llm = [i for i, f in enumerate(vs.extra["families"]) if f == "llm"]
        if llm:
            sub = VectorSet(**{**vs.__dict__, "a": a[llm], "b": b[llm],
                               "c": np.zeros_like(c[llm]), "d": None,
                               "a_scale": None if vs.a_scale is None else vs.a_scale[llm],
                               "b_scale": None if vs.b_scale is None else vs.b_scale[llm],
                               "extra": {}})
            d0 = fast.dot(spec.replace(acc_rounding="rz"), sub).view(np.float32).astype(float)
            ok = np.isfinite(d0) & (d0 != 0) & (np.abs(d0) < 2.0 ** 100)
            e0 = np.floor(np.log2(np.where(ok, np.abs(d0), 1.0)))
            near = np.sign(d0) * (2.0 - 2.0 ** -23) * np.exp2(e0 + 24)
            c[llm] = np.where(ok, np.asarray(near, np.float32).view(np.uint32), c[llm])
    # c-dominant entries (the odd ones): only 2 or 8 non-zero products per block under a C far
    # above them, so that 1-3 or 4-15 products are truncated away (narrow formats, and INT8
    # whose products share one exponent, never spread so far on their own).
    cdom = [i for i, f in enumerate(vs.extra["families"]) if f == "c-dominant"]
    # With k <= 16 a third of them keep every product under a C of about 2**100: only a C
    # that far above can cut 16 products away.
    for n, i in enumerate(cdom[1::2]):
        keep = (2, 8)[n % 2] if k > 16 else (2, 8, k)[n % 3]
        for blk in range(blocks):
            a[i, :, blk * k + keep:blk * k + k] = 0
        if keep == k:                   # every product non-zero, and all below C's LSB
            a[i] = np.where(fa.classify(a[i]) == formats.Class.ZERO, one_a, a[i])
            b[i] = np.where(fb.classify(b[i]) == formats.Class.ZERO, one_b, b[i])
            man = rng.integers(0, 1 << 23, size=c[i].shape, dtype=np.uint32)
            sign = rng.integers(0, 2, size=c[i].shape, dtype=np.uint32) << 31
            c[i] = sign | np.uint32(227 << 23) | man
    # Scaled units, c-dominant entries: results just past FP32's largest binade. One product
    # 1.0 x 1.0 x 2**127 and C = +-max sum to 1.5 * 2**128, an overflow by one binade.
    if spec.scale_format == "e8m0" and vs.a_scale is not None:
        sa, sb = vs.a_scale.copy(), vs.b_scale.copy()
        cd = [i for i, f in enumerate(vs.extra["families"]) if f == "c-dominant"]
        for i in cd[::2]:
            a[i, :, :k] = 0
            a[i, :, 0] = one_a
            b[i, :k, :] = 0
            b[i, 0, :] = one_b
            sa[i, :, 0], sb[i, 0, :] = 254, 127
            sign = rng.integers(0, 2, size=c[i].shape, dtype=np.uint32) << 31
            c[i] = np.uint32(0x7F7FFFFF) | sign
        vs = VectorSet(**{**vs.__dict__, "a_scale": sa, "b_scale": sb})
    # Half the entries of zeros get FP32-subnormal C values: subnormal results.
    zeros = [i for i, f in enumerate(vs.extra["families"]) if f == "zeros"]
    for i in zeros[::2]:                       # the others keep their zero results
        sub = rng.integers(1, 1 << 23, size=c[i].shape, dtype=np.uint32)
        c[i] = sub | (rng.integers(0, 2, size=c[i].shape, dtype=np.uint32) << 31)
    return VectorSet(**{**vs.__dict__, "a": a, "b": b, "c": c,
                        "extra": {**vs.extra, "stimulus": "mxsim constrained-random"}}
                     ) if nb else vs


def block_results(spec: UnitSpec, vs: VectorSet) -> npt.NDArray[np.uint32]:
    """The FP32 result after each block of every dot: (dots, blocks)."""
    nblk = vs.k // spec.k
    out = []
    for b in range(1, nblk + 1):
        cut = VectorSet(**{**vs.__dict__, "a": vs.a[..., :b * spec.k],
                           "b": vs.b[..., :b * spec.k, :],
                           "a_scale": None if vs.a_scale is None else
                           vs.a_scale[..., :b * spec.k // vs.block],
                           "b_scale": None if vs.b_scale is None else
                           vs.b_scale[..., :b * spec.k // vs.block, :], "d": None})
        out.append(fast.dot(spec, cut).reshape(-1))
    return np.stack(out, axis=1)


def measure(spec: UnitSpec, vs: VectorSet, trace: cycle.Trace | None, lanes: int) -> Coverage:
    """Every coverpoint of one run. Without a ``trace`` the handshake coverpoint
    (``backpressure``) is not measured, and the coverage says so: it is a hole."""
    cov = Coverage()
    fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    k, nblk = spec.k, vs.k // spec.k
    a = vs.a.reshape(nb, vs.m, nblk, k)
    b = vs.b.reshape(nb, nblk, k, vs.n)
    for name, fmt, codes, axis in (("a_class", fa, a, 3), ("b_class", fb, b, 2)):
        cls = _classes(fmt, codes)
        lane = np.arange(k) % lanes
        shape = [1] * cls.ndim
        shape[axis] = k
        lane = np.broadcast_to(lane.reshape(shape), cls.shape)
        counts = np.zeros((lanes, len(CLASSES)), np.int64)
        np.add.at(counts, (lane.reshape(-1), cls.reshape(-1)), 1)
        cov.hits[name] = {f"lane{ln}:{CLASSES[c]}": int(counts[ln, c]) for ln in range(lanes)
                          for c in range(len(CLASSES)) if CLASSES[c] in _applicable(fmt)}
    if spec.scale_format is not None:
        s = np.concatenate([vs.a_scale.reshape(-1), vs.b_scale.reshape(-1)]).astype(int)
        lo, hi, nan_code = (0, 0xFE, 0xFF) if spec.scale_format == "e8m0" else (1, 0x7E, 0x7F)
        if spec.scale_format == "ue4m3":
            s = s & 0x7F
        cov.hits["scale_class"] = {"min": int((s <= lo).sum()), "max": int((s == hi).sum()),
                                   "nan": int((s == nan_code).sum()),
                                   "typical": int(((s > lo) & (s < hi)).sum())}

    # Block-level points: exponents of every product, the block's largest, its result.
    res = block_results(spec, vs).reshape(nb, vs.m, vs.n, nblk)
    c0 = (vs.c.reshape(nb, vs.m, vs.n) if vs.c is not None
          else np.zeros((nb, vs.m, vs.n), np.uint32))
    c_in = np.concatenate([c0[..., None], res[..., :-1]], axis=-1)      # C of each block
    sa_, ea, siga = fa.fields(a)
    sb_, eb, sigb = fb.fields(b)
    # (nb, m, n, nblk, k) alignment exponents, e_zero for zero products
    ea5 = ea.astype(np.int64)[:, :, None, :, :]                          # nb, m, 1, nblk, k
    eb5 = eb.astype(np.int64).transpose(0, 3, 1, 2)[:, None, :, :, :]     # nb, 1, n, nblk, k
    e = ea5 + eb5
    nz = (siga != 0)[:, :, None, :, :] & (sigb != 0).transpose(0, 3, 1, 2)[:, None]
    if spec.scale_format is not None:
        fs = formats.get(spec.scale_format)
        _, sa, sig_sa = fs.fields(vs.a_scale.reshape(nb, vs.m, nblk))
        _, sb, sig_sb = fs.fields(vs.b_scale.reshape(nb, nblk, vs.n))
        sa, sb = sa.astype(np.int64), sb.astype(np.int64)
        e = e + sa[:, :, None, :, None] + sb.transpose(0, 2, 1)[:, None, :, :, None]
        nz = nz & (sig_sa != 0)[:, :, None, :, None] & \
            (sig_sb != 0).transpose(0, 2, 1)[:, None, :, :, None]
        scale_nan_a = fs.classify(vs.a_scale.reshape(nb, vs.m, nblk)) == formats.Class.NAN
        scale_nan_b = fs.classify(vs.b_scale.reshape(nb, nblk, vs.n)) == formats.Class.NAN
    e = np.where(nz, e, spec.e_zero)
    f32 = formats.get("fp32")
    _, ec, sigc = f32.fields(c_in)
    ec = np.where(sigc != 0, ec.astype(np.int64), spec.e_zero)
    big = np.maximum(e.max(axis=-1), ec)
    lost = (nz & (big[..., None] - e > spec.frac_bits + 2)).sum(axis=-1)
    cov.hits["spread"] = {"0": int((lost == 0).sum()),
                          "1-3": int(((lost >= 1) & (lost <= 3)).sum()),
                          "4-15": int(((lost >= 4) & (lost <= 15)).sum()),
                          "16+": int((lost >= 16).sum())}
    cls = f32.classify(res)
    _, er, sigr = f32.fields(res)
    finite_nz = (cls == formats.Class.NORMAL) | (cls == formats.Class.SUBNORMAL)
    anyterm = nz.any(axis=-1) | (sigc != 0)
    drop = big - er.astype(np.int64)
    cov.hits["cancellation"] = {
        "none": int((finite_nz & (drop <= 0)).sum()),
        "partial": int((finite_nz & (drop >= 1) & (drop <= 7)).sum()),
        "deep": int((finite_nz & (drop >= 8)).sum()),
        "exact-zero": int(((cls == formats.Class.ZERO) & anyterm).sum())}
    if spec.acc_rounding.value == "rne":
        rz = block_results(spec.replace(acc_rounding="rz"), vs).reshape(res.shape)
        _, er_z, _ = f32.fields(rz)
        man = f32.man(res)
        carry = finite_nz & (man == 0) & (er.astype(np.int64) > er_z.astype(np.int64)) & \
            (f32.classify(rz) != formats.Class.INF)
        cov.hits["round_carry"] = {"yes": int(carry.sum())}
    cov.hits["carry_out"] = {"no": int((finite_nz & (er < big + 2)).sum()),
                             "yes": int((finite_nz & (er >= big + 2)).sum())}
    operands_special = (_classes(fa, a) >= 4).any(axis=-1)[:, :, None, :] | \
        (_classes(fb, b) >= 4).any(axis=-2).transpose(0, 2, 1)[:, None, :, :]
    if spec.scale_format is not None:
        operands_special = operands_special | scale_nan_a[:, :, None, :] | \
            scale_nan_b.transpose(0, 2, 1)[:, None, :, :]
    c_special = (f32.classify(c_in) == formats.Class.NAN) | (f32.classify(c_in) ==
                                                              formats.Class.INF)
    if fa.has_inf or fb.has_inf or fa.has_nan or fb.has_nan:
        # (nb, m, nblk, k) and (nb, n, nblk, k)
        ca, cb = _classes(fa, a), _classes(fb, b).transpose(0, 3, 1, 2)
        ia = (ca == 5)[:, :, None]
        ib = (cb == 5)[:, None]
        za = (ca == 0)[:, :, None]
        zb = (cb == 0)[:, None]
        sgn_a = (a >> (fa.bits - 1)).astype(bool)[:, :, None] if fa.signed else False
        sgn_b = (b >> (fb.bits - 1)).astype(bool).transpose(0, 3, 1, 2)[:, None] \
            if fb.signed else False
        pinf = (ia | ib) & ~(za | zb)
        negp = np.logical_xor(sgn_a, sgn_b)
        has_nan = ((ca == 4).any(-1)[:, :, None] | (cb == 4).any(-1)[:, None])
        ixz = ((ia & zb) | (za & ib)).any(-1) & ~has_nan
        both = (pinf & negp).any(-1) & (pinf & ~negp).any(-1) & ~has_nan
        only = pinf.any(-1) & ~both & ~ixz & ~has_nan
        cov.hits["special_case"] = {"inf-times-zero": int(ixz.sum()),
                                    "inf-minus-inf": int(both.sum()),
                                    "inf-only": int(only.sum()), "nan-operand": int(has_nan.sum())}
        if not (fa.has_inf or fb.has_inf):
            for key in ("inf-times-zero", "inf-minus-inf", "inf-only"):
                del cov.hits["special_case"][key]
    inf = cls == formats.Class.INF
    # Unscaled (or UE4M3-scaled: at most 448**4 * 2**16), the products cannot overflow FP32
    # on their own.
    cov.hits["output_class"] = {
        "zero": int((cls == formats.Class.ZERO).sum()),
        "subnormal": int((cls == formats.Class.SUBNORMAL).sum()),
        "normal": int((cls == formats.Class.NORMAL).sum()),
        "overflow": int((inf & ~operands_special & ~c_special).sum()),
        "inf": int(inf.sum()), "nan": int((cls == formats.Class.NAN).sum())}
    if spec.scale_format != "e8m0":
        del cov.hits["output_class"]["overflow"]
    if trace is not None:
        stall = trace.out_valid & ~trace.out_ready
        runs = np.convolve(stall.astype(int), np.ones(3, int), "valid") == 3
        taken_in = trace.in_valid & trace.in_ready
        taken_out = trace.out_valid & trace.out_ready
        cov.hits["backpressure"] = {
            "stall": int(stall.sum()), "stall-run-3": int(runs.sum()),
            "gap": int((~trace.in_valid).sum()),
            "in-and-out": int((taken_in & taken_out).sum()),
            "back-to-back": int((taken_in[1:] & taken_in[:-1]).sum())}
        if lanes < spec.k:          # a block takes k / lanes cycles: never back to back
            del cov.hits["backpressure"]["back-to-back"]
    cov.expected = set(cov.hits) | {"backpressure"}
    return cov
