"""The MX pipeline: float arrays to E8M0 block scales and element codes, and back.

:func:`to_mx` quantises by a :class:`~mxsim.quantize.rules.ScaleRule`, chunk by chunk;
blocks holding Inf or NaN are decided rule by rule, as each peer does. :func:`from_mx` gives
the exact values of MX codes.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import formats
from ..formats import DEFAULT_SR_BITS, Format, Rounding
from . import _kernel
from .blocks import (
    FP32_INF,
    apply_scales,
    check_axis,
    check_block,
    check_codes,
    decode_fp32,
    draw_bits,
    fp32_bits,
    fp32_table,
    from_blocks,
    out_dtype,
    row_max,
    to_blocks,
)
from .elements import elements_exact, elements_fast, torchao_nan_code
from .rules import (
    NanBlocks,
    QuantizeError,
    ScaleRule,
    element_format,
    rounding_mode,
    rule_for,
    scale_finite,
)

__all__ = ["to_mx", "from_mx"]

_QNAN = 0x7FC00000         # the canonical quiet NaN (torch's amax of a block with a NaN)
_X86_DEFAULT_NAN = 0xFFC00000   # what x86 SSE/AVX gives for Inf/Inf, Inf*0 (negative)
_E8M0_NAN = 0xFF
_PTX_FP8_NAN = 0x7F        # what cvt.rn.satfinite.{e4m3,e5m2}x2.f32 makes of any NaN
_FAST_CHUNK = 1 << 18      # elements per chunk of the whole pipeline (fits in cache)
#: Elements from which the compiled loops (numba) run, chunks on every core; below it, numpy.
KERNEL_MIN = 1 << 16


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
    is_nan = mag > FP32_INF
    nan_blk = amax > FP32_INF
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
        inf = amax_te == FP32_INF
        s, k = scale_finite(rule, fmt, np.where(inf, 0, amax_te).astype(np.uint32))
        scale[:] = np.where(inf, 0xFE, s)
        k = np.where(inf, 127, k)
        elems[:] = elements_exact(bits, k, fmt, rounding, rb, sr_bits)
        elems[is_nan] = _PTX_FP8_NAN
        return scale, elems
    if rule is ScaleRule.RCEIL:
        # torchao: NaN amax gives 0xFF and the descale NaN (torch's canonical 0x7FC00000)
        # multiplies every element; Inf amax gives 0xFE and a multiplier of 2**-127.
        k = np.full(n, 127, np.int64)
        scale[:] = np.where(nan_blk, _E8M0_NAN, 0xFE)
        elems[:] = elements_exact(bits, k, fmt, rounding, rb, sr_bits)
        elems[nan_blk] = torchao_nan_code(_QNAN, fmt)
        return scale, elems
    # torchao FLOOR/CEIL/EVEN. Inf without NaN: the exponent field 255 gives the scale
    # 2**(128 - emax), a finite one, and Inf elements saturate to ±max. NaN: 0xFF, whose FP32
    # pattern (0xFF << 23) is +Inf, so elements are x / Inf: finite ones ±0, a NaN keeps its
    # payload (quietened), an Inf becomes x86's default NaN.
    s, k = scale_finite(rule, fmt, np.full(n, FP32_INF, np.uint32))
    scale[:] = np.where(nan_blk, _E8M0_NAN, s)
    elems[:] = elements_exact(bits, k, fmt, rounding, rb, sr_bits)
    if nan_blk.any():
        sub = bits[nan_blk]
        q = np.where((sub & np.uint32(0x7FFFFFFF)) == FP32_INF, np.uint32(_X86_DEFAULT_NAN),
                     sub | np.uint32(0x00400000))
        sub_mag = sub & np.uint32(0x7FFFFFFF)
        elems[nan_blk] = np.where(sub_mag >= FP32_INF, torchao_nan_code(q, fmt),
                                  _zero_codes(sub, fmt))
    return scale, elems


def _nan_only(mag: npt.NDArray[np.uint32], special: npt.NDArray[np.bool_]) -> int | None:
    """Index of the first block whose every element is NaN, or None."""
    idx = np.flatnonzero(special)
    if idx.size == 0:
        return None
    all_nan = (mag[idx] > FP32_INF).all(axis=1)
    return int(idx[all_nan][0]) if all_nan.any() else None


def _quantize_blocks(blocks: npt.NDArray[np.uint32], fmt: Format, rule: ScaleRule,
                     rounding: Rounding, rb: npt.NDArray[np.uint64] | None, sr_bits: int,
                     nan_blocks: NanBlocks, fast: bool, where: str
                     ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
    """Scale and element codes of (n_blocks, block) FP32 bit patterns, chunk by chunk.

    Chunks of about 2**18 elements keep the temporaries in cache, which more than doubles the
    throughput of the table path over whole-array passes. With numba and ``fast`` (RNE or RZ),
    a large input goes through the compiled loops (:mod:`._kernel`), its chunks on every core;
    the chunks' results, and a NaN-only block's error, come in order.
    """
    n, blk = blocks.shape
    compiled = (fast and rounding is not Rounding.STOCHASTIC and blocks.size >= KERNEL_MIN
                and _kernel.available())
    rows = _kernel.chunk_rows(n, blk, _FAST_CHUNK) if compiled else max(1, _FAST_CHUNK // blk)
    scale = np.empty(n, np.uint8)
    elems = np.empty((n, blk), np.uint8)

    def chunk(start: int) -> None:
        sl = slice(start, start + rows)
        _quantize_chunk(blocks[sl], fmt, rule, rounding, None if rb is None else rb[sl],
                        sr_bits, nan_blocks, fast, where, start, compiled,
                        (scale[sl], elems[sl]))
    starts = range(0, n, rows)
    if compiled and len(starts) > 1 and (os.cpu_count() or 1) > 1:
        _kernel.block_amax(blocks[:1])          # compiled (or loaded) once, before the threads
        with ThreadPoolExecutor(os.cpu_count()) as pool:
            list(pool.map(chunk, starts))
    else:
        for start in starts:
            chunk(start)
    return scale, elems


def _quantize_chunk(blocks: npt.NDArray[np.uint32], fmt: Format, rule: ScaleRule,
                    rounding: Rounding, rb: npt.NDArray[np.uint64] | None, sr_bits: int,
                    nan_blocks: NanBlocks, fast: bool, where: str, offset: int,
                    compiled: bool, out: tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]],
                    ) -> None:
    """One chunk's scale and element codes, written into ``out`` (the chunk's rows of the
    whole result: the compiled loop writes its elements there directly)."""
    if compiled:
        amax = _kernel.block_amax_into(blocks, np.empty(len(blocks), np.uint32))
    else:
        amax = row_max(blocks & np.uint32(0x7FFFFFFF))
    special = amax >= FP32_INF
    any_special = bool(special.any())
    if any_special and nan_blocks is NanBlocks.ERROR:
        first = _nan_only(blocks & np.uint32(0x7FFFFFFF), special)
        if first is not None:
            raise QuantizeError(f"Block {offset + first} (in C order, blocks along {where}) "
                                f"holds only NaN, so it has no scale; replace the NaNs, or "
                                f"pass nan_blocks='quantize' to quantise it as {rule.value} "
                                f"does")
    finite_amax = np.where(special, 0, amax).astype(np.uint32) if any_special else amax
    scale, elems = out
    if compiled and rule is ScaleRule.RCEIL:
        scale[:], k = _kernel.rceil_scales(finite_amax, fmt)     # scale_finite, compiled
    else:
        scale[:], k = scale_finite(rule, fmt, finite_amax)
    if compiled:
        _kernel.encode_format(blocks, k, fmt, rounding.value, out=elems)
    elif fast and rounding is not Rounding.STOCHASTIC:
        elems[:] = elements_fast(blocks, k, fmt, rounding)
    else:
        elems[:] = elements_exact(blocks, k, fmt, rounding, rb, sr_bits)
    if any_special:
        idx = np.flatnonzero(special)
        s, e = _special_blocks(rule, fmt, blocks[idx], amax[idx], rounding,
                               None if rb is None else rb[idx], sr_bits)
        scale[idx] = s
        elems[idx] = e


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
    fmt = element_format(elem_format)
    rule = rule_for(scale_rule, fmt)
    mode = rounding_mode(rounding)
    policy = NanBlocks.of(nan_blocks)
    bits = fp32_bits(x)
    ax = check_axis(axis, bits.ndim)
    blk = check_block(block, bits.shape[ax], ax)
    rb = None
    if mode is Rounding.STOCHASTIC:
        rb = to_blocks(draw_bits(bits.shape, seed, random_bits, sr_bits), ax, blk)
    moved_shape = bits.shape[:ax] + bits.shape[ax + 1:] + (bits.shape[ax],)
    scale, elems = _quantize_blocks(to_blocks(bits, ax, blk), fmt, rule, mode, rb, sr_bits,
                                    policy, fast, f"axis {ax}")
    return (from_blocks(scale, moved_shape[:-1] + (moved_shape[-1] // blk,), ax),
            from_blocks(elems, moved_shape, ax))


def from_mx(scale_codes: Any, elem_codes: Any, elem_format: str | Format, block: int = 32,
            axis: int = -1, *, dtype: Any = np.float64) -> npt.NDArray:
    """Values of MX codes: ``decode(element) * 2**(scale - 127)``, exact as float64.

    Every such product is a float64 value, so nothing rounds. A NaN scale (0xFF) makes its
    whole block NaN; NaN and Inf element codes decode to NaN and ±Inf.

    ``dtype=np.float32`` gives the same values rounded once to FP32 (round to nearest even):
    each is exact or, above the FP32 range, ±Inf (the smallest element times 2**-127 is
    still an FP32 subnormal), and every NaN is 0x7FC00000. From 2**16 elements, with numba,
    a compiled loop multiplies in FP32 by the exact power of two, chunks on every core.
    """
    fmt = element_format(elem_format)
    s, e, ax, blk = check_codes(scale_codes, elem_codes, block, axis)
    dt = out_dtype(dtype)
    if s.size and int(s.max()) > 0xFF:
        raise QuantizeError("Scale codes must be E8M0 bytes (0..255)")
    if dt == np.float32 and e.size >= KERNEL_MIN and _kernel.available():
        return decode_fp32(s, e, ax, blk, fmt, fp32_table("e8m0"), np.float32(1.0))
    scales = formats.get("e8m0").decode(s.astype(np.uint8))
    values = apply_scales(fmt.decode(e), scales, ax, blk)
    with np.errstate(over="ignore"):        # FP32: values above its range round to ±Inf
        return values.astype(dt, copy=False)
