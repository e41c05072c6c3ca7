"""Spec keys for units that are not tensor cores: ``zero_sign = "c"``, ``tree_formats``, a narrow
scale-exponent sum (``scale_sum_bits``, ``scale_sum_overflow``), blocks of any power of two,
and BF16 C and D.

Hand-computed cases pin each key's meaning; random specs on every generator family and
adversarial sets (products that cancel exactly, signed zeros, subnormal, NaN and Inf C, scale
extremes) hold the fast engine (kernel and numpy paths) equal to the reference, code for code;
every bad value has its one-line SpecError.
"""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mxsim import formats, presets, spec, vectors
from mxsim.engine import fast, reference, terms
from mxsim.errors import FormatError, VectorFileError
from mxsim.microarch import MicroArchError, check_rtl
from mxsim.spec import SpecError, UnitSpec
from mxsim.vectors import VectorSet

ONE, MINUS_ONE, ONE_HALF = 0x38, 0xB8, 0x3C             # e4m3 1.0, -1.0, 1.5
NEG_ZERO, FLT_MAX = 0x80000000, 0x7F7FFFFF
#: One exact step rounded once to FP32, C passing through a zero sum (a RISC-V MX coprocessor).
PASS_C = UnitSpec(name="pass-c", a_format="e4m3", b_format="e4m3", scale_format="e8m0", block=8,
                  k=8, frac_bits=None, acc_format="fp32", acc_rounding="rne", zero_sign="c")
#: A GST-FDPA tree of 4 groups of 8 whose levels round to 12 and 15 significant bits.
TREE = UnitSpec(name="tree", a_format="e4m3", b_format="e4m3", scale_format="e8m0", block=8,
                k=32, group=8, reduce="tree", frac_bits=None, acc_format="e8m14",
                acc_rounding="rne", overflow="inf", c_mode="after",
                tree_formats=["e10m11", "e10m14"])


def _twins(unit: UnitSpec, vs: VectorSet) -> np.ndarray:
    """Fast engine (compiled kernel and numpy path) == reference engine, code for code."""
    d_ref = reference.dot(unit, vs)
    np.testing.assert_array_equal(fast.dot(unit, vs, kernel=False), d_ref)
    np.testing.assert_array_equal(fast.dot(unit, vs), d_ref)
    return d_ref


def _bits(x: float) -> int:
    return int(np.float32(x).view(np.uint32))


def _dot8(a, c=None, sa=127, sb=127, b=None, c_dtype=np.uint32) -> VectorSet:
    """One e4m3 dot of k = 8 (A's codes ``a``, padded with zeros; B all 1.0 unless given) with
    E8M0 scales ``sa`` and ``sb`` and C (a code, or None)."""
    row = np.zeros((1, 8), np.uint8)
    row[0, :len(a)] = a
    col = np.full((8, 1), ONE, np.uint8) if b is None else np.array(b, np.uint8).reshape(8, 1)
    return VectorSet(a=row, b=col, c=None if c is None else np.array([[c]], c_dtype),
                     c_format="fp32" if c_dtype == np.uint32 else "bf16",
                     a_scale=np.array([[sa]], np.uint8), b_scale=np.array([[sb]], np.uint8),
                     scale_format="e8m0", block=8)


# -- zero_sign = "c": C passes through a zero sum ----------------------------------------------

@pytest.mark.parametrize("c_mode", ["step", "after"])
@pytest.mark.parametrize("c,want", [
    (NEG_ZERO, NEG_ZERO),              # -0 passes (positive and ieee give +0)
    (0, 0),
    (0x00000001, 0x00000001),          # the smallest subnormal, as it is
    (0x80000001, 0x80000001),
    (0x7F800000, 0x7F800000),          # +Inf
    (0x7FC00001, 0x7FFFFFFF),          # a NaN C still gives the NaN code
])
def test_zero_sign_c_products_cancel_give_c(c_mode, c, want):
    unit = PASS_C.replace(c_mode=c_mode)
    vs = _dot8([ONE, MINUS_ONE, ONE_HALF, ONE_HALF ^ 0x80], c)
    assert int(_twins(unit, vs)[0, 0]) == want
    zeros = _dot8([0, 0x80], c)                        # every product zero (+0 and -0)
    assert int(_twins(unit, zeros)[0, 0]) == want


def test_zero_sign_c_differs_from_positive_and_ieee():
    vs = _dot8([ONE, MINUS_ONE], NEG_ZERO)
    assert int(_twins(PASS_C.replace(zero_sign="positive"), vs)[0, 0]) == 0
    assert int(_twins(PASS_C.replace(zero_sign="ieee"), vs)[0, 0]) == 0
    assert int(_twins(PASS_C, vs)[0, 0]) == NEG_ZERO
    assert int(_twins(PASS_C, _dot8([ONE, MINUS_ONE]))[0, 0]) == 0      # no C: C is +0
    # nan_code names the NaN a NaN C gives.
    nan = _dot8([ONE, MINUS_ONE], 0x7FC00000)
    assert int(_twins(PASS_C.replace(nan_code=0x7FC00000), nan)[0, 0]) == 0x7FC00000


@pytest.mark.parametrize("kw,want", [
    (dict(acc_rounding="rne"), 0),
    (dict(acc_rounding="rd"), NEG_ZERO),
    (dict(acc_rounding="ru"), 0),
    (dict(acc_rounding="rz"), 0),
    (dict(c_mode="after", c_rounding="rd"), NEG_ZERO),
    (dict(c_mode="after", acc_rounding="rd", c_rounding="rne"), 0),  # C + step rounds last
])
def test_zero_sign_c_cancellation_against_c_is_plus_zero_but_rd(kw, want):
    """Products sum to 1, C = -1: an exact zero that is not a zero product sum is +0, -0 when
    the final rounding is toward -Inf (IEEE 754 6.3)."""
    vs = _dot8([ONE], _bits(-1.0))
    assert int(_twins(PASS_C.replace(**kw), vs)[0, 0]) == want


def test_zero_sign_c_passes_only_an_exact_zero():
    """A sum too small for FP32 rounds to a zero of its own sign; C = -0 does not pass: the
    products do not sum to zero (2**-160 and -2**-160, via scales 2**-127 and 2**-33)."""
    assert int(_twins(PASS_C, _dot8([ONE], NEG_ZERO, sa=0, sb=94))[0, 0]) == 0
    assert int(_twins(PASS_C, _dot8([MINUS_ONE], 0, sa=0, sb=94))[0, 0]) == NEG_ZERO


def test_zero_sign_c_chains_instructions():
    """K = 16 on a unit of k = 8: both instructions' products cancel, so -0 passes twice; then
    one whose products do not cancel."""
    a = np.array([[ONE, MINUS_ONE] + [0] * 6 + [ONE_HALF, ONE_HALF ^ 0x80] + [0] * 6,
                  [ONE, MINUS_ONE] + [0] * 6 + [ONE_HALF] + [0] * 7], np.uint8)
    vs = VectorSet(a=a, b=np.full((16, 1), ONE, np.uint8),
                   c=np.array([[NEG_ZERO], [NEG_ZERO]], np.uint32),
                   a_scale=np.full((2, 2), 127, np.uint8), b_scale=np.full((2, 1), 127, np.uint8),
                   scale_format="e8m0", block=8)
    assert _twins(PASS_C, vs).tolist() == [[NEG_ZERO], [_bits(1.5)]]


def _tree_set(*terms, c=None) -> VectorSet:
    """One dot of 4 groups of 8 (TREE's shape): group g holds one product, an e4m3 code times
    A's scale code (B's scales 127); each term is (code, scale)."""
    a = np.zeros((1, 32), np.uint8)
    for g, (code, _) in enumerate(terms):
        a[0, 8 * g] = code
    return VectorSet(a=a, b=np.full((32, 1), ONE, np.uint8),
                     c=None if c is None else np.array([[c]], np.uint32),
                     a_scale=np.array([[s for _, s in terms]], np.uint8),
                     b_scale=np.full((4, 1), 127, np.uint8), scale_format="e8m0", block=8)


def test_zero_sign_c_tree_reads_the_exact_sum_not_the_tree():
    """Groups 1, 2**-30, -1, -2**-30 sum to exactly zero; under RU the tree gives
    (1 + 2**-14) + (-1) = 2**-14 at E8M14, but C passes: the rule reads the exact sum."""
    unit = TREE.replace(tree_formats=None, acc_rounding="ru", zero_sign="c")
    vs = _tree_set((ONE, 127), (ONE, 97), (MINUS_ONE, 127), (MINUS_ONE, 97), c=NEG_ZERO)
    assert int(_twins(unit, vs)[0, 0]) == NEG_ZERO
    assert int(_twins(unit.replace(zero_sign="positive"), vs)[0, 0]) == _bits(2.0 ** -14)
    assert int(_twins(unit, _tree_set((ONE, 127), (0, 127), (0, 127), (MINUS_ONE, 127),
                                      c=0x00000005))[0, 0]) == 5


# -- tree_formats: each level of the tree rounds to its own format ------------------------------

def test_tree_formats_round_each_level_to_its_format():
    """1 + 2**-12 is a tie at level 1's 12 bits (to 1); 2**-13 + 2**-13 is exact; level 2
    holds 1 + 2**-12 in 15 bits. With acc_format (E8M14) at both levels, 1 + 2**-12 is exact at
    level 1 and level 2 gives 1 + 2**-11."""
    vs = _tree_set((ONE, 127), (ONE, 115), (ONE, 114), (ONE, 114))
    assert int(_twins(TREE, vs)[0, 0]) == _bits(1 + 2.0 ** -12)
    assert int(_twins(TREE.replace(tree_formats=None), vs)[0, 0]) == _bits(1 + 2.0 ** -11)
    # 1 + 3 * 2**-13 is 3/4 of level 1's last place above 1: RZ gives 1, RNE 1 + 2**-11.
    vs = _tree_set((ONE, 127), (ONE_HALF, 115), (0, 127), (0, 127))
    assert int(_twins(TREE.replace(acc_rounding="rz"), vs)[0, 0]) == _bits(1.0)
    assert int(_twins(TREE, vs)[0, 0]) == _bits(1 + 2.0 ** -11)


def test_tree_formats_wide_exponents_hold_what_fp32_cannot():
    """1.5 * 2**127 twice is 1.5 * 2**128 at level 1: E10M11 holds it, E8M14 overflows to Inf
    (and Inf - Inf at level 2 is NaN); the cancelling level 2 gives +0 with E10 levels."""
    vs = _tree_set((ONE_HALF, 254), (ONE_HALF, 254), (ONE_HALF ^ 0x80, 254),
                   (ONE_HALF ^ 0x80, 254))
    assert int(_twins(TREE, vs)[0, 0]) == 0
    assert int(_twins(TREE.replace(tree_formats=None), vs)[0, 0]) == 0x7FFFFFFF
    # A level result beyond FP32 converts to D by overflow: Inf (saturate: FLT_MAX).
    big = _tree_set((ONE_HALF, 254), (ONE_HALF, 254), (0, 127), (0, 127))
    assert int(_twins(TREE, big)[0, 0]) == 0x7F800000
    assert int(_twins(TREE.replace(overflow="saturate"), big)[0, 0]) == FLT_MAX


def test_tree_formats_spec_text_round_trips():
    assert TREE.tree_formats == ("e10m11", "e10m14")
    assert TREE.tree_level_formats() == ("e10m11", "e10m14") and TREE.sum_format == "e10m14"
    assert TREE.replace(tree_formats=None).tree_level_formats() == ("e8m14", "e8m14")
    assert 'tree_formats = ["e10m11", "e10m14"]' in TREE.dumps()
    assert spec.from_dict(TREE.to_dict()) == TREE
    assert spec.from_dict({**TREE.to_dict(), "tree_formats": "none"}).tree_formats is None
    assert TREE.replace(tree_formats=["E10M11", "float32"]).tree_formats == ("e10m11", "fp32")
    lone = TREE.replace(k=8, tree_formats=None)
    assert lone.tree_level_formats() == () and lone.sum_format == "e8m14"


# -- scale_sum_bits: the sum of two E8M0 scale exponents in a narrow field ----------------------

@pytest.mark.parametrize("sa,sb,bits,overflow,want", [
    (0xFE, 0x7F, None, "wrap", 2.0 ** 127),      # 127 + 0 = 127 = 0x7F: fits 8 bits
    (0xFE, 0x7F, 8, "wrap", 2.0 ** 127),
    (0xFE, 0x7F, 6, "wrap", 0.5),                # 127 mod 64 = 63: -1 in 6 bits
    (0xFE, 0x7F, 6, "saturate", 2.0 ** 31),
    (0x00, 0x7F, 6, "wrap", 2.0),                # -127 mod 64 = 1
    (0x00, 0x7F, 6, "saturate", 2.0 ** -32),
    (0x8F, 0x8F, 6, "wrap", 2.0 ** -32),         # 16 + 16 = 32: -32
    (0x8F, 0x8E, 6, "wrap", 2.0 ** 31),          # 16 + 15 = 31 fits
    (0xFE, 0xFE, 2, "saturate", 2.0),            # 254 saturates to 1 in 2 bits
    (0xFE, 0xFE, 16, "wrap", float("inf")),      # 2**254 fits 16 bits: overflows FP32
])
def test_scale_sum_bits_wrap_and_saturate(sa, sb, bits, overflow, want):
    unit = PASS_C.replace(zero_sign="positive", scale_sum_bits=bits, scale_sum_overflow=overflow,
                          overflow="inf")
    d = _twins(unit, _dot8([ONE], 0, sa=sa, sb=sb))
    assert int(d[0, 0]) == _bits(want)
    # The truncated step (the compiled kernel's shape; it hands these units to numpy) and GST.
    assert int(_twins(unit.replace(frac_bits=13), _dot8([ONE], 0, sa=sa, sb=sb))[0, 0]) \
        == _bits(want)
    assert int(_twins(unit.replace(group=8), _dot8([ONE], 0, sa=sa, sb=sb))[0, 0]) == _bits(want)
    assert not fast.path(unit.replace(frac_bits=13))["compiled"] or bits is None


def test_scale_sum_bits_fitting_sums_change_nothing():
    """Scales within 2**+-8 sum within [-16, 16]: a 6-bit field holds every sum."""
    base = presets.get("blackwell-mxf8f6f4").spec("e4m3", "e4m3", scale_format="e8m0", block=32)
    vs = vectors.generate("normal", m=4, n=4, k=64, scale_format="e8m0", seed=4)
    np.testing.assert_array_equal(fast.dot(base.replace(scale_sum_bits=6), vs),
                                  fast.dot(base, vs))
    held = terms.product_terms(base.replace(scale_sum_bits=6), vs).exp
    np.testing.assert_array_equal(held, terms.product_terms(base, vs).exp)
    wrapped = vs.replace(a_scale=np.full_like(vs.a_scale, 0xFE))
    exp = terms.product_terms(base.replace(scale_sum_bits=6), wrapped).exp
    assert (exp - terms.product_terms(base, wrapped).exp).max() < 0     # 127 + s wraps down


# -- blocks of any power of two -------------------------------------------------------------

@pytest.mark.parametrize("a_format,scale_format,k,block", [
    ("e2m1", "e8m0", 64, 64),            # one scale pair for 64 FP4 elements
    ("e2m1", "ue4m3", 128, 64),
    ("e4m3", "e8m0", 8, 1),
    ("e4m3", "e8m0", 16, 2),
    ("e2m1", "e8m0", 256, 128),
])
def test_blocks_of_any_power_of_two_end_to_end(a_format, scale_format, k, block):
    unit = UnitSpec(name="blk", a_format=a_format, b_format=a_format, scale_format=scale_format,
                    block=block, k=k, frac_bits=None, acc_format="fp32", acc_rounding="rne")
    for family in ("normal", "scale-extremes", "nan-scale", "cancellation"):
        vs = vectors.generate(family, a_format=a_format, m=2, n=2, k=2 * k,
                              scale_format=scale_format, block=block, seed=5)
        assert vs.block == block and vs.a_scale.shape == (2, 2 * k // block)
        _twins(unit, vs)
    _twins(unit.replace(frac_bits=20, acc_rounding="rz"),
           vectors.generate("uniform", a_format=a_format, m=2, n=2, k=k,
                            scale_format=scale_format, block=block, seed=6))
    if block not in formats.SCALE_BLOCKS:
        with pytest.raises(MicroArchError, match=rf"block {block} \(the RTL takes blocks of 8, "
                                                 rf"16 or 32\) is not supported$"):
            check_rtl(unit.replace(frac_bits=20, k=min(k, 256)))


def test_blocks_vector_rules():
    with pytest.raises(VectorFileError, match=r"^Block must be a power of two from 1 "
                                                      r"to 65536 for e8m0 scales, not 48$"):
        vectors.generate("normal", k=96, scale_format="e8m0", block=48)
    vs = vectors.generate("normal", k=64, scale_format="e8m0", block=64)
    with pytest.raises(VectorFileError, match=r"^block must be a power of two from 1 "
                                                      r"to 65536 for e8m0 scales, not 3$"):
        vs.replace(block=3)
    assert formats.is_scale_block(1) and formats.is_scale_block(65536)
    assert not any(formats.is_scale_block(x) for x in (0, 3, 131072, True, 64.0, -64))


# -- BF16 C and D ------------------------------------------------------------------------------

#: One exact step rounded once to BF16, with C in BF16: a bf16-output MX unit.
BF16 = PASS_C.replace(name="bf16", acc_format="bf16", d_format="bf16", nan_code=0x7FC0)


@pytest.mark.parametrize("family", vectors.FAMILIES + vectors.EXTRA_FAMILIES)
@pytest.mark.parametrize("a_format", ["e4m3", "e2m1", "bf16"])
def test_bf16_c_for_every_family(family, a_format):
    scales = {} if a_format == "bf16" else dict(scale_format="e8m0", block=8)
    if family == "nan-scale" and not scales:
        return
    vs = vectors.generate(family, a_format=a_format, m=2, n=3, k=16, c_format="bf16", seed=7,
                          **scales)
    assert vs.c_format == "bf16" and vs.c.dtype == np.uint16
    unit = BF16.replace(a_format=a_format, b_format=a_format, **(
        scales or dict(scale_format=None, block=None)))
    for u in (unit, unit.replace(c_mode="after"), unit.replace(zero_sign="ieee")):
        d = _twins(u, vs)
        assert d.dtype == np.uint16
        nan = formats.get("bf16").classify(d) == formats.Class.NAN
        assert (d[nan] == 0x7FC0).all()


def test_bf16_c_passes_through_and_nan_code():
    bf = lambda x: int(formats.get("bf16").encode(np.float64(x)))     # noqa: E731
    vs = _dot8([ONE, MINUS_ONE], 0x8000, c_dtype=np.uint16)
    assert int(_twins(BF16, vs)[0, 0]) == 0x8000                       # -0 passes
    assert int(_twins(BF16, _dot8([ONE, MINUS_ONE], 0x0001, c_dtype=np.uint16))[0, 0]) == 1
    assert int(_twins(BF16, _dot8([ONE, MINUS_ONE], 0x7F81, c_dtype=np.uint16))[0, 0]) == 0x7FC0
    assert int(_twins(BF16, _dot8([ONE], bf(2.0 ** -8), c_dtype=np.uint16))[0, 0]) == bf(1.0)
    assert int(_twins(BF16, _dot8([ONE], bf(-1.0), c_dtype=np.uint16))[0, 0]) == 0
    assert int(_twins(BF16.replace(acc_rounding="rd"),
                      _dot8([ONE], bf(-1.0), c_dtype=np.uint16))[0, 0]) == 0x8000


# -- every bad value, one line ------------------------------------------------------------------

@pytest.mark.parametrize("base,kw,message", [
    (PASS_C, dict(zero_sign="cc"), "zero_sign must be one of positive, ieee, c, not 'cc'"),
    (PASS_C, dict(k=None, block=8), "zero_sign c needs an instruction k (the exact unit, k "
                                    "null, follows IEEE 754 sum rules)"),
    (PASS_C, dict(frac_bits=13), "zero_sign c passes C through where the products' exact sum "
                                 "is zero: it needs exact terms (frac_bits null), not a "
                                 "truncated step"),
    (PASS_C, dict(schedule=[[0, 1, 2, 3], [4, 5, 6, 7]]),
     "zero_sign c needs one fused step per instruction (schedule null or one step)"),
    (PASS_C, dict(specials="none"), "zero_sign c passes C's code through, which specials none "
                                    "reads as a number: it needs specials ieee"),
    (PASS_C, dict(promote_every=2), "zero_sign c is defined for units without promote_every "
                                    "or an epilogue"),
    (PASS_C, dict(scale_format="fp32", block=None, epilogue="alpha"),
     "zero_sign c is defined for units without promote_every or an epilogue"),
    (TREE, dict(tree_formats="e10m11"), "tree_formats must be a list of format names (one per "
                                        "tree level) or null, not 'e10m11'"),
    (TREE, dict(tree_formats=[10, 14]), "tree_formats must be a list of format names (one per "
                                        "tree level) or null, not [10, 14]"),
    (TREE, dict(tree_formats=["e10m11"]), "tree_formats must name one format per tree level, "
                                          "log2(k / group) = log2(32 / 8) = 2, not 1"),
    (TREE, dict(tree_formats=["e10m11", "e10m14", "fp32"]),
     "tree_formats must name one format per tree level, log2(k / group) = log2(32 / 8) = 2, "
     "not 3"),
    (TREE, dict(tree_formats=["e10m11", "e12m9"]),
     "tree_formats[1] must be a format mxsim knows (fp32, bf16, e8m14, e10m11 ...), not "
     "'e12m9'"),
    (TREE, dict(tree_formats=["e4m3", "fp32"]),
     "tree_formats[0] must be a float format with IEEE Inf/NaN and 5 to 11 exponent bits "
     "(fp32, bf16, e8m14, e10m11 ...), not 'e4m3'"),
    (TREE, dict(tree_formats=["int8", "fp32"]),
     "tree_formats[0] must be a float format with IEEE Inf/NaN and 5 to 11 exponent bits "
     "(fp32, bf16, e8m14, e10m11 ...), not 'int8'"),
    (TREE, dict(k=8, tree_formats=["fp32"]),
     "tree_formats must be null when k / group = 1 (k = group = 8): a lone term has no adder "
     "level and rounds to acc_format"),
    (PASS_C, dict(tree_formats=["fp32"]), "tree_formats gives each level of a reduction tree "
                                          "its format: it needs reduce tree"),
    (PASS_C, dict(scale_sum_bits=1), "scale_sum_bits must be an integer from 2 to 16 or null, "
                                     "not 1"),
    (PASS_C, dict(scale_sum_bits=17), "scale_sum_bits must be an integer from 2 to 16 or null, "
                                      "not 17"),
    (PASS_C, dict(scale_sum_bits=True), "scale_sum_bits must be an integer or null, not True"),
    (PASS_C, dict(scale_sum_bits=6.0), "scale_sum_bits must be an integer or null, not 6.0"),
    (PASS_C, dict(scale_sum_bits=6, scale_format="ue4m3", block=16, k=16),
     "scale_sum_bits holds the sum of two E8M0 scale exponents: it needs scale_format e8m0, "
     "not ue4m3"),
    (PASS_C, dict(scale_sum_bits=6, scale_format=None, block=None),
     "scale_sum_bits holds the sum of two E8M0 scale exponents: it needs scale_format e8m0, "
     "not None"),
    (PASS_C, dict(scale_sum_bits=6, zero_sign="positive", k=None),
     "scale_sum_bits models a unit's exponent field; the exact unit (k null) sums scale "
     "exponents exactly"),
    (PASS_C, dict(scale_sum_bits=6, zero_sign="positive", upcast="bf16", fold_scales=True),
     "scale_sum_bits cannot go with fold_scales, which multiplies each scale into its operand "
     "(no exponent sum is formed)"),
    (PASS_C, dict(scale_sum_overflow="clip"), "scale_sum_overflow must be one of wrap, "
                                              "saturate, not 'clip'"),
    (PASS_C, dict(scale_sum_overflow="saturate"), "scale_sum_overflow saturate needs "
                                                  "scale_sum_bits (the field it saturates)"),
    (PASS_C, dict(block=24), "block must be a power of two from 1 to 65536, not 24"),
    (PASS_C, dict(block=0), "block must be a power of two from 1 to 65536, not 0"),
    (PASS_C, dict(block=131072, k=131072), "block must be a power of two from 1 to 65536, not "
                                           "131072"),
    (PASS_C, dict(block=64), "k (8) must be a multiple of the block (64)"),
    (PASS_C, dict(acc_format="e10m11"), "acc_format must be fp32, fp16, bf16 or e8m1..e8m22, "
                                        "not 'e10m11'"),
    (BF16, dict(nan_code=0x7FC00000), "nan_code must be a NaN code of bf16, not 2143289344"),
    (BF16, dict(nan_code=0x7F80), "nan_code must be a NaN code of bf16, not 32640"),
    (BF16, dict(nan_code=0xFFFF + 1), "nan_code must be a NaN code of bf16, not 65536"),
])
def test_foreign_keys_bad_values_are_one_line_spec_errors(base, kw, message):
    with pytest.raises(SpecError, match="^" + re.escape(f"Unit spec {base.name!r}: {message}")
                       + "$"):
        base.replace(**kw)


def test_foreign_keys_are_left_out_of_earlier_specs():
    """Every earlier spec keeps its text and digest: the new keys are written only when set."""
    for name in presets.names():
        p = presets.get(name)
        for a, b in p.pairs:
            for scale, block in p.scales_for(a, b):
                for c_format in p.c_formats:
                    text = p.spec(a, b, scale_format=scale, block=block,
                                  c_format=c_format).dumps()
                    assert "tree_formats" not in text and "scale_sum" not in text, name
    assert UnitSpec().digest() == UnitSpec(tree_formats=None, scale_sum_bits=None,
                                           scale_sum_overflow="wrap").digest()
    held = PASS_C.replace(scale_sum_bits=6, scale_sum_overflow="saturate", zero_sign="positive")
    assert "scale_sum_bits = 6" in held.dumps() and spec.from_dict(held.to_dict()) == held
    assert spec.from_dict({**held.to_dict(), "scale_sum_bits": "none",
                           "scale_sum_overflow": "wrap"}).scale_sum_bits is None
    assert 'zero_sign = "c"' in PASS_C.dumps() and spec.from_dict(PASS_C.to_dict()) == PASS_C
    assert BF16.replace(nan_code=0x7E00, d_format="fp16", acc_format="fp16").d_nan == 0x7E00


def test_foreign_formats_for_tree_levels():
    """formats.get builds wide IEEE-style formats: e10m11 has 12 significant bits, exponents
    -510 .. 511, and decodes from its fields."""
    f = formats.get("e10m11")
    assert (f.exp_bits, f.man_bits, f.bias, f.bits, f.code_dtype) == (10, 11, 511, 22,
                                                                        np.dtype(np.uint32))
    codes = np.array([f.code_of_max, 1, f.code_of_inf, f.code_of_nan, 511 << 11], np.uint32)
    got = f.decode(codes)
    assert got[0] == (2 - 2.0 ** -11) * 2.0 ** 511 and got[1] == 2.0 ** (-510 - 11)
    assert np.isinf(got[2]) and np.isnan(got[3]) and got[4] == 1.0
    np.testing.assert_array_equal(f.encode(got[[0, 1, 4]]), codes[[0, 1, 4]])
    assert formats.get("e5m2").specials is formats.Specials.IEEE      # registered, as before
    assert formats.get("e8m13") is formats.get("E8M13")
    for bad in ("e12m9", "e4m4", "e10m22", "e10m0", "e8m23"):
        with pytest.raises(FormatError, match=f"^Unknown format '{bad}'; choose one of "):
            formats.get(bad)


# -- random specs and adversarial sets: fast == reference ------------------------------------

_ELEMS = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "int8")
_TREE_LEVELS = ("e10m11", "e10m14", "e9m7", "e11m20", "e8m14", "fp32", "bf16", "fp16", "e5m10")


@st.composite
def _foreign_specs(draw):
    """Units using the new keys: one exact step (C in it or after) or a tree, zero_sign c or
    not, a narrow scale-exponent sum or not, tree level formats, blocks of 1 to 64."""
    a_format, b_format = draw(st.sampled_from(_ELEMS)), draw(st.sampled_from(_ELEMS))
    block = draw(st.sampled_from([1, 2, 4, 8, 16, 32, 64]))
    k = draw(st.sampled_from([x for x in (8, 16, 32, 64) if x % block == 0]))
    scale = draw(st.sampled_from(["e8m0", "e8m0", "ue4m3"]))
    tree = draw(st.booleans())
    group = None
    if tree or draw(st.booleans()):
        fits = [g for g in (1, 2, 4, 8) if block % g == 0 and k // g >= 1
                and spec.group_sum_bits(a_format, b_format, g) <= spec.MAX_GROUP_BITS]
        group = draw(st.sampled_from(fits)) if fits else None
    tree = tree and group is not None
    d_format = draw(st.sampled_from(["fp32", "fp32", "bf16", "fp16"]))
    acc = draw(st.sampled_from([d_format, "fp32", "e8m13", "bf16"]))
    if acc == "e8m13" and d_format == "fp16":
        acc = "fp16"
    levels = (k // group).bit_length() - 1 if tree else 0
    tree_formats = ([draw(st.sampled_from(_TREE_LEVELS)) for _ in range(levels)]
                    if levels and draw(st.booleans()) else None)
    bits = draw(st.sampled_from([None, 2, 4, 6, 8])) if scale == "e8m0" else None
    return UnitSpec(
        name="drawn", a_format=a_format, b_format=b_format, scale_format=scale, block=block,
        k=k, group=group, reduce="tree" if tree else "chain", frac_bits=None,
        c_mode="after" if tree else draw(st.sampled_from(["step", "after"])),
        c_rounding=draw(st.sampled_from(["rne", "rz", "rd", "ru"])), acc_format=acc,
        acc_rounding=draw(st.sampled_from(["rz", "rne", "ru", "rd"])), d_format=d_format,
        overflow=draw(st.sampled_from(["inf", "ieee", "saturate"])),
        zero_sign=draw(st.sampled_from(["c", "c", "positive", "ieee"])),
        tree_formats=tree_formats, scale_sum_bits=bits,
        scale_sum_overflow=draw(st.sampled_from(["wrap", "saturate"])) if bits else "wrap",
        nan_code=draw(st.sampled_from([None, {"fp32": 0x7FC00000, "bf16": 0x7FC0,
                                              "fp16": 0x7E00}[d_format]])))


def _negated(fmt: formats.Format, codes: np.ndarray) -> np.ndarray:
    """Codes of the negated values (NaN codes stay NaN; MXINT8's -2.0 saturates)."""
    if fmt.kind == "int":
        return fmt.encode(-fmt.decode(codes), saturate=True).astype(codes.dtype)
    return codes ^ codes.dtype.type(1 << fmt.sign_shift)


def adversarial(unit: UnitSpec, k: int, rng: np.random.Generator, m: int = 4,
                n: int = 3) -> VectorSet:
    """Dots that cancel exactly (B's second half negates its first against the same A values
    and scales) in rows 0 and 1; edge codes (zeros, max, subnormals, NaN/Inf) elsewhere; scales
    from E8M0/UE4M3's extremes; C from ±0, subnormals, ±1, FLT_MAX, ±Inf, quiet and signaling
    NaN."""
    fa, fb = formats.get(unit.a_format), formats.get(unit.b_format)

    def codes(f, shape):
        every = np.arange(1 << f.bits).astype(f.code_dtype)
        pool = [every, np.array([0, 1 << f.sign_shift, f.code_of_max], f.code_dtype),
                f.encode(np.array([1.0, -1.0, 0.5, -0.5, 0.0])).astype(f.code_dtype)]
        which = rng.integers(0, len(pool), shape)
        return np.vectorize(lambda w: rng.choice(pool[w]), otypes=[f.code_dtype])(which)

    a, b = codes(fa, (m, k)), codes(fb, (k, n))
    h = k // 2
    a[:2, h:] = a[:2, :h]
    b[h:] = _negated(fb, b[:h])
    pool = (np.array([0x00, 0x01, 0x10, 0x70, 0x7F, 0x85, 0xF0, 0xFE, 0xFF], np.uint8)
            if unit.scale_format == "e8m0" else
            np.array([0x00, 0x01, 0x08, 0x30, 0x38, 0x40, 0x7E, 0x7F, 0xB8], np.uint8))
    nb = k // unit.block
    sa, sb = rng.choice(pool, size=(m, nb)), rng.choice(pool, size=(nb, n))
    if nb > 1:
        sa[:2, nb // 2:] = sa[:2, :nb // 2]
        sb[nb // 2:] = sb[:nb // 2]
    c = rng.choice(np.array(_EDGE_C[unit.d_format], formats.get(unit.d_format).code_dtype),
                   size=(m, n))
    return VectorSet(a=a, b=b, a_format=unit.a_format, b_format=unit.b_format, c=c,
                     c_format=unit.d_format, a_scale=sa, b_scale=sb,
                     scale_format=unit.scale_format, block=unit.block)


#: C codes from the edges, per format: +0, -0, ±the smallest subnormal, ±1, max, ±Inf, a quiet
#: and a signaling NaN, the smallest normal.
_EDGE_C = {
    "fp32": [0, NEG_ZERO, 0x00000001, 0x80000001, 0x3F800000, 0xBF800000, FLT_MAX, 0x7F800000,
             0xFF800000, 0x7FC00000, 0x7F800001, 0x00800000],
    "bf16": [0, 0x8000, 0x0001, 0x8001, 0x3F80, 0xBF80, 0x7F7F, 0x7F80, 0xFF80, 0x7FC0, 0x7F81,
             0x0080],
    "fp16": [0, 0x8000, 0x0001, 0x8001, 0x3C00, 0xBC00, 0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01,
             0x0400],
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit=_foreign_specs(), seed=st.integers(0, 2 ** 16), n_inst=st.integers(1, 2))
def test_foreign_adversarial_fast_equals_reference(unit, seed, n_inst):
    _twins(unit, adversarial(unit, unit.k * n_inst, np.random.default_rng(seed)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit=_foreign_specs(), family=st.sampled_from(vectors.FAMILIES),
       seed=st.integers(0, 2 ** 16), with_c=st.booleans())
def test_foreign_random_fast_equals_reference(unit, family, seed, with_c):
    vs = vectors.generate(family, a_format=unit.a_format, b_format=unit.b_format, m=2, n=3,
                          k=unit.k * 2, scale_format=unit.scale_format, block=unit.block,
                          with_c=with_c, c_format=unit.d_format, seed=seed)
    _twins(unit, vs)


def test_foreign_keys_on_a_device():
    """The new paths are array-module generic: on the strict CuPy stand-in they give the same
    codes and stay on the device (what the GPU engine relies on)."""
    from test_engine_xp import _on_device
    rng = np.random.default_rng(12)
    for unit in (PASS_C, PASS_C.replace(c_mode="after", acc_rounding="rd"), TREE.replace(
            zero_sign="c"), PASS_C.replace(zero_sign="positive", frac_bits=13,
                                           scale_sum_bits=6)):
        _on_device(unit, adversarial(unit, unit.k * 2, rng))
