"""Constrained-random stimulus and functional coverage for the dot-product unit.

:func:`stimulus` mixes the vector-set generator families with block-level constructions the
families do not make (cancellation inside one block, same-sign carries), so every coverpoint
below is reachable. :func:`measure` computes the coverpoints of a run from its stimulus, the
model's per-block results and the cycle trace, all with numpy before or after simulation (no
per-cycle Python), and :class:`Coverage` reports hits and holes against the minimum hits per
bin fixed in ``COVERPOINTS`` (docs/verification.md lists the same table).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from mxsim import formats
from mxsim.engine import fast
from mxsim.engine.terms import product_terms
from mxsim.formats import Overflow
from mxsim.microarch import cycle
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

from . import group_coverage
from .stimulus import CONSTRUCTIONS, Draft, stimulus

__all__ = ["COVERPOINTS", "CONSTRUCTIONS", "CLASSES", "OperandClass", "Coverage", "Draft",
           "stimulus", "measure", "block_results", "drop_bins"]


class OperandClass(enum.IntEnum):
    """The class of an operand code, as the ``a_class``/``b_class`` bins name it (``max``: the
    largest finite magnitude; INT8: 127 and -128)."""
    ZERO = 0
    SUBNORMAL = 1
    NORMAL = 2
    MAX = 3
    NAN = 4
    INF = 5


#: The ``a_class``/``b_class`` bin names, in :class:`OperandClass` order.
CLASSES = tuple(c.name.lower() for c in OperandClass)

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
#: GST-FDPA units (``spec.group`` set) have two more (:mod:`testbenches.unit.group_coverage`).
COVERPOINTS.update(group_coverage.GROUP_COVERPOINTS)


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


def drop_bins(cov: Coverage, unreachable: dict[str, set[str]]) -> None:
    """Remove from ``cov`` the bins a design's input domain makes unreachable (coverpoint ->
    bin names; an ``a_class``/``b_class`` name stands for that class at every lane)."""
    for point, names in unreachable.items():
        bins = cov.hits.get(point)
        if bins is None:
            continue
        for b in list(bins):
            if b in names or b.split(":")[-1] in names:
                del bins[b]
        if not bins:
            del cov.hits[point]
            cov.expected.discard(point)


def _classes(fmt: formats.Format, codes: npt.NDArray) -> npt.NDArray:
    """The :class:`OperandClass` of each code."""
    cls = fmt.classify(codes)
    out = np.full(codes.shape, OperandClass.NORMAL)
    for fc, oc in ((formats.Class.ZERO, OperandClass.ZERO),
                   (formats.Class.SUBNORMAL, OperandClass.SUBNORMAL),
                   (formats.Class.NAN, OperandClass.NAN), (formats.Class.INF, OperandClass.INF)):
        out[cls == fc] = oc
    if fmt.kind == "float":
        mag = codes & ((1 << (fmt.bits - 1)) - 1) if fmt.signed else codes
        top = fmt.code_of_max & ((1 << (fmt.bits - 1)) - 1)
        out[(mag == top) & (out == OperandClass.NORMAL)] = OperandClass.MAX
    else:
        i = codes.astype(np.uint8).view(np.int8)
        out[(i == 127) | (i == -128)] = OperandClass.MAX
    return out


def _applicable(fmt: formats.Format) -> tuple[str, ...]:
    has = {"nan": fmt.has_nan, "inf": fmt.has_inf,
           "subnormal": fmt.kind == "float" and fmt.subnormals}
    return tuple(c for c in CLASSES if has.get(c, True))


# -- coverage -----------------------------------------------------------------------------------

def _fp32_codes(fmt: str, codes: npt.NDArray) -> npt.NDArray[np.uint32]:
    """FP16/BF16 codes as the FP32 codes of the same values (exact); FP32 codes as they are."""
    if fmt == "fp32":
        return codes.astype(np.uint32)
    return formats.get("fp32").encode(formats.get(fmt).decode(codes), "rne",
                                      saturate=False).astype(np.uint32)


def block_results(spec: UnitSpec, vs: VectorSet, want: npt.NDArray | None = None
                  ) -> npt.NDArray[np.uint32]:
    """The result after each block of every dot, as FP32 codes (an FP16/BF16 unit's values
    exactly): (dots, blocks). ``want``: the engine's result of every whole dot (codes of
    ``spec.d_format``), already computed: the last block's results."""
    nblk = vs.k // spec.k
    out = []
    for b in range(1, nblk + 1):
        if b == nblk and want is not None:
            out.append(_fp32_codes(spec.d_format, np.asarray(want).reshape(-1)))
            continue
        kb = b * spec.k
        cut = vs.replace(a=vs.a[..., :kb], b=vs.b[..., :kb, :], d=None,
                         a_scale=None if vs.a_scale is None else vs.a_scale[..., :kb // vs.block],
                         b_scale=None if vs.b_scale is None else
                         vs.b_scale[..., :kb // vs.block, :])
        out.append(_fp32_codes(spec.d_format, fast.dot(spec, cut).reshape(-1)))
    return np.stack(out, axis=1)


def measure(spec: UnitSpec, vs: VectorSet, trace: cycle.Trace | None, lanes: int, *,
            backpressure: bool = True, want: npt.NDArray | None = None) -> Coverage:
    """Every coverpoint of one run. Without a ``trace`` the handshake coverpoint
    (``backpressure``) is not measured, and the coverage says so: it is a hole. With
    ``backpressure=False`` (a design without a valid/ready output handshake) it is not a
    coverpoint at all. ``want``: the engine's results of the dots (:func:`block_results`),
    when the caller has them."""
    cov = Coverage()
    fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    k, nblk = spec.k, vs.k // spec.k
    a = vs.a.reshape(nb, vs.m, nblk, k)
    b = vs.b.reshape(nb, nblk, k, vs.n)
    cov.hits["a_class"] = _lane_classes(fa, a, 3, lanes)
    cov.hits["b_class"] = _lane_classes(fb, b, 2, lanes)
    if spec.scale_format is not None:
        cov.hits["scale_class"] = _scale_classes(spec.scale_format, vs)
    blk = _Blocks.of(spec, vs, want)
    if spec.frac_bits is not None:     # an exact sum truncates nothing
        cov.hits["spread"] = _bins(blk.lost, {"0": (0, 0), "1-3": (1, 3), "4-15": (4, 15),
                                              "16+": (16, None)})
    fin = blk.finite_nz
    cov.hits["cancellation"] = {**_bins(blk.drop[fin], {"none": (None, 0), "partial": (1, 7),
                                                        "deep": (8, None)}),
                                "exact-zero": int(((blk.cls == formats.Class.ZERO)
                                                   & blk.anyterm).sum())}
    if spec.acc_rounding.value == "rne":
        cov.hits["round_carry"] = {"yes": _round_carries(spec, vs, blk)}
    cov.hits["carry_out"] = {"no": int((fin & (blk.er < blk.big + 2)).sum()),
                             "yes": int((fin & (blk.er >= blk.big + 2)).sum())}
    if (fa.has_inf or fb.has_inf or fa.has_nan or fb.has_nan) and spec.specials == "ieee":
        cov.hits["special_case"] = _special_cases(fa, fb, a, b)
    cov.hits["output_class"] = _output_classes(spec, vs, blk)
    if spec.group is not None:
        _, ec, sigc = formats.get("fp32").fields(blk.c_in)
        c_exp = np.where(sigc != 0, ec.astype(np.int64), spec.e_zero)
        cov.hits.update(group_coverage.measure(spec, vs, c_exp))
    if trace is not None and backpressure:
        cov.hits["backpressure"] = _backpressure(trace, back_to_back=lanes >= spec.k)
    cov.expected = set(cov.hits) | ({"backpressure"} if backpressure else set())
    return cov


def _bins(x: npt.NDArray, ranges: dict[str, tuple[int | None, int | None]]) -> dict[str, int]:
    """How many of ``x`` fall in each closed range (None: unbounded)."""
    return {name: int((((x >= lo) if lo is not None else True)
                       & ((x <= hi) if hi is not None else True)).sum())
            for name, (lo, hi) in ranges.items()}


def _lane_classes(fmt: formats.Format, codes: npt.NDArray, axis: int, lanes: int
                  ) -> dict[str, int]:
    """Hits of every (lane, applicable class); ``axis`` of ``codes`` is the block's k."""
    cls = _classes(fmt, codes)
    k = codes.shape[axis]
    shape = [1] * cls.ndim
    shape[axis] = k
    lane = np.broadcast_to((np.arange(k) % lanes).reshape(shape), cls.shape)
    counts = np.zeros((lanes, len(OperandClass)), np.int64)
    np.add.at(counts, (lane.reshape(-1), cls.reshape(-1)), 1)
    return {f"lane{ln}:{c.name.lower()}": int(counts[ln, c]) for ln in range(lanes)
            for c in OperandClass if c.name.lower() in _applicable(fmt)}


def _scale_classes(scale_format: str, vs: VectorSet) -> dict[str, int]:
    s = np.concatenate([vs.a_scale.reshape(-1), vs.b_scale.reshape(-1)]).astype(int)
    lo, hi, nan_code = (0, 0xFE, 0xFF) if scale_format == "e8m0" else (1, 0x7E, 0x7F)
    if scale_format == "ue4m3":
        s = s & 0x7F                                   # the sign bit is ignored
    return {"min": int((s <= lo).sum()), "max": int((s == hi).sum()),
            "nan": int((s == nan_code).sum()), "typical": int(((s > lo) & (s < hi)).sum())}


@dataclass
class _Blocks:
    """Per block of every dot product (batch, M, N, blocks): its result and class, the C it
    starts from, its largest term exponent ``big``, and the products truncated away."""
    res: npt.NDArray[np.uint32]
    cls: npt.NDArray[np.uint8]
    er: npt.NDArray[np.int64]
    c_in: npt.NDArray[np.uint32]
    big: npt.NDArray[np.int64]
    lost: npt.NDArray[np.int64]
    anyterm: npt.NDArray[np.bool_]
    special: npt.NDArray[np.bool_]       #: an Inf or NaN operand or a NaN scale in the block

    @classmethod
    def of(cls, spec: UnitSpec, vs: VectorSet, want: npt.NDArray | None = None) -> _Blocks:
        nb = int(np.prod(vs.batch_shape, dtype=np.int64))
        res = block_results(spec, vs, want).reshape(nb, vs.m, vs.n, vs.k // spec.k)
        c0 = (_fp32_codes(vs.c_format, vs.c).reshape(nb, vs.m, vs.n) if vs.c is not None
              else np.zeros((nb, vs.m, vs.n), np.uint32))
        c_in = np.concatenate([c0[..., None], res[..., :-1]], axis=-1)      # C of each block
        f32 = formats.get("fp32")
        _, ec, sigc = f32.fields(c_in)
        ec = np.where(sigc != 0, ec.astype(np.int64), spec.e_zero)
        # A GST unit's terms are group sums; coverage looks at the products inside them.
        terms = product_terms(spec if spec.group is None
                              else spec.replace(group=None, reduce="chain", tree_formats=None),
                              vs)
        # Coverage counts an Inf or NaN product at its fields' exponent (the engine aligns it
        # at e_zero): only `spread` of blocks whose result is Inf or NaN sees the difference,
        # and every committed run was counted so.
        nz = ~terms.zero
        e = np.where(nz, terms.exp, spec.e_zero)
        big = np.maximum(e.max(axis=-1), ec)
        lost = (np.zeros(big.shape, np.int64) if spec.frac_bits is None      # exact: none
                else (nz & (big[..., None] - e > spec.frac_bits + 2)).sum(axis=-1))
        _, er, _ = f32.fields(res)
        return cls(res, f32.classify(res), er.astype(np.int64), c_in, big, lost,
                   nz.any(axis=-1) | (sigc != 0), terms.special.any(axis=-1))

    @property
    def finite_nz(self) -> npt.NDArray[np.bool_]:
        return (self.cls == formats.Class.NORMAL) | (self.cls == formats.Class.SUBNORMAL)

    @property
    def drop(self) -> npt.NDArray[np.int64]:
        """Binades from the largest term down to the result."""
        return self.big - self.er


def _round_carries(spec: UnitSpec, vs: VectorSet, blk: _Blocks) -> int:
    """Blocks whose RNE result is a power of two one binade above the RZ result's."""
    f32 = formats.get("fp32")
    rz = block_results(spec.replace(acc_rounding="rz"), vs).reshape(blk.res.shape)
    _, er_z, _ = f32.fields(rz)
    carry = blk.finite_nz & (f32.man(blk.res) == 0) & (blk.er > er_z.astype(np.int64)) & \
        (f32.classify(rz) != formats.Class.INF)
    return int(carry.sum())


def _special_cases(fa: formats.Format, fb: formats.Format, a: npt.NDArray, b: npt.NDArray
                   ) -> dict[str, int]:
    """Blocks whose specials decide the result; ``a`` is (batch, M, blocks, k) and ``b``
    (batch, blocks, k, N)."""
    ca, cb = _classes(fa, a), _classes(fb, b).transpose(0, 3, 1, 2)    # (.., M|N, blocks, k)
    ia, ib = (ca == OperandClass.INF)[:, :, None], (cb == OperandClass.INF)[:, None]
    za, zb = (ca == OperandClass.ZERO)[:, :, None], (cb == OperandClass.ZERO)[:, None]
    sgn_a = (a >> (fa.bits - 1)).astype(bool)[:, :, None] if fa.signed else False
    sgn_b = (b >> (fb.bits - 1)).astype(bool).transpose(0, 3, 1, 2)[:, None] \
        if fb.signed else False
    pinf = (ia | ib) & ~(za | zb)
    negp = np.logical_xor(sgn_a, sgn_b)
    has_nan = ((ca == OperandClass.NAN).any(-1)[:, :, None]
               | (cb == OperandClass.NAN).any(-1)[:, None])
    ixz = ((ia & zb) | (za & ib)).any(-1) & ~has_nan
    both = (pinf & negp).any(-1) & (pinf & ~negp).any(-1) & ~has_nan
    only = pinf.any(-1) & ~both & ~ixz & ~has_nan
    out = {"inf-times-zero": int(ixz.sum()), "inf-minus-inf": int(both.sum()),
           "inf-only": int(only.sum()), "nan-operand": int(has_nan.sum())}
    if not (fa.has_inf or fb.has_inf):
        for key in ("inf-times-zero", "inf-minus-inf", "inf-only"):
            del out[key]
    return out


def _output_classes(spec: UnitSpec, vs: VectorSet, blk: _Blocks) -> dict[str, int]:
    """Class of each block's result; overflow: Inf from finite operands and C (only E8M0
    scales can overflow FP32: unscaled or UE4M3-scaled, at most 448**4 * 2**16), or for a
    saturating unit a result that would be Inf without saturation. A unit without specials
    (``specials = "none"``) has no NaN bin, and no Inf bin when it saturates."""
    f32 = formats.get("fp32")
    c_cls = f32.classify(blk.c_in)
    c_special = (c_cls == formats.Class.NAN) | (c_cls == formats.Class.INF)
    inf = blk.cls == formats.Class.INF
    over = inf
    if spec.overflow is Overflow.SATURATE:
        unsat = block_results(spec.replace(overflow="inf"), vs).reshape(blk.res.shape)
        over = f32.classify(unsat) == formats.Class.INF
    special = blk.special
    if spec.specials == "none":     # every code is a number: overflow is overflow
        special = c_special = np.zeros_like(inf)
    out = {"zero": int((blk.cls == formats.Class.ZERO).sum()),
           "subnormal": int((blk.cls == formats.Class.SUBNORMAL).sum()),
           "normal": int((blk.cls == formats.Class.NORMAL).sum()),
           "overflow": int((over & ~special & ~c_special).sum()),
           "inf": int(inf.sum()), "nan": int((blk.cls == formats.Class.NAN).sum())}
    if spec.scale_format != "e8m0":
        del out["overflow"]
    if spec.specials == "none":
        del out["nan"]
        if spec.overflow is Overflow.SATURATE:
            del out["inf"]
    elif spec.overflow is Overflow.SATURATE and not c_cls_any_inf(vs) and not any(
            formats.get(name).has_inf for name in (spec.a_format, spec.b_format)):
        del out["inf"]          # a saturating unit gives Inf only from an Inf input: none here
    return out


def c_cls_any_inf(vs: VectorSet) -> bool:
    """Whether any C of ``vs`` is an FP32 Inf."""
    return vs.c is not None and bool(
        (formats.get("fp32").classify(vs.c) == formats.Class.INF).any())


def _backpressure(trace: cycle.Trace, *, back_to_back: bool) -> dict[str, int]:
    """Handshake bins of a trace; ``back_to_back`` only where a block can take one cycle (a
    block takes k / lanes cycles)."""
    stall = trace.out_valid & ~trace.out_ready
    runs = np.convolve(stall.astype(int), np.ones(3, int), "valid") == 3
    taken_in = trace.in_valid & trace.in_ready
    taken_out = trace.out_valid & trace.out_ready
    out = {"stall": int(stall.sum()), "stall-run-3": int(runs.sum()),
           "gap": int((~trace.in_valid).sum()),
           "in-and-out": int((taken_in & taken_out).sum()),
           "back-to-back": int((taken_in[1:] & taken_in[:-1]).sum())}
    if not back_to_back:
        del out["back-to-back"]
    return out
