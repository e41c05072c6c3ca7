"""The GPU engine's kernels: ``step.cu`` (one fused step) and ``chain.cu`` (whole dots),
compiled by CuPy (NVRTC), once per process.

:func:`prepare_b` and :func:`step_sums` have the contract of ``mxsim.engine._kernels`` (the
numba kernel): the same arguments, meanings and results, with the operand records holding CuPy
arrays and the results CuPy int64 arrays (sum, lsb, flags). The arithmetic is integer-only and
bit-equal to the numba kernel; tests/mxsim/engine/test_gpu_kernel.py holds the same source, built
for the
host with g++, equal to it. :func:`chain_dot` computes whole dots where
``fast.fused.applies`` (the twin of the numba whole-dot kernel, held equal to it on the host by
tests/mxsim/engine/test_gpu_chain.py). CuPy is imported only when a kernel is prepared or run.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from ... import formats
from .._kernels import ALIGN_CODES, INF, NAN, ZERO
from ..xp import of

__all__ = ["CHAIN_SOURCE", "SOURCE", "TILE_COLS", "TILE_ROWS", "chain_dot", "chain_name",
           "chain_source", "kernel_name", "plain_path", "plain_widths", "prepare_b", "source",
           "step_sums"]

#: The kernel source, next to this module.
SOURCE = Path(__file__).with_name("step.cu")
#: The whole-dot kernel, compiled after the rounding kernel and step.cu (:func:`chain_source`).
CHAIN_SOURCE = Path(__file__).with_name("chain.cu")
#: A block's dots: TILE_ROWS rows of A x TILE_COLS columns of B (step.cu's TR and TN).
TILE_ROWS, TILE_COLS = 8, 32
_OPTIONS = ("-std=c++17",)


def source() -> str:
    """The CUDA C++ text of the step kernel (also built for the host by the tests)."""
    return SOURCE.read_text()


def chain_source() -> str:
    """The CUDA C++ of the whole-dot kernels: formats.round_to's CUDA twin, step.cu, chain.cu
    (one translation unit; also built for the host by the tests)."""
    from ...formats.rounding import gpu_source
    return "\n".join((gpu_source(), source(), CHAIN_SOURCE.read_text()))


def chain_name(align: str, normalized: bool) -> str:
    """The extern "C" whole-dot kernel for alignment ``align`` and the product rule."""
    return f"mxsim_chain_{ALIGN_CODES[align]}_{int(bool(normalized))}"


def kernel_name(align: str, normalized: bool) -> str:
    """The extern "C" kernel computing alignment ``align`` (rz, rd, rne, rz-jam)."""
    return f"mxsim_step_{ALIGN_CODES[align]}_{int(bool(normalized))}"


@functools.cache
def _module():
    import cupy
    return cupy.RawModule(code=source(), options=_OPTIONS)


@functools.cache
def _kernel(name: str, device: int):
    # One function handle per device: a RawModule loads lazily on the current device.
    return _module().get_function(name)


@functools.cache
def _chain_module():
    import cupy
    return cupy.RawModule(code=chain_source(), options=_OPTIONS)


@functools.cache
def _chain_kernel(name: str, device: int):
    return _chain_module().get_function(name)


def _side(op, scale, transpose: bool) -> tuple:
    """One operand with its block scales folded in: sign, sig, lsb, e, flags (int32,
    contiguous), as ``_kernels._side`` does on the host."""
    import cupy
    sig, lsb, e = op.sig, op.lsb, op.e
    nan, zero = op.nan, op.zero
    if scale is not None:
        sig, lsb, e = sig * scale.sig, lsb + scale.lsb, e + scale.e
        nan, zero = nan | scale.nan, zero | scale.zero
    flag = nan * NAN | op.inf * INF | zero * ZERO
    arrays = (op.sign, sig, lsb, e, flag)
    if transpose:
        arrays = tuple(x.T for x in arrays)
    return tuple(cupy.asarray(x).astype(cupy.int32, order="C", copy=False) for x in arrays)


def prepare_b(b, sb) -> tuple:
    """B's columns for :func:`step_sums`, prepared once per step: scales folded in, (N, g)
    int32 CuPy arrays, and whether each column holds a NaN or Inf."""
    side = _side(b, sb, True)
    return (*side, (side[4] & (NAN | INF)).any(axis=1))


def step_sums(a, sa, b_side, acc, frac_bits: int, align: str, normalized: bool,
              e_zero: int, zero_acc: bool = False) -> tuple:
    """(sum, lsb, flags) per dot of one fused step, CuPy int64 arrays (r, N).

    Same contract as ``mxsim.engine._kernels.step_sums``: rows ``a`` (r, g) with block scales
    ``sa`` (or None) against ``b_side`` from :func:`prepare_b`; ``acc`` an operand record or
    None (``zero_acc``: +0 everywhere, it takes part only in the maximum). ``flags`` bits: 1
    NaN, 2 +Inf, 4 -Inf, 8 every term is -0.
    """
    import cupy
    a_side = _side(a, sa, False)
    r, g = a_side[1].shape
    n = b_side[1].shape[0]
    if b_side[1].shape[1] != g:
        raise ValueError(f"B's step must have {g} terms like A's, not {b_side[1].shape[1]}")
    if acc is not None:
        fields = (acc.sign, acc.sig, acc.lsb, acc.e,
                  acc.nan * NAN | acc.inf * INF | acc.zero * ZERO)
        accs = tuple(cupy.asarray(x).astype(cupy.int64, order="C", copy=False) for x in fields)
    else:
        accs = (cupy.zeros((1, 1), cupy.int64),) * 5
    out = tuple(cupy.empty((r, n), cupy.int64) for _ in range(3))
    if r == 0 or n == 0:
        return out
    col_tiles = -(-n // TILE_COLS)
    blocks = -(-r // TILE_ROWS) * col_tiles
    kernel = _kernel(kernel_name(align, normalized), cupy.cuda.runtime.getDevice())
    kernel((blocks,), (TILE_COLS, TILE_ROWS),
           (*a_side, *b_side[:5], *accs, cupy.int64(r), cupy.int64(n), cupy.int32(g),
            cupy.int32(acc is not None), cupy.int32(bool(zero_acc)), cupy.int32(frac_bits),
            cupy.int32(e_zero), cupy.int64(col_tiles), *out))
    return out


def plain_widths(sign, sig, lsb, e, flag) -> tuple[int, int, bool] | None:
    """For one side (int32 fields): the largest significand's bit length, the largest
    ``bit_length(sig) + lsb - e`` (how far a product's bits reach above its alignment
    exponent, per side) and whether every LSB and alignment exponent fits 16 bits; None for a
    side without a non-zero significand (its products are all zero)."""
    xp = of(sig)
    nz = sig != 0
    if not bool(nz.any()):
        return None
    bits = xp.frexp(xp.abs(sig).astype(np.float64))[1]       # exact below 2**53
    reach = int(xp.where(nz, bits + lsb - e, -(1 << 20)).max())
    small = bool((xp.abs(lsb) < (1 << 15)).all() and (xp.abs(e) < (1 << 15)).all())
    return int(bits.max()), reach, small


def plain_path(spec, a, b) -> bool:
    """Whether ``chain.cu``'s plain path computes these sides: raw products, RZ alignment, no
    NaN or Inf among either side's codes (a NaN or Inf has a zero significand), 31-bit
    products and aligned terms, 16-bit exponents."""
    if spec.align.value != "rz" or spec.product.value != "raw":
        return False
    if any(bool(((x[4] & (NAN | INF)) != 0).any()) for x in (a, b)):
        return False
    wa, wb = plain_widths(*a), plain_widths(*b)
    if wa is None or wb is None:
        return True                     # every product is zero
    return (wa[2] and wb[2] and wa[0] + wb[0] <= 31
            and wa[1] + wb[1] + spec.frac_bits <= 31)


def chain_dot(spec, vs):
    """D of ``vs`` (CuPy arrays) computed whole per dot on the GPU, as
    :func:`mxsim.engine.fast.fused.dot` computes it on the CPU: codes of d_format, a CuPy
    array shaped as the chain gives them. Only for specs ``fast.fused.applies`` to."""
    import cupy

    from ..fast import fused
    from ..fast.operands import Operands
    ops = Operands.of(spec, vs)
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n = vs.m, vs.n
    plan = fused.plan(spec, vs.k)
    dev = {key: cupy.asarray(plan[key]) for key in ("bounds", "pa", "pc", "pp")}
    out = cupy.empty((nb, m, n), cupy.uint32)
    col_tiles = -(-n // TILE_COLS)
    blocks = -(-m // TILE_ROWS) * col_tiles
    none = cupy.zeros(1, cupy.int64)
    for bi in range(nb):
        sa = None if ops.sa is None else ops.sa.take(bi)
        sb = None if ops.sb is None else ops.sb.take(bi)
        a = _side(ops.a.take(bi), sa, False)
        b = _side(ops.b.take(bi), sb, True)
        plain = plain_path(spec, a, b)
        ints = cupy.asarray(np.array([vs.k, vs.c is not None, plan["k_inst"], plan["n_inst"],
                                      len(plan["bounds"]) - 1, plan["promote"],
                                      *plan["cfg"][[0, 3]], plan["move"], plain], np.int32))
        name = "mxsim_chain_plain" if plain else chain_name(spec.align.value,
                                                            bool(plan["cfg"][2]))
        kernel = _chain_kernel(name, cupy.cuda.runtime.getDevice())
        c = none if vs.c is None else cupy.ascontiguousarray(
            vs.c.reshape(nb, m, n)[bi].astype(cupy.int64))
        if blocks:
            kernel((blocks,), (TILE_COLS, TILE_ROWS),
                   (*a, *b, c, dev["bounds"], dev["pa"], dev["pc"], dev["pp"], np.int64(m),
                    np.int64(n), ints, np.uint32(plan["d_nan"]), np.int64(col_tiles), out[bi]))
    d_fmt = formats.get(spec.d_format)
    return out.astype(d_fmt.code_dtype).reshape(vs.out_shape)
