"""Constrained-random stimulus for the dot-product unit (re-exported by
:mod:`testbenches.unit.coverage`, whose coverpoints it makes reachable).

:func:`stimulus` mixes the vector-set generator families with block-level constructions the
families do not make (:data:`CONSTRUCTIONS`: cancellation inside one block, same-sign carries,
round carries, sparse blocks under a dominant C, one-binade overflows, subnormal C, ...), each
applied in a fixed order with one seeded generator, so the same arguments give the same codes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from mxsim import formats, vectors
from mxsim.engine import fast
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

__all__ = ["CONSTRUCTIONS", "GROUP_CONSTRUCTIONS", "Draft", "stimulus", "stimulus_dots"]


@dataclass
class Draft:
    """A stimulus being built: the generator suite's codes (copies, changed in place by the
    constructions), its family per batch entry, and a seeded generator shared in turn."""
    spec: UnitSpec
    suite: VectorSet
    blocks: int
    rng: np.random.Generator
    a: npt.NDArray[np.uint8]
    b: npt.NDArray[np.uint8]
    c: npt.NDArray[np.uint32]
    a_scale: npt.NDArray[np.uint8] | None
    b_scale: npt.NDArray[np.uint8] | None
    with_c: bool = True                  #: False: the design takes no C (C is +0)

    @classmethod
    def of(cls, spec: UnitSpec, suite: VectorSet, blocks: int, seed: int,
           with_c: bool = True) -> Draft:
        copy = lambda x: None if x is None else x.copy()  # noqa: E731
        return cls(spec, suite, blocks, np.random.default_rng([seed, 8]), suite.a.copy(),
                   suite.b.copy(), suite.c.copy(), copy(suite.a_scale), copy(suite.b_scale),
                   with_c)

    @property
    def fa(self) -> formats.Format:
        return formats.get(self.spec.a_format)

    @property
    def fb(self) -> formats.Format:
        return formats.get(self.spec.b_format)

    def one(self, fmt: formats.Format) -> int:
        """The code of 1.0."""
        return int(fmt.encode(np.array([1.0]))[0])

    def entries(self, family: str) -> list[int]:
        """The batch entries the suite made with ``family``."""
        return [i for i, f in enumerate(self.suite.extra["families"]) if f == family]


def _cancel_in_block(d: Draft) -> None:
    """Half the normal entries cancel inside each block: B's second half of every block is the
    negated first half, A's second half repeats its first."""
    k, h, fb = d.spec.k, d.spec.k // 2, d.fb
    chosen = d.entries("normal")
    for i in chosen[: max(1, len(chosen) // 2)]:
        for blk in range(d.blocks):
            lo = blk * k
            d.a[i, :, lo + h:lo + k] = d.a[i, :, lo:lo + h]
            d.b[i, lo + h:lo + k, :] = d.b[i, lo:lo + h, :] ^ (
                1 << (fb.bits - 1) if fb.kind == "float" else 0)
            if fb.kind == "int":
                vals = d.b[i, lo:lo + h, :].astype(np.uint8).view(np.int8).astype(np.int16)
                d.b[i, lo + h:lo + k, :] = np.clip(-vals, -127, 127).astype(np.int8).view(
                    np.uint8)


def _same_sign(d: Draft) -> None:
    """Same-sign blocks (carries): about half the "max" entries with positive signs."""
    for i, f in enumerate(d.suite.extra["families"]):
        if f == "max" and d.rng.random() < 0.5 and d.fb.kind == "float":
            d.a[i] &= (1 << (d.fa.bits - 1)) - 1
            d.b[i] &= (1 << (d.fb.bits - 1)) - 1


def _int8_extremes(d: Draft) -> None:
    """INT8 x INT8: blocks of -128 x -128 products, the largest sums the adder tree holds."""
    if d.fa.kind == "int" and d.fb.kind == "int":
        for i in d.entries("max")[::2]:
            d.a[i, :, :d.spec.k] = 0x80
            d.b[i, :d.spec.k, :] = 0x80


def _inf_blocks(d: Draft) -> None:
    """Inf x 0 and +Inf - Inf blocks (no NaN in them) where a format has Inf: half the uniform
    entries, the two constructions in turn."""
    fa, fb, k = d.fa, d.fb, d.spec.k
    side = "a" if fa.has_inf else "b" if fb.has_inf else None
    if side is None:
        return
    fi, one = (fa, d.one(fb)) if side == "a" else (fb, d.one(fa))
    pos, neg = fi.code_of_inf, fi.code_of_inf | (1 << (fi.bits - 1))
    uni = d.entries("uniform")
    for n, i in enumerate(uni[: max(2, len(uni) // 2)]):
        for blk in range(d.blocks):
            k0, k1 = blk * k, blk * k + 1
            inf_at, other_at = ((d.a[i, :], d.b[i]) if side == "a" else (d.b[i].T, d.a[i].T))
            inf_at[..., k0] = pos
            other_at[k0] = 0 if n % 2 == 0 else one
            if n % 2:
                inf_at[..., k1], other_at[k1] = neg, one


def _round_carry(d: Draft) -> None:
    """Single-block llm entries: C just below a power of two, one binade above the products'
    sum, so that rounding to nearest carries into the exponent."""
    llm = d.entries("llm")
    if d.blocks != 1 or not llm:
        return
    vs = d.suite
    sub = vs.replace(a=d.a[llm], b=d.b[llm], c=np.zeros_like(d.c[llm]), d=None,
                     a_scale=None if vs.a_scale is None else vs.a_scale[llm],
                     b_scale=None if vs.b_scale is None else vs.b_scale[llm], extra={})
    d0 = fast.dot(d.spec.replace(acc_rounding="rz"), sub).view(np.float32).astype(float)
    ok = np.isfinite(d0) & (d0 != 0) & (np.abs(d0) < 2.0 ** 100)
    e0 = np.floor(np.log2(np.where(ok, np.abs(d0), 1.0)))
    near = np.sign(d0) * (2.0 - 2.0 ** -23) * np.exp2(e0 + 24)
    d.c[llm] = np.where(ok, np.asarray(near, np.float32).view(np.uint32), d.c[llm])


def _sparse_under_c(d: Draft) -> None:
    """c-dominant entries (the odd ones): only 2 or 8 non-zero products per block under a C far
    above them, so that 1-3 or 4-15 products are truncated away (narrow formats, and INT8
    whose products share one exponent, never spread so far on their own). With k <= 16 a third
    of them keep every product under a C of about 2**100: only a C that far above can cut 16
    products away."""
    k, fa, fb = d.spec.k, d.fa, d.fb
    for n, i in enumerate(d.entries("c-dominant")[1::2]):
        keep = (2, 8)[n % 2] if k > 16 else (2, 8, k)[n % 3]
        for blk in range(d.blocks):
            d.a[i, :, blk * k + keep:blk * k + k] = 0
        if keep == k:                   # every product non-zero, and all below C's LSB
            d.a[i] = np.where(fa.classify(d.a[i]) == formats.Class.ZERO, d.one(fa), d.a[i])
            d.b[i] = np.where(fb.classify(d.b[i]) == formats.Class.ZERO, d.one(fb), d.b[i])
            man = d.rng.integers(0, 1 << 23, size=d.c[i].shape, dtype=np.uint32)
            sign = d.rng.integers(0, 2, size=d.c[i].shape, dtype=np.uint32) << 31
            d.c[i] = sign | np.uint32(227 << 23) | man


def _one_binade_overflow(d: Draft) -> None:
    """E8M0-scaled units, the even c-dominant entries: results just past FP32's largest binade.
    One product 1.0 x 1.0 x 2**127 and C = +-max sum to 1.5 * 2**128, an overflow by one
    binade."""
    if d.spec.scale_format != "e8m0" or d.a_scale is None:
        return
    k = d.spec.k
    for i in d.entries("c-dominant")[::2]:
        d.a[i, :, :k] = 0
        d.a[i, :, 0] = d.one(d.fa)
        d.b[i, :k, :] = 0
        d.b[i, 0, :] = d.one(d.fb)
        d.a_scale[i, :, 0], d.b_scale[i, 0, :] = 254, 127
        sign = d.rng.integers(0, 2, size=d.c[i].shape, dtype=np.uint32) << 31
        d.c[i] = np.uint32(0x7F7FFFFF) | sign


def _subnormal_c(d: Draft) -> None:
    """Half the entries of zeros get FP32-subnormal C values: subnormal results (the others
    keep their zero results)."""
    for i in d.entries("zeros")[::2]:
        sub = d.rng.integers(1, 1 << 23, size=d.c[i].shape, dtype=np.uint32)
        d.c[i] = sub | (d.rng.integers(0, 2, size=d.c[i].shape, dtype=np.uint32) << 31)


def _zero_c_cancels(d: Draft) -> None:
    """Exact units (frac_bits null) with one block per dot, C an input: half the cancellation
    entries, whose products sum to exactly 0, get C = +-0, so the result is an exact zero from
    non-zero terms (a chained block would reach it from the previous result; one block needs
    the C). Units mxsim's RTL generator builds always truncate: their stimuli are unchanged."""
    if d.blocks != 1 or d.spec.frac_bits is not None:
        return
    for i in d.entries("cancellation")[::2]:
        d.c[i] = d.rng.integers(0, 2, size=d.c[i].shape, dtype=np.uint32) << 31


def _top_codes(d: Draft) -> None:
    """Units without specials (specials "none"): half the "max" entries take the all-ones
    magnitude (E4M3 S.1111.111, E5M2's Inf/NaN codes), the largest number such a unit reads,
    at every lane, and the nan-scale entries the E8M0 scale 0xFF (2**128 there) at every
    other row and column (the class bins name these codes by the formats' IEEE reading)."""
    if d.spec.specials != "none":
        return
    for i in d.entries("max")[::2]:
        for codes, f in ((d.a, d.fa), (d.b, d.fb)):
            if f.kind == "float":
                codes[i] |= np.uint8((1 << (f.bits - 1)) - 1)
    if d.spec.scale_format == "e8m0" and d.a_scale is not None and d.b_scale is not None:
        for i in d.entries("nan-scale"):
            d.a_scale[i, ::2, :] = 0xFF
            d.b_scale[i, :, ::2] = 0xFF


def _subnormal_by_scales(d: Draft) -> None:
    """Designs without C, E8M0 scales: C cannot make subnormal results, so half the llm
    entries take scales that put their products about 2**-133 (FP32's and e8mN's subnormal
    range lies below 2**-126)."""
    if d.with_c or d.spec.scale_format != "e8m0" or d.a_scale is None or d.b_scale is None:
        return
    for i in d.entries("llm")[::2]:
        d.a_scale[i] = 127 - 66
        d.b_scale[i] = 127 - 67 + d.rng.integers(-3, 4, size=d.b_scale[i].shape)


def _round_carry_without_c(d: Draft) -> None:
    """Designs without C, float elements, one block per dot: C cannot carry a rounding into
    the next binade, so the odd llm entries hold 2**16 - 2**-9 (2**8 x 2**8 and -2**-4 x
    2**-5, the rest 0): 25 significant bits, which round to nearest up to 2**16."""
    fa, fb = d.fa, d.fb
    if d.with_c or d.blocks != 1 or fa.kind != "float" or fb.kind != "float" \
            or fa.emax < 8 or fb.emax < 8 or fa.emin > -5 or fb.emin > -5:
        return
    k = d.spec.k
    for i in d.entries("llm")[1::2]:
        d.a[i, :, :k] = 0
        d.b[i, :k, :] = 0
        d.a[i, :, 0], d.b[i, 0, :] = fa.encode(np.array([256.0]))[0], fb.encode(
            np.array([256.0]))[0]
        d.a[i, :, 1], d.b[i, 1, :] = fa.encode(np.array([-2.0 ** -4]))[0], fb.encode(
            np.array([2.0 ** -5]))[0]
        if d.a_scale is not None and d.b_scale is not None:
            d.a_scale[i], d.b_scale[i] = 127, 127


#: The block-level constructions the generator families do not make, by name, in the order
#: :func:`stimulus` applies them (they share one seeded generator, so the order is part of
#: the stimulus).
CONSTRUCTIONS: dict[str, Callable[[Draft], None]] = {
    "cancel-in-block": _cancel_in_block,
    "same-sign": _same_sign,
    "int8-extremes": _int8_extremes,
    "inf-blocks": _inf_blocks,
    "round-carry": _round_carry,
    "sparse-under-c": _sparse_under_c,
    "one-binade-overflow": _one_binade_overflow,
    "subnormal-c": _subnormal_c,
    "zero-c-cancels": _zero_c_cancels,
    "top-codes": _top_codes,
    "subnormal-by-scales": _subnormal_by_scales,
    "round-carry-without-c": _round_carry_without_c,
}


# -- GST-FDPA (grouped) units ------------------------------------------------------------

def _big_small(d: Draft) -> tuple[tuple[int, int], tuple[int, int]]:
    """Scale codes (A, B) of a leading block and of the blocks under it: E8M0 2**20 x 2**20
    over about 2**-12 x 2**-12; UE4M3 448 x 448 (largest) over the smallest subnormal."""
    if d.spec.scale_format == "e8m0":
        return (147, 147), (115, 115 + int(d.rng.integers(-4, 5)))
    return (0x7E, 0x7E), (0x01, 0x01 + int(d.rng.integers(0, 3)))


def _lead_block_entries(d: Draft, role: int) -> list[int]:
    """The second half of the normal entries (cancel-in-block takes the first), every third
    from ``role``."""
    chosen = d.entries("normal")
    return chosen[max(1, len(chosen) // 2):][role::3]


def _set_lead_scales(d: Draft, i: int) -> None:
    big, small = _big_small(d)
    per = d.spec.k // d.spec.block
    d.a_scale[i] = small[0]
    d.b_scale[i] = small[1]
    d.a_scale[i, :, ::per] = big[0]          # scale block 0 of every K-block leads
    d.b_scale[i, ::per, :] = big[1]
    d.c[i] = 0


def _cancel_groups(d: Draft, i: int, lo: int, hi: int) -> None:
    """Every group of products ``lo .. hi`` of entry ``i`` cancels: its second half is its
    first half with B negated."""
    G, h, fb = d.spec.group, d.spec.group // 2, d.fb
    for g0 in range(lo, hi, G):
        d.a[i, :, g0 + h:g0 + G] = d.a[i, :, g0:g0 + h]
        first = d.b[i, g0:g0 + h, :]
        if fb.kind == "float":
            d.b[i, g0 + h:g0 + G, :] = first ^ (1 << (fb.bits - 1))
        else:
            vals = first.astype(np.uint8).view(np.int8).astype(np.int16)
            d.b[i, g0 + h:g0 + G, :] = np.clip(-vals, -127, 127).astype(np.int8).view(np.uint8)


def _zero_group_leads(d: Draft) -> None:
    """Grouped units: scale block 0 of every K-block holds only zero products under the
    largest scales, C = 0: the e_zero rule decides the maximum."""
    if d.spec.group is None:
        return
    k, blk = d.spec.k, d.spec.block
    for i in _lead_block_entries(d, 0):
        _set_lead_scales(d, i)
        for b0 in range(0, d.blocks * k, k):
            d.a[i, :, b0:b0 + blk] = 0


def _cancelling_group_leads(d: Draft) -> None:
    """Grouped units: scale block 0 of every K-block cancels group by group under the largest
    scales, C = 0: the cancelling groups keep their exponent, the maximum, and the others
    are truncated under it (often to an exact zero)."""
    if d.spec.group is None:
        return
    k, blk = d.spec.k, d.spec.block
    for i in _lead_block_entries(d, 1):
        _set_lead_scales(d, i)
        for b0 in range(0, d.blocks * k, k):
            _cancel_groups(d, i, b0, b0 + blk)


def _all_groups_cancel(d: Draft) -> None:
    """Grouped units: every group cancels and C = 0, an exact zero from non-zero terms."""
    if d.spec.group is None:
        return
    for i in _lead_block_entries(d, 2):
        _cancel_groups(d, i, 0, d.blocks * d.spec.k)
        d.c[i] = 0


def _far_c(d: Draft) -> None:
    """Grouped units: the sparse c-dominant entries (odd ones) under a C of about 2**100, far
    enough above F = 35 that their 2 or 8 products per block are truncated away."""
    if d.spec.group is None:
        return
    for i in d.entries("c-dominant")[1::2]:
        man = d.rng.integers(0, 1 << 23, size=d.c[i].shape, dtype=np.uint32)
        sign = d.rng.integers(0, 2, size=d.c[i].shape, dtype=np.uint32) << 31
        d.c[i] = sign | np.uint32(227 << 23) | man


#: GST-FDPA constructions (:mod:`testbenches.unit.group_coverage` measures what they reach), applied
#: after :data:`CONSTRUCTIONS` to grouped specs only: every other unit's stimulus is unchanged.
GROUP_CONSTRUCTIONS: dict[str, Callable[[Draft], None]] = {
    "zero-group-leads": _zero_group_leads,
    "cancelling-group-leads": _cancelling_group_leads,
    "all-groups-cancel": _all_groups_cancel,
    "far-c": _far_c,
}


def _layout(spec: UnitSpec, dots: int) -> tuple[list[str], int, int]:
    """The generator families, the side of a batch entry and the entries per family of a
    :func:`stimulus` of about ``dots`` dot products."""
    fams = [f for f in vectors.FAMILIES
            if spec.scale_format is not None or f not in ("nan-scale", "scale-extremes")]
    side = 16 if dots >= 20000 else 4           # big sets: fewer, larger batch entries
    return fams, side, max(1, dots // (len(fams) + 2) // (side * side))


def stimulus_dots(spec: UnitSpec, dots: int) -> int:
    """How many dot products :func:`stimulus` makes when asked for about ``dots`` (without
    making them: a campaign plans its chunks from it)."""
    fams, side, per = _layout(spec, dots)
    return per * (len(fams) + 2) * side * side


def stimulus(spec: UnitSpec, dots: int, *, blocks: int = 2, seed: int = 0,
             with_c: bool = True) -> VectorSet:
    """About ``dots`` dot products of ``blocks`` K-blocks each, constrained-random: every
    generator family, then every construction of :data:`CONSTRUCTIONS` on the suite's
    entries (blocks that cancel inside themselves, same-sign blocks, INT8 -128 x -128 blocks,
    Inf x 0 and +Inf - Inf blocks, C just below a power of two (round carries), sparse blocks
    under a dominant C, one-binade overflows and FP32-subnormal C values; for exact units a
    zero C under exactly cancelling products, for units without specials the all-ones
    codes). With ``with_c=False`` (a design that takes no C) every C is +0, and two more
    constructions make what C made: subnormal results (by the scales) and round carries.

    A unit whose C and D are FP16 or BF16 gets the stimulus of its FP32 twin (the
    constructions aim at FP32 boundaries), C then rounded to its format, to nearest even."""
    if spec.d_format != "fp32":
        twin = spec.replace(d_format="fp32", acc_format="fp32", nan_code=None)
        vs = stimulus(twin, dots, blocks=blocks, seed=seed, with_c=with_c)
        c = formats.get(spec.d_format).encode(formats.get("fp32").decode(vs.c), "rne",
                                              saturate=False)
        return vs.replace(c=c, c_format=spec.d_format, d_format=spec.d_format)
    fams, side, per = _layout(spec, dots)
    suite = vectors.generate_suite(fams + ["normal", "max"], count=per, seed=seed,
                                   a_format=spec.a_format, b_format=spec.b_format, m=side,
                                   n=side, k=spec.k * blocks, scale_format=spec.scale_format,
                                   block=spec.block)
    if not suite.a.shape[0]:
        return suite
    draft = Draft.of(spec, suite, blocks, seed, with_c)
    for construct in CONSTRUCTIONS.values():
        construct(draft)
    if spec.group is not None:        # GST-FDPA: the grouped constructions too
        for construct in GROUP_CONSTRUCTIONS.values():
            construct(draft)
    if not with_c:
        draft.c[...] = 0
    return suite.replace(a=draft.a, b=draft.b, c=draft.c, a_scale=draft.a_scale,
                         b_scale=draft.b_scale,
                         extra={**suite.extra, "stimulus": "mxsim constrained-random"})
