"""Many small batch entries are computed stacked (block-diagonal, fast/stack.py): the same bits
as one entry at a time, and as the reference engine."""

import numpy as np
import pytest

from mxsim import presets, vectors
from mxsim.engine import fast, reference
from mxsim.engine.fast import stack
from mxsim.engine.fast.chain import chain_dot

FAMILIES = ("normal", "specials", "subnormal", "cancellation", "max", "zeros")

# (preset, generate() options, m, n, batch entries per family): C and no C, FP16 C/D,
# block scales (E8M0, UE4M3), the FP16 upcast, a tree unit, steps and chains, entries that do
# not fill the last stacked group.
CASES = [
    ("hopper-wgmma", dict(a_format="e4m3", b_format="e5m2"), 1, 1, 13),
    ("hopper-mma-sync", dict(a_format="e5m2", b_format="e5m2", c_format="fp16"), 1, 1, 9),
    ("ada-mma-f8", dict(a_format="e4m3", b_format="e4m3", k=64), 2, 3, 7),
    ("blackwell-mxf8f6f4", dict(a_format="e4m3", b_format="e2m1", scale_format="e8m0"),
     1, 2, 11),
    ("blackwell-mxf4nvf4", dict(a_format="e2m1", scale_format="ue4m3", k=64), 3, 1, 5),
    ("hopper-mma-f16", dict(a_format="fp16", k=16, c_format="fp16"), 1, 1, 21),
    ("ampere-mma-bf16", dict(a_format="bf16", k=32), 2, 2, 6),
    ("hopper-wgmma-tf32", dict(a_format="tf32", k=8, with_c=False), 1, 1, 17),
    ("hopper-cublas", dict(a_format="e4m3", b_format="e4m3", k=256), 1, 1, 3),
]


def _suite(opts, m, n, count, seed):
    return vectors.generate_suite(FAMILIES, count=count, m=m, n=n, seed=seed, **opts)


@pytest.mark.parametrize("preset,opts,m,n,count", CASES)
def test_stacked_equals_one_entry_at_a_time(preset, opts, m, n, count):
    vs = _suite(opts, m, n, count, seed=17)
    spec = presets.get(preset).spec_for(vs)
    g = stack.stack_factor(vs)
    assert g > 1
    got = fast.dot(spec, vs)
    flat = vs.flat()

    def entry(i):
        one = {name: getattr(flat, name)[i:i + 1] for name in ("a", "b", "c", "a_scale",
                                                                "b_scale")
               if getattr(flat, name) is not None}
        return flat.replace(**one)

    one_by_one = np.stack([chain_dot(spec, entry(i))[0] for i in range(flat.a.shape[0])])
    assert got.dtype == one_by_one.dtype
    assert np.array_equal(got.reshape(one_by_one.shape), one_by_one)
    # the numpy path stacks the same way
    assert np.array_equal(fast.dot(spec, vs, kernel=False), got)


@pytest.mark.parametrize("preset,opts,m,n,count", CASES[:6])
def test_stacked_equals_the_reference_engine(preset, opts, m, n, count):
    vs = _suite(opts, m, n, 2, seed=3)
    spec = presets.get(preset).spec_for(vs)
    assert np.array_equal(fast.dot(spec, vs), reference.dot(spec, vs))


def test_stack_and_unstack_round_trip_the_layout():
    vs = _suite(dict(a_format="e4m3", scale_format="e8m0"), 2, 3, 5, seed=1)
    g = 4
    st = stack.stacked(vs, g)
    nb = vs.flat().a.shape[0]
    assert st.a.shape == (-(-nb // g), g * 2, vs.k) and st.b.shape == (-(-nb // g), vs.k, g * 3)
    # the stacked C holds each entry's C on its diagonal block and +0 elsewhere
    c5 = st.c.reshape(-1, g, 2, g, 3)
    assert np.array_equal(c5[0, 1, :, 1, :], vs.flat().c[1])
    assert not c5[0, 0, :, 1, :].any()
    # unstacked() of the stacked C's diagonal gives back every entry's C
    assert np.array_equal(stack.unstacked(st.c, vs, g), vs.c)


def test_sets_that_are_not_stacked():
    one = vectors.generate("normal", m=4, n=4)
    assert stack.stack_factor(one) == 1
    wide = vectors.generate("normal", m=64, n=8, batch=(3,))
    assert stack.stack_factor(wide) == 1
    rowwise = vectors.generate("normal", scale_format="fp32", scale_granularity="row", m=1,
                               n=1, batch=(4,), k=256, with_c=False)
    assert stack.stack_factor(rowwise) == 1
