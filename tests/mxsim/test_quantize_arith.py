"""The arithmetic element encoder (mxsim.quantize._kernel.encode_format and multiply_encode)
against the table it replaced: every 17-bit table key with several patterns of the bits below
it, every element shift on adversarial blocks, both roundings, every element format, MX's
specials (Inf/NaN give 0) and torchao's (Inf saturates, NaN as torchao's casts)."""

from __future__ import annotations

import numpy as np
import pytest

from mxsim import formats
from mxsim import quantize as q
from mxsim.quantize import _kernel
from mxsim.quantize import elements as qelements

pytestmark = pytest.mark.skipif(not _kernel.available(), reason="needs numba (the fast extra)")

LOW_BITS = (0, 1, 0x2345, 0x4000, 0x7FFF)


def adversarial(rng: np.random.Generator, rows: int) -> np.ndarray:
    """FP32 bit patterns: every exponent field (subnormals, Inf, NaN), mantissas at both ends
    and random, both signs."""
    field = rng.integers(0, 256, (rows, 32), dtype=np.uint32)
    man = rng.choice(np.array([0, 1, 2, 0x7FFF, 0x8000, 0x8001, 0x400000, 0x7FFFFF], np.uint32),
                     (rows, 32))
    man = np.where(rng.random((rows, 32)) < 0.5, man,
                   rng.integers(0, 1 << 23, (rows, 32), dtype=np.uint32))
    sign = rng.integers(0, 2, (rows, 32), dtype=np.uint32) << np.uint32(31)
    return (sign | (field << np.uint32(23)) | man).astype(np.uint32)


def every_key() -> np.ndarray:
    """Every key ``bits >> 15`` with each of LOW_BITS below it (the sticky bit both ways)."""
    keys = np.arange(1 << 17, dtype=np.uint32) << np.uint32(15)
    return np.concatenate([keys | np.uint32(lo) for lo in LOW_BITS]).reshape(-1, 32)


@pytest.mark.parametrize("rounding", ["rne", "rz"])
@pytest.mark.parametrize("fmt", q.ELEMENT_FORMATS)
def test_encode_format_every_key(fmt, rounding):
    b = every_key()
    want = qelements.lut(fmt, rounding, "zero").take(qelements.lut_keys(b.view(np.float32)))
    got = _kernel.encode_format(b, np.zeros(len(b), np.int64), formats.get(fmt), rounding)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("rounding", ["rne", "rz"])
@pytest.mark.parametrize("fmt", q.ELEMENT_FORMATS)
def test_encode_format_equals_the_table_on_every_shift(fmt, rounding):
    b = adversarial(np.random.default_rng(21), 256 * 8)
    k = np.repeat(np.arange(-127, 129, dtype=np.int64), 8)
    want = _kernel.encode(b, k, qelements.lut(fmt, rounding, "zero"))
    assert np.array_equal(_kernel.encode_format(b, k, formats.get(fmt), rounding), want)


@pytest.mark.parametrize("rounding", ["rne", "rz"])
@pytest.mark.parametrize("fmt", q.ELEMENT_FORMATS)
def test_multiply_encode_every_key(fmt, rounding):
    """x * r in FP32, then torchao's cast: r = 1 (NaN quietened by the multiply), and r values
    that make products overflow, underflow and round (0 * Inf and Inf * 0 give NaN)."""
    b = every_key()
    x = b.view(np.float32)
    table = qelements.lut(fmt, rounding, "torchao")
    for r in (1.0, 0.37, 2.0 ** 100, 2.0 ** -100, np.inf, 0.0):
        rr = np.full(len(b), r, np.float32)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            want = table.take(qelements.lut_keys(x * rr[:, None]))
        got = _kernel.multiply_encode(b, rr, formats.get(fmt), rounding)
        assert np.array_equal(got, want), r
