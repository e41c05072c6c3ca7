"""Probe suites in a design's own terms: the MX families for any element formats, block and C.

:func:`design_suite` is the suite ``mxsim fit --rtl`` drives through a design behind a port map.
It builds the MX families of :func:`mxsim.probe.mx_suite` (``pair-cancel``, ``c-gap``, ``tie``,
``one-large``, ``random``, ``overflow``, ``specials``) for whatever the design takes: A and B in
any MX element format (``e4m3 e5m2 e3m2 e2m3 e2m1 int8``, A and B may differ), E8M0 or UE4M3
scales in blocks of any power of two dividing k (one pair per instruction of 64 E2M1 lanes),
or no scales, and C in the design's own format (FP32, BF16 or FP16). Two families follow:

=============== ===========================================================================
family          the hypotheses it separates
=============== ===========================================================================
``zero-sign``   the sign of an exact zero (``zero_sign``): products that cancel exactly,
                products that are all +0 or -0, and products too small for the result
                format, against C = +0, -0, the smallest subnormal and a normal value. C = -0
                with cancelling products gives +0 under ``positive`` and ``ieee`` (nearest),
                -0 under ``c`` (C passes through)
``narrow-tie``  (16-bit C and D only) sums on the rounding boundaries of BF16 and FP16: 1
                plus 2**-8, 2**-9, 2**-11, 2**-12, with and without a sticky bit below
=============== ===========================================================================

NaN-producing dots sit in ``specials`` (NaN element codes where the format has them, scale NaN
codes, NaN C), so a fit sees the design's NaN code. The same arguments give the same codes.
"""

from __future__ import annotations

import numpy as np

from .. import formats, vectors
from ..errors import VectorFileError
from ..vectors import VectorSet
from . import COLS, MAX_K, MX_BUILDERS, MX_FAMILIES, ROWS, MxEncoding, mx_special_codes

__all__ = ["design_suite", "DESIGN_FAMILIES", "C_FORMATS"]

#: Every family a design suite may hold, in order (``narrow-tie`` with 16-bit C/D only).
DESIGN_FAMILIES = (*MX_FAMILIES, "zero-sign", "narrow-tie")
#: The formats of C (and of D) a design suite gives.
C_FORMATS = ("fp32", "bf16", "fp16")
#: Exponents of B's column factors 2**e_j (as the MX suites: -9 .. 6, repeated).
_COLUMN_EXPS = np.resize(np.arange(-9, 7), COLS)


class _Encoding(MxEncoding):
    """An MX suite's encoding with B in its own format, and optionally no scales (then every
    value is encoded as it is, saturating, and B's columns carry the factors 2**e_j within
    what B's format holds)."""

    def __init__(self, a_format: str, b_format: str, k: int, block: int | None,
                 scale_format: str | None):
        super().__init__(a_format, k, block or k, scale_format or "e8m0")
        self.b_elem = formats.get(b_format)
        self.scaled = scale_format is not None
        self.c_min = formats.get("fp32").min_subnormal     #: C's smallest subnormal

    def encode(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.scaled:
            return super().encode(values)
        codes = self.elem.encode(values, "rne", saturate=True).astype(np.uint8)
        return codes, np.full((values.shape[0], self.nb), 127, np.uint8)

    def column_exps(self) -> np.ndarray:
        """e_j of column j: the MX suites' -9 .. 6, or (no scales) the powers of two B holds."""
        if self.scaled:
            return _COLUMN_EXPS
        vals = np.abs(self.b_elem.decode(self.b_elem.finite_codes()))
        exps = np.unique(np.log2(vals[(vals > 0) & (np.log2(np.where(vals > 0, vals, 1)) % 1
                                                     == 0)]).astype(np.int64))
        return np.resize(exps, COLS)

    def columns(self, rng) -> tuple[np.ndarray, np.ndarray]:
        signs = np.where(np.arange(COLS) % 2, -1.0, 1.0)
        exps = self.column_exps()
        if not self.scaled:
            col = self.b_elem.encode(signs * np.exp2(exps.astype(float)))
            return (np.broadcast_to(col, (self.k, COLS)).astype(np.uint8),
                    np.full((self.nb, COLS), 127, np.uint8))
        b = np.broadcast_to(self.b_elem.encode(signs), (self.k, COLS)).astype(np.uint8)
        return b, np.broadcast_to(self.scale_codes(exps), (self.nb, COLS)).astype(np.uint8)


def design_suite(a_format: str, b_format: str | None = None, *, k: int, block: int | None = None,
                 scale_format: str | None = "e8m0", c_format: str = "fp32",
                 seed: int = 0) -> VectorSet:
    """The probe suite of a design that multiplies ``a_format`` x ``b_format`` (default: the
    same) in instructions of ``k``: one batch entry per family of :data:`DESIGN_FAMILIES`
    (``narrow-tie`` only for a 16-bit ``c_format``), each 64 x 64 dots of K = k.

    ``scale_format`` is ``e8m0``, ``ue4m3`` or None (no block scales); ``block`` any power of
    two dividing k (default: k, one scale pair per instruction). C is in ``c_format`` (fp32,
    bf16 or fp16; rounded to nearest even from the families' FP32 values, NaN codes keeping
    their sign and quiet bit). ``meta['families']`` names each batch entry's family. Raises
    VectorFileError (one line) for a bad argument.
    """
    b_format = b_format or a_format
    for name, fmt in (("A", a_format), ("B", b_format)):
        if fmt not in formats.ELEMENT_FORMATS:
            raise VectorFileError(f"{name}'s format of a design probe must be one of "
                                  f"{', '.join(formats.ELEMENT_FORMATS)}, not {fmt!r}")
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 4 <= k <= MAX_K \
            or k % 4:
        raise VectorFileError(f"K must be a multiple of 4 from 4 to {MAX_K}, not {k!r}")
    if scale_format not in (None, "e8m0", "ue4m3"):
        raise VectorFileError(f"Scale format of a design probe must be e8m0, ue4m3 or none, "
                              f"not {scale_format!r}")
    if scale_format is None:
        block = None
    else:
        block = k if block is None else block
        if not formats.is_scale_block(block) or k % block:
            raise VectorFileError(f"Block of a design probe must be a power of two dividing K "
                                  f"({k}), not {block!r}")
    if c_format not in C_FORMATS:
        raise VectorFileError(f"C's format of a design probe must be one of "
                              f"{', '.join(C_FORMATS)}, not {c_format!r}")
    k, seed = int(k), int(seed)
    mx = _Encoding(a_format, b_format, k, block, scale_format)
    mx.c_min = formats.get(c_format).min_subnormal
    rng = np.random.default_rng([seed, 11, k])
    families = [f for f in DESIGN_FAMILIES if f != "narrow-tie" or c_format != "fp32"]
    parts: dict[str, list[np.ndarray]] = {n: [] for n in ("a", "sa", "b", "sb", "c")}
    b, sb = mx.columns(rng)
    for family in families:
        if family in ("one-large", "random"):
            vs = vectors.generate("one-large" if family == "one-large" else "llm",
                                  a_format=a_format, b_format=b_format, m=ROWS, n=COLS, k=k,
                                  scale_format=scale_format, block=block, seed=seed)
            a, sa, fb, fsb, c = vs.a, vs.a_scale, vs.b, vs.b_scale, vs.c
            if family == "random" and mx.scaled:    # scales spread over 2**+-27
                sa = mx.scale_codes(rng.integers(-27, 28, sa.shape))
                fsb = mx.scale_codes(rng.integers(-27, 28, fsb.shape))
        else:
            values, c = _BUILDERS[family](mx, rng)
            (a, sa), fb, fsb = mx.encode(values), b, sb
            if family == "specials":
                a, sa = mx_special_codes(mx, rng, a, sa)
            elif family == "zero-sign":
                a = _signed_zeros(mx, a)
        for name, x in zip(parts, (a, sa, fb, fsb, _c_codes(c, c_format)), strict=True):
            parts[name].append(np.asarray(x))
    scales = {} if not mx.scaled else {
        "a_scale": np.stack(parts["sa"]).astype(np.uint8),
        "b_scale": np.stack(parts["sb"]).astype(np.uint8)}
    c_dtype = formats.get(c_format).code_dtype
    return VectorSet(a=np.stack(parts["a"]).astype(np.uint8),
                     b=np.stack(parts["b"]).astype(np.uint8), a_format=a_format,
                     b_format=b_format, scale_format=scale_format, block=block,
                     c=np.stack(parts["c"]).astype(c_dtype), c_format=c_format, **scales,
                     extra={"families": families, "probe": "design", "seed": seed})


def _c_codes(c: np.ndarray, c_format: str) -> np.ndarray:
    """C of a family (float values, or FP32 codes as uint32) as codes of ``c_format``: values
    rounded to nearest even (finite ones saturating, so FLT_MAX stays the largest value),
    codes converted as values are, except NaN codes, which keep their sign and quiet bit
    (and a non-zero payload)."""
    fp32 = formats.get("fp32")
    codes = np.asarray(c, np.float32).view(np.uint32) if c.dtype != np.uint32 else c
    if c_format == "fp32":
        return codes
    fmt = formats.get(c_format)
    values = fp32.decode(codes)
    finite = np.isfinite(values)
    out = fmt.encode(np.where(finite, values, 0.0), "rne", saturate=True)
    inf = np.isinf(values)
    out[inf] = fmt.code_of_inf | (np.signbit(values[inf]).astype(fmt.code_dtype)
                                  << fmt.sign_shift)
    nan = np.isnan(values)
    if nan.any():
        sign = (codes[nan] >> 31).astype(fmt.code_dtype) << fmt.sign_shift
        frac = (codes[nan] & 0x7FFFFF) >> (23 - fmt.man_bits)
        frac = np.where(frac == 0, 1, frac).astype(fmt.code_dtype)
        out[nan] = sign | np.asarray((fmt.code_of_inf | frac), fmt.code_dtype)
    return out.astype(fmt.code_dtype)


def _zero_sign(mx: _Encoding, rng) -> tuple[np.ndarray, np.ndarray]:
    """Rows 0, 1 mod 4: +1 and -1 that cancel exactly (in one block; rows 1 mod 4 in two,
    where there are two); rows 2 mod 4: every product a zero (signs set by
    :func:`_signed_zeros`); rows 3 mod 4: one product of 2**-(120..135), below BF16's smallest
    subnormal times some columns' factors. C by column (mod 8): +0, -0, -0, +0, +-C's smallest
    subnormal, +-1.5 * 2**-e (B's columns alternate in sign, so each zero C meets products of
    either sign)."""
    rows = np.zeros((ROWS, mx.k))
    for r in range(ROWS):
        i = int(rng.integers(mx.k))
        if r % 4 == 0 or (r % 4 == 1 and mx.nb == 1):
            start = i - i % mx.block
            j = start + (i - start + 1 + int(rng.integers(max(mx.block - 1, 1)))) % mx.block
            j = j if j != i else (i + 1) % mx.k
            rows[r, i], rows[r, j] = 1.0, -1.0
        elif r % 4 == 1:
            rows[r, i], rows[r, mx.far(i)] = 1.0, -1.0
        elif r % 4 == 3:
            rows[r, i] = (-1.0 if r % 8 == 7 else 1.0) * 2.0 ** -(120 + r % 16)
    col = np.arange(COLS) % 8
    sign = np.where(np.arange(ROWS)[:, None] % 2, -1.0, 1.0)
    c = np.zeros((ROWS, COLS))
    c[:, (col == 1) | (col == 2)] = -0.0
    c[:, col == 4] = sign * mx.c_min
    c[:, col >= 5] = (sign * 1.5 * np.exp2(-(np.arange(COLS) % 20.0)))[:, col >= 5]
    return rows, c


def _signed_zeros(mx: MxEncoding, a: np.ndarray) -> np.ndarray:
    """Rows 2 mod 8 of the zero-sign family: every element +0; rows 6 mod 8: every element -0
    (where A's format has a -0; INT8 has one zero)."""
    a = a.copy()
    if mx.elem.kind == "float":
        a[6::8] = np.uint8(1 << mx.elem.sign_shift)
    return a


def _narrow_tie(mx: _Encoding, rng) -> tuple[np.ndarray, np.ndarray]:
    """C = 1 (times the column's factor 2**e_j) plus a product 2**-bits, bits on BF16's and
    FP16's rounding boundaries (8, 9: BF16's half ulp of 1 and below; 11, 12: FP16's), of
    either sign; half the rows (each bits and sign alike) with a sticky product of that sign,
    2**-(bits + 17) (in
    another block, or at the bottom of the element's reach): below FP32's ulp, so an FP32
    accumulator rounds it away before a 16-bit result rounds the tie (double rounding)."""
    rows = np.zeros((ROWS, mx.k))
    exps = mx.column_exps()
    col = np.where(np.arange(COLS) % 2, -1.0, 1.0) * np.exp2(exps.astype(float))
    for r in range(ROWS):
        bits = (8, 9, 11, 12, 7, 10)[r % 6]
        sign = -1.0 if r // 6 % 2 else 1.0
        rows[r, 0] = sign * 2.0 ** -bits
        if r // 12 % 2:
            far = mx.nb > 1
            rows[r, mx.far(0) if far else 1] = sign * 2.0 ** -(bits + (17 if far else
                                                                       min(17, mx.reach)))
    return rows, np.broadcast_to(col, (ROWS, COLS)).copy()


_BUILDERS = {**MX_BUILDERS, "zero-sign": _zero_sign, "narrow-tie": _narrow_tie}
