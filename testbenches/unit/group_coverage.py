"""Coverage and stimulus of GST-FDPA units (``spec.group`` set): per-group scale classes and the
group cases whose rules the RTL must get right.

:func:`measure` gives the two grouped coverpoints of :data:`GROUP_COVERPOINTS` from a vector
set and the C each block starts from (numpy only): ``group_scale`` (the class of each group's
A and B scale codes, by group position) and ``group_case`` (different scales in one
instruction, all-zero groups, cancelling groups, and the ones of them that decide the
instruction's largest exponent, zero UE4M3 scales under non-zero products, group sums that
reach their top bit). ``testbenches.unit.stimulus.GROUP_CONSTRUCTIONS`` make the rare ones
reachable: each acts on grouped specs only, so the stimulus of every other unit is unchanged.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from mxsim import formats
from mxsim.spec import UnitSpec, group_sum_bits
from mxsim.vectors import VectorSet

__all__ = ["GROUP_COVERPOINTS", "measure", "scale_class_bins", "group_sums"]

#: coverpoint -> (bins, minimum hits per bin, what it means); grouped specs only
GROUP_COVERPOINTS: dict[str, tuple[tuple[str, ...], int, str]] = {
    "group_scale": (("zero", "min", "max", "nan", "normal"), 4,
                    "class of each group's A and B scale codes, by group position "
                    "(group<g>:<class>): E8M0 min 0x00, max 0xFE, NaN 0xFF (no zero); UE4M3 "
                    "(sign bit ignored) zero 0x00, min 0x01, max 0x7E, NaN 0x7F"),
    "group_case": (("different-scales", "all-zero-group", "all-zero-group-leads",
                    "cancelling-group", "cancelling-group-leads", "zero-scale-group",
                    "group-sum-top"), 4,
                   "K-blocks with group terms of different scale exponents; a group of zero "
                   "products (leads: its scale exponents' sum above every other term's, so "
                   "the e_zero rule decides the maximum); a group whose non-zero products "
                   "cancel (leads: its scale exponent is the maximum); a zero UE4M3 scale "
                   "under non-zero products; a group sum using its top bit"),
}


def scale_class_bins(scale_format: str) -> tuple[str, ...]:
    """The ``group_scale`` classes a scale format has (E8M0 has no zero)."""
    return tuple(c for c in GROUP_COVERPOINTS["group_scale"][0]
                 if c != "zero" or scale_format == "ue4m3")


def _scale_class(scale_format: str, codes: npt.NDArray) -> npt.NDArray:
    """Index into :func:`scale_class_bins` of each scale code."""
    s = codes.astype(np.int64)
    names = scale_class_bins(scale_format)
    out = np.full(s.shape, names.index("normal"))
    if scale_format == "e8m0":
        marks = {"min": 0x00, "max": 0xFE, "nan": 0xFF}
    else:
        s = s & 0x7F
        marks = {"zero": 0x00, "min": 0x01, "max": 0x7E, "nan": 0x7F}
    for name, code in marks.items():
        out[s == code] = names.index(name)
    return out


def _fixed(fmt: formats.Format, codes: npt.NDArray) -> tuple[npt.NDArray, npt.NDArray]:
    """Signed integer values of ``codes`` in units of the format's smallest step (NaN/Inf 0),
    and whether each is non-zero."""
    sign, e, sig = fmt.fields(codes)
    cls = fmt.classify(codes)
    special = (cls == formats.Class.NAN) | (cls == formats.Class.INF)
    lsb_min = (fmt.emin - fmt.man_bits) if fmt.kind == "float" else -fmt.man_bits
    val = sig.astype(np.int64) << (e.astype(np.int64) - fmt.man_bits - lsb_min)
    val = np.where(special, 0, np.where(sign == 1, -val, val))
    return val, val != 0


def group_sums(spec: UnitSpec, vs: VectorSet) -> tuple[npt.NDArray, npt.NDArray]:
    """Every group's exact sum (units of the formats' smallest steps) and its count of non-zero
    products: (batch, M, N, K / G) each."""
    fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)
    nb, G = int(np.prod(vs.batch_shape, dtype=np.int64)), spec.group
    ng = vs.k // G
    va, nza = _fixed(fa, vs.a.reshape(nb, vs.m, ng, G))
    vb, nzb = _fixed(fb, vs.b.reshape(nb, ng, G, vs.n))
    sums = np.einsum("bmgj,bgjn->bmng", va, vb)
    count = np.einsum("bmgj,bgjn->bmng", nza.astype(np.int64), nzb.astype(np.int64))
    return sums, count


def _scale_exps(scale_format: str, codes: npt.NDArray) -> tuple[npt.NDArray, npt.NDArray]:
    """Exponents of scale codes (as the engine aligns them) and whether each is zero or NaN."""
    f = formats.get(scale_format)
    c = codes if scale_format == "e8m0" else codes & 0x7F
    _, e, sig = f.fields(c)
    cls = f.classify(c)
    odd = (cls == formats.Class.NAN) | ((sig == 0) & (cls != formats.Class.NAN))
    return e.astype(np.int64), odd


def measure(spec: UnitSpec, vs: VectorSet, c_exp: npt.NDArray) -> dict[str, dict[str, int]]:
    """The grouped coverpoints of ``vs``; ``c_exp`` is the alignment exponent of each block's C
    (batch, M, N, blocks: ``e_zero`` for a zero or special C)."""
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    k, G, blk = spec.k, spec.group, vs.block
    nblk, gpb = vs.k // k, k // G                      # K-blocks per dot, groups per K-block
    ga = np.repeat(vs.a_scale.reshape(nb, vs.m, -1), blk // G, axis=-1)     # (b, m, groups)
    gb = np.repeat(vs.b_scale.reshape(nb, -1, vs.n), blk // G, axis=-2)     # (b, groups, n)
    names = scale_class_bins(spec.scale_format)
    counts = np.zeros((gpb, len(names)), np.int64)
    pos_a = np.broadcast_to(np.arange(ga.shape[-1]) % gpb, ga.shape)
    pos_b = np.broadcast_to((np.arange(gb.shape[-2]) % gpb)[:, None], gb.shape)
    for pos, codes in ((pos_a, ga), (pos_b, gb)):
        np.add.at(counts, (pos.reshape(-1), _scale_class(spec.scale_format, codes).reshape(-1)),
                  1)
    scale_hits = {f"group{g}:{c}": int(counts[g, i]) for g in range(gpb)
                  for i, c in enumerate(names)}
    sums, nz = group_sums(spec, vs)                                         # (b, m, n, groups)
    ea, odd_a = _scale_exps(spec.scale_format, ga)
    eb, odd_b = _scale_exps(spec.scale_format, gb)
    e = ea[:, :, None, :] + eb.transpose(0, 2, 1)[:, None, :, :]             # (b, m, n, groups)
    odd = odd_a[:, :, None, :] | odd_b.transpose(0, 2, 1)[:, None, :, :]
    shape = (nb, vs.m, vs.n, nblk, gpb)
    sums, nz, e, odd = (x.reshape(shape) for x in (sums, nz, e, odd))
    zero = (nz == 0) & ~odd
    cancel = (nz > 0) & (sums == 0) & ~odd
    live = ~zero & ~odd                                   # groups aligned at their scales
    ok = ~odd.any(-1)                                     # blocks without zero/NaN scales

    top = 1 << (group_sum_bits(spec.a_format, spec.b_format, G) - 2)
    zscale = (nz > 0) & (odd & ~_nan_scale(spec, ga, gb, shape))
    cases = {
        "different-scales": int((ok & (e.max(-1) != e.min(-1))).sum()),
        "all-zero-group": int((zero.any(-1) & live.any(-1)).sum()),
        "all-zero-group-leads": _leads(zero, e, live, c_exp, ok, spec.e_zero),
        "cancelling-group": int(cancel.any(-1).sum()),
        "cancelling-group-leads": _leads(cancel, e, live, c_exp, ok, spec.e_zero),
        "zero-scale-group": int(zscale.any(-1).sum()),
        "group-sum-top": int((np.abs(sums) >= top).any(-1).sum()),
    }
    if spec.scale_format != "ue4m3":
        del cases["zero-scale-group"]
    return {"group_scale": scale_hits, "group_case": cases}


def _leads(mask, e, live, c_exp, ok, e_zero: int) -> int:
    """Blocks (without zero or NaN scales) with a group of ``mask`` whose scale exponent sum
    is above C's and every other live group's (not of ``mask``), one of which has non-zero
    products: the rule for ``mask``'s groups decides the block's maximum."""
    rest = live & ~mask
    best = np.maximum(np.where(rest, e, e_zero).max(-1), c_exp)
    hit = (mask & (e > best[..., None])).any(-1) & rest.any(-1) & ok
    return int(hit.sum())


def _nan_scale(spec: UnitSpec, ga, gb, shape) -> npt.NDArray:
    """Whether a group's A or B scale is NaN, in the (..., blocks, groups) shape of ``shape``."""
    nan = 0xFF if spec.scale_format == "e8m0" else 0x7F
    ma = (ga & (0xFF if spec.scale_format == "e8m0" else 0x7F)) == nan
    mb = (gb & (0xFF if spec.scale_format == "e8m0" else 0x7F)) == nan
    return (ma[:, :, None, :] | mb.transpose(0, 2, 1)[:, None, :, :]).reshape(shape)
