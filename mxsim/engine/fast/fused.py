"""Whole dots in one compiled pass: the units it computes and the call (``engine._fused``).

The chain of :mod:`.chain` runs each fused step over an (M, N) block in the step kernel, then
rounds, converts and promotes in numpy, one pass each. For the units most presets are (see
:func:`applies`) :func:`dot` computes each dot whole in one kernel, codes in, D out: the
same bits (tests/mxsim/engine/test_fused.py holds it equal to the numpy path and the step
kernel), without the (M, N) temporaries. On a GPU the engine's kernel module (``kernel``, see
:func:`.paths.step_kernels`) does the same where it has a ``chain_dot``.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt

from ... import formats
from ...formats import Rounding
from ...formats.rounding import rounding_params
from ...spec import CMode, Product, Reduce, Specials, UnitSpec, ZeroSign
from ...vectors import VectorSet
from .. import _kernels
from ..xp import of as xp_of
from .operands import Operands, code_table
from .paths import kernel_applies

__all__ = ["applies", "dot", "plan"]

_CHUNK_PRODUCTS = 1 << 22       # products per kernel call (a share of the rows)
# The kernel's blocks of dots: every instruction of the chain runs over a block before the
# next, so one instruction's slices of A (rows) and B (columns), each one piece in memory
# (packed_sides), stay in cache at any K. Tried by hand on the 2-core machine at the K sweep's
# shapes (benchmarks/bench_engine.py; no record of the tries): 16 rows by 128 columns.
_TILE_COLUMNS = 128
_TILE_ROWS = 16
_THREADS = os.cpu_count() or 1


def _ieee(fmt: formats.Format) -> bool:
    return fmt.kind == "float" and fmt.specials is formats.Specials.IEEE and fmt.has_inf \
        and fmt.has_nan


def _bounds(spec: UnitSpec) -> list[int] | None:
    """The steps' first K offsets and the instruction's end, when the steps are consecutive
    runs of K in order (else None)."""
    bounds = [0]
    for step in spec.steps():
        if list(step) != list(range(bounds[-1], bounds[-1] + len(step))):
            return None
        bounds.append(bounds[-1] + len(step))
    return bounds if bounds[-1] == spec.k else None


def applies(spec: UnitSpec) -> bool:
    """Whether the whole-dot kernel computes ``spec``: truncating steps (the step kernel's),
    chained in order with C in the first step, zeros +0, IEEE specials, IEEE-style
    accumulator and output formats, rounding that is not stochastic; no FP32-scale
    epilogue (the dispatcher applies it after)."""
    return (kernel_applies(spec) and spec.epilogue is None and spec.reduce is Reduce.CHAIN
            and spec.c_mode is CMode.STEP and spec.zero_sign is ZeroSign.POSITIVE
            and spec.specials is Specials.IEEE
            and Rounding.STOCHASTIC not in (spec.acc_rounding, spec.promote_rounding)
            and _ieee(formats.get(spec.acc_format)) and _ieee(formats.get(spec.d_format))
            and _bounds(spec) is not None)


def plan(spec: UnitSpec, k: int) -> dict:
    """The kernel's arguments that depend on the spec alone (and K): step bounds, instruction
    count, promotion, configuration and the three rounding parameter vectors."""
    d_fmt, acc_fmt = formats.get(spec.d_format), formats.get(spec.acc_format)
    return dict(
        bounds=np.asarray(_bounds(spec), np.int64), k_inst=spec.k, n_inst=k // spec.k,
        # A promotion beyond the last instruction is never made: clamped to fit an int64.
        promote=min(spec.promote_every, k // spec.k + 1) if spec.promote_every else 0,
        cfg=np.array([spec.frac_bits, _kernels.ALIGN_CODES[spec.align.value],
                      spec.product is Product.NORMALIZED, spec.e_zero, 0,
                      _TILE_COLUMNS,
                      _quick(acc_fmt, spec.acc_rounding), _TILE_ROWS], np.int64),
        pa=rounding_params(acc_fmt, spec.acc_rounding, spec.overflow),
        pc=rounding_params(d_fmt, spec.acc_rounding, spec.overflow),
        pp=rounding_params(d_fmt, spec.promote_rounding, spec.overflow),
        move=_move(acc_fmt, d_fmt), d_nan=spec.d_nan)


def _quick(acc: formats.Format, rounding: Rounding) -> bool:
    """Whether the kernel may round the step sums to ``acc`` by its branch-free RZ / RNE
    (``_fused._round_sum``): one of those modes, and a largest significand of all ones."""
    return rounding in (Rounding.RZ, Rounding.RNE) and acc.max_sig == (2 << acc.man_bits) - 1


def _move(acc: formats.Format, d: formats.Format) -> int:
    """How many bits wider ``d``'s mantissa is when a code of ``acc`` converts to ``d`` by
    moving its fields (as fast.adders.convert does: the same exponents and specials), else
    -1 (the conversion rounds)."""
    if acc.name == d.name:
        return 0
    if (acc.exp_bits, acc.bias, acc.specials) == (d.exp_bits, d.bias, d.specials) \
            and d.man_bits >= acc.man_bits:
        return d.man_bits - acc.man_bits
    return -1


def sides(ops: Operands, bi: int) -> tuple[npt.NDArray, npt.NDArray]:
    """Batch entry ``bi``'s A (5, M, K) and B (5, N, K), int32, scales folded in: sign,
    significand, LSB exponent, alignment exponent and flags (``_kernels.side``)."""
    sa = None if ops.sa is None else ops.sa.take(bi)
    sb = None if ops.sb is None else ops.sb.take(bi)
    a = np.stack(_kernels.side(ops.a.take(bi), sa, False))
    b = np.stack(_kernels.side(ops.b.take(bi), sb, True))
    return a, b


def _tables(spec: UnitSpec, vs: VectorSet) -> tuple | None:
    """The code tables of A, B and the scales (None for no scales), or None where the
    kernel's sides cannot be looked up from the codes (operands above 16 bits, scales above
    8, a spec that upcasts): :meth:`Operands.of` makes them then."""
    finite = spec.specials is Specials.NONE
    ta, tb = code_table(vs.a_format, finite), code_table(vs.b_format, finite)
    ts = None if vs.scale_format is None else code_table(vs.scale_format, finite, True)
    if spec.upcast is not None or ta is None or tb is None or (
            vs.scale_format is not None and ts is None):
        return None
    return ta, tb, ts


def packed_sides(spec: UnitSpec, vs: VectorSet, bi: int, signed: bool, run=map
                 ) -> tuple[npt.NDArray, npt.NDArray, npt.NDArray, npt.NDArray] | None:
    """Batch entry ``bi``'s A and B as the kernel reads them, looked up from the codes in
    :func:`code_table` by the compiled ``_fused.pack_rows``: (K / spec.k, 5, rows, spec.k)
    int32 (:func:`sides` by instruction), and whether each row of A and column of B holds a
    NaN or an Inf; ``signed`` folds the signs into the significands and gives B as
    (K / spec.k, 5, spec.k, N), as the kernel's signed steps read it. ``run`` maps the row
    chunks (a thread pool's ``map``). None where :func:`_tables` is None."""
    from .. import _fused
    tables = _tables(spec, vs)
    if tables is None:
        return None
    ta, tb, ts = tables
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n, k, ki = vs.m, vs.n, vs.k, spec.k
    jobs, outs, specials = [], [], []
    for codes, table, scales, rows, fmt, by_col in (
            (vs.a.reshape(nb, m, k)[bi], ta, vs.a_scale, m, vs.a_format, False),
            (vs.b.reshape(nb, k, n)[bi], tb, vs.b_scale, n, vs.b_format, True)):
        out = np.empty((k // ki, 5, rows, ki), np.int32)
        if signed and by_col:
            out = np.empty((k // ki, 5, ki, rows), np.int32).transpose(0, 1, 3, 2)
        special = np.empty(rows, np.bool_)
        outs.append(out)
        specials.append(special)
        sc = None if ts is None else np.ascontiguousarray(
            scales.reshape((nb, -1, n) if by_col else (nb, m, -1))[bi])
        step = max(64, -(-rows // (2 * _THREADS)))
        jobs += [(np.ascontiguousarray(codes), (1 << formats.get(fmt).bits) - 1, table, sc,
                  ts, vs.block or 1, ki, signed, by_col, r0, min(rows, r0 + step), out, special)
                 for r0 in range(0, rows, step)]
    list(run(lambda job: _fused.pack_rows(*job), jobs))
    a, b = outs
    return a, b.transpose(0, 1, 3, 2) if signed else b, *specials


def _entry_sides(spec: UnitSpec, vs: VectorSet, ops: Operands | None, bi: int, signed: bool,
                 run) -> tuple:
    """A, B and their NaN/Inf rows for the kernel (:func:`packed_sides`): looked up from the
    codes, or from ``ops`` (:func:`sides`) where that is given; ``signed`` folds the signs
    (from ``ops``, only where no operand holds a NaN or an Inf)."""
    if ops is None:
        return packed_sides(spec, vs, bi, signed, run)
    a, b = sides(ops, bi)
    special = [((x[4] & (_kernels.NAN | _kernels.INF)) != 0).any(axis=1) for x in (a, b)]
    a, b_by = _by_instruction(a, spec.k), _by_instruction(b, spec.k)
    if signed and not (special[0].any() or special[1].any()):
        for x in (a, b_by):
            x[:, 1] = np.where(x[:, 0] == 1, -x[:, 1], x[:, 1])
            x[:, 0] = 0
        b_by = np.ascontiguousarray(b_by.transpose(0, 1, 3, 2))
    return a, b_by, *special


def _by_instruction(side: npt.NDArray, k_inst: int) -> npt.NDArray:
    """A side (5, rows, K) as (K / k_inst, 5, rows, k_inst): one instruction's slice of every
    row in one piece, so a long chain reads each instruction's operands as K = k_inst does
    (as :func:`packed_sides` lays them out)."""
    planes, rows, k = side.shape
    return np.ascontiguousarray(
        side.reshape(planes, rows, k // k_inst, k_inst).transpose(2, 0, 1, 3))


def dot(spec: UnitSpec, vs: VectorSet, kernel=True) -> npt.NDArray | None:
    """D of ``vs`` (codes of d_format, shaped as the chain gives them) computed whole per dot,
    or None where the whole-dot kernel does not apply (the spec, no numba, ``kernel`` not
    True, or a GPU's kernel module without ``chain_dot``)."""
    xp = xp_of(vs.a)
    if not applies(spec) or kernel is False:
        return None
    if xp is not np:
        return None if isinstance(kernel, bool) or not hasattr(kernel, "chain_dot") \
            else kernel.chain_dot(spec, vs)
    if kernel is not True or not _kernels.available():
        return None
    from .. import _fused
    ops = None if _tables(spec, vs) is not None else Operands.of(spec, vs)
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n = vs.m, vs.n
    args = plan(spec, vs.k)
    out = np.empty((nb, m, n), formats.get(spec.d_format).code_dtype)
    # Row chunks of whole blocks, at least two per thread where there are rows enough.
    rows = max(1, _CHUNK_PRODUCTS // max(1, n * vs.k), min(_TILE_ROWS, -(-m // (2 * _THREADS))))
    # Raw products, RZ, and no NaN or Inf in the operands: signs folded into the
    # significands (cfg[4]), tried first and given up where an operand holds a NaN or an Inf.
    may_sign = args["cfg"][1] == 0 and not args["cfg"][2]
    with ThreadPoolExecutor(_THREADS) as pool:
        for bi in range(nb):
            cfg = args["cfg"].copy()
            a, b, *special = _entry_sides(spec, vs, ops, bi, may_sign, pool.map)
            cfg[4] = may_sign and not (special[0].any() or special[1].any())
            if may_sign and not cfg[4] and ops is None:
                a, b, *special = _entry_sides(spec, vs, ops, bi, False, pool.map)
            c = None if vs.c is None else np.ascontiguousarray(
                vs.c.reshape(nb, m, n)[bi], np.int64)

            def run(r0: int, a=a, b=b, special=special, c=c, bi=bi, cfg=cfg) -> None:
                _fused.chain_rows(a, b, *special, c, **{**args, "cfg": cfg}, r0=r0,
                                  r1=min(m, r0 + rows), out=out[bi])

            list(pool.map(run, range(0, m, rows)))
    return out.reshape(vs.out_shape)
