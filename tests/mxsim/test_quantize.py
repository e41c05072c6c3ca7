"""MX and NVFP4 quantisation: peers bit for bit, the rules by their definitions, errors, CLI.

Peers: torchao 0.18 (``to_mx`` for the four torchao rules, ``nvfp4_quantize``; ``to_blocked`` is
in test_gpu_blocked.py),
microxcaling (golden files under tests/data/microxcaling, see its README) and ml_dtypes casts.
Seeds are fixed in each test; a failure names the first mismatching index.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from mxsim import formats, vectors
from mxsim import quantize as q
from mxsim.cli import main
from mxsim.formats import Rounding
from mxsim.quantize import elements as qelements
from mxsim.quantize import mx as qmx
from mxsim.quantize import rules as qrules

TORCHAO_FORMATS = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")
TORCHAO_RULES = ("floor", "ceil", "even", "rceil")
GOLDEN = Path(__file__).parents[1] / "data" / "microxcaling" / "mx_block32_even.npz"
F32 = np.float32


def f32(*bits: int) -> np.ndarray:
    return np.array(bits, np.uint32).view(np.float32)


def as64(x: np.ndarray) -> np.ndarray:
    """float64 of FP32 inputs; signalling NaNs raise FE_INVALID in the cast, harmlessly."""
    with np.errstate(invalid="ignore"):
        return x.astype(np.float64)


def assert_codes_equal(got: np.ndarray, want: np.ndarray, what: str = "codes") -> None:
    assert got.shape == want.shape, (what, got.shape, want.shape)
    bad = np.argwhere(got != want)
    assert bad.size == 0, (f"{what}: {len(bad)} mismatches, first at {tuple(bad[0])}: "
                           f"got {got[tuple(bad[0])]:#x}, want {want[tuple(bad[0])]:#x}")


# -- inputs ----------------------------------------------------------------------------------

def _finite32(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, np.float64)
    return np.where(np.abs(v) < 3.4e38, v, 1.0).astype(np.float32)


def distribution(name: str, fmt: str, rng: np.random.Generator, shape=(32, 256)) -> np.ndarray:
    """Random inputs of one family; every family reaches the rounding edges of some rule."""
    if name == "normal":
        return rng.standard_normal(shape).astype(np.float32)
    if name == "heavy":      # Student-t(2) with a per-row scale: outliers dominate blocks
        return (rng.standard_t(2, shape) * np.exp2(rng.integers(-30, 30, shape[:-1] + (1,)))
                ).astype(np.float32)
    if name == "binades":    # magnitudes uniform over every FP32 binade, subnormals included
        return (rng.choice([-1.0, 1.0], shape) * np.exp2(rng.uniform(-149, 128, shape))
                ).astype(np.float32)
    if name == "pow2":       # values and amax a few ulps around powers of two
        e = rng.integers(-149, 128, (shape[0], 1))
        m = rng.integers(-48, 48, shape)
        return _finite32(np.ldexp(1.0, e) * (1 + m * 2.0 ** -23) * rng.choice([-1, 1, .75],
                                                                                shape))
    if name == "elem_max":   # near the element max times a power of two (FLOOR/EVEN edges)
        mx = formats.get(fmt).max
        e = rng.integers(-140, 110, (shape[0], 1))
        m = rng.integers(-48, 48, shape)
        return _finite32(mx * np.ldexp(1.0, e) * (1 + m * 2.0 ** -23)
                         * rng.choice([-1, 1, 0.5, 0.75, 1 / 3], shape))
    if name == "bits":       # every FP32 bit pattern: NaN payloads, Inf, subnormals
        return rng.integers(0, 2 ** 32, shape, dtype=np.uint64).astype(np.uint32).view(
            np.float32)
    raise AssertionError(name)


DISTRIBUTIONS = ("normal", "heavy", "binades", "pow2", "elem_max", "bits")


def edge_blocks() -> np.ndarray:
    """Directed blocks of 32: specials, zeros, subnormals, E8M0 extremes, power-of-two amax."""
    rng = np.random.default_rng(7)
    base = np.linspace(-1, 1, 32, dtype=np.float32)
    rows = []
    for special in f32(0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFA00000, 0x7FE12345,
                       0x7F800000, 0xFF800000):
        r = base.copy()
        r[5] = special
        rows.append(r)
    r = base.copy()
    r[3], r[9] = np.inf, np.nan
    rows.append(r)
    r = base.copy()
    r[3], r[9] = -np.inf, np.inf
    rows.append(r)
    r = np.full(32, np.nan, np.float32)
    r[::3] = -np.nan
    rows.append(r)                                          # NaN only
    rows.append(np.zeros(32, np.float32))
    rows.append(-np.zeros(32, np.float32))
    rows.append(np.where(np.arange(32) % 2, 0.0, -0.0).astype(np.float32))
    rows.append(rng.integers(-2 ** 23, 2 ** 23, 32).astype(np.float32) * F32(2.0 ** -149))
    r = rows[-1].copy()
    r[0] = F32(2.0 ** -126)
    rows.append(r)
    rows.append(f32(*([1] * 32)))                           # smallest subnormal
    for e in (127, 126, 120, 0, -118, -119, -120, -125, -126, -127, -133):
        for m in (1.0, 1.0 + 2.0 ** -23, 2.0 - 2.0 ** -23, 1.5, 1.75, 1.875):
            r = (rng.uniform(-1, 1, 32) * 2.0 ** e).astype(np.float32)
            r[7] = F32(np.ldexp(m, e)) * rng.choice([-1, 1])
            rows.append(r)
    rows.append(np.full(32, np.finfo(np.float32).max, np.float32))
    # Every binade: amax = 2**k * (1 + j * 2**-23), just above and below a power of two, where
    # RCEIL's FP32 log2 and the E8M0 clamps bite.
    for k in range(-149, 128):
        for j in (0, 1, 2, 3, 5, 8, 13, 21, 22, 23, 34, 45, 2 ** 23 - 1, 2 ** 23 - 3):
            amax = math.ldexp(1 + j * 2.0 ** -23, k)
            if amax >= 3.4e38 or amax < 2.0 ** -149 or (k < -126 and j % (1 << (-126 - k))):
                continue
            r = (rng.uniform(-1, 1, 32) * amax).astype(np.float32)
            r[int(rng.integers(32))] = F32(amax)
            rows.append(r)
    return np.stack(rows)


def _torchao():
    pytest.importorskip("torchao")
    import torch
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.kernels import unpack_uint4
    from torchao.prototype.mx_formats.mx_tensor import to_mx
    return torch, to_mx, ScaleCalculationMode, unpack_uint4


def torchao_mx(x, fmt: str, rule: str, block: int = 32):
    """torchao's (scale codes, unpacked element codes), and its packed FP4 bytes."""
    torch, to_mx, mode, unpack_uint4 = _torchao()
    dtypes = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "e3m2": "fp6_e3m2",
              "e2m3": "fp6_e2m3", "e2m1": torch.float4_e2m1fn_x2}
    if x.dtype == ml_dtypes.bfloat16:
        t = torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16)
    else:
        t = torch.from_numpy(np.ascontiguousarray(x))
    s, d = to_mx(t, dtypes[fmt], block, mode(rule))
    d = d.view(torch.uint8)
    packed = d.numpy().copy()
    if fmt == "e2m1":
        d = unpack_uint4(d)
    return s.view(torch.uint8).numpy(), d.numpy(), packed


# -- torchao to_mx, bit for bit --------------------------------------------------------------

@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("rule", TORCHAO_RULES)
@pytest.mark.parametrize("fmt", TORCHAO_FORMATS)
def test_quantize_torchao_random(fmt, rule, dist):
    seed = 1000 + DISTRIBUTIONS.index(dist)
    x = distribution(dist, fmt, np.random.default_rng(seed))
    s0, e0, packed = torchao_mx(x, fmt, rule)
    s1, e1 = q.to_mx(x, fmt, 32, rule, nan_blocks="quantize")
    assert_codes_equal(s1, s0, f"scales (seed {seed})")
    assert_codes_equal(e1, e0, f"elements (seed {seed})")
    if fmt == "e2m1":
        assert_codes_equal(formats.pack_fp4(e1), packed, "packed FP4")


@pytest.mark.parametrize("rule", TORCHAO_RULES)
@pytest.mark.parametrize("fmt", TORCHAO_FORMATS)
def test_quantize_torchao_edges(fmt, rule):
    x = edge_blocks()
    s0, e0, _ = torchao_mx(x, fmt, rule)
    s1, e1 = q.to_mx(x, fmt, 32, rule, nan_blocks="quantize")
    assert_codes_equal(s1, s0, "scales")
    assert_codes_equal(e1, e0, "elements")


@pytest.mark.parametrize("rule", TORCHAO_RULES)
@pytest.mark.parametrize("fmt", TORCHAO_FORMATS)
def test_quantize_torchao_bfloat16(fmt, rule):
    rng = np.random.default_rng(11)
    x32 = np.concatenate([distribution("heavy", fmt, rng, (16, 64)).reshape(-1, 32),
                          edge_blocks()[:40]])
    with np.errstate(invalid="ignore"):    # signalling NaNs among the edges raise FE_INVALID
        x = x32.astype(ml_dtypes.bfloat16)
    s0, e0, _ = torchao_mx(x, fmt, rule)
    s1, e1 = q.to_mx(x, fmt, 32, rule, nan_blocks="quantize")
    assert_codes_equal(s1, s0, "scales")
    assert_codes_equal(e1, e0, "elements")


@pytest.mark.parametrize("fmt", TORCHAO_FORMATS)
def test_quantize_torchao_block_and_shape(fmt):
    x = distribution("heavy", fmt, np.random.default_rng(12), (4, 6, 64))
    for block in (16, 64):
        s0, e0, _ = torchao_mx(x, fmt, "floor", block)
        s1, e1 = q.to_mx(x, fmt, block, "floor")
        assert_codes_equal(s1, s0, "scales")
        assert_codes_equal(e1, e0, "elements")


@pytest.mark.parametrize("fmt", ["e4m3", "e2m1"])
def test_quantize_torchao_across_chunks(fmt):
    """Inputs longer than one chunk of the fast path (2**18 elements), specials included."""
    rng = np.random.default_rng(13)
    x = distribution("heavy", fmt, rng, (20000, 32))
    x[::997, 3] = np.nan
    x[5::1009, 7] = -np.inf
    x[8191:8193] = 0
    for rule in ("floor", "rceil"):
        s0, e0, _ = torchao_mx(x, fmt, rule)
        s1, e1 = q.to_mx(x, fmt, 32, rule)
        assert_codes_equal(s1, s0, "scales")
        assert_codes_equal(e1, e0, "elements")
    x[12345] = np.nan
    with pytest.raises(q.QuantizeError, match=r"^Block 12345 \(in C order"):
        q.to_mx(x, fmt, 32, "floor")


def test_quantize_log2_matches_torch():
    """The exact FP32-log2 rule equals torch.log2 on every binade's edges (exhaustively checked
    once on all positive FP32 values; see docs/quantize.md)."""
    torch = pytest.importorskip("torch")
    k = np.arange(0, 255, dtype=np.uint32)[:, None] << np.uint32(23)
    j = np.concatenate([np.arange(0, 80), np.arange(2 ** 23 - 80, 2 ** 23)]).astype(np.uint32)
    bits = (k | j).reshape(-1)
    bits = np.concatenate([bits[bits > 0], np.arange(1, 1 << 16, dtype=np.uint32),
                           np.arange(2 ** 23 - 4096, 2 ** 23, dtype=np.uint32)])
    t = torch.log2(torch.from_numpy(bits.view(np.float32))).numpy()
    assert_codes_equal(qrules._torch_log2_ceil(bits), np.ceil(t).astype(np.int64), "ceil log2")
    assert_codes_equal(qrules._torch_log2_floor(bits), np.floor(t).astype(np.int64), "floor log2")
    # The rule differs from the exact ceil(log2) only just above powers of two.
    exact = qrules._frexp_fp32(bits)
    exact_ceil = np.where(exact[1] == 0, exact[0], exact[0] + 1)
    assert 0 < (qrules._torch_log2_ceil(bits) != exact_ceil).sum() < 10000


def test_quantize_torchao_divides_descale():
    """torch CPU computes RCEIL's amax / max as a true FP32 division, not amax * fl32(1/max)."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(3).uniform(0, 1000, 100000).astype(np.float32)
    got = (torch.from_numpy(x) / 448.0).numpy()
    assert_codes_equal(got.view(np.uint32), (x / F32(448)).view(np.uint32), "division")
    assert (got != x * F32(1 / 448)).any()


# -- the fast path against the exact path ----------------------------------------------------

@pytest.mark.parametrize("rounding", ["rne", "rz"])
@pytest.mark.parametrize("fmt", q.ELEMENT_FORMATS)
def test_quantize_fast_matches_exact(fmt, rounding):
    rng = np.random.default_rng(21)
    x = np.concatenate([edge_blocks(), distribution("bits", fmt, rng, (64, 32)),
                        distribution("elem_max", fmt, rng, (64, 32))])
    for rule in q.rules_for(fmt):
        s0, e0 = qmx._to_mx(x, fmt, 32, rule, rounding, -1, None, None, 32, "quantize", fast=False)
        s1, e1 = q.to_mx(x, fmt, 32, rule, rounding, nan_blocks="quantize")
        assert_codes_equal(s1, s0, f"{rule} scales")
        assert_codes_equal(e1, e0, f"{rule} elements")


@pytest.mark.parametrize("rounding", [Rounding.RNE, Rounding.RZ])
@pytest.mark.parametrize("fmt", q.ELEMENT_FORMATS)
def test_quantize_table_sticky_bits(fmt, rounding):
    """The 17-bit table key decides rounding exactly: every low-bit pattern around each code."""
    f = formats.get(fmt)
    vals = np.unique(np.abs(f.decode(f.finite_codes())))
    lo = vals.astype(np.float32).view(np.uint32)
    patterns = np.array([0, 1, 2, 0x4000, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x10000, 0x18000,
                         0x3FFFFF, 0x400000, 0x400001, 0x7FFFFF], np.uint32)
    bits = (lo[:, None] + patterns[None, :]).reshape(-1)
    bits = np.concatenate([bits, lo - np.uint32(1), lo[lo > 0] - np.uint32(0x8000)])
    bits = np.concatenate([bits, bits | np.uint32(0x80000000)])
    bits = bits[(bits & 0x7FFFFFFF) < 0x7F800000]
    blocks = bits.reshape(-1, 1)
    k = np.zeros(len(bits), np.int64)
    got = qelements.elements_fast(blocks, k, f, rounding)
    want = qelements.elements_exact(blocks, k, f, rounding, None, 32)
    assert_codes_equal(got, want, "table vs encode")


# -- the rules by their definitions ----------------------------------------------------------

def _blocks_amax(x: np.ndarray) -> list[float]:
    return [float(np.max(np.abs(r.astype(np.float64)))) for r in x]


@pytest.mark.parametrize("fmt", q.ELEMENT_FORMATS)
def test_quantize_ocp_definition(fmt):
    """OCP MX v1.0 §6.3 literally, block by block, in Python: shared_exp = floor(log2 amax) -
    emax (clamped to -127), P_i = RNE(V_i / X) clamped to ±max; Inf or NaN gives X = NaN."""
    f = formats.get(fmt)
    rng = np.random.default_rng(31)
    x = np.concatenate([edge_blocks(), distribution("binades", fmt, rng, (32, 32)),
                        distribution("pow2", fmt, rng, (32, 32))])
    s, e = q.to_mx(x, fmt, 32, "ocp", nan_blocks="quantize")
    for i, row in enumerate(as64(x)):
        if not np.isfinite(row).all():
            assert s[i, 0] == 0xFF
            assert (e[i] == (f.code_of_nan if f.has_nan else 0)).all()
            continue
        amax = np.max(np.abs(row))
        shared = -127 if amax == 0 else max(math.frexp(amax)[1] - 1 - f.emax, -127)
        assert s[i, 0] == shared + 127, (i, amax)
        want = f.encode(np.clip(row / 2.0 ** shared, -f.max, f.max), "rne", True)
        assert_codes_equal(e[i], want, f"block {i}")


def test_quantize_ocp_differs_from_floor_where_documented():
    """floor (torchao) and ocp agree except: code-0 blocks (torchao divides by 2**-126), Inf
    blocks (torchao keeps a finite scale) and the element codes of NaN blocks."""
    x = edge_blocks()
    for fmt in TORCHAO_FORMATS:
        f = formats.get(fmt)
        sf, ef = q.to_mx(x, fmt, 32, "floor", nan_blocks="quantize")
        so, eo = q.to_mx(x, fmt, 32, "ocp", nan_blocks="quantize")
        finite = np.isfinite(x).all(axis=1)
        has_inf = np.isinf(x).any(axis=1) & ~np.isnan(x).any(axis=1)
        assert_codes_equal(sf[finite], so[finite], "scales of finite blocks")
        assert (sf[has_inf, 0] == 255 - f.emax).all() and (so[~finite, 0] == 0xFF).all()
        tiny = finite & (so[:, 0] == 0)
        assert tiny.any()
        assert_codes_equal(ef[finite & ~tiny], eo[finite & ~tiny], "elements")
        x64 = x[tiny].astype(np.float64)
        assert_codes_equal(ef[tiny], f.encode(x64 * 2.0 ** 126), "floor's 2**-126 divisor")
        assert_codes_equal(eo[tiny], f.encode(x64 * 2.0 ** 127), "ocp's 2**-127")
        assert (ef[tiny] != eo[tiny]).any()


def _te_reference(row: np.ndarray, f: formats.Format) -> tuple[int, np.ndarray]:
    """Transformer Engine's MXFP8 cast of one block, scalar by scalar (ptx.cuh, HEAD)."""
    mags = [abs(float(v)) for v in row if not math.isnan(v)]
    amax = F32(max(mags, default=0.0))                 # fmaxf skips NaN
    d = amax * F32(1.0 / f.max)                         # FP32 product, round to nearest
    if math.isinf(d):
        e = 0xFE
    elif d == 0:
        e = 0
    else:
        bits = int(np.array(d, np.float32).view(np.uint32))
        e, man = bits >> 23, bits & 0x7FFFFF
        if man > 0 and e != 0xFE and not (e == 0 and man <= 0x400000):
            e += 1
    rcp = 2.0 ** -127 if e == 0xFE else 2.0 ** (127 - e)
    v = as64(row)
    nan = np.isnan(v)
    codes = f.encode(np.clip(np.where(nan, 0, v) * rcp, -f.max, f.max)).astype(np.uint8)
    codes[nan] = 0x7F          # cvt.rn.satfinite: any NaN -> 0x7F (e4m3 and e5m2, on H200)
    return e, codes


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_quantize_rceil_sat_definition(fmt):
    f = formats.get(fmt)
    rng = np.random.default_rng(41)
    x = np.concatenate([edge_blocks(), distribution("pow2", fmt, rng, (32, 32))])
    s, e = q.to_mx(x, fmt, 32, "rceil-sat", nan_blocks="quantize")
    for i, row in enumerate(x):
        code, codes = _te_reference(row, f)
        assert s[i, 0] == code, (i, row)
        assert_codes_equal(e[i], codes, f"block {i}")


def test_quantize_rceil_vs_rceil_sat_differences():
    """Each documented difference between torchao's RCEIL and TE's, on a directed block."""
    def one(v, **kw):
        row = np.zeros(32, np.float32)
        row[0] = v
        for i, w in kw.items():
            row[int(i[1:])] = w
        return (q.to_mx(row, "e4m3", 32, "rceil", nan_blocks="quantize"),
                q.to_mx(row, "e4m3", 32, "rceil-sat", nan_blocks="quantize"))
    # 1. FP32 log2 rounds onto the integer just above a power of two: torchao one binade low.
    (s0, _), (s1, _) = one(F32(448 * 2.0 ** 100 * (1 + 2.0 ** -23)))
    assert (s0[0], s1[0]) == (227, 228)
    # 2. Scale code 0: torchao multiplies by 1.0, TE by 2**127.
    (s0, e0), (s1, e1) = one(F32(448 * 2.0 ** -127))
    assert s0[0] == s1[0] == 0 and e0[0] == 0 and e1[0] == 0x7E
    # 3. A NaN: torchao gives the block NaN, TE's amax skips it.
    (s0, e0), (s1, e1) = one(F32(1.0), x5=np.nan)
    assert s0[0] == 0xFF and (e0 == 0x7F).all()
    assert s1[0] == 119 and e1[0] == 0x78 and e1[5] == 0x7F
    # 4. An Inf: both saturate the scale to 0xFE.
    (s0, e0), (s1, e1) = one(F32(np.inf))
    assert s0[0] == s1[0] == 0xFE and e0[0] == e1[0] == 0x7E
    # 5. amax * fl32(1/max) rounds differently from amax / max.
    rng = np.random.default_rng(5)
    a = rng.uniform(0, 1000, 200000).astype(np.float32)
    div, mul = a / F32(448), a * F32(1 / 448)
    assert (div != mul).any()


@pytest.mark.parametrize("fmt", TORCHAO_FORMATS)
def test_quantize_special_values(fmt):
    """The special-value table of docs/quantize.md, rule by rule."""
    f = formats.get(fmt)
    z = np.zeros((1, 32), np.float32)
    one = np.full((1, 32), 1.0, np.float32)
    inf = one.copy()
    inf[0, 4] = -np.inf
    nan = one.copy()
    nan[0, 4] = np.nan
    maxneg = int(f.encode(-f.max))
    for rule in q.rules_for(fmt):
        s, e = q.to_mx(z, fmt, 32, rule)
        assert s[0, 0] == 0 and (e == 0).all(), rule
        s, e = q.to_mx(-z, fmt, 32, rule)
        assert (e == int(f.encode(-0.0))).all(), rule
        s, e = q.to_mx(inf, fmt, 32, rule)
        want = {"floor": 255 - f.emax, "ceil": 255 - f.emax, "even": 255 - f.emax,
                "rceil": 0xFE, "ocp": 0xFF, "rceil-sat": 0xFE}[rule.value]
        assert s[0, 0] == want, rule
        if rule.value != "ocp":
            assert e[0, 4] == maxneg, rule
        s, e = q.to_mx(nan, fmt, 32, rule)
        assert s[0, 0] == (0xFF if rule.value != "rceil-sat" else 127 - f.emax), rule


def test_quantize_torchao_nan_garbage_codes():
    """torchao's FP6/FP4 cast has no NaN branch: a NaN comes out as a finite code."""
    row = np.ones((1, 32), np.float32)
    row[0, 2] = np.nan
    for fmt, code in (("e2m3", 12), ("e3m2", 14), ("e2m1", 3)):
        s, e = q.to_mx(row, fmt, 32, "floor")
        assert s[0, 0] == 0xFF and e[0, 2] == code and e[0, 0] == 0
        s, e = q.to_mx(row, fmt, 32, "rceil")
        assert (e == code).all()


# -- stochastic rounding, exactness, axes, dtypes --------------------------------------------

@pytest.mark.parametrize("fmt", q.ELEMENT_FORMATS)
def test_quantize_stochastic_reproducible(fmt):
    f = formats.get(fmt)
    x = distribution("heavy", fmt, np.random.default_rng(51), (8, 64))
    rule = q.rules_for(fmt)[0]
    s1, e1 = q.to_mx(x, fmt, 32, rule, "stochastic", seed=5)
    s2, e2 = q.to_mx(x, fmt, 32, rule, "stochastic", seed=5)
    _, e3 = q.to_mx(x, fmt, 32, rule, "stochastic", seed=6)
    assert_codes_equal(e1, e2)
    assert_codes_equal(s1, q.to_mx(x, fmt, 32, rule)[0], "scales do not depend on rounding")
    assert (e1 != e3).any()
    # The documented bits: default_rng(seed).integers(0, 2**32, x.shape) in C order of x.
    rb = np.random.default_rng(5).integers(0, 2 ** 32, size=x.shape, dtype=np.uint64)
    k = np.repeat(s1.astype(np.int64) - 127, 32, axis=-1)
    if rule.value in ("floor",):
        k = np.maximum(k, -126)
    want = f.encode(x.astype(np.float64) * np.ldexp(1.0, -k), "stochastic", random_bits=rb)
    assert_codes_equal(e1, want, "stochastic elements")
    # Along axis -2 the bits still follow x's own C order.
    _, et = q.to_mx(x.T.copy(), fmt, 32, rule, "stochastic", axis=-2, random_bits=rb.T)
    assert_codes_equal(et, e1.T, "axis -2")


def test_quantize_stochastic_unbiased():
    x = np.full((1, 32), 1.1, np.float32)
    deq = [q.from_mx(*q.to_mx(x, "e2m1", 32, "ocp", "stochastic", seed=s), "e2m1").mean()
           for s in range(400)]
    assert abs(np.mean(deq) - 1.1) < 0.02


def test_quantize_from_mx_exact():
    rng = np.random.default_rng(61)
    for fmt in q.ELEMENT_FORMATS:
        f = formats.get(fmt)
        codes = rng.choice(f.finite_codes(), (6, 64)).astype(np.uint8)
        scales = rng.integers(0, 255, (6, 2)).astype(np.uint8)
        scales[0, 0] = 0xFF
        got = q.from_mx(scales, codes, fmt, 32)
        for i in range(6):
            for j in range(64):
                sc = scales[i, j // 32]
                if sc == 0xFF:
                    assert math.isnan(got[i, j])
                else:
                    assert got[i, j] == float(f.decode(codes[i, j])) * 2.0 ** (int(sc) - 127)
        # Along axis -2: the transpose.
        assert_codes_equal(q.from_mx(scales.T, codes.T, fmt, 32, axis=-2).view(np.uint64),
                           got.T.view(np.uint64), "from_mx axis -2")


@pytest.mark.parametrize("fmt", q.ELEMENT_FORMATS)
def test_quantize_ocp_idempotent(fmt):
    """Dequantised OCP codes quantise back to themselves (no double rounding anywhere)."""
    x = distribution("binades", fmt, np.random.default_rng(71), (16, 64))
    s, e = q.to_mx(x, fmt, 32, "ocp")
    back = q.from_mx(s, e, fmt, 32).astype(np.float32)
    s2, e2 = q.to_mx(back, fmt, 32, "ocp")
    keep = np.repeat(np.abs(back).reshape(16, 2, 32).max(axis=-1) > 0, 32, axis=-1)
    assert_codes_equal(np.where(keep, e2, 0), np.where(keep, e, 0))


def test_quantize_axes_and_batches():
    x = distribution("heavy", "e4m3", np.random.default_rng(81), (2, 64, 96))
    s, e = q.to_mx(x, "e4m3", 32, "rceil", axis=1)
    st, et = q.to_mx(np.ascontiguousarray(np.swapaxes(x, 1, 2)), "e4m3", 32, "rceil")
    assert s.shape == (2, 2, 96) and e.shape == x.shape
    assert_codes_equal(np.swapaxes(s, 1, 2), st)
    assert_codes_equal(np.swapaxes(e, 1, 2), et)
    s0, e0 = q.to_mx(x, "e4m3", 32, "rceil", axis=-1)
    assert s0.shape == (2, 64, 3)
    assert_codes_equal(q.to_mx(x[1], "e4m3", 32, "rceil")[1], e0[1])


def test_quantize_input_dtypes():
    rng = np.random.default_rng(91)
    x = rng.standard_normal((4, 64)).astype(np.float16)
    want = q.to_mx(x.astype(np.float32), "e4m3")
    for arr in (x, x.astype(np.float64), x.astype(ml_dtypes.bfloat16).astype(np.float32),
                np.asfortranarray(x.astype(np.float32))):
        got = q.to_mx(arr, "e4m3")
        if arr.dtype != np.float32 or arr.flags.f_contiguous:
            ref = want if arr.dtype != np.float32 else q.to_mx(np.ascontiguousarray(arr),
                                                                "e4m3")
            assert_codes_equal(got[1], ref[1])
    bf = x.astype(ml_dtypes.bfloat16)
    assert_codes_equal(q.to_mx(bf, "e5m2")[1], q.to_mx(bf.astype(np.float32), "e5m2")[1])


@pytest.mark.parametrize("fmt", TORCHAO_FORMATS)
def test_quantize_ml_dtypes_casts(fmt):
    """Where the semantics coincide (finite values already clamped to ±max), ml_dtypes' RNE
    casts give our element codes."""
    f = formats.get(fmt)
    dt = np.dtype(getattr(ml_dtypes, f.ml_dtypes_name))
    rng = np.random.default_rng(101)
    x = np.concatenate([distribution(d, fmt, rng, (64, 32)) for d in
                        ("normal", "binades", "pow2", "elem_max")])
    s, e = q.to_mx(x, fmt, 32, "ocp")
    v = np.clip(x.astype(np.float64) * np.ldexp(1.0, 127 - s.astype(np.int64)), -f.max, f.max)
    # v is exact in FP32 except below 2**-126, where both sides give ±0.
    cast = v.astype(np.float32).astype(dt)
    assert_codes_equal(e, cast.view(np.uint8), "ml_dtypes cast")


# -- microxcaling golden files ---------------------------------------------------------------

def microxcaling_model(x: np.ndarray, fmt: str) -> tuple[np.ndarray, np.ndarray, dict]:
    """Our ``ocp`` codes with microxcaling's three documented differences applied."""
    f = formats.get(fmt)
    s, e = q.to_mx(x, fmt, 32, "ocp", nan_blocks="quantize")
    s, e = s[:, 0].copy(), e.copy()
    bits = x.view(np.uint32)
    amax = (bits & np.uint32(0x7FFFFFFF)).max(axis=1)
    finite = amax < 0x7F800000
    # 1. shared_exp = floor(log2(amax + 2**-126 * (amax == 0))) with an FP32 log2, which
    #    rounds up onto the next integer just below a power of two (and 128 overflows int8).
    fl = qrules._torch_log2_floor(np.where(finite, amax, 0).astype(np.uint32))
    se = np.maximum(np.where(amax == 0, -126, fl) - f.emax, -127)
    nan = ~finite | (se > 127)
    moved = ~nan & (se + 127 != s)
    if moved.any():
        s[moved] = se[moved] + 127
        e[moved] = qelements.elements_exact(bits[moved], se[moved], f, Rounding.RNE, None, 32)
    s[nan] = 0xFF
    e[nan] = f.code_of_nan if f.has_nan else 0
    v = x.astype(np.float64) * np.ldexp(1.0, -se)[:, None]
    ok = ~nan[:, None] & np.isfinite(v)
    # 2. Rounding by floor(|A| + 0.5) in FP32: |A| = 0.5 - 2**-26 or 0.5 - 2**-25 (A in units
    #    of the smallest subnormal) gives 1.0, a double rounding; exact RNE gives 0.
    r = np.abs(np.where(ok, v, 0)) / f.min_subnormal
    up = ok & ((r == 0.5 - 2.0 ** -26) | (r == 0.5 - 2.0 ** -25))
    e[up] = f.encode(np.copysign(f.min_subnormal, v[up]))
    # 3. sign(A) * 0: torch.sign(-0.0) is +0, so a quotient that is -0 in FP32 (a -0 input or
    #    one that underflows below 2**-150) gives +0; a tiny non-zero negative keeps -0.
    plus = ok & (np.abs(np.where(ok, v, 1)) <= 2.0 ** -150)
    e[plus] = 0
    return s, e, {"scale": int(moved.sum() + (nan & finite).sum()), "double": int(up.sum()),
                  "zero": int((plus & (np.signbit(v))).sum())}


def test_quantize_microxcaling_golden_file():
    g = np.load(GOLDEN, allow_pickle=False)
    meta = json.loads(str(g["meta"]))
    assert meta["microxcaling_commit"] == "7bc41952de394f5cc5e782baf132e7c7542eb4e4"
    assert meta["arguments"]["round"] == "even" and meta["arguments"]["block_size"] == 32
    assert g["x"].dtype == np.float32 and g["x"].shape[1] == 32
    assert GOLDEN.stat().st_size < 300_000


@pytest.mark.parametrize("fmt", q.ELEMENT_FORMATS)
def test_quantize_microxcaling_golden(fmt):
    g = np.load(GOLDEN, allow_pickle=False)
    x, gs, ge = g["x"], g[f"{fmt}_scale"], g[f"{fmt}_elem"]
    s, e, counts = microxcaling_model(x, fmt)
    assert_codes_equal(s, gs, "scales")
    assert_codes_equal(e, ge, "elements")
    # Every documented difference occurs in the golden set, and nothing else differs.
    assert counts["scale"] > 0 and counts["double"] > 0 and counts["zero"] > 0, counts
    so, eo = q.to_mx(x, fmt, 32, "ocp", nan_blocks="quantize")
    assert (so[:, 0] != gs).sum() == counts["scale"]


# -- NVFP4 -----------------------------------------------------------------------------------

def _torchao_nvfp4():
    pytest.importorskip("torchao")
    import torch
    from torchao.prototype.mx_formats.kernels import unpack_uint4
    from torchao.prototype.mx_formats.nvfp4_tensor import (
        nvfp4_quantize,
        per_tensor_amax_to_scale,
    )
    return torch, nvfp4_quantize, per_tensor_amax_to_scale, unpack_uint4


@pytest.mark.parametrize("dist", DISTRIBUTIONS + ("edges",))
def test_quantize_nvfp4_torchao(dist):
    torch, nvfp4_quantize, amax_to_scale, unpack_uint4 = _torchao_nvfp4()
    rng = np.random.default_rng(111)
    x = edge_blocks() if dist == "edges" else distribution(dist, "e2m1", rng, (32, 256))
    t = torch.from_numpy(x)
    fin = np.abs(x[np.isfinite(x)])
    amax = torch.tensor(fin.max() if fin.size else 0.0, dtype=torch.float32)
    for pts in (None, amax_to_scale(amax), torch.tensor(0.0123, dtype=torch.float32)):
        s0, d0 = nvfp4_quantize(t, 16, pts)
        s0 = s0.view(torch.uint8).numpy()
        d0 = unpack_uint4(d0).numpy().reshape(x.shape)
        s1, e1, p = q.to_nvfp4(x, 1.0 if pts is None else pts.item(), nan_blocks="quantize")
        assert_codes_equal(s1, s0, f"scales (pts {pts})")
        assert_codes_equal(e1, d0, f"elements (pts {pts})")
    if np.isfinite(x).all() and fin.max() > 0:
        assert q.nvfp4_tensor_scale(x) == np.float32(amax_to_scale(amax).item())


def test_quantize_nvfp4_definition_and_specials():
    x = np.zeros((3, 16), np.float32)
    x[0] = np.linspace(-3, 3, 16)
    x[1, 3] = np.inf
    x[2, 2] = np.nan
    s, e, p = q.to_nvfp4(x, 1.0)
    assert p == np.float32(1.0)
    assert s[0, 0] == 0x30                 # fl8e4m3(3 / 6) = 0.5
    assert s[1, 0] == 0x7E and e[1, 3] == 0x7 and (e[1, :3] == 0).all()
    assert s[2, 0] == 0x7F and (e[2] == 4).all()
    z, ez, pz = q.to_nvfp4(np.zeros((2, 16), np.float32))
    assert pz == np.float32(1.0) and (z == 0x08).all() and (ez == 0).all()
    # The recipe, scalar by scalar, for block 0 with a per-tensor scale.
    pts = F32(0.001)
    s, e, _ = q.to_nvfp4(x[:1], pts)
    sblk = np.clip((F32(3) / F32(6)) / pts, F32(2 ** -6), F32(448))
    s8 = formats.get("e4m3").encode(float(sblk))
    assert s[0, 0] == s8
    r = (F32(1) / pts) / F32(formats.get("e4m3").decode(s8))
    assert_codes_equal(e[0], formats.get("e2m1").encode((x[0] * r).astype(np.float64)))
    # Exact dequantisation.
    got = q.from_nvfp4(s, e, pts)
    want = formats.get("e2m1").decode(e) * formats.get("ue4m3").decode(s) * float(pts)
    assert_codes_equal(got.view(np.uint64), want.view(np.uint64), "from_nvfp4")


def test_quantize_nvfp4_two_d():
    rng = np.random.default_rng(121)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    s2, e2, _ = q.to_nvfp4(x, 1.0, two_d=True)
    assert s2.shape == (32, 4)
    tiles = s2.reshape(2, 16, 4)
    assert (tiles == tiles[:, :1, :]).all()
    # With each tile's amax present in every row of it, 2-D equals 1-D.
    y = x.copy()
    for ti in range(2):
        for tj in range(4):
            t = y[ti * 16:(ti + 1) * 16, tj * 16:(tj + 1) * 16]
            t[:, 0] = np.abs(t).max()
    s1, e1, _ = q.to_nvfp4(y, 1.0)
    s2, e2, _ = q.to_nvfp4(y, 1.0, two_d=True)
    assert_codes_equal(s2, s1)
    assert_codes_equal(e2, e1)
    st, et, _ = q.to_nvfp4(np.ascontiguousarray(y.T), 1.0, two_d=True, axis=-2)
    assert_codes_equal(st.T, s2)


def test_quantize_nvfp4_stochastic():
    x = np.random.default_rng(131).standard_normal((4, 32)).astype(np.float32)
    a = q.to_nvfp4(x, 1.0, rounding="stochastic", seed=3)
    b = q.to_nvfp4(x, 1.0, rounding="stochastic", seed=3)
    assert_codes_equal(a[1], b[1])
    assert_codes_equal(a[0], q.to_nvfp4(x, 1.0)[0])


# -- packing ---------------------------------------------------------------------------------



# -- errors ----------------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda: q.to_mx(np.arange(32), "e4m3"),
     r"Input must be a float array \(float32, bfloat16, float16 or float64\), not int64"),
    (lambda: q.to_mx(np.full(32, 0.1), "e4m3"),
     r"float64 input must hold FP32 values exactly \(the scale rules are defined on FP32\), "
     r"but np.float64\(0.1\) is not one; cast it to float32 first if rounding it is intended"),
    (lambda: q.to_mx(np.ones((2, 32), np.float32), "e4m3", axis=2),
     r"Axis must be in \[-2, 1\] for a 2-d input, not 2"),
    (lambda: q.to_mx(np.ones((2, 48), np.float32), "e4m3"),
     r"Block \(32\) must divide the length of axis 1 \(48\)"),
    (lambda: q.to_mx(np.ones(32, np.float32), "e4m3", block=0),
     r"Block must be a positive integer, not 0"),
    (lambda: q.to_mx(np.float32(1), "e4m3"),
     r"Input must have at least one dimension, not a scalar"),
    (lambda: q.to_mx(np.ones(32, np.float32), "int8", scale_rule="floor"),
     r"Scale rule 'floor' is not defined for int8 elements \(it covers e4m3, e5m2, e3m2, "
     r"e2m3, e2m1\); for int8 use ocp"),
    (lambda: q.to_mx(np.ones(32, np.float32), "e2m1", scale_rule="rceil-sat"),
     r"Scale rule 'rceil-sat' is not defined for e2m1 elements \(it covers e4m3, e5m2\); for "
     r"e2m1 use floor, ceil, even, rceil, ocp"),
    (lambda: q.to_mx(np.ones(32, np.float32), "e4m3", scale_rule="round"),
     r"Scale rule must be one of floor, ceil, even, rceil, ocp, rceil-sat, not 'round'"),
    (lambda: q.to_mx(np.ones(32, np.float32), "e4m3", rounding="rna"),
     r"Rounding must be one of rne, rz, stochastic, not 'rna'"),
    (lambda: q.to_mx(np.ones(32, np.float32), "fp16"),
     r"Element format must be one of e4m3, e5m2, e3m2, e2m3, e2m1, int8, not 'fp16'"),
    (lambda: q.to_mx(np.full((2, 32), np.nan, np.float32), "e4m3"),
     r"Block 0 \(in C order, blocks along axis 1\) holds only NaN, so it has no scale; "
     r"replace the NaNs, or pass nan_blocks='quantize' to quantise it as floor does"),
    (lambda: q.to_mx(np.ones(32, np.float32), "e4m3", nan_blocks="skip"),
     r"nan_blocks must be one of error, quantize, not 'skip'"),
    (lambda: q.to_mx(np.ones(32, np.float32), "e4m3", rounding="stochastic",
                     random_bits=np.full(32, 2 ** 40, np.uint64)),
     r"random_bits must be integers in \[0, 2\*\*32\)"),
    (lambda: q.from_mx(np.zeros((2, 3), np.uint8), np.zeros((2, 64), np.uint8), "e4m3"),
     r"Scale codes must have shape \(2, 2\) for elements of shape \(2, 64\) in blocks of 32 "
     r"along axis 1, not \(2, 3\)"),
    (lambda: q.to_nvfp4(np.ones(16, np.float32), per_tensor_scale=0.0),
     r"per_tensor_scale must be positive and finite in FP32, not 0.0"),
    (lambda: q.to_nvfp4(np.ones(16, np.float32), per_tensor_scale=1e-50),
     r"per_tensor_scale must be positive and finite in FP32, not 1e-50"),
    (lambda: q.to_nvfp4(np.array([np.inf] + [1.0] * 15, np.float32)),
     r"The NVFP4 per-tensor scale needs a finite amax, but the input holds NaN or Inf; pass "
     r"per_tensor_scale explicitly"),
    (lambda: q.to_nvfp4(np.ones((8, 16), np.float32), two_d=True),
     r"two_d needs the other tile axis \(8\) to be a multiple of the block \(16\)"),
], ids=["int-input", "float64-inexact", "axis", "block-divides", "block-zero", "scalar",
        "int8-floor", "fp4-rceil-sat", "unknown-rule", "rounding", "format", "nan-only-block",
        "nan-policy", "random-bits", "from-mx-shape", "nvfp4-pts", "nvfp4-pts-underflow",
        "nvfp4-inf-amax", "nvfp4-two-d"])
def test_quantize_errors(call, message):
    with pytest.raises(q.QuantizeError, match=f"^{message}$"):
        call()


# -- CLI -------------------------------------------------------------------------------------

@pytest.fixture
def npy(tmp_path):
    def make(arr, name="in.npy"):
        p = tmp_path / name
        np.save(p, arr)
        return str(p)
    return make


def test_quantize_cli_writes_vector_set(npy, tmp_path, capsys):
    x = np.random.default_rng(151).standard_normal((16, 64)).astype(np.float32)
    out = tmp_path / "q.npz"
    assert main(["quantize", npy(x), "--elem", "e4m3", "--block", "32", "--scale-rule",
                 "rceil", "-o", str(out)]) == 0
    vs = vectors.load(out)
    s, e = q.to_mx(x, "e4m3", 32, "rceil")
    assert_codes_equal(vs.a, e)
    assert_codes_equal(vs.a_scale, s)
    assert vs.b.shape == (64, 64) and vs.b_scale.shape == (2, 64) and (vs.b_scale == 127).all()
    assert vs.extra["quantize"]["scale_rule"] == "rceil"
    res = main(["run", str(out), "-o", str(tmp_path / "r.npz")])
    assert res == 0
    d = vectors.load(tmp_path / "r.npz").d.view(np.float32)
    assert_codes_equal(d.view(np.uint32), q.from_mx(s, e, "e4m3").astype(np.float32)
                       .view(np.uint32), "identity product")
    assert "as operand a" in capsys.readouterr().out


def test_quantize_cli_operand_b_and_nvfp4(npy, tmp_path, capsys):
    x = np.random.default_rng(152).standard_normal((2, 32, 8)).astype(np.float32)
    out = tmp_path / "b.npz"
    assert main(["quantize", npy(x), "--as", "b", "--nvfp4", "-o", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["scale_format"] == "ue4m3" and info["block"] == 16
    vs = vectors.load(out)
    s, e, p = q.to_nvfp4(x, axis=-2)
    assert_codes_equal(vs.b, e)
    assert_codes_equal(vs.b_scale, s)
    assert vs.tensor_scale == p and vs.a.shape == (2, 32, 32)
    assert main(["quantize", npy(x[0, :, 0], "v.npy"), "--elem", "int8", "--scale-rule", "ocp",
                 "-o", str(tmp_path / "v.npz")]) == 0
    assert vectors.load(tmp_path / "v.npz").a.shape == (1, 32)


def test_quantize_cli_compare(npy, capsys):
    x = np.random.default_rng(153).standard_normal((8, 64)).astype(np.float32)
    assert main(["quantize", npy(x), "--compare", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["rule"] for r in rows] == ["floor", "ceil", "even", "rceil", "ocp", "rceil-sat"]
    by = {r["rule"]: r for r in rows}
    assert by["floor"]["scale_differs"] == 0 and by["ceil"]["scale_differs"] == 16
    assert by["ceil"]["max_abs_err"] <= by["floor"]["max_abs_err"]
    assert main(["quantize", npy(x), "--compare", "--elem", "e2m1"]) == 0
    text = capsys.readouterr().out
    assert "rceil" in text and "rceil-sat" not in text and "scale≠floor" in text


@pytest.mark.parametrize("argv, message", [
    (["--elem", "int8"],
     "Scale rule 'floor' is not defined for int8 elements (it covers e4m3, e5m2, e3m2, e2m3, "
     "e2m1); for int8 use ocp"),
    (["--compare", "--block", "24"], "Block (24) must divide the length of axis 1 (64)"),
    (["--block", "24"], "A vector set holds blocks of 16 or 32, not 24; use --compare or the "
                        "Python API (mxsim.quantize) for other blocks"),
    (["--block", "64"], "A vector set holds blocks of 16 or 32, not 64; use --compare or the "
                        "Python API (mxsim.quantize) for other blocks"),
    (["--nan"], "Block 1 (in C order, blocks along axis 1) holds only NaN, so it has no scale; "
                "replace the NaNs, or pass nan_blocks='quantize' to quantise it as floor does"),
    (["--int"], "Input must be a float array (float32, bfloat16, float16 or float64), not int64"),
    (["--compare", "-o", "OUT"], "quantize takes either -o OUT.npz or --compare, not both"),
    (["--no-o"], "quantize needs -o OUT.npz (or --compare)"),
    (["--elem", "e3m2", "--scale-rule", "rceil-sat"],
     "Scale rule 'rceil-sat' is not defined for e3m2 elements (it covers e4m3, e5m2); for e3m2 "
     "use floor, ceil, even, rceil, ocp"),
    (["--two-d"], "--two-d does not apply without --nvfp4: it picks NVFP4's 16x16 tile "
                  "scales; leave it out"),
])
def test_quantize_cli_bad_input(npy, tmp_path, capsys, argv, message):
    x = np.random.default_rng(154).standard_normal((4, 64)).astype(np.float32)
    if "--nan" in argv:
        argv = [a for a in argv if a != "--nan"]
        x[0, 32:] = np.nan
    if "--int" in argv:
        argv = [a for a in argv if a != "--int"]
        x = np.arange(256).reshape(4, 64)
    out = tmp_path / "never.npz"
    argv = [(str(out) if a == "OUT" else a) for a in argv]
    if "--no-o" in argv:
        argv.remove("--no-o")
    elif "-o" not in argv and "--compare" not in argv:
        argv += ["-o", str(out)]
    assert main(["quantize", npy(x), *argv]) == 2
    err = capsys.readouterr().err
    assert err == f"mxsim: error: {message}\n"
    assert not out.exists() and list(tmp_path.iterdir()) == [tmp_path / "in.npy"]


def test_quantize_cli_bad_files(tmp_path, capsys):
    bad = tmp_path / "bad.npy"
    bad.write_text("not numpy")
    out = tmp_path / "o.npz"
    assert main(["quantize", str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mxsim: error: {bad}: not a readable .npy array (") and \
        err.endswith("); save one with numpy.save\n") and err.count("\n") == 1
    z = tmp_path / "z.npz"
    np.savez(z, a=np.ones(3))
    assert main(["quantize", str(z), "-o", str(out)]) == 2
    assert "not a readable .npy array" in capsys.readouterr().err
    assert main(["quantize", str(tmp_path / "missing.npy"), "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"mxsim: error: {tmp_path / 'missing.npy'}: no such file\n"
    assert not out.exists()
