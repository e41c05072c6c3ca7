"""The one rounding routine, :func:`round_to`, and the integer helpers it is built from.

Every arithmetic path in mxsim ends here: an integer significand, the exponent of its LSB and
a sticky bit go in, codes of the format come out, rounded once in integers. :func:`round_flags`
takes the same inputs and says which IEEE 754 exceptions that rounding raises. Large arrays go
through a compiled twin of the numpy path (``mxsim/formats/_round_kernel.py``) when numba is
installed; the tests hold the two bit-equal.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import FormatError
from .layout import FormatLayout
from .policy import DEFAULT_SR_BITS, Overflow, Rounding
from .xp import of as _xp_of

__all__ = ["round_to", "round_flags", "bit_length", "draw_random_bits", "compiled_rounding",
           "gpu_source", "rounding_params"]

_KERNEL_MIN_SIZE = 4096         # elements from which the compiled twin pays for its call
_U1 = np.uint64(1)


def bit_length(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """Exact bit length of each uint64 (0 for 0)."""
    _, exp = np.frexp(x.astype(np.float64))   # may be one too high when x rounds up to 2**n
    bl = exp.astype(np.int64)
    probe = np.clip(bl - 1, 0, 63).astype(np.uint64)
    too_high = (bl > 0) & ((bl > 64) | ((x >> probe) == 0))
    return np.where(too_high, bl - 1, bl)


def _shr(x: npt.NDArray[np.uint64], n: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    """x >> n for any n >= 0 (0 when n >= 64)."""
    return np.where(n >= 64, np.uint64(0), x >> np.clip(n, 0, 63).astype(np.uint64))


def _low_mask(n: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    """(1 << n) - 1 for 0 <= n, saturating to all ones when n >= 64."""
    m = np.minimum(n, 64)
    return np.where(m >= 64, ~np.uint64(0),
                    (_U1 << np.minimum(m, 63).astype(np.uint64)) - _U1)


def draw_random_bits(shape: tuple[int, ...], seed: int | None, random_bits: Any,
                     sr_bits: int, error: type[Exception] = ValueError
                     ) -> npt.NDArray[np.uint64]:
    """Random integers in ``[0, 2**sr_bits)`` per element of ``shape`` for stochastic rounding.

    ``random_bits`` (integers below ``2**sr_bits``, broadcast to ``shape``) if given, else
    ``np.random.default_rng(seed).integers(0, 2**sr_bits, size=shape, dtype=np.uint64)`` (C
    order). Raises ``error`` for ``sr_bits`` outside [1, 63], a seed that is not a
    non-negative integer or None, or random bits out of range or of a shape that does not
    broadcast.
    """
    if not 1 <= sr_bits <= 63:
        raise error(f"sr_bits must be between 1 and 63, not {sr_bits!r}")
    if random_bits is None:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer)
                                 or seed < 0):
            raise error(f"Seed must be a non-negative integer or None, not {seed!r}")
        return np.random.default_rng(seed).integers(0, 1 << sr_bits, size=shape,
                                                    dtype=np.uint64)
    rb = np.asarray(random_bits)
    if rb.dtype.kind not in "ui" or (rb.size and (rb.min() < 0 or rb.max() >= (1 << sr_bits))):
        raise error(f"random_bits must be integers in [0, 2**{sr_bits})")
    try:
        return np.broadcast_to(rb.astype(np.uint64), shape)
    except ValueError:
        raise error(f"random_bits of shape {rb.shape} do not broadcast to the input's "
                    f"shape {shape}") from None


def _numba_installed() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def compiled_rounding():
    """The compiled rounding of one element, for other numba kernels to inline:
    ``round_one(sign, lsb_exp, sig, sticky, random_bits, i, *params[:15], mode, overflow,
    sr_bits)`` gives the code :func:`round_to` gives (``params`` from :func:`rounding_params`).
    Needs numba (raises ImportError without it)."""
    from . import _round_kernel
    return _round_kernel.compiled_round_one()


def gpu_source() -> str:
    """The CUDA C++ of the element rounding (``mxsim_round::round_one``), for other kernels to
    compile with theirs."""
    from . import _round_kernel
    return _round_kernel.GPU_SOURCE.read_text()


def rounding_params(fmt: FormatLayout, rounding: Rounding | str, overflow: Overflow | str
                    ) -> npt.NDArray[np.int64]:
    """The format's constants, then the mode and overflow codes, as the compiled rounding
    (numba and CUDA) reads them: int64[17]."""
    from . import _round_kernel
    return _round_kernel.gpu_params(fmt, Rounding.of(rounding).value,
                                    Overflow.of(overflow).value)


def round_to(fmt: FormatLayout, sign: Any, lsb_exp: Any, sig: Any, sticky: Any = False,
             rounding: Rounding | str = "rne",
             overflow: Overflow | str = Overflow.SATURATE, *,
             random_bits: Any = None, sr_bits: int = DEFAULT_SR_BITS,
             kernel: bool | None = None) -> npt.NDArray:
    """Round ``(-1)**sign * (sig + s) * 2**lsb_exp`` to ``fmt`` and return its codes.

    ``sig`` is a non-negative integer significand (uint64; any position, not normalised),
    ``lsb_exp`` the exponent of its least significant bit, and ``sticky`` says that the exact
    value has further non-zero bits below that LSB (``0 < s < 1``). All arguments broadcast.
    This is the only place in mxsim that rounds; every arithmetic path ends here.

    Rounding is exact, in integers: the significand is cut at the format's LSB for the value's
    binade (or at the subnormal LSB), with a guard bit and a sticky bit for the rest.
    Stochastic rounding takes the ``sr_bits`` discarded bits just below the cut (lower bits and
    ``sticky`` are ignored), adds the element's random integer ``r`` in ``[0, 2**sr_bits)``,
    and rounds the magnitude up iff the sum reaches ``2**sr_bits``.

    Overflow (a rounded magnitude above ``fmt.max``) gives ``±max`` for ``Overflow.SATURATE``,
    IEEE 754 rules for the mode for ``Overflow.IEEE``, ±Inf in every mode for ``Overflow.INF``.
    NaN stands in for Inf in formats without Inf. Formats without a zero (E8M0) give their
    smallest value for results that round to zero. An exact zero gets the sign it was given
    (unsigned and integer formats: +0).

    ``kernel`` chooses the code that rounds, never the result: None uses the compiled twin
    for arrays of 4096 elements or more when numba is installed, True uses it for any size
    (when numba is installed), False keeps to numpy. CuPy arrays (on a GPU) are rounded by
    the CUDA twin (``mxsim/formats/_round_kernel.cu``) unless ``kernel`` is False or the rounding is
    stochastic; other array modules take the numpy path's code.
    """
    mode = Rounding.of(rounding)
    overflow = Overflow.of(overflow)
    if overflow is not Overflow.SATURATE and not fmt.has_inf and not fmt.has_nan:
        raise FormatError(f"Format {fmt.name} has neither Inf nor NaN, so overflow must "
                          f"saturate (Overflow.SATURATE), not {overflow.value}")
    xp = _xp_of(sig, sign, lsb_exp, sticky)
    if xp is not np and kernel is not False and mode is not Rounding.STOCHASTIC \
            and xp.__name__ == "cupy":
        from . import _round_kernel  # the same algorithm in CUDA, one thread an element
        return _round_kernel.gpu_round_codes(fmt, sign, lsb_exp, sig, sticky, mode.value,
                                             overflow.value)
    sign, lsb_exp, sig, sticky = xp.broadcast_arrays(
        xp.asarray(sign, np.uint8), xp.asarray(lsb_exp, np.int64),
        xp.asarray(sig, np.uint64), xp.asarray(sticky, bool))
    if mode is Rounding.STOCHASTIC and random_bits is None:
        raise ValueError("Stochastic rounding needs random_bits")
    wanted = sig.size >= _KERNEL_MIN_SIZE if kernel is None else kernel
    if wanted and xp is np and _numba_installed():
        from . import _round_kernel
        rb = None if random_bits is None else np.broadcast_to(
            np.asarray(random_bits, np.uint64), sig.shape).reshape(-1)
        codes = _round_kernel.round_codes(fmt, sign.reshape(-1), lsb_exp.reshape(-1),
                                          sig.reshape(-1), sticky.reshape(-1), rb, mode.value,
                                          overflow.value, sr_bits)
        return codes.reshape(sig.shape).astype(fmt.code_dtype)
    return _round_numpy(fmt, sign.copy(), lsb_exp, sig, sticky.copy(), mode, overflow,
                        random_bits, sr_bits)


def _round_numpy(fmt: FormatLayout, sign, lsb_exp, sig, sticky, mode: Rounding,
                 overflow: Overflow, random_bits, sr_bits: int) -> npt.NDArray:
    """:func:`round_to` in numpy on broadcast arrays (``sign`` and ``sticky`` writable)."""
    # A bare sticky bit is a positive value below any representable one.
    tiny = (sig == 0) & sticky
    sig = np.where(tiny, _U1, sig)
    lsb_exp = np.where(tiny, -(1 << 20), lsb_exp)
    sticky &= ~tiny

    M = fmt.man_bits
    msb_exp = lsb_exp + bit_length(sig) - 1
    huge = None
    if fmt.kind == "int":
        target = _xp_of(sig).full(sig.shape, -M, np.int64)
        huge = (msb_exp > 0) & (sig != 0)             # |value| >= 2 > max, before any shifting
        sig = np.where(huge, np.uint64(0), sig)
    else:
        target = np.maximum(msb_exp, fmt.emin) - M    # exponent of the kept LSB
    shift = target - lsb_exp                          # > 0: bits are discarded
    right = np.maximum(shift, 0)
    kept = np.where(shift > 0, _shr(sig, right), sig << np.minimum(-shift, 63).astype(np.uint64))
    kept = np.where(sig == 0, np.uint64(0), kept)
    discarded = sig & _low_mask(right)
    up = _round_up(mode, sign, kept, discarded, right, sticky, random_bits, sr_bits)
    kept = kept + up.astype(np.uint64)
    carry = kept >> np.uint64(M + 1) != 0
    if fmt.kind == "float":
        kept = np.where(carry, kept >> _U1, kept)
        target = target + carry
    # Overflow: beyond the largest finite significand at emax.
    if fmt.kind == "int":
        over = huge | (kept > fmt.max_sig)
    else:
        top_exp = target + M
        over = (top_exp > fmt.emax) | ((top_exp == fmt.emax) & (kept > fmt.max_sig))
        over &= kept != 0                             # a zero is never an overflow
    codes = _pack(fmt, sign, kept, target)
    if over.any():
        codes = np.where(over, _overflow_codes(fmt, sign, over, mode, overflow), codes)
    return codes.astype(fmt.code_dtype)


def round_flags(fmt: FormatLayout, sign: Any, lsb_exp: Any, sig: Any, sticky: Any = False,
                rounding: Rounding | str = "rne") -> tuple[npt.NDArray[np.bool_], ...]:
    """IEEE 754 flags of rounding ``(-1)**sign * (sig + s) * 2**lsb_exp`` to float format ``fmt``.

    The inputs are :func:`round_to`'s (they broadcast); the result is ``(overflow, tiny,
    inexact)``, boolean arrays. ``overflow``: the value rounded with an unbounded exponent range
    (``fmt``'s precision) exceeds ``fmt.max``. ``tiny``: that rounded value is non-zero and
    below ``2**fmt.emin`` (tininess after rounding, as RISC-V detects it). ``inexact``: the
    value :func:`round_to` delivers (subnormals, overflow by any policy) differs from the exact
    one; every overflow is inexact. IEEE 754's underflow flag is ``tiny & inexact``. A zero
    (``sig == 0`` without ``sticky``) raises nothing. Exact, in integers; stochastic rounding
    and integer formats have no such flags (ValueError).
    """
    mode = Rounding.of(rounding)
    if mode is Rounding.STOCHASTIC or fmt.kind != "float":
        raise ValueError(f"Flags are defined for float formats and deterministic rounding, not "
                         f"{fmt.name} with {mode.value}")
    xp = _xp_of(sig, sign, lsb_exp, sticky)
    sign, lsb_exp, sig, sticky = xp.broadcast_arrays(
        xp.asarray(sign, np.uint8), xp.asarray(lsb_exp, np.int64),
        xp.asarray(sig, np.uint64), xp.asarray(sticky, bool))
    tiny_in = (sig == 0) & sticky                 # a bare sticky bit: below every value
    sig = np.where(tiny_in, _U1, sig)
    lsb_exp = np.where(tiny_in, -(1 << 20), lsb_exp)
    sticky = sticky & ~tiny_in
    nonzero = sig != 0
    M = fmt.man_bits
    msb_exp = lsb_exp + bit_length(sig) - 1

    def cut(target):
        """The significand kept at LSB exponent ``target`` (M + 1 bits for an unbounded
        cut), rounded, and whether bits were discarded."""
        shift = target - lsb_exp
        right = np.maximum(shift, 0)
        kept = np.where(shift > 0, _shr(sig, right),
                        sig << np.clip(-shift, 0, 63).astype(np.uint64))
        discarded = sig & _low_mask(right)
        up = _round_up(mode, sign, kept, discarded, right, sticky, None, 0)
        return kept + up.astype(np.uint64), (discarded != 0) | sticky

    kept, _ = cut(msb_exp - M)                    # unbounded exponent: M + 1 bits kept
    carry = (kept >> np.uint64(M + 1)) != 0
    top_exp = msb_exp + carry
    kept = np.where(carry, kept >> _U1, kept)
    overflow = nonzero & ((top_exp > fmt.emax) | ((top_exp == fmt.emax) & (kept > fmt.max_sig)))
    tiny = nonzero & (top_exp < fmt.emin)
    _, lost = cut(np.maximum(msb_exp, fmt.emin) - M)
    return overflow, tiny, nonzero & (lost | overflow)


def _round_up(mode: Rounding, sign, kept, discarded, right, sticky, random_bits,
              sr_bits: int) -> npt.NDArray[np.bool_]:
    """Whether each magnitude, cut to ``kept`` with ``discarded`` (its low ``right`` bits)
    and ``sticky`` below them, rounds up one LSB under ``mode``."""
    guard = np.where(right >= 1, _shr(discarded, right - 1) & _U1, 0).astype(bool)
    rest = (discarded & _low_mask(np.maximum(right - 1, 0))) != 0
    rest |= sticky
    inexact = guard | rest
    odd = (kept & _U1).astype(bool)
    if mode is Rounding.RNE:
        return guard & (rest | odd)
    if mode is Rounding.RNA:
        return guard
    if mode is Rounding.RZ:
        return np.zeros_like(guard)
    if mode is Rounding.RU:
        return inexact & (sign == 0)
    if mode is Rounding.RD:
        return inexact & (sign == 1)
    xp = _xp_of(kept)
    r = xp.broadcast_to(xp.asarray(random_bits, np.uint64), kept.shape)
    # The sr_bits discarded bits just below the cut, as an integer.
    top = np.where(right >= sr_bits, _shr(discarded, right - sr_bits),
                   discarded << np.clip(sr_bits - right, 0, 63).astype(np.uint64))
    return (top + r) >= (_U1 << np.uint64(sr_bits))


def _pack(fmt: FormatLayout, sign, kept, target) -> npt.NDArray[np.uint64]:
    """Codes (uint64) of in-range results: significand ``kept`` with LSB exponent ``target``."""
    M = fmt.man_bits
    if fmt.kind == "int":
        mag = np.minimum(kept, np.uint64(fmt.max_sig)).astype(np.int64)
        ival = np.where(sign == 1, -mag, mag)
        return (ival & 0xFF).astype(np.uint64)      # a zero magnitude gives +0: one zero
    normal = kept >> np.uint64(M) != 0
    exp_field = np.where(normal, target + M + fmt.bias, 0)
    exp_field = np.clip(exp_field, 0, (1 << fmt.exp_bits) - 1).astype(np.uint64)
    codes = (exp_field << np.uint64(M)) | (kept & np.uint64((1 << M) - 1))
    if not fmt.has_zero:
        codes = np.where(kept == 0, np.uint64(0), codes)    # smallest value, 2**-bias
    if fmt.signed:
        codes |= sign.astype(np.uint64) << np.uint64(fmt.sign_shift)
    return codes


def _overflow_codes(fmt: FormatLayout, sign, over, mode: Rounding,
                    overflow: Overflow) -> npt.NDArray[np.uint64]:
    """Codes of overflowing results: ±max or ±Inf (NaN without Inf) by policy and mode."""
    neg = sign == 1
    if overflow is Overflow.SATURATE:
        to_inf = np.zeros_like(over)
    elif overflow is Overflow.INF:
        to_inf = np.ones_like(over)
    elif mode is Rounding.RZ:
        to_inf = np.zeros_like(over)
    elif mode is Rounding.RU:
        to_inf = ~neg
    elif mode is Rounding.RD:
        to_inf = neg
    else:
        to_inf = np.ones_like(over)
    signbit = (sign.astype(np.uint64) << np.uint64(fmt.sign_shift)) if fmt.signed else 0
    if fmt.kind == "int":
        maxc = np.where(neg, np.uint64(0x81), np.uint64(0x7F))
    else:
        maxc = np.uint64(fmt.code_of_max) | signbit
    if fmt.has_inf:
        infc = np.uint64(fmt.code_of_inf) | signbit
    elif fmt.has_nan:
        infc = np.uint64(fmt.code_of_nan) | signbit
    else:
        infc = maxc     # unreachable: saturate is forced above
    return np.where(to_inf, infc, maxc)
