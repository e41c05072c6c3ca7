"""The ``e-zero`` family: dots whose outcome depends on the step's LSB when zeros lead.

Every non-zero product of a dot lies below the output's smallest subnormal ``u`` (and below
any e_zero near it), and C is +0, so a unit's first step has ``E = e_zero`` and keeps
``2**(e_zero - F)`` as its LSB. Each dot is a ladder that sums to a value the output rounds one
way when its smallest term ``2**j`` is kept and the other way when that LSB cuts it off:

- the RZ rung: the bits from ``u/2`` down to ``2**j`` (in chunks of one operand's significand
  width), plus ``2**j``: exactly ``u`` when kept, below ``u`` (so 0 under RZ) when cut;
- the RNE rung: ``u/2 + 2**j``: above the tie (so ``u`` under RNE) when kept, the tie (so 0)
  when cut.

Rows of A alternate the two rungs and draw the depth ``u / 2**j`` at random; columns of B move
the last term to ``2**(j + s)``, s in [-3, 4] (the RNE rung then tells whether the step keeps
``2**(j + s)``, and the RZ rung does for s >= 0), so one set covers a range of e_zero - F.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .. import formats
from ..errors import VectorFileError

__all__ = ["ladder_operands"]

_SHIFTS = (-3, 4)   # columns move the last term by 2**-3 .. 2**4


def _lsb_min(f: formats.Format) -> int:
    return f.emin - f.man_bits


def _split(p: int, w: int, fa: formats.Format, fb: formats.Format) -> tuple[int, int] | None:
    """``(x, y)`` with ``x + y = p`` such that ``pattern * 2**x`` (any pattern below ``2**w``)
    is exact in ``fa`` and ``2**y`` in ``fb``, with the least alignment-exponent inflation
    (subnormal operands align at emin); None when there is none."""
    best = None
    for y in range(_lsb_min(fb), fb.emax + 1):
        x = p - y
        if x < _lsb_min(fa) or x + w - 1 > fa.emax:
            continue
        inflation = max(fa.emin - (x + w - 1), 0) + max(fb.emin - y, 0)
        key = (inflation, abs((x + w - 1) - y))
        if best is None or key < best[0]:
            best = (key, (x, y))
    return None if best is None else best[1]


def _plan(fa: formats.Format, fb: formats.Format, pu: int, slots: int):
    """Chunk splits, the last term's B exponent and the deepest rung, for output LSB
    ``2**pu``; None when the operands cannot reach it."""
    w = fa.man_bits + 1
    chunks = []
    for c in range(slots - 1):
        split = _split(pu - (c + 1) * w, w, fa, fb)
        if split is None:
            break
        chunks.append(split)
    if not chunks:
        return None
    depth = len(chunks) * w
    y_last = min(max(pu - 1 - fa.emax, _lsb_min(fb) - _SHIFTS[0]), fb.emax - _SHIFTS[1])
    depth = min(depth, pu - y_last - _lsb_min(fa))
    return (chunks, y_last, depth) if depth >= 1 else None


def ladder_operands(rng: np.random.Generator, fa: formats.Format, fb: formats.Format,
                    c_format: str, batch: tuple[int, ...], m: int, n: int, k: int,
                    ) -> tuple[npt.NDArray, npt.NDArray]:
    """A and B of the ``e-zero`` family (C is +0): see the module docstring."""
    if fa.kind != "float" or fb.kind != "float":
        raise VectorFileError("Family 'e-zero' needs float operands, not int8")
    if k < 2:
        raise VectorFileError("Family 'e-zero' needs K of at least 2")
    slots = min(k, 4)
    cf = formats.get(c_format)
    pu = _lsb_min(cf)                  # u: the output's smallest subnormal
    plan = _plan(fa, fb, pu, slots)
    while plan is None and pu < 64:    # operands that cannot reach u: the lowest ladder they can
        pu += 1
        plan = _plan(fa, fb, pu, slots)
    if plan is None:
        raise VectorFileError(f"Family 'e-zero' cannot be built from {fa.name} x {fb.name}")
    chunks, y_last, depth = plan
    w, last = fa.man_bits + 1, len(chunks)
    vals_a = np.zeros(batch + (m, k))
    d = rng.integers(1, depth + 1, size=batch + (m,))
    j = pu - d
    rz = (np.arange(m) % 2 == 0)
    for c, (x, _) in enumerate(chunks):
        top = pu - 1 - c * w                       # the chunk's top bit
        bits = np.clip(top - j + 1, 0, w)
        fill = ((1 << bits) - 1) << (w - bits)     # the bits from the top down to 2**j
        pattern = np.where(rz, fill, (1 << (w - 1)) if c == 0 else 0)
        vals_a[..., c] = np.ldexp(pattern.astype(np.float64), x)
    vals_a[..., last] = np.ldexp(1.0, j - y_last)
    vals_a *= np.where(rng.random(batch + (m, 1)) < 0.5, -1.0, 1.0)
    vals_b = rng.standard_normal(batch + (k, n))
    for c, (_, y) in enumerate(chunks):
        vals_b[..., c, :] = 2.0 ** y
    shift = rng.integers(_SHIFTS[0], _SHIFTS[1] + 1, size=batch + (n,))
    vals_b[..., last, :] = np.ldexp(1.0, y_last + shift)
    a = fa.encode(vals_a, "rne", saturate=True)          # exact (checked below): any format
    b = fb.encode(vals_b, "rne", saturate=True)
    assert np.array_equal(fa.decode(a), vals_a), "ladder terms must be exact"
    return a, b
