"""Compiled twin of :func:`mxsim.formats.round_to` (numba), for large arrays.

The same integer algorithm as the numpy path, element by element: it is still
``formats.round_to`` that rounds (it decides when to call this), and the tests hold the two
paths bit-equal on every rounding mode, overflow policy and format. Imported only when numba
is installed and an array is large enough to pay for it.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from .. import _numba

__all__ = ["GPU_SOURCE", "compiled_round_one", "gpu_params", "gpu_round_codes",
           "round_codes", "round_one"]

#: CUDA C++ of the same algorithm for CuPy arrays (also built for the host by the tests).
GPU_SOURCE = Path(__file__).with_name("_round_kernel.cu")
_GPU_KERNELS = {1: "mxsim_round_u8", 2: "mxsim_round_u16", 4: "mxsim_round_u32",
                8: "mxsim_round_u64"}

_kernel = None

# Mode and overflow codes, as the kernel numbers them.
MODES = {"rne": 0, "rna": 1, "rz": 2, "ru": 3, "rd": 4, "stochastic": 5}
OVERFLOWS = {"saturate": 0, "ieee": 1, "inf": 2}


def _build():
    """Compile the kernel (and the helpers it inlines) with numba; done once per process.

    The functions below are plain Python at module level, compiled here: module globals, not
    closure cells, because numba keys its on-disk cache on the pickled closure, which differs
    from process to process (a closure would recompile on every run). The helpers are inlined
    into the kernel's loop (``inline="always"``, by :func:`compiled_round_one`, called first),
    so the split costs no calls.
    """
    numba = _numba.load()
    return numba.njit(cache=_numba.cache(), nogil=True)(_round_loop)


def _bit_length(x):
    bl = 0
    if x >> np.uint64(32):
        bl += 32
        x >>= np.uint64(32)
    if x >> np.uint64(16):
        bl += 16
        x >>= np.uint64(16)
    if x >> np.uint64(8):
        bl += 8
        x >>= np.uint64(8)
    while x:
        bl += 1
        x >>= np.uint64(1)
    return bl


def _round_up(mode, s, kept, discarded, right, st, rbits, i, sr_bits):
    # Whether the magnitude cut to ``kept`` (``discarded``: its low ``right`` bits) rounds
    # up; the numpy path's guard/rest/odd rule per mode, stochastic from rbits[i].
    one = np.uint64(1)
    guard = False
    if 1 <= right <= 64:
        guard = ((discarded >> np.uint64(right - 1)) & one) != 0
    if right - 1 >= 64:
        rest = discarded != 0
    elif right >= 1:
        rest = (discarded & ((one << np.uint64(right - 1)) - one)) != 0
    else:
        rest = False
    rest = rest or st
    inexact = guard or rest
    odd = (kept & one) != 0
    if mode == 0:
        return guard and (rest or odd)
    if mode == 1:
        return guard
    if mode == 2:
        return False
    if mode == 3:
        return inexact and s == 0
    if mode == 4:
        return inexact and s == 1
    if right >= sr_bits:
        d = right - sr_bits
        top = np.uint64(0) if d >= 64 else discarded >> np.uint64(d)
    else:
        d = sr_bits - right
        top = discarded << np.uint64(d if d < 63 else 63)
    return top + rbits[i] >= (one << np.uint64(sr_bits))


def _pack(s, kept, target, is_int, man, max_sig, bias, exp_bits, signed, has_zero,
          sign_shift):
    # The code of an in-range result: significand ``kept`` with LSB exponent ``target``.
    one = np.uint64(1)
    if is_int:
        mag = np.int64(kept if kept < max_sig else max_sig)
        ival = -mag if s == 1 else mag
        return np.uint64(ival & 0xFF)
    normal = (kept >> np.uint64(man)) != 0
    ef = target + man + bias if normal else 0
    top_field = (1 << exp_bits) - 1
    ef = 0 if ef < 0 else (top_field if ef > top_field else ef)
    code = (np.uint64(ef) << np.uint64(man)) | (kept & ((one << np.uint64(man)) - one))
    if not has_zero and kept == 0:
        code = np.uint64(0)
    if signed:
        code |= np.uint64(s) << np.uint64(sign_shift)
    return code


def _overflow_code(s, mode, overflow, is_int, signed, sign_shift, code_max, has_inf,
                   code_inf, has_nan, code_nan):
    # ±max or ±Inf (NaN without Inf) for an overflowing result, by policy and mode.
    neg = s == 1
    if overflow == 0:
        to_inf = False
    elif overflow == 2:
        to_inf = True
    elif mode == 2:
        to_inf = False
    elif mode == 3:
        to_inf = not neg
    elif mode == 4:
        to_inf = neg
    else:
        to_inf = True
    signbit = (np.uint64(s) << np.uint64(sign_shift)) if signed else np.uint64(0)
    if is_int:
        maxc = np.uint64(0x81 if neg else 0x7F)
    else:
        maxc = np.uint64(code_max) | signbit
    if has_inf:
        infc = np.uint64(code_inf) | signbit
    elif has_nan:
        infc = np.uint64(code_nan) | signbit
    else:
        infc = maxc
    return infc if to_inf else maxc


def round_one(s, lsb, sg, st, rbits, i, is_int, man, emin, emax, max_sig, bias, exp_bits,
              signed, has_zero, sign_shift, code_max, has_inf, code_inf, has_nan, code_nan,
              mode, overflow, sr_bits):
    # One element: (-1)**s * (sg + st) * 2**lsb rounded to the format; its code (uint64).
    # rbits[i] is its random integer (stochastic rounding only).
    one = np.uint64(1)
    if sg == 0 and st:          # a bare sticky bit: a positive value below all others
        sg = one
        lsb = -(1 << 20)
        st = False
    msb = lsb + _bit_length(sg) - 1
    huge = False
    if is_int:
        target = -man
        huge = msb > 0 and sg != 0
        if huge:
            sg = np.uint64(0)
    else:
        target = (msb if msb > emin else emin) - man
    shift = target - lsb
    right = shift if shift > 0 else 0
    if shift > 0:
        if right >= 64:
            kept = np.uint64(0)
            discarded = sg
        else:
            kept = sg >> np.uint64(right)
            discarded = sg & ((one << np.uint64(right)) - one)
    else:
        left = -shift
        kept = sg << np.uint64(left if left < 63 else 63)
        discarded = np.uint64(0)
    if sg == 0:
        kept = np.uint64(0)
    if _round_up(mode, s, kept, discarded, right, st, rbits, i, sr_bits):
        kept += one
    if not is_int and (kept >> np.uint64(man + 1)) != 0:
        kept >>= one
        target += 1
    if is_int:
        over = huge or kept > max_sig
    else:
        top_exp = target + man
        over = (top_exp > emax or (top_exp == emax and kept > max_sig)) and kept != 0
    if over:
        return _overflow_code(s, mode, overflow, is_int, signed, sign_shift, code_max,
                              has_inf, code_inf, has_nan, code_nan)
    return _pack(s, kept, target, is_int, man, max_sig, bias, exp_bits, signed, has_zero,
                 sign_shift)


def _round_loop(sign, lsb_exp, sig, sticky, rbits, is_int, man, emin, emax, max_sig, bias,
           exp_bits, signed, has_zero, sign_shift, code_max, has_inf, code_inf, has_nan,
           code_nan, mode, overflow, sr_bits, out):
    for i in range(sig.shape[0]):
        out[i] = round_one(sign[i], lsb_exp[i], sig[i], sticky[i], rbits, i, is_int, man,
                           emin, emax, max_sig, bias, exp_bits, signed, has_zero, sign_shift,
                           code_max, has_inf, code_inf, has_nan, code_nan, mode, overflow,
                           sr_bits)


def compiled_round_one():
    """:func:`round_one` compiled by numba, to be inlined into other kernels' loops (with the
    helpers it inlines); built once per process."""
    global _bit_length, _round_up, _pack, _overflow_code, round_one
    if not hasattr(round_one, "py_func"):
        numba = _numba.load()
        inline = numba.njit(cache=_numba.cache(), inline="always")
        _bit_length, _round_up, _pack, _overflow_code, round_one = (
            inline(f) for f in (_bit_length, _round_up, _pack, _overflow_code, round_one))
    return round_one


def round_codes(fmt, sign, lsb_exp, sig, sticky, random_bits, mode: str, overflow: str,
                sr_bits: int) -> np.ndarray:
    """``round_to`` on flat, equally long arrays (see its docstring); codes as uint64."""
    global _kernel
    if _kernel is None:
        compiled_round_one()
        _kernel = _build()
    n = sig.shape[0]
    rb = np.zeros(1, np.uint64) if random_bits is None else np.ascontiguousarray(
        random_bits, np.uint64)
    out = np.empty(n, np.uint64)
    is_int = fmt.kind == "int"
    _kernel(np.ascontiguousarray(sign, np.uint8), np.ascontiguousarray(lsb_exp, np.int64),
            np.ascontiguousarray(sig, np.uint64), np.ascontiguousarray(sticky, np.bool_), rb,
            is_int, fmt.man_bits, fmt.emin, fmt.emax, np.uint64(fmt.max_sig),
            0 if is_int else fmt.bias, fmt.exp_bits, fmt.signed, fmt.has_zero,
            fmt.sign_shift, 0 if is_int else fmt.code_of_max, fmt.has_inf,
            fmt.code_of_inf if fmt.has_inf else 0, fmt.has_nan,
            fmt.code_of_nan if fmt.has_nan else 0, MODES[mode], OVERFLOWS[overflow], sr_bits,
            out)
    return out


def gpu_params(fmt, mode: str, overflow: str) -> np.ndarray:
    """The format's constants, mode and policy as ``_round_kernel.cu`` reads them (``P_*``)."""
    is_int = fmt.kind == "int"
    return np.array([
        is_int, fmt.man_bits, fmt.emin, fmt.emax, fmt.max_sig, 0 if is_int else fmt.bias,
        fmt.exp_bits, fmt.signed, fmt.has_zero, fmt.sign_shift,
        0 if is_int else fmt.code_of_max, fmt.has_inf, fmt.code_of_inf if fmt.has_inf else 0,
        fmt.has_nan, fmt.code_of_nan if fmt.has_nan else 0, MODES[mode], OVERFLOWS[overflow]],
        np.int64)


@functools.cache
def _gpu_function(name: str, device: int):
    import cupy
    return cupy.RawModule(code=GPU_SOURCE.read_text(), options=("-std=c++17",)
                          ).get_function(name)


@functools.cache
def _gpu_params(fmt, mode: str, overflow: str, device: int):
    import cupy
    return cupy.asarray(gpu_params(fmt, mode, overflow))


def gpu_round_codes(fmt, sign, lsb_exp, sig, sticky, mode: str, overflow: str):
    """``round_to`` of CuPy arrays (broadcast together; not stochastic) on the GPU: codes in
    ``fmt.code_dtype``, shaped like the broadcast inputs."""
    import cupy
    device = cupy.cuda.runtime.getDevice()
    shape = cupy.broadcast(sign, lsb_exp, sig, sticky).shape
    n = int(np.prod(shape, dtype=np.int64))
    args = []
    for x, dtype in ((sign, np.uint8), (lsb_exp, np.int64), (sig, np.uint64),
                     (sticky, np.bool_)):
        x = cupy.asarray(x, dtype)
        if x.size == 1:                   # one value for every element: stride 0
            args += [cupy.ascontiguousarray(x.reshape(1)), np.int64(0)]
        else:
            args += [cupy.ascontiguousarray(cupy.broadcast_to(x, shape)).reshape(-1),
                     np.int64(1)]
    dtype = np.dtype(fmt.code_dtype)
    out = cupy.empty(n, dtype)
    if n:
        threads = 256
        blocks = min(-(-n // threads), 1 << 16)
        _gpu_function(_GPU_KERNELS[dtype.itemsize], device)(
            (blocks,), (threads,), (*args, _gpu_params(fmt, mode, overflow, device), out,
                                    np.int64(n)))
    return out.reshape(shape)
