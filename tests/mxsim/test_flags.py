"""IEEE 754 status flags (``mxsim.engine.flags``): NV, DZ, OF, UF, NX in RISC-V fflags order.

Hand-computed cases pin each flag (tininess after rounding, overflow by the unbounded
exponent, NaN causes, quiet and signaling NaN C, C after the step, chains); random specs on
every generator family and adversarial sets hold the fast engine's flags equal to the
reference's; specs that do not round once are refused in one line.
"""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_spec_foreign import adversarial

from mxsim import formats, spec, vectors
from mxsim.engine import fast, reference
from mxsim.engine.flags import FLAG_BITS, status_flags
from mxsim.errors import UnitError
from mxsim.spec import SpecError, UnitSpec
from mxsim.vectors import VectorSet

NV, DZ, OF, UF, NX = 0x10, 0x08, 0x04, 0x02, 0x01
ONE, MINUS_ONE, ONE_HALF, E4M3_MAX = 0x38, 0xB8, 0x3C, 0x7E
FLT_MAX, NEG_INF, POS_INF = 0x7F7FFFFF, 0xFF800000, 0x7F800000
#: One exact step rounded once to FP32, a scale per element (block 1): any exact product.
FL = UnitSpec(name="fl", a_format="e4m3", b_format="e4m3", scale_format="e8m0", block=1, k=8,
              frac_bits=None, acc_format="fp32", acc_rounding="rne", overflow="inf")


def _flags(unit: UnitSpec, vs: VectorSet) -> np.ndarray:
    """Fast flags == reference flags; D from the engines equal too."""
    want = status_flags(unit, vs, engine="reference")
    got = status_flags(unit, vs)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.uint8 and got.shape == vs.out_shape
    np.testing.assert_array_equal(fast.dot(unit, vs), reference.dot(unit, vs))
    return got


def _set(products, c=None, b=None, fmt="e4m3", c_format="fp32", k=8) -> VectorSet:
    """One dot of ``k`` products, each (code of A, exponent of its two E8M0 scales) times B's
    1.0 (codes ``b`` where given); C a code of ``c_format`` or None."""
    a = np.zeros((1, k), np.uint8)
    sa, sb = np.full((1, k), 127, np.uint8), np.full((k, 1), 127, np.uint8)
    for i, (code, e) in enumerate(products):
        ea = max(-127, min(127, e))
        a[0, i], sa[0, i], sb[i, 0] = code, 127 + ea, 127 + e - ea
    one = formats.get(fmt).encode(1.0)
    col = np.full((k, 1), one, np.uint8) if b is None else np.array(b, np.uint8).reshape(k, 1)
    dtype = np.uint32 if c_format == "fp32" else np.uint16
    return VectorSet(a=a, b=col, a_format=fmt, b_format=fmt, c_format=c_format,
                     c=None if c is None else np.array([[c]], dtype), a_scale=sa, b_scale=sb,
                     scale_format="e8m0", block=1)


def _f32(x: float) -> int:
    return int(np.float32(x).view(np.uint32))


def test_flag_bits_are_riscv_fflags():
    assert FLAG_BITS == {"nv": 0x10, "dz": 0x08, "of": 0x04, "uf": 0x02, "nx": 0x01}


@pytest.mark.parametrize("products,c,kw,want", [
    ([(ONE, 0)], _f32(1.0), {}, 0),                                  # exact
    ([(ONE, -30)], _f32(1.0), {}, NX),                               # 1 + 2**-30
    ([(E4M3_MAX, 127)], None, {}, OF | NX),                          # 448 * 2**127
    ([(E4M3_MAX, 127)], None, dict(overflow="saturate"), OF | NX),   # whatever overflow gives
    ([(E4M3_MAX, 127)], None, dict(acc_rounding="rz"), OF | NX),
    ([(ONE, 60)], FLT_MAX, dict(acc_rounding="rz"), NX),             # max + tiny: RZ keeps max
    ([(ONE, 103)], FLT_MAX, {}, OF | NX),                            # max + half an ulp: tie up
    ([(ONE, 103)], FLT_MAX, dict(acc_rounding="rz"), NX),
    ([(ONE, -140)], 0, {}, 0),                                       # subnormal, exact: no UF
    ([(ONE_HALF, -150)], 0, {}, UF | NX),                            # 3 * 2**-151
    ([(ONE_HALF, -150)], None, dict(acc_rounding="ru"), UF | NX),
    # 2**-126 - 2**-152: rounded to 24 bits with no least exponent it is 2**-126 under RNE
    # and RU (not tiny: NX only), 2**-126 - 2**-150 under RZ and RD (tiny: UF too).
    ([(MINUS_ONE, -152)], 0x00800000, {}, NX),
    ([(MINUS_ONE, -152)], 0x00800000, dict(acc_rounding="ru"), NX),
    ([(MINUS_ONE, -152)], 0x00800000, dict(acc_rounding="rz"), UF | NX),
    ([(MINUS_ONE, -152)], 0x00800000, dict(acc_rounding="rd"), UF | NX),
    ([(ONE, 0), (MINUS_ONE, 0)], 0, {}, 0),                          # exact zero
    ([(ONE, -200)], 0, {}, UF | NX),                                 # rounds to +0
])
def test_flags_of_one_rounding(products, c, kw, want):
    assert int(_flags(FL.replace(**kw), _set(products, c))[0, 0]) == want


@pytest.mark.parametrize("a,b,c,want", [
    ([0x7F], None, None, NV),                          # an E4M3 NaN code
    ([ONE], None, 0x7F800001, NV),                     # a signaling NaN C
    ([ONE], None, 0x7FC00000, 0),                      # a quiet NaN C alone
    ([ONE], None, 0xFFC00001, 0),
    ([ONE], None, POS_INF, 0),                         # an Inf result from an Inf C
])
def test_flags_nan_causes_e4m3(a, b, c, want):
    assert int(_flags(FL, _set([(x, 0) for x in a], c, b))[0, 0]) == want


def test_flags_nan_scale_is_invalid():
    vs = _set([(ONE, 0)], _f32(1.0))
    vs = vs.replace(b_scale=np.where(np.arange(8)[:, None] == 0, 0xFF, 127).astype(np.uint8))
    assert int(_flags(FL, vs)[0, 0]) == NV
    assert int(_flags(FL.replace(specials="none"), vs)[0, 0]) == OF | NX     # 2**128 + 1
    assert int(_flags(FL.replace(specials="none"), _set([(0x7F, 0)]))[0, 0]) == 0   # 480


@pytest.mark.parametrize("a,b,c,want", [
    ([0x7C], [0] * 8, None, NV),                       # Inf x 0
    ([0x7C, 0xFC], None, None, NV),                    # +Inf - Inf among products
    ([0x7C], None, NEG_INF, NV),                       # +Inf product, -Inf C
    ([0x7C], None, None, 0),                           # Inf from an Inf input
    ([0x7C], None, 0x7FC00000, 0),                     # a quiet NaN C alone
    ([0x7C], [0] * 8, 0x7FC00000, NV),                 # ... with Inf x 0
    ([0x7D], None, None, NV),                          # an E5M2 NaN code
])
def test_flags_nan_causes_e5m2(a, b, c, want):
    unit = FL.replace(a_format="e5m2", b_format="e5m2")
    assert int(_flags(unit, _set([(x, 0) for x in a], c, b, fmt="e5m2"))[0, 0]) == want


def test_flags_c_after_the_step_raise_both_roundings():
    after = FL.replace(c_mode="after", c_rounding="rne")
    assert int(_flags(after, _set([(ONE, 0), (ONE, -30)], 0))[0, 0]) == NX
    # The step overflows to +Inf; C = -Inf then makes NaN: NV | OF | NX. With C in the step
    # the sum is -Inf from C alone: nothing.
    huge = _set([(E4M3_MAX, 127)], NEG_INF)
    assert int(_flags(after, huge)[0, 0]) == NV | OF | NX
    assert int(_flags(FL, huge)[0, 0]) == 0
    # The step holds 2**-30 exactly; C + it rounds.
    assert int(_flags(after, _set([(ONE, -30)], _f32(1.0)))[0, 0]) == NX
    assert int(_flags(after, _set([(ONE, -30)], 0x7F800001))[0, 0]) == NV
    assert int(_flags(after.replace(c_rounding="rz"), _set([(ONE_HALF, -150)], 0))[0, 0]) \
        == UF | NX


def test_flags_accrue_over_a_chain():
    """K = 16 on k = 8: the first instruction is inexact, the second exact; an sNaN C is
    invalid in the first only."""
    a = np.array([[ONE] + [0] * 7 + [ONE] + [0] * 7], np.uint8)
    sa = np.full((1, 16), 127, np.uint8)
    sa[0, 0] = 127 - 30
    vs = VectorSet(a=a, b=np.full((16, 1), ONE, np.uint8), c=np.array([[_f32(1.0)]], np.uint32),
                   a_scale=sa, b_scale=np.full((16, 1), 127, np.uint8), scale_format="e8m0",
                   block=1)
    assert int(_flags(FL, vs)[0, 0]) == NX
    batch = vectors.generate("specials", m=3, n=2, k=32, batch=(2, 2), scale_format="e8m0",
                             block=8, seed=3)
    got = _flags(FL.replace(block=8, k=16), batch)
    assert got.shape == (2, 2, 3, 2)


def test_flags_zero_sign_c_and_bf16():
    unit = FL.replace(zero_sign="c")
    assert int(_flags(unit, _set([(ONE, 0), (MINUS_ONE, 0)], 0x7F800001))[0, 0]) == NV
    assert int(_flags(unit, _set([(ONE, 0), (MINUS_ONE, 0)], 0x80000001))[0, 0]) == 0
    bf = FL.replace(acc_format="bf16", d_format="bf16", nan_code=0x7FC0, zero_sign="c")
    enc = formats.get("bf16").encode
    assert int(_flags(bf, _set([(ONE, -8)], int(enc(1.0)), c_format="bf16"))[0, 0]) == NX
    assert int(_flags(bf, _set([(ONE, 0)], 0x7F81, c_format="bf16"))[0, 0]) == NV
    assert int(_flags(bf, _set([(ONE, 0)], 0x7FC0, c_format="bf16"))[0, 0]) == 0
    assert int(_flags(bf, _set([(ONE, 127), (ONE, 127)], 0, c_format="bf16"))[0, 0]) \
        == OF | NX
    h = bf.replace(acc_format="fp16", d_format="fp16", nan_code=0x7E00)
    assert int(_flags(h, _set([(ONE_HALF, -26)], 0, c_format="fp16"))[0, 0]) == UF | NX
    assert int(_flags(h, _set([(ONE, -24)], 0, c_format="fp16"))[0, 0]) == 0


@pytest.mark.parametrize("kw,what", [
    (dict(frac_bits=13), "a truncated step (frac_bits = 13)"),
    (dict(schedule=[[0, 1, 2, 3], [4, 5, 6, 7]]), "a schedule of 2 fused steps"),
    (dict(acc_format="e8m13"), "acc_format e8m13 with d_format fp32"),
    (dict(k=None), "the exact unit (k null)"),
    (dict(promote_every=2), "promotion (promote_every)"),
    (dict(upcast="bf16", fold_scales=True), "operands rounded with their scales first "
                                            "(fold_scales)"),
    (dict(scale_format="fp32", block=None, epilogue="alpha"), "an epilogue (alpha)"),
    (dict(block=8, k=32, group=8, reduce="tree", c_mode="after"),
     "a reduction tree (reduce tree)"),
])
def test_flags_refuse_units_that_do_not_round_once(kw, what):
    unit = FL.replace(**kw)
    vs = _set([(ONE, 0)])
    with pytest.raises(SpecError, match="^" + re.escape(
            f"Unit spec 'fl': flags are modelled for units that round once per instruction "
            f"(one fused step, frac_bits null, d_format = acc_format, no fold_scales, "
            f"promote_every or epilogue), not {what}") + "$"):
        status_flags(unit, vs)


def test_flags_bad_engine_and_vectors():
    with pytest.raises(UnitError, match=r"^Engine must be one of fast, reference, not 'gpu'$"):
        status_flags(FL, _set([(ONE, 0)]), engine="gpu")
    with pytest.raises(UnitError, match=r"^Unit fl takes C as fp32, not bf16"):
        status_flags(FL, _set([(ONE, 0)], 0, c_format="bf16"))


# -- random specs and adversarial sets: fast flags == reference flags --------------------------

_ELEMS = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "int8")


@st.composite
def _once_specs(draw, scales=True):
    """Units that round once per instruction: one exact step, D in the accumulator's format,
    C in the step or after it, any rounding, overflow, zero sign, specials, scale-sum field."""
    a_format, b_format = draw(st.sampled_from(_ELEMS)), draw(st.sampled_from(_ELEMS))
    block = draw(st.sampled_from([1, 4, 8, 16, 32]))
    k = draw(st.sampled_from([x for x in (8, 16, 32) if x % block == 0]))
    scale = draw(st.sampled_from(["e8m0", "e8m0", "ue4m3"]))
    group = None
    if draw(st.booleans()):
        fits = [g for g in (1, 2, 4, 8) if block % g == 0
                and spec.group_sum_bits(a_format, b_format, g) <= spec.MAX_GROUP_BITS]
        group = draw(st.sampled_from(fits)) if fits else None
    d_format = draw(st.sampled_from(["fp32", "fp32", "bf16", "fp16"]))
    specials = draw(st.sampled_from(["ieee", "ieee", "none"]))
    zero_sign = draw(st.sampled_from(["positive", "ieee"] + (["c"] * (specials == "ieee"))))
    bits = draw(st.sampled_from([None, 4, 8])) if scale == "e8m0" else None
    upcast = None
    if group is None and draw(st.booleans()):
        upcast = "fp32"
    return UnitSpec(
        name="drawn", a_format=a_format, b_format=b_format, scale_format=scale, block=block,
        k=k, group=group, frac_bits=None, upcast=upcast,
        c_mode=draw(st.sampled_from(["step", "after"])),
        c_rounding=draw(st.sampled_from(["rne", "rz", "ru", "rd"])), acc_format=d_format,
        acc_rounding=draw(st.sampled_from(["rne", "rz", "ru", "rd"])), d_format=d_format,
        overflow=draw(st.sampled_from(["inf", "ieee", "saturate"])), zero_sign=zero_sign,
        specials=specials, scale_sum_bits=bits)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit=_once_specs(), seed=st.integers(0, 2 ** 16), n_inst=st.integers(1, 2))
def test_flags_adversarial_fast_equals_reference(unit, seed, n_inst):
    _flags(unit, adversarial(unit, unit.k * n_inst, np.random.default_rng(seed)))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit=_once_specs(), family=st.sampled_from(vectors.FAMILIES),
       seed=st.integers(0, 2 ** 16), with_c=st.booleans())
def test_flags_random_fast_equals_reference(unit, family, seed, with_c):
    vs = vectors.generate(family, a_format=unit.a_format, b_format=unit.b_format, m=2, n=3,
                          k=unit.k, scale_format=unit.scale_format, block=unit.block,
                          with_c=with_c, c_format=unit.d_format, seed=seed)
    _flags(unit, vs)


@pytest.mark.parametrize("d_format", ["fp32", "bf16", "fp16"])
def test_flags_adversarial_sets_raise_every_flag(d_format):
    """Across a few fixed adversarial sets every flag but DZ is raised somewhere (so the
    equality above is not an equality of zeros) and DZ never is."""
    seen = 0
    for seed in range(4):
        for c_mode in ("step", "after"):
            unit = FL.replace(block=8, k=16, c_mode=c_mode, acc_format=d_format,
                              d_format=d_format, acc_rounding=("rz", "rne")[seed % 2])
            got = _flags(unit, adversarial(unit, 32, np.random.default_rng(seed), m=6, n=4))
            seen |= int(np.bitwise_or.reduce(got.reshape(-1)))
            assert not (got & DZ).any()
    assert seen == NV | OF | UF | NX
