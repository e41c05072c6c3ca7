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

__all__ = ["CHAIN_SOURCE", "FMA_SOURCE", "PACK_SOURCE", "SOURCE", "TILE_COLS", "TILE_ROWS",
           "block_fma", "chain_dot", "chain_name", "chain_source", "code_table", "kernel_name",
           "pack_side", "plain_bound", "plain_path", "plain_widths", "prepare_b", "source",
           "step_sums"]

#: The kernel source, next to this module.
SOURCE = Path(__file__).with_name("step.cu")
#: The whole-dot kernel, compiled after the rounding kernel and step.cu (:func:`chain_source`).
CHAIN_SOURCE = Path(__file__).with_name("chain.cu")
#: Device-side packing of the sides (tables of every code's fields; after chain.cu).
PACK_SOURCE = Path(__file__).with_name("pack.cu")
#: Block-wise FP32 scales: a block's FMA pass (after pack.cu).
FMA_SOURCE = Path(__file__).with_name("fma.cu")
#: A block's dots: TILE_ROWS rows of A x TILE_COLS columns of B (step.cu's TR and TN).
TILE_ROWS, TILE_COLS = 8, 32
_OPTIONS = ("-std=c++17",)


def source() -> str:
    """The CUDA C++ text of the step kernel (also built for the host by the tests)."""
    return SOURCE.read_text()


def chain_source() -> str:
    """The CUDA C++ of the whole-dot kernels: formats.round_to's CUDA twin, step.cu, chain.cu,
    pack.cu and fma.cu (one translation unit; also built for the host by the tests)."""
    from ...formats.rounding import gpu_source
    return "\n".join((gpu_source(), source(), CHAIN_SOURCE.read_text(),
                      PACK_SOURCE.read_text(), FMA_SOURCE.read_text()))


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


def code_table(fmt_name: str, finite: bool, scale: bool = False) -> np.ndarray | None:
    """:func:`mxsim.engine.fast.operands.code_table` (cached there): the fields of every code,
    which the device packing looks terms up in (imported when first asked for)."""
    from ..fast.operands import code_table as table
    return table(fmt_name, finite, scale)


@functools.cache
def _device_table(fmt_name: str, finite: bool, scale: bool, device: int):
    import cupy
    return cupy.asarray(code_table(fmt_name, finite, scale))


def pack_side(codes, scales, fmt_name: str, scale_name: str | None, block: int, finite: bool,
              transpose: bool) -> tuple:
    """One side for the whole-dot kernel, packed on the GPU by ``pack.cu`` from its codes:
    the five int32 (rows, K) fields of ``_side`` (A: codes (M, K); B with ``transpose``:
    codes (K, N), rows are its columns), scales (rows of blocks like the codes) folded in,
    and a device int32 that is 1 where a term is NaN or Inf. Bit-equal to ``_side`` of
    ``Operands.of`` (the tables are its fields); formats of at most 16 bits."""
    import cupy
    device = cupy.cuda.runtime.getDevice()
    codes = cupy.ascontiguousarray(codes)
    rows, k = (codes.shape[1], codes.shape[0]) if transpose else codes.shape
    etab = _device_table(fmt_name, finite, False, device)
    null = np.uint64(0)
    if scales is None:
        stab, sc, srs, sts, blk = _device_table("e8m0", finite, True, device), null, 0, 0, 1
    else:
        sc = cupy.ascontiguousarray(scales.astype(cupy.uint8, copy=False))
        stab = _device_table(scale_name, finite, True, device)
        srs, sts, blk = (1, rows, block) if transpose else (k // block, 1, block)
    rs, ts = (1, rows) if transpose else (k, 1)
    dims = cupy.asarray(np.array([etab.shape[1], rows, k, rs, ts, blk, srs, sts], np.int64))
    out = tuple(cupy.empty((rows, k), cupy.int32) for _ in range(5))
    special = cupy.zeros(1, cupy.int32)
    wide = codes.dtype.itemsize == 2
    codes = codes.astype(cupy.uint16 if wide else cupy.uint8, copy=False)
    if rows * k:
        threads = 256
        blocks = min(-(-(rows * k) // threads), 1 << 16)
        _chain_kernel("mxsim_pack_side", device)(
            (blocks,), (threads,), (null if wide else codes, codes if wide else null, sc, etab,
                                    stab, dims, *out, special))
    return (*out, special)


def plain_bound(spec, a_fmt: str, b_fmt: str, scale_fmt: str | None, finite: bool) -> bool:
    """Whether ``chain.cu``'s plain path computes every pair of sides of these formats that
    holds no NaN or Inf: :func:`plain_widths`'s limits met by every finite code of the
    tables (a significand's bits and reach add over an element and its scale), so that only
    the device packing's NaN/Inf flag is left to check."""
    if spec.align.value != "rz" or spec.product.value != "raw":
        return False
    widths = []
    for name in (a_fmt, b_fmt):
        t = code_table(name, finite).astype(np.int64)
        parts = [t[1:4, (t[4] & (NAN | INF)) == 0]]
        if scale_fmt is not None:
            s = code_table(scale_fmt, finite, True).astype(np.int64)
            parts.append(s[0:3, (s[3] & NAN) == 0])
        bits = reach = lsb = e = 0
        for sig, lo, ex in parts:
            nz = sig != 0
            if not nz.any():
                continue
            b = np.frexp(np.abs(sig[nz]).astype(np.float64))[1]
            bits, reach = bits + int(b.max()), reach + int((b + lo[nz] - ex[nz]).max())
            lsb, e = lsb + int(np.abs(lo).max()), e + int(np.abs(ex).max())
        widths.append((bits, reach, lsb < (1 << 15) and e < (1 << 15)))
    (wa, ra, sa), (wb, rb, sb) = widths
    return sa and sb and wa + wb <= 31 and ra + rb + spec.frac_bits <= 31


def _packed_sides(spec, vs, bi: int, nb: int):
    """Batch entry ``bi``'s sides packed on the GPU and whether the plain path takes them, or
    None where the device packing does not apply (an upcast, a format over 16 bits)."""
    import cupy

    from ...spec import Specials
    finite = spec.specials is Specials.NONE
    if spec.upcast is not None or code_table(vs.a_format, finite) is None \
            or code_table(vs.b_format, finite) is None or (
                vs.scale_format is not None
                and code_table(vs.scale_format, finite, True) is None):
        return None
    m, n, k = vs.m, vs.n, vs.k
    sa = sb = None
    if vs.scale_format is not None:
        sa = vs.a_scale.reshape(nb, m, -1)[bi]
        sb = vs.b_scale.reshape(nb, -1, n)[bi]
    a = pack_side(vs.a.reshape(nb, m, k)[bi], sa, vs.a_format, vs.scale_format, vs.block or 1,
                  finite, False)
    b = pack_side(vs.b.reshape(nb, k, n)[bi], sb, vs.b_format, vs.scale_format, vs.block or 1,
                  finite, True)
    special = bool(cupy.asnumpy(a[5] | b[5])[0])      # the one wait: any NaN or Inf term
    plain = not special and (plain_bound(spec, vs.a_format, vs.b_format, vs.scale_format,
                                         finite) or plain_path(spec, a[:5], b[:5]))
    return a[:5], b[:5], plain


def chain_dot(spec, vs):
    """D of ``vs`` (CuPy arrays) computed whole per dot on the GPU, as
    :func:`mxsim.engine.fast.fused.dot` computes it on the CPU: codes of d_format, a CuPy
    array shaped as the chain gives them. Only for specs ``fast.fused.applies`` to."""
    import cupy

    from ..fast import fused
    from ..fast.operands import Operands
    ops = None
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n = vs.m, vs.n
    plan = fused.plan(spec, vs.k)
    dev = {key: cupy.asarray(plan[key]) for key in ("bounds", "pa", "pc", "pp")}
    out = cupy.empty((nb, m, n), cupy.uint32)
    col_tiles = -(-n // TILE_COLS)
    blocks = -(-m // TILE_ROWS) * col_tiles
    none = cupy.zeros(1, cupy.int64)
    for bi in range(nb):
        packed = _packed_sides(spec, vs, bi, nb)
        if packed is not None:
            a, b, plain = packed
        else:
            ops = Operands.of(spec, vs) if ops is None else ops
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
    return out.astype(d_fmt.code_dtype, copy=False).reshape(vs.out_shape)


def block_fma(spec, vs, partial):
    """Block-wise FP32 scales on the GPU, as ``fast.scales.block_slices`` and ``block_fma``
    compute them: per 128-deep K-block, ``partial(inner, plain)`` (the block's unscaled D, by
    the engine) and one pass of ``fma.cu`` (``total = fma(partial, fl(sa * sb), total)``, from
    C or +0; NaN as ``spec.d_nan`` at the end); FP32 codes, a CuPy array (batch, M, N)."""
    import cupy

    from ...formats.rounding import rounding_params
    from ..epilogue import without_epilogue
    from ..fast.scales import block_scales
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n = vs.m, vs.n
    pf = cupy.asarray(rounding_params(formats.get("fp32"), "rne", "ieee"))
    total = cupy.zeros((nb, m, n), cupy.uint32) if vs.c is None else cupy.ascontiguousarray(
        cupy.asarray(vs.c).reshape(nb, m, n).astype(cupy.uint32))
    blocks = vs.k // 128
    kernel = _chain_kernel("mxsim_block_fma", cupy.cuda.runtime.getDevice())
    grid = (min(max(1, -(-(m * n) // 256)), 1 << 16),)
    for kb in range(blocks):
        inner, plain = without_epilogue(spec, vs, slice(kb * 128, (kb + 1) * 128))
        part = cupy.ascontiguousarray(cupy.asarray(partial(inner, plain), cupy.uint32)
                                      .reshape(nb, m, n))
        sa, sb = (x.reshape(nb, -1) for x in block_scales(vs, kb))
        for bi in range(nb):
            if m * n:
                kernel(grid, (256,), (part[bi], cupy.ascontiguousarray(sa[bi]),
                                      cupy.ascontiguousarray(sb[bi]), total[bi], pf, np.int64(m),
                                      np.int64(n), np.int32(kb == blocks - 1),
                                      np.uint32(spec.d_nan)))
    if blocks == 0:
        nan = (total & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
        total = cupy.where(nan, np.uint32(spec.d_nan), total).astype(cupy.uint32)
    return total.reshape(vs.batch_shape + (m, n))
