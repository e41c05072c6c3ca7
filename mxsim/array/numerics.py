"""The output bits of a GEMM on an array of units, in the dataflow's accumulation order.

An array changes *when* and *where* each output's K is summed, and that changes D when the
accumulator rounds:

``chain`` (output-stationary, and weight- or input-stationary with accumulators in
    registers): every K-block of an output goes through one unit's C chain in K order (D of
    one instruction is C of the next), whether the blocks stay in one unit (OS) or the partial
    travels down a column of units and re-enters the column for the next K-tile (WS/IS). This
    is the engine's own chain: :func:`mxsim.engine.fast.dot` of the whole K.
``tiles`` (weight- or input-stationary with accumulators in a tensor memory): K is cut into
    K-tiles of ``k_tile`` (the K one pass down the array's rows covers); each tile is chained
    through the units from +0, and the tile's FP32 result is added to the accumulator in
    tensor memory by an FP32 add rounded to nearest even (IEEE overflow), tile after tile,
    starting from C. A NaN total is the unit's NaN code (``spec.d_nan``), as the engine's D.

Both come from the engine (:func:`mxsim.engine.fast.dot` per tile and its exact-sum-rounded-
once adder); :func:`accumulate_reference` computes the same from the exact reference engine
(:func:`mxsim.engine.reference.dot`) and rational arithmetic, one output at a time, to hold the
fast path equal to it in tests.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import numpy.typing as npt

from .. import formats
from ..errors import MxsimError
from ..formats.policy import Overflow, Rounding
from ..spec import UnitSpec, ZeroSign
from ..vectors import VectorSet

__all__ = ["ORDERS", "AccumulationError", "order_of", "k_slices", "accumulate",
           "accumulate_reference"]

ORDERS = ("chain", "tiles")


class AccumulationError(MxsimError, ValueError):
    """An accumulation order that cannot apply to this unit or GEMM (one line)."""


def order_of(dataflow: str, accumulators: str) -> str:
    """The accumulation order of a dataflow ("os", "ws", "is") with its accumulators
    ("registers", "tmem"): see the module docstring."""
    return "tiles" if dataflow in ("ws", "is") and accumulators == "tmem" else "chain"


def k_slices(k: int, k_tile: int) -> list[slice]:
    """The K-tiles of a K: ``k_tile`` elements each, the last one shorter when it must."""
    return [slice(s, min(s + k_tile, k)) for s in range(0, k, k_tile)]


def _check(spec: UnitSpec, vs: VectorSet, order: str, k_tile: int | None) -> None:
    if order not in ORDERS:
        raise AccumulationError(f"accumulation order must be one of {', '.join(ORDERS)}, "
                                f"not {order!r}")
    if order == "chain":
        return
    if k_tile is None or k_tile < 1 or k_tile % spec.k:
        raise AccumulationError(f"the K-tile must be a positive multiple of the unit's k "
                                f"({spec.k}), not {k_tile}")
    if spec.d_format != "fp32" or vs.c_format != "fp32":
        raise AccumulationError(f"a tensor memory adds FP32 tiles: the unit's D (and C) must "
                                f"be fp32, not {spec.d_format}")
    if spec.epilogue is not None or spec.promote_every is not None:
        raise AccumulationError(f"unit {spec.name!r} scales or promotes its whole K "
                                f"(epilogue / promote_every): its K cannot be cut into tiles "
                                f"added in FP32")


def _tile(vs: VectorSet, ks: slice) -> VectorSet:
    """The operands of one K-tile (C dropped: the tile's chain starts from +0)."""
    blk = vs.block
    sa = vs.a_scale[..., ks.start // blk:ks.stop // blk] if blk else vs.a_scale
    sb = vs.b_scale[..., ks.start // blk:ks.stop // blk, :] if blk else vs.b_scale
    return vs.replace(a=vs.a[..., ks], b=vs.b[..., ks, :], a_scale=sa, b_scale=sb, c=None,
                      d=None)


def accumulate(spec: UnitSpec, vs: VectorSet, order: str = "chain",
               k_tile: int | None = None) -> npt.NDArray:
    """D codes (``vs.out_shape``) of the GEMM of ``vs`` on units of ``spec`` summed in
    ``order`` with K-tiles of ``k_tile`` (for ``tiles``)."""
    from ..engine import fast
    from ..engine.fast.adders import add_round

    _check(spec, vs, order, k_tile)
    if order == "chain":
        return fast.dot(spec, vs)
    fp32 = formats.get("fp32")
    acc = (np.zeros(vs.out_shape, np.uint32) if vs.c is None else vs.c.astype(np.uint32))
    for ks in k_slices(vs.k, k_tile):
        part = fast.dot(spec, _tile(vs, ks))
        acc = add_round(fp32, acc, fp32, part, fp32, Rounding.RNE, Overflow.IEEE,
                        spec.zero_sign)
    return _unit_nan(spec, acc)


def _unit_nan(spec: UnitSpec, d: npt.NDArray) -> npt.NDArray:
    """D with every NaN as the unit's NaN code (``spec.d_nan``, as the engine's D has it)."""
    fp32 = formats.get("fp32")
    return np.where(fp32.classify(d) == int(formats.Class.NAN), spec.d_nan, d).astype(np.uint32)


def _add_fp32_ref(x: int, y: int, zero_sign: ZeroSign) -> int:
    """x + y of two FP32 codes, exact, rounded once to nearest even (IEEE overflow)."""
    from ..engine.reference import round_fp32_rne

    fp32 = formats.get("fp32")
    vx, vy = (float(fp32.decode(np.array([v], np.uint32))[0]) for v in (x, y))
    if not (np.isfinite(vx) and np.isfinite(vy)):
        s = vx + vy                       # IEEE rules for Inf and NaN
        return fp32.code_of_nan if np.isnan(s) else (0xFF800000 if s < 0 else 0x7F800000)
    q = Fraction(vx) + Fraction(vy)
    if q == 0:
        both_neg = x >> 31 and y >> 31
        return 0x80000000 if zero_sign is ZeroSign.IEEE and both_neg else 0
    return round_fp32_rne(q)


def accumulate_reference(spec: UnitSpec, vs: VectorSet, order: str = "chain",
                         k_tile: int | None = None) -> npt.NDArray:
    """:func:`accumulate` from the exact reference engine and rational adds (slow)."""
    from ..engine import reference

    _check(spec, vs, order, k_tile)
    if order == "chain":
        return reference.dot(spec, vs)
    acc = (np.zeros(vs.out_shape, np.uint32) if vs.c is None else vs.c.astype(np.uint32))
    acc = acc.reshape(-1).copy()
    for ks in k_slices(vs.k, k_tile):
        part = np.asarray(reference.dot(spec, _tile(vs, ks)), np.uint32).reshape(-1)
        acc = np.array([_add_fp32_ref(int(x), int(y), spec.zero_sign)
                        for x, y in zip(acc, part, strict=True)], np.uint32)
    return np.array([spec.d_nan if _is_nan(int(x)) else int(x) for x in acc],
                    np.uint32).reshape(vs.out_shape)


def _is_nan(code: int) -> bool:
    return (code >> 23) & 0xFF == 0xFF and code & 0x7FFFFF != 0
