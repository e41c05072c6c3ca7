"""How a fit's misses read: their distance in ulps, and one line of facts per missed output.

:func:`ulp_bins` counts pairs of codes by how many representable values lie between them;
:func:`miss_summaries` describes each missed output (its family, the observed and fitted
codes, their ulps, what the dot's inputs hold). :class:`mxsim.probe.fit.Fit` reports both.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import formats
from ..vectors import VectorSet

__all__ = ["ulp_bins", "miss_summaries"]


#: Bins of the ulp histogram: (label, smallest, largest) distances in d_format's codes.
_ULP_BINS = [("0", 0, 0), ("1", 1, 1), ("2", 2, 2), ("3-4", 3, 4), ("5-16", 5, 16),
             ("17-256", 17, 256), ("257-2^16", 257, 1 << 16), ("2^16-2^24", (1 << 16) + 1,
                                                               1 << 24),
             (">2^24", (1 << 24) + 1, 1 << 62)]


def ulp_bins(d_format: str, observed: np.ndarray, fitted: np.ndarray) -> dict[str, int]:
    """How many pairs of codes of ``d_format`` lie how many ulps apart, by bin.

    The distance counts the representable values between them (±0 are one value, so +0
    against -0 is 0 ulps; the largest finite value and Inf are 1 apart); a pair where one side
    is NaN and the other is not counts under ``NaN``, and two NaNs of different codes (a unit
    whose NaN is not the fitted spec's) under ``NaN code``. So each pair of different codes
    counts in exactly one bin."""
    fmt = formats.get(d_format)

    def key(codes: np.ndarray) -> np.ndarray:
        c = codes.astype(np.int64)
        mag = c & ((1 << fmt.sign_shift) - 1)
        return np.where(c >> fmt.sign_shift, -mag, mag)

    nan_o = fmt.classify(observed) == formats.Class.NAN
    nan_f = fmt.classify(fitted) == formats.Class.NAN
    dist = np.abs(key(observed) - key(fitted))
    live = ~(nan_o | nan_f)
    out = {label: int(((dist >= lo) & (dist <= hi) & live).sum()) for label, lo, hi in _ULP_BINS}
    out["NaN"] = int((nan_o != nan_f).sum())
    out["NaN code"] = int((nan_o & nan_f & (observed != fitted)).sum())
    return out


def miss_summaries(observed: VectorSet, fitted: np.ndarray,
                   indices: list[tuple[int, ...]]) -> list[dict[str, Any]]:
    """One line of facts per missed output: its index and family, the observed and fitted
    codes (with values), their distance in ulps and what the dot's inputs hold."""
    fmt = formats.get(observed.d_format)
    out = []
    for idx in indices:
        o, f = int(observed.d[idx]), int(fitted[idx])
        ulps = ulp_bins(observed.d_format, np.array([o], observed.d.dtype),
                        np.array([f], observed.d.dtype))
        out.append({"index": idx, "family": _family(observed, idx),
                    "observed": f"{o:#x} ({_value(fmt, o)})",
                    "fitted": f"{f:#x} ({_value(fmt, f)})",
                    # Equal codes (where no spec could run, the fitted outputs are NaN
                    # codes) are 0 ulps apart; any two different codes fall in one bin.
                    "ulps": next((label for label, n in ulps.items() if n), "0"),
                    "inputs": _inputs_summary(observed, idx)})
    return out


def _family(vs: VectorSet, idx: tuple[int, ...]) -> str:
    """The family of the dot at ``idx`` where the set's ``families`` provenance names it (a
    list of one string per batch entry, as the generators write it), else blank: provenance
    is free-form, so any other value (a number, a table, nested lists) names none."""
    families = vs.extra.get("families")
    if len(idx) != 3 or not isinstance(families, list | tuple) or idx[0] >= len(families):
        return ""
    family = families[idx[0]]
    return family if isinstance(family, str) else ""


def _value(fmt: formats.Format, code: int) -> str:
    return f"{float(fmt.decode(np.array([code], fmt.code_dtype))[0]):.9g}"


def _inputs_summary(vs: VectorSet, idx: tuple[int, ...]) -> str:
    """What dot ``idx``'s inputs hold: non-zero and NaN/Inf element codes, scale codes, C."""
    *bt, i, j = idx
    bt = tuple(bt)
    parts = []
    for name, codes in (("A", vs.a[bt + (i,)]), ("B", vs.b[bt + (slice(None), j)])):
        f = formats.get(vs.a_format if name == "A" else vs.b_format)
        cls = f.classify(codes)
        special = int(((cls == formats.Class.NAN) | (cls == formats.Class.INF)).sum())
        parts.append(f"{name} {int((f.decode(codes) != 0).sum())} of {codes.size} non-zero"
                     + (f", {special} NaN/Inf codes" if special else ""))
    if vs.scale_format in ("e8m0", "ue4m3"):
        sa, sb = vs.a_scale[bt + (i,)], vs.b_scale[bt + (slice(None), j)]
        parts.append("scales A " + " ".join(f"{int(x):02x}" for x in sa[:8])
                     + ", B " + " ".join(f"{int(x):02x}" for x in sb[:8]))
    if vs.c is not None:
        c = int(vs.c[idx])
        parts.append(f"C {c:#x} ({_value(formats.get(vs.c_format), c)})")
    return "; ".join(parts)
