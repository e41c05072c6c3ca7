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
from .operands import Operand, special_codes

__all__ = ["apply_epilogue", "block_fma", "block_slices", "fma_fp32", "mul_fp32"]


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
    """IEEE FP32 ``fma(x, y, z)`` on bit patterns: rounded once to nearest even.

    In float64 the product of two FP32 values is exact; TwoSum gives the sum's rounding error
    exactly, which turns the float64 sum into its round-to-odd value (53 >= 24 + 2 bits), and
    rounding that to FP32 is the correctly rounded FMA (Boldo & Melquiond, 2008)."""
    with np.errstate(all="ignore"):         # NaN and Inf flow through as IEEE says
        f64 = [np.asarray(v, np.uint32).view(np.float32).astype(np.float64) for v in (x, y, z)]
        prod = f64[0] * f64[1]
        s = prod + f64[2]
        bb = s - prod
        err = (prod - (s - bb)) + (f64[2] - bb)
        even = (s.view(np.uint64) & np.uint64(1)) == 0
        fix = np.isfinite(s) & (err != 0) & even
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
        return s.astype(np.float32).view(np.uint32)


def block_slices(spec: UnitSpec, vs: VectorSet
                 ) -> tuple[UnitSpec, list[tuple[VectorSet, npt.NDArray[np.uint32]]]]:
    """(partial-sum spec, [(vectors of one 128-K block, FP32 bits of fl(sa*sb))]) of a
    block-wise scaled unit: each block is the chain from +0 without scales or promotion."""
    n = vs.n
    out = []
    for kb in range(vs.k // 128):
        inner, plain = without_epilogue(spec, vs, slice(kb * 128, (kb + 1) * 128))
        sa = np.asarray(vs.a_scale, np.float32)[..., kb][..., :, None]
        sb = np.repeat(np.asarray(vs.b_scale, np.float32)[..., kb, :], 128, axis=-1)[..., :n]
        shape = vs.batch_shape + (vs.m, n)
        s = mul_fp32(np.broadcast_to(sa, shape).view(np.uint32),
                     np.broadcast_to(sb[..., None, :], shape).view(np.uint32))
        out.append((plain, s))
    return inner, out


def block_fma(spec: UnitSpec, vs: VectorSet,
              partials: Iterable[tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]]
              ) -> npt.NDArray[np.uint32]:
    """Block-wise FP32 scales: ``total = fma(partial, fl(sa*sb), total)`` over the blocks'
    ``(partial, fl(sa*sb))`` in K order, from C (or +0); NaN becomes ``spec.d_nan``."""
    shape = vs.batch_shape + (vs.m, vs.n)
    total = np.zeros(shape, np.uint32) if vs.c is None else np.asarray(vs.c, np.uint32)
    for partial, s in partials:
        total = fma_fp32(partial, s, total)
    nan = formats.get("fp32").classify(total) == formats.Class.NAN
    return np.where(nan, np.uint32(spec.d_nan), total).astype(np.uint32)


def _epilogue_scales(vs: VectorSet) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
    """FP32 bits of each dot's A scale and B scale (per tensor or row-wise)."""
    shape = vs.batch_shape + (vs.m, vs.n)
    sa = np.broadcast_to(np.asarray(vs.a_scale, np.float32), shape if vs.a_scale.ndim == 0
                         else vs.batch_shape + (vs.m, 1))
    sb = np.broadcast_to(np.asarray(vs.b_scale, np.float32), shape if vs.b_scale.ndim == 0
                         else vs.batch_shape + (1, vs.n))
    return (np.broadcast_to(sa, shape).view(np.uint32),
            np.broadcast_to(sb, shape).view(np.uint32))


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
    nan = formats.get("fp32").classify(out) == formats.Class.NAN
    return np.where(nan, np.uint32(spec.d_nan), out).astype(np.uint32)
