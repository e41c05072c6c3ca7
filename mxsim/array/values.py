"""The output codes of a GEMM on an array, from the engine, in the dataflow's order of K.

Nothing here computes arithmetic: every value is ``mxsim.engine.fast.dot`` of the array's
unit (see :mod:`mxsim.array.spec` for which order each dataflow and accumulator gives).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ..engine import fast
from ..errors import MxsimError
from ..spec import UnitSpec
from ..vectors import VectorSet
from .spec import AccKind, ArrayError, ArraySpec, Dataflow

__all__ = ["operands", "unit_for", "final_codes", "chain_codes"]


def operands(array: ArraySpec, m: int, n: int, k: int, a, b, c=None, a_scale=None,
             b_scale=None) -> VectorSet:
    """The GEMM's operands as a vector set in the unit's formats (ArrayError, one line, when
    a shape, dtype or scale does not fit)."""
    unit = array.unit
    try:
        vs = VectorSet(a=np.asarray(a), b=np.asarray(b), a_format=unit.a_format,
                       b_format=unit.b_format, c=None if c is None else np.asarray(c),
                       a_scale=None if a_scale is None else np.asarray(a_scale),
                       b_scale=None if b_scale is None else np.asarray(b_scale),
                       scale_format=unit.scale_format if a_scale is not None else None,
                       block=unit.block if a_scale is not None else None,
                       c_format=unit.d_format, d_format=unit.d_format)
    except MxsimError as exc:
        raise ArrayError(f"GEMM operands: {exc}") from None
    if vs.batch_shape or (vs.m, vs.n, vs.k) != (m, n, k):
        raise ArrayError(f"GEMM operands must be A ({m}, {k}) and B ({k}, {n}), not A "
                         f"{vs.a.shape} and B {vs.b.shape}")
    try:
        unit.check_vectors(vs)
    except MxsimError as exc:
        raise ArrayError(f"GEMM operands: {exc}") from None
    return vs


def unit_for(array: ArraySpec) -> UnitSpec:
    """The spec whose engine dot over the whole K is the array's D: the unit itself, or for
    "ws"/"is" with "tmem" accumulators the unit promoted every ``rows`` instructions with a
    round-to-nearest-even FP32 add (each K-tile's partial added into the total)."""
    unit = array.unit
    if array.dataflow is Dataflow.OS or array.accumulators.kind is AccKind.REGISTERS:
        return unit
    if unit.promote_every is not None or unit.epilogue is not None:
        raise ArrayError(f"Array {array.name!r}: a {array.dataflow.value} array with tmem "
                         f"accumulators adds K-tiles in FP32; unit {unit.name!r} already "
                         f"promotes or has an epilogue (use register accumulators)")
    return unit.replace(promote_every=array.rows, promote_rounding="rne")


def final_codes(array: ArraySpec, vs: VectorSet) -> npt.NDArray[np.uint32]:
    """D of the GEMM (codes of the unit's ``d_format``), as the array adds K."""
    return np.asarray(fast.dot(unit_for(array), vs))


def chain_codes(array: ArraySpec, vs: VectorSet) -> npt.NDArray:
    """``(M, N, K / k)``: the D of every instruction of every output when K runs as one chain
    of instructions (instruction ``kb`` takes instruction ``kb - 1``'s D as C; the first
    takes the GEMM's C), each from the engine. Its last plane is :func:`final_codes` for a
    unit without promotion or epilogue (a test holds them equal)."""
    unit, k = array.unit, array.unit.k
    if unit.promote_every is not None or unit.epilogue is not None:
        raise ArrayError(f"Unit {unit.name!r} promotes or has an epilogue: its instructions "
                         f"do not chain one by one through the accumulators")
    blocks = vs.k // k
    out = np.empty((vs.m, vs.n, blocks), np.uint32 if unit.d_format == "fp32" else np.uint16)
    c = vs.c
    per = (unit.block or k) if vs.a_scale is not None else None
    for kb in range(blocks):
        part = vs.replace(a=vs.a[:, kb * k:(kb + 1) * k], b=vs.b[kb * k:(kb + 1) * k, :], c=c,
                          a_scale=None if per is None else vs.a_scale[:, kb * k // per:
                                                                      (kb + 1) * k // per],
                          b_scale=None if per is None else vs.b_scale[kb * k // per:
                                                                      (kb + 1) * k // per, :],
                          d=None)
        c = np.asarray(fast.dot(unit, part))
        out[:, :, kb] = c
    return out
