"""The Python front doors: mxsim.matmul on codes and mxsim.gemm on floats."""

from fractions import Fraction

import numpy as np
import pytest

import mxsim
from mxsim import formats, presets, quantize
from mxsim.engine import fast, reference
from mxsim.errors import VectorFileError
from mxsim.vectors import VectorSet


def _xw(m=4, k=128, n=8, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(np.float32),
            rng.standard_normal((k, n)).astype(np.float32))


def test_api_gemm_mx_is_quantise_then_unit():
    x, w = _xw()
    c = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    sa, a = quantize.to_mx(x, "e4m3", 32, "rceil", axis=-1)
    sb, b = quantize.to_mx(w, "e4m3", 32, "rceil", axis=0)
    vs = VectorSet(a=a, b=b, c=c.view(np.uint32), a_scale=sa, b_scale=sb, scale_format="e8m0",
                   block=32)
    for unit in ("blackwell-mxf8f6f4", "ocp-fp32", "exact"):
        spec = presets.get(unit).spec_for(vs)
        expect = fast.dot(spec, vs)
        np.testing.assert_array_equal(mxsim.gemm(x, w, c, unit=unit).view(np.uint32), expect)
        got_ref = mxsim.gemm(x, w, c, unit=unit, engine="reference").view(np.uint32)
        np.testing.assert_array_equal(got_ref, reference.dot(spec, vs))


def test_api_gemm_fp8_tensor_divides_power_of_two_scales_out_exactly():
    x, w = _xw(m=16, k=64, n=16, seed=2)
    x[0, 0] = 3.0e4            # a large amax: the per-tensor scale is a negative power of two
    d = mxsim.gemm(x, w, unit="hopper-cublas-fast")
    e4m3 = formats.get("e4m3")
    ex = int(np.floor(np.log2(448 / np.abs(x).max())))
    ew = int(np.floor(np.log2(448 / np.abs(w).max())))
    a = e4m3.encode(np.ldexp(x.astype(np.float64), ex))
    b = e4m3.encode(np.ldexp(w.astype(np.float64), ew))
    vs = VectorSet(a=a, b=b)
    acc = fast.dot(presets.get("hopper-cublas-fast").spec_for(vs), vs).view(np.float32)
    np.testing.assert_array_equal(d, np.ldexp(acc, -(ex + ew)))


def test_api_gemm_nvfp4_epilogue_rounds_once():
    x, w = _xw(m=3, k=64, n=4, seed=3)
    c = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32) * 1e-3
    d = mxsim.gemm(x, w, c, unit="blackwell-mxf4nvf4", recipe="nvfp4")
    sa, a, ta = quantize.to_nvfp4(x, axis=-1)
    sb, b, tb = quantize.to_nvfp4(w, axis=0)
    vs = VectorSet(a=a, b=b, a_format="e2m1", b_format="e2m1", a_scale=sa, b_scale=sb,
                   scale_format="ue4m3", block=16)
    acc = fast.dot(presets.get("blackwell-mxf4nvf4").spec_for(vs), vs).view(np.float32)
    alpha = Fraction(float(np.float32(ta) * np.float32(tb)))
    for i in range(3):
        for j in range(4):
            exact = Fraction(float(acc[i, j])) * alpha + Fraction(float(c[i, j]))
            assert int(d.view(np.uint32)[i, j]) == reference.round_fp32_rne(exact)


def test_api_gemm_picks_the_recipe_from_the_unit():
    x, w = _xw(k=64)
    np.testing.assert_array_equal(mxsim.gemm(x, w, unit="blackwell-mxf4"),    # e2m1 elements
                                  mxsim.gemm(x, w, unit="blackwell-mxf4", recipe="mx",
                                             x_format="e2m1"))
    # mxf4nvf4 takes E8M0 as well as UE4M3 scales: MX comes first.
    np.testing.assert_array_equal(mxsim.gemm(x, w, unit="blackwell-mxf4nvf4"),
                                  mxsim.gemm(x, w, unit="blackwell-mxf4nvf4", recipe="mx"))
    np.testing.assert_array_equal(mxsim.gemm(x, w, unit="hopper-wgmma"),
                                  mxsim.gemm(x, w, unit="hopper-wgmma", recipe="fp8-tensor"))


@pytest.mark.parametrize("kwargs,message", [
    (dict(recipe="int4"), "Recipe must be one of mx, nvfp4, fp8-tensor, not 'int4'"),
    (dict(unit="hopper-wgmma", c=np.zeros((4, 8), np.float32)),
     "The fp8-tensor recipe takes no C (torch._scaled_mm has none)"),
])
def test_api_gemm_bad_input(kwargs, message):
    x, w = _xw()
    with pytest.raises(VectorFileError, match="^" + __import__("re").escape(message) + "$"):
        mxsim.gemm(x, w, **kwargs)
    with pytest.raises(VectorFileError, match=r"^gemm takes x \(M, K\) and w \(K, N\), not "
                                              r"\(4, 128\) and \(64, 8\)$"):
        mxsim.gemm(x, w[:64])
