"""What the reference engine computed on the way to a result: its intermediates, recorded.

Inside :func:`recording`, the reference engine (:mod:`mxsim.engine.reference`) notes every
intermediate of every dot product it computes as a :class:`Node`: each product, block-scale
sum, aligned term (with what the alignment dropped), step, tree node, rounding and conversion,
named by where it sits in the spec's structure (``i0.s1.t3``: instruction 0, step 1, term 3).
Outside it, noting costs one context-variable read. The values are the engine's own (nothing is
recomputed here), so an explanation cannot disagree with the result it explains.
:mod:`mxsim.engine.explain` turns the nodes into text and JSON.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

__all__ = ["Node", "Value", "Recorder", "recording", "note", "scope", "exact"]


@dataclass(frozen=True)
class Value:
    """A value to note where the engine holds none of its own: ``kind`` "num" (``q``, with
    the sign ``neg`` of a zero), "nan" or "inf"."""
    kind: str
    q: Fraction = Fraction(0)
    neg: bool = False


@dataclass(frozen=True)
class Node:
    """One intermediate: its ``name`` (where it sits), ``op`` (what made it: product, scale,
    term, align, acc, step, tree, round, convert, c, promote, zero, result), the names of its
    ``inputs``, its ``value`` (``"nan"``, ``"+inf"``/``"-inf"``, or an exact rational, ``-0``
    for a negative zero) and ``info`` (formats, codes, exponents, what a rounding dropped)."""
    name: str
    op: str
    value: str
    inputs: tuple[str, ...] = ()
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Recorder:
    """The nodes noted so far, per dot product (its flat index), and the current scope."""
    dots: dict[int, list[Node]] = field(default_factory=dict)
    dot: int = 0
    prefix: tuple[str, ...] = ()
    base: tuple[str, ...] = ()      #: where a dot's names start (a part of a larger dot)
    #: node name -> what to compute differently there (a diagnosis's one-node hypothesis)
    changes: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, node: Node) -> None:
        nodes = self.dots.setdefault(self.dot, [])
        if not any(n.name == node.name for n in nodes):     # a block's scales: once
            nodes.append(node)


_RECORDER: ContextVar[Recorder | None] = ContextVar("mxsim_reference_recorder", default=None)


@contextlib.contextmanager
def recording(changes: dict[str, dict[str, Any]] | None = None) -> Iterator[Recorder]:
    """Record the reference engine's intermediates while the block runs; ``changes`` (node
    name -> {"rounding": ..., "format": ...}) computes the nodes it names otherwise (tree
    nodes), to test a hypothesis about one node."""
    rec = Recorder(changes=dict(changes or {}))
    token = _RECORDER.set(rec)
    try:
        yield rec
    finally:
        _RECORDER.reset(token)


def active() -> bool:
    """Whether a recording is on (the engine skips building what it would note otherwise)."""
    return _RECORDER.get() is not None


@contextlib.contextmanager
def scope(part: str, dot: int | None = None) -> Iterator[None]:
    """Name the nodes noted inside after ``part`` (and, with ``dot``, start that dot)."""
    rec = _RECORDER.get()
    if rec is None:
        yield
        return
    saved = rec.prefix
    if dot is not None:
        rec.dot, rec.prefix = dot, rec.base
    rec.prefix = rec.prefix + ((part,) if part else ())
    try:
        yield
    finally:
        rec.prefix = saved


@contextlib.contextmanager
def base(part: str) -> Iterator[None]:
    """Start the names of every dot computed inside with ``part`` (one K block of a dot
    that the engine computes as several)."""
    rec = _RECORDER.get()
    if rec is None:
        yield
        return
    saved = rec.base
    rec.base = saved + (part,)
    try:
        yield
    finally:
        rec.base = saved


def changed(part: str) -> dict[str, Any]:
    """What a recording's ``changes`` asks of node ``part`` here (empty: nothing)."""
    rec = _RECORDER.get()
    return {} if rec is None or not rec.changes else rec.changes.get(name(part), {})


def name(part: str) -> str:
    """``part``'s full name in the current scope."""
    rec = _RECORDER.get()
    return ".".join((*rec.prefix, part)) if rec is not None and rec.prefix else part


def exact(v: Any) -> str:
    """A value in flight (the engine's ``_Val``, or a Fraction) as exact text."""
    if isinstance(v, Fraction):
        return _rational(v, False)
    if v.kind == "nan":
        return "nan"
    if v.kind == "inf":
        return "-inf" if v.neg else "+inf"
    return _rational(v.q, v.neg)


def _rational(q: Fraction, neg: bool) -> str:
    if q == 0:
        return "-0" if neg else "0"
    den = q.denominator
    if den & (den - 1) == 0:                       # a dyadic rational: sig x 2^exp
        num, e = q.numerator, -(den.bit_length() - 1)
        while num % 2 == 0:
            num, e = num // 2, e + 1
        return f"{num}*2^{e}" if e else str(num)
    return f"{q.numerator}/{q.denominator}"


def note(op: str, part: str, value: Any, inputs: tuple[str, ...] = (), **info: Any) -> str:
    """Note one node (when recording) and return its full name, for the nodes it feeds."""
    rec = _RECORDER.get()
    if rec is None:
        return part
    full = name(part)
    rec.add(Node(full, op, exact(value), tuple(inputs),
                 {k: (exact(x) if isinstance(x, Fraction) else x) for k, x in info.items()}))
    return full
