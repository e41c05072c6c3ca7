"""Reduction trees (``reduce = "tree"``): GST group terms added pairwise, each node rounded.

Directed cases pin what the tree rounds at each node (ties, cancellation, saturation,
subnormals, NaN); random specs and adversarial inputs hold the fast engine equal to the
reference.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mxsim import formats, spec, vectors
from mxsim.design import resolve_design
from mxsim.engine import fast, reference
from mxsim.microarch import MicroArchError
from mxsim.spec import SpecError, UnitSpec
from mxsim.vectors import VectorSet

#: Example 2's numerics (examples/rtl/block_dot), here with 4 groups of 8 (k = 32).
TREE = UnitSpec(name="tree", a_format="e4m3", b_format="e4m3", scale_format="e8m0", block=8,
                k=32, group=8, reduce="tree", frac_bits=None, acc_format="e8m14",
                acc_rounding="rne", overflow="saturate", c_mode="after")
ONE, MINUS_ONE, ONE_HALF = 0x38, 0xB8, 0x3C           # e4m3 1.0, -1.0, 1.5
E8M14_MAX = 0x7F7FFE00                                # as FP32 bits


def _twins(unit: UnitSpec, vs: VectorSet) -> np.ndarray:
    d_ref = reference.dot(unit, vs)
    np.testing.assert_array_equal(fast.dot(unit, vs), d_ref)
    return d_ref


def _terms(*terms) -> VectorSet:
    """One dot of 4 groups of 8: group g holds one product, code times its scales (the rest
    zeros); each term is (e4m3 code, A's E8M0 scale code[, B's scale code, default 127])."""
    a = np.zeros((1, 32), np.uint8)
    for g, (code, *_) in enumerate(terms):
        a[0, 8 * g] = code
    return VectorSet(a=a, b=np.full((32, 1), ONE, np.uint8), a_format="e4m3", b_format="e4m3",
                     a_scale=np.array([[t[1] for t in terms]], np.uint8),
                     b_scale=np.array([[(t + (127,))[2]] for t in terms], np.uint8),
                     scale_format="e8m0", block=8)


@pytest.mark.parametrize("terms,unit,want", [
    # 1 + 2**-15 is a tie at E8M14 (to 1), -1 + 2**-15 exact: the tree gives 2**-15, the
    # exact sum 2**-14.
    (((ONE, 127), (ONE, 112), (MINUS_ONE, 127), (ONE, 112)), TREE, 2.0 ** -15),
    (((ONE, 127), (ONE, 112), (MINUS_ONE, 127), (ONE, 112)), TREE.replace(
        reduce="chain", group=None, schedule=None), 2.0 ** -14),
    (((ONE, 127), (ONE, 112), (MINUS_ONE, 127), (ONE, 112)), TREE.replace(acc_rounding="ru"),
     2.0 ** -14 + 2.0 ** -15),
    # Saturation at a node: 1.5 * 2**127 twice is beyond E8M14's largest value.
    (((ONE_HALF, 254), (ONE_HALF, 254), (0, 127), (0, 127)), TREE, E8M14_MAX),
    (((ONE_HALF, 254), (ONE_HALF, 254), (0, 127), (0, 127)), TREE.replace(overflow="inf"),
     0x7F800000),
    # Subnormals: 2**-130 + 2**-141 is a tie at E8M14's LSB 2**-140 (to even); so is 2**-141.
    # (0x08 is 2**-6: 2**-6 * 2**-124 and 2**-6 * 2**-127 * 2**-8.)
    (((0x08, 3), (0x08, 0, 119), (0x08, 0, 119), (0, 127)), TREE, 2.0 ** -130),
    (((0x08, 3), (0x08, 0, 119), (0x08, 0, 119), (0, 127)), TREE.replace(
        reduce="chain", group=None), 2.0 ** -130 + 2.0 ** -140),
    # NaN: an element NaN code, a scale 0xFF.
    (((0x7F, 127), (ONE, 127), (ONE, 127), (ONE, 127)), TREE, 0x7FFFFFFF),
    (((ONE, 127), (ONE, 0xFF), (ONE, 127), (ONE, 127)), TREE, 0x7FFFFFFF),
    # ... which a unit without NaN/Inf reads as 480 and 2**128 (saturating at E8M14's max).
    (((ONE, 127), (ONE, 0xFF), (ONE, 127), (ONE, 127)), TREE.replace(specials="none"),
     E8M14_MAX),
])
def test_tree_rounds_every_node(terms, unit, want):
    d = _twins(unit, _terms(*terms))
    want = np.float32(want).view(np.uint32) if isinstance(want, float) else want
    assert int(d[0, 0]) == int(want)


def test_tree_spec_rules():
    for kw, msg in [
            (dict(group=None), "reduce tree adds GST-FDPA group terms"),
            (dict(frac_bits=13), "frac_bits null"),
            (dict(c_mode="step"), "c_mode must be after"),
            (dict(k=24, block=8, group=8), "k / group must be a power of two, not 24 / 8 = 3"),
            (dict(schedule=[list(range(16)), list(range(16, 32))]), "schedule must be null"),
            (dict(reduce="pairs"), "reduce must be one of chain, tree, not 'pairs'")]:
        with pytest.raises(SpecError, match=msg):
            TREE.replace(**kw)
    example2 = UnitSpec(a_format="int8", b_format="int8", scale_format="e8m0", block=32, k=128,
                        group=32, reduce="tree", frac_bits=None, acc_format="e8m14",
                        acc_rounding="rne", overflow="saturate", c_mode="after")
    assert spec.from_dict(example2.to_dict()) == example2
    assert 'reduce = "tree"' in example2.dumps() and "reduce" not in UnitSpec().to_dict()
    with pytest.raises(MicroArchError, match=r"cannot be built as RTL: the RTL builds fused "
                                             r"steps, not a reduction tree"):
        resolve_design(example2)


@st.composite
def _tree_specs(draw):
    a_format, b_format = (draw(st.sampled_from(["e4m3", "int8", "e2m1", "e3m2", "e2m3"]))
                          for _ in range(2))
    block = draw(st.sampled_from([8, 16, 32]))
    group = draw(st.sampled_from([g for g in (1, 2, 4, 8, 16, 32) if block % g == 0
                                  and spec.group_sum_bits(a_format, b_format, g)
                                  <= spec.MAX_GROUP_BITS]))
    k = draw(st.sampled_from([x for x in (8, 16, 32, 64) if x % block == 0]))
    d_format = draw(st.sampled_from(["fp32", "fp32", "fp16", "bf16"]))
    return UnitSpec(
        name="drawn", a_format=a_format, b_format=b_format, block=block, k=k, group=group,
        scale_format=draw(st.sampled_from(["e8m0", "ue4m3"])), reduce="tree",
        frac_bits=None, c_mode="after", c_rounding=draw(st.sampled_from(["rne", "rz"])),
        acc_format=draw(st.sampled_from(["e8m14", "e8m10", "fp32", "bf16", "fp16"])),
        acc_rounding=draw(st.sampled_from(["rz", "rne", "ru", "rd"])), d_format=d_format,
        overflow=draw(st.sampled_from(["inf", "ieee", "saturate"])),
        zero_sign=draw(st.sampled_from(["positive", "ieee"])),
        specials=draw(st.sampled_from(["ieee", "none"])))


def _with_c_format(vs: VectorSet, d_format: str) -> VectorSet:
    if d_format == "fp32" or vs.c is None:
        return vs
    return vs.replace(c=formats.get(d_format).encode(vs.c.view(np.float32), saturate=False),
                      c_format=d_format)


def _adversarial(unit: UnitSpec, k: int, rng) -> VectorSet:
    """Groups that cancel or tie, at scales from the bottom (subnormal sums) to the top
    (saturation), with NaN codes, scales 0x00/0xFF and Inf/NaN C."""
    m, n = 3, 2
    fa, fb = formats.get(unit.a_format), formats.get(unit.b_format)

    def codes(f, shape):
        every = np.arange(1 << f.bits, dtype=np.uint8)
        pool = [np.zeros(1, np.uint8), np.array([f.code_of_max], np.uint8), every,
                f.encode(np.array([1.0, -1.0, 0.5, -0.5])).astype(np.uint8)]
        which = rng.integers(0, len(pool), shape)
        return np.vectorize(lambda w: rng.choice(pool[w]), otypes=[np.uint8])(which)

    a, b = codes(fa, (m, k)), codes(fb, (k, n))
    a[1] = a[0]                                       # row 1 = -row 0 where it can: cancel
    neg = fa.encode(-fa.decode(a[0]), saturate=True).astype(np.uint8)
    a[1] = np.where(np.isnan(fa.decode(a[0])), a[0], neg)
    if unit.scale_format == "e8m0":
        pool = np.array([0x00, 0x01, 0x10, 0x7F, 0x70, 0xF0, 0xFE, 0xFF], np.uint8)
    else:
        pool = np.array([0x00, 0x01, 0x08, 0x38, 0x7E, 0x7F, 0xB8], np.uint8)
    sa = rng.choice(pool, size=(m, k // unit.block))
    sa[1] = sa[0]
    c = rng.choice(np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F7FFFFF,
                             0x00000001, 0x3F800000], np.uint32), size=(m, n))
    vs = VectorSet(a=a, b=b, a_format=unit.a_format, b_format=unit.b_format, c=c,
                   a_scale=sa, b_scale=rng.choice(pool, size=(k // unit.block, n)),
                   scale_format=unit.scale_format, block=unit.block)
    return _with_c_format(vs, unit.d_format)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit=_tree_specs(), seed=st.integers(0, 2 ** 16), n_inst=st.integers(1, 2))
def test_tree_adversarial_fast_equals_reference(unit, seed, n_inst):
    _twins(unit, _adversarial(unit, unit.k * n_inst, np.random.default_rng(seed)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit=_tree_specs(), family=st.sampled_from(vectors.FAMILIES),
       seed=st.integers(0, 2 ** 16), with_c=st.booleans())
def test_tree_random_fast_equals_reference(unit, family, seed, with_c):
    vs = vectors.generate(family, a_format=unit.a_format, b_format=unit.b_format, m=2, n=2,
                          k=unit.k, scale_format=unit.scale_format, block=unit.block,
                          with_c=with_c, seed=seed)
    _twins(unit, _with_c_format(vs, unit.d_format))


@pytest.mark.parametrize("reduce", ["chain", "tree"])
def test_group_inf_times_zero_scale_is_nan(reduce):
    """A GST group holding an Inf product, times a zero UE4M3 scale, is NaN (Inf * 0)."""
    unit = UnitSpec(a_format="e5m2", b_format="e2m1", scale_format="ue4m3", block=16, k=16,
                    group=4, reduce=reduce, frac_bits=None if reduce == "tree" else 13,
                    c_mode="after")
    a = np.zeros((1, 16), np.uint8)
    a[0, 0] = 0x7C                                       # +Inf
    vs = VectorSet(a=a, b=np.full((16, 1), 0x2, np.uint8), a_format="e5m2", b_format="e2m1",
                   a_scale=np.array([[0x00]], np.uint8), b_scale=np.array([[0x38]], np.uint8),
                   scale_format="ue4m3", block=16)
    assert _twins(unit, vs).tolist() == [[0x7FFFFFFF]]


@pytest.mark.parametrize("reduce", ["chain", "tree"])
def test_group_term_times_a_zero_scale_keeps_its_sums_sign(reduce):
    """IEEE zero signs: a group whose exact sum is negative, times a zero UE4M3 scale, is -0
    (so -0 groups and a -0 C give -0); a group whose products cancel is +0. Both engines (a
    case Hypothesis found where the reference once made every zero group +0)."""
    unit = UnitSpec(a_format="e4m3", b_format="e4m3", scale_format="ue4m3", block=8, k=16,
                    group=8, reduce=reduce, frac_bits=None if reduce == "tree" else 20,
                    c_mode="after", acc_format="e8m14", acc_rounding="rz", zero_sign="ieee")
    a = np.zeros((2, 16), np.uint8)
    a[:, 0], a[:, 8] = MINUS_ONE, MINUS_ONE                  # both groups' sums are -1
    a[1, 1] = ONE                                           # row 1: group 0 cancels to 0
    vs = VectorSet(a=a, b=np.full((16, 1), ONE, np.uint8), a_format="e4m3", b_format="e4m3",
                   a_scale=np.zeros((2, 2), np.uint8), b_scale=np.full((2, 1), 0x38, np.uint8),
                   scale_format="ue4m3", block=8,
                   c=np.full((2, 1), 0x80000000, np.uint32))
    assert _twins(unit, vs).tolist() == [[0x80000000], [0x00000000]]
