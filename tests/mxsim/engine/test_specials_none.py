"""Units without NaN/Inf handling (``specials = "none"``): every input code is a number.

The fast engine (compiled kernel and numpy) is held equal to the reference on random specs,
random and adversarial inputs (NaN/Inf codes, scale 0xFF, Inf/NaN C, saturation); directed
cases pin the values the codes spell.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mxsim import formats, spec, vectors
from mxsim.engine import fast, reference, terms
from mxsim.spec import SpecError, UnitSpec
from mxsim.vectors import VectorSet

FLT_MAX = 0x7F7FFFFF
ELEMS = ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "int8"]
#: Example 1's numerics (examples/rtl/mxfp8_coproc): one exact step rounded once to FP32.
COPROC = UnitSpec(name="coproc", a_format="e4m3", b_format="e4m3", scale_format="e8m0",
                  block=8, k=8, frac_bits=None, acc_format="fp32", acc_rounding="rne",
                  overflow="saturate", specials="none")


def _twins(unit: UnitSpec, vs: VectorSet) -> np.ndarray:
    """Fast engine (compiled kernel and numpy path) == reference engine, bit for bit."""
    d_ref = reference.dot(unit, vs)
    np.testing.assert_array_equal(fast.dot(unit, vs, kernel=False), d_ref)
    np.testing.assert_array_equal(fast.dot(unit, vs), d_ref)
    return d_ref


def _set(a, b, c=None, sa=None, sb=None, fmt="e4m3", block=8, c_format="fp32"):
    kw = {} if sa is None else dict(a_scale=np.array(sa, np.uint8),
                                    b_scale=np.array(sb, np.uint8), scale_format="e8m0",
                                    block=block)
    c = None if c is None else np.array(c, np.uint32 if c_format == "fp32" else np.uint16)
    return VectorSet(a=np.array(a, np.uint8), b=np.array(b, np.uint8), a_format=fmt,
                     b_format=fmt, c=c, c_format=c_format, **kw)


def test_specials_none_reads_nan_codes_as_numbers():
    """E4M3 0x7F is 480; scale 0xFF is 2**128; an FP32 C with exponent 255 is 2**128 * 1.m."""
    one = 0x38                                         # e4m3 1.0
    a = [[0x7F] + [0] * 7, [0xFF] + [0] * 7]           # +480 and -480 (NaN codes in OCP E4M3)
    b = [[one, one]] + [[0, 0]] * 7
    scales = ([[127], [127]], [[127, 127]])
    d = _twins(COPROC, _set(a, b, [[0, 0], [0, 0]], *scales))
    assert d.view(np.float32).tolist() == [[480.0, 480.0], [-480.0, -480.0]]
    d_ieee = fast.dot(COPROC.replace(specials="ieee"), _set(a, b, [[0, 0], [0, 0]], *scales))
    assert (d_ieee == 0x7FFFFFFF).all()
    # Scale 0xFF is 2**128: times 2**-127 (code 0) it is 2; times 1 it saturates.
    a1 = [[one] + [0] * 7, [one] + [0] * 7]
    d = _twins(COPROC, _set(a1, b, [[0, 0], [0, 0]], [[0xFF], [0xFF]], [[0, 127]]))
    assert d.tolist() == [[0x40000000, FLT_MAX], [0x40000000, FLT_MAX]]


def test_specials_none_reads_inf_and_nan_c_as_numbers():
    """C = 0x7F800000 is 2**128: minus 2**104 it is FLT_MAX exactly; C = 0x7FC00000 is
    1.5 * 2**128: minus 2**104 it overflows (saturate: FLT_MAX; inf: +Inf)."""
    minus_one = 0xB8
    a = [[minus_one] + [0] * 7, [minus_one] + [0] * 7]
    b = [[0x38]] + [[0]] * 7
    vs = _set(a, b, [[0x7F800000], [0x7FC00000]], [[127 + 104], [127 + 104]], [[127]])
    assert _twins(COPROC, vs).tolist() == [[FLT_MAX], [FLT_MAX]]
    assert _twins(COPROC.replace(overflow="inf"), vs).tolist() == [[FLT_MAX], [0x7F800000]]
    assert (fast.dot(COPROC.replace(specials="ieee"), vs) == 0x7FFFFFFF).tolist() == [
        [False], [True]]


def test_specials_none_e5m2_inf_codes_are_one_more_binade():
    """E5M2 0x7C (Inf) is 2**16, 0x7F (NaN) 2**16 * 1.75; FP16 C 0x7C00 is 2**16."""
    u = UnitSpec(name="e5m2", a_format="e5m2", b_format="e5m2", k=4, frac_bits=None,
                 acc_format="fp32", acc_rounding="rne", d_format="fp32", specials="none")
    one = 0x3C                                          # e5m2 1.0
    vs = _set([[0x7C, 0, 0, 0], [0x7F, 0xFC, 0, 0]], [[one], [one], [0], [0]], fmt="e5m2",
              c=[[0], [0x47800000]], block=None)
    assert _twins(u, vs).view(np.float32).tolist() == [[65536.0], [65536.0 * 0.75 + 65536.0]]
    h = u.replace(acc_format="fp16", d_format="fp16", overflow="saturate")
    vs16 = _set([[one, 0, 0, 0]], [[one], [0], [0], [0]], fmt="e5m2", c=[[0x7C00]],
                c_format="fp16", block=None)
    assert _twins(h, vs16).tolist() == [[0x7BFF]]          # 2**16 + 1 saturates to 65504


def test_specials_none_spec_rules():
    base = dict(a_format="e5m2", b_format="e5m2", specials="none")
    for kw, msg in [
            (dict(k=None, frac_bits=None), "specials none reads element"),
            (dict(upcast="fp16"), "upcast fp16 cannot hold them"),
            (dict(upcast="bf16", fold_scales=True, scale_format="e8m0", block=32),
             "fold_scales reads an E8M0 scale 0xFF as NaN"),
            (dict(specials="nan"), "specials must be one of ieee, none, not 'nan'")]:
        with pytest.raises(SpecError, match=msg):
            UnitSpec(**{**base, **kw})
    assert UnitSpec(**base, upcast="bf16").specials == "none"
    assert UnitSpec(a_format="e4m3", upcast="fp16", specials="none").upcast == "fp16"  # 480
    # Written only where it is not the default: every earlier spec keeps its text and digest.
    assert "specials" not in UnitSpec().to_dict() and "\nspecials =" not in UnitSpec().dumps()
    text = COPROC.dumps()
    assert 'specials = "none"' in text and 'block = 8' in text
    assert spec.from_dict(COPROC.to_dict()) == COPROC
    assert UnitSpec().digest() == UnitSpec(specials="ieee").digest() != UnitSpec(
        specials="none").digest()


def test_specials_none_product_terms_have_no_specials():
    vs = _set([[0x7F] * 8], [[0x7F]] * 8, [[0]], [[0xFF]], [[0xFF]])
    assert not terms.product_terms(COPROC, vs).special.any()
    assert terms.product_terms(COPROC.replace(specials="ieee"), vs).special.all()


@st.composite
def _specs(draw):
    """Units with specials none: any formats, scales (blocks of 8 to 32), groups, steps,
    rounding and overflow rules."""
    k = draw(st.sampled_from([8, 16, 32]))
    a_format, b_format = draw(st.sampled_from(ELEMS)), draw(st.sampled_from(ELEMS))
    scale = draw(st.sampled_from([None, "e8m0", "ue4m3"]))
    block = None if scale is None else draw(st.sampled_from([b for b in (8, 16, 32)
                                                              if k % b == 0]))
    group = None
    if scale is not None and draw(st.booleans()):
        group = draw(st.sampled_from([g for g in (4, 8) if block % g == 0]))
        if spec.group_sum_bits(a_format, b_format, group) > spec.MAX_GROUP_BITS:
            group = None
    size = group or 1
    cut = draw(st.sampled_from([c for c in range(size, k, size)] or [k]))
    schedule = [list(range(cut)), list(range(cut, k))] if cut < k else None
    upcast = None
    if group is None:
        upcast = draw(st.sampled_from([None, None, "fp16", "bf16", "fp32"]))
        if upcast is not None and not all(spec.widths.holds_every_code(formats.get(upcast), f)
                                          for f in (a_format, b_format)):
            upcast = None
    d_format = draw(st.sampled_from(["fp32", "fp32", "fp16"]))
    return UnitSpec(
        name="drawn", a_format=a_format, b_format=b_format, scale_format=scale, block=block,
        k=k, schedule=schedule, group=group, upcast=upcast, specials="none",
        frac_bits=draw(st.one_of(st.none(), st.integers(0, 30))),
        align=draw(st.sampled_from(["rz", "rd", "rne", "rz-jam"])),
        product=draw(st.sampled_from(["raw", "normalized"])),
        c_mode=draw(st.sampled_from(["step", "after"])),
        acc_format=draw(st.sampled_from(["fp32", "e8m13", "fp16", "bf16"])),
        acc_rounding=draw(st.sampled_from(["rz", "rne", "ru", "rd"])),
        d_format=d_format, e_zero=draw(st.integers(-200, 5)),
        overflow=draw(st.sampled_from(["inf", "ieee", "saturate"])),
        zero_sign=draw(st.sampled_from(["positive", "ieee"])),
        promote_every=(draw(st.one_of(st.none(), st.integers(1, 2)))
                       if d_format == "fp32" else None))


def _adversarial(unit: UnitSpec, k: int, rng) -> VectorSet:
    """Codes from the edges: every NaN/Inf code, max, zeros, subnormals, any; scales
    0x00/0x01/0x7F/0xFE/0xFF (UE4M3: 0x00/0x7F/0xFF/...); C zeros, huge, Inf, NaN codes."""
    m, n = 2, 3

    def codes(name, shape):
        f = formats.get(name)
        every = np.arange(1 << f.bits, dtype=np.uint8)
        cls = f.classify(every)
        special = every[(cls == formats.Class.NAN) | (cls == formats.Class.INF)]
        pool = [every[cls == formats.Class.ZERO], np.array([f.code_of_max], np.uint8),
                every, special if special.size else every]
        which = rng.integers(0, len(pool), shape)
        return np.vectorize(lambda w: rng.choice(pool[w]), otypes=[np.uint8])(which)

    d16 = unit.d_format == "fp16"
    c_pool = (np.array([0, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x7BFF, 0xFFFF, 0x0001, 0x3C00],
                       np.uint16) if d16 else
              np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F7FFFFF,
                        0xFFFFFFFF, 0x00000001, 0x3F800000], np.uint32))
    kw = {}
    if unit.scale_format is not None:
        pool = np.array([0x00, 0x01, 0x7F, 0xFE, 0xFF, 0x80, 0x38], np.uint8)
        kw = dict(a_scale=rng.choice(pool, size=(m, k // unit.block)),
                  b_scale=rng.choice(pool, size=(k // unit.block, n)),
                  scale_format=unit.scale_format, block=unit.block)
    return VectorSet(a=codes(unit.a_format, (m, k)), b=codes(unit.b_format, (k, n)),
                     a_format=unit.a_format, b_format=unit.b_format,
                     c=rng.choice(c_pool, size=(m, n)), c_format=unit.d_format, **kw)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit=_specs(), seed=st.integers(0, 2 ** 16), n_inst=st.integers(1, 2))
def test_specials_none_adversarial_fast_equals_reference(unit, seed, n_inst):
    _twins(unit, _adversarial(unit, unit.k * n_inst, np.random.default_rng(seed)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit=_specs(), family=st.sampled_from(vectors.FAMILIES), seed=st.integers(0, 2 ** 16))
def test_specials_none_random_fast_equals_reference(unit, family, seed):
    if family == "nan-scale" and unit.scale_format is None:
        family = "specials"
    vs = vectors.generate(family, a_format=unit.a_format, b_format=unit.b_format, m=2, n=2,
                          k=unit.k, scale_format=unit.scale_format, block=unit.block,
                          seed=seed)
    if unit.d_format == "fp16":
        vs = vs.replace(c=formats.get("fp16").encode(vs.c.view(np.float32), saturate=False),
                        c_format="fp16")
    _twins(unit, vs)
