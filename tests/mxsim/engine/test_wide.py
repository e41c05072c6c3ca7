"""numpy's float64 step (engine.wide) == the compiled step kernel == the integer step, bit for bit.

The twins in test_engine.py and test_fused.py run it as the numpy path (``kernel=False``)
against the reference engine and the kernels; here it meets the kernel's ``step_sums`` directly,
sum, LSB and flags, on sides drawn from the finite codes of the element formats with zeros,
the largest codes, NaN and Inf added, and scale codes from 2**-127 to 2**127 and NaN (E8M0)
or from 0 to the largest (UE4M3); every alignment mode, raw and normalised
products, accumulators with specials, and ties; and its bounds: it declines what float64 cannot
hold exactly, and the engine's results stay the same.
"""

import numpy as np
import pytest

from mxsim import formats, presets, vectors
from mxsim.engine import _kernels, fast, wide
from mxsim.engine.fast.operands import Operand
from mxsim.engine.fast.paths import INTEGER_STEP
from mxsim.errors import MxsimError

pytest.importorskip("numba")

_ALIGNS = ("rz", "rd", "rne", "rz-jam")


def _codes(fmt: formats.Format, rng, shape, special_rate: float):
    """Codes of ``fmt``: any finite code, a share of zeros and of the largest, some NaN/Inf."""
    if fmt.bits <= 16:
        out = rng.choice(fmt.finite_codes(), size=shape)
    else:      # FP32-wide accumulators: any exponent but the top one, any mantissa
        out = (rng.integers(0, (1 << fmt.exp_bits) - 1, shape) << fmt.man_bits) \
            | rng.integers(0, 1 << fmt.man_bits, shape)
    out = np.where(rng.random(shape) < 0.1, 0, out)
    out = np.where(rng.random(shape) < 0.05, fmt.code_of_max, out)
    specials = [c for c in (fmt.code_of_nan if fmt.has_nan else None,
                            fmt.code_of_inf if fmt.has_inf else None) if c is not None]
    if specials:
        pick = rng.random(shape) < special_rate
        out = np.where(pick, rng.choice(specials, size=shape), out)
    sign = rng.integers(0, 2, shape) << fmt.sign_shift if fmt.sign_shift is not None else 0
    return (out | sign).astype(fmt.code_dtype)


def _scales(scale: str, rng, shape):
    if scale == "e8m0":
        pool = np.array([0x00, 0x01, 0x40, 0x7F, 0x80, 0xBE, 0xFE, 0xFF])
    else:
        pool = np.array([0x00, 0x01, 0x08, 0x38, 0x7E, 0x7F])
    codes = np.where(rng.random(shape) < 0.7, 127 if scale == "e8m0" else 0x38,
                     rng.choice(pool, size=shape))
    op = Operand.of(formats.get(scale), codes.astype(np.uint8))
    op.sign[...] = 0
    return op


def _step_args(rng, a_fmt, b_fmt, scale, acc_fmt, r, g, n, special_rate):
    fa, fb = formats.get(a_fmt), formats.get(b_fmt)
    a = Operand.of(fa, _codes(fa, rng, (r, g), special_rate))
    b = Operand.of(fb, _codes(fb, rng, (g, n), special_rate))
    sa = sb = None
    if scale is not None:
        sa, sb = _scales(scale, rng, (r, g)), _scales(scale, rng, (g, n))
    acc = None
    if acc_fmt is not None:
        facc = formats.get(acc_fmt)
        acc = Operand.of(facc, _codes(facc, rng, (r, n), special_rate))
    return a, b, sa, sb, acc


CASES = [("e4m3", "e5m2", None), ("e4m3", "e4m3", "e8m0"), ("e2m1", "e2m1", "ue4m3"),
         ("e5m2", "e2m3", "e8m0"), ("int8", "e4m3", "e8m0"), ("bf16", "bf16", None),
         ("fp16", "fp16", None)]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("align", _ALIGNS)
@pytest.mark.parametrize("a_fmt,b_fmt,scale", CASES)
def test_wide_step_sums_are_the_kernels(a_fmt, b_fmt, scale, align, seed):
    rng = np.random.default_rng([seed, len(align), len(a_fmt), 7])
    for normalized in (False, True):
        for acc_fmt, zero_acc in ((None, False), (None, True), ("fp32", False),
                                  ("e8m13", False)):
            frac_bits = int(rng.integers(0, 31))
            e_zero = int(rng.integers(-200, 6))
            a, b, sa, sb, acc = _step_args(rng, a_fmt, b_fmt, scale, acc_fmt, 5, 16, 7,
                                           special_rate=0.02 if seed else 0.0)
            args = (acc, frac_bits, align, normalized, e_zero, zero_acc)
            want = _kernels.step_sums(a, sa, _kernels.prepare_b(b, sb), *args)
            got = wide.step_sums(a, sa, wide.prepare_b(b, sb), *args)
            assert got is not None, "the bounds hold for these formats"
            for w, x, what in zip(want, got, ("sum", "lsb", "flags"), strict=True):
                np.testing.assert_array_equal(x, w, err_msg=f"{what}, {args}")


@pytest.mark.parametrize("align", _ALIGNS)
def test_wide_rounds_ties_and_every_shift(align):
    """Every row's product m * 2**-10 (28 FP16 significands m) against every column's 2**-s
    (s = 0..24; 2**-24 is FP16's least subnormal), with the maximum set by a second product of
    +-2**15, at frac_bits 0, 3, 10 and 24: each term lands from well above the step's LSB to
    past its last kept bit, on halves, quarters, odd and even kept values."""
    fmt = formats.get("fp16")
    sig = np.arange(1024, 2048, 37)                       # normal FP16 significands
    codes_a, codes_b = [], []
    for s in range(0, 30):
        for m in sig:
            codes_a.append([fmt.encode(np.float64(m) * 2.0 ** -10, "rne"),
                            fmt.encode(np.float64(2.0 ** 15), "rne")])
            codes_b.append([fmt.encode(np.float64(2.0 ** -min(s, 24)), "rne")
                            * (1 if s <= 24 else 0) + (1 if s > 24 else 0),
                            fmt.encode(np.float64(-1.0 if m % 2 else 1.0), "rne")])
    a = Operand.of(fmt, np.array(codes_a, np.uint16).reshape(-1, 2))
    b = Operand.of(fmt, np.ascontiguousarray(np.array(codes_b, np.uint16).T))   # (2, 840)
    for frac_bits in (0, 3, 10, 24):
        args = (None, frac_bits, align, False, -30, True)
        want = _kernels.step_sums(a, None, _kernels.prepare_b(b, None), *args)
        got = wide.step_sums(a, None, wide.prepare_b(b, None), *args)
        for w, x in zip(want, got, strict=True):
            np.testing.assert_array_equal(x, w)


def _directed(a_codes, b_codes, fmt="e4m3"):
    f = formats.get(fmt)
    return (Operand.of(f, np.array(a_codes, np.uint8)), Operand.of(f, np.array(b_codes, np.uint8)))


def test_wide_zero_terms_and_signed_zeros():
    """e_zero decides the maximum with a +0 accumulator and no zero product; every product a
    -0 (and the accumulator -0) sets the all-negative-zero flag."""
    f = formats.get("e4m3")
    small = [f.encode(np.float64(2.0 ** -6), "rne")] * 4          # products of 2**-12
    neg_zero = 1 << f.sign_shift
    a, b = _directed([small, [neg_zero] * 4, [neg_zero, 0, neg_zero, neg_zero]],
                     np.array([small, small]).T.reshape(4, 2) * [1, 0] + [0, 0x38])
    facc = formats.get("fp32")
    for acc, zero_acc in ((None, True), (None, False),
                          (Operand.of(facc, np.full((3, 2), 0x80000000, np.uint32)), False),
                          (Operand.of(facc, np.zeros((3, 2), np.uint32)), False)):
        for e_zero in (-20, 5):
            args = (acc, 3, "rz", False, e_zero, zero_acc)
            want = _kernels.step_sums(a, None, _kernels.prepare_b(b, None), *args)
            got = wide.step_sums(a, None, wide.prepare_b(b, None), *args)
            for w, x in zip(want, got, strict=True):
                np.testing.assert_array_equal(x, w, err_msg=str(args))
    flags = wide.step_sums(a, None, wide.prepare_b(b, None), None, 3, "rz", False, -20)[2]
    assert (flags & 8).any() and not (flags & 8).all()
    lsb = wide.step_sums(a, None, wide.prepare_b(b, None), None, 3, "rz", False, 5, True)[1]
    assert lsb[0, 0] == 5 - 3


def test_wide_declines_what_float64_cannot_hold(monkeypatch):
    """Exponents beyond the limit, or sums that could pass 2**53: None, and the engine
    computes the step with the integer terms instead (the same bits)."""
    rng = np.random.default_rng(3)
    a, b, sa, sb, acc = _step_args(rng, "e4m3", "e4m3", "e8m0", "fp32", 4, 32, 5, 0.0)
    side = wide.prepare_b(b, sb)
    assert wide.step_sums(a, sa, side, acc, 13, "rz", False, -133) is not None
    # the terms' bound: 32 of up to (15/8)**2 * 2**47 may pass 2**52 (the check's margin)
    assert wide.step_sums(a, sa, side, acc, 40, "rz", False, -133) is not None
    assert wide.step_sums(a, sa, side, acc, 47, "rz", False, -133) is None
    assert wide.step_sums(a, sa, side, acc, 13, "rz", False, -251) is None        # e_zero
    monkeypatch.setattr(wide, "LIMIT", 100)       # the data's exponents: scales of 2**+-127
    assert wide.step_sums(a, sa, wide.prepare_b(b, sb), None, 13, "rz", False, -50) is None

    vs = vectors.generate("scale-extremes", a_format="e4m3", m=6, n=5, k=64,
                          scale_format="e8m0", seed=2)
    spec = presets.get("blackwell-mxf8f6f4").spec_for(vs)
    calls = []
    real = wide.step_sums
    monkeypatch.setattr(wide, "step_sums", lambda *x, **k: calls.append(real(*x, **k))
                        or calls[-1])
    got = fast.dot(spec, vs, kernel=False)
    assert calls and all(c is None for c in calls)
    np.testing.assert_array_equal(got, fast.dot(spec, vs, kernel=INTEGER_STEP))
    np.testing.assert_array_equal(got, fast.dot(spec, vs))


@pytest.mark.parametrize("name,opts", [
    ("hopper-wgmma", dict(a_format="e4m3")),
    ("hopper-cublas", dict(a_format="e5m2", b_format="e4m3", k=512)),
    ("blackwell-mxf8f6f4", dict(a_format="e4m3", scale_format="e8m0")),
    ("blackwell-f8f6f4", dict(a_format="e2m1", b_format="e3m2")),
    ("ampere-mma-bf16", dict(a_format="bf16")), ("hopper-mma-sync", dict(a_format="e4m3"))])
@pytest.mark.parametrize("family", ["normal", "scale-extremes", "cancellation"])
def test_wide_is_the_numpy_path_for_presets(monkeypatch, name, opts, family):
    """The presets' data is within the bounds: every step is float64's, and equals the
    kernel and the integer step."""
    opts = {"k": 32, **opts}
    try:
        vs = vectors.generate(family, m=9, n=70, with_c=True, seed=4, **opts)
    except ValueError:
        pytest.skip(f"{family} needs other formats")
    spec = presets.get(name).spec_for(vs)
    calls = []
    real = wide.step_sums
    monkeypatch.setattr(wide, "step_sums", lambda *x, **k: calls.append(real(*x, **k))
                        or calls[-1])
    got = fast.dot(spec, vs, kernel=False)
    assert calls and all(c is not None for c in calls)
    np.testing.assert_array_equal(got, fast.dot(spec, vs))
    np.testing.assert_array_equal(got, fast.dot(spec, vs, kernel=INTEGER_STEP))


_ROUND_FORMATS = ("fp32", "e8m13", "tf32", "bf16", "fp16", "e5m2", "e4m3", "e3m2", "e2m1")


def _sums(fmt: formats.Format, rng) -> tuple[np.ndarray, np.ndarray]:
    """Step sums and LSB exponents around every edge of ``fmt``: any width up to 2**53 and
    beyond, ties, carries into the next binade, the subnormal and overflow boundaries."""
    n = 4000
    width = rng.integers(0, 56, n)
    q = (rng.integers(0, 1 << 62, n, dtype=np.int64) >> (62 - np.minimum(width, 62)))
    lsb = rng.integers(fmt.emin - fmt.man_bits - 70, fmt.emax + 8, n)
    # Ties and all-ones below the cut: sig 1..., then 10...0 or 11...1 under man_bits + 1 bits
    w = rng.integers(fmt.man_bits + 2, 54, n // 4)
    head = rng.integers(1 << fmt.man_bits, 1 << (fmt.man_bits + 1), n // 4)
    rest = w - fmt.man_bits - 1
    tie = (head << rest) | (np.int64(1) << (rest - 1))
    ones = (head << rest) | ((np.int64(1) << rest) - 1)
    # The binade at emin and at emax: LSB exponents that put the top bit there
    top = rng.integers(0, 54, n // 4)
    sig = (np.int64(1) << top) | rng.integers(0, 1 << 20, n // 4) % np.maximum(
        np.int64(1) << top, 1)
    at_min = fmt.emin - top + rng.integers(-2, 2, n // 4)
    at_max = fmt.emax - top + rng.integers(-1, 2, n // 4)
    # Past 2**53, where a float64 would round first: one above a tie, which it rounds onto it
    wide_w = rng.integers(max(54, fmt.man_bits + 4), 63, n // 4)
    wide_head = rng.integers(1 << fmt.man_bits, 1 << (fmt.man_bits + 1), n // 4)
    wide_rest = wide_w - fmt.man_bits - 1
    past = (wide_head << wide_rest) | (np.int64(1) << (wide_rest - 1)) | 1
    q = np.concatenate([q, tie, ones, sig, sig, past, [0, 1, (1 << 53) - 1, 1 << 53,
                                                        (1 << 53) + 1, (1 << 62), -(1 << 63)]])
    lsb = np.concatenate([lsb, rng.integers(fmt.emin - 60, fmt.emax - 50, 2 * (n // 4)),
                          at_min, at_max, rng.integers(fmt.emin, fmt.emax + 1, n // 4) - wide_w,
                          [0, 5000, 0, 0, 0, 0, -5000]])
    lsb = lsb[:len(q)] if len(lsb) >= len(q) else np.concatenate(
        [lsb, np.zeros(len(q) - len(lsb), np.int64)])
    q = np.where(rng.random(len(q)) < 0.5, -q, q)
    return q.astype(np.int64), lsb.astype(np.int64)


@pytest.mark.parametrize("fmt_name", _ROUND_FORMATS)
@pytest.mark.parametrize("rounding", ["rz", "rne"])
@pytest.mark.parametrize("overflow", ["inf", "saturate", "ieee"])
def test_wide_rounding_of_step_sums_is_round_to(fmt_name, rounding, overflow):
    """The float64 rounding of step sums (wide.round_sums) == formats.round_to, code for code,
    on every edge: ties, carries into the next binade and into the exponent, sums at the
    subnormal and overflow boundaries (which it leaves to round_to), widths to 2**53 and past
    it, and int64's most negative value."""
    fmt = formats.get(fmt_name)
    rng = np.random.default_rng(len(fmt_name) * 7 + len(rounding) + len(overflow))
    q, lsb = _sums(fmt, rng)
    mode = formats.Rounding.of(rounding)
    mag = np.abs(q).view(np.uint64)
    if overflow != "saturate" and not (fmt.has_inf or fmt.has_nan):
        with pytest.raises(MxsimError, match="overflow must saturate"):
            formats.round_to(fmt, q < 0, lsb, mag, False, mode, overflow)
        with pytest.raises(MxsimError, match="overflow must saturate"):
            wide.round_sums(fmt, q, lsb, mode, overflow)
        return
    got = wide.round_sums(fmt, q, lsb, mode, overflow)
    want = formats.round_to(fmt, q < 0, lsb, mag, False, mode, overflow)
    assert got.dtype == want.dtype
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(int(q[i]), int(lsb[i]), int(got[i]), int(want[i])) for i in bad[:5]]


def _acc_near(rng, shape, span: int):
    """FP32 accumulator codes of values of 8-bit significands whose LSB and alignment
    exponents are within +-span, zeros and -0 among them."""
    f = formats.get("fp32")
    vals = np.ldexp(rng.integers(-255, 256, shape).astype(np.float64),
                    rng.integers(-span, span - 8, shape))
    vals = np.where(rng.random(shape) < 0.1, 0.0, vals)
    vals = np.where(rng.random(shape) < 0.05, -0.0, vals)
    return Operand.of(f, f.encode(vals, "rz").astype(np.uint32))


@pytest.mark.parametrize("align", _ALIGNS)
@pytest.mark.parametrize("a_fmt,b_fmt", [("e4m3", "e5m2"), ("fp16", "e4m3"), ("e2m1", "e3m2"),
                                         ("fp16", "fp16")])
def test_wide_float32_steps_are_float64_and_the_kernels(monkeypatch, a_fmt, b_fmt, align):
    """Where its bounds hold (wide._fits32), the step runs in float32: the same sums, LSBs
    and flags as in float64 and as the kernel's, at every alignment mode, raw and normalised
    products, with and without an accumulator, e_zero from far below the data (the dots whose
    products are all zero: their scale is clipped) to 2 * LIMIT32, frac_bits up to where the
    sums' bound reaches 2**23, FP16 subnormals (products' LSBs at 2**-48); and it declines
    one past each bound."""
    rng = np.random.default_rng([len(align), len(a_fmt), len(b_fmt)])
    used = []
    real = wide._aligned_sum
    monkeypatch.setattr(wide, "_aligned_sum",
                        lambda *x: used.append(x[-1]) or real(*x))
    for trial in range(24):
        normalized = bool(trial % 2)
        acc_kind = trial % 3
        a, b, _, _, _ = _step_args(rng, a_fmt, b_fmt, None, None, 6, 32, 9, 0.0)
        acc = _acc_near(rng, (6, 9), 2 * wide.LIMIT32) if acc_kind == 2 else None
        zero_acc = acc_kind == 1
        e_zero = int(rng.choice([-133, -30, 0, 25, 2 * wide.LIMIT32]))
        frac_bits = int(rng.integers(0, 18))
        args = (acc, frac_bits, align, normalized, e_zero, zero_acc)
        want = _kernels.step_sums(a, None, _kernels.prepare_b(b, None), *args)
        used.clear()
        got = wide.step_sums(a, None, wide.prepare_b(b, None), *args)
        single = used[0]
        with monkeypatch.context() as m:
            m.setattr(wide, "_fits32", lambda *x: False)
            got64 = wide.step_sums(a, None, wide.prepare_b(b, None), *args)
        for w, x, y, what in zip(want, got, got64, ("sum", "lsb", "flags"), strict=True):
            np.testing.assert_array_equal(x, w, err_msg=f"{what}, {args}, float32={single}")
            np.testing.assert_array_equal(y, w, err_msg=f"{what}, {args}, float64")
        if frac_bits <= 8:
            assert single, f"float32 declined {args}"
    a, b, _, _, _ = _step_args(rng, a_fmt, b_fmt, None, None, 6, 32, 9, 0.0)
    side_a, side_b = wide.Side.of(a, None, True), wide.prepare_b(b, None)
    assert wide._fits32(side_a, side_b, None, 8, -133, 0)
    assert not wide._fits32(side_a, side_b, None, 8, 2 * wide.LIMIT32 + 1, 0)
    assert not wide._fits32(side_a, side_b, None, 30, -133, 0)     # sums past 2**23
    far = _acc_near(rng, (6, 9), wide.LIMIT32)
    far.e[0, 0], far.sig[0, 0] = 2 * wide.LIMIT32 + 1, 1 << 23
    assert not wide._fits32(side_a, side_b, far, 8, -133, 0)       # the accumulator's
    monkeypatch.setattr(wide, "LIMIT32", max(side_a.span, side_b.span) - 1)
    assert not wide._fits32(side_a, side_b, None, 8, -133, 0)
