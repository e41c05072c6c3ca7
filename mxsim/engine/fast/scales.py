"""FP32-scale epilogues of the fast engine, and the FP32 arithmetic they are built from.

:func:`mul_fp32` and :func:`fma_fp32` are IEEE FP32 multiply and fused multiply-add on bit
patterns, each rounded once to nearest even. :func:`apply_epilogue` scales a unit's D by
per-tensor or row-wise FP32 scales; :func:`block_fma` combines the partial sums of 128-K
blocks with block-wise scales (:func:`block_slices` gives those blocks).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from ... import formats
from ...formats import Overflow
from ...spec import UnitSpec
from ...vectors import VectorSet
from ..epilogue import without_epilogue
from ..xp import of as xp_of
from .adders import exact_sum2
from .operands import Operand, special_codes

__all__ = ["apply_epilogue", "block_fma", "block_scales", "block_slices", "fma_fp32",
           "mul_fp32"]


def mul_fp32(x: npt.NDArray, y: npt.NDArray) -> npt.NDArray[np.uint32]:
    """IEEE FP32 ``x * y`` on bit patterns: the exact product rounded once to nearest even."""
    fp32 = formats.get("fp32")
    ox, oy = Operand.of(fp32, x), Operand.of(fp32, y)
    sign = (ox.sign ^ oy.sign).astype(np.uint8)
    sig = ox.sig.astype(np.uint64) * oy.sig.astype(np.uint64)      # 24 x 24 bits: exact
    codes = formats.round_to(fp32, sign, ox.lsb + oy.lsb, sig, False, "rne", Overflow.IEEE)
    nan = ox.nan | oy.nan | (ox.inf & oy.zero) | (ox.zero & oy.inf)
    inf = (ox.inf | oy.inf) & ~nan
    return special_codes(fp32, nan, inf & (sign == 0), inf & (sign == 1), codes)


def fma_fp32(x: npt.NDArray, y: npt.NDArray, z: npt.NDArray) -> npt.NDArray[np.uint32]:
    """IEEE FP32 ``fma(x, y, z)`` on bit patterns, in integers: rounded once to nearest even.

    The product's 48-bit significand is exact; :func:`.adders.exact_sum2` adds z to it
    exactly (a 62-bit window with a sticky bit) and ``round_to`` rounds the sum once. An
    exact zero is -0 only when both terms are -0; NaN (any NaN, Inf * 0,
    Inf - Inf) is FP32's canonical NaN code."""
    fp32 = formats.get("fp32")
    xp = xp_of(x, y, z)
    x, y, z = xp.broadcast_arrays(*(xp.asarray(v, np.uint32) for v in (x, y, z)))
    ox, oy, oz = Operand.of(fp32, x), Operand.of(fp32, y), Operand.of(fp32, z)
    sp = ox.sign ^ oy.sign
    p = ox.sig * oy.sig                                         # exact: 24 x 24 bits
    neg, mag, base, sticky, exact_zero = exact_sum2(sp, p, ox.lsb + oy.lsb, oz.sign, oz.sig,
                                                    oz.lsb)
    codes = formats.round_to(fp32, neg, base, mag, sticky, "rne", Overflow.IEEE)
    neg_zero = (p == 0) & oz.zero & (sp == 1) & (oz.sign == 1)
    codes = xp.where(exact_zero, xp.where(neg_zero, np.uint32(0x80000000), np.uint32(0)),
                     codes)
    pnan = ox.nan | oy.nan | (ox.inf & oy.zero) | (ox.zero & oy.inf)
    pinf = (ox.inf | oy.inf) & ~pnan
    nan = pnan | oz.nan
    pos = pinf & (sp == 0) | oz.inf & (oz.sign == 0)
    neg = pinf & (sp == 1) | oz.inf & (oz.sign == 1)
    return special_codes(fp32, nan, pos, neg, codes)


def block_scales(vs: VectorSet, kb: int) -> tuple[npt.NDArray[np.uint32],
                                                  npt.NDArray[np.uint32]]:
    """FP32 bits of 128-K block ``kb``'s block-wise scales: A's per row (batch, M) and B's per
    column (batch, N; a B scale covers 128 columns)."""
    xp = xp_of(vs.a)
    sa = xp.asarray(vs.a_scale, np.float32).view(np.uint32)[..., kb]
    sb = xp.repeat(xp.asarray(vs.b_scale, np.float32).view(np.uint32)[..., kb, :], 128,
                   axis=-1)[..., :vs.n]
    return sa, sb


def block_slices(spec: UnitSpec, vs: VectorSet
                 ) -> tuple[UnitSpec, list[tuple[VectorSet, npt.NDArray[np.uint32]]]]:
    """(partial-sum spec, [(vectors of one 128-K block, FP32 bits of fl(sa*sb))]) of a
    block-wise scaled unit: each block is the chain from +0 without scales or promotion."""
    xp = xp_of(vs.a)
    shape = vs.batch_shape + (vs.m, vs.n)
    out = []
    for kb in range(vs.k // 128):
        inner, plain = without_epilogue(spec, vs, slice(kb * 128, (kb + 1) * 128))
        sa, sb = block_scales(vs, kb)
        s = mul_fp32(xp.broadcast_to(sa[..., :, None], shape),
                     xp.broadcast_to(sb[..., None, :], shape))
        out.append((plain, s))
    return inner, out


def block_fma(spec: UnitSpec, vs: VectorSet,
              partials: Iterable[tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]]
              ) -> npt.NDArray[np.uint32]:
    """Block-wise FP32 scales: ``total = fma(partial, fl(sa*sb), total)`` over the blocks'
    ``(partial, fl(sa*sb))`` in K order, from C (or +0); NaN becomes ``spec.d_nan``."""
    shape = vs.batch_shape + (vs.m, vs.n)
    xp = xp_of(vs.a)
    total = xp.zeros(shape, np.uint32) if vs.c is None else xp.asarray(vs.c, np.uint32)
    for partial, s in partials:
        total = fma_fp32(partial, s, total)
    nan = formats.get("fp32").classify(total) == int(formats.Class.NAN)
    return np.where(nan, np.uint32(spec.d_nan), total).astype(np.uint32)


def _epilogue_scales(vs: VectorSet) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
    """FP32 bits of each dot's A scale and B scale (per tensor or row-wise)."""
    shape = vs.batch_shape + (vs.m, vs.n)
    xp = xp_of(vs.a)
    sa = xp.broadcast_to(xp.asarray(vs.a_scale, np.float32).view(np.uint32),
                         shape if vs.a_scale.ndim == 0 else vs.batch_shape + (vs.m, 1))
    sb = xp.broadcast_to(xp.asarray(vs.b_scale, np.float32).view(np.uint32),
                         shape if vs.b_scale.ndim == 0 else vs.batch_shape + (1, vs.n))
    return xp.broadcast_to(sa, shape), xp.broadcast_to(sb, shape)


def apply_epilogue(spec: UnitSpec, vs: VectorSet, d: npt.NDArray) -> npt.NDArray[np.uint32]:
    """The unit's FP32 scales applied to its unscaled D (``alpha`` or ``col-row``)."""
    sa, sb = _epilogue_scales(vs)
    if spec.epilogue == "alpha":
        out = mul_fp32(mul_fp32(sa, sb), d)
        # alpha * D + beta * C with beta = 0: a -0 product plus +0 is +0 (measured on the
        # H200: 33,016 of 33,016 such outputs); the row-wise epilogue keeps -0 (4,098 of them).
        out = np.where(out == np.uint32(0x80000000), np.uint32(0), out)
    else:                                              # col-row
        out = mul_fp32(mul_fp32(d, sb), sa)
    nan = formats.get("fp32").classify(out) == int(formats.Class.NAN)
    return np.where(nan, np.uint32(spec.d_nan), out).astype(np.uint32)
