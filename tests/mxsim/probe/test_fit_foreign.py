"""Probe suites for foreign MX units (mxfp8, mxint8) and fitting their numerics.

The fit recovers the hand-written coprocessor's numerics (examples/rtl/mxfp8_coproc: one exact
step rounded once to FP32, no NaN/Inf, saturation) and the generated MXFP8 unit's from their
outputs on the probe suites, and says precisely when nothing in its search explains the data.
"""

import re

import numpy as np
import pytest

from mxsim import presets, probe
from mxsim.engine import fast
from mxsim.errors import VectorFileError
from mxsim.probe import fit
from mxsim.spec import UnitSpec

#: Example 1's numerics (examples/rtl/mxfp8_coproc).
COPROC = UnitSpec(name="coproc", a_format="e4m3", b_format="e4m3", scale_format="e8m0",
                  block=8, k=8, frac_bits=None, acc_format="fp32", acc_rounding="rne",
                  overflow="saturate", specials="none")


@pytest.mark.parametrize("kind,k,block,elem", [("mxfp8", 8, 8, "e4m3"),
                                               ("mxfp8", 32, 32, "e4m3"),
                                               ("mxint8", 128, 32, "int8"),
                                               ("mxint8", 16, 16, "int8")])
def test_probe_mx_suites(kind, k, block, elem):
    vs = probe.probe_suite(kind, k=k)
    assert (vs.a_format, vs.b_format, vs.scale_format, vs.block, vs.k) == (
        elem, elem, "e8m0", block, k)
    assert vs.batch_shape == (len(probe.MX_FAMILIES),) and (vs.m, vs.n) == (64, 64)
    assert vs.extra["families"] == list(probe.MX_FAMILIES)
    again = probe.probe_suite(kind, k=k)
    assert all(np.array_equal(getattr(vs, x), getattr(again, x))
               for x in ("a", "b", "a_scale", "b_scale", "c"))
    spec_ = probe.MX_FAMILIES.index("specials")
    assert (vs.a_scale[spec_] == 0xFF).any() and (
        (vs.c[spec_] & 0x7F800000) == 0x7F800000).any()
    if elem == "e4m3":
        assert ((vs.a[spec_] & 0x7F) == 0x7F).any()          # E4M3 NaN codes
    ue = probe.probe_suite(kind, k=k, scale_format="ue4m3")
    assert ue.scale_format == "ue4m3" and ue.block == block


@pytest.mark.parametrize("kw,msg", [
    (dict(kind="mxfp8", k=8, block=16), "Block of an MX probe must be 8, 16 or 32 and divide "
                                        "K (8), not 16"),
    (dict(kind="mxfp8", k=12), "K of an MX probe must be a multiple of 8 (blocks of 8, 16 "
                               "or 32), not 12"),
    (dict(kind="mxint8", k=32, scale_format="fp32"), "Scale format of an MX probe must be "
                                                     "e8m0 or ue4m3, not 'fp32'"),
    (dict(kind="fp8", k=32, block=32), "Probe kind fp8 has no block scales"),
    (dict(kind="mxfp4", k=32), "Probe kind must be one of fp8, mxfp8, mxint8, not 'mxfp4'"),
])
def test_probe_mx_bad_arguments(kw, msg):
    with pytest.raises(VectorFileError, match="^" + re.escape(msg)):
        probe.probe_suite(**kw)


def _fit_model(true: UnitSpec, suite, **kw) -> fit.Fit:
    observed = suite.with_result(fast.dot(true, suite), producer=true.name)
    result = fit.fit(observed, k=true.k, **kw)
    # The claim is checked: the fitted spec reproduces exactly `equal` outputs.
    assert int((fast.dot(result.spec, observed) == observed.d).sum()) == result.equal
    return result


def test_fit_recovers_the_coprocessor_numerics():
    """k = 8, one E8M0 scale per operand: exact sum, FP32 RNE, no NaN/Inf, saturation."""
    result = _fit_model(COPROC, probe.probe_suite("mxfp8", k=8))
    assert result.exact, result.report()
    assert (result.spec.frac_bits, result.spec.specials, result.spec.overflow.value,
            result.spec.acc_format, result.spec.acc_rounding.value) == (
        None, "none", "saturate", "fp32", "rne")
    assert result.evidence["specials"]["ieee"] < result.total
    assert max(v for o, v in result.evidence["overflow"].items() if o != "saturate") \
        < result.total


def test_fit_recovers_the_generated_mxfp8_unit():
    """mxsim's generated unit (blackwell-mxf8f6f4, E4M3, E8M0 blocks of 32) on the k = 32
    probe: its F, roundings, NaN/Inf handling and overflow."""
    suite = probe.probe_suite("mxfp8", k=32)
    true = presets.get("blackwell-mxf8f6f4").spec_for(suite)
    result = _fit_model(true, suite)
    assert result.exact, result.report()
    for param in ("schedule", "frac_bits", "align", "acc_format", "acc_rounding", "c_mode",
                  "specials", "overflow", "product"):
        assert getattr(result.spec, param) == getattr(true, param), param
        assert sorted(result.evidence[param].values())[-2] < result.total, param


#: A small search (the tree's own parameters, no `reduce`) so the case runs in seconds.
SMALL = {"frac_bits": [None, 13, 24], "acc_format": ["fp32", "e8m13", "e8m14"],
         "acc_rounding": ["rz", "rne"], "c_mode": ["step", "after"],
         "overflow": ["inf", "saturate"], "schedule": [None]}
TREE = UnitSpec(name="tree", a_format="e4m3", b_format="e4m3", scale_format="e8m0", block=8,
                k=32, group=8, reduce="tree", frac_bits=None, acc_format="e8m14",
                acc_rounding="rne", overflow="saturate", c_mode="after")


def test_fit_says_precisely_why_a_tree_cannot_be_explained():
    """A reduction tree's outputs, with `reduce` left out of the search: the closest spec,
    the outputs it misses (with what their inputs hold) and the misses' ulp histogram."""
    suite = probe.probe_suite("mxfp8", k=32, block=8).subset(slice(0, 16), slice(0, 16))
    result = _fit_model(TREE, suite, search=SMALL)
    assert not result.exact
    assert sum(result.ulps.values()) == result.total - result.equal > 0
    assert result.ulps["NaN"] == 0 and result.ulps["1"] > 0
    text = result.report()
    assert "cannot explain the rest" in text and "closest spec: schedule one step, k 32" in text
    assert f"its {result.total - result.equal} misses, in ulps of fp32" in text
    assert len(result.misses) == 5 and all(m["index"] in result.unexplained
                                           for m in result.misses)
    first = result.misses[0]
    assert f"dot {first['index']} [{first['family']}]: observed {first['observed']}" in text
    assert "scales A " in first["inputs"] and "C 0x" in first["inputs"]
    # With `reduce` searched, the same outputs are explained by the tree.
    found = _fit_model(TREE, suite, search={**SMALL, "reduce": ["chain", "tree"]})
    assert found.exact and (found.spec.reduce, found.spec.group) == ("tree", 8)


def test_fit_ulp_bins():
    obs = np.array([0x00000000, 0x7F800000, 0x3F800000, 0x7FFFFFFF, 0x80000001], np.uint32)
    fit_ = np.array([0x80000000, 0x7F7FFFFF, 0x3F800003, 0x3F800000, 0x00000001], np.uint32)
    bins = fit.ulp_bins("fp32", obs, fit_)
    assert {k: v for k, v in bins.items() if v} == {"0": 1, "1": 1, "2": 1, "3-4": 1, "NaN": 1}


def test_fit_ulp_bins_count_nan_codes_apart():
    """Two NaNs of different codes are a miss too (a unit with another NaN code): each pair of
    different codes counts in exactly one bin, so the histogram adds up to the misses."""
    obs = np.array([0x7FC00000, 0xFFFFFFFF, 0x7FC00000, 0x7FC00000], np.uint32)
    fit_ = np.array([0x7FFFFFFF, 0x7FFFFFFF, 0x7FC00000, 0x3F800000], np.uint32)
    bins = fit.ulp_bins("fp32", obs, fit_)
    assert {k: v for k, v in bins.items() if v} == {"NaN code": 2, "NaN": 1}


#: A k = 8 MXFP8 unit with IEEE NaN/Inf (the fit's NaN-code tests run its model).
K8_IEEE = UnitSpec(name="k8", a_format="e4m3", b_format="e4m3", scale_format="e8m0", block=8,
                   k=8, frac_bits=25, acc_format="fp32", acc_rounding="rz")


def _nan_observed(codes: list[int], rows: int = 8):
    """The mxfp8 probe suite (the first ``rows`` rows of each batch entry) through K8_IEEE, its
    NaN results given ``codes`` in turn."""
    suite = probe.probe_suite("mxfp8", k=8, block=8).subset(slice(0, rows))
    d = fast.dot(K8_IEEE, suite)
    nan = np.flatnonzero(d.reshape(-1) == K8_IEEE.d_nan)
    assert len(nan) > 10
    d.reshape(-1)[nan] = np.resize(np.array(codes, np.uint32), len(nan))
    return suite.with_result(d, producer="k8 with its own NaN code")


def test_fit_leaves_the_default_nan_code_out_of_its_search():
    """NaN results of the default code: nothing to separate, so nan_code is not searched (the
    fit as before). Other codes are fitted as nan_code: tests/hostile/test_foreign.py fits
    designs with 0x7FC00000 and 0xFFFFFFFF."""
    result = fit.fit(_nan_observed([0x7FFFFFFF]), k=8)
    assert result.exact, result.report()
    assert result.spec.nan_code is None and "nan_code" not in result.evidence


def test_fit_that_cannot_explain_two_nan_codes_reports_them_as_misses():
    """Half the NaN results 0x7FC00000, half 0x7FFFFFFF: no spec has two NaN codes, so the
    fit reports the closest spec and its misses, each under 'NaN code' (this crashed with
    StopIteration when the NaN codes were not the fitted spec's)."""
    result = fit.fit(_nan_observed([0x7FC00000, 0x7FFFFFFF], rows=1), k=8, start=K8_IEEE,
                     search={"frac_bits": [24, 25], "nan_code": [None, 0x7FC00000]})
    assert not result.exact
    misses = result.total - result.equal
    assert result.ulps["NaN code"] == misses == sum(result.ulps.values())
    assert {m["ulps"] for m in result.misses} == {"NaN code"}
    assert "NaN code ulps" in result.report()


@pytest.mark.parametrize("families, first, second", [
    (["pair-cancel", "tie"], "pair-cancel", "tie"),
    (["pair-cancel", 1], "pair-cancel", ""),
    (["pair-cancel"], "pair-cancel", ""),
    ([], "", ""), (5, "", ""), (1.5, "", ""), (True, "", ""), (None, "", ""),
    ("pair-cancel", "", ""), ({"a": 1}, "", ""), ([[1], [2]], "", ""),
    ([{"a": 1}, None], "", ""),
], ids=["strings", "mixed", "short", "empty", "int", "float", "bool", "null", "string", "dict",
        "nested", "dict-and-null"])
def test_miss_summaries_name_a_family_only_where_the_provenance_does(families, first, second):
    """Provenance is free-form (D-FIT-FAMILIES): a family is a string entry of a list with
    one per batch entry; anything else is shown blank, never a crash or a letter of a name."""
    observed = _nan_observed([0x7FC00000])
    observed = observed.replace(extra={**observed.extra, "families": families})
    fitted = fast.dot(K8_IEEE, observed)
    got = fit.miss_summaries(observed, fitted, [(0, 0, 0), (1, 0, 0)])
    assert [m["family"] for m in got] == [first, second]
