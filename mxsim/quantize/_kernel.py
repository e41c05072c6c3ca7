"""Compiled loops of block quantisation (numba): block maxima and the table encoder.

``block_amax`` is :func:`mxsim.quantize.blocks.row_max` of the magnitudes in one pass;
``encode`` is :func:`mxsim.quantize.elements.elements_fast` without its temporaries: each
element's ``x * 2**-k`` is formed exactly by moving its exponent field where both it and the
result are normal FP32 numbers, and by the FP32 multiply elsewhere (subnormals, Inf, NaN), then
its key and its code from the table :func:`~mxsim.quantize.elements.lut`. Both loops release the
GIL, so chunks run on several threads. The tests hold them equal to the numpy path on random
and adversarial inputs.

Tried and measured here (2 cores, 2026-12-06, one thread): an integer rounding encoder instead
of the table (402 M elements/s, against 591 M for a bare gather from the 128 KB table) and a
table of the format's binades only, a few KB (333 M); neither vectorised, so the table stays.
"""

from __future__ import annotations

import numpy as np

from .. import _numba

__all__ = ["available", "block_amax", "encode", "multiply_encode", "in_chunks", "CHUNK"]

#: Elements per chunk of :func:`in_chunks` (a chunk's data stays in cache).
CHUNK = 1 << 18

_kernels = None


def available() -> bool:
    """True when numba can be imported (the loops are compiled on first use)."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def _amax_loop(blocks, out):
    n, blk = blocks.shape
    for i in range(n):
        m = np.uint32(0)
        for j in range(blk):
            v = blocks[i, j] & np.uint32(0x7FFFFFFF)
            if v > m:
                m = v
        out[i] = m


def _scaled(b, ki, mu, scratch, product, value):
    """FP32 bits of ``x * 2**-ki`` (``mu`` = 2**-ki in FP32; ``value``: x as a float)."""
    field = np.int64((b >> np.uint32(23)) & np.uint32(0xFF))
    moved = field - ki
    if field != 0 and field != 255 and 0 < moved < 255:
        return np.uint32((np.int64(b) - (ki << np.int64(23))) & np.int64(0xFFFFFFFF))
    product[0] = value * mu
    return scratch[0]


def _encode_loop(blocks, k, mult, table, out):
    n, blk = blocks.shape
    values = blocks.view(np.float32)
    scratch = np.empty(1, np.uint32)
    product = scratch.view(np.float32)
    for i in range(n):
        ki = np.int64(k[i])
        mu = mult[i]
        for j in range(blk):
            y = _scaled(blocks[i, j], ki, mu, scratch, product, values[i, j])
            key = (((y & np.uint32(0x7FFF)) + np.uint32(0x7FFF)) | y) >> np.uint32(15)
            out[i, j] = table[key]


def _mul_encode_loop(blocks, r, table, out):
    n, blk = blocks.shape
    values = blocks.view(np.float32)
    scratch = np.empty(blk, np.uint32)
    product = scratch.view(np.float32)
    for i in range(n):
        ri = r[i]
        for j in range(blk):
            product[j] = values[i, j] * ri            # one FP32 rounding, as numpy's
        for j in range(blk):
            y = scratch[j]
            key = (((y & np.uint32(0x7FFF)) + np.uint32(0x7FFF)) | y) >> np.uint32(15)
            out[i, j] = table[key]


def _build():
    """Compile the loops (and the helper they inline) with numba; done once per process.

    The functions are plain Python at module level, compiled here (module globals, not
    closures, so that numba's on-disk cache keys stay the same from process to process)."""
    global _kernels, _scaled
    if _kernels is None:
        numba = _numba.load()
        cache = _numba.cache()
        _scaled = numba.njit(cache=cache, inline="always")(getattr(_scaled, "py_func", _scaled))
        jit = numba.njit(cache=cache, nogil=True)
        _kernels = (jit(_amax_loop), jit(_encode_loop), jit(_mul_encode_loop))
    return _kernels


def block_amax(blocks: np.ndarray) -> np.ndarray:
    """Largest magnitude bit pattern (sign cleared) of each row of ``blocks`` (uint32), chunks
    on every core."""
    out = np.empty(blocks.shape[0], np.uint32)
    blocks = np.ascontiguousarray(blocks)
    loop = _build()[0]

    def chunk(sl: slice) -> None:
        loop(blocks[sl], out[sl])
    in_chunks(blocks.shape[0], max(1, CHUNK // max(1, blocks.shape[1])), chunk)
    return out


def multiply_encode(blocks: np.ndarray, r: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Codes of the FP32 products ``x * r`` (r per row, one rounding each) through ``table``
    (:func:`elements.lut`), chunks on every core (NVFP4's elements)."""
    out = np.empty(blocks.shape, np.uint8)
    blocks = np.ascontiguousarray(blocks)
    r = np.ascontiguousarray(r, np.float32)
    loop = _build()[2]

    def chunk(sl: slice) -> None:
        loop(blocks[sl], r[sl], table, out[sl])
    in_chunks(blocks.shape[0], max(1, CHUNK // max(1, blocks.shape[1])), chunk)
    return out


def in_chunks(n: int, rows: int, fn) -> list:
    """``fn(slice)`` over ``n`` rows, ``rows`` at a time, on every core (the loops release the
    GIL); the results in order, and the first chunk's exception, in order, raised."""
    import os
    from concurrent.futures import ThreadPoolExecutor
    slices = [slice(start, min(n, start + rows)) for start in range(0, n, rows)]
    if len(slices) > 1 and (os.cpu_count() or 1) > 1:
        _build()
        with ThreadPoolExecutor(os.cpu_count()) as pool:
            return list(pool.map(fn, slices))
    return [fn(sl) for sl in slices]


def encode(blocks: np.ndarray, k: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Codes of ``x * 2**-k`` (k per row) through ``table`` (:func:`elements.lut`)."""
    with np.errstate(under="ignore", over="ignore"):
        mult = np.ldexp(np.float32(1), (-k).astype(np.int32)).astype(np.float32)
    out = np.empty(blocks.shape, np.uint8)
    _build()[1](np.ascontiguousarray(blocks), k.astype(np.int64), mult, table, out)
    return out
