"""Exact fields of the fast engine's operands: A, B, their block scales and accumulators.

An :class:`Operand` holds, per code, ``value = (-1)**sign * sig * 2**lsb``, the exponent the
alignment uses, and the IEEE class flags; :class:`Operands` builds them once for a whole
vector set, upcast and scale-folded as the unit's spec says.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ... import formats
from ...spec import Specials, UnitSpec
from ...vectors import VectorSet
from .._kernels import INF, NAN, ZERO

__all__ = ["Operand", "Operands", "code_table", "index_count", "is_nan", "special_codes"]


def index_count(idx) -> int:
    """How many K indices ``idx`` (an index array or a slice) selects."""
    return len(range(*idx.indices(1 << 62))) if isinstance(idx, slice) else len(idx)


@dataclass
class Operand:
    """Exact fields of one operand: value = (-1)**sign * sig * 2**lsb; ``e`` is the exponent
    the alignment uses; non-finite codes get ``sig = 0`` and a flag."""
    sign: npt.NDArray[np.int64]
    sig: npt.NDArray[np.int64]
    lsb: npt.NDArray[np.int64]
    e: npt.NDArray[np.int64]
    zero: npt.NDArray[np.bool_]
    nan: npt.NDArray[np.bool_]
    inf: npt.NDArray[np.bool_]

    @classmethod
    def of(cls, fmt: formats.Format, codes: npt.NDArray, finite: bool = False) -> Operand:
        """The fields of ``codes`` of ``fmt`` (exact; no rounding); ``finite``: NaN and Inf
        codes are the numbers their bits spell (a unit with ``specials = "none"``)."""
        sign, e, sig = fmt.fields(codes)
        cls_ = fmt.classify(codes)
        nan = (cls_ == int(formats.Class.NAN)) & (not finite)
        inf = (cls_ == int(formats.Class.INF)) & (not finite)
        sig = np.where(nan | inf, 0, sig).astype(np.int64)
        e = e.astype(np.int64)
        zero = (sig == 0) & ~nan & ~inf
        return cls(sign.astype(np.int64), sig, e - fmt.man_bits, e, zero, nan, inf)

    @classmethod
    def read(cls, fmt: formats.Format, x: Operand | npt.NDArray) -> Operand:
        """``x`` when it is already an Operand (a C read as the spec says), else the fields of
        codes ``x`` of ``fmt`` (a value the unit computed: NaN and Inf codes keep their
        meaning)."""
        return x if isinstance(x, Operand) else cls.of(fmt, x)

    def take(self, index) -> Operand:
        """The operand's fields indexed by ``index``."""
        return Operand(*(getattr(self, f)[index] for f in
                         ("sign", "sig", "lsb", "e", "zero", "nan", "inf")))


@dataclass
class Operands:
    """Fields of A, B and their scales for a whole vector set, computed once."""
    a: Operand
    b: Operand
    sa: Operand | None
    sb: Operand | None
    a_lsb_min: int
    b_lsb_min: int
    specials: bool

    @classmethod
    def of(cls, spec: UnitSpec, vs: VectorSet) -> Operands:
        """A and B (batch, M, K)/(batch, K, N) and their scales repeated to every element."""
        fa, fb = formats.get(vs.a_format), formats.get(vs.b_format)
        finite = spec.specials is Specials.NONE
        nb = int(np.prod(vs.batch_shape, dtype=np.int64))
        a_codes, b_codes = vs.a.reshape(nb, vs.m, vs.k), vs.b.reshape(nb, vs.k, vs.n)
        folded = False
        if spec.upcast is not None:
            # The operands as the tensor core sees them: re-encoded in the upcast format (with
            # the block scales folded in, where the spec says so), whose fields then give the
            # alignment exponents.
            up = formats.get(spec.upcast)
            how = "all" if finite else spec.upcast_specials
            va = _upcast_values(fa, a_codes, how)
            vb = _upcast_values(fb, b_codes, how)
            if spec.fold_scales:
                blk = vs.block
                with np.errstate(invalid="ignore"):      # Inf * a zero scale is NaN
                    va = va * np.repeat(_folded_scales(vs.a_scale.reshape(nb, vs.m, -1)), blk, -1)
                    vb = vb * np.repeat(_folded_scales(vs.b_scale.reshape(nb, -1, vs.n)), blk,
                                        -2)
                folded = True
            a_codes = up.encode(va, "rne", saturate=False)
            b_codes = up.encode(vb, "rne", saturate=False)
            fa = fb = up
        a = Operand.of(fa, a_codes, finite)
        b = Operand.of(fb, b_codes, finite)
        sa = sb = None
        if vs.scale_format is not None and not folded:
            fs = formats.get(vs.scale_format)
            blk = vs.block
            sa = Operand.of(fs, np.repeat(vs.a_scale.reshape(nb, vs.m, -1), blk, axis=-1),
                            finite)
            sb = Operand.of(fs, np.repeat(vs.b_scale.reshape(nb, -1, vs.n), blk, axis=-2),
                            finite)
            sa.sign[...] = 0          # UE4M3's sign bit is ignored, E8M0 has none
            sb.sign[...] = 0
        specials = bool(a.nan.any() or a.inf.any() or b.nan.any() or b.inf.any()
                        or (sa is not None and (sa.nan.any() or sb.nan.any())))
        return cls(a, b, sa, sb, _lsb_min(fa), _lsb_min(fb), specials)


def _lsb_min(fmt: formats.Format) -> int:
    """The exponent of the smallest non-zero value's LSB (every code is a multiple of it)."""
    return (fmt.emin - fmt.man_bits) if fmt.kind == "float" else -fmt.man_bits


def _upcast_values(fmt: formats.Format, codes: npt.NDArray, specials: str) -> npt.NDArray:
    """Element values as an upcast reads them: exactly, or (``specials="finite"``) with an
    IEEE-style format's Inf/NaN codes read as ``±2**(emax+1) * (1 + m / 2**man_bits)``, or
    (``specials="all"``) every code as the number its fields spell."""
    if specials == "all":
        sign, e, sig = fmt.fields(codes)
        values = np.ldexp(sig.astype(np.float64), e.astype(np.int64) - fmt.man_bits)
        return np.where(sign == 1, -values, values)
    values = fmt.decode(codes)
    if specials == "finite" and fmt.kind == "float" and fmt.specials is formats.Specials.IEEE:
        top = fmt.exp(codes) == (1 << fmt.exp_bits) - 1
        mag = np.ldexp(1.0 + fmt.man(codes) / (1 << fmt.man_bits), fmt.emax + 1)
        values = np.where(top, np.where(fmt.sign(codes) == 1, -mag, mag), values)
    return values


def _folded_scales(codes: npt.NDArray) -> npt.NDArray[np.float64]:
    """E8M0 scale values as a bf16-folding emulation builds them: 0x00 is 0, 0xFF NaN."""
    codes = codes.astype(np.int64)
    return np.where(codes == 0xFF, np.nan,
                    np.where(codes == 0, 0.0, np.ldexp(1.0, codes - 127)))


def is_nan(fmt: formats.Format, codes) -> npt.NDArray:
    """Which ``codes`` of ``fmt`` are NaN, as ``fmt.classify`` says: for an IEEE-style float
    format, one comparison (a magnitude above Inf's), where classify makes a dozen passes."""
    if fmt.kind == "float" and fmt.specials is formats.Specials.IEEE and fmt.has_inf:
        dt = fmt.code_dtype.type
        return (codes & dt((1 << fmt.sign_shift) - 1)) > dt(fmt.code_of_inf)
    return fmt.classify(codes) == int(formats.Class.NAN)


def special_codes(fmt: formats.Format, nan, pinf, ninf, codes) -> npt.NDArray:
    """``codes`` with NaN / ±Inf codes of ``fmt`` where the flags say so (+Inf and -Inf
    together give NaN)."""
    codes = np.where(pinf, fmt.code_of_inf, codes)
    codes = np.where(ninf, fmt.code_of_inf | (1 << fmt.sign_shift), codes)
    return np.where(nan | (pinf & ninf), fmt.code_of_nan, codes).astype(fmt.code_dtype)


@functools.cache
def code_table(fmt_name: str, finite: bool, scale: bool = False) -> npt.NDArray | None:
    """The fields of every code of a format of at most 16 bits, as :meth:`Operand.of` gives
    them (the kernels' sides look terms up here, on the CPU and on a GPU): int32 (5, 2**bits)
    sign, sig, lsb, e, flags of an element format; with ``scale``, (4, 256) sig, lsb, e, flags
    (NaN, zero) of a scale format, whose sign is ignored (as :meth:`Operands.of` does). None
    above 16 bits (8 for a scale). Read-only."""
    fmt = formats.get(fmt_name)
    if fmt.bits > (8 if scale else 16):
        return None
    op = Operand.of(fmt, np.arange(1 << fmt.bits).astype(fmt.code_dtype), finite)
    if scale:
        out = np.zeros((4, 256), np.int64)
        out[:, :1 << fmt.bits] = (op.sig, op.lsb, op.e, op.nan * NAN | op.zero * ZERO)
    else:
        out = np.stack([op.sign, op.sig, op.lsb, op.e,
                        op.nan * NAN | op.inf * INF | op.zero * ZERO])
    out = out.astype(np.int32)
    out.flags.writeable = False
    return out
