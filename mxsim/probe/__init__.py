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

The MX kinds probe foreign MX units: ``mxfp8`` (E4M3 x E4M3) and ``mxint8`` (INT8 x INT8), with
E8M0 (or UE4M3) block scales in blocks of 8, 16 or 32, for an instruction k as small as 8.
E4M3 spans only 2**17.8 and INT8 2**7 within a block, so the scales spread the magnitudes:
B's elements are ±1 and its scales make column j a constant ±2**e_j, and A's values are
designed per row and encoded with one scale per block (the block's largest value at the top
of the element's range). Their families (``MX_FAMILIES``) are ``pair-cancel``, ``c-gap`` and
``tie`` as above (terms beyond an element's range sit in other blocks), ``one-large`` and
``random`` (LLM-like codes, scales spread over 2**±27), ``overflow`` (sums beyond FP32 and
E8M14: Inf, saturation, and ties at FLT_MAX's half ulp) and ``specials`` (NaN codes, scale
0xFF, Inf/NaN C, subnormal results), which separate a unit that handles NaN/Inf from one that
reads their codes as numbers (``specials = "none"``). :mod:`mxsim.probe.design` builds the same
families for a design's own formats, block and C (``mxsim fit --rtl``), with C = -0 dots.
"""

from __future__ import annotations

import numpy as np

from .. import formats, vectors
from ..errors import VectorFileError
from ..vectors import VectorSet

__all__ = ["probe_suite", "mx_suite", "MxEncoding", "KINDS", "FAMILIES", "MX_FAMILIES", "MAX_K",
           "ROWS", "COLS", "MX_BUILDERS", "mx_special_codes"]

KINDS = ("fp8", "mxfp8", "mxint8")
FAMILIES = ("pair-cancel", "c-gap", "tie", "one-large", "upcast", "random", "specials")
MX_FAMILIES = ("pair-cancel", "c-gap", "tie", "one-large", "random", "overflow", "specials")
#: The element format of each MX kind.
MX_ELEMENTS = {"mxfp8": "e4m3", "mxint8": "int8"}
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


def probe_suite(kind: str = "fp8", *, k: int = 32, seed: int = 0, block: int | None = None,
                scale_format: str | None = None) -> VectorSet:
    """The probe suite for ``kind``: one batch entry per family, each 64 x 64 dots of K = k.

    ``meta['families']`` names the family of every batch entry. The same arguments give the
    same codes. The MX kinds (``mxfp8``, ``mxint8``) take ``scale_format`` (``e8m0``, the
    default, or ``ue4m3``) and ``block`` (8, 16 or 32 dividing k; default the largest that
    does); ``fp8`` takes neither. Raises VectorFileError (one line) for a bad argument.
    """
    if kind not in KINDS:
        raise VectorFileError(f"Probe kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 4 or k % 4 \
            or k > MAX_K:
        raise VectorFileError(f"K must be a multiple of 4 from 4 to {MAX_K}, not {k!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise VectorFileError(f"Seed must be a non-negative integer, not {seed!r}")
    if kind in MX_ELEMENTS:
        return mx_suite(kind, int(k), int(seed), *_mx_scales(k, block, scale_format))
    if block is not None or scale_format is not None:
        raise VectorFileError("Probe kind fp8 has no block scales; block and scale_format "
                              "are for the MX kinds (mxfp8, mxint8)")
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


# -- MX kinds ---------------------------------------------------------------------------------

def _mx_scales(k: int, block: int | None, scale_format: str | None) -> tuple[int, str]:
    """The block and scale format of an MX suite, checked."""
    scale_format = "e8m0" if scale_format is None else scale_format
    if scale_format not in ("e8m0", "ue4m3"):
        raise VectorFileError(f"Scale format of an MX probe must be e8m0 or ue4m3, not "
                              f"{scale_format!r}")
    if k % min(formats.SCALE_BLOCKS):
        raise VectorFileError(f"K of an MX probe must be a multiple of 8 (blocks of 8, 16 or "
                              f"32), not {k}")
    if block is None:
        block = max(b for b in formats.SCALE_BLOCKS if k % b == 0)
    if block not in formats.SCALE_BLOCKS or k % block:
        raise VectorFileError(f"Block of an MX probe must be 8, 16 or 32 and divide K ({k}), "
                              f"not {block!r}")
    return block, scale_format


class MxEncoding:
    """How one MX suite encodes values: element format, block, scale format."""

    def __init__(self, elem: str, k: int, block: int, scale_format: str):
        self.elem = formats.get(elem)
        self.scale = formats.get(scale_format)
        self.k, self.block, self.nb = k, block, k // block
        # The element's largest binade and its reach below it (INT8: 1.x down to 1/64).
        self.top = self.elem.emax if self.elem.kind == "float" else 0
        self.reach = self.top - (self.elem.emin - self.elem.man_bits
                                 if self.elem.kind == "float" else -6)

    def scale_codes(self, exps: np.ndarray) -> np.ndarray:
        """Scale codes of value 2**exps (E8M0), or the nearest UE4M3 powers of two."""
        if self.scale.name == "e8m0":
            return np.clip(exps + 127, 0, 254).astype(np.uint8)
        return self.scale.encode(np.exp2(np.clip(exps, -9, 8).astype(float))).astype(np.uint8)

    def encode(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(codes, scale codes) of rows of values: per block, the scale puts the block's
        largest magnitude in the element's top binade; elements round to nearest even
        (saturating)."""
        r = values.shape[0]
        blocks = values.reshape(r, self.nb, self.block)
        big = np.abs(blocks).max(axis=2)
        exps = np.where(big > 0, np.floor(np.log2(np.where(big > 0, big, 1.0))) - self.top, 0)
        sc = self.scale_codes(exps.astype(np.int64))
        scale_values = self.scale.decode(sc)
        codes = self.elem.encode((blocks / scale_values[:, :, None]).reshape(r, self.k),
                                 "rne", saturate=True)
        return codes.astype(np.uint8), sc

    def columns(self, rng) -> tuple[np.ndarray, np.ndarray]:
        """B: elements ±1 (a random sign per column), scales 2**e_j, e_j from -9 to 6."""
        signs = np.where(np.arange(COLS) % 2, -1.0, 1.0)
        b = np.broadcast_to(self.elem.encode(signs), (self.k, COLS)).astype(np.uint8)
        exps = np.resize(np.arange(-9, 7), COLS)
        return b, np.broadcast_to(self.scale_codes(exps), (self.nb, COLS)).astype(np.uint8)

    def far(self, i: int) -> int:
        """An index in another block than ``i`` (``i`` itself when there is one block)."""
        return (i + self.block) % self.k


def mx_suite(kind: str, k: int, seed: int, block: int, scale_format: str,
              elem: str | None = None) -> VectorSet:
    """The MX families for ``kind``; ``elem`` overrides its element format (the Blackwell
    suites use e4m3 and e2m1 elements)."""
    mx = MxEncoding(elem or MX_ELEMENTS[kind], k, block, scale_format)
    rng = np.random.default_rng([seed, 7, k])
    parts: dict[str, list[np.ndarray]] = {n: [] for n in ("a", "sa", "b", "sb", "c")}
    b, sb = mx.columns(rng)
    for family in MX_FAMILIES:
        if family in ("one-large", "random"):
            vs = vectors.generate("one-large" if family == "one-large" else "llm",
                                  a_format=mx.elem.name, m=ROWS, n=COLS, k=k,
                                  scale_format=scale_format, block=block, seed=seed)
            a, sa, fb, fsb, c = vs.a, vs.a_scale, vs.b, vs.b_scale, vs.c
            if family == "random":          # scales spread over 2**+-27, block by block
                sa = mx.scale_codes(rng.integers(-27, 28, sa.shape))
                fsb = mx.scale_codes(rng.integers(-27, 28, fsb.shape))
        else:
            values, c = MX_BUILDERS[family](mx, rng)
            (a, sa), fb, fsb = mx.encode(values), b, sb
            c = np.asarray(c, np.float32).view(np.uint32) if c.dtype != np.uint32 else c
            if family == "specials":
                a, sa = mx_special_codes(mx, rng, a, sa)
        for name, x in zip(parts, (a, sa, fb, fsb, c), strict=True):
            parts[name].append(np.asarray(x))
    return VectorSet(a=np.stack(parts["a"]).astype(np.uint8),
                     b=np.stack(parts["b"]).astype(np.uint8), a_format=mx.elem.name,
                     b_format=mx.elem.name, a_scale=np.stack(parts["sa"]).astype(np.uint8),
                     b_scale=np.stack(parts["sb"]).astype(np.uint8), scale_format=scale_format,
                     block=block, c=np.stack(parts["c"]).astype(np.uint32),
                     extra={"families": list(MX_FAMILIES), "probe": kind, "seed": seed})


def _mx_pair_cancel(mx: MxEncoding, rng) -> tuple[np.ndarray, np.ndarray]:
    """+1 at i, -1 at j, a small s at t: s beyond the element's reach sits in another block."""
    rows = np.zeros((ROWS, mx.k))
    for r in range(ROWS):
        i, j, t = rng.choice(mx.k, size=3, replace=False)
        if r < mx.k - 1:
            i, j = 0, r + 1
            t = rng.choice([x for x in range(mx.k) if x not in (i, j)])
        far = t // mx.block not in (i // mx.block, j // mx.block)
        d = 20 + r % 24 if far else mx.reach // 2 + r % (mx.reach // 2 + 1)
        rows[r, i], rows[r, j], rows[r, t] = 1.0, -1.0, 2.0 ** -d * (1 + (r % 3) / 2)
    return rows, np.zeros((ROWS, COLS))


def _mx_c_gap(mx: MxEncoding, rng) -> tuple[np.ndarray, np.ndarray]:
    """+1 and -1 cancel exactly; C = ±2**-d times patterns of low bits (as for fp8)."""
    _, c = _c_gap(rng, mx.k)
    rows = np.zeros((ROWS, mx.k))
    rows[:, 0], rows[:, 1] = 1.0, -1.0
    return rows, c


def _mx_tie(mx: MxEncoding, rng) -> tuple[np.ndarray, np.ndarray]:
    """Sums on the rounding boundaries of FP32, E8M14, E8M13 and FP16: C = ±2**e_j (B's
    column factor) plus a product 2**-bits (and a sticky bit below), or, where there is more
    than one block, two products 1 and 2**-bits."""
    rows = np.zeros((ROWS, mx.k))
    col = np.where(np.arange(COLS) % 2, -1.0, 1.0) * np.exp2(np.resize(np.arange(-9, 7), COLS))
    c = np.zeros((ROWS, COLS))
    for r in range(ROWS):
        bits = (24, 14, 11, 25, 15, 12, 16)[r % 7]
        small = mx.far(0) if mx.nb > 1 and r % 2 else 0
        rows[r, small] = 2.0 ** -bits
        if small == 0:
            c[r] = col                                  # C is the big term
        else:
            rows[r, 0] = 1.0
        if r % 14 >= 7:
            rows[r, small + 1] = 2.0 ** -(bits + min(6, mx.reach))   # a sticky bit
    return rows, c


def _mx_overflow(mx: MxEncoding, rng) -> tuple[np.ndarray, np.ndarray]:
    """Sums beyond FP32 (and E8M14), of either sign; C = ±FLT_MAX plus products near its half
    ulp 2**103 (ties that round to Inf or saturate)."""
    rows = np.zeros((ROWS, mx.k))
    flt_max = float(np.finfo(np.float32).max)
    c = np.zeros((ROWS, COLS))
    for r in range(ROWS):
        sign = -1.0 if r % 2 else 1.0
        if r % 4 < 2:                                   # huge products
            idx = rng.choice(mx.k, size=min(mx.k, 3), replace=False)
            rows[r, idx] = sign * np.exp2(rng.integers(118, 128, idx.size).astype(float))
        else:                                           # FLT_MAX and a half ulp, or so
            c[r] = sign * flt_max
            rows[r, rng.integers(mx.k)] = sign * 2.0 ** (103 + r % 7 - 3)
    return rows, c


def _mx_specials(mx: MxEncoding, rng) -> tuple[np.ndarray, np.ndarray]:
    """Values for the specials family (codes and scales follow in mx_special_codes): small
    terms, C Inf/NaN codes against products near -2**104, and subnormal sums."""
    rows = rng.choice([0.0, 2.0 ** -3, -(2.0 ** -2), 1.0, -1.5], size=(ROWS, mx.k))
    c = np.zeros((ROWS, COLS), np.uint32)
    codes = np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF], np.uint32)
    for r in range(ROWS):
        if r % 4 == 2:                                  # C Inf/NaN, products near -2**104
            c[r] = codes[r // 4 % codes.size]
            rows[r] = 0.0
            rows[r, rng.integers(mx.k)] = -(2.0 ** (104 + r % 3 - 1))
        elif r % 4 == 3:                                # subnormal results, subnormal C
            rows[r] *= 2.0 ** -130
            c[r] = rng.integers(0, 1 << 23, COLS) | ((rng.random(COLS) < 0.5) << 31)
    return rows, c


def mx_special_codes(mx: MxEncoding, rng, a: np.ndarray, sa: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Rows 0 mod 4: a NaN element code (E4M3 S.1111.111; INT8's -2.0 code 0x80, which
    encoders never produce); rows 1 mod 4: a scale NaN code (E8M0 0xFF, UE4M3 0x7F)."""
    a, sa = a.copy(), sa.copy()
    nan = np.array([0x7F, 0xFF] if mx.elem.kind == "float" else [0x80], np.uint8)
    nan = nan if mx.elem.bits == 8 else nan[:0]     # E2M1 has no NaN code
    scale_nan = 0xFF if mx.scale.name == "e8m0" else 0x7F
    for r in range(0, ROWS, 4):
        if nan.size:
            a[r, rng.integers(mx.k)] = nan[r // 4 % nan.size]
        sa[r + 1, rng.integers(mx.nb)] = scale_nan
    return a, sa


#: The value builders of the designed MX families: family -> f(encoding, rng) -> (rows, C).
MX_BUILDERS = {"pair-cancel": _mx_pair_cancel, "c-gap": _mx_c_gap, "tie": _mx_tie,
                "overflow": _mx_overflow, "specials": _mx_specials}
