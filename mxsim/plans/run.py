"""Running a plan: chunks through an engine, then the reduction and the epilogue.

Each chunk ``[k0, k1)`` of K is a vector set of its own (the K tail zero-padded to the unit's
instruction k, as the MMA sees zeros there), computed from +0 by the plan's unit with the
``reference``, ``fast`` or ``gpu`` engine. The partials (FP32 codes) are then reduced and the
epilogue applied on bit patterns, twice over:

- :func:`reduce_fast`: vectorised, in integers (:func:`mxsim.engine.fast.fma_fp32` and
  :func:`mxsim.formats.round_to`; the ``gpu`` engine uses it on the partials it brings back);
- :func:`reduce_reference`: one output at a time with Python fractions, rounding by its own
  few lines of integer code.

A test holds them equal on random and adversarial partials. Every NaN the reduction makes is
the all-ones positive code (``0x7FFFFFFF`` in FP32, ``0x7FFF`` in BF16 and FP16), as CUDA's
adds and conversions write it.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import formats, presets
from .. import spec as spec_mod
from ..engine import fast, reference
from ..engine.fast.adders import exact_sum2
from ..engine.fast.operands import Operand
from ..formats import Overflow
from ..spec import UnitSpec
from ..vectors import VectorSet
from . import Merge, Plan, PlanError

__all__ = ["run", "partials", "chunk_set", "unit_spec", "reduce_fast", "reduce_reference",
           "ENGINES", "nan_code", "as_fp32"]

ENGINES = ("fast", "reference", "gpu")

#: E8M0 / UE4M3 codes of 1.0: the scale of a padded block (its elements are zero).
_ONE_SCALE = {"e8m0": 127, "ue4m3": 0x38}


def nan_code(fmt: str) -> int:
    """The NaN code plans write: positive, all-ones payload."""
    return (1 << (formats.get(fmt).bits - 1)) - 1


def unit_spec(plan: Plan, vs: VectorSet) -> UnitSpec:
    """The spec the plan's unit applies to ``vs``'s formats."""
    name = plan.unit
    if name.endswith((".toml", ".json")) or Path(name).is_file():
        preset = presets.from_spec(spec_mod.load(name), summary=f"spec file {name}",
                                   provenance=f"spec file {name}")
    else:
        preset = presets.get(name)
    return preset.spec_for(vs)


def chunk_set(vs: VectorSet, k0: int, k1: int, kpad: int) -> VectorSet:
    """The set of K range ``[k0, k1)`` of ``vs``, zero-padded to ``kpad`` elements, no C."""
    extra = kpad - (k1 - k0)
    a, b = vs.a[..., k0:k1], vs.b[..., k0:k1, :]
    if extra:
        a = np.concatenate([a, np.zeros(a.shape[:-1] + (extra,), a.dtype)], axis=-1)
        b = np.concatenate([b, np.zeros(b.shape[:-2] + (extra,) + b.shape[-1:], b.dtype)],
                           axis=-2)
    a_scale, b_scale = vs.a_scale, vs.b_scale
    if vs.scale_format in ("e8m0", "ue4m3"):
        blk = vs.block
        if k0 % blk or (k1 % blk and k1 != vs.k):
            raise PlanError(f"a chunk [{k0}, {k1}) of K cuts a scale block of {blk}; give the "
                            f"plan a granule that is a multiple of {blk}")
        a_scale, b_scale = a_scale[..., k0 // blk:-(-k1 // blk)], b_scale[..., k0 // blk:
                                                                        -(-k1 // blk), :]
        more = -(-kpad // blk) - a_scale.shape[-1]
        if more:
            one = _ONE_SCALE[vs.scale_format]
            a_scale = np.concatenate([a_scale, np.full(a_scale.shape[:-1] + (more,), one,
                                                       a_scale.dtype)], axis=-1)
            b_scale = np.concatenate([b_scale, np.full(b_scale.shape[:-2] + (more,) +
                                                       b_scale.shape[-1:], one, b_scale.dtype)],
                                     axis=-2)
    return vs.replace(a=a, b=b, a_scale=a_scale, b_scale=b_scale, c=None, d=None)


def _check_set(plan: Plan, vs: VectorSet, chunks: int) -> None:
    if chunks > 1 and (vs.scale_format == "fp32" or vs.tensor_scale is not None):
        raise PlanError(f"plan {plan.name!r} splits K, and the set has FP32 scales, which the "
                        f"library applies to the reduced sum; plans with split = 1 run such "
                        f"sets, split plans do not yet")


def partials(plan: Plan, vs: VectorSet, engine: str = "fast") -> list[npt.NDArray[np.uint32]]:
    """Each chunk's partial sum (FP32 codes, shape ``vs.out_shape``), from +0."""
    if engine not in ENGINES:
        raise PlanError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    spec = unit_spec(plan, _no_c(vs))
    bounds = plan.bounds(vs.k, spec.k)
    _check_set(plan, vs, len(bounds))
    dot = _engine(engine)
    out = []
    for k0, k1 in bounds:
        length = k1 - k0
        kpad = length if spec.k is None else -(-length // spec.k) * spec.k
        part = chunk_set(vs, k0, k1, kpad)
        out.append(as_fp32(dot(unit_spec(plan, part), part), spec.d_format))
    return out


def run(plan: Plan, vs: VectorSet, engine: str = "fast", *,
        bias: npt.NDArray | None = None) -> npt.NDArray:
    """``D`` codes (in ``plan.out_format``) of the plan on the inputs of ``vs``.

    ``bias``: FP32 codes of shape ``(N,)`` added after ``beta * C`` (``F.linear``'s bias).
    """
    if engine not in ENGINES:
        raise PlanError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    if bias is not None:
        bias = np.asarray(bias)
        if bias.dtype != np.uint32 or bias.shape != (vs.n,):
            raise PlanError(f"bias must be FP32 codes (uint32) of shape ({vs.n},), not "
                            f"{bias.dtype} {bias.shape}")
    reduce = reduce_reference if engine == "reference" else reduce_fast
    c = None if vs.c is None else as_fp32(vs.c, vs.c_format)
    if plan.merge is Merge.SERIAL:
        total = _serial(plan, vs, engine, reduce)          # already rounded to sum_format
        return reduce([total], plan.replace(merge=Merge.FORWARD, partial_format="fp32"), c,
                      bias)
    return reduce(partials(plan, vs, engine), plan, c, bias)


def _serial(plan: Plan, vs: VectorSet, engine: str, reduce) -> npt.NDArray[np.uint32]:
    """A serial split-K: chunk i's chain starts from the running sum (rounded to
    ``sum_format`` between chunks)."""
    spec = unit_spec(plan, _no_c(vs))
    bounds = plan.bounds(vs.k, spec.k)
    _check_set(plan, vs, len(bounds))
    dot = _engine(engine)
    total = None
    one = plan.replace(split=1, merge=Merge.FORWARD, alpha=1.0, beta=1.0, out_format="fp32")
    for k0, k1 in bounds:
        length = k1 - k0
        kpad = length if spec.k is None else -(-length // spec.k) * spec.k
        part = chunk_set(vs, k0, k1, kpad)
        if total is not None:
            part = part.replace(c=total, c_format="fp32")
        total = as_fp32(dot(unit_spec(plan, part), part), spec.d_format)
        total = reduce([total], one.replace(partial_format=plan.sum_format), None, None)
    return total


def _no_c(vs: VectorSet) -> VectorSet:
    """``vs`` without C: the unit runs each chunk from +0 (C is the epilogue's)."""
    return vs if vs.c is None else vs.replace(c=None, d=None)


def _engine(engine: str):
    if engine == "gpu":
        from ..engine import gpu
        return gpu.dot
    return fast.dot if engine == "fast" else reference.dot


def as_fp32(codes: Any, fmt: str) -> npt.NDArray[np.uint32]:
    """Codes of ``fmt`` (fp32, bf16, fp16) as the FP32 codes of the same values (exact)."""
    codes = np.asarray(codes)
    if fmt == "fp32":
        return codes.astype(np.uint32)
    f = formats.get(fmt)
    values = f.decode(codes).astype(np.float32)                  # exact: a narrower format
    out = values.view(np.uint32).copy()
    out[np.isnan(values)] = nan_code("fp32")
    return out


# -- the reduction, vectorised --------------------------------------------------------------

_ONE = np.uint32(0x3F800000)


def _round_fast(codes: npt.NDArray[np.uint32], fmt: str) -> npt.NDArray:
    """FP32 codes rounded to ``fmt`` (RNE, IEEE overflow), as codes of ``fmt``."""
    if fmt == "fp32":
        return codes
    f, fp32 = formats.get(fmt), formats.get("fp32")
    op = Operand.of(fp32, codes)
    out = formats.round_to(f, op.sign.astype(np.uint8), op.lsb, op.sig.astype(np.uint64),
                           False, "rne", Overflow.IEEE)
    out = np.where(op.inf, f.code_of_inf | (op.sign.astype(out.dtype) << f.sign_shift), out)
    return np.where(op.nan, nan_code(fmt), out).astype(f.code_dtype)


def _add_fast(x: npt.NDArray, y: npt.NDArray, fmt: str) -> npt.NDArray[np.uint32]:
    """``x + y`` (FP32 codes) rounded once to ``fmt``, as FP32 codes of the rounded value."""
    if fmt == "fp32":
        return _canon(fast.fma_fp32(x, _ONE, y))
    f, fp32 = formats.get(fmt), formats.get("fp32")
    x, y = np.broadcast_arrays(np.asarray(x, np.uint32), np.asarray(y, np.uint32))
    ox, oy = Operand.of(fp32, x), Operand.of(fp32, y)
    neg, mag, base, sticky, zero = exact_sum2(ox.sign, ox.sig, ox.lsb, oy.sign, oy.sig, oy.lsb)
    codes = formats.round_to(f, neg, base, mag, sticky, "rne", Overflow.IEEE)
    both_neg = ox.zero & oy.zero & (ox.sign == 1) & (oy.sign == 1)
    codes = np.where(zero, np.where(both_neg, 1 << f.sign_shift, 0), codes)
    nan = ox.nan | oy.nan | (ox.inf & oy.inf & (ox.sign != oy.sign))
    pos = (ox.inf & (ox.sign == 0)) | (oy.inf & (oy.sign == 0))
    ngt = (ox.inf & (ox.sign == 1)) | (oy.inf & (oy.sign == 1))
    codes = np.where(pos, f.code_of_inf, np.where(ngt, f.code_of_inf | (1 << f.sign_shift),
                                                  codes))
    codes = np.where(nan, nan_code(fmt), codes).astype(f.code_dtype)
    return as_fp32(codes, fmt)


def _canon(codes: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    nan = (codes & 0x7F800000) == 0x7F800000
    nan &= (codes & 0x007FFFFF) != 0
    return np.where(nan, np.uint32(nan_code("fp32")), codes).astype(np.uint32)


def reduce_fast(parts: list[npt.NDArray], plan: Plan, c: npt.NDArray | None,
                bias: npt.NDArray | None) -> npt.NDArray:
    """Partials (FP32 codes) to D codes: rounded to ``partial_format``, merged, epilogue."""
    ps = [_canon(as_fp32(_round_fast(np.asarray(p, np.uint32), plan.partial_format),
                          plan.partial_format)) for p in parts]
    if plan.merge is Merge.TREE:
        while len(ps) > 1:
            ps = [_add_fast(ps[i], ps[i + 1], plan.sum_format) if i + 1 < len(ps) else ps[i]
                  for i in range(0, len(ps), 2)]
        total = ps[0]
    else:
        total = ps[0]
        for p in ps[1:]:
            total = _add_fast(total, p, plan.sum_format)
    if plan.alpha != 1.0:
        total = _canon(fast.mul_fp32(total, _f32(plan.alpha)))
    if c is not None and plan.beta != 0.0:
        total = _canon(fast.fma_fp32(np.broadcast_to(_f32(plan.beta), total.shape), c, total))
    if bias is not None:
        total = _canon(fast.fma_fp32(total, _ONE, np.broadcast_to(bias, total.shape)))
    return _round_fast(total, plan.out_format)


def _f32(x: float) -> np.uint32:
    return np.float32(x).view(np.uint32)


# -- the reduction, one output at a time ----------------------------------------------------

_NAN, _PINF, _NINF = "nan", "+inf", "-inf"


def _value(code: int) -> Fraction | str | tuple[str, int]:
    """An FP32 code as a Fraction, a special, or ``("zero", sign)``."""
    sign, exp, man = code >> 31, (code >> 23) & 0xFF, code & 0x7FFFFF
    if exp == 0xFF:
        return _NAN if man else (_NINF if sign else _PINF)
    if exp == 0 and man == 0:
        return ("zero", sign)
    q = Fraction(man if exp == 0 else man | 0x800000) * Fraction(2) ** ((exp or 1) - 150)
    return -q if sign else q


def _round_ref(v, fmt: str) -> int:
    """Round a Fraction / special to ``fmt`` (RNE, IEEE overflow) in integers."""
    f = formats.get(fmt)
    man, ebits = f.man_bits, f.exp_bits
    bias = (1 << (ebits - 1)) - 1
    sign_bit = 1 << (f.bits - 1)
    inf = ((1 << ebits) - 1) << man
    if v == _NAN:
        return nan_code(fmt)
    if v in (_PINF, _NINF):
        return inf | (sign_bit if v == _NINF else 0)
    if isinstance(v, tuple):
        return sign_bit if v[1] else 0
    sign = sign_bit if v < 0 else 0
    q = abs(v)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    e = max(e, 1 - bias)
    scaled = q * Fraction(2) ** (man - e)
    i = scaled.numerator // scaled.denominator
    rem = scaled - i
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and i % 2):
        i += 1
    if i == 1 << (man + 1):
        i, e = i >> 1, e + 1
    if e > bias:
        return sign | inf
    if i == 0:
        return sign
    field = e + bias if i >= 1 << man else 0
    return sign | (field << man) | (i & ((1 << man) - 1))


def _widen(code: int, fmt: str):
    """A ``fmt`` code as the value _value gives for FP32."""
    f = formats.get(fmt)
    if fmt == "fp32":
        return _value(code)
    value = float(f.decode(np.array([code], f.code_dtype))[0])
    if value != value:
        return _NAN
    if value in (float("inf"), float("-inf")):
        return _PINF if value > 0 else _NINF
    if value == 0:
        return ("zero", 1 if np.signbit(value) else 0)
    return Fraction(value)


def _add_ref(x, y):
    if _NAN in (x, y) or {x, y} == {_PINF, _NINF}:
        return _NAN
    for s in (_PINF, _NINF):
        if s in (x, y):
            return s
    if isinstance(x, tuple) and isinstance(y, tuple):
        return ("zero", x[1] & y[1])
    qx = Fraction(0) if isinstance(x, tuple) else x
    qy = Fraction(0) if isinstance(y, tuple) else y
    q = qx + qy
    return ("zero", 0) if q == 0 else q


def _mul_ref(x, y):
    def sign(v):
        if isinstance(v, tuple):
            return v[1]
        return 1 if v == _NINF else 0 if v == _PINF else int(v < 0)
    if _NAN in (x, y):
        return _NAN
    zero = lambda v: isinstance(v, tuple)                      # noqa: E731
    inf = lambda v: v in (_PINF, _NINF)                        # noqa: E731
    if (zero(x) and inf(y)) or (inf(x) and zero(y)):
        return _NAN
    s = sign(x) ^ sign(y)
    if inf(x) or inf(y):
        return _NINF if s else _PINF
    if zero(x) or zero(y):
        return ("zero", s)
    return x * y


def _rnd(v, fmt: str):
    """``v`` rounded to ``fmt`` and read back (the value a stored sum has)."""
    return _widen(_round_ref(v, fmt), fmt)


def reduce_reference(parts: list[npt.NDArray], plan: Plan, c: npt.NDArray | None,
                     bias: npt.NDArray | None) -> npt.NDArray:
    """The twin of :func:`reduce_fast`, one output at a time with Python fractions."""
    shape = np.asarray(parts[0]).shape
    flat = [np.asarray(p, np.uint32).reshape(-1) for p in parts]
    cf = None if c is None else np.asarray(c, np.uint32).reshape(-1)
    bf = None if bias is None else np.broadcast_to(np.asarray(bias, np.uint32), shape
                                                   ).reshape(-1)
    out = np.zeros(len(flat[0]), formats.get(plan.out_format).code_dtype)
    alpha, beta = Fraction(plan.alpha), Fraction(plan.beta)
    alpha_v = _value(int(_f32(plan.alpha)))
    beta_v = _value(int(_f32(plan.beta)))
    for i in range(len(out)):
        ps = [_rnd(_value(int(p[i])), plan.partial_format) for p in flat]
        if plan.merge is Merge.TREE:
            while len(ps) > 1:
                ps = [_rnd(_add_ref(ps[j], ps[j + 1]), plan.sum_format) if j + 1 < len(ps)
                      else ps[j] for j in range(0, len(ps), 2)]
            total = ps[0]
        else:
            total = ps[0]
            for p in ps[1:]:
                total = _rnd(_add_ref(total, p), plan.sum_format)
        if alpha != 1:
            total = _rnd(_mul_ref(total, alpha_v), "fp32")
        if cf is not None and beta != 0:
            total = _rnd(_add_ref(_mul_ref(beta_v, _value(int(cf[i]))), total), "fp32")
        if bf is not None:
            total = _rnd(_add_ref(total, _value(int(bf[i]))), "fp32")
        out[i] = _round_ref(total, plan.out_format)
    return out.reshape(shape)

