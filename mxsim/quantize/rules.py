"""The scale rules of block quantisation, each the exact definition of one peer.

:class:`ScaleRule` names the rules (torchao's four, the OCP letter, Transformer Engine's);
:func:`scale_finite` gives a block's E8M0 scale code and element shift from its amax, with
torch's FP32 log2 reproduced exactly where a rule uses it. Also the checks every quantiser
applies to its element format, rule and rounding mode.
"""

from __future__ import annotations

import enum
from decimal import Decimal, localcontext
from functools import cache

import numpy as np
import numpy.typing as npt

from .. import formats
from ..errors import MxsimError
from ..formats import ELEMENT_FORMATS, Format, Rounding

__all__ = [
    "QuantizeError", "ScaleRule", "NanBlocks", "ROUNDINGS", "RULE_FORMATS", "TORCHAO_FORMATS",
    "rules_for", "element_format", "rule_for", "rounding_mode", "scale_finite",
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


ROUNDINGS = ("rne", "rz", "stochastic")
#: The element formats torchao quantises (every MX element format but MXINT8).
TORCHAO_FORMATS = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")
#: Element formats each rule is defined for. torchao has no MXINT8 and Transformer Engine's
#: E8M0 recipe is MXFP8 only; the OCP letter covers every MX element format.
RULE_FORMATS: dict[ScaleRule, tuple[str, ...]] = {
    ScaleRule.FLOOR: TORCHAO_FORMATS, ScaleRule.CEIL: TORCHAO_FORMATS,
    ScaleRule.EVEN: TORCHAO_FORMATS, ScaleRule.RCEIL: TORCHAO_FORMATS,
    ScaleRule.OCP: ELEMENT_FORMATS, ScaleRule.RCEIL_SAT: ("e4m3", "e5m2"),
}


def rules_for(elem_format: str | Format) -> list[ScaleRule]:
    """The scale rules defined for an element format, in :class:`ScaleRule` order."""
    name = element_format(elem_format).name
    return [r for r in ScaleRule if name in RULE_FORMATS[r]]


# -- argument checks -------------------------------------------------------------------------

def element_format(elem_format: str | Format) -> Format:
    fmt = formats.get(elem_format)
    if fmt.name not in ELEMENT_FORMATS:
        raise QuantizeError(f"Element format must be one of {', '.join(ELEMENT_FORMATS)}, "
                            f"not {fmt.name!r}")
    return fmt


def rule_for(rule: ScaleRule | str, fmt: Format) -> ScaleRule:
    r = ScaleRule.of(rule)
    if fmt.name not in RULE_FORMATS[r]:
        allowed = ", ".join(x.value for x in ScaleRule if fmt.name in RULE_FORMATS[x])
        raise QuantizeError(f"Scale rule {r.value!r} is not defined for {fmt.name} elements "
                            f"(it covers {', '.join(RULE_FORMATS[r])}); for {fmt.name} use "
                            f"{allowed}")
    return r


def rounding_mode(rounding: Rounding | str) -> Rounding:
    try:
        mode = Rounding.of(rounding)
    except MxsimError:
        mode = None
    if mode is None or mode.value not in ROUNDINGS:
        raise QuantizeError(f"Rounding must be one of {', '.join(ROUNDINGS)}, not {rounding!r}")
    return mode


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


def log2_up_thresholds() -> tuple[int, npt.NDArray[np.int64]]:
    """``(kmin, up)``: ``fl32(log2 x) == k`` for ``x = 2**k * (1 + j * 2**-23)`` with
    ``0 < j <= up[k - kmin]`` (the thresholds :func:`_torch_log2_ceil` reads), for other
    implementations of the same rounding (:mod:`mxsim.torch.quantise`)."""
    return _KMIN, _log2_thresholds()[0]


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

def scale_finite(rule: ScaleRule, fmt: Format, amax: npt.NDArray[np.uint32]
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
