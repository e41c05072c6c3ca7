"""FP16, BF16 and TF32 operands end to end: formats, vector sets, both engines, MMA-Sim."""

from __future__ import annotations

import numpy as np
import pytest

from mxsim import formats, vectors
from mxsim.engine import fast, reference
from mxsim.errors import VectorFileError
from mxsim.formats import Rounding
from mxsim.spec import UnitSpec

SIXTEEN = ("fp16", "bf16", "tf32")
DTYPES = {"fp16": np.uint16, "bf16": np.uint16, "tf32": np.uint32}


# -- formats and vector sets -----------------------------------------------------------------

def test_operand_formats_list():
    assert formats.OPERAND_FORMATS == formats.ELEMENT_FORMATS + SIXTEEN
    assert vectors.OPERAND_FORMATS == formats.OPERAND_FORMATS
    assert formats.get("TensorFloat32") is formats.get("tf32")


def test_tf32_code_is_the_top_19_bits_of_fp32():
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)
    tf32 = formats.get("tf32")
    code = bits >> np.uint32(13)
    assert code.dtype == tf32.code_dtype == np.uint32
    with np.errstate(invalid="ignore"):        # signalling-NaN patterns raise FE_INVALID
        want = (bits & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    got = tf32.decode(code)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan], want[~nan])
    # RZ to tf32 from FP32 is the truncation, for every finite value
    with np.errstate(invalid="ignore"):
        fin = np.isfinite(want) & np.isfinite(bits.view(np.float32))
    enc = tf32.encode(bits.view(np.float32)[fin], "rz", saturate=False)
    assert np.array_equal(enc, code[fin])


@pytest.mark.parametrize("fmt", SIXTEEN)
def test_vector_set_dtype_and_round_trip(tmp_path, fmt):
    dt = DTYPES[fmt]
    f = formats.get(fmt)
    rng = np.random.default_rng(2)
    a = rng.integers(0, 1 << f.bits, (2, 3, 8)).astype(dt)
    b = rng.integers(0, 1 << f.bits, (2, 8, 4)).astype(dt)
    c = rng.standard_normal((2, 3, 4)).astype(np.float32).view(np.uint32)
    vs = vectors.VectorSet(a=a, b=b, a_format=fmt, b_format=fmt, c=c)
    vectors.save(vs, tmp_path / "s.npz")
    back = vectors.load(tmp_path / "s.npz")
    assert back.inputs_equal(vs) and back.a.dtype == dt and back.b.dtype == dt
    wrong = np.uint8 if dt != np.uint8 else np.uint16
    with pytest.raises(VectorFileError, match=f"^array 'a' must be {np.dtype(dt)} codes of "
                                              f"{fmt}, not {np.dtype(wrong)}$"):
        vs.replace(a=a.astype(wrong))


def test_vector_set_rejects_codes_scales_and_formats():
    a = np.full((1, 32), 1 << 19, np.uint32)
    b = np.zeros((32, 1), np.uint32)
    with pytest.raises(VectorFileError, match=r"^array 'a' holds code 0x80000, outside tf32 "
                                              r"\(19 bits\)$"):
        vectors.VectorSet(a=a, b=b, a_format="tf32", b_format="tf32")
    with pytest.raises(VectorFileError, match="^scales go with MX element formats only; "
                                              "a_format is fp16"):
        vectors.VectorSet(a=np.zeros((1, 32), np.uint16), b=np.zeros((32, 1), np.uint8),
                          a_format="fp16", b_format="e4m3", scale_format="e8m0", block=32,
                          a_scale=np.zeros((1, 1), np.uint8), b_scale=np.zeros((1, 1), np.uint8))
    with pytest.raises(VectorFileError, match="^a_format must be one of .*tf32, not 'fp32'$"):
        vectors.VectorSet(a=np.zeros((1, 2), np.uint32), b=np.zeros((2, 1), np.uint32),
                          a_format="fp32", b_format="tf32")


# -- both engines and MMA-Sim ----------------------------------------------------------------

_F = {"Volta": 23, "Turing": 24, "Ampere": 24, "Ada Lovelace": 24, "Hopper": 25,
      "Blackwell": 25}
_L_BYTES = {"Volta": 8, "Turing": 16, "Ampere": 16, "Ada Lovelace": 16, "Hopper": 32,
            "Blackwell": 32}
_E_ZERO_F16 = {"Volta": -19, "Turing": -20, "Ampere": -20, "Ada Lovelace": -20, "Hopper": -21,
               "Blackwell": -21}
_E_ZERO_F32 = {"Volta": -131, "Turing": -132, "Ampere": -132, "Ada Lovelace": -132,
               "Hopper": -133, "Blackwell": -133}


def mmasim_spec(arch: str, fmt: str, k: int, f16_out: bool) -> UnitSpec:
    """A spec with MMA-Sim's T-FDPA parameters (nv_ptx/sim.py) for ``arch``: F bits, steps of
    L = L_max_bytes / itemsize products, e_zero by output, RZ to FP32 or RNE to FP16."""
    size = 4 if fmt == "tf32" else 2
    step = min(k, _L_BYTES[arch] // size)
    steps = tuple(tuple(range(s, s + step)) for s in range(0, k, step))
    return UnitSpec(
        name=f"{arch.lower().split()[0]}-{fmt}-{'f16' if f16_out else 'f32'}",
        a_format=fmt, b_format=fmt, k=k, schedule=steps if len(steps) > 1 else None,
        frac_bits=_F[arch], acc_format="fp16" if f16_out else "fp32",
        acc_rounding=Rounding.RNE if f16_out else Rounding.RZ,
        d_format="fp16" if f16_out else "fp32",
        e_zero=(_E_ZERO_F16 if f16_out else _E_ZERO_F32)[arch])


#: (MMA-Sim op kind, architecture, shape and type): each with the spec mmasim_spec builds.
INSTRUCTIONS = [
    ("mma", "Volta", "m8n8k4.f32.f16.f16.f32"),
    ("mma", "Volta", "m8n8k4.f16.f16.f16.f16"),
    ("mma", "Turing", "m16n8k8.f32.f16.f16.f32"),
    ("mma", "Ampere", "m16n8k16.f32.f16.f16.f32"),
    ("mma", "Ampere", "m16n8k16.f16.f16.f16.f16"),
    ("mma", "Ampere", "m16n8k16.f32.bf16.bf16.f32"),
    ("mma", "Ampere", "m16n8k8.f32.tf32.tf32.f32"),
    ("mma", "Ampere", "m16n8k4.f32.tf32.tf32.f32"),
    ("mma", "Ada Lovelace", "m16n8k8.f32.bf16.bf16.f32"),
    ("mma", "Hopper", "m16n8k16.f32.f16.f16.f32"),
    ("mma", "Hopper", "m16n8k16.f16.f16.f16.f16"),
    ("mma", "Hopper", "m16n8k16.f32.bf16.bf16.f32"),
    ("mma", "Hopper", "m16n8k8.f32.tf32.tf32.f32"),
    ("wgmma", "Hopper", "m64n8k16.f32.f16.f16"),
    ("wgmma", "Hopper", "m64n8k16.f16.f16.f16"),
    ("wgmma", "Hopper", "m64n8k16.f32.bf16.bf16"),
    ("wgmma", "Hopper", "m64n8k8.f32.tf32.tf32"),
    ("mma", "Blackwell", "m16n8k16.f32.bf16.bf16.f32"),
]
_OURS = {"f16": "fp16", "bf16": "bf16", "tf32": "tf32"}


def _instruction_spec(arch: str, shape_and_type: str) -> UnitSpec:
    shape, d_type, a_type = shape_and_type.split(".")[:3]
    k = int(shape.split("k")[1])
    return mmasim_spec(arch, _OURS[a_type], k, d_type == "f16")


def _values(rng, f: formats.Format, family: str, shape) -> np.ndarray:
    """float64 values of one adversarial family (rounded to the format by the caller)."""
    if family == "random-codes":
        return None
    x = rng.standard_normal(shape)
    if family == "spread":             # exponents across the format's range: over/underflow
        return x * np.exp2(rng.integers(f.emin - f.man_bits, f.emax, shape).astype(float))
    if family == "subnormal":          # far below FP32's range for bf16/tf32 products
        return x * np.exp2(rng.integers(-150, -100, shape).astype(float))
    if family == "fp16-tiny":          # fp16 subnormals and tiny normals
        return x * np.exp2(rng.integers(-26, -10, shape).astype(float))
    if family == "sparse-tiny":        # mostly zero products: e_zero decides the step's LSB
        return np.where(rng.random(shape) < 0.8, 0.0, x * 2.0 ** -20)
    return x * np.exp2(rng.integers(-4, 5, shape).astype(float))   # "normal"


def _family_operand(rng, f: formats.Format, family: str, shape) -> np.ndarray:
    vals = _values(rng, f, family, shape)
    if vals is None:           # every code; most Inf/NaN redrawn, so few dots are all special
        codes = rng.integers(0, 1 << f.bits, shape).astype(f.code_dtype)
        special = (f.exp(codes) == (1 << f.exp_bits) - 1) & (rng.random(shape) < 0.95)
        top_exp_bit = f.code_dtype.type(1 << (f.sign_shift - 1))
        return np.where(special, codes ^ top_exp_bit, codes).astype(f.code_dtype)
    return f.encode(vals, "rne", saturate=False)


def _mixed_in(rng, f: formats.Format, x: np.ndarray) -> None:
    """Inf, NaN, signed zeros, the largest values and subnormals mixed into ``x``."""
    pool = np.array([0, 1 << f.sign_shift, f.code_of_inf, f.code_of_nan, f.code_of_max,
                     f.code_of_max | (1 << f.sign_shift), 1, (1 << f.man_bits) - 1,
                     1 << f.man_bits], f.code_dtype)
    hit = rng.random(x.shape) < 0.03
    x[hit] = rng.choice(pool, int(hit.sum()))


def adversarial_set(fmt: str, c_format: str, seed: int, rows: int = 4,
                    k: int = 32) -> vectors.VectorSet:
    """One set holding every family of :data:`FAMILIES16`: ``rows`` rows of A and columns of
    B per family (stacked, so every family meets every other), and C of several kinds.

    Families: ``random-codes`` (every code, NaN and Inf included), value families across
    the range (``spread``, ``subnormal``, ``fp16-tiny``, ``sparse-tiny``), ``cancellation``
    (B's second half negates its first against equal A halves) and ``specials`` (Inf, NaN,
    zeros, the largest values and subnormals mixed in)."""
    f, cf = formats.get(fmt), formats.get(c_format)
    rng = np.random.default_rng([seed, sum(map(ord, fmt + c_format))])
    a_parts, b_parts = [], []
    for family in FAMILIES16:
        a = _family_operand(rng, f, family, (rows, k))
        b = _family_operand(rng, f, family, (k, rows))
        if family == "cancellation":
            a[:, k // 2:] = a[:, :k // 2]
            b[k // 2:] = b[:k // 2] ^ f.code_dtype.type(1 << f.sign_shift)
        if family == "specials":
            _mixed_in(rng, f, a)
            _mixed_in(rng, f, b)
        a_parts.append(a)
        b_parts.append(b)
    a, b = np.concatenate(a_parts), np.concatenate(b_parts, axis=1)
    m = n = rows * len(FAMILIES16)
    cvals = rng.standard_normal((m, n)) * np.exp2(rng.integers(-30, 20, (m, n)).astype(float))
    kind = rng.integers(0, 3, (m, n))          # 0: as drawn, 1: zero, 2: tiny
    cvals = np.where(kind == 1, 0.0, np.where(kind == 2, cvals * 2.0 ** -110, cvals))
    c = cf.encode(cvals, "rne", saturate=False)
    return vectors.VectorSet(a=a, b=b, a_format=fmt, b_format=fmt, c=c, c_format=c_format)


def reference_sample(vs: vectors.VectorSet, seed: int, per_family: int = 5,
                     cross: int = 16) -> np.ndarray:
    """Flat dot indices for the slow reference: ``per_family`` dots inside each family's own
    block and ``cross`` between families."""
    rng = np.random.default_rng(seed)
    rows = vs.m // len(FAMILIES16)
    picks = []
    for fam in range(len(FAMILIES16)):
        i = fam * rows + rng.integers(0, rows, per_family)
        j = fam * rows + rng.integers(0, rows, per_family)
        picks.append(i * vs.n + j)
    picks.append(rng.integers(0, vs.m * vs.n, cross))
    return np.unique(np.concatenate(picks))


FAMILIES16 = ("random-codes", "normal", "spread", "subnormal", "fp16-tiny", "sparse-tiny",
              "cancellation", "specials")


def _codes_equal(x: np.ndarray, y: np.ndarray) -> bool:
    return x.dtype == y.dtype and np.array_equal(x, y)


@pytest.mark.parametrize("kind, arch, shape_and_type", INSTRUCTIONS,
                         ids=[f"{a}-{s}" for _, a, s in INSTRUCTIONS])
def test_engines_equal_mmasim(kind, arch, shape_and_type):
    """Fast engine (kernel and numpy) == MMA-Sim on every dot of every family pair, and the
    reference engine == both on a sample of them."""
    pytest.importorskip("torch")
    pytest.importorskip("mmasim")
    import mmasim_adapter

    spec = _instruction_spec(arch, shape_and_type)
    vs = adversarial_set(spec.a_format, spec.d_format, len(shape_and_type))
    ours = fast.dot(spec, vs)
    assert _codes_equal(fast.dot(spec, vs, kernel=False), ours)
    theirs = mmasim_adapter.run_instruction(kind, arch, shape_and_type, vs)
    bad = np.argwhere(theirs != ours)
    assert _codes_equal(theirs, ours), (len(bad), bad[:4])
    dots = reference_sample(vs, len(arch))
    ref = reference.dot(spec, vs.take_dots(dots)).reshape(-1)
    assert _codes_equal(ref, ours.reshape(-1)[dots])


# -- generators ------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", SIXTEEN)
def test_generators_every_family(fmt):
    """Every family that needs no scales gives codes of the right dtype, the same for the same
    seed, and (for the value families) finite products a unit sums to finite results."""
    spec = mmasim_spec("Hopper", fmt, 16 if fmt != "tf32" else 8, False)
    for family in vectors.FAMILIES:
        if family == "nan-scale":
            with pytest.raises(VectorFileError, match="needs block scales"):
                vectors.generate(family, a_format=fmt)
            continue
        vs = vectors.generate(family, a_format=fmt, m=4, n=4, k=16, seed=3)
        assert vs.a.dtype == vs.b.dtype == DTYPES[fmt]
        assert vs.inputs_equal(vectors.generate(family, a_format=fmt, m=4, n=4, k=16, seed=3))
        d = fast.dot(spec, vs).view(np.float32)
        if family in ("normal", "llm", "cancellation", "c-dominant", "c-negligible", "zeros",
                      "subnormal", "one-large"):
            assert np.isfinite(d).all(), family
    with pytest.raises(VectorFileError, match="^Scales go with MX element formats only; "
                                              f"a_format is {fmt}"):
        vectors.generate("normal", a_format=fmt, scale_format="e8m0")
