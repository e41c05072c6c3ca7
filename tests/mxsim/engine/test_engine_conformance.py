"""The OCP MX dot-product envelope (mxsim.engine.conformance): exact at its edge (a twin in
Python fractions finds the last code inside and the first outside), special values, overflow,
and on every generator family: presets that compute as accurately as FP32 summation lie
inside, units that truncate more (Hopper's F = 13, a spec with F = 4) fall outside."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest

from mxsim import formats, units, vectors
from mxsim.engine import conformance, fast
from mxsim.engine.conformance import Summary, Values, check
from mxsim.engine.reference.exact import round_fp32_rne
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

FP32 = UnitSpec(name="fp32-out", frac_bits=None, acc_format="fp32")
E4M3, E5M2, FP32_FMT = formats.get("e4m3"), formats.get("e5m2"), formats.get("fp32")


def _codes(fmt, values) -> np.ndarray:
    return fmt.encode(np.asarray(values, np.float64), "rne", saturate=False)


def _f32(values) -> np.ndarray:
    return np.asarray(values, np.float32).view(np.uint32)


def _set(a, b, c=None, sa=None, sb=None, fmt=E4M3, block=32) -> VectorSet:
    """One dot product (M = N = 1) of element values ``a``, ``b`` and C ``c``."""
    a = np.asarray(a)
    k = a.size
    scales = {} if sa is None else dict(a_scale=np.array([[sa] * (k // block)], np.uint8),
                                         b_scale=np.array([[sb]] * (k // block), np.uint8),
                                         scale_format="e8m0", block=block)
    return VectorSet(a=_codes(fmt, a).reshape(1, k), b=_codes(fmt, b).reshape(k, 1),
                     a_format=fmt.name, b_format=fmt.name,
                     c=None if c is None else _f32([[c]]), **scales)


def _inside(spec, vs, codes) -> list[bool]:
    """The verdict on each of ``codes`` as the result of the one dot product of ``vs``."""
    return check(spec, _many(vs, len(codes)), np.asarray(codes, np.uint32)).inside.tolist()


def _many(vs: VectorSet, count: int) -> VectorSet:
    """The one dot product of ``vs``, ``count`` times."""
    return vs.take_dots([0] * count)


# -- the edge, exactly -------------------------------------------------------------------

def test_conformance_bound_by_hand_one_product():
    """1 * 1 + 0: n = 2, B = 2 (1 + 2**-126) / (2**23 - 2), a little over 2 ulps above 1
    (2**-23 each) and 4 below (2**-24 each)."""
    vs = _set([1.0], [1.0], 0.0)
    one = 0x3F800000
    assert _inside(FP32, vs, [one, one + 2, one + 3, one - 4, one - 5]) == \
        [True, True, False, True, False]


def _exact_terms(spec, vs) -> list[list[Fraction]]:
    """Every dot's terms (products with scales, then C) as fractions: the twin."""
    f = vs.flat()
    a = formats.get(f.a_format).decode(f.a)
    b = formats.get(f.b_format).decode(f.b)
    if f.scale_format is not None:
        sa, sb = f.scale_values()
        a, b = a * sa, b * sb
    c = FP32_FMT.decode(f.c) if f.c is not None else np.zeros(f.a.shape[:2] + (f.n,))
    out = []
    for t in range(f.a.shape[0]):
        for i in range(f.m):
            for j in range(f.n):
                out.append([Fraction(float(x)) * Fraction(float(y))
                            for x, y in zip(a[t, i], b[t, :, j], strict=True)]
                           + [Fraction(float(c[t, i, j]))])
    return out


def test_conformance_edge_is_exact_against_fractions():
    """Fraction twin: for each finite dot, the code just inside x + B and x - B is inside
    and its neighbour one code further out is outside."""
    vs = vectors.generate_suite(["uniform", "normal", "cancellation", "c-negligible"],
                                a_format="e4m3", scale_format="e8m0", block=32, m=4, n=4,
                                k=64, seed=3)
    checked = 0
    for dot, terms in enumerate(_exact_terms(FP32, vs)):
        x, mag = sum(terms), sum(abs(t) for t in terms)
        n = len(terms)
        bound = n * (mag + Fraction(2) ** -126) / (2 ** 23 - n)
        if x + bound >= Fraction(2) ** 127 or x - bound <= -Fraction(2) ** 127:
            continue
        one = vs.take_dots([dot])
        for edge, step in ((x + bound, 1), (x - bound, -1)):
            code = round_fp32_rne(edge)
            value = Fraction(float(FP32_FMT.decode(np.uint32(code))))
            if (value - edge) * step > 0:         # rounded past the edge: one code back in
                code = _step(code, -step)
            out = _step(code, step)
            assert _inside(FP32, one, [code, out]) == [True, False], (dot, hex(code))
            checked += 1
    assert checked > 50


def _step(code: int, step: int) -> int:
    """The FP32 code one value up (``step = 1``) or down."""
    v = np.uint32(code).view(np.float32)
    return int(np.nextafter(v, np.float32(np.inf * step)).view(np.uint32))


# -- special values and overflow -----------------------------------------------------------

NAN, PINF, NINF, BIG = 0x7FC00000, 0x7F800000, 0xFF800000, 0x7F7FFFFF


@pytest.mark.parametrize("case, want", [
    ("nan scale", [True, False, False, False]),
    ("inf times zero", [True, False, False, False]),
    ("inf minus inf", [True, False, False, False]),
    ("plus inf", [False, True, False, False]),
    ("minus inf", [False, False, True, False]),
], ids=lambda x: x if isinstance(x, str) else "")
def test_conformance_special_values(case, want):
    """Results NaN, +Inf, -Inf, 1.0 against an exact NaN (a NaN E8M0 scale, Inf * 0,
    +Inf + -Inf) or ±Inf."""
    a, b, sa = [1.0] * 32, [1.0] * 32, 127
    if case == "nan scale":
        sa = 0xFF
    elif case == "inf times zero":
        a[3], b[3] = np.inf, 0.0
    elif case == "inf minus inf":
        a[3], a[4] = np.inf, -np.inf
    elif case == "plus inf":
        a[3] = np.inf
    else:
        b[5] = -np.inf
    vs = _set(a, b, 0.0, sa, 127, fmt=E5M2)
    assert _inside(FP32, vs, [NAN, PINF, NINF, 0x3F800000]) == want


def test_conformance_inf_c_and_nan_c():
    assert _inside(FP32, _set([1.0], [1.0], np.inf), [PINF, NAN, BIG]) == [True, False, False]
    assert _inside(FP32, _set([1.0], [1.0], np.nan), [NAN, PINF]) == [True, False]


def test_conformance_overflow_allows_inf_and_saturation_only_where_reachable():
    """448 * 448 * 2**127 * 2**127 is beyond FP32: +Inf, +max and what a sum saturated at +max
    continues to (a finite value up to (1 + gamma_n)(P + n eta)) are inside, -Inf, NaN and
    negative values not; a NaN needs both signs to overflow (x = 0 by cancellation); a small
    x allows none of them."""
    up = _set([448.0] + [0.0] * 31, [448.0] + [0.0] * 31, 0.0, 254, 254)
    assert _inside(FP32, up, [PINF, BIG, BIG - 1, NINF, NAN, 0xBF800000]) == \
        [True, True, True, False, False, False]
    both = _set([448.0, -448.0] + [0.0] * 30, [448.0] * 2 + [0.0] * 30, 0.0, 254, 254)
    assert _inside(FP32, both, [NAN, PINF, NINF, 0, BIG | 1 << 31]) == [True] * 5
    small = _set([1.0], [1.0], 0.0)
    assert _inside(FP32, small, [PINF, NAN, BIG]) == [False, False, False]


def test_conformance_zero_signs_are_not_judged():
    vs = _set([1.0, -1.0], [1.0, 1.0], 0.0)
    assert _inside(FP32, vs, [0x00000000, 0x80000000, 0x00000001]) == [True, True, True]


# -- presets on every generator family -----------------------------------------------------

SUITE = dict(count=1, m=4, n=4, seed=5)


@pytest.mark.parametrize("unit, a, b, scales, k", [
    ("ocp-fp32", "e4m3", "e4m3", "e8m0", 64),
    ("ocp-fp32", "e5m2", "e2m1", "e8m0", 64),
    ("ocp-fp32", "int8", "e3m2", "e8m0", 64),
    ("exact", "e4m3", "e5m2", "e8m0", 64),
    ("blackwell-mxf8f6f4", "e5m2", "e5m2", "e8m0", 64),
    ("blackwell-f8f6f4", "e4m3", "e2m3", None, 64),
    ("blackwell-mxf4", "e2m1", "e2m1", "e8m0", 128),
    ("hopper-mma-sync", "e5m2", "e4m3", None, 64),
], ids=lambda x: str(x))
def test_conformance_accurate_presets_lie_inside(unit, a, b, scales, k):
    """Every family (specials, NaN scales, scale extremes, cancellation, one large term) and
    the e-zero ladders: every result of these presets is inside."""
    ladders = vectors.EXTRA_FAMILIES if "int8" not in (a, b) else ()
    vs = vectors.generate_suite(vectors.FAMILIES + ladders, a_format=a,
                                b_format=b, scale_format=scales,
                                block=32 if scales else None, k=k, **SUITE)
    spec = units.get(unit).spec_for(vs)
    v = check(spec, vs, fast.dot(spec, vs).reshape(-1))
    assert v.inside.all(), v.listed[:3]


@pytest.mark.parametrize("unit", ["hopper-wgmma", "hopper-cublas-fast"])
def test_conformance_hopper_fp8_accumulation_lies_outside(unit):
    """F = 13 and RZ to E8M13: about 14 bits where FP32 summation keeps 24."""
    vs = vectors.generate("uniform", a_format="e4m3", m=8, n=8, k=64, seed=1)
    spec = units.get(unit).spec_for(vs)
    v = check(spec, vs, fast.dot(spec, vs).reshape(-1))
    assert (~v.inside).sum() > 10
    first = v.listed[0]
    assert first.why == "beyond the bound" and first.error_ulps > 1
    assert first.bound is not None and first.exact.startswith(("0x1.", "-0x1."))


def test_conformance_a_badly_truncating_spec_fails_and_the_exact_one_passes():
    """The same inputs: a spec that keeps 4 fraction bits falls outside, the exact unit's
    results lie inside, and so do ocp-fp32's, though they differ from the exact ones."""
    vs = vectors.generate_suite(["uniform", "normal", "cancellation"], a_format="e4m3",
                                scale_format="e8m0", block=32, k=64, m=4, n=4, seed=2)
    ocp = units.get("ocp-fp32").spec_for(vs)
    coarse = replace(ocp, name="coarse", k=64, frac_bits=4, c_mode="step",
                     acc_format="fp32", acc_rounding="rz")
    assert not check(coarse, vs, fast.dot(coarse, vs).reshape(-1)).inside.all()
    exact = units.get("exact").spec_for(vs)
    d_exact, d_ocp = fast.dot(exact, vs).reshape(-1), fast.dot(ocp, vs).reshape(-1)
    assert (d_exact != d_ocp).any()                       # conformant, not bit-equal
    assert check(ocp, vs, d_exact).inside.all() and check(ocp, vs, d_ocp).inside.all()


# -- other outputs, fixed-point results, missing results, errors ------------------------------

def test_conformance_bf16_and_the_unbounded_case():
    """BF16 (u = 2**-7): n = 33 is bounded, n = 129 >= 2**7 is not (every result of a
    finite x is inside, NaN included; an exact NaN is still judged)."""
    bf16 = replace(FP32, d_format="bf16", acc_format="bf16")
    small = _set([1.0] * 32, [1.0] * 32, 0.0)            # x = 32, B = 33 * 33 / 95
    lo, hi = formats.get("bf16").encode(np.array([20.0, 44.0]), "rne")
    assert check(bf16, _many(small, 2), [lo, hi]).inside.tolist() == [False, False]
    near = formats.get("bf16").encode(np.array([22.0, 43.0]), "rne")
    assert check(bf16, _many(small, 2), near).inside.tolist() == [True, True]
    wide = _set([1.0] * 128, [1.0] * 128, 0.0)
    v = check(bf16, _many(wide, 2), formats.get("bf16").encode(np.array([1e30, np.nan]), "rne"))
    assert v.inside.tolist() == [True, True] and v.unbounded
    nan_in = _set([np.nan] + [1.0] * 127, [1.0] * 128, 0.0, fmt=E5M2)
    v = check(bf16, _many(nan_in, 2), formats.get("bf16").encode(np.array([1.0, np.nan]), "rne"))
    assert v.inside.tolist() == [False, True]


def test_conformance_fixed_point_results_are_exact_values():
    vs = _set([1.0], [1.0], 0.0)
    assert check(FP32, _many(vs, 2), Values.of_fixed([1 << 20, (1 << 20) + 3], [-20, -20])
                 ).inside.tolist() == [True, False]
    assert check(FP32, vs, Values.of_fixed([3], [0], [True])).inside.tolist() == [False]


def test_conformance_missing_results_are_outside():
    vs = VectorSet(a=_codes(E4M3, [[1.0], [2.0]]), b=_codes(E4M3, [[1.0]]))
    v = check(FP32, vs, [0x3F800000])
    assert v.inside.tolist() == [True, False]
    assert v.listed[0].why == "no result" and v.listed[0].dot == 1


def test_conformance_summary_adds_verdicts_and_reads_as_a_line():
    vs = _set([1.0], [1.0], 0.0)
    s = Summary()
    s.add(check(FP32, vs, [0x3F800000]), chunk=0)
    s.add(check(FP32, vs, [0x3F800003]), chunk=1)
    assert (s.results, s.inside, s.outside, s.terms) == (2, 1, 1, {2})
    assert s.listed[0].chunk == 1 and s.listed[0].exact == "0x1p+0"
    assert s.line().startswith("ocp: 1 of 2 results OUTSIDE the OCP MX dot-product envelope "
                               "(first: dot 0 of chunk 1: result 0x3f800003, exact 0x1p+0")
    assert "u = 2^-23, eta = 2^-149 (fp32), n = 2" in s.line()
    assert s.to_dict()["listed"][0]["why"] == "beyond the bound"


def test_conformance_refuses_unknown_envelopes_and_fp32_scales():
    vs = _set([1.0], [1.0], 0.0)
    with pytest.raises(ValueError, match=r"^Envelope must be one of ocp, not 'ieee'$"):
        check(FP32, vs, [0], "ieee")
    fp32_scaled = vectors.generate("uniform", a_format="e4m3", scale_format="fp32", m=2,
                                   n=2, k=32, scale_granularity="tensor")
    with pytest.raises(ValueError, match=r"^Scale format must be e8m0, ue4m3 or none for a "
                                         r"conformance check, not 'fp32'$"):
        check(FP32, fp32_scaled, np.zeros(4, np.uint32))
    assert conformance.ENVELOPES == ("ocp",)
