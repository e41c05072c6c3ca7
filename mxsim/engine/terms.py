"""The product terms of every K-block of a vector set, as a unit's alignment reads them.

:func:`product_terms` gives each product's exponent, and whether a factor is zero or special,
from the operand and scale formats' fields, by the spec's product rule: ``Product.RAW`` is
``e_a + e_b`` (plus the block scales' exponents), the significand product left in [0, 4) or
wider; ``Product.NORMALIZED`` is the exponent of the exact product. The step's largest exponent
and every term's shift below it follow from these, so analyses (verification coverage, error
studies) read them here instead of restating the arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .. import formats
from ..spec import Product, Specials, UnitSpec
from ..vectors import VectorSet
from .fast.alignment import scale_sum_shift

__all__ = ["ProductTerms", "product_terms"]


@dataclass(frozen=True)
class ProductTerms:
    """Every product of every K-block: arrays of shape ``(batch, M, N, K / k, k)``.

    Members
    -------
    exp
        The product's exponent by the spec's product rule, from its factors' fields (an Inf or
        NaN factor contributes the exponent its bits spell; the scales' sum as the spec's
        ``scale_sum_bits`` field holds it).
    zero
        A factor (element or scale) is zero.
    special
        A factor is Inf or NaN (a NaN scale included); never, for a unit with
        ``specials = "none"``, which reads those codes as numbers.
    e_zero
        The exponent a zero term aligns at (``UnitSpec.e_zero``).
    """
    exp: npt.NDArray[np.int64]
    zero: npt.NDArray[np.bool_]
    special: npt.NDArray[np.bool_]
    e_zero: int

    @property
    def align_e(self) -> npt.NDArray[np.int64]:
        """The exponent each term aligns at: ``exp``, or ``e_zero`` for a zero product and for
        an Inf or NaN one (whose value joins the result through the special-value rules, not
        the sum)."""
        return np.where(self.zero | self.special, self.e_zero, self.exp)


def product_terms(spec: UnitSpec, vs: VectorSet) -> ProductTerms:
    """The product terms of every block of ``spec.k`` products of every dot product of ``vs``.

    Exact: integer exponents from the formats' fields, no float rounding.

    Raises
    ------
    ValueError
        If the spec has no fixed k, GST groups or an operand upcast (their terms are not single
        products of the stored codes), or ``vs.k`` is not a multiple of ``spec.k``.
    """
    if spec.k is None or spec.group is not None or spec.upcast is not None:
        raise ValueError(f"Spec must have a fixed k, no GST groups and no upcast for its "
                         f"product terms, not {spec.name!r}")
    if vs.k % spec.k:
        raise ValueError(f"Vector set K must be a multiple of the spec's k ({spec.k}), "
                         f"not {vs.k}")
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    shape = (nb, vs.m, vs.k // spec.k, spec.k)           # A's codes by block; B's transposed
    finite = spec.specials is Specials.NONE
    a = _Factor.of(formats.get(vs.a_format), vs.a.reshape(nb, vs.m, vs.k).reshape(shape),
                   finite)
    b = _Factor.of(formats.get(vs.b_format), np.swapaxes(vs.b.reshape(nb, vs.k, vs.n), 1, 2)
                   .reshape((nb, vs.n) + shape[2:]), finite)
    factors = [(a, b)]
    if vs.scale_format is not None:
        fs = formats.get(vs.scale_format)
        sa = np.repeat(vs.a_scale.reshape(nb, vs.m, -1), vs.block, axis=-1)
        sb = np.repeat(np.swapaxes(vs.b_scale.reshape(nb, -1, vs.n), 1, 2), vs.block, axis=-1)
        factors.append((_Factor.of(fs, sa.reshape(shape), finite),
                        _Factor.of(fs, sb.reshape((nb, vs.n) + shape[2:]), finite)))
    normalized = spec.product is Product.NORMALIZED
    exp, zero, special, sig = 0, False, False, 1
    for fa, fb in factors:            # outer products over (M, N): (batch, M, N, blocks, k)
        # NORMALIZED: the exact product's leading one, bit_length(sig) - 1 above its LSB.
        exp = exp + (fa.lsb if normalized else fa.e)[:, :, None] + (
            fb.lsb if normalized else fb.e)[:, None]
        if normalized:
            sig = sig * fa.sig[:, :, None] * fb.sig[:, None]
        zero = zero | fa.zero[:, :, None] | fb.zero[:, None]
        special = special | fa.special[:, :, None] | fb.special[:, None]
    if normalized:                    # frexp is exact for these integers (below 2**53)
        exp = exp + np.frexp(sig.astype(np.float64))[1].astype(np.int64) - 1
    if vs.scale_format is not None:   # a narrow scale-exponent sum field (scale_sum_bits)
        sa, sb = factors[1]
        exp = exp + scale_sum_shift(spec, sa.e[:, :, None], sb.e[:, None])
    return ProductTerms(exp, zero, special, spec.e_zero)


@dataclass(frozen=True)
class _Factor:
    """Exact fields of one factor's codes: value = (-1)**sign * sig * 2**lsb, ``e`` its
    exponent (``lsb + man_bits``)."""
    e: npt.NDArray[np.int64]
    lsb: npt.NDArray[np.int64]
    sig: npt.NDArray[np.int64]
    zero: npt.NDArray[np.bool_]
    special: npt.NDArray[np.bool_]

    @classmethod
    def of(cls, fmt: formats.Format, codes: npt.NDArray, finite: bool) -> _Factor:
        _, e, sig = fmt.fields(codes)
        kind = fmt.classify(codes)
        special = ((kind == formats.Class.NAN) | (kind == formats.Class.INF)) & (not finite)
        e = e.astype(np.int64)
        return cls(e, e - fmt.man_bits, sig.astype(np.int64), (sig == 0) & ~special, special)
