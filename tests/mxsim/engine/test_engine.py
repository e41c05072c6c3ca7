"""The general engine: fast == reference for every preset and for randomly drawn specs."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mxsim import formats, presets, spec, vectors
from mxsim.engine import fast, reference
from mxsim.engine.fast.operands import is_nan
from mxsim.engine.fast.paths import INTEGER_STEP
from mxsim.errors import UnitError
from mxsim.spec import UnitSpec, ZeroSign
from mxsim.vectors import VectorSet


def _twins(spec: UnitSpec, vs: VectorSet) -> np.ndarray:
    """Fast engine (whole-dot kernel, step kernel, numpy's float64 step and its integer
    step) == reference engine, bit for bit."""
    d_fast = fast.dot(spec, vs)
    d_step = fast.dot(spec, vs, whole=False)
    d_numpy = fast.dot(spec, vs, kernel=False)
    d_int = fast.dot(spec, vs, kernel=INTEGER_STEP)
    d_ref = reference.dot(spec, vs)
    np.testing.assert_array_equal(d_int, d_ref)
    np.testing.assert_array_equal(d_numpy, d_ref)
    np.testing.assert_array_equal(d_step, d_ref)
    np.testing.assert_array_equal(d_fast, d_ref)
    return d_fast


def test_engine_kernel_is_available_under_make_test():
    """`make test` installs the fast extra, so the twins above really cover the kernel."""
    pytest.importorskip("numba")
    assert fast.kernel_available()


def _fp16_c(vs: VectorSet) -> VectorSet:
    """The same set with C rounded to FP16 (for FP16-output units)."""
    c = formats.get("fp16").encode(vs.c.view(np.float32), saturate=False)
    return vs.replace(c=c, c_format="fp16")


# (preset, generate() options): every preset, every scale kind it takes, mixed pairs.
CONFIGS = [
    ("hopper-wgmma", dict(a_format="e4m3", b_format="e5m2")),
    ("hopper-wgmma", dict(a_format="e5m2", b_format="e5m2", c_fp16=True)),
    ("hopper-cublas-fast", dict(a_format="e5m2", b_format="e4m3", k=128)),
    ("hopper-cublas", dict(a_format="e4m3", b_format="e5m2", k=256)),
    ("hopper-mma-sync", dict(a_format="e4m3", b_format="e5m2")),
    ("hopper-mma-sync", dict(a_format="e5m2", b_format="e5m2", c_fp16=True)),
    ("blackwell-f8f6f4", dict(a_format="e2m1", b_format="e3m2")),
    ("blackwell-f8f6f4", dict(a_format="e2m3", b_format="e4m3", c_fp16=True)),
    ("blackwell-mxf8f6f4", dict(a_format="e5m2", b_format="e2m1", scale_format="e8m0")),
    ("blackwell-mxf4", dict(a_format="e2m1", scale_format="e8m0", k=128)),
    ("blackwell-mxf4nvf4", dict(a_format="e2m1", scale_format="ue4m3", k=64)),
    ("blackwell-mxf4nvf4", dict(a_format="e2m1", scale_format="e8m0", block=16, k=64)),
    ("ocp-fp32", dict(a_format="int8", b_format="e4m3", scale_format="e8m0", k=96)),
    ("exact", dict(a_format="e2m3", b_format="int8", scale_format="e8m0")),
    ("hopper-cublas-rowwise", dict(a_format="e4m3", b_format="e5m2", scale_format="fp32",
                                   scale_granularity="tensor", k=256, with_c=False)),
    ("hopper-cublas-rowwise", dict(a_format="e5m2", b_format="e4m3", scale_format="fp32",
                                   scale_granularity="row", k=256, with_c=False)),
    ("hopper-cublas-blockwise", dict(a_format="e4m3", b_format="e4m3", scale_format="fp32",
                                     scale_granularity="block", k=256, m=1, n=128,
                                     with_c=False)),
]


def _fp32_edges(rng, size):
    """FP32 bit patterns from the edges: zeros, subnormals, near-overflow, Inf/NaN, any."""
    pool = [np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000], np.uint32),
            rng.integers(1, 1 << 23, 64, dtype=np.uint32) | np.uint32(0x80000000) * (
                rng.integers(0, 2, 64, dtype=np.uint32)),
            rng.integers(0x7E000000, 0x7F800000, 64, dtype=np.uint32),
            rng.integers(0, 1 << 32, 256, dtype=np.uint64).astype(np.uint32),
            # small significands: products and sums land on ties and cancel exactly
            ((rng.integers(100, 160, 256, dtype=np.uint32) << 23)
             | (rng.integers(0, 8, 256, dtype=np.uint32) << 20)
             | (rng.integers(0, 2, 256, dtype=np.uint32) << 31))]
    which = rng.integers(0, len(pool), size)
    return np.array([rng.choice(pool[w]) for w in which], np.uint32)


def test_engine_fp32_fma_is_rounded_once():
    """The float64 round-to-odd FMA of block-wise scaling against exact fractions."""
    from mxsim.engine.fast import fma_fp32 as _fma_fp32
    from mxsim.engine.reference import _add_ref, _code, _mul_vals, _Val
    from mxsim.spec import ZeroSign
    fp32 = formats.get("fp32")
    rng = np.random.default_rng(11)
    x, y, z = (_fp32_edges(rng, 4000) for _ in range(3))
    got = _fma_fp32(x, y, z)
    for i in range(x.size):
        v = [_Val.of_code(fp32, int(c[i])) for c in (x, y, z)]
        r = _add_ref(v[2], _mul_vals(v[:2]), fp32, formats.Rounding.RNE,
                     formats.Overflow.IEEE, ZeroSign.IEEE)
        if r.kind == "nan":
            assert fp32.classify(got[i:i + 1])[0] == formats.Class.NAN
        else:
            assert int(got[i]) == _code(fp32, r), (hex(x[i]), hex(y[i]), hex(z[i]))


def _config_set(family, opts, seed=3, m=3, n=4):
    opts = dict(opts)
    k = opts.pop("k", 32)
    c_fp16 = opts.pop("c_fp16", False)
    m, n = opts.pop("m", m), opts.pop("n", n)           # block-wise FP32 scales need N = 128
    vs = vectors.generate(family, m=m, n=n, k=k, seed=seed, **opts)
    return _fp16_c(vs) if c_fp16 else vs


@pytest.mark.parametrize("family", vectors.FAMILIES)
@pytest.mark.parametrize("preset,opts", CONFIGS,
                         ids=[f"{p}-{'-'.join(str(v) for v in o.values())}" for p, o in CONFIGS])
def test_engine_presets_fast_equals_reference(preset, opts, family):
    if family == "nan-scale" and "scale_format" not in opts:
        family = "specials"        # the NaN-scale family needs scales; cover specials again
    vs = _config_set(family, opts)
    _twins(presets.get(preset).spec_for(vs), vs)


@pytest.mark.parametrize("preset,opts", CONFIGS[:12], ids=[p for p, _ in CONFIGS[:12]])
def test_engine_presets_long_k_chains(preset, opts):
    """Chains of instructions up to K = 4096, D of one the C of the next."""
    opts = {**opts, "k": 4096}
    vs = _config_set("normal", opts, m=1, n=2, seed=8)
    _twins(presets.get(preset).spec_for(vs), vs)


def _adversarial(a_format, b_format, scale_format, block, k, rng):
    """Codes drawn from the edges: zeros, subnormals, max, NaN/Inf; scales 0x00/0xFE/0xFF."""
    fa, fb = formats.get(a_format), formats.get(b_format)

    def edge_codes(f, shape):
        codes = f.finite_codes().astype(np.uint8)
        cls = f.classify(codes)
        pool = [codes[cls == formats.Class.ZERO], codes[cls == formats.Class.SUBNORMAL],
                np.array([f.code_of_max, f.code_of_max | (1 << f.sign_shift)], np.uint8),
                codes]
        if f.has_nan:
            pool.append(np.array([f.code_of_nan], np.uint8))
        if f.has_inf:
            pool.append(np.array([f.code_of_inf, f.code_of_inf | (1 << f.sign_shift)],
                                 np.uint8))
        pool = [p for p in pool if p.size]
        weights = np.array([4, 3, 2, 6, 1, 1][:len(pool)], float)
        which = rng.choice(len(pool), size=shape, p=weights / weights.sum())
        out = np.empty(shape, np.uint8)
        for i, p in enumerate(pool):
            sel = which == i
            out[sel] = rng.choice(p, size=int(sel.sum()))
        return out

    m, n = 2, 3
    a = edge_codes(fa, (m, k))
    b = edge_codes(fb, (k, n))
    c_choices = np.array([0.0, -0.0, 2.0 ** -140, -(2.0 ** -149), 1.0, -3.0e38, np.inf,
                          -np.inf, np.nan], np.float32)
    c = rng.choice(c_choices, size=(m, n)).view(np.uint32)
    kw = {}
    if scale_format is not None:
        if scale_format == "e8m0":
            pool = np.array([0x00, 0x01, 0x7F, 0xFE, 0xFF, 0x80], np.uint8)
        else:
            pool = np.array([0x00, 0x01, 0x08, 0x38, 0x7E, 0x7F, 0xB8], np.uint8)
        kw = dict(a_scale=rng.choice(pool, size=(m, k // block)),
                  b_scale=rng.choice(pool, size=(k // block, n)), scale_format=scale_format,
                  block=block)
    return VectorSet(a=a, b=b, a_format=a_format, b_format=b_format, c=c, **kw)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("preset,opts", CONFIGS[:13], ids=[p for p, _ in CONFIGS[:13]])
def test_engine_presets_adversarial(preset, opts, seed):
    rng = np.random.default_rng([seed, 99])
    vs = _adversarial(opts["a_format"], opts.get("b_format", opts["a_format"]),
                      opts.get("scale_format"), opts.get("block", 16 if opts.get(
                          "scale_format") == "ue4m3" else 32), opts.get("k", 32) * 2, rng)
    if opts.get("c_fp16"):
        vs = _fp16_c(vs)
    _twins(presets.get(preset).spec_for(vs), vs)


def test_engine_zero_term_exponent_decides():
    """A zero term (here C = +0) takes part in the maximum with e_zero; when that is the
    largest exponent, small real terms truncate away.

    Scales 2**-75 each; p1 = 1.75 * 1.125 * 2**-150 = (1 - 2**-6) * 2**-149 and 31 products of
    1.125 * 2**-160, together 1.09 * 2**-155, so the exact sum is just above 2**-149. With
    e_zero = -133 (MMA-Sim's value) the step's LSB is 2**(-133 - 25) and the small products
    vanish: RZ gives +0. With e_zero = -400 they count: RZ gives the smallest subnormal.
    """
    spec = presets.get("blackwell-mxf8f6f4").spec("e4m3", "e4m3", scale_format="e8m0",
                                                  block=32)
    e4m3 = formats.get("e4m3")
    a = e4m3.encode(np.array([1.75] + [1.125 * 2.0 ** -6] * 31)).reshape(1, 32)
    b = e4m3.encode(np.array([1.125] + [2.0 ** -4] * 31)).reshape(32, 1)
    vs = VectorSet(a=a, b=b, c=np.zeros((1, 1), np.uint32),
                   a_scale=np.array([[127 - 75]], np.uint8),
                   b_scale=np.array([[127 - 75]], np.uint8), scale_format="e8m0",
                   block=32)
    assert int(_twins(spec, vs)[0, 0]) == 0
    assert int(_twins(spec.replace(e_zero=-400), vs)[0, 0]) == 1
    pytest.importorskip("mmasim")
    import mmasim_adapter
    assert int(mmasim_adapter.run("blackwell-mxf8f6f4", vs)[0, 0]) == 0


def test_engine_hopper_truncates_c_to_13_fraction_bits():
    """C alone (all products zero) still passes through the F=13 alignment and E8M13."""
    spec = presets.get("hopper-wgmma").spec("e4m3", "e4m3")
    c = np.array([[1.0 + 2.0 ** -20, -(1.0 + 2.0 ** -12 + 2.0 ** -14)]], np.float32)
    vs = VectorSet(a=np.zeros((1, 32), np.uint8), b=np.zeros((32, 2), np.uint8),
                   c=c.view(np.uint32))
    d = _twins(spec, vs).view(np.float32)
    assert d.tolist() == [[1.0, -(1.0 + 2.0 ** -12)]]


def test_engine_rejects_vectors_the_unit_cannot_take():
    vs = vectors.generate("normal", a_format="e2m1", m=2, n=2, k=32)
    with pytest.raises(UnitError, match=r"^Unit hopper-wgmma does not take e2m1 x e2m1; it "
                                        r"takes e4m3xe4m3, e4m3xe5m2, e5m2xe4m3, e5m2xe5m2$"):
        presets.get("hopper-wgmma").spec_for(vs)
    vs = vectors.generate("normal", a_format="e4m3", m=2, n=2, k=48)
    spec = presets.get("hopper-wgmma").spec_for(vs)
    with pytest.raises(UnitError, match=r"^K \(48\) must be a multiple of unit hopper-wgmma's "
                                        r"instruction k \(32\)$"):
        fast.dot(spec, vs)
    vs = vectors.generate("normal", a_format="e4m3", m=2, n=2, k=32, scale_format="e8m0")
    with pytest.raises(UnitError, match=r"^Unit hopper-wgmma takes no block scales, not e8m0 "
                                        r"scales in blocks of 32$"):
        presets.get("hopper-wgmma").spec_for(vs)
    vs = vectors.generate("normal", a_format="e4m3", m=2, n=2, k=32)
    with pytest.raises(UnitError, match=r"^Unit blackwell-mxf8f6f4 takes e8m0 scales in "
                                        r"blocks of 32, not no block scales$"):
        presets.get("blackwell-mxf8f6f4").spec_for(vs)


# -- randomly drawn specs -------------------------------------------------------------------

_ELEMS = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "int8")


@st.composite
def _specs(draw):
    k = draw(st.sampled_from([16, 32, 64]))
    a_format, b_format = draw(st.sampled_from(_ELEMS)), draw(st.sampled_from(_ELEMS))
    scale = draw(st.sampled_from([None, "e8m0", "ue4m3"]))
    block = None if scale is None else draw(st.sampled_from([b for b in (16, 32) if k % b == 0]))
    group = None
    if scale is not None and draw(st.booleans()):
        group = draw(st.sampled_from([g for g in (4, 8, 16) if block % g == 0]))
        if spec.group_sum_bits(a_format, b_format, group) > spec.MAX_GROUP_BITS:
            group = None                          # GST takes narrow formats only
    # Steps: contiguous runs of whole groups, or an arbitrary interleaved partition.
    if group is not None:
        inner = range(group, k, group)
        cuts = sorted(draw(st.sets(st.sampled_from(inner), max_size=3))) if len(inner) else []
        edges = [0, *cuts, k]
        schedule = [list(range(edges[i], edges[i + 1])) for i in range(len(edges) - 1)]
    else:
        perm = draw(st.permutations(range(k)))
        nsteps = draw(st.integers(1, 4))
        cuts = sorted(draw(st.sets(st.integers(1, k - 1), min_size=nsteps - 1,
                                   max_size=nsteps - 1)))
        edges = [0, *cuts, k]
        schedule = [sorted(perm[edges[i]:edges[i + 1]]) for i in range(len(edges) - 1)]
    d_format = draw(st.sampled_from(["fp32", "fp32", "fp16"]))
    upcast = None
    if group is None:
        upcast = draw(st.sampled_from([None, None, "fp16", "bf16", "fp32"]))
        if upcast is not None and not all(spec.widths.holds(formats.get(upcast), f)
                                          for f in (a_format, b_format)):
            upcast = None
    # Triton's emulation rules: E8M0 scales folded into the upcast operands, and E5M2's
    # Inf/NaN codes read as numbers.
    fold = upcast is not None and scale == "e8m0" and draw(st.booleans())
    up_specials = draw(st.sampled_from(["ieee", "finite"])) if upcast in ("bf16", "fp32") \
        else "ieee"
    return UnitSpec(
        name="drawn", a_format=a_format, b_format=b_format, scale_format=scale, block=block, k=k,
        schedule=schedule, group=group,
        frac_bits=draw(st.one_of(st.none(), st.integers(0, 30))),
        align=draw(st.sampled_from(["rz", "rd", "rne", "rz-jam"])),
        product=draw(st.sampled_from(["raw", "normalized"])), upcast=upcast,
        fold_scales=fold, upcast_specials=up_specials,
        c_mode=draw(st.sampled_from(["step", "after"])),
        c_rounding=draw(st.sampled_from(["rne", "rz"])),
        acc_format=draw(st.sampled_from(["fp32", "e8m13", "e8m10", "fp16", "bf16"])),
        acc_rounding=draw(st.sampled_from(["rz", "rne", "ru", "rd"])),
        d_format=d_format, e_zero=draw(st.integers(-200, 5)),
        overflow=draw(st.sampled_from(["inf", "ieee", "saturate"])),
        zero_sign=draw(st.sampled_from(["positive", "ieee"])),
        promote_every=(draw(st.one_of(st.none(), st.integers(1, 3)))
                       if d_format == "fp32" else None),
        promote_rounding=draw(st.sampled_from(["rne", "rz"])))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=_specs(), family=st.sampled_from(vectors.FAMILIES), seed=st.integers(0, 2 ** 16),
       n_inst=st.integers(1, 3), with_c=st.booleans())
def test_engine_random_specs_fast_equals_reference(spec, family, seed, n_inst, with_c):
    if family == "nan-scale" and spec.scale_format is None:
        family = "scale-extremes"
    vs = vectors.generate(family, a_format=spec.a_format, b_format=spec.b_format, m=2, n=2,
                          k=spec.k * n_inst, scale_format=spec.scale_format, block=spec.block,
                          with_c=with_c, seed=seed)
    if spec.d_format == "fp16" and with_c:
        vs = _fp16_c(vs)
    _twins(spec, vs)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=_specs(), seed=st.integers(0, 2 ** 16))
def test_engine_random_specs_adversarial(spec, seed):
    rng = np.random.default_rng(seed)
    vs = _adversarial(spec.a_format, spec.b_format, spec.scale_format, spec.block,
                      spec.k * 2, rng)
    if spec.d_format == "fp16":
        vs = _fp16_c(vs)
    _twins(spec, vs)


def test_engine_chunking_does_not_change_results(monkeypatch):
    vs = vectors.generate("llm", a_format="e4m3", m=9, n=7, k=64, seed=5)
    spec = presets.get("hopper-cublas-fast").spec_for(vs)
    whole = fast.dot(spec, vs)
    from mxsim.engine.fast import step
    monkeypatch.setattr(step, "_CHUNK_TERMS", 7 * 32 * 2)       # two rows at a time (numpy)
    np.testing.assert_array_equal(fast.dot(spec, vs, kernel=False), whole)


@pytest.mark.parametrize("preset,opts", CONFIGS, ids=[p for p, _ in CONFIGS])
def test_engine_presets_without_c(preset, opts):
    """An absent C is a +0 accumulator (it still takes part in the maximum, with e_zero)."""
    opts = {k: v for k, v in opts.items() if k != "c_fp16"}
    k = opts.pop("k", 32)
    m, n = opts.pop("m", 3), opts.pop("n", 4)
    opts.pop("with_c", None)
    for family in ("normal", "specials", "scale-extremes", "zeros"):
        vs = vectors.generate(family, m=m, n=n, k=2 * k, with_c=False, seed=4, **opts)
        d = _twins(presets.get(preset).spec_for(vs), vs)
        c0 = vs.replace(c=np.zeros((m, n), np.uint32))
        # The FP32-scale presets refuse a C (cuBLASLt adds its bias after the scales), so the
        # +0 C goes through the spec made for the set without one.
        np.testing.assert_array_equal(fast.dot(presets.get(preset).spec_for(vs), c0), d)


def test_engine_batched_sets():
    vs = vectors.generate_suite(["normal", "specials", "max"], count=2, a_format="e5m2",
                                m=2, n=3, k=64)
    spec = presets.get("hopper-wgmma").spec_for(vs)
    d = _twins(spec, vs)
    assert d.shape == (6, 2, 3)
    for i in range(6):          # a batch entry alone gives the same bits
        one = vs.replace(a=vs.a[i], b=vs.b[i], c=vs.c[i], extra={})
        np.testing.assert_array_equal(fast.dot(spec, one), d[i])


# -- signed zeros (directed: random codes almost never make every term of a dot -0) ----------

ACC_FORMATS = ("fp32", "fp16", "bf16", *(f"e8m{m}" for m in range(1, 23)))


def _signed_zero_set(a_format: str, b_format: str, k: int, c: str | None,
                     d_format: str = "fp32", like: VectorSet | None = None):
    """A 3x3 set of dots whose products are all zeros of one sign, or mixed, or cancel.

    Rows of A: all -0, all +0, tiny values of alternating sign; columns of B: all +0, all -0,
    all tiny. C is absent, +0 or -0. ``like`` lends its block scales (a scaled unit needs
    them). Returns the set and the masks of dots whose every product is -0 and +0 (int8 has
    no -0, so with int8 on one side the signs come from the other side only).
    """
    def codes(fmt, x):
        return int(fmt.encode(np.array([x]), "rne", saturate=True)[0])

    sides = []
    for name in (a_format, b_format):
        fmt = formats.get(name)
        tiny = fmt.min_subnormal if fmt.kind == "float" else 1.0
        sides.append((codes(fmt, -0.0), codes(fmt, 0.0), codes(fmt, tiny), codes(fmt, -tiny)))
    (an, ap, at, ant), (bn, bp, bt, _) = sides
    a = np.array([[an] * k, [ap] * k, np.resize([at, ant], k)], np.uint8)
    b = np.array([[bp] * k, [bn] * k, [bt] * k], np.uint8).T.copy()
    fa, fb = formats.get(a_format), formats.get(b_format)
    zero = (fa.decode(a)[:, :, None] * fb.decode(b)[None, :, :]) == 0
    neg = (fa.sign(a)[:, :, None] ^ fb.sign(b)[None, :, :]) == 1
    all_neg = (zero & neg).all(axis=1)
    all_pos = (zero & ~neg).all(axis=1)
    d = formats.get(d_format)
    cbits = None if c is None else np.full((3, 3), (1 << d.sign_shift) if c == "-0" else 0,
                                           d.code_dtype)
    extra = {}
    if like is not None and like.scale_format is not None:
        extra = dict(a_scale=like.a_scale[:3], b_scale=like.b_scale[:, :3],
                     scale_format=like.scale_format, block=like.block)
    vs = VectorSet(a=a, b=b, a_format=a_format, b_format=b_format, c=cbits,
                   c_format=d_format, **extra)
    return vs, all_neg, all_pos


def _neg_zero_expected(spec: UnitSpec, c: str | None) -> bool:
    """Whether a dot whose every product is -0 gives -0 (the spec's contract): only with IEEE
    zero signs and C = -0 carried through the whole chain (no C is +0; promotion restarts the
    chain from +0, and -0 + +0 is +0)."""
    return spec.zero_sign is ZeroSign.IEEE and c == "-0" and spec.promote_every is None


@pytest.mark.parametrize("acc_format", ACC_FORMATS)
def test_engine_signed_zeros_directed(acc_format):
    """Every product -0, no C / C = +0 / C = -0, with and without promotion and with C after
    the steps, truncated and exact steps: kernel, numpy and reference agree, and the sign is
    the one the spec's contract gives (the kernel once gave -0 with no C)."""
    cases = [(zs, d_format, promote, c_mode, frac_bits)
             for zs in ("ieee", "positive") for d_format in ("fp32", "fp16", "bf16")
             for promote in ((None, 1, 2) if d_format == "fp32" else (None,))
             for c_mode in ("step", "after") for frac_bits in (13, None)
             if zs == "ieee" or (d_format, frac_bits) == ("fp32", 13)]
    assert len(cases) == 5 * 2 * 2 + 3 * 2
    if acc_format not in ("fp32", "fp16", "bf16", "e8m13"):
        # The other e8mN differ from e8m13 only in mantissa width: FP32 D is enough.
        cases = [case for case in cases if case[1] == "fp32"]
    for zero_sign, d_format, promote, c_mode, frac_bits in cases:
        spec = UnitSpec(k=8, frac_bits=frac_bits, acc_format=acc_format, a_format="e4m3",
                        b_format="e5m2", d_format=d_format, zero_sign=zero_sign,
                        c_mode=c_mode, promote_every=promote)
        for c in (None, "+0", "-0"):
            vs, all_neg, all_pos = _signed_zero_set("e4m3", "e5m2", 24, c, d_format)
            d = _twins(spec, vs)
            neg = 1 << formats.get(d_format).sign_shift if _neg_zero_expected(spec, c) else 0
            assert all_neg.sum() == 3 and all_pos.sum() == 3
            np.testing.assert_array_equal(d[all_neg], neg, err_msg=f"{spec} C={c}")
            np.testing.assert_array_equal(d[all_pos], 0, err_msg=f"{spec} C={c}")
            assert int(d[2, 2]) == 0, f"{spec} C={c}"       # tiny - tiny + ... cancels


@pytest.mark.parametrize("a_format,b_format", [("int8", "e4m3"), ("e2m1", "int8"),
                                               ("e2m3", "e3m2"), ("e4m3", "e4m3")])
def test_engine_signed_zeros_every_element_format(a_format, b_format):
    """The same all -0 products from every element format (int8 has no -0: B gives the sign)."""
    for c in (None, "+0", "-0"):
        for promote in (None, 1):
            spec = UnitSpec(k=32, frac_bits=13, acc_format="fp32", zero_sign="ieee",
                            a_format=a_format, b_format=b_format, promote_every=promote)
            vs, all_neg, all_pos = _signed_zero_set(a_format, b_format, 64, c)
            d = _twins(spec, vs)
            neg = 0x80000000 if _neg_zero_expected(spec, c) else 0
            assert all_neg.any()
            np.testing.assert_array_equal(d[all_neg], neg)
            np.testing.assert_array_equal(d[all_pos], 0)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=_specs(), c=st.sampled_from([None, "+0", "-0"]), n_inst=st.integers(1, 3),
       seed=st.integers(0, 2 ** 16))
def test_engine_random_specs_signed_zeros(spec, c, n_inst, seed):
    """Drawn specs on dots whose every product is -0 (or +0, or cancels): twins agree."""
    like = None
    if spec.scale_format is not None:
        like = vectors.generate("normal", a_format=spec.a_format, b_format=spec.b_format,
                                m=3, n=3, k=spec.k * n_inst, scale_format=spec.scale_format,
                                block=spec.block, seed=seed)
    vs, all_neg, all_pos = _signed_zero_set(spec.a_format, spec.b_format, spec.k * n_inst, c,
                                            spec.d_format, like)
    d = _twins(spec, vs)
    if spec.scale_format is None:
        neg = 1 << formats.get(spec.d_format).sign_shift if _neg_zero_expected(spec, c) else 0
        np.testing.assert_array_equal(d[all_neg], neg)
        np.testing.assert_array_equal(d[all_pos], 0)


@pytest.mark.parametrize("name", formats.ELEMENT_FORMATS + ("fp16", "bf16", "tf32", "fp32",
                                                             "e8m13"))
def test_is_nan_is_classify(name):
    """operands.is_nan (one comparison for IEEE-style formats) == classify's NAN, on every code
    of the formats of 16 bits or fewer and on 200,000 random codes with Inf, the largest code
    and NaN of the wider ones."""
    fmt = formats.get(name)
    if fmt.bits <= 16:
        codes = np.arange(1 << fmt.bits).astype(fmt.code_dtype)
    else:
        rng = np.random.default_rng(len(name))
        codes = rng.integers(0, 1 << fmt.bits, 200_000, dtype=np.uint64).astype(fmt.code_dtype)
        codes[:3] = [fmt.code_of_inf, (1 << fmt.bits) - 1, fmt.code_of_nan]
    want = fmt.classify(codes) == int(formats.Class.NAN)
    np.testing.assert_array_equal(is_nan(fmt, codes), want)
