"""Probe suites: vector sets whose outputs separate the hypotheses of a unit spec.

``probe_suite(kind="fp8")`` returns one vector set (batch axis = probe entries) in the
``mxsim.vectors/1`` schema, ready for ``mxsim gpu run`` and ``mxsim fit``. A is e5m2 (its
2**31.8 range lets one dot hold terms far more than F bits apart), B is e4m3, and B's columns
are powers of two with signs, so every row of A is one designed probe seen at 64 magnitudes:

=================== ==========================================================================
family              the hypotheses it separates
=================== ==========================================================================
``pair-cancel``     the step schedule: +X at index i, -X at j and a tiny s at t (X/s > 2**31).
                    s survives only when its step holds neither X (the pair cancels exactly
                    inside one step), so which (i, j, t) give s and which give 0 says which
                    indices are summed together, and in which order the steps run
``c-gap``           F, alignment rounding and where C enters: +X and -X cancel, C = ±2**-d
                    times patterns of low bits; C keeps exactly the bits above 2**(E - F),
                    truncated, floored or rounded by its sign, unless C is added after
``tie``             accumulator precision and rounding: sums that land on and around the
                    rounding boundaries of FP32, E8M13 and FP16 (ties, sticky bits)
``one-large``       product normalisation: one large term among tiny ones
``upcast``          operand upcast and product exponents: A spans e5m2's whole range (more
                    than F bits within a step), B holds E4M3 subnormals that vary along K,
                    whose exponent moves by up to 3 if the unit converts them to FP16 first
``random``          everything at once: uniform codes, normal and heavy-tailed values
``specials``        NaN/Inf rules, subnormal inputs and outputs (C near the underflow range)
=================== ==========================================================================
"""

from __future__ import annotations

import numpy as np

from . import formats, vectors
from .errors import VectorFileError
from .vectors import VectorSet

__all__ = ["probe_suite", "KINDS", "FAMILIES", "MAX_K"]

KINDS = ("fp8",)
FAMILIES = ("pair-cancel", "c-gap", "tie", "one-large", "upcast", "random", "specials")
ROWS = COLS = 64
#: The longest K a suite is built for: every modelled instruction has K <= 128, and the
#: family builders loop over K in Python per row.
MAX_K = 4096


def _columns(rng: np.random.Generator, k: int) -> np.ndarray:
    """B: every column a constant ±2**e (e4m3), e from -9 to 6 (-9..-7 are E4M3 subnormals,
    which an FP16 upcast turns into normals), so dot_j = ±2**e_j * dot."""
    e4m3 = formats.get("e4m3")
    exps = np.resize(np.arange(-9, 7), COLS)
    signs = np.where(np.arange(COLS) % 2, -1.0, 1.0)
    col = e4m3.encode(signs * np.exp2(exps.astype(float)))
    return np.broadcast_to(col, (k, COLS)).copy()


def _a(values: np.ndarray) -> np.ndarray:
    return formats.get("e5m2").encode(values, "rne", saturate=False)


def _pair_cancel(rng, k: int) -> tuple[np.ndarray, np.ndarray]:
    big, tiny = 57344.0, 2.0 ** -16               # e5m2 max and min subnormal: 2**31.8 apart
    rows = np.zeros((ROWS, k))
    for r in range(ROWS):
        i, j, t = rng.choice(k, size=3, replace=False)
        if r < k - 1:                             # systematic: i = 0, j = r + 1, t random
            i, j = 0, r + 1
            t = rng.choice([x for x in range(k) if x not in (i, j)])
        rows[r, i], rows[r, j], rows[r, t] = big, -big, tiny * (1 + (r % 3))
    return _a(rows), np.zeros((ROWS, COLS))


def _c_gap(rng, k: int) -> tuple[np.ndarray, np.ndarray]:
    rows = np.zeros((ROWS, k))
    rows[:, 0], rows[:, 1] = 1.0, -1.0            # cancel exactly; E is set by them
    d = np.arange(ROWS) % 44 + 1                  # C's exponent below the products'
    pattern = 1.0 + np.array([0, 2.0 ** -1, 2.0 ** -23, 2.0 ** -10 + 2.0 ** -20])[
        np.arange(ROWS) % 4]
    c = np.outer(np.exp2(-d.astype(float)) * pattern, np.ones(COLS))
    c *= np.where(rng.random((ROWS, COLS)) < 0.5, -1.0, 1.0)
    return _a(rows), c


def _tie(rng, k: int) -> tuple[np.ndarray, np.ndarray]:
    # 1 + small steps that land on FP32 / E8M13 / FP16 rounding boundaries.
    rows = np.zeros((ROWS, k))
    rows[:, 0] = 1.0
    for r in range(ROWS):
        bits = (24, 14, 11, 25, 15, 12)[r % 6]
        rows[r, 1] = 2.0 ** -bits
        if r % 12 >= 6:
            rows[r, 2] = 2.0 ** -16                # a sticky bit below the tie
    return _a(rows), np.where(rng.random((ROWS, COLS)) < 0.5, 0.0, 1.0)


def _upcast(rng, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    e = rng.integers(-16, 16, size=(ROWS, k)).astype(float)
    a = _a(np.exp2(e) * rng.choice([-1.0, 1.0, 1.5, -1.75], size=(ROWS, k)))
    b = rng.integers(1, 8, size=(k, COLS)).astype(np.uint8)       # every E4M3 subnormal code
    b |= (rng.random((k, COLS)) < 0.5).astype(np.uint8) << 7          # with random signs
    return a, b, np.zeros((ROWS, COLS))


def probe_suite(kind: str = "fp8", *, k: int = 32, seed: int = 0) -> VectorSet:
    """The probe suite for ``kind``: ``len(FAMILIES)`` batch entries of 64 x 64 dots of K = k.

    ``meta['families']`` names the family of every batch entry. The same arguments give the
    same codes.
    """
    if kind not in KINDS:
        raise VectorFileError(f"Probe kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 4 or k % 4 \
            or k > MAX_K:
        raise VectorFileError(f"K must be a multiple of 4 from 4 to {MAX_K}, not {k!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise VectorFileError(f"Seed must be a non-negative integer, not {seed!r}")
    rng = np.random.default_rng([seed, 6])
    b = _columns(rng, k)
    a_parts, b_parts, c_parts = [], [], []
    for family in FAMILIES:
        if family in ("pair-cancel", "c-gap", "tie"):
            a, c = {"pair-cancel": _pair_cancel, "c-gap": _c_gap, "tie": _tie}[family](rng, k)
            bb = b
        elif family == "upcast":
            a, bb, c = _upcast(rng, k)
        else:
            gen = {"one-large": "one-large", "random": "llm", "specials": "specials"}[family]
            vs = vectors.generate(gen, a_format="e5m2", b_format="e4m3", m=ROWS, n=COLS, k=k,
                                  seed=seed)
            a, bb, c = vs.a, vs.b, vs.c.view(np.float32).astype(float)
        a_parts.append(a)
        b_parts.append(bb)
        c_parts.append(np.asarray(c, np.float32).view(np.uint32))
    return VectorSet(a=np.stack(a_parts).astype(np.uint8), b=np.stack(b_parts).astype(np.uint8),
                     a_format="e5m2", b_format="e4m3", c=np.stack(c_parts),
                     extra={"families": list(FAMILIES), "probe": kind, "seed": seed})
