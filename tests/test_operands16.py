"""FP16, BF16 and TF32 operands end to end: formats, vector sets, both engines, MMA-Sim."""

from __future__ import annotations

import numpy as np
import pytest

from mxsim import formats, vectors
from mxsim.errors import VectorFileError

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
