"""Bitwise comparison of two results on the same inputs: agreement, ulp distances, mismatches."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from . import formats
from .errors import VectorFileError
from .vectors import VectorSet

__all__ = ["Mismatch", "Report", "compare", "ulp_distance", "ulp_order", "ULP_BINS"]

#: Histogram bins of the ulp distance between differing results (upper bounds inclusive).
ULP_BINS = (("0 (+0 vs -0)", 0), ("1", 1), ("2-3", 3), ("4-15", 15), ("16-255", 255),
            ("256-65535", 65535), (">65535", None))


def ulp_order(bits: npt.NDArray, fmt: formats.Format) -> npt.NDArray[np.int64]:
    """Bit patterns of ``fmt`` as integers in value order: the difference of two is their
    distance in ulps. +0 and -0 both map to 0; Inf is one step past max (NaNs are not ordered).
    """
    bits = bits.astype(np.int64)
    mag = bits & ((1 << (fmt.bits - 1)) - 1)
    return np.where(bits >> (fmt.bits - 1) == 1, -mag, mag)


def ulp_distance(x: npt.NDArray, y: npt.NDArray, fmt: formats.Format) -> npt.NDArray[np.int64]:
    """Number of representable values between two bit patterns of ``fmt`` (-1 if either is NaN),
    measured on :func:`ulp_order`'s line.
    """
    nan = (fmt.classify(x) == formats.Class.NAN) | (fmt.classify(y) == formats.Class.NAN)
    return np.where(nan, -1, np.abs(ulp_order(x, fmt) - ulp_order(y, fmt)))


@dataclass
class Mismatch:
    """One differing output, with what is needed to see why."""
    index: tuple[int, ...]
    actual: str                 #: hex bit pattern in the file under test
    expected: str               #: hex bit pattern of the reference
    actual_value: float
    expected_value: float
    ulps: int
    operands: dict[str, Any] = field(default_factory=dict)


@dataclass
class Report:
    """Agreement of ``d`` with a reference on the same inputs."""
    actual: str
    expected: str
    total: int
    equal: int
    histogram: dict[str, int]
    nan_mismatches: int
    mismatches: list[Mismatch]

    @property
    def agree(self) -> bool:
        return self.equal == self.total

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["agree"] = self.agree
        return out

    def format(self) -> str:
        # A percentage of nothing would read as "100% bit-equal": say that nothing was compared.
        pct = f"{100.0 * self.equal / self.total:.4f}%" if self.total else "0 dots compared"
        lines = [f"{self.actual} vs {self.expected}",
                 f"  outputs   {self.total}",
                 f"  bit-equal {self.equal} ({pct})"]
        if not self.agree:
            lines.append(f"  differ    {self.total - self.equal}"
                         + (f" ({self.nan_mismatches} involve NaN)" if self.nan_mismatches
                            else ""))
            lines.append("  ulp distance of differing outputs:")
            width = max(len(k) for k in self.histogram)
            for label, count in self.histogram.items():
                lines.append(f"    {label:>{width}}  {count}")
            lines.append(f"  first {len(self.mismatches)} mismatches:")
            for mm in self.mismatches:
                idx = ",".join(map(str, mm.index))
                lines.append(f"    d[{idx}] = {mm.actual} ({mm.actual_value!r}), expected "
                             f"{mm.expected} ({mm.expected_value!r}), {mm.ulps} ulp")
                for name, value in mm.operands.items():
                    lines.append(f"      {name} = {value}")
        return "\n".join(lines)


def _operands(vs: VectorSet, index: tuple[int, ...], limit: int = 8) -> dict[str, Any]:
    """Decoded operands of one dot product (long rows shortened to their first ``limit``)."""
    *bt, i, j = index
    bt = tuple(bt)
    fa, fb = formats.get(vs.a_format), formats.get(vs.b_format)

    def show(codes: npt.NDArray, fmt: formats.Format) -> str:
        vals = fmt.decode(codes)
        items = [f"{int(c):#04x}:{v:g}" for c, v in zip(codes[:limit], vals[:limit], strict=True)]
        more = f", ... ({len(codes)} in all)" if len(codes) > limit else ""
        return "[" + ", ".join(items) + more + "]"

    out: dict[str, Any] = {
        f"a[{','.join(map(str, bt + (i,)))},:] ({fa.name})": show(vs.a[bt + (i,)], fa),
        f"b[{','.join(map(str, bt))}{',' if bt else ''}:,{j}] ({fb.name})":
            show(vs.b[bt + (slice(None), j)], fb),
    }
    if vs.scale_format in ("e8m0", "ue4m3"):
        fs = formats.get(vs.scale_format)
        out[f"a_scale ({fs.name})"] = show(vs.a_scale[bt + (i,)], fs)
        out[f"b_scale ({fs.name})"] = show(vs.b_scale[bt + (slice(None), j)], fs)
    elif vs.scale_format == "fp32":
        # Per-tensor scales are 0-d; row-wise and block-wise ones are shown from their start.
        out["a_scale (fp32)"] = np.array2string(np.atleast_1d(vs.a_scale).ravel()[:limit])
        out["b_scale (fp32)"] = np.array2string(np.atleast_1d(vs.b_scale).ravel()[:limit])
    if vs.c is not None:
        fc = formats.get(vs.c_format)
        c = vs.c[index]
        out[f"c ({fc.name})"] = f"{int(c):#0{2 + fc.bits // 4}x}:{float(fc.decode(c))!r}"
    return out


def compare(actual: VectorSet, expected_d: npt.NDArray, *, expected_format: str = "fp32",
            actual_name: str = "actual", expected_name: str = "expected",
            show: int = 5) -> Report:
    """Compare ``actual.d`` with ``expected_d`` bit for bit (NaN payloads count as different)."""
    if actual.d is None:
        raise VectorFileError(f"{actual_name} has no result 'd' to compare; produce one with "
                              f"`mxsim run` or `mxsim gpu run`")
    if actual.d_format != expected_format:
        raise VectorFileError(f"{actual_name} holds {actual.d_format} results but "
                              f"{expected_name} holds {expected_format}; compare like with like")
    if actual.d.shape != expected_d.shape:
        raise VectorFileError(f"result shapes differ: {actual.d.shape} vs {expected_d.shape}")
    if actual.d.size == 0:
        raise VectorFileError(f"{actual_name} holds no dot product; there is nothing to compare")
    if show < 0:
        raise ValueError(f"Mismatches to show must be at least 0, not {show!r}")
    fmt = formats.get(expected_format)
    x, y = actual.d, np.asarray(expected_d, fmt.code_dtype)
    diff = x != y
    ulps = ulp_distance(x, y, fmt)
    hist: dict[str, int] = {}
    lo = -1
    for label, hi in ULP_BINS:
        sel = diff & (ulps > lo) & (ulps >= 0) if hi is None else diff & (ulps > lo) & (ulps <= hi)
        if label.startswith("0"):
            sel = diff & (ulps == 0)
        hist[label] = int(sel.sum())
        lo = hi if hi is not None else lo
    mismatches = []
    for flat in np.flatnonzero(diff)[:show]:
        idx = tuple(int(v) for v in np.unravel_index(flat, x.shape))
        mismatches.append(Mismatch(
            index=idx, actual=f"{int(x[idx]):#0{2 + fmt.bits // 4}x}",
            expected=f"{int(y[idx]):#0{2 + fmt.bits // 4}x}",
            actual_value=float(fmt.decode(x[idx])), expected_value=float(fmt.decode(y[idx])),
            ulps=int(ulps[idx]), operands={k: str(v) for k, v in _operands(actual, idx).items()}))
    return Report(actual=actual_name, expected=expected_name, total=int(x.size),
                  equal=int((~diff).sum()), histogram=hist,
                  nan_mismatches=int((diff & (ulps < 0)).sum()), mismatches=mismatches)
