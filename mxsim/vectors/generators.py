"""Seeded generators of vector sets: random and directed families.

Every generator is deterministic: the same arguments and seed give the same codes, on every
platform (numpy's PCG64 seeded with ``[seed, family index]``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import formats
from ..errors import VectorFileError
from ._ladder import ladder_operands
from .schema import (
    ACC_FORMATS,
    ELEMENT_FORMATS,
    OPERAND_FORMATS,
    SCALE_FORMATS,
    VectorSet,
    check_size,
)

__all__ = ["RANDOM_FAMILIES", "DIRECTED_FAMILIES", "FAMILIES", "EXTRA_FAMILIES", "generate",
           "generate_suite"]

RANDOM_FAMILIES = ("uniform", "normal", "llm")
DIRECTED_FAMILIES = ("zeros", "max", "subnormal", "specials", "nan-scale", "scale-extremes",
                     "cancellation", "one-large", "c-dominant", "c-negligible")
FAMILIES = RANDOM_FAMILIES + DIRECTED_FAMILIES
#: Families asked for by name only, outside the default suite: ``e-zero`` (ladders whose
#: outputs depend on the step's LSB when zero terms lead; see ``_ladder``).
EXTRA_FAMILIES = ("e-zero",)


def _typical(fmt: formats.Format) -> float:
    """The size of a typical random element: max/8 for the MX element formats; 1 for fp16,
    bf16 and tf32, whose max/8 would overflow every FP32 product sum."""
    return fmt.max / 8 if fmt.name in ELEMENT_FORMATS else 1.0


def _round_to_format(fmt: formats.Format, x: npt.NDArray[np.float64]) -> npt.NDArray:
    return fmt.encode(x, "rne", saturate=True).astype(fmt.code_dtype)


def _finite_codes(fmt: formats.Format) -> npt.NDArray:
    return fmt.finite_codes().astype(fmt.code_dtype)


def _choose_finite(rng: np.random.Generator, fmt: formats.Format,
                   shape: tuple[int, ...]) -> npt.NDArray:
    """Codes drawn uniformly from every finite code (TF32: from every code, the Inf/NaN
    binade folded onto the one below it)."""
    if fmt.bits <= 16:
        return rng.choice(_finite_codes(fmt), size=shape)
    codes = rng.integers(0, 1 << fmt.bits, size=shape).astype(fmt.code_dtype)
    top = fmt.exp(codes) == (1 << fmt.exp_bits) - 1
    return np.where(top, codes ^ fmt.code_dtype.type(1 << fmt.man_bits), codes)


def _choose_subnormal(rng: np.random.Generator, fmt: formats.Format,
                      shape: tuple[int, ...]) -> npt.NDArray:
    if fmt.bits <= 16:
        return rng.choice(_subnormal_codes(fmt), size=shape)
    man = rng.integers(1, 1 << fmt.man_bits, size=shape)
    sign = rng.integers(0, 2, size=shape) << fmt.sign_shift
    return (sign | man).astype(fmt.code_dtype)


def _subnormal_codes(fmt: formats.Format) -> npt.NDArray:
    codes = _finite_codes(fmt)
    cls = fmt.classify(codes)
    sub = codes[cls == formats.Class.SUBNORMAL]
    if fmt.kind == "int":      # MXINT8 has no subnormals: its smallest steps stand in
        sub = codes[np.abs(fmt.decode(codes)) <= 4 / 64]
        sub = sub[sub != 0]
    return sub


def _operand(rng: np.random.Generator, fmt: formats.Format, family: str,
             shape: tuple[int, ...]) -> npt.NDArray:
    """Element codes of one operand for a family (C and scales are drawn separately)."""
    if family == "uniform":
        return _choose_finite(rng, fmt, shape)
    if family == "normal":
        return _round_to_format(fmt, rng.standard_normal(shape) * _typical(fmt))
    if family == "llm":
        # Heavy-tailed activations: Student-t(3) bulk, a few outlier channels 30x larger.
        x = rng.standard_t(3, size=shape)
        channels = rng.random(shape[-1]) < 0.03
        x = np.where(channels, x * 30, x) * (_typical(fmt) / 25)
        return _round_to_format(fmt, x)
    if family == "zeros":
        zero = _round_to_format(fmt, np.array([0.0, -0.0]))
        return rng.choice(np.unique(zero), size=shape)
    if family == "max":
        mx = np.array([fmt.code_of_max, _round_to_format(fmt, np.array(-fmt.max))[()]],
                      fmt.code_dtype)
        return rng.choice(mx, size=shape)
    if family == "subnormal":
        return _choose_subnormal(rng, fmt, shape)
    if family == "specials":
        # fp16/bf16/tf32: NaN/Inf among normal values (their uniform codes overflow FP32).
        codes = (_choose_finite(rng, fmt, shape) if fmt.name in ELEMENT_FORMATS else
                 _round_to_format(fmt, rng.standard_normal(shape) * _typical(fmt)))
        special = []
        if fmt.has_nan:
            special += [fmt.code_of_nan, fmt.code_of_nan | (1 << fmt.sign_shift)]
        if fmt.has_inf:
            special += [fmt.code_of_inf, fmt.code_of_inf | (1 << fmt.sign_shift)]
        if special:
            hit = rng.random(shape) < 0.02
            codes = np.where(hit, rng.choice(np.array(special, fmt.code_dtype), size=shape),
                             codes)
        return codes.astype(fmt.code_dtype)
    if family in ("nan-scale", "scale-extremes", "c-dominant", "c-negligible", "cancellation",
                  "one-large"):
        return _round_to_format(fmt, rng.standard_normal(shape) * _typical(fmt))
    raise AssertionError(family)


def _c_values(rng: np.random.Generator, family: str, shape: tuple[int, ...],
              typical: float) -> npt.NDArray[np.float64]:
    c = rng.standard_normal(shape) * typical
    if family == "c-dominant":
        c = c * 2.0 ** 30
    elif family == "c-negligible":
        c = c * 2.0 ** -40
    elif family == "zeros":
        c = rng.choice(np.array([0.0, -0.0, 1.0, -1.0]), size=shape)
    elif family == "e-zero":
        c = np.zeros(shape)
    elif family == "specials":
        pick = rng.random(shape)
        c = np.where(pick < 0.03, np.nan, c)
        c = np.where((pick >= 0.03) & (pick < 0.06), np.inf, c)
        c = np.where((pick >= 0.06) & (pick < 0.09), -np.inf, c)
    elif family == "subnormal":
        c = np.ldexp(rng.integers(-(1 << 22), 1 << 22, size=shape).astype(np.float64), -149)
    return c


def _scales(rng: np.random.Generator, family: str, scale_format: str, block: int | None,
            batch: tuple[int, ...], m: int, n: int, k: int, granularity: str):
    """(a_scale, b_scale) for a family, in the dtype and shape the schema asks."""
    if scale_format in ("e8m0", "ue4m3") and family == "e-zero":
        # Scales of 1 (E8M0 0x7F, UE4M3 0x38) keep the ladders where they are.
        one = np.uint8(127 if scale_format == "e8m0" else 0x38)
        return (np.full(batch + (m, k // block), one), np.full(batch + (k // block, n), one))
    if scale_format in ("e8m0", "ue4m3"):
        sa_shape, sb_shape = batch + (m, k // block), batch + (k // block, n)
        if scale_format == "e8m0":
            draw = lambda shape: (127 + rng.integers(-8, 9, size=shape)).astype(np.uint8)  # noqa: E731
            extremes = np.array([0x00, 0x01, 0x7F, 0xFD, 0xFE], np.uint8)
            nan = 0xFF
        else:
            f = formats.get("ue4m3")
            positive = f.finite_codes()[1:].astype(np.uint8)     # UE4M3 > 0
            normal = positive[f.classify(positive) == formats.Class.NORMAL]
            draw = lambda shape: rng.choice(normal[(normal >= 0x30) & (normal <= 0x48)],  # noqa: E731
                                            size=shape)
            extremes = np.array([0x00, 0x01, 0x08, 0x7E], np.uint8)
            nan = 0x7F
        sa, sb = draw(sa_shape), draw(sb_shape)
        if family == "scale-extremes":
            sa = rng.choice(extremes, size=sa_shape)
            sb = rng.choice(extremes, size=sb_shape)
        elif family == "nan-scale":
            sa = np.where(rng.random(sa_shape) < 0.1, np.uint8(nan), sa).astype(np.uint8)
            sb = np.where(rng.random(sb_shape) < 0.1, np.uint8(nan), sb).astype(np.uint8)
        return sa, sb
    # FP32 scales.
    if granularity == "tensor":
        sa_shape, sb_shape = (), ()
    elif granularity == "row":
        sa_shape, sb_shape = batch + (m, 1), batch + (1, n)
    else:
        sa_shape, sb_shape = batch + (m, k // 128), batch + (k // 128, n // 128)

    def draw(shape):
        v = np.exp2(rng.uniform(-6, 6, size=shape)) * rng.uniform(1, 2, size=shape)
        if family == "e-zero":
            v = np.ones(shape)
        if family == "scale-extremes":
            v = np.exp2(rng.choice(np.array([-126.0, -60.0, 0.0, 60.0, 126.0]), size=shape))
        elif family == "nan-scale":
            v = np.where(rng.random(shape) < 0.1, np.nan, v)
        return np.asarray(v, np.float32)
    return draw(sa_shape), draw(sb_shape)


def _set_bytes(entries: int, m: int, n: int, k: int, with_c: bool, c_format: str,
               a_bytes: int = 1, b_bytes: int = 1) -> int:
    """Bytes of A, B and C of a set (scales are at most A's and B's)."""
    return entries * (m * k * a_bytes + k * n * b_bytes
                      + (m * n * (4 if c_format == "fp32" else 2) if with_c else 0))


def generate(family: str, *, a_format: str = "e4m3", b_format: str | None = None,
             m: int = 16, n: int = 8, k: int = 32, batch: tuple[int, ...] = (),
             scale_format: str | None = None, block: int | None = None,
             scale_granularity: str = "block", with_c: bool = True,
             c_format: str = "fp32", tensor_scale: float | None = None,
             seed: int = 0, allow_large: bool = False) -> VectorSet:
    """A seeded vector set of one generator family.

    Random families: ``uniform`` (uniform over every finite code), ``normal`` (N(0, t^2)
    rounded to the format, t = max/8 for MX element formats and 1 for fp16/bf16/tf32), ``llm``
    (Student-t(3) activations, scale t/25, with 3% outlier channels 30x larger). A and B are
    codes in their format's code dtype (uint8; uint16 for fp16/bf16; uint32 for tf32).
    Directed families: ``zeros``, ``max`` (±max finite), ``subnormal`` (subnormal codes;
    MXINT8's smallest steps), ``specials`` (2% NaN/Inf in A and B where the format has
    them, NaN/±Inf in C), ``nan-scale`` (10% NaN scales), ``scale-extremes`` (E8M0
    0x00/0x01/0x7F/0xFD/0xFE, UE4M3 0/min/max, FP32 2^±126), ``cancellation`` (B's second
    half of K negates its first half against the same A values), ``one-large`` (one max-size
    term among tiny ones), ``c-dominant`` and ``c-negligible`` (C 2^30 times larger or 2^40
    times smaller than a typical dot). The same arguments and seed give the same codes.
    ``scale_granularity`` picks FP32 scale shapes: ``tensor``, ``row`` or ``block`` (128).
    ``tensor_scale`` (NVFP4, UE4M3 scales only) is stored as the float32 nearest to it.
    ``c_format`` (fp32, fp16 or bf16) is C's format: its values are rounded to it (RNE).
    A set over the size limits (:func:`check_size`) is refused unless ``allow_large``.
    Raises VectorFileError, one line, for options that break a rule.
    """
    if family not in FAMILIES + EXTRA_FAMILIES:
        raise VectorFileError(f"Family must be one of {', '.join(FAMILIES + EXTRA_FAMILIES)}, "
                              f"not {family!r}")
    fa, fb = formats.get(a_format), formats.get(b_format or a_format)
    for name, f in (("a_format", fa), ("b_format", fb)):
        if f.name not in OPERAND_FORMATS:
            raise VectorFileError(f"{name} must be one of {', '.join(OPERAND_FORMATS)}, "
                                  f"not {f.name!r}")
        if scale_format is not None and f.name not in ELEMENT_FORMATS:
            raise VectorFileError(f"Scales go with MX element formats only; {name} is "
                                  f"{f.name}, so leave the scale format out")
    _check_shape(m, n, k, batch)
    entries = math.prod(batch)
    check_size(_set_bytes(entries, m, n, k, with_c, c_format, fa.code_dtype.itemsize,
                          fb.code_dtype.itemsize), entries * m * n * k, allow_large)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise VectorFileError(f"Seed must be a non-negative integer, not {seed!r}")
    block = _block(family, scale_format, block, scale_granularity)
    ts = _tensor_scale(tensor_scale)
    batch = tuple(batch)
    rng = np.random.default_rng([seed, (FAMILIES + EXTRA_FAMILIES).index(family)])
    if family == "e-zero":
        a, b = ladder_operands(rng, fa, fb, c_format if with_c else "fp32", batch, m, n, k)
    else:
        a, b = _operands(rng, family, fa, fb, batch, m, n, k)
    a_scale = b_scale = None
    if scale_format is not None:
        _check_scale_fit(scale_format, block, n, k)
        a_scale, b_scale = _scales(rng, family, scale_format, block, batch, m, n, k,
                                   scale_granularity)
    if c_format not in ACC_FORMATS:
        raise VectorFileError(f"C format must be one of {', '.join(ACC_FORMATS)}, not "
                              f"{c_format!r}")
    c = None
    if with_c:
        typical = float(np.sqrt(k)) * _typical(fa) * _typical(fb)
        cv = _c_values(rng, family, batch + (m, n), typical)
        c = cv.astype(np.float32).view(np.uint32)
        if c_format != "fp32":
            c = formats.get(c_format).encode(c.view(np.float32), "rne", saturate=False)
    return VectorSet(a=np.ascontiguousarray(a, fa.code_dtype),
                     b=np.ascontiguousarray(b, fb.code_dtype),
                     a_format=fa.name, b_format=fb.name, c=c, a_scale=a_scale, b_scale=b_scale,
                     tensor_scale=ts, scale_format=scale_format, block=block,
                     c_format=c_format, extra={"family": family, "seed": int(seed)})


def _tensor_scale(value: float | None) -> np.ndarray | None:
    """The NVFP4 tensor scale as the float32 nearest to ``value``, which must be finite there."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise VectorFileError(f"Tensor scale must be a number, not {value!r}")
    with np.errstate(over="ignore"):             # beyond FP32's range: refused just below
        ts = np.array(value, np.float32)
    if not np.isfinite(ts):
        raise VectorFileError(f"Tensor scale must be finite in FP32 (at most "
                              f"{float(np.finfo(np.float32).max):.8g} in magnitude), not "
                              f"{value!r}")
    return ts


def _check_shape(m: int, n: int, k: int, batch: tuple[int, ...]) -> None:
    for v in (m, n, k, *batch):
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise VectorFileError(f"M, N, K and batch must be integers, not {v!r}")
    if min(m, n, k) < 1:
        raise VectorFileError(f"M, N and K must be at least 1, not {m}, {n}, {k}")
    if min(batch, default=1) < 1:
        raise VectorFileError(f"Batch dimensions must be at least 1, not {tuple(batch)}")


def _block(family: str, scale_format: str | None, block: int | None,
           granularity: str) -> int | None:
    """The block of the scales: implied by fp32 scales' granularity, 16 (UE4M3) or 32 (E8M0)
    by default, any power of two up to 65536 that divides K when given."""
    if family == "nan-scale" and scale_format is None:
        raise VectorFileError("Family 'nan-scale' needs block scales; pass a scale format")
    if scale_format == "fp32":
        if granularity not in ("tensor", "row", "block"):
            raise VectorFileError(f"Scale granularity must be tensor, row or block, not "
                                  f"{granularity!r}")
        implied = 128 if granularity == "block" else None
        if block not in (None, implied):
            kind = {"tensor": "per-tensor", "row": "row-wise", "block": "block-wise"}
            raise VectorFileError(f"Block must be {implied or 'None'} for "
                                  f"{kind[granularity]} fp32 scales, not {block!r}")
        block = implied
    elif scale_format is not None and block is None:
        block = 16 if scale_format == "ue4m3" else 32
    if scale_format in ("e8m0", "ue4m3") and not formats.is_scale_block(block):
        raise VectorFileError(f"Block must be a power of two from 1 to "
                              f"{formats.MAX_SCALE_BLOCK} for {scale_format} scales, "
                              f"not {block!r}")
    return block


def _check_scale_fit(scale_format: str, block: int | None, n: int, k: int) -> None:
    if scale_format not in SCALE_FORMATS:
        raise VectorFileError(f"Scale format must be one of {', '.join(SCALE_FORMATS)}, "
                              f"not {scale_format!r}")
    if scale_format != "fp32" and k % block:
        raise VectorFileError(f"K ({k}) must be a multiple of the block ({block})")
    if scale_format == "fp32" and block == 128 and (k % 128 or n % 128):
        raise VectorFileError(f"Block-wise fp32 scales need K and N multiples of 128, "
                              f"not K={k}, N={n}")


def _operands(rng: np.random.Generator, family: str, fa: formats.Format, fb: formats.Format,
              batch: tuple[int, ...], m: int, n: int, k: int,
              ) -> tuple[npt.NDArray, npt.NDArray]:
    """Codes of A and B for a family, with the directed constructions of ``cancellation`` and
    ``one-large`` applied."""
    shape_a, shape_b = batch + (m, k), batch + (k, n)
    a = _operand(rng, fa, family, shape_a)
    b = _operand(rng, fb, family, shape_b)
    if family == "cancellation":
        if k % 2:
            raise VectorFileError("Family 'cancellation' needs an even K")
        h = k // 2
        a = a.copy()
        b = b.copy()
        a[..., h:] = a[..., :h]
        neg_b = fb.encode(-fb.decode(b[..., :h, :]), "rne").astype(fb.code_dtype)
        b[..., h:, :] = neg_b
        # A few terms survive so the exact result is small but not always zero.
        keep = rng.random(shape_b) < 0.05
        b = np.where(keep, _operand(rng, fb, "normal", shape_b), b).astype(fb.code_dtype)
    elif family == "one-large":
        a, b = _one_large(rng, fa, fb, batch, m, n, k)
    return a, b


def _one_large(rng: np.random.Generator, fa: formats.Format, fb: formats.Format,
               batch: tuple[int, ...], m: int, n: int, k: int,
               ) -> tuple[npt.NDArray, npt.NDArray]:
    """Tiny terms with one large product per dot."""
    shape_a, shape_b = batch + (m, k), batch + (k, n)

    # Tiny terms: about 4 smallest steps, but never above max/16, so that narrow formats
    # (E2M1 spans only 0.5..6) still have one term that stands out.
    def tiny(f: formats.Format, shape: tuple[int, ...]) -> npt.NDArray:
        x = rng.standard_normal(shape) * f.min_subnormal * 4
        return f.encode(np.clip(x, -f.max / 16, f.max / 16), "rne")

    tiny_a, tiny_b = tiny(fa, shape_a), tiny(fb, shape_b)
    a, b = tiny_a.astype(fa.code_dtype), tiny_b.astype(fb.code_dtype)
    idx = rng.integers(0, k, size=batch + (m,))
    big_a = _round_to_format(fa, np.full(shape_a[:-1], fa.max * 0.75))
    np.put_along_axis(a, idx[..., None], big_a[..., None], axis=-1)
    idx_b = rng.integers(0, k, size=batch + (n,))
    big_b = _round_to_format(fb, np.full(batch + (n,), -fb.max * 0.75))
    np.put_along_axis(b, idx_b[..., None, :], big_b[..., None, :], axis=-2)
    return a, b


def generate_suite(families: tuple[str, ...] | list[str] = FAMILIES, *, count: int = 1,
                   seed: int = 0, skip_inapplicable: bool = True, allow_large: bool = False,
                   **kwargs: Any) -> VectorSet:
    """Several families in one set: batch entry ``i`` is family ``families[i // count]``.

    With ``skip_inapplicable``, families that cannot apply to the options are left out
    (``nan-scale`` without a scale format, ``cancellation`` with an odd K); without it they
    raise, as :func:`generate` does. ``meta['families']`` lists the family of every batch entry.
    The whole set must be within the size limits unless ``allow_large``.
    """
    kwargs.pop("batch", None)
    if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 1:
        raise VectorFileError(f"Count must be a positive integer, not {count!r}")
    if skip_inapplicable:
        if kwargs.get("scale_format") is None:
            families = [f for f in families if f != "nan-scale"]
        if kwargs.get("k", 32) % 2:
            families = [f for f in families if f != "cancellation"]
    if not families:
        raise VectorFileError("No generator family applies to these options")
    m, n, k = kwargs.get("m", 16), kwargs.get("n", 8), kwargs.get("k", 32)
    if all(isinstance(v, int | np.integer) and v >= 1 for v in (m, n, k)):
        entries = count * len(families)
        a_name = kwargs.get("a_format", "e4m3")
        sizes = [formats.get(x).code_dtype.itemsize if x in OPERAND_FORMATS else 1
                 for x in (a_name, kwargs.get("b_format") or a_name)]
        check_size(_set_bytes(entries, m, n, k, kwargs.get("with_c", True),
                              kwargs.get("c_format", "fp32"), *sizes), entries * m * n * k,
                   allow_large)
    parts = [generate(f, batch=(count,), seed=seed, allow_large=True, **kwargs)
             for f in families]
    first = parts[0]

    def cat(name: str):
        arrs = [getattr(p, name) for p in parts]
        if arrs[0] is None or arrs[0].ndim == 0:
            return arrs[0]     # per-tensor scales and tensor_scale: one value for the set
        return np.concatenate(arrs, axis=0)

    tensor_scale_like = first.a_scale is not None and first.a_scale.ndim == 0
    if tensor_scale_like:
        raise VectorFileError("Per-tensor fp32 scales cannot be mixed across families; "
                              "generate one family at a time")
    return first.replace(a=cat("a"), b=cat("b"), c=cat("c"), a_scale=cat("a_scale"),
                         b_scale=cat("b_scale"),
                         extra={"families": [f for f in families for _ in range(count)],
                                "seed": int(seed)})
