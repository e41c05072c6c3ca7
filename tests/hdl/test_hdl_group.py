"""GST-FDPA's sub-blocks (hdl.group) in Amaranth's simulator, and grouped units whole.

The scale product against ``mxsim.formats`` fields; the group sum against Python integers; the
group term (sum, scales, e_zero rule, flags) against the engine's own group terms
(``mxsim.engine.fast.alignment.step_terms``) on random and adversarial groups; grouped units
against the engine and the cycle model (``check_unit``); ``check_rtl``'s limits for groups.
"""

from fractions import Fraction

import numpy as np
import pytest

from mxsim import formats, presets, vectors
from mxsim.design import resolve_design
from mxsim.engine.fast.alignment import step_terms
from mxsim.engine.fast.operands import Operands
from mxsim.microarch import MicroArch, MicroArchError, check_rtl, group_geometry
from mxsim.spec import UnitSpec

pytestmark = pytest.mark.rtl
pytest.importorskip("amaranth")

from test_hdl_blocks import rtl_eval  # noqa: E402
from test_hdl_unit import check_unit  # noqa: E402

from hdl import group  # noqa: E402
from testbenches.unit import coverage  # noqa: E402

NVF4 = presets.get("blackwell-mxf4nvf4")


def _blackwell(scale: str, block: int) -> UnitSpec:
    return NVF4.spec("e2m1", "e2m1", scale_format=scale, block=block)


def _ref_scale(fmt: str, sa: int, sb: int) -> tuple:
    """(exp sum, significand product, zero, nan) from formats' fields (UE4M3: sign ignored)."""
    f = formats.get(fmt)
    out = []
    for code in (sa, sb):
        c = code if fmt == "e8m0" else code & 0x7F
        _, e, sig = (int(x[0]) for x in f.fields(np.array([c], f.code_dtype)))
        cls = formats.Class(int(f.classify(np.array([c], f.code_dtype))[0]))
        nan = cls == formats.Class.NAN
        out.append((e, 0 if nan else sig, not nan and sig == 0, nan))
    (ea, ga, za, na), (eb, gb, zb, nb) = out
    return ea + eb, (ga * gb if fmt == "ue4m3" else 1), int(za or zb), int(na or nb)


@pytest.mark.parametrize("fmt", ["e8m0", "ue4m3"])
def test_hdl_scale_product_every_a_code(fmt):
    """Every A scale code against 12 B codes (zero, subnormal, largest, NaN, 1.0, sign bit)."""
    rows = [{"sa": a, "sb": b} for a in range(256)
            for b in (0x00, 0x01, 0x07, 0x08, 0x38, 0x7E, 0x7F, 0x80, 0xB8, 0xFE, 0xFF, 0x7D)]
    got = rtl_eval(group.ScaleProduct(fmt), rows,
                   lambda d: (d.o.exp, d.o.sig, d.o.zero, d.o.nan))
    for row, g in zip(rows, got, strict=True):
        want = _ref_scale(fmt, row["sa"], row["sb"])
        assert g[2:] == want[2:], row
        if not want[3]:                                 # a NaN's fields are not used
            assert g[:2] == want[:2], row


def _group_codes(fa: formats.Format, fb: formats.Format, G: int, n: int, seed: int):
    """``n`` random groups plus adversarial ones: every product the largest of one sign (the
    sum's top bit), all subnormal, exact cancellation, all zero, Inf and NaN codes."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 1 << fa.bits, (n, G))
    b = rng.integers(0, 1 << fb.bits, (n, G))
    big_a, big_b = fa.code_of_max, fb.code_of_max
    extra_a = [np.full(G, big_a), np.full(G, big_a), np.ones(G, int), np.zeros(G, int)]
    extra_b = [np.full(G, big_b), np.full(G, big_b | (1 << (fb.bits - 1))), np.ones(G, int),
               rng.integers(0, 1 << fb.bits, G)]
    half = rng.integers(0, 1 << fa.bits, G // 2)
    hb = rng.integers(0, 1 << fb.bits, G // 2)
    extra_a.append(np.concatenate([half, half]))
    extra_b.append(np.concatenate([hb, hb ^ (1 << (fb.bits - 1))]))
    a = np.concatenate([a, np.stack(extra_a)]).astype(np.int64)
    b = np.concatenate([b, np.stack(extra_b)]).astype(np.int64)
    return a, b


def _ref_group_sum(fa, fb, a_row, b_row) -> tuple[int, int]:
    """The exact sum in units of the formats' smallest steps (Python integers), all-zero."""
    lsb = Fraction(2) ** ((fa.emin - fa.man_bits if fa.kind == "float" else -fa.man_bits)
                          + (fb.emin - fb.man_bits if fb.kind == "float" else -fb.man_bits))
    total, zero = Fraction(0), True
    for x, y in zip(a_row, b_row, strict=True):
        vx = fa.decode(np.array([x], fa.code_dtype))[0]
        vy = fb.decode(np.array([y], fb.code_dtype))[0]
        if np.isfinite(vx) and np.isfinite(vy):
            total += Fraction(float(vx)) * Fraction(float(vy))
            zero &= vx == 0 or vy == 0
        else:
            zero &= True
    q = total / lsb
    assert q.denominator == 1
    return int(q), int(zero)


@pytest.mark.parametrize("a, b, G", [("e2m1", "e2m1", 16), ("e4m3", "e2m3", 8),
                                     ("int8", "e3m2", 4), ("e5m2", "e2m1", 4)])
def test_hdl_group_sum_exact(a, b, G):
    fa, fb = formats.get(a), formats.get(b)
    codes_a, codes_b = _group_codes(fa, fb, G, 150, seed=G)
    rows = [{**{f"a.{j}": int(x) for j, x in enumerate(ra)},
             **{f"b.{j}": int(y) for j, y in enumerate(rb)}}
            for ra, rb in zip(codes_a, codes_b, strict=True)]
    dut = group.GroupSum(a, b, G)
    got = rtl_eval(dut, rows, lambda d: (d.sum, d.zero))
    for ra, rb, g in zip(codes_a, codes_b, got, strict=True):
        want = _ref_group_sum(fa, fb, ra, rb)
        assert g == want, (ra.tolist(), rb.tolist())
    if fa.kind == fb.kind == "float":           # the sum's top bit is used (INT8's bound is loose)
        assert max(abs(g[0]) for g in got) >= 1 << (dut.sum_bits - 2)


def _term_cases(spec: UnitSpec, seed: int):
    """A vector set of one instruction per dot: the generator's families plus groups of zero
    products and of cancelling products under the largest scales."""
    fams = ["normal", "specials", "subnormal", "max", "zeros", "cancellation",
            "scale-extremes", "nan-scale"]
    vs = vectors.generate_suite(fams, a_format=spec.a_format, b_format=spec.b_format, m=3,
                                n=3, k=spec.k, scale_format=spec.scale_format,
                                block=spec.block, seed=seed)
    return coverage.stimulus(spec, 200, blocks=1, seed=seed) if seed % 2 else vs


@pytest.mark.parametrize("scale, block, seed", [("e8m0", 32, 1), ("ue4m3", 16, 3),
                                                ("e8m0", 16, 4)])
def test_hdl_group_term_equals_the_engines(scale, block, seed):
    """Sign, value, alignment exponent and NaN/Inf flags of every group term against
    ``step_terms`` (the fast engine's), on the Blackwell FP4 specs."""
    spec = _blackwell(scale, block)
    vs = _term_cases(spec, seed)
    ops = Operands.of(spec, vs)
    geo = group_geometry(spec)
    G, ng = spec.group, spec.k // spec.group
    rows, want = [], []
    nb = vs.a.reshape(-1, vs.m, vs.k).shape[0]
    a_codes, b_codes = vs.a.reshape(nb, vs.m, vs.k), vs.b.reshape(nb, vs.k, vs.n)
    sa_codes = vs.a_scale.reshape(nb, vs.m, -1)
    sb_codes = vs.b_scale.reshape(nb, -1, vs.n)
    fam = vs.extra["families"]
    # One entry of each family (specials, NaN and extreme scales, cancellation included), and
    # the last normal entry, which the grouped constructions change.
    normal = [i for i, f in enumerate(fam) if f == "normal"]
    picked = sorted({fam.index(f) for f in set(fam)} | {normal[-1]})
    for bi in picked:
        A, B = ops.a.take(bi), ops.b.take(bi)
        SA, SB = ops.sa.take(bi), ops.sb.take(bi)
        sign, sig, lsb, e, nan, pinf, ninf = step_terms(spec, ops, A, B, SA, SB)
        for r in range(vs.m):
            for c in range(vs.n):
                for g in range(ng):
                    idx = range(g * G, g * G + G)
                    blk = g * G // spec.block
                    rows.append({**{f"a.{j}": int(a_codes[bi, r, i]) for j, i in enumerate(idx)},
                                 **{f"b.{j}": int(b_codes[bi, i, c]) for j, i in enumerate(idx)},
                                 "sa": int(sa_codes[bi, r, blk]), "sb": int(sb_codes[bi, blk, c])})
                    want.append((int(sign[r, g, c]), Fraction(int(sig[r, g, c]))
                                 * Fraction(2) ** int(lsb[r, g, c]), int(e[r, g, c]),
                                 bool(nan[r, g, c]), bool(pinf[r, g, c]), bool(ninf[r, g, c])))
    got = rtl_eval(group.GroupTerm(spec), rows,
                   lambda d: (d.o.sign, d.o.mag, d.o.exp, d.o.nan, d.o.pinf, d.o.ninf))
    for row, g, w in zip(rows, got, want, strict=True):
        assert bool(g[3]) == w[3], row
        if w[3]:
            continue                                    # a NaN group: nothing else counts
        value = Fraction(g[1]) * Fraction(2) ** (g[2] - geo.man_bits)
        assert (g[2], value, bool(g[4]), bool(g[5])) == (w[2], w[1], w[4], w[5]), row
        assert value == 0 or g[0] == w[0], row


@pytest.mark.parametrize("scale, block, lanes, stages", [("e8m0", 32, 64, 1),
                                                         ("e8m0", 16, 32, 2),
                                                         ("ue4m3", 16, 16, 3)])
def test_hdl_blackwell_fp4_units(scale, block, lanes, stages):
    """The Blackwell FP4 units whole: the engine's values, the cycle model's cycles."""
    check_unit(_blackwell(scale, block), MicroArch(lanes=lanes, stages=stages), seed=lanes)


@pytest.mark.parametrize("i", range(4))
def test_hdl_grouped_specs(i):
    """Grouped specs beyond Blackwell's: FP6/FP8/INT8 elements, groups of 4 and 8, blocks of 8
    and 16, both scale formats, RNE, E8Mn accumulators, saturation."""
    spec = UnitSpec(**[
        dict(a_format="e2m3", b_format="e3m2", scale_format="ue4m3", block=16, k=32, group=8,
             frac_bits=20, acc_rounding="rne", e_zero=-150),
        dict(a_format="e4m3", b_format="e2m1", scale_format="e8m0", block=16, k=32, group=16,
             frac_bits=25, acc_format="e8m13", e_zero=-133),
        dict(a_format="int8", b_format="e2m1", scale_format="e8m0", block=8, k=16, group=8,
             frac_bits=13, overflow="saturate", e_zero=0),
        dict(a_format="e4m3", b_format="e4m3", scale_format="ue4m3", block=8, k=16, group=4,
             frac_bits=10, e_zero=-21),
    ][i], name=f"gst-{i}")
    check_unit(spec, MicroArch(lanes=(8, 16, 8, 4)[i], stages=1 + i % 3), seed=i)


def test_hdl_several_scales_without_groups():
    """ST-FDPA with blocks smaller than k (each product takes its own block's scales), the
    scale multiplexed per pass."""
    spec = UnitSpec(name="st-blocks", a_format="e4m3", b_format="e5m2", scale_format="e8m0",
                    block=8, k=32, frac_bits=25, e_zero=-133)
    check_unit(spec, MicroArch(lanes=16, stages=2), seed=9)


def test_check_rtl_grouped_limits():
    """Lanes a multiple of G, and a preset's scale configurations only: each one line."""
    spec = _blackwell("ue4m3", 16)
    check_rtl(spec, MicroArch(lanes=16))
    with pytest.raises(MicroArchError, match=r"^lanes \(8\) must be a multiple of the group "
                                             r"\(16\) .*: try one of 16, 32, 64$"):
        check_rtl(spec, MicroArch(lanes=8))
    with pytest.raises(Exception, match=r"has no scale configuration ue4m3/32; it has e8m0/32, "
                                        r"e8m0/16, ue4m3/16$"):
        resolve_design("blackwell-mxf4nvf4", "e2m1", scale=("ue4m3", 32))
