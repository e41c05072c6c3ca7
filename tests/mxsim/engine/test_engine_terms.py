"""mxsim.engine.terms: every product's exponent, held to the exact values the codes decode to."""

import itertools

import numpy as np
import pytest

from mxsim import formats, presets, vectors
from mxsim.engine.terms import product_terms
from mxsim.microarch import RTL_FORMATS
from mxsim.spec import Product

MX = presets.get("blackwell-mxf8f6f4").spec("e4m3", scale_format="e8m0", block=32)


def _exact(fmt, codes):
    """Decoded values, and the exponent of each finite one as its fields spell it: the binade
    of a normal value, the minimum exponent for a subnormal, 0 for an integer."""
    v = formats.get(fmt).decode(codes).astype(np.float64)
    f = formats.get(fmt)
    if f.kind == "int":
        return v, np.zeros(v.shape, np.int64)
    e = np.frexp(np.where(np.isfinite(v) & (v != 0), v, 1.0))[1].astype(np.int64) - 1
    return v, np.maximum(e, f.emin) if f.subnormals else e


@pytest.mark.parametrize("product", list(Product), ids=[p.value for p in Product])
@pytest.mark.parametrize("a, b", list(itertools.product(RTL_FORMATS, repeat=2))[::5])
def test_product_terms_are_the_products_of_the_decoded_codes(a, b, product):
    spec = MX.replace(a_format=a, b_format=b, product=product)
    vs = vectors.generate_suite(["uniform", "specials", "zeros", "nan-scale"], a_format=a,
                                b_format=b, m=3, n=2, k=64, scale_format="e8m0", block=32,
                                seed=5)
    a_scale = vs.a_scale.copy()
    a_scale[0, 0, 1] = 0xFF                                    # one NaN scale at least
    vs = vs.replace(a_scale=a_scale)
    terms = product_terms(spec, vs)
    nb, blocks = vs.a.shape[0], 2
    assert terms.exp.shape == (nb, 3, 2, blocks, 32)
    va, ea = _exact(a, vs.a)                                   # (nb, 3, 64)
    vb, eb = _exact(b, vs.b)                                   # (nb, 64, 2)
    vsa, esa = _exact("e8m0", np.repeat(vs.a_scale, 32, axis=-1))
    vsb, esb = _exact("e8m0", np.repeat(vs.b_scale, 32, axis=-2))
    with np.errstate(invalid="ignore"):                       # Inf x 0, NaN scales: NaN
        fa, fb = va * vsa, vb * vsb
        prod = fa[:, :, None, :] * np.swapaxes(fb, 1, 2)[:, None]  # (nb, 3, 2, 64)
        special = ~np.isfinite(fa)[:, :, None] | ~np.isfinite(np.swapaxes(fb, 1, 2))[:, None]
    za, zb = (va == 0) | (vsa == 0), (vb == 0) | (vsb == 0)     # a factor zero (a flag apart
    zero = za[:, :, None] | np.swapaxes(zb, 1, 2)[:, None]       # from a special one)
    shape = terms.exp.shape
    np.testing.assert_array_equal(terms.special, special.reshape(shape))
    np.testing.assert_array_equal(terms.zero, zero.reshape(shape))
    if product is Product.RAW:
        want = (ea + esa)[:, :, None, :] + np.swapaxes(eb + esb, 1, 2)[:, None]
    else:
        want = np.frexp(np.where(zero | special, 1.0, prod))[1].astype(np.int64) - 1
    live = (~zero & ~special).reshape(shape)
    np.testing.assert_array_equal(terms.exp[live], want.reshape(shape)[live])
    assert live.sum() > 800 and terms.zero.sum() > 10 and terms.special.sum() >= 64
    np.testing.assert_array_equal(terms.align_e, np.where(live, terms.exp, spec.e_zero))


def test_product_terms_refuses_what_has_no_single_products():
    vs = vectors.generate("normal", a_format="e4m3", b_format="e4m3", m=1, n=1, k=64,
                          scale_format="e8m0", block=32, seed=1)
    with pytest.raises(ValueError, match=r"^Vector set K must be a multiple of the spec's k "
                                         r"\(48\), not 64$"):
        product_terms(MX.replace(k=48, block=16, scale_format="e8m0"), vs)
