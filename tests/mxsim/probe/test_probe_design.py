"""Probe suites in a design's own terms (mxsim.probe.design) and what the fit now searches:
the sign of an exact zero (C = -0 separates C passing through from +0), the NaN code, results
in BF16 (double rounding through FP32 separated), a reduction tree's format per level, results
compared as values (a fixed-point output), pinned fields and a caller's admissibility rule.

Everything runs on the fast engine: the outputs are a known spec's, the fit must find it (or
say it cannot), as examples/rtl/mx_fpu and nrm_tree need through their port maps.
"""

import re
from dataclasses import replace

import numpy as np
import pytest

from mxsim import formats, probe
from mxsim.engine import fast
from mxsim.errors import VectorFileError
from mxsim.probe import fit
from mxsim.probe.design import DESIGN_FAMILIES, design_suite
from mxsim.spec import UnitSpec

#: examples/rtl/mx_fpu's numerics: one exact rounding, C passing through, the canonical NaN.
FPU = UnitSpec(name="fpu", a_format="e4m3", b_format="e4m3", scale_format="e8m0", block=32,
               k=32, frac_bits=None, acc_format="fp32", acc_rounding="rne", overflow="ieee",
               zero_sign="c", nan_code=0x7FC00000)
#: examples/rtl/nrm_tree's, inside its domain: a tree rounding to 12 then 15 bits, no C.
TREE = UnitSpec(name="tree", a_format="e4m3", b_format="e4m3", scale_format="e8m0", block=8,
                k=32, frac_bits=None, specials="none", group=8, reduce="tree",
                tree_formats=("e8m11", "e8m14"), c_mode="after", acc_format="e8m14",
                acc_rounding="rne", overflow="saturate")


def _fpu(a: str, d_format: str = "fp32", **kw) -> UnitSpec:
    k = 64 if a == "e2m1" else 32
    nan = 0x7FC0 if d_format == "bf16" else 0x7FC00000
    return replace(FPU, a_format=a, b_format=a, k=k, block=k, d_format=d_format,
                   acc_format=d_format, nan_code=nan, **kw)


def _suite(*args, **kw):
    """A design suite's first 16 x 16 dots of each family (every row and column pattern)."""
    return design_suite(*args, **kw).subset(slice(0, 16), slice(0, 16))


def _observed(spec: UnitSpec, vs):
    return vs.with_result(fast.dot(spec, vs), d_format=spec.d_format, producer=spec.name)


@pytest.mark.parametrize("a,b,k,block,scales,c", [
    ("e4m3", "e4m3", 32, None, "e8m0", "fp32"),
    ("e2m1", "e2m1", 64, 64, "e8m0", "bf16"),          # one scale pair per 64 FP4 lanes
    ("e2m1", "e2m1", 32, 16, "ue4m3", "fp32"),         # NVFP4
    ("e4m3", "e5m2", 32, 8, "e8m0", "fp16"),           # A and B differ
    ("e3m2", "e2m3", 16, 16, "e8m0", "fp32"),
    ("int8", "int8", 32, 32, "e8m0", "bf16"),
    ("e4m3", "e5m2", 8, None, None, "fp32"),           # no block scales
], ids=lambda x: str(x))
def test_design_suite_takes_the_designs_formats(a, b, k, block, scales, c):
    vs = design_suite(a, b, k=k, block=block, scale_format=scales, c_format=c)
    fams = [f for f in DESIGN_FAMILIES if f != "narrow-tie" or c != "fp32"]
    assert vs.extra["families"] == fams and vs.batch_shape == (len(fams),)
    assert (vs.a_format, vs.b_format, vs.k, vs.c_format, vs.scale_format) == (a, b, k, c, scales)
    assert vs.block == (None if scales is None else block or k)
    assert vs.c.dtype == formats.get(c).code_dtype
    again = design_suite(a, b, k=k, block=block, scale_format=scales, c_format=c)
    assert all(np.array_equal(getattr(vs, x), getattr(again, x))
               for x in ("a", "b", "a_scale", "b_scale", "c") if getattr(vs, x) is not None)
    # C = +0 and -0 in the zero-sign family, NaN C codes (sign and quiet bit kept) in specials
    cf = formats.get(c)
    zs = vs.c[fams.index("zero-sign")]
    assert (zs == 0).any() and (zs == 1 << cf.sign_shift).any()
    sp = vs.c[fams.index("specials")]
    assert (cf.classify(sp) == formats.Class.NAN).any()


@pytest.mark.parametrize("kw,msg", [
    (dict(a_format="fp16", k=32), "A's format of a design probe must be one of e4m3, e5m2, "
                                  "e3m2, e2m3, e2m1, int8, not 'fp16'"),
    (dict(a_format="e4m3", k=30), "K must be a multiple of 4 from 4 to 4096, not 30"),
    (dict(a_format="e4m3", k=32, block=24), "Block of a design probe must be a power of two "
                                            "dividing K (32), not 24"),
    (dict(a_format="e4m3", k=32, scale_format="fp32"), "Scale format of a design probe must "
                                                       "be e8m0, ue4m3 or none, not 'fp32'"),
    (dict(a_format="e4m3", k=32, c_format="e8m13"), "C's format of a design probe must be one "
                                                    "of fp32, bf16, fp16, not 'e8m13'"),
])
def test_design_suite_bad_arguments(kw, msg):
    with pytest.raises(VectorFileError, match="^" + re.escape(msg) + "$"):
        design_suite(**kw)


@pytest.mark.parametrize("a,rounding", [("e4m3", "rne"), ("e2m1", "rd"), ("int8", "rz")])
def test_zero_sign_c_is_not_reproduced_by_another_rule(a, rounding):
    """C passing through differs from +0 / IEEE zeros only where C is -0 (or, rounding toward
    -Inf, +0) and the products sum to exactly zero: the zero-sign family holds those dots, so
    the wrong rule misses outputs. The MX suite alone (no C = -0) cannot tell them apart."""
    true = _fpu(a, acc_rounding=rounding)
    vs = _suite(a, k=true.k)
    observed = _observed(true, vs)
    zs = vs.extra["families"].index("zero-sign")
    for rule in ("positive", "ieee"):
        wrong = fast.dot(replace(true, zero_sign=rule), vs)
        differ = np.flatnonzero((wrong != observed.d).reshape(vs.batch_shape[0], -1).any(1))
        assert list(differ) == [zs], rule
        # what fit --rtl probed before (the MX families): every output "reproduced"
        mx = observed.subset()
        mx = mx.replace(a=mx.a[:zs], b=mx.b[:zs], c=mx.c[:zs], d=mx.d[:zs],
                        a_scale=mx.a_scale[:zs], b_scale=mx.b_scale[:zs])
        assert np.array_equal(fast.dot(replace(true, zero_sign=rule), mx), mx.d)
    search = {"zero_sign": ["positive", "ieee", "c"], "nan_code": [None, 0x7FC00000]}
    got = fit.fit(observed, k=true.k, start=replace(true, zero_sign="positive", nan_code=None),
                  search=search)
    assert got.exact and got.spec.zero_sign.value == "c" and got.spec.nan_code == 0x7FC00000
    assert got.evidence["zero_sign"]["positive"] < got.total
    assert got.evidence["zero_sign"]["ieee"] < got.total
    without = fit.fit(observed, k=true.k, start=replace(true, zero_sign="positive"),
                      search={"zero_sign": ["positive", "ieee"]})
    assert not without.exact


def test_fit_finds_the_bf16_accumulator_and_nan_code_in_bf16_codes():
    """Results in BF16 codes: the narrow-tie family's sticky products below FP32's ulp separate
    one rounding to BF16 from FP32 then BF16; the NaN code 0x7FC0 comes from the outputs."""
    true = _fpu("e4m3", "bf16")
    observed = _observed(true, _suite("e4m3", k=32, c_format="bf16"))
    assert observed.d.dtype == np.uint16
    start = replace(true, acc_format="fp32", nan_code=None, zero_sign="positive")
    got = fit.fit(observed, k=32, start=start,
                  search={"acc_format": ["fp32", "e8m13", "bf16"], "zero_sign":
                          ["positive", "ieee", "c"], "nan_code": [None, 0x7FC0]})
    assert got.exact, got.report()
    assert (got.spec.acc_format, got.spec.nan_code) == ("bf16", 0x7FC0)
    assert got.evidence["acc_format"]["fp32"] < got.total


def test_fit_finds_a_trees_level_formats():
    """tree_formats is searched a level at a time: a tree rounding to 12 then 15 bits."""
    vs = _suite("e4m3", k=32, block=8)
    vs = vs.replace(c=np.zeros_like(vs.c))
    observed = _observed(TREE, vs)
    start = replace(TREE, tree_formats=None, acc_format="e8m14")
    got = fit.fit(observed, k=32, start=start, search={"tree_formats": fit.DEFAULT_SEARCH[
        "tree_formats"], "acc_rounding": ["rz", "rne"]})
    assert got.exact, got.report()
    assert got.spec.tree_formats == ("e8m11", "e8m14")
    assert max(v for f, v in got.evidence["tree_formats"].items() if f != "e8m11|e8m14") \
        < got.total


def test_fit_compares_values_where_the_result_has_no_zero_sign_or_nan_code():
    """meta['compare'] = "value" (a fixed-point result): -0 reads as +0 and every NaN as one,
    so neither the zero sign nor the NaN code is searched, and a fit is exact on values."""
    true = _fpu("e4m3")
    observed = _observed(true, _suite("e4m3", k=32))
    d = observed.d.copy()
    fp32 = formats.get("fp32")
    d[fp32.classify(d) == formats.Class.ZERO] = 0                  # the sign is not read
    d[fp32.classify(d) == formats.Class.NAN] = 0x7FFFFFFF          # nor the payload
    by_value = observed.replace(d=d, extra={**observed.extra, "compare": "value"})
    got = fit.fit(by_value, k=32, start=true, search={"acc_rounding": ["rz", "rne"]})
    assert got.exact and got.spec == replace(true, name="fitted", provenance=got.spec.provenance)
    as_codes = fit.fit(observed.replace(d=d), k=32, start=true,
                       search={"acc_rounding": ["rz", "rne"]})
    assert not as_codes.exact
    assert as_codes.ulps["0"] > 0 and as_codes.ulps["NaN code"] > 0     # -0 and 0x7FC00000
    searched = fit._prune(dict(fit.DEFAULT_SEARCH), by_value, true)
    assert "zero_sign" not in searched and "nan_code" not in searched
    assert "zero_sign" in fit._prune(dict(fit.DEFAULT_SEARCH), observed, true)


def test_fit_keeps_pinned_fields_and_admissible_specs():
    """A design's mode (pinned: the rounding its rm port was driven with) stays; specs the
    caller refuses (a map that models flags: one rounding, d_format = acc_format) score 0."""
    true = _fpu("int8", acc_rounding="rd")
    observed = _observed(true, _suite("int8", k=32))
    search = {"acc_rounding": ["rz", "rne", "rd", "ru"], "frac_bits": [None, 24, 25],
              "zero_sign": ["positive", "ieee", "c"], "nan_code": [None, 0x7FC00000]}
    start = replace(true, acc_rounding="rz", zero_sign="positive", nan_code=None)
    pinned = fit.fit(observed, k=32, start=start, search=search, pinned=["acc_rounding"])
    assert pinned.spec.acc_rounding.value == "rz" and not pinned.exact
    assert "acc_rounding" not in pinned.evidence
    free = fit.fit(observed, k=32, start=start, search=search,
                   admissible=lambda s: s.acc_rounding.value != "ru")
    assert free.exact and free.spec.acc_rounding.value == "rd"
    assert free.evidence["acc_rounding"]["ru"] == 0


def test_mx_probe_suites_are_unchanged():
    """The GPU probe kinds keep their families (recorded H200 runs replay them)."""
    assert probe.MX_FAMILIES == ("pair-cancel", "c-gap", "tie", "one-large", "random",
                                 "overflow", "specials")
    assert probe.probe_suite("mxfp8", k=8).num_dots == 7 * 64 * 64


def test_fit_alternatives_and_adopt():
    """What one mode's outputs leave open (overflow inf or ieee under nearest rounding) is
    listed as alternatives, each reproducing the same outputs; adopting one (as fit --rtl
    does when a design's other modes decide) keeps the report consistent."""
    true = _fpu("e4m3")
    observed = _observed(true, _suite("e4m3", k=32))
    got = fit.fit(observed, k=32, start=replace(true, overflow="inf"),
                  search={"overflow": ["inf", "saturate", "ieee"]})
    assert got.exact and got.spec.overflow.value == "inf"
    alts = dict(got.alternatives())
    assert alts["overflow"].overflow.value == "ieee"
    assert np.array_equal(fast.dot(alts["overflow"], observed), observed.d)
    got.adopt("overflow", alts["overflow"], "other modes decide overflow = ieee")
    assert got.spec.overflow.value == "ieee" and got.unseparated["overflow"] == ["inf"]
    assert "other modes decide overflow = ieee" in got.report()
    assert "  overflow      = ieee or inf" in got.report()
