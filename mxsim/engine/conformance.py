"""Conformance of dot-product results to what the OCP MX spec allows: the ``ocp`` envelope.

The OCP Microscaling Formats (MX) Specification v1.0 defines the dot product of two MX blocks
and of two vectors of blocks (§6, "Dot Product" and "General Dot Product") as the exact
``C + sum(X_A * X_B * a_i * b_i)`` but leaves the internal precision and the order of
operations to the implementation. Two conforming units may so return different results for one
input, and a unit more accurate than a spec fails an exact check against it. :func:`check`
judges results against the envelope this freedom allows instead. The spec states no bound of
its own; the envelope below is our reading, stated so that it can be argued with.

The ``ocp`` envelope of one dot product: K products ``t_i`` (scales applied) and C, so
``n = K + 1`` terms (C is +0 where none is given; zero terms count); ``x`` their exact sum,
``S = |C| + sum |t_i|``; the output format is the spec's ``d_format`` with ``p`` significand
bits, smallest normal ``lam = 2**emin``, subnormal step ``eta = lam * 2**(1 - p)`` and largest
finite value ``Omega``; the design's result is ``r``.

1. Special values, by IEEE 754 on the exact terms, the codes read as OCP MX reads them: a NaN
   element, a NaN scale (E8M0 0xFF: the block's products are NaN), Inf * 0 or +Inf + -Inf
   make the exact result NaN, and ``r`` must be a NaN (any NaN code); otherwise an Inf term
   makes it that Inf, and ``r`` must be the same Inf.
2. A finite ``x``: ``|r - x| <= B = gamma_n * S + n * eta * (1 + gamma_n)``, with
   ``gamma_n = n * u / (1 - n * u)`` and ``u = 2**(1 - p)``: that is
   ``B = n * (S + lam) / (2**(p - 1) - n)``, decided exactly in integers.
3. Overflow: every partial sum of such an evaluation (below) lies in ``[-L_neg, L_pos]``,
   ``L_pos = (1 + gamma_n) * (P + n * eta)`` and ``L_neg = (1 + gamma_n) * (N + n * eta)``
   (``P``: the positive terms' sum, ``N``: the negative terms' magnitudes, C included), and
   stays there when an overflow saturates to ±Omega (IEEE 754 in RZ, RD and RU; saturating
   units), after which the sum depends on the order beyond B. So where ``L_pos > Omega`` or
   ``L_neg > Omega`` (an evaluation may overflow part way) ``r`` is inside when it lies in
   ``[-L_neg, L_pos]``, or is +Inf where ``L_pos > Omega``, -Inf where ``L_neg > Omega``, a
   NaN where both (+Inf + -Inf). Elsewhere a NaN or Inf ``r`` of a finite ``x`` is outside.

Zero signs are not judged (values are). Why B: it bounds every evaluation in the output format
in which each term is rounded once into it (relative error at most ``u``, or at most ``eta``
absolute in gradual underflow: Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd
ed., §2.2) and the terms are then added in any order or tree, each addition rounded once
(relative error at most ``u``; a sum in the subnormal range is exact). A term passes at most n
roundings, so its relative error is at most ``gamma_n`` (Higham Lemma 3.1; the summation
bounds of §4.2 for any order), and the at most n underflow errors grow by at most
``1 + gamma_n``. ``u`` is one ulp, not half, so directed roundings (RZ, RD, RU) conform too.
Products of MX elements are exact in FP32's 24 bits; only their exponents (with scales) can
leave its range, which the rounding of each term into the format covers. Where
``n * u >= 1`` (BF16 results of 128 products or more) ``gamma_n`` is undefined: every result
of a finite ``x`` is inside and only special values are judged (``Summary.unbounded``).

A unit spec with ``specials = "none"`` reads every input code as the number its bits spell;
its results are judged against those numbers (``Summary.finite_inputs`` says so), which is not
OCP's reading of E4M3 S.1111.111 or E8M0 0xFF.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from .. import formats
from ..spec import Specials, UnitSpec
from ..vectors import VectorSet
from .fast.operands import Operand

__all__ = ["ENVELOPES", "LISTED", "Values", "Outside", "Verdicts", "Summary", "check"]

#: The envelopes :func:`check` knows, by the name ``mxsim verify --conformance`` takes.
ENVELOPES = ("ocp",)
#: Results outside the envelope that a :class:`Verdicts` (and a :class:`Summary`) describes.
LISTED = 20
_TERMS = 1 << 20            # products judged at once (bounds the Python-int arrays' memory)


@dataclass(frozen=True)
class Values:
    """A design's results as exact values: ``(-1)**sign * sig * 2**lsb`` where neither ``nan``
    nor ``inf``; ``codes`` (hex digits ``digits``) only to print them. Build with
    :meth:`of_codes` or :meth:`of_fixed`."""
    sign: npt.NDArray[np.bool_]
    sig: npt.NDArray[np.int64]
    lsb: npt.NDArray[np.int64]
    nan: npt.NDArray[np.bool_]
    inf: npt.NDArray[np.bool_]
    codes: npt.NDArray | None = None
    digits: int = 10

    @classmethod
    def of_codes(cls, fmt_name: str, codes: npt.ArrayLike) -> Values:
        """Codes of the float format ``fmt_name`` (fp32, fp16, bf16), one per dot product; a
        NaN or Inf code keeps its meaning."""
        fmt = formats.get(fmt_name)
        codes = np.asarray(codes).reshape(-1)
        op = Operand.of(fmt, codes)
        return cls(op.sign.astype(bool), op.sig, op.lsb, op.nan, op.inf,
                   codes.astype(np.int64), 2 + fmt.bits // 4)

    @classmethod
    def of_fixed(cls, mant: npt.ArrayLike, exp: npt.ArrayLike,
                 nan: npt.ArrayLike | None = None) -> Values:
        """Results ``mant * 2**exp`` (signed int64 mantissas), NaN where ``nan``."""
        mant = np.asarray(mant, np.int64).reshape(-1)
        nan = np.zeros(len(mant), bool) if nan is None else np.asarray(nan, bool).reshape(-1)
        return cls(mant < 0, np.abs(mant), np.asarray(exp, np.int64).reshape(-1), nan,
                   np.zeros(len(mant), bool))

    def __len__(self) -> int:
        return len(self.sig)

    def take(self, index: slice) -> Values:
        """The results at ``index``."""
        return Values(self.sign[index], self.sig[index], self.lsb[index], self.nan[index],
                      self.inf[index], None if self.codes is None else self.codes[index],
                      self.digits)

    def text(self, i: int) -> str:
        """Result ``i`` as it reads in a report: its code in hex, or ``mant*2**exp``."""
        if self.codes is not None:
            return f"{int(self.codes[i]):#0{self.digits}x}"
        if self.nan[i]:
            return "NaN"
        return f"{'-' if self.sign[i] else ''}{int(self.sig[i])}*2**{int(self.lsb[i])}"


@dataclass(frozen=True)
class Outside:
    """One result outside the envelope: its dot product (flat index; ``chunk``: the
    verification chunk), the result, the exact value ``x`` (hexadecimal, exact; or NaN/±Inf),
    the bound B and the error ``|r - x|`` in ulps of ``x`` in the output format (the last two
    rounded to floats for reading; None where they do not apply), and why it is outside."""
    dot: int
    result: str
    exact: str
    bound: float | None
    error_ulps: float | None
    why: str
    chunk: int | None = None

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}

    def __str__(self) -> str:
        where = f"dot {self.dot}" + ("" if self.chunk is None else f" of chunk {self.chunk}")
        out = f"{where}: result {self.result}, exact {self.exact}"
        if self.bound is not None:
            out += f", bound {self.bound:.3g}"
        if self.error_ulps is not None:
            out += f", off by {self.error_ulps:.4g} ulps"
        return out + f" ({self.why})"


@dataclass(frozen=True)
class Verdicts:
    """The verdict on every result of one vector set: ``inside`` per dot product, the terms
    ``n`` of each, and the first :data:`LISTED` results outside, described."""
    envelope: str
    output: str
    n: int
    inside: npt.NDArray[np.bool_]
    listed: list[Outside]
    unbounded: bool
    finite_inputs: bool

    @property
    def outside(self) -> npt.NDArray[np.int64]:
        """The dot products (flat indices) whose results lie outside the envelope."""
        return np.nonzero(~self.inside)[0]


@dataclass
class Summary:
    """Verdicts of a run's vector sets, added up (:meth:`add`), as reports print them."""
    envelope: str = "ocp"
    output: str = "fp32"
    results: int = 0
    inside: int = 0
    terms: set[int] = field(default_factory=set)
    listed: list[Outside] = field(default_factory=list)
    unbounded: bool = False
    finite_inputs: bool = False

    def add(self, v: Verdicts, chunk: int | None = None) -> None:
        """Count ``v`` in; its listed results are kept (up to :data:`LISTED` in all), marked
        with ``chunk``."""
        self.envelope, self.output = v.envelope, v.output
        self.results += len(v.inside)
        self.inside += int(v.inside.sum())
        self.terms.add(v.n)
        self.unbounded |= v.unbounded
        self.finite_inputs |= v.finite_inputs
        room = LISTED - len(self.listed)
        self.listed += [Outside(**{**o.__dict__, "chunk": chunk}) for o in v.listed[:room]]

    @property
    def outside(self) -> int:
        return self.results - self.inside

    @property
    def all_inside(self) -> bool:
        return self.outside == 0

    def envelope_text(self) -> str:
        """The envelope in one line: its formula and parameters."""
        fmt = formats.get(self.output)
        ns = ", ".join(str(n) for n in sorted(self.terms)) or "K + 1"
        text = (f"|r - x| <= gamma_n*S + n*eta*(1 + gamma_n), u = 2^{-fmt.man_bits}, "
                f"eta = 2^{fmt.emin - fmt.man_bits} ({self.output}), n = {ns} (K products "
                f"and C)")
        if self.unbounded:
            text += "; n*u >= 1 leaves finite results unbounded"
        if self.finite_inputs:
            text += "; inputs read as the spec reads them (no NaN/Inf codes)"
        return text

    def line(self) -> str:
        """The report's line: how many results lie inside, and the first outside."""
        if self.all_inside:
            head = (f"{self.envelope}: {self.inside:,} of {self.results:,} results inside the "
                    f"OCP MX dot-product envelope")
        else:
            head = (f"{self.envelope}: {self.outside:,} of {self.results:,} results OUTSIDE the "
                    f"OCP MX dot-product envelope (first: {self.listed[0]})")
        return f"{head} ({self.envelope_text()})"

    def to_dict(self) -> dict:
        return {"envelope": self.envelope, "output": self.output, "results": self.results,
                "inside": self.inside, "outside": self.outside, "passed": self.all_inside,
                "terms": sorted(self.terms), "rule": self.envelope_text(),
                "unbounded": self.unbounded, "finite_inputs": self.finite_inputs,
                "listed": [o.to_dict() for o in self.listed]}


def check(spec: UnitSpec, vs: VectorSet, results: Values | npt.ArrayLike,
          envelope: str = "ocp") -> Verdicts:
    """Judge ``results`` (one per dot product of ``vs`` in batch, row, column order: codes of
    ``spec.d_format``, or :class:`Values`) against ``envelope`` (see the module docstring),
    exactly. A missing result (fewer results than dot products) is outside.

    Raises
    ------
    ValueError
        For an envelope not in :data:`ENVELOPES`, or scales other than E8M0/UE4M3 blocks.
    """
    if envelope not in ENVELOPES:
        raise ValueError(f"Envelope must be one of {', '.join(ENVELOPES)}, not {envelope!r}")
    if vs.scale_format not in (None, "e8m0", "ue4m3"):
        raise ValueError(f"Scale format must be e8m0, ue4m3 or none for a conformance check, "
                         f"not {vs.scale_format!r}")
    values = results if isinstance(results, Values) else Values.of_codes(spec.d_format, results)
    out = formats.get(spec.d_format)
    n = vs.k + 1
    q = (1 << out.man_bits) - n                  # 2**(p - 1) - n, so that gamma_n = n / q
    finite = spec.specials is Specials.NONE
    ndots, got = vs.num_dots, min(len(values), vs.num_dots)
    if got < ndots:                              # judge those that came; the rest are outside
        inside = np.zeros(ndots, bool)
        listed: list[Outside] = []
        if got:
            part = check(spec, vs.take_dots(slice(0, got)), values.take(slice(0, got)),
                         envelope)
            inside[:got], listed = part.inside, part.listed
        listed += [Outside(i, "none", "-", None, None, "no result")
                   for i in range(got, min(ndots, got + LISTED - len(listed)))]
        return Verdicts(envelope, spec.d_format, n, inside, listed, q <= 0, finite)
    inside = np.zeros(ndots, bool)
    listed = []
    f = vs.flat()
    for first, bs, rs in _pieces(f):
        dots = _Dots.of(f, bs, rs, finite)
        done = first + dots.count
        inside[first:done] = _judge(dots, values.take(slice(first, done)), out, n, q, listed,
                                    first)
    return Verdicts(envelope, spec.d_format, n, inside, listed, q <= 0, finite)


def _pieces(f: VectorSet):
    """``(first dot, batch slice, row slice)`` of pieces of at most about ``_TERMS`` products
    of the flat set ``f``, in dot order."""
    nb = f.a.shape[0]
    m, n, k = f.m, f.n, f.k
    if m * n * k <= _TERMS:
        step = _TERMS // (m * n * k)
        for b0 in range(0, nb, step):
            yield b0 * m * n, slice(b0, b0 + step), slice(None)
        return
    rows = max(1, _TERMS // (n * k))
    for b in range(nb):
        for r0 in range(0, m, rows):
            yield (b * m + r0) * n, slice(b, b + 1), slice(r0, r0 + rows)


@dataclass
class _Dots:
    """The exact terms of some dot products, shape ``(dots, K)``: ``value = (-1)**sign * sig
    * 2**lsb`` where neither ``nan`` nor ``inf``; and C's fields, shape ``(dots,)``."""
    sign: npt.NDArray[np.bool_]
    sig: npt.NDArray[np.int64]
    lsb: npt.NDArray[np.int64]
    nan: npt.NDArray[np.bool_]
    inf: npt.NDArray[np.bool_]
    c: Operand

    @property
    def count(self) -> int:
        return len(self.sig)

    @classmethod
    def of(cls, f: VectorSet, bs: slice, rs: slice, finite: bool) -> _Dots:
        """The dot products of batch entries ``bs`` and rows ``rs`` of the flat set ``f``;
        ``finite``: every input code is the number its bits spell."""
        a, b = f.a[bs, rs], np.swapaxes(f.b[bs], 1, 2)           # (B, M, K), (B, N, K)
        ops = [(Operand.of(formats.get(f.a_format), a, finite), True),
               (Operand.of(formats.get(f.b_format), b, finite), False)]
        if f.scale_format is not None:
            fs = formats.get(f.scale_format)
            sa = np.repeat(f.a_scale[bs, rs], f.block, axis=-1)
            sb = np.swapaxes(np.repeat(f.b_scale[bs], f.block, axis=-2), 1, 2)
            for codes, of_a in ((sa, True), (sb, False)):
                op = Operand.of(fs, codes, finite)
                op.sign[...] = 0                  # UE4M3's sign bit is ignored, E8M0 has none
                ops.append((op, of_a))
        if f.tensor_scale is not None:
            bits = np.asarray(f.tensor_scale, np.float32).reshape(1, 1, 1).view(np.uint32)
            ops.append((Operand.of(formats.get("fp32"), bits, finite), True))
        shape = a.shape[:2] + (b.shape[1], a.shape[2])                # (B, M, N, K)

        def lay(x, of_a):                         # A's (B, M, K) or B's (B, N, K) as terms
            return np.broadcast_to(x[:, :, None, :] if of_a else x[:, None, :, :], shape)

        sign = np.zeros(shape, bool)
        sig = np.ones(shape, np.int64)            # below 2**48: 8 + 8 + 4 + 4 + 24 bits
        lsb = np.zeros(shape, np.int64)
        nan, inf, zero = (np.zeros(shape, bool) for _ in range(3))
        for op, of_a in ops:
            sign ^= lay(op.sign.astype(bool), of_a)
            sig = sig * lay(op.sig, of_a)
            lsb = lsb + lay(op.lsb, of_a)
            nan |= lay(op.nan, of_a)
            inf |= lay(op.inf, of_a)
            zero |= lay(op.zero, of_a)
        nan |= inf & zero                         # Inf * 0
        inf &= ~nan
        if f.c is not None:
            c = Operand.of(formats.get(f.c_format), f.c[bs, rs].reshape(-1), finite)
        else:
            c = Operand.of(formats.get("fp32"), np.zeros(shape[0] * shape[1] * shape[2],
                                                        np.uint32))
        k = shape[3]
        return cls(sign.reshape(-1, k), sig.reshape(-1, k), lsb.reshape(-1, k),
                   nan.reshape(-1, k), inf.reshape(-1, k), c)


def _judge(d: _Dots, r: Values, out: formats.Format, n: int, q: int, listed: list[Outside],
           first: int) -> npt.NDArray[np.bool_]:
    """Whether each result ``r`` of the dot products ``d`` lies inside the envelope (module
    docstring); the first results outside are added to ``listed`` (up to :data:`LISTED`)."""
    c = d.c
    c_sign = c.sign.astype(bool)
    pinf = (d.inf & ~d.sign).any(axis=1) | (c.inf & ~c_sign)
    ninf = (d.inf & d.sign).any(axis=1) | (c.inf & c_sign)
    nan = d.nan.any(axis=1) | c.nan | (pinf & ninf)
    # Every value as a Python integer count of 2**base, base at or below every LSB in play.
    eta_exp = out.emin - out.man_bits
    base = min(int(d.lsb.min()), int(c.lsb.min()), int(r.lsb.min()), eta_exp)
    terms = d.sig.astype(object) << (d.lsb - base)
    c_val = c.sig.astype(object) << (c.lsb - base)
    pos = np.where(d.sign, 0, terms).sum(axis=1) + np.where(c_sign, 0, c_val)
    neg = np.where(d.sign, terms, 0).sum(axis=1) + np.where(c_sign, c_val, 0)
    x, mag = pos - neg, pos + neg
    res = r.sig.astype(object) << (r.lsb - base)
    res = np.where(r.sign, -res, res)
    omega = out.max_sig << (out.emax - out.man_bits - base)
    rhs = n * (mag + (1 << (out.emin - base)))                # q * B
    if q > 0:
        # q * L_pos and q * L_neg: 1 + gamma_n = 2**(p - 1) / q.
        n_eta = n << (eta_exp - base)
        l_pos, l_neg = (pos + n_eta) << out.man_bits, (neg + n_eta) << out.man_bits
        up, down = _bools(l_pos > q * omega), _bools(l_neg > q * omega)
        within = np.where(up | down, _bools(q * res <= l_pos) & _bools(-q * res <= l_neg),
                          _bools(q * abs(res - x) <= rhs))
    else:                                     # n * u >= 1: no bound
        within = up = down = np.ones(len(x), bool)
    r_pinf, r_ninf = r.inf & ~r.sign, r.inf & r.sign
    r_fin = ~r.nan & ~r.inf
    finite_ok = (r.nan & up & down) | (r_pinf & up) | (r_ninf & down) | (r_fin & within)
    inside = np.where(nan, r.nan, np.where(pinf, r_pinf, np.where(ninf, r_ninf, finite_ok)))
    for i in np.nonzero(~inside)[0][:max(0, LISTED - len(listed))]:
        if nan[i] or pinf[i] or ninf[i]:
            exact = "NaN" if nan[i] else "+Inf" if pinf[i] else "-Inf"
            listed.append(Outside(first + int(i), r.text(i), exact, None, None,
                                  f"the exact result is {exact}"))
            continue
        bound = _float(Fraction(int(rhs[i]), q), base) if q > 0 else None
        if r_fin[i]:
            err = _ulps(int(res[i]) - int(x[i]), int(x[i]), base, out)
            why = "beyond the bound" if not (up[i] or down[i]) else "beyond the partial sums"
        else:
            err, why = None, "cannot overflow that way"
        listed.append(Outside(first + int(i), r.text(i), _hex(int(x[i]), base), bound, err,
                              why))
    return inside


def _bools(x: npt.NDArray) -> npt.NDArray[np.bool_]:
    """An object array of comparisons (Python ints compared) as booleans."""
    return np.asarray(x, dtype=bool)


def _float(value: Fraction, exp: int) -> float:
    """``value * 2**exp`` as the nearest float (inf beyond float64)."""
    try:
        return float(value * Fraction(2) ** exp)
    except OverflowError:
        return float("inf")


def _ulps(diff: int, x: int, base: int, out: formats.Format) -> float:
    """``|diff| * 2**base`` in ulps of ``x * 2**base`` in ``out`` (of its smallest binade for
    a zero ``x``)."""
    e = abs(x).bit_length() - 1 + base if x else out.emin
    return _float(Fraction(abs(diff)), base - (max(e, out.emin) - out.man_bits))


def _hex(x: int, base: int) -> str:
    """``x * 2**base`` exactly, as a hexadecimal float (``0x1.8p+1`` is 3)."""
    if x == 0:
        return "0x0p+0"
    m = abs(x)
    e = m.bit_length() - 1
    digits = (e + 3) // 4
    frac = f"{(m - (1 << e)) << (4 * digits - e):0{digits}x}".rstrip("0") if digits else ""
    return f"{'-' if x < 0 else ''}0x1{'.' + frac if frac else ''}p{e + base:+d}"
