"""FP16, BF16 and TF32 operands end to end: formats, vector sets, both engines, MMA-Sim."""

from __future__ import annotations

import numpy as np
import pytest

from mxsim import formats, vectors
from mxsim.engine import fast, reference
from mxsim.errors import VectorFileError
from mxsim.formats import Rounding
from mxsim.probe.fit import fit
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


def reference_sample(vs: vectors.VectorSet, seed: int, per_family: int = 3,
                     cross: int = 8) -> np.ndarray:
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
    ladders = vectors.generate("e-zero", a_format=spec.a_format, m=16, n=4, k=32,
                               c_format=spec.d_format, seed=1)
    ours = fast.dot(spec, ladders)
    assert _codes_equal(mmasim_adapter.run_instruction(kind, arch, shape_and_type, ladders), ours)
    assert _codes_equal(reference.dot(spec, ladders.subset(rows=slice(0, 4))), ours[:4])


VARIANTS = [
    dict(align="rne", product="normalized"),
    dict(align="rz-jam", c_mode="after", c_rounding="rz"),
    dict(align="rd", acc_format="e8m13", zero_sign="ieee", e_zero=-140),
    dict(specials="none", overflow="saturate", frac_bits=23),
    dict(promote_every=2, acc_rounding="rne", nan_code=0x7FC00000),
]


@pytest.mark.parametrize("fmt", SIXTEEN)
def test_engines_equal_on_spec_variants(fmt):
    """Alignment roundings, normalised products, C after, a narrow accumulator, IEEE zero
    signs, no specials, promotion: reference == fast (kernel and numpy) on 16-bit operands."""
    base = mmasim_spec("Hopper", fmt, 8, False)
    vs = adversarial_set(fmt, "fp32", 7, rows=2)
    dots = reference_sample(vs, 7, per_family=2, cross=4)
    for changes in VARIANTS:
        spec = base.replace(**changes)
        ours = fast.dot(spec, vs)
        assert _codes_equal(fast.dot(spec, vs, kernel=False), ours), changes
        ref = reference.dot(spec, vs.take_dots(dots)).reshape(-1)
        assert _codes_equal(ref, ours.reshape(-1)[dots]), changes


@pytest.mark.parametrize("fmt", SIXTEEN)
def test_exact_unit_engines_agree(fmt):
    """The exact unit (one rounding of the exact sum) on 16-bit operands: fast == reference."""
    vs = adversarial_set(fmt, "fp32", 4, rows=2)
    assert _codes_equal(fast.matmul_exact(vs), reference.matmul_exact(vs))


def test_matmul_takes_16_bit_codes(tmp_path):
    """mxsim.matmul keeps fp16/bf16/tf32 codes in their dtype (not cut to uint8)."""
    import mxsim

    spec = mmasim_spec("Hopper", "tf32", 8, False)
    (tmp_path / "u.toml").write_text(spec.dumps())
    tf32 = formats.get("tf32")
    a, b = tf32.encode(np.full((2, 8), 1.5)), tf32.encode(np.full((8, 2), 3.0))
    d = mxsim.matmul(a, b, a_format="tf32", unit=str(tmp_path / "u.toml"))
    assert np.array_equal(d.view(np.float32), np.full((2, 2), 36.0, np.float32))


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


# -- the fitter ------------------------------------------------------------------------------

@pytest.mark.parametrize("arch, fmt, k, f16", [("Ampere", "bf16", 16, False),
                                               ("Ampere", "fp16", 16, True)])
def test_fit_recovers_a_16_bit_unit(arch, fmt, k, f16):
    """Outputs of an MMA-Sim-parameter spec on bf16/fp16 operands, with the e-zero ladders: the
    fit reproduces every one. FP32 out: it finds F, the steps and e_zero; FP16 out: its
    ladders show only the step's LSB when zeros lead, 2**(e_zero - F), which it finds."""
    spec = mmasim_spec(arch, fmt, k, f16)
    vs = vectors.generate_suite(["normal", "cancellation", "e-zero"], a_format=fmt, m=32, n=8,
                                k=32, c_format=spec.d_format, seed=5)
    observed = vs.with_result(fast.dot(spec, vs), d_format=spec.d_format, producer="test")
    found = fit(observed, k=k)
    assert found.equal == found.total == observed.num_dots
    assert np.array_equal(fast.dot(found.spec, observed), observed.d)
    assert found.spec.upcast is None and found.spec.acc_rounding is spec.acc_rounding
    if f16:
        assert found.spec.e_zero - found.spec.frac_bits == spec.e_zero - spec.frac_bits
    else:
        assert (found.spec.frac_bits, found.spec.schedule, found.spec.e_zero) == (
            spec.frac_bits, spec.schedule, spec.e_zero)
        assert "e_zero" not in found.unseparated


def test_e_zero_ladders_separate_e_zero():
    """The e-zero family: each e_zero within 3 of MMA-Sim's gives other outputs (bf16 and tf32
    to FP32, fp16 to FP16), and MMA-Sim computes what the engines do."""
    pytest.importorskip("mmasim")
    import mmasim_adapter

    for kind, arch, shape_and_type in (("mma", "Ampere", "m16n8k16.f32.bf16.bf16.f32"),
                                       ("wgmma", "Hopper", "m64n8k8.f32.tf32.tf32"),
                                       ("mma", "Volta", "m8n8k4.f16.f16.f16.f16")):
        spec = _instruction_spec(arch, shape_and_type)
        vs = vectors.generate("e-zero", a_format=spec.a_format, m=64, n=8, k=32,
                              c_format=spec.d_format, seed=2)
        d = fast.dot(spec, vs)
        assert _codes_equal(mmasim_adapter.run_instruction(kind, arch, shape_and_type, vs), d)
        for delta in (-3, -2, -1, 1, 2, 3):
            assert not _codes_equal(fast.dot(spec.replace(e_zero=spec.e_zero + delta), vs), d)


# -- the RTL refuses, the model runs ---------------------------------------------------------

@pytest.mark.parametrize("verb, fmt", [("rtl", "fp16"), ("verify", "tf32"), ("rtl", "bf16")])
def test_rtl_refuses_16_bit_operands_in_one_line(tmp_path, capsys, verb, fmt):
    from mxsim.cli import main

    spec_file = tmp_path / "u.toml"
    spec_file.write_text(mmasim_spec("Hopper", fmt, 16 if fmt != "tf32" else 8, False).dumps())
    args = [verb, "--unit", str(spec_file), "--a-format", fmt]
    if verb == "rtl":
        args += ["-o", str(tmp_path / "u.v")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"mxsim: error: Unit 'hopper-{fmt}-f32' cannot be built as RTL: "
                          f"a_format '{fmt}' is not decoded in RTL: the RTL generator builds "
                          f"MX element formats only (e4m3, ")
    assert f"{fmt} operands run in the model (`mxsim run`)" in err
    assert not (tmp_path / "u.v").exists()
    # ... and the model takes them
    vs_path, out = tmp_path / "in.npz", tmp_path / "out.npz"
    vectors.save(vectors.generate("normal", a_format=fmt, m=2, n=2, k=16), vs_path)
    assert main(["run", str(vs_path), "--unit", str(spec_file), "-o", str(out)]) == 0
    assert vectors.load(out).d.shape == (2, 2)
