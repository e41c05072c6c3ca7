"""Compiled loops of block quantisation and dequantisation (numba).

``block_amax`` is :func:`mxsim.quantize.blocks.row_max` of the magnitudes in one pass.
``encode_format`` is :func:`mxsim.quantize.elements.elements_fast` without the table: each
element's ``x * 2**-k`` is formed exactly by moving its exponent field where both it and the
result are normal FP32 numbers, and by the FP32 multiply elsewhere, then rounded to the element
format by integer arithmetic on its bits (:func:`_code`), branch-free so that the loop runs in
SIMD lanes. ``multiply_encode`` does the same for NVFP4's FP32 products ``x * r``. ``decode``
turns codes and block scales back into FP32. Every loop releases the GIL, so chunks run on
several threads. The tests hold each loop equal to its numpy or table twin on every table key,
every shift and every special value; ``encode`` (the table gather) stays as the arithmetic
encoder's twin.

Measured here (one thread, 16M standard normals, e4m3, 2026-12-06): the table gather ran at
~480 M elements/s. The arithmetic encoder ran at ~360 M while numba's integer promotion made
its shifts 64-bit (``_U``/``_I`` around each operation and shift counts masked to 5 bits keep
them in 32-bit lanes), at ~700 M from cache once they were 32-bit, and at 1.39 G with
software prefetch: this machine's hardware prefetcher does not follow these loops' streams,
so from memory the loop ran at 370 M without it and 650 M with it (a bare copy is unaffected).
"""

from __future__ import annotations

import numpy as np

from .. import _numba

__all__ = ["available", "block_amax", "block_amax_into", "encode", "encode_format",
           "multiply_encode", "decode", "in_chunks", "chunk_rows", "nvfp4_scales",
           "rceil_scales", "CHUNK"]

#: Elements per chunk of :func:`in_chunks` (a chunk's data stays in cache), at least.
CHUNK = 1 << 18
#: Elements per chunk at most: with the loops prefetching, each chunk's fixed cost (numpy
#: calls holding the GIL) is what matters. 2**20 doubled the MX rate over 2**18 here.
_CHUNK_MAX = 1 << 20

_U = np.uint32
_I = np.int32
_kernels = None


def available() -> bool:
    """True when numba can be imported (the loops are compiled on first use)."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def _f32_bits(x):
    """FP32 bit pattern of a float32 (replaced by an LLVM bit cast in :func:`_build`)."""
    raise NotImplementedError


def _prefetch(arr, index, write):
    """Prefetch element ``index`` (flat, C order) of ``arr`` for reading or writing (replaced
    by ``llvm.prefetch`` in :func:`_build`; an index past the end is harmless)."""
    raise NotImplementedError


#: Rows of blocks prefetched ahead. The hardware prefetcher of the machine measured here does
#: not follow these loops' streams: without software prefetch the encoder ran at 370 M
#: elements/s from memory against 650 M from cache (one thread).
_AHEAD = 16


def _amax_loop(blocks, out):
    n, blk = blocks.shape
    for i in range(n):
        _prefetch(blocks, (i + _AHEAD) * blk, 0)
        _prefetch(blocks, (i + _AHEAD) * blk + 16, 0)
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


def _code(y, m, emin, maxcode, sign_shift, is_int, rne, torchao, nan_bias, nan_shift,
          nan_sign):
    """Element code of the FP32 value with bits ``y``, rounded once (the other arguments are
    :func:`_params`, unpacked by :func:`_unpack`).

    The value is ``sig * 2**(E - 150)`` (``E`` the exponent field, at least 1). Its code's
    last place is ``2**(max(E - 127, emin) - m)``, so ``sig`` is shifted right by the
    difference (at most 31: beyond 24 everything is below half a place), rounded to nearest
    even or toward zero, and the binade is added above it: a carry out of the significand
    moves the code into the next binade, and a subnormal's count of places is its code.
    Codes above ``maxcode`` saturate. MXINT8 (``is_int``) has no binades (``emin`` 0, ``m``
    6: places of 2**-6) and negates in two's complement. Inf and NaN give 0 (``torchao`` 0:
    their blocks are decided elsewhere) or, ``torchao`` 1 and 2, torchao's casts: Inf
    saturates; a NaN takes the normal path of torchao's bit-trick FP6/FP4 cast (1), or becomes
    0x7F with its sign (2, torch's FP8 casts). numba widens 32-bit integers to 64 bits;
    every operation is cast back so that the loop runs in 32-bit SIMD lanes.
    """
    sign = _U(y >> _U(31))
    a = _U(y & _U(0x7FFFFFFF))
    field = _I(a >> _U(23))
    e = _I(max(field, _I(1)) - _I(127))
    sig = _U(_U(a & _U(0x7FFFFF)) | (_U(0x800000) if field != _I(0) else _U(0)))
    top = max(e, emin)
    # Shift counts are masked to 5 bits (they are below 32 anyway), which lets LLVM narrow
    # numba's 64-bit shifts to 32-bit lanes.
    shift = _U(_U(min(_I(_I(top - e) + _I(_I(23) - m)), _I(31))) & _U(31))
    q = _U(sig >> shift)
    one = _U(_U(1) << shift)
    rem = _U(sig & _U(one - _U(1)))
    half = _U(one >> _U(1))
    up = (rem > half) | ((rem == half) & (_U(q & _U(1)) != _U(0)))
    inc = _U(1) if (up and rne) else _U(0)
    mag = min(_U(_U(_U(top - emin) << _U(_U(m) & _U(7))) + _U(q + inc)), maxcode)
    if is_int:
        code = _U(_U(_U(0) - mag) & _U(0xFF)) if sign != _U(0) else mag
    else:
        code = _U(mag | _U(sign << _U(sign_shift & _U(7))))
    if field == _I(255):
        if torchao == _I(0):
            code = _U(0)
        elif a != _U(0x7F800000):
            ns = _U(nan_shift & _U(31))
            v = _U(_U(a + nan_bias) + _U(_U(a >> ns) & _U(1)))
            code = _U(_U(_U(v >> ns) & _U(0xFF)) | _U(sign << _U(nan_sign & _U(7))))
            if torchao == _I(2):                    # torch's FP8 casts: 0x7F, signed
                code = _U(_U(0x7F) | _U(sign << _U(7)))
    return np.uint8(code)


def _unpack(p):
    """:func:`_params` as the typed scalars :func:`_code` takes."""
    return (_I(p[0]), _I(p[1]), _U(p[2]), _U(p[3]), p[4] != 0, p[5] != 0, _I(p[6]),
            _U(p[7] & 0xFFFFFFFF), _U(p[8]), _U(p[9]))


def _encode_format_loop(blocks, k, mult, p, out):
    n, blk = blocks.shape
    values = blocks.view(np.float32)
    m, emin, maxcode, sign_shift, is_int, rne, torchao, nan_bias, nan_shift, nan_sign = (
        _unpack(p))
    for i in range(n):
        _prefetch(blocks, (i + _AHEAD) * blk, 0)
        _prefetch(blocks, (i + _AHEAD) * blk + 16, 0)
        _prefetch(out, (i + 4 * _AHEAD) * blk, 1)
        ki = _I(k[i])
        mu = mult[i]
        moved_k = _U(_U(ki) << _U(23))
        for j in range(blk):
            b = blocks[i, j]
            field = _I(_U(b >> _U(23)) & _U(0xFF))
            moved = _I(field - ki)
            # Normal to normal: the exponent moves, exactly. Elsewhere the FP32 product: a
            # subnormal x scaled up is exact too; a result below 2**-126 rounds to ±0 in every
            # element format however the multiply rounded it; Inf/NaN are decided elsewhere.
            product = _f32_bits(values[i, j] * mu)
            ok = (field != _I(0)) & (field != _I(255)) & (moved > _I(0)) & (moved < _I(255))
            y = _U(b - moved_k) if ok else product
            out[i, j] = _code(y, m, emin, maxcode, sign_shift, is_int, rne, _I(0),
                              nan_bias, nan_shift, nan_sign)


def _mul_encode_loop(blocks, r, p, out):
    n, blk = blocks.shape
    values = blocks.view(np.float32)
    m, emin, maxcode, sign_shift, is_int, rne, torchao, nan_bias, nan_shift, nan_sign = (
        _unpack(p))
    for i in range(n):
        _prefetch(blocks, (i + _AHEAD) * blk, 0)
        _prefetch(out, (i + 4 * _AHEAD) * blk, 1)
        ri = r[i]
        for j in range(blk):
            y = _f32_bits(values[i, j] * ri)                        # one FP32 rounding
            out[i, j] = _code(y, m, emin, maxcode, sign_shift, is_int, rne, torchao,
                              nan_bias, nan_shift, nan_sign)


def _decode_loop(scales, codes, etab, stab, pts, out):
    """``out = fl32(fl32(etab[code] * stab[scale]) * pts)``, NaN as 0x7FC00000; returns the
    OR of every code (the caller checks their range)."""
    n, blk = codes.shape
    seen = _U(0)
    for i in range(n):
        _prefetch(codes, (i + 4 * _AHEAD) * blk, 0)
        _prefetch(out, (i + _AHEAD) * blk, 1)
        _prefetch(out, (i + _AHEAD) * blk + 16, 1)
        si = stab[scales[i]]
        for j in range(blk):
            c = codes[i, j]
            seen = _U(seen | _U(c))
            y = _f32_bits((etab[c] * si) * pts)
            out[i, j] = y if _U(y & _U(0x7FFFFFFF)) <= _U(0x7F800000) else _U(0x7FC00000)
    return seen


def _rceil_loop(amax, values, fmax, kmin, up, code, k):
    """``rules.scale_finite``'s RCEIL in one pass over finite amax (bits and their float32
    view): ``fl32(amax / max)``, the ceiling of its correctly rounded FP32 log2 by the
    per-binade thresholds ``up`` (from ``kmin``), the E8M0 code and the element shift."""
    top = up.shape[0] - 1
    for i in range(amax.shape[0]):
        b = np.int64(_f32_bits(values[i] / fmax))
        c = np.int64(-1000)
        if b != 0:
            e, j = b >> 23, b & 0x7FFFFF
            if e == 0:                      # subnormal: normalise the mantissa
                bl = 0
                t = j
                while t:
                    bl += 1
                    t >>= 1
                kk = bl - 150
                j = (j << (24 - bl)) & 0x7FFFFF
            else:
                kk = e - 127
            c = kk if j == 0 or j <= up[min(max(kk - kmin, 0), top)] else kk + 1
        cc = min(max(c, -127), 127) + 127
        code[i] = cc
        k[i] = 0 if cc == 0 else cc - 127


def _nvfp4_scale_loop(values, pts, lo, hi, table, dec, code, r):
    """``nvfp4._scales`` in one pass: ``s = clamp(fl32(fl32(amax / 6) / pts), lo, hi)`` (never
    NaN: amax is finite and ``nvfp4._pts`` positive and finite), its UE4M3 code through the
    RNE table (``elements.lut_keys``), and ``r = fl32(fl32(1 / pts) / s8)``."""
    inv = np.float32(1.0) / pts
    for i in range(values.shape[0]):
        s = min(max((values[i] / np.float32(6.0)) / pts, lo), hi)
        y = _f32_bits(s)
        c = table[_U(_U(_U(_U(y & _U(0x7FFF)) + _U(0x7FFF)) | y) >> _U(15))]
        code[i] = c
        r[i] = inv / dec[c]


def _intrinsics():
    """``(f32_bits, prefetch)``: an LLVM ``bitcast float -> i32`` (the FP32 bits of a value in
    a register) and ``llvm.prefetch`` of an array element (the write flag a constant)."""
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    @intrinsic
    def f32_bits(typingctx, x):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.IntType(32))
        return types.uint32(types.float32), codegen

    @intrinsic
    def prefetch(typingctx, arr, index, write):
        if not isinstance(write, types.IntegerLiteral):
            return None

        def codegen(context, builder, signature, args):
            ary = context.make_array(signature.args[0])(context, builder, args[0])
            i8p = ir.IntType(8).as_pointer()
            i32 = ir.IntType(32)
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                "llvm.prefetch.p0")
            ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), i8p)
            builder.call(fn, [ptr, ir.Constant(i32, write.literal_value), ir.Constant(i32, 3),
                              ir.Constant(i32, 1)])
            return context.get_dummy_value()
        return types.void(arr, types.intp, write), codegen
    return f32_bits, prefetch


def _build():
    """Compile the loops (and the helpers they inline) with numba; done once per process.

    The functions are plain Python at module level, compiled here (module globals, not
    closures, so that numba's on-disk cache keys stay the same from process to process)."""
    global _kernels, _scaled, _code, _unpack, _f32_bits, _prefetch
    if _kernels is None:
        numba = _numba.load()
        cache = _numba.cache()
        inline = numba.njit(cache=cache, inline="always")
        _f32_bits, _prefetch = _intrinsics()
        _scaled = inline(getattr(_scaled, "py_func", _scaled))
        _code = inline(getattr(_code, "py_func", _code))
        _unpack = inline(getattr(_unpack, "py_func", _unpack))
        jit = numba.njit(cache=cache, nogil=True)
        _kernels = (jit(_amax_loop), jit(_encode_loop), jit(_mul_encode_loop),
                    jit(_encode_format_loop), jit(_decode_loop), jit(_rceil_loop),
                    jit(_nvfp4_scale_loop))
    return _kernels


def _params(fmt, rounding: str, torchao: bool) -> np.ndarray:
    """The constants of :func:`_code` for an element format (``formats.Format``)."""
    is_int = fmt.kind == "int"
    shift = 23 - fmt.man_bits
    specials = (2 if fmt.name in ("e4m3", "e5m2") else 1) if torchao else 0
    return np.array([fmt.man_bits, 0 if is_int else 1 - fmt.bias, fmt.code_of_max,
                     fmt.sign_shift, is_int, rounding == "rne", specials,
                     ((fmt.bias - 127) << 23) + (1 << (shift - 1)) - 1, shift,
                     fmt.exp_bits + fmt.man_bits], np.int64)


def block_amax(blocks: np.ndarray) -> np.ndarray:
    """Largest magnitude bit pattern (sign cleared) of each row of ``blocks`` (uint32), chunks
    on every core."""
    out = np.empty(blocks.shape[0], np.uint32)
    blocks = np.ascontiguousarray(blocks)
    loop = _build()[0]

    def chunk(sl: slice) -> None:
        loop(blocks[sl], out[sl])
    in_chunks(blocks.shape[0], chunk_rows(*blocks.shape), chunk)
    return out


def multiply_encode(blocks: np.ndarray, r: np.ndarray, fmt, rounding: str,
                    out: np.ndarray | None = None) -> np.ndarray:
    """Codes of the FP32 products ``x * r`` (r per row, one rounding each), rounded to ``fmt``
    by ``rounding`` (``rne``/``rz``) with torchao's casts of Inf and NaN
    (:func:`elements.lut` with ``"torchao"``): NVFP4's elements. Chunks on every core, or,
    given ``out`` (a C-contiguous uint8 array shaped like ``blocks``), written there on the
    calling thread."""
    blocks = np.ascontiguousarray(blocks)
    r = np.ascontiguousarray(r, np.float32)
    p = _params(fmt, rounding, True)
    loop = _build()[2]
    if out is not None:
        loop(blocks, r, p, out)
        return out
    out = np.empty(blocks.shape, np.uint8)

    def chunk(sl: slice) -> None:
        loop(blocks[sl], r[sl], p, out[sl])
    in_chunks(blocks.shape[0], chunk_rows(*blocks.shape), chunk)
    return out


def chunk_rows(n: int, blk: int, smallest: int | None = None) -> int:
    """Rows of ``blk`` elements per chunk of ``n`` rows: a quarter of the rows per core, from
    ``smallest`` (default :data:`CHUNK`) to 2**20 elements."""
    import os
    smallest = CHUNK if smallest is None else smallest
    elements = min(max(_CHUNK_MAX, smallest),
                   max(smallest, n * blk // (4 * (os.cpu_count() or 1))))
    return max(1, elements // max(1, blk))


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


def _multipliers(k: np.ndarray) -> np.ndarray:
    """2**-k in FP32 (0 or a subnormal where -k is below the normal range)."""
    with np.errstate(under="ignore", over="ignore"):
        return np.ldexp(np.float32(1), (-k).astype(np.int32)).astype(np.float32)


def encode(blocks: np.ndarray, k: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Codes of ``x * 2**-k`` (k per row) through ``table`` (:func:`elements.lut`): the table
    gather, twin of :func:`encode_format`."""
    out = np.empty(blocks.shape, np.uint8)
    _build()[1](np.ascontiguousarray(blocks), k.astype(np.int64), _multipliers(k), table, out)
    return out


def encode_format(blocks: np.ndarray, k: np.ndarray, fmt, rounding: str,
                  out: np.ndarray | None = None) -> np.ndarray:
    """Codes of ``x * 2**-k`` (k per row) rounded to ``fmt`` by ``rounding`` (``rne``/``rz``),
    saturating; Inf and NaN elements give 0. Equal to :func:`encode` with
    ``elements.lut(fmt.name, rounding, "zero")`` on every input. Written into ``out`` (a
    C-contiguous uint8 array shaped like ``blocks``) when given; one thread."""
    if out is None:
        out = np.empty(blocks.shape, np.uint8)
    _build()[3](np.ascontiguousarray(blocks), k.astype(np.int64), _multipliers(k),
                _params(fmt, rounding, False), out)
    return out


def rceil_scales(amax: np.ndarray, fmt) -> tuple[np.ndarray, np.ndarray]:
    """(E8M0 codes, element shifts k) of the RCEIL rule for finite amax bit patterns (uint32):
    ``rules.scale_finite`` compiled; one thread (the caller's chunk)."""
    from .rules import log2_up_thresholds
    kmin, up = log2_up_thresholds()
    amax = np.ascontiguousarray(amax, np.uint32)
    code, k = np.empty(len(amax), np.uint8), np.empty(len(amax), np.int64)
    _build()[5](amax, amax.view(np.float32), np.float32(fmt.max), kmin, up, code, k)
    return code, k


def nvfp4_scales(amax: np.ndarray, pts: np.float32, lo: np.float32, hi: np.float32,
                 table: np.ndarray, dec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(UE4M3 codes, FP32 multipliers r) of NVFP4 blocks with finite amax bit patterns:
    ``nvfp4._scales`` compiled (``table`` the e4m3 RNE table, ``dec`` every code's FP32
    value); one thread."""
    amax = np.ascontiguousarray(amax, np.uint32)
    code, r = np.empty(len(amax), np.uint8), np.empty(len(amax), np.float32)
    _build()[6](amax.view(np.float32), np.float32(pts), np.float32(lo), np.float32(hi),
                table, dec, code, r)
    return code, r


def block_amax_into(blocks: np.ndarray, out: np.ndarray) -> np.ndarray:
    """:func:`block_amax` on the calling thread, into ``out`` (uint32, one per row)."""
    _build()[0](np.ascontiguousarray(blocks), out)
    return out


def decode(scales: np.ndarray, codes: np.ndarray, etab: np.ndarray, stab: np.ndarray,
           pts: np.float32) -> tuple[np.ndarray, int]:
    """FP32 bits ``fl32(fl32(etab[code] * stab[scale]) * pts)`` of (n, block) uint8 codes with
    one uint8 scale per row (NaN results 0x7FC00000), chunks on every core; and the OR of every
    code, for the caller's range check."""
    out = np.empty(codes.shape, np.uint32)
    codes = np.ascontiguousarray(codes)
    scales = np.ascontiguousarray(scales)
    loop = _build()[4]
    pts = np.float32(pts)

    def chunk(sl: slice) -> int:
        return int(loop(scales[sl], codes[sl], etab, stab, pts, out[sl]))
    seen = in_chunks(codes.shape[0], chunk_rows(*codes.shape), chunk)
    return out, int(np.bitwise_or.reduce(np.array(seen, np.int64))) if seen else 0
