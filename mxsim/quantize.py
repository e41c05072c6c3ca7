"""Block quantisation of float arrays to OCP MX and NVFP4 codes, bit-exact with the peers.

:func:`to_mx` turns a float array into E8M0 block scales and element codes; :func:`from_mx`
turns them back into exact values. :func:`to_nvfp4`/:func:`from_nvfp4` do the same for NVFP4
(E2M1 elements, UE4M3 scales of 16 elements, one FP32 per-tensor scale). :func:`to_blocked` and
:func:`from_blocked` convert scales to and from the cuBLAS 128x4 "blocked" layout.

Each scale rule is the exact definition of one peer, so a user can see which recipe produced
which codes (``docs/quantize.md`` gives every definition and every documented difference):

============= =========================================================================
rule          definition (``amax`` is the block's largest magnitude, ``emax`` the
              element format's largest exponent)
============= =========================================================================
``floor``     torchao 0.18 ``ScaleCalculationMode.FLOOR`` (its CPU path)
``ceil``      torchao 0.18 ``CEIL``
``even``      torchao 0.18 ``EVEN``
``rceil``     torchao 0.18 ``RCEIL`` (its eager fallback: ``ceil(log2(amax / max))`` in FP32)
``ocp``       the letter of OCP MX v1.0 §6.3: ``floor(log2(amax)) - emax``, exact (microxcaling
              computes it, up to three documented effects of its FP32 arithmetic)
``rceil-sat`` Transformer Engine's MXFP8 cast: ``amax * fl32(1/max)`` rounded up, ``.satfinite``
============= =========================================================================

Element rounding goes through :mod:`mxsim.formats` on exact values: each element is
``x * 2**-k`` for the block's power of two ``2**k`` (exact in float64), rounded once. The fast
path indexes a table that :func:`mxsim.formats.round_to` filled, keyed by the scaled FP32 value's
sign, exponent, top 8 mantissa bits and a sticky bit (enough for every element format, whose
guard bit lies at most 7 bits below the leading one); the exact path calls
:meth:`~mxsim.formats.Format.encode`; tests hold the two equal. The only FP32 roundings are the
peers' own, reproduced on purpose and named where they happen (torchao's ``amax / max``, TE's
``amax * fl32(1/max)``, the NVFP4 recipe's FP32 scale arithmetic).

Inputs are float32, bfloat16 (``ml_dtypes``), float16 or float64 arrays. float64 input is taken
only when every value is exactly an FP32 value (the peers all quantise FP32), and rejected
otherwise, so nothing is rounded before quantisation.
"""

from __future__ import annotations

import enum
from decimal import Decimal, localcontext
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt

from . import formats
from .errors import MxsimError
from .formats import DEFAULT_SR_BITS, Format, Rounding

__all__ = [
    "QuantizeError", "ScaleRule", "NanBlocks", "ELEMENT_FORMATS", "ROUNDINGS", "RULE_FORMATS",
    "rules_for", "to_mx", "from_mx", "to_nvfp4", "from_nvfp4", "nvfp4_tensor_scale",
    "to_blocked", "from_blocked", "compare_rules",
]


class QuantizeError(MxsimError, ValueError):
    """An input, axis, block, format or rule that quantisation cannot take."""


class ScaleRule(enum.Enum):
    """How a block's E8M0 scale is chosen (see the module docstring and docs/quantize.md)."""
    FLOOR = "floor"          #: torchao FLOOR
    CEIL = "ceil"            #: torchao CEIL
    EVEN = "even"            #: torchao EVEN
    RCEIL = "rceil"          #: torchao RCEIL (CPU fallback)
    OCP = "ocp"              #: OCP MX v1.0 §6.3, exactly (microxcaling, less its FP32 log2)
    RCEIL_SAT = "rceil-sat"  #: Transformer Engine MXFP8 (cvt.rp.satfinite.ue8m0)

    @classmethod
    def of(cls, value: ScaleRule | str) -> ScaleRule:
        return formats.choice(cls, value, "Scale rule", QuantizeError)


class NanBlocks(enum.Enum):
    """What a block whose every element is NaN does."""
    ERROR = "error"          #: raise QuantizeError (the default: such a block has no scale)
    QUANTIZE = "quantize"    #: quantise it as the rule's peer does

    @classmethod
    def of(cls, value: NanBlocks | str) -> NanBlocks:
        return formats.choice(cls, value, "nan_blocks", QuantizeError)


ELEMENT_FORMATS = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "int8")
ROUNDINGS = ("rne", "rz", "stochastic")
_TORCHAO_FORMATS = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")
#: Element formats each rule is defined for. torchao has no MXINT8 and Transformer Engine's
#: E8M0 recipe is MXFP8 only; the OCP letter covers every MX element format.
RULE_FORMATS: dict[ScaleRule, tuple[str, ...]] = {
    ScaleRule.FLOOR: _TORCHAO_FORMATS, ScaleRule.CEIL: _TORCHAO_FORMATS,
    ScaleRule.EVEN: _TORCHAO_FORMATS, ScaleRule.RCEIL: _TORCHAO_FORMATS,
    ScaleRule.OCP: ELEMENT_FORMATS, ScaleRule.RCEIL_SAT: ("e4m3", "e5m2"),
}

_INF = 0x7F800000          # FP32 +Inf bits; magnitudes above it are NaN
_QNAN = 0x7FC00000         # the canonical quiet NaN (torch's amax of a block with a NaN)
_X86_DEFAULT_NAN = 0xFFC00000   # what x86 SSE/AVX gives for Inf/Inf, Inf*0 (negative)
_E4M3_NAN_AS_FP32 = 0x7FF00000  # torch's float8_e4m3fn 0x7F converted to float32
_E8M0_NAN = 0xFF
_PTX_FP8_NAN = 0x7F        # what cvt.rn.satfinite.{e4m3,e5m2}x2.f32 makes of any NaN
_CHUNK = 1 << 20           # elements per chunk on the exact path (bounds its memory)
_FAST_CHUNK = 1 << 18      # elements per chunk of the whole pipeline (fits in cache)


def rules_for(elem_format: str | Format) -> list[ScaleRule]:
    """The scale rules defined for an element format, in :class:`ScaleRule` order."""
    name = _element_format(elem_format).name
    return [r for r in ScaleRule if name in RULE_FORMATS[r]]


# -- argument checks -------------------------------------------------------------------------

def _element_format(elem_format: str | Format) -> Format:
    fmt = formats.get(elem_format)
    if fmt.name not in ELEMENT_FORMATS:
        raise QuantizeError(f"Element format must be one of {', '.join(ELEMENT_FORMATS)}, "
                            f"not {fmt.name!r}")
    return fmt


def _rule_for(rule: ScaleRule | str, fmt: Format) -> ScaleRule:
    r = ScaleRule.of(rule)
    if fmt.name not in RULE_FORMATS[r]:
        allowed = ", ".join(x.value for x in ScaleRule if fmt.name in RULE_FORMATS[x])
        raise QuantizeError(f"Scale rule {r.value!r} is not defined for {fmt.name} elements "
                            f"(it covers {', '.join(RULE_FORMATS[r])}); for {fmt.name} use "
                            f"{allowed}")
    return r


def _rounding(rounding: Rounding | str) -> Rounding:
    try:
        mode = Rounding.of(rounding)
    except MxsimError:
        mode = None
    if mode is None or mode.value not in ROUNDINGS:
        raise QuantizeError(f"Rounding must be one of {', '.join(ROUNDINGS)}, not {rounding!r}")
    return mode


def _fp32_bits(x: Any) -> npt.NDArray[np.uint32]:
    """FP32 bit patterns of a float array, without rounding anything."""
    a = np.asarray(x)
    if a.dtype == np.float32:
        return a.view(np.uint32) if a.flags.c_contiguous else a.copy().view(np.uint32)
    if a.dtype == np.float16:
        return a.astype(np.float32).view(np.uint32)
    if a.dtype.name == "bfloat16":
        return np.ascontiguousarray(a).view(np.uint16).astype(np.uint32) << np.uint32(16)
    if a.dtype == np.float64:
        # Out-of-range values overflow and signalling NaNs raise FE_INVALID in these casts;
        # both are caught by the exactness test that follows.
        with np.errstate(over="ignore", invalid="ignore"):
            f = a.astype(np.float32)
            exact = (f.astype(np.float64) == a) | (np.isnan(a) & np.isnan(f))
        if not exact.all():
            bad = a[~exact].flat[0]
            raise QuantizeError(f"float64 input must hold FP32 values exactly (the scale rules "
                                f"are defined on FP32), but {bad!r} is not one; cast it to "
                                f"float32 first if rounding it is intended")
        return f.view(np.uint32)
    raise QuantizeError(f"Input must be a float array (float32, bfloat16, float16 or float64), "
                        f"not {a.dtype}")


def _axis(axis: Any, ndim: int) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise QuantizeError(f"Axis must be an integer, not {axis!r}")
    if ndim == 0:
        raise QuantizeError("Input must have at least one dimension, not a scalar")
    if not -ndim <= axis < ndim:
        raise QuantizeError(f"Axis must be in [{-ndim}, {ndim - 1}] for a {ndim}-d input, "
                            f"not {axis}")
    return int(axis) % ndim


def _block(block: Any, length: int, axis: int) -> int:
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise QuantizeError(f"Block must be a positive integer, not {block!r}")
    if length % block:
        raise QuantizeError(f"Block ({block}) must divide the length of axis {axis} "
                            f"({length})")
    return int(block)


def _blocks(bits: npt.NDArray[np.uint32], axis: int, block: int) -> npt.NDArray[np.uint32]:
    """(n_blocks, block) view or copy of the input with ``axis`` last, blocks in C order."""
    moved = np.moveaxis(bits, axis, -1)
    return np.ascontiguousarray(moved).reshape(-1, block)


def _unblock(arr: npt.NDArray, shape: tuple[int, ...], axis: int) -> npt.NDArray:
    """Inverse of :func:`_blocks` for an array whose moved layout has shape ``shape``."""
    return np.ascontiguousarray(np.moveaxis(arr.reshape(shape), -1, axis))


def _random_bits(shape: tuple[int, ...], seed: int | None, random_bits: Any,
                 sr_bits: int) -> npt.NDArray[np.uint64]:
    """Random integers in [0, 2**sr_bits) per element, as :meth:`Format.encode` draws them."""
    if not 1 <= sr_bits <= 63:
        raise QuantizeError(f"sr_bits must be between 1 and 63, not {sr_bits!r}")
    if random_bits is None:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer)
                                 or seed < 0):
            raise QuantizeError(f"Seed must be a non-negative integer or None, not {seed!r}")
        return np.random.default_rng(seed).integers(0, 1 << sr_bits, size=shape,
                                                    dtype=np.uint64)
    rb = np.asarray(random_bits)
    if rb.dtype.kind not in "ui" or (rb.size and (rb.min() < 0 or rb.max() >= (1 << sr_bits))):
        raise QuantizeError(f"random_bits must be integers in [0, 2**{sr_bits})")
    try:
        return np.broadcast_to(rb.astype(np.uint64), shape)
    except ValueError:
        raise QuantizeError(f"random_bits of shape {rb.shape} do not broadcast to the input's "
                            f"shape {shape}") from None


# -- exact log2 of FP32 values, as torch computes it ---------------------------------------

_KMIN, _KMAX = -149, 127


def _gap(k: int, up: bool) -> Decimal | None:
    """Distance from float32(k) to its neighbour toward +Inf (``up``) or -Inf."""
    if k == 0:
        return None
    a = abs(k)
    e = a.bit_length() - 1
    toward_zero = (k > 0) != up
    if toward_zero and a == 1 << e:
        return Decimal(2) ** (e - 24)
    return Decimal(2) ** (e - 23)


@cache
def _log2_thresholds() -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per-binade mantissa thresholds where a correctly rounded FP32 log2 hits an integer.

    For ``x = 2**k * (1 + j * 2**-23)``: ``fl32(log2 x) == k`` for ``0 < j <= up[k]`` and
    ``fl32(log2 x) == k + 1`` for ``j >= down[k]``. log2 of such an ``x`` is irrational, so it
    is never a rounding tie and 50 decimal digits decide every threshold.
    """
    up = np.zeros(_KMAX - _KMIN + 1, np.int64)
    down = np.full(_KMAX - _KMIN + 1, 1 << 23, np.int64)
    with localcontext() as ctx:
        ctx.prec = 50
        ln2 = Decimal(2).ln()
        for k in range(_KMIN, _KMAX + 1):
            g = _gap(k, up=True)
            if g is not None:   # log2(m) < g/2  <=>  m < 2**(g/2)
                t = ((g / 2 * ln2).exp() - 1) * (1 << 23)
                up[k - _KMIN] = int(t.to_integral_value(rounding="ROUND_FLOOR"))
            g = _gap(k + 1, up=False)
            if g is not None:   # log2(m) > 1 - g/2  <=>  m > 2**(1 - g/2)
                t = (((1 - g / 2) * ln2).exp() - 1) * (1 << 23)
                down[k - _KMIN] = int(t.to_integral_value(rounding="ROUND_FLOOR")) + 1
    return up, down


def _frexp_fp32(bits: npt.NDArray[np.uint32]) -> tuple[npt.NDArray[np.int64],
                                                        npt.NDArray[np.int64]]:
    """``(k, j)`` with ``x = 2**k * (1 + j * 2**-23)`` for positive finite FP32 ``x``."""
    b = bits.astype(np.int64)
    k, j = (b >> 23) - 127, b & 0x7FFFFF
    sub = np.flatnonzero(k == -127)
    if sub.size:
        # Subnormals: normalise the mantissa; frexp of an integer below 2**23 is exact.
        man = j[sub]
        _, bl = np.frexp(np.maximum(man, 1).astype(np.float64))
        bl = bl.astype(np.int64)
        k[sub] = bl - 150
        j[sub] = (man << np.clip(24 - bl, 0, 63)) & 0x7FFFFF
    return k, j


def _torch_log2_ceil(bits: npt.NDArray[np.uint32]) -> npt.NDArray[np.int64]:
    """``ceil(torch.log2(x))`` of positive FP32 ``x`` (0 gives -1000), exactly.

    torch's FP32 log2 is correctly rounded on these inputs; checked against torch 2.13 on
    every positive finite FP32 value. ``ceil`` of it is the true ``ceil(log2 x)`` except just
    above a power of two, where the FP32 result rounds down onto the integer.
    """
    up, _ = _log2_thresholds()
    k, j = _frexp_fp32(bits)
    k_idx = np.clip(k - _KMIN, 0, len(up) - 1)
    out = np.where((j == 0) | (j <= up[k_idx]), k, k + 1)
    return np.where(bits == 0, -1000, out)


def _torch_log2_floor(bits: npt.NDArray[np.uint32]) -> npt.NDArray[np.int64]:
    """``floor(torch.log2(x))`` of positive FP32 ``x`` (0 gives -1000), exactly.

    One more than the true ``floor(log2 x)`` just below a power of two, where the FP32 result
    rounds up onto the integer (what microxcaling's shared exponent sees).
    """
    _, down = _log2_thresholds()
    k, j = _frexp_fp32(bits)
    k_idx = np.clip(k - _KMIN, 0, len(down) - 1)
    out = np.where(j >= down[k_idx], k + 1, k)
    return np.where(bits == 0, -1000, out)


def _exact_log2_floor(bits: npt.NDArray[np.uint32]) -> npt.NDArray[np.int64]:
    """``floor(log2 x)`` of positive FP32 ``x``, exactly (0 gives -1000)."""
    k, _ = _frexp_fp32(bits)
    return np.where(bits == 0, -1000, k)


# -- scale rules on finite amax --------------------------------------------------------------

def _scale_finite(rule: ScaleRule, fmt: Format, amax: npt.NDArray[np.uint32]
                  ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """E8M0 code and element shift ``k`` (elements are ``x * 2**-k``) for finite ``amax``.

    ``amax`` holds FP32 bit patterns of non-negative finite values; blocks holding Inf or NaN
    are decided by :func:`_special_blocks`.
    """
    emax = fmt.emax
    if rule in (ScaleRule.FLOOR, ScaleRule.CEIL, ScaleRule.EVEN):
        # torchao: read the FP32 exponent field of amax (an FP32-subnormal amax reads as
        # 2**-127), clamp the unbiased scale to [-127, 128], and divide the elements by the
        # scale clamped to at least 2**-126 (torchao's guard against subnormal scales).
        a = amax.astype(np.int64)
        if rule is ScaleRule.EVEN:
            a = (a + (1 << (22 - fmt.man_bits))) & 0xFF800000
        e = (a >> 23) - 127
        if rule is ScaleRule.CEIL:
            e = e + ((a & 0x7FFFFF) > 0)
        u = np.clip(e - emax, -127, 128)
        return (u + 127).astype(np.uint8), np.maximum(u, -126)
    if rule is ScaleRule.RCEIL:
        # torchao eager fallback: descale = amax / max in FP32 (torch divides, it does not
        # multiply by the reciprocal), exponent = clamp(ceil(log2(descale)), -127, 127) with an
        # FP32 log2; elements are multiplied by 2**(127 - e), or by 1.0 when e == 0 (TE's old
        # exp2f_rcp, which torchao copies).
        with np.errstate(under="ignore"):
            descale = amax.view(np.float32) / np.float32(fmt.max)
        c = _torch_log2_ceil(descale.view(np.uint32))
        code = np.clip(c, -127, 127) + 127
        return code.astype(np.uint8), np.where(code == 0, 0, code - 127)
    if rule is ScaleRule.OCP:
        # OCP MX v1.0 §6.3: shared_exp = floor(log2(amax)) - emax, exactly; below the E8M0
        # range it is clamped to -127 (an all-zero block too); elements use 2**shared_exp.
        u = np.clip(_exact_log2_floor(amax) - emax, -127, 127)
        return (u + 127).astype(np.uint8), u
    if rule is ScaleRule.RCEIL_SAT:
        # Transformer Engine float_to_e8m0(amax * max_norm_rcp): the FP32 product's exponent
        # rounded up when any mantissa bit is set (an FP32-subnormal product only above
        # 2**-127), saturating at 0xFE; elements times exp2f_rcp(e) = 2**(127 - e).
        with np.errstate(under="ignore"):
            d = (amax.view(np.float32) * np.float32(1.0 / fmt.max)).view(np.uint32)
        d = d.astype(np.int64)
        field, man = d >> 23, d & 0x7FFFFF
        up = (man > 0) & (field != 0xFE) & ~((field == 0) & (man <= 0x400000))
        code = np.where(d == 0, 0, field + up)
        return code.astype(np.uint8), code - 127
    raise AssertionError(rule)


# -- element codes ---------------------------------------------------------------------------

def _torchao_nan_code(nan_bits: Any, fmt: Format) -> npt.NDArray[np.uint8]:
    """The element code torchao's cast gives an FP32 NaN with these bits.

    FP8: torch's cast gives 0x7F with the NaN's sign. FP6/FP4: torchao's bit-trick cast has
    no NaN branch, so the NaN takes its "normal" path: exponent rebiased and mantissa rounded
    to nearest even in int32, truncated to 8 bits, sign ORed in.
    """
    b = np.asarray(nan_bits, np.uint32).astype(np.int64)
    sign = (b >> 31) & 1
    if fmt.name in ("e4m3", "e5m2"):
        return (0x7F | (sign << 7)).astype(np.uint8)
    m, shift = fmt.man_bits, 23 - fmt.man_bits
    mag = b & 0x7FFFFFFF
    v = mag + ((fmt.bias - 127) << 23) + ((1 << (shift - 1)) - 1) + ((mag >> shift) & 1)
    return (((v >> shift) & 0xFF) | (sign << (fmt.exp_bits + m))).astype(np.uint8)


@cache
def _lut(fmt_name: str, rounding: str, specials: str) -> npt.NDArray[np.uint8]:
    """Element code of every 17-bit key ``sign | FP32 exponent | top 8 mantissa bits``.

    The lowest key bit is the 8th mantissa bit ORed with every bit below it (a sticky bit).
    Every element format keeps at most 6 bits below the leading one and rounds on the 7th, so
    the key decides the rounding exactly; :func:`mxsim.formats.round_to` fills the table.
    Keys of Inf and NaN follow ``specials``: ``"zero"`` (decided elsewhere) or ``"torchao"``
    (its saturating casts: Inf to ±max, NaN as :func:`_torchao_nan_code`).
    """
    fmt = formats.get(fmt_name)
    key = np.arange(1 << 17, dtype=np.int64)
    sign = (key >> 16).astype(np.uint8)
    field = (key >> 8) & 0xFF
    man = key & 0xFF
    sig = np.where(field > 0, man | 0x100, man).astype(np.uint64)
    lsb_exp = np.maximum(field, 1) - 127 - 8
    finite = field != 0xFF
    codes = formats.round_to(fmt, sign, np.where(finite, lsb_exp, 0),
                             np.where(finite, sig, 0), False, rounding, True)
    codes = codes.astype(np.uint8)
    if specials == "torchao":
        inf = field == 0xFF
        maxc = formats.round_to(fmt, sign, 1000, 1, False, "rne", True).astype(np.uint8)
        nan = _torchao_nan_code((key << 15).astype(np.uint32), fmt)
        codes = np.where(inf & (man == 0), maxc, np.where(inf, nan, codes))
    else:
        codes = np.where(finite, codes, 0)
    codes = codes.astype(np.uint8)
    codes.flags.writeable = False
    return codes


def _keys(y: npt.NDArray[np.float32]) -> npt.NDArray[np.uint32]:
    """17-bit table keys of FP32 values: bits 31..15 with bits 14..0 ORed into bit 15."""
    yb = y.view(np.uint32)
    t = yb & np.uint32(0x7FFF)
    t += np.uint32(0x7FFF)       # bit 15 set iff any of bits 14..0 is set
    t |= yb
    t >>= np.uint32(15)
    return t


def _elements_fast(bits: npt.NDArray[np.uint32], k: npt.NDArray[np.int64], fmt: Format,
                   rounding: Rounding) -> npt.NDArray[np.uint8]:
    """Codes of ``x * 2**-k`` for finite blocks, rounded by table lookup.

    ``x * 2**-k`` is formed in FP32: it is exact unless the product is below 2**-126, and every
    such product rounds to ±0 in every element format however the FP32 multiply rounds it.
    """
    mult = np.ldexp(np.float32(1), (-k).astype(np.int32)).astype(np.float32)
    with np.errstate(under="ignore", over="ignore", invalid="ignore"):
        y = bits.view(np.float32) * mult[:, None]
    return _lut(fmt.name, rounding.value, "zero").take(_keys(y))


def _elements_exact(bits: npt.NDArray[np.uint32], k: npt.NDArray[np.int64], fmt: Format,
                    rounding: Rounding, rb: npt.NDArray[np.uint64] | None,
                    sr_bits: int) -> npt.NDArray[np.uint8]:
    """Codes of ``x * 2**-k`` through :meth:`Format.encode` (exact float64, saturating).

    Infinities saturate to ±max; NaN elements get code 0 here and are decided by the caller.
    """
    out = np.empty(bits.shape, np.uint8)
    rows = max(1, _CHUNK // max(1, bits.shape[1]))
    for start in range(0, bits.shape[0], rows):
        sl = slice(start, start + rows)
        b = bits[sl]
        # NaN elements are decided by the caller; zeroing them first also keeps signalling
        # NaNs out of the float64 conversion (which would raise FE_INVALID).
        b = np.where((b & np.uint32(0x7FFFFFFF)) > _INF, np.uint32(0), b)
        x = b.view(np.float32).astype(np.float64)
        v = x * np.ldexp(1.0, -k[sl]).astype(np.float64)[:, None]
        out[sl] = fmt.encode(v, rounding, True,
                             random_bits=None if rb is None else rb[sl], sr_bits=sr_bits)
    return out


def _zero_codes(bits: npt.NDArray[np.uint32], fmt: Format) -> npt.NDArray[np.uint8]:
    """±0 codes with the signs of ``bits`` (int8 has one zero)."""
    if fmt.kind == "int":
        return np.zeros(bits.shape, np.uint8)
    return ((bits >> np.uint32(31)).astype(np.uint8) << np.uint8(fmt.sign_shift)).astype(
        np.uint8)


def _special_blocks(rule: ScaleRule, fmt: Format, bits: npt.NDArray[np.uint32],
                    amax: npt.NDArray[np.uint32], rounding: Rounding,
                    rb: npt.NDArray[np.uint64] | None, sr_bits: int
                    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
    """Scale and element codes of blocks that hold an Inf or a NaN, rule by rule."""
    n = bits.shape[0]
    mag = bits & np.uint32(0x7FFFFFFF)
    is_nan = mag > _INF
    nan_blk = amax > _INF
    scale = np.empty(n, np.uint8)
    elems = np.empty(bits.shape, np.uint8)
    if rule is ScaleRule.OCP:
        # X = 2**floor(log2(amax)) - emax is +Inf (an Inf) or NaN: no E8M0 value, so X = NaN
        # (as microxcaling); a NaN X makes the whole block NaN, whatever the elements hold.
        scale[:] = _E8M0_NAN
        elems[:] = fmt.code_of_nan if fmt.has_nan else 0
        return scale, elems
    if rule is ScaleRule.RCEIL_SAT:
        # TE's amax is an fmaxf reduction, which skips NaN; an Inf amax saturates to 0xFE and
        # exp2f_rcp(0xFE) = 2**-127. cvt.rn.satfinite.{e4m3,e5m2}x2.f32 turns every NaN into
        # 0x7F, sign dropped, and Inf into ±max (measured on an H200, see docs/quantize.md).
        amax_te = np.where(is_nan, 0, mag).max(axis=1).astype(np.uint32)
        inf = amax_te == _INF
        s, k = _scale_finite(rule, fmt, np.where(inf, 0, amax_te).astype(np.uint32))
        scale[:] = np.where(inf, 0xFE, s)
        k = np.where(inf, 127, k)
        elems[:] = _elements_exact(bits, k, fmt, rounding, rb, sr_bits)
        elems[is_nan] = _PTX_FP8_NAN
        return scale, elems
    if rule is ScaleRule.RCEIL:
        # torchao: NaN amax gives 0xFF and the descale NaN (torch's canonical 0x7FC00000)
        # multiplies every element; Inf amax gives 0xFE and a multiplier of 2**-127.
        k = np.full(n, 127, np.int64)
        scale[:] = np.where(nan_blk, _E8M0_NAN, 0xFE)
        elems[:] = _elements_exact(bits, k, fmt, rounding, rb, sr_bits)
        elems[nan_blk] = _torchao_nan_code(_QNAN, fmt)
        return scale, elems
    # torchao FLOOR/CEIL/EVEN. Inf without NaN: the exponent field 255 gives the scale
    # 2**(128 - emax), a finite one, and Inf elements saturate to ±max. NaN: 0xFF, whose FP32
    # pattern (0xFF << 23) is +Inf, so elements are x / Inf: finite ones ±0, a NaN keeps its
    # payload (quietened), an Inf becomes x86's default NaN.
    s, k = _scale_finite(rule, fmt, np.full(n, _INF, np.uint32))
    scale[:] = np.where(nan_blk, _E8M0_NAN, s)
    elems[:] = _elements_exact(bits, k, fmt, rounding, rb, sr_bits)
    if nan_blk.any():
        sub = bits[nan_blk]
        q = np.where((sub & np.uint32(0x7FFFFFFF)) == _INF, np.uint32(_X86_DEFAULT_NAN),
                     sub | np.uint32(0x00400000))
        sub_mag = sub & np.uint32(0x7FFFFFFF)
        elems[nan_blk] = np.where(sub_mag >= _INF, _torchao_nan_code(q, fmt),
                                  _zero_codes(sub, fmt))
    return scale, elems


def _row_max(a: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    """Maximum of each row; ``reduceat`` is several times faster than ``max(axis=1)`` on the
    short rows of a block."""
    n, blk = a.shape
    if n == 0:
        return np.zeros(0, a.dtype)
    return np.maximum.reduceat(a.reshape(-1), np.arange(0, n * blk, blk))


def _nan_only(mag: npt.NDArray[np.uint32], special: npt.NDArray[np.bool_]) -> int | None:
    """Index of the first block whose every element is NaN, or None."""
    idx = np.flatnonzero(special)
    if idx.size == 0:
        return None
    all_nan = (mag[idx] > _INF).all(axis=1)
    return int(idx[all_nan][0]) if all_nan.any() else None


def _quantize_blocks(blocks: npt.NDArray[np.uint32], fmt: Format, rule: ScaleRule,
                     rounding: Rounding, rb: npt.NDArray[np.uint64] | None, sr_bits: int,
                     nan_blocks: NanBlocks, fast: bool, where: str
                     ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
    """Scale and element codes of (n_blocks, block) FP32 bit patterns, chunk by chunk.

    Chunks of about 2**18 elements keep the temporaries in cache, which more than doubles the
    throughput of the table path over whole-array passes.
    """
    n, blk = blocks.shape
    rows = max(1, _FAST_CHUNK // blk)
    if n <= rows:
        return _quantize_chunk(blocks, fmt, rule, rounding, rb, sr_bits, nan_blocks, fast,
                               where, 0)
    scale = np.empty(n, np.uint8)
    elems = np.empty((n, blk), np.uint8)
    for start in range(0, n, rows):
        sl = slice(start, start + rows)
        scale[sl], elems[sl] = _quantize_chunk(blocks[sl], fmt, rule, rounding,
                                               None if rb is None else rb[sl], sr_bits,
                                               nan_blocks, fast, where, start)
    return scale, elems


def _quantize_chunk(blocks: npt.NDArray[np.uint32], fmt: Format, rule: ScaleRule,
                    rounding: Rounding, rb: npt.NDArray[np.uint64] | None, sr_bits: int,
                    nan_blocks: NanBlocks, fast: bool, where: str, offset: int
                    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
    mag = blocks & np.uint32(0x7FFFFFFF)
    amax = _row_max(mag)
    special = amax >= _INF
    any_special = bool(special.any())
    if any_special and nan_blocks is NanBlocks.ERROR:
        first = _nan_only(mag, special)
        if first is not None:
            raise QuantizeError(f"Block {offset + first} (in C order, blocks along {where}) "
                                f"holds only NaN, so it has no scale; replace the NaNs, or "
                                f"pass nan_blocks='quantize' to quantise it as {rule.value} "
                                f"does")
    finite_amax = np.where(special, 0, amax).astype(np.uint32) if any_special else amax
    scale, k = _scale_finite(rule, fmt, finite_amax)
    if fast and rounding is not Rounding.STOCHASTIC:
        elems = _elements_fast(blocks, k, fmt, rounding)
    else:
        elems = _elements_exact(blocks, k, fmt, rounding, rb, sr_bits)
    if any_special:
        idx = np.flatnonzero(special)
        s, e = _special_blocks(rule, fmt, blocks[idx], amax[idx], rounding,
                               None if rb is None else rb[idx], sr_bits)
        scale[idx] = s
        elems[idx] = e
    return scale, elems


# -- the MX front door -----------------------------------------------------------------------

def to_mx(x: Any, elem_format: str | Format, block: int = 32,
          scale_rule: ScaleRule | str = "floor", rounding: Rounding | str = "rne",
          axis: int = -1, seed: int | None = None, *, random_bits: Any = None,
          sr_bits: int = DEFAULT_SR_BITS, nan_blocks: NanBlocks | str = "error",
          ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
    """Quantise ``x`` to an MX format: E8M0 scale codes and element codes, bit-exactly.

    Blocks are ``block`` consecutive elements along ``axis``. Each block gets an E8M0 scale
    ``2**(s - 127)`` chosen by ``scale_rule`` and each element the code of ``x * 2**-k``
    rounded once by ``rounding`` and saturated to ±max, where ``2**k`` is the power of two the
    rule divides by (the scale itself, except torchao's ``floor``/``ceil``/``even``, which
    divide by at least 2**-126, and ``rceil``, which multiplies by 1.0 when ``s == 0``).

    Parameters
    ----------
    x
        float32, bfloat16 (``ml_dtypes``), float16, or float64 holding FP32 values exactly.
    elem_format
        ``e4m3``, ``e5m2``, ``e3m2``, ``e2m3``, ``e2m1`` or ``int8`` (see :data:`RULE_FORMATS`
        for which rule takes which).
    block
        Elements per scale; it must divide the length of ``axis``.
    scale_rule
        ``floor``, ``ceil``, ``even``, ``rceil`` (torchao 0.18, bit for bit), ``ocp`` (OCP MX
        v1.0 §6.3 exactly; what microxcaling computes with ``round="even"``) or ``rceil-sat``
        (Transformer Engine's MXFP8 cast). docs/quantize.md defines each.
    rounding
        ``rne`` (every peer), ``rz`` or ``stochastic``. Stochastic rounding uses, per element,
        ``random_bits`` (integers below ``2**sr_bits`` broadcast to ``x.shape``) or, if None,
        ``np.random.default_rng(seed).integers(0, 2**sr_bits, size=x.shape, dtype=np.uint64)``
        in the C order of ``x``; :func:`mxsim.formats.round_to` says how they are used.
    axis
        The axis the blocks run along (``-1`` for A of a GEMM, ``-2`` for B).
    nan_blocks
        ``error`` (default) rejects a block of nothing but NaN; ``quantize`` quantises it the
        rule's way.

    Returns
    -------
    (scale_codes, elem_codes)
        ``np.uint8`` arrays: scales shaped like ``x`` with ``axis`` divided by ``block``,
        elements shaped like ``x`` (one unpacked code per byte; see :func:`mxsim.formats.pack_fp4`).

    Special values (docs/quantize.md has the full table): an all-zero block gets scale code 0
    (2**-127) and ±0 elements under every rule. A NaN in a block gives scale 0xFF (NaN: the
    whole block is NaN) under every rule but ``rceil-sat``, whose amax skips NaN (NaN elements
    get 0x7F, as ``cvt.rn.satfinite`` gives). An Inf gives a finite scale and ±max elements
    under ``floor``/``ceil``/``even`` (torchao), 0xFE under ``rceil`` and ``rceil-sat``, and
    NaN (0xFF) under ``ocp``. Element codes of NaN blocks are the peer's: torchao's casts turn
    NaN into NaN codes for FP8 and into finite garbage codes for FP6/FP4 (reproduced); under
    ``ocp`` they are the format's NaN code or 0. FP32 subnormal inputs are quantised exactly
    like any other value.

    Raises
    ------
    QuantizeError
        Non-float input, float64 that is not FP32, a bad axis or block, an element format or
        rule pair that is not defined, a rounding mode other than the three, a NaN-only block.
    """
    return _to_mx(x, elem_format, block, scale_rule, rounding, axis, seed, random_bits,
                  sr_bits, nan_blocks, fast=True)


def _to_mx(x: Any, elem_format: str | Format, block: int, scale_rule: ScaleRule | str,
           rounding: Rounding | str, axis: int, seed: int | None, random_bits: Any,
           sr_bits: int, nan_blocks: NanBlocks | str, *, fast: bool,
           ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
    """:func:`to_mx`; ``fast=False`` sends every element through :meth:`Format.encode`
    instead of the table (the twin that the tests hold equal to the fast path)."""
    fmt = _element_format(elem_format)
    rule = _rule_for(scale_rule, fmt)
    mode = _rounding(rounding)
    policy = NanBlocks.of(nan_blocks)
    bits = _fp32_bits(x)
    ax = _axis(axis, bits.ndim)
    blk = _block(block, bits.shape[ax], ax)
    rb = None
    if mode is Rounding.STOCHASTIC:
        rb = _blocks(_random_bits(bits.shape, seed, random_bits, sr_bits), ax, blk)
    moved_shape = bits.shape[:ax] + bits.shape[ax + 1:] + (bits.shape[ax],)
    scale, elems = _quantize_blocks(_blocks(bits, ax, blk), fmt, rule, mode, rb, sr_bits,
                                    policy, fast, f"axis {ax}")
    return (_unblock(scale, moved_shape[:-1] + (moved_shape[-1] // blk,), ax),
            _unblock(elems, moved_shape, ax))


def _check_codes(scale_codes: Any, elem_codes: Any, block: int, axis: int,
                 ) -> tuple[npt.NDArray, npt.NDArray, int, int]:
    s = np.asarray(scale_codes)
    e = np.asarray(elem_codes)
    for name, arr in (("Scale codes", s), ("Element codes", e)):
        if arr.dtype.kind not in "ui":
            raise QuantizeError(f"{name} must be an integer array, not {arr.dtype}")
    ax = _axis(axis, e.ndim)
    blk = _block(block, e.shape[ax], ax)
    want = e.shape[:ax] + (e.shape[ax] // blk,) + e.shape[ax + 1:]
    if s.shape != want:
        raise QuantizeError(f"Scale codes must have shape {want} for elements of shape "
                            f"{e.shape} in blocks of {blk} along axis {ax}, not {s.shape}")
    return s, e, ax, blk


def _apply_scales(values: npt.NDArray[np.float64], scales: npt.NDArray[np.float64], ax: int,
                  blk: int) -> npt.NDArray[np.float64]:
    return values * np.repeat(scales, blk, axis=ax)


def from_mx(scale_codes: Any, elem_codes: Any, elem_format: str | Format, block: int = 32,
            axis: int = -1) -> npt.NDArray[np.float64]:
    """Exact values of MX codes: ``decode(element) * 2**(scale - 127)`` as float64.

    Every such product is a float64 value, so nothing rounds. A NaN scale (0xFF) makes its
    whole block NaN; NaN and Inf element codes decode to NaN and ±Inf.
    """
    fmt = _element_format(elem_format)
    s, e, ax, blk = _check_codes(scale_codes, elem_codes, block, axis)
    if s.size and int(s.max()) > 0xFF:
        raise QuantizeError("Scale codes must be E8M0 bytes (0..255)")
    scales = formats.get("e8m0").decode(s.astype(np.uint8))
    return _apply_scales(fmt.decode(e), scales, ax, blk)


# -- NVFP4 -----------------------------------------------------------------------------------

_E2M1 = "e2m1"
_UE4M3_MIN = np.float32(2.0 ** -6)     # torch.finfo(float8_e4m3fn).tiny: no subnormal scales
_UE4M3_MAX = np.float32(448.0)


def nvfp4_tensor_scale(x: Any) -> np.float32:
    """The NVFP4 per-tensor scale of ``x``: ``fl32(amax / (448 * 6))``, as torchao computes it.

    An all-zero tensor gets 1.0 (Transformer Engine's rule; torchao would divide by 0).

    Raises
    ------
    QuantizeError
        When ``x`` holds NaN or Inf (its amax then gives no usable scale).
    """
    bits = _fp32_bits(x)
    if bits.size == 0:
        return np.float32(1.0)
    amax = (bits & np.uint32(0x7FFFFFFF)).max()
    if amax >= _INF:
        raise QuantizeError("The NVFP4 per-tensor scale needs a finite amax, but the input "
                            "holds NaN or Inf; pass per_tensor_scale explicitly")
    if amax == 0:
        return np.float32(1.0)
    with np.errstate(under="ignore"):
        return np.float32(np.uint32(amax).view(np.float32) / np.float32(448.0 * 6.0))


def _pts(per_tensor_scale: Any, bits: npt.NDArray[np.uint32]) -> np.float32:
    if per_tensor_scale is None:
        return nvfp4_tensor_scale(bits.view(np.float32))
    p = np.asarray(per_tensor_scale)
    if p.size != 1 or p.dtype.kind not in "fiu":
        raise QuantizeError(f"per_tensor_scale must be one number, not {per_tensor_scale!r}")
    with np.errstate(over="ignore", under="ignore"):
        f = p.astype(np.float32).reshape(())    # nearest FP32, as torch.tensor(v) would give
    if not (np.isfinite(f) and f > 0):
        raise QuantizeError(f"per_tensor_scale must be positive and finite in FP32, not "
                            f"{per_tensor_scale!r}")
    return np.float32(f)


def to_nvfp4(x: Any, per_tensor_scale: Any = None, block: int = 16, two_d: bool = False,
             rounding: Rounding | str = "rne", axis: int = -1, seed: int | None = None, *,
             random_bits: Any = None, sr_bits: int = DEFAULT_SR_BITS,
             nan_blocks: NanBlocks | str = "error",
             ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8], np.float32]:
    """Quantise ``x`` to NVFP4 with torchao 0.18's recipe: UE4M3 scales, E2M1 elements.

    With ``p`` the per-tensor scale (given, rounded to the nearest FP32 value; or
    :func:`nvfp4_tensor_scale`), each block of
    ``block`` elements along ``axis`` computes, in FP32 as torchao does on the CPU (these FP32
    roundings are the recipe's own and are reproduced on purpose, so an element is rounded
    twice: once by the FP32 multiply, once to E2M1)::

        s  = fl8e4m3(clamp(fl32(fl32(amax / 6) / p), 2**-6, 448))      # round to nearest even
        r  = fl32(fl32(1 / p) / s)
        q  = e2m1(fl32(x * r))                                          # saturating

    ``per_tensor_scale=1.0`` reproduces torchao's single-level mode (``per_tensor_scale=None``
    there). ``two_d`` takes amax over ``block`` x ``block`` tiles of the last two axes
    (Transformer Engine's 2-D weight recipe) and repeats each tile's scale on its rows, so the
    scale codes keep the 1-D shape; the FP32 arithmetic stays as above.

    Special values: a block with a NaN gets scale 0x7F (NaN) and every element the code
    torchao's FP4 cast gives torch's NaN ``0x7FF00000`` (code 4); an Inf gives scale 448 and
    ±6 for the Inf; an all-zero block gets scale 2**-6 and ±0.

    Returns
    -------
    (scale_codes, elem_codes, per_tensor_scale)
        UE4M3 and E2M1 codes as ``np.uint8`` (shaped as :func:`to_mx` shapes them) and the
        per-tensor scale as ``np.float32``.
    """
    fmt = formats.get(_E2M1)
    mode = _rounding(rounding)
    policy = NanBlocks.of(nan_blocks)
    bits = _fp32_bits(x)
    ax = _axis(axis, bits.ndim)
    blk = _block(block, bits.shape[ax], ax)
    if not isinstance(two_d, bool):
        raise QuantizeError(f"two_d must be True or False, not {two_d!r}")
    pts = _pts(per_tensor_scale, bits)
    moved = np.ascontiguousarray(np.moveaxis(bits, ax, -1))
    blocks = moved.reshape(-1, blk)
    mag = blocks & np.uint32(0x7FFFFFFF)
    if two_d:
        if bits.ndim < 2 or ax < bits.ndim - 2:
            raise QuantizeError("two_d needs at least 2 dimensions and axis -1 or -2")
        rows = moved.shape[-2] if moved.ndim >= 2 else 1
        if rows % blk:
            raise QuantizeError(f"two_d needs the other tile axis ({rows}) to be a multiple "
                                f"of the block ({blk})")
        t = mag.reshape(moved.shape[:-2] + (rows // blk, blk, moved.shape[-1] // blk, blk))
        tile = t.max(axis=(-3, -1), keepdims=True)
        amax = np.broadcast_to(tile, t.shape[:-1] + (1,)).reshape(-1)
    else:
        amax = _row_max(mag)
    special = amax > _INF      # NaN; an Inf amax follows the FP32 arithmetic below
    if special.any() and policy is NanBlocks.ERROR:
        all_nan = (mag > _INF).all(axis=1)
        if all_nan.any():
            raise QuantizeError(f"Block {int(np.flatnonzero(all_nan)[0])} (in C order, blocks "
                                f"along axis {ax}) holds only NaN, so it has no scale; replace "
                                f"the NaNs, or pass nan_blocks='quantize'")
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        bs = np.where(special, 0, amax).astype(np.uint32).view(np.float32) / np.float32(6.0)
        s = bs / pts
        s = np.minimum(np.maximum(s, _UE4M3_MIN), _UE4M3_MAX)
        scale = formats.get("e4m3").encode(s.astype(np.float64), "rne", True).astype(np.uint8)
        s8 = formats.get("e4m3").decode(scale).astype(np.float32)
        r = (np.float32(1.0) / pts) / s8
        y = blocks.view(np.float32) * r[:, None]
    if mode is Rounding.STOCHASTIC:
        rb = _blocks(_random_bits(bits.shape, seed, random_bits, sr_bits), ax, blk)
        yb = y.view(np.uint32)
        elems = _elements_exact(yb, np.zeros(len(yb), np.int64), fmt, mode, rb, sr_bits)
        ymag = yb & np.uint32(0x7FFFFFFF)
        nan = ymag > _INF
        elems[nan] = _torchao_nan_code(yb[nan], fmt)
    else:
        elems = _lut(fmt.name, mode.value, "torchao").take(_keys(y))
    if special.any():
        # NaN amax: the scale is e4m3 NaN 0x7F; torch turns it into 0x7FF00000 in FP32, and
        # that NaN (the second operand) is what x * r gives for every element.
        scale[special] = 0x7F
        elems[special] = _torchao_nan_code(_E4M3_NAN_AS_FP32, fmt)
    moved_shape = moved.shape
    return (_unblock(scale, moved_shape[:-1] + (moved_shape[-1] // blk,), ax),
            _unblock(elems, moved_shape, ax), pts)


def from_nvfp4(scale_codes: Any, elem_codes: Any, per_tensor_scale: Any = 1.0,
               block: int = 16, axis: int = -1) -> npt.NDArray[np.float64]:
    """Exact values of NVFP4 codes: ``e2m1 * ue4m3 * per_tensor_scale`` as float64.

    The product has at most 2 + 4 + 24 significant bits, so nothing rounds. A NaN scale (0x7F;
    the top bit of a UE4M3 byte is ignored) makes its block NaN.
    """
    s, e, ax, blk = _check_codes(scale_codes, elem_codes, block, axis)
    if s.size and int(s.max()) > 0xFF:
        raise QuantizeError("Scale codes must be UE4M3 bytes (0..255)")
    p = np.float64(_pts(per_tensor_scale, np.zeros(0, np.uint32)))
    scales = formats.get("ue4m3").decode(s.astype(np.uint8)) * p
    return _apply_scales(formats.get(_E2M1).decode(e), scales, ax, blk)


# -- the cuBLAS 128x4 blocked scale layout ---------------------------------------------------

def to_blocked(scales: Any) -> npt.NDArray[np.uint8]:
    """Rearrange a (rows, cols) scale matrix into cuBLAS's blocked layout, flattened.

    The matrix is zero-padded to multiples of 128 rows and 4 columns; each 128x4 tile, taken
    in row-major tile order, becomes 512 bytes where scale ``(r, c)`` of the tile sits at
    ``(r % 32) * 16 + (r // 32) * 4 + c``. Bit for bit torchao's ``to_blocked``.
    """
    s = np.asarray(scales)
    if s.ndim != 2:
        raise QuantizeError(f"Scales must be a 2-d (rows, cols) array, not shape {s.shape}; "
                            f"fold batch dimensions into the rows first")
    if s.dtype != np.uint8:
        raise QuantizeError(f"Scales must be uint8 codes, not {s.dtype}")
    rows, cols = s.shape
    nr, nc = -(-rows // 128), -(-cols // 4)
    padded = np.zeros((nr * 128, nc * 4), np.uint8)
    padded[:rows, :cols] = s
    tiles = padded.reshape(nr, 128, nc, 4).transpose(0, 2, 1, 3)        # (nr, nc, 128, 4)
    out = tiles.reshape(nr, nc, 4, 32, 4).transpose(0, 1, 3, 2, 4)      # (.., 32, 4, 4)
    return np.ascontiguousarray(out).reshape(-1)


def from_blocked(blocked: Any, rows: int, cols: int) -> npt.NDArray[np.uint8]:
    """Inverse of :func:`to_blocked`: the (rows, cols) scales, padding dropped."""
    b = np.asarray(blocked)
    for name, v in (("rows", rows), ("cols", cols)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise QuantizeError(f"{name} must be a positive integer, not {v!r}")
    nr, nc = -(-rows // 128), -(-cols // 4)
    if b.dtype != np.uint8 or b.ndim != 1 or b.size != nr * nc * 512:
        raise QuantizeError(f"Blocked scales of a {rows}x{cols} matrix must be {nr * nc * 512} "
                            f"uint8 values in one dimension, not {b.dtype} of shape {b.shape}")
    t = b.reshape(nr, nc, 32, 4, 4).transpose(0, 1, 3, 2, 4)            # (nr, nc, 4, 32, 4)
    padded = t.reshape(nr, nc, 128, 4).transpose(0, 2, 1, 3).reshape(nr * 128, nc * 4)
    return np.ascontiguousarray(padded[:rows, :cols])


# -- comparing the rules on one input --------------------------------------------------------

def compare_rules(x: Any, elem_format: str | Format, block: int = 32, axis: int = -1,
                  rules: list[ScaleRule | str] | None = None) -> list[dict[str, Any]]:
    """How each scale rule quantises ``x``: scale changes and error against the input.

    For each rule (default: every rule defined for the format), the blocks whose scale code
    differs from the baseline (``floor``, or ``ocp`` for int8), and the absolute and relative
    error of :func:`from_mx` of its codes against ``x`` over the finite inputs whose result is
    finite (relative error over the non-zero ones). NaN-only blocks are quantised, not refused.
    """
    fmt = _element_format(elem_format)
    chosen = rules_for(fmt) if rules is None else [_rule_for(r, fmt) for r in rules]
    bits = _fp32_bits(x)
    ref = bits.view(np.float32).astype(np.float64)
    base_rule = ScaleRule.FLOOR if fmt.name in _TORCHAO_FORMATS else ScaleRule.OCP
    base, _ = to_mx(bits.view(np.float32), fmt, block, base_rule, axis=axis,
                    nan_blocks="quantize")
    rows = []
    for rule in chosen:
        s, e = to_mx(bits.view(np.float32), fmt, block, rule, axis=axis, nan_blocks="quantize")
        deq = from_mx(s, e, fmt, block, axis)
        ok = np.isfinite(ref) & np.isfinite(deq)
        err = np.abs(deq[ok] - ref[ok])
        nz = ref[ok] != 0
        rel = err[nz] / np.abs(ref[ok][nz])
        rows.append({
            "rule": rule.value, "blocks": int(s.size),
            "scale_differs": int((s != base).sum()), "baseline": base_rule.value,
            "max_abs_err": float(err.max()) if err.size else 0.0,
            "mean_abs_err": float(err.mean()) if err.size else 0.0,
            "max_rel_err": float(rel.max()) if rel.size else 0.0,
            "mean_rel_err": float(rel.mean()) if rel.size else 0.0,
            "nonfinite_outputs": int((~np.isfinite(deq)).sum()),
        })
    return rows
