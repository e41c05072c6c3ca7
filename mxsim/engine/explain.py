"""Why a unit gives the result it gives, and what an observed result is consistent with.

:func:`explain` runs one dot product through the reference engine while it records
(:mod:`mxsim.engine.reference.trace`) and returns its intermediates in the spec's own
structure: each product, block-scale sum, aligned term with what it lost, step or tree node with
its rounding, the accumulator's alignment, the conversion to D and the result. :func:`diagnose`
takes a result observed elsewhere (a design, a GPU) that differs from the model's and says which
nearby computation reproduces it: the sum without one block or product, without C, another
rounding, another alignment window, another sign of zero or NaN code. ``mxsim explain`` shows
both; verification reports show them for their failing dots.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import formats
from ..errors import VectorFileError
from ..formats import Rounding
from ..spec import Align, UnitSpec, ZeroSign
from ..vectors import VectorSet
from . import fast, reference
from .reference import trace

__all__ = ["Explanation", "explain", "diagnose", "Hypothesis", "NONE_TRIED"]

#: What "consistent with none" means: the nearby computations :func:`diagnose` tries.
NONE_TRIED = ("none of the nearby computations tried (blocks, products or C left out; a "
              "block's scale one binade off; scales ignored; other roundings, alignments, "
              "zero signs, NaN codes; one tree node rounded otherwise or one unit in its last "
              "place off, the first 96 such, level 1 first)")


@dataclass(frozen=True)
class Explanation:
    """One dot product's intermediates (:class:`mxsim.engine.reference.trace.Node`), its
    result code, and (where given) the code observed elsewhere and what that is consistent
    with."""
    unit: str
    dot: int
    index: tuple[int, ...]
    nodes: tuple[trace.Node, ...]
    code: int
    d_format: str
    observed: int | None = None
    consistent: tuple[Hypothesis, ...] = ()
    #: Whether the nearby computations were tried (not for a set whose dots cannot be taken
    #: one by one: block-wise FP32 scales).
    diagnosed: bool = True

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "unit": self.unit, "dot": self.dot, "index": list(self.index),
            "d_format": self.d_format, "code": hex(self.code),
            "nodes": [{"name": n.name, "op": n.op, "value": n.value, "inputs": list(n.inputs),
                       **n.info} for n in self.nodes]}
        if self.observed is not None:
            out["observed"] = hex(self.observed)
            out["consistent_with"] = [h.to_dict() for h in self.consistent]
        return out

    def format(self) -> str:
        """The intermediates as text, one node a line (terms the alignment kept whole are
        counted on one line per step; the JSON lists each)."""
        width = max((len(n.name) for n in self.nodes), default=4)
        lines = [f"dot {self.dot} (batch/row/column {', '.join(map(str, self.index))}) "
                 f"through {self.unit}: D = {self.code:#x} ({self.d_format})"]
        whole: dict[str, int] = {}
        for n in self.nodes:
            if n.op == "align" and n.info.get("lost") == "0":
                step = n.name.rsplit(".aligned.", 1)[0]
                whole[step] = whole.get(step, 0) + 1
                continue
            if n.op == "step" and whole.get(n.name.rsplit(".", 1)[0]):
                step = n.name.rsplit(".", 1)[0]
                kept = whole.pop(step)
                lines.append(f"  {step + '.aligned':<{width}}  align    {kept} "
                             f"term{'s' if kept != 1 else ''} kept whole")
            lines.append(f"  {n.name:<{width}}  {n.op:<8} {_value(n.value)}{_inputs(n)}"
                         + _info(n))
        if self.observed == self.code:
            lines.append(f"observed {self.observed:#x}: equal to the model's, bit for bit")
        elif self.observed is not None and not self.diagnosed:
            lines.append(f"observed {self.observed:#x}, the model {self.code:#x} (no nearby "
                         f"computation tried: this set's dots cannot be taken one by one)")
        elif self.observed is not None:
            lines.append(f"observed {self.observed:#x}, the model {self.code:#x}: "
                         + ("consistent with " + "; ".join(h.what for h in self.consistent)
                            if self.consistent else "consistent with " + NONE_TRIED))
        return "\n".join(lines)


def _value(text: str) -> str:
    """An exact value, with its decimal approximation where it is not an integer."""
    if "*2^" not in text and "/" not in text:
        return text
    sig, _, e = text.partition("*2^")
    if "/" in sig:
        num, den = sig.split("/")
        approx = int(num) / int(den)
    else:
        approx = int(sig) * 2.0 ** int(e or 0)
    return f"{text} (~{approx:.9g})"


def _inputs(n: trace.Node) -> str:
    if not n.inputs:
        return ""
    short = [x.rsplit(".", 1)[-1] for x in n.inputs]
    if len(short) > 6:
        short = short[:2] + [f"... {len(short) - 3} more ..."] + short[-1:]
    return " <- " + ", ".join(short)


def _info(n: trace.Node) -> str:
    info = ", ".join(f"{k} {v}" for k, v in n.info.items() if v is not None)
    return f"  [{info}]" if info else ""


def explain(spec: UnitSpec, vs: VectorSet, dot: int = 0, observed: int | None = None
            ) -> Explanation:
    """The intermediates of dot product ``dot`` (flat index: batch, row, column) of ``vs``
    through ``spec``; with ``observed`` (a result code from elsewhere), what it is consistent
    with where it differs (:func:`diagnose`)."""
    if not 0 <= dot < vs.num_dots:
        raise ValueError(f"dot {dot} is not in the vector set: it has {vs.num_dots} dot "
                         f"product{'s' if vs.num_dots != 1 else ''} (0 to {vs.num_dots - 1})")
    try:
        one, at = vs.take_dots([dot]), 0
    except VectorFileError:       # block-wise FP32 scales: a B scale covers 128 columns
        one, at = vs, dot
    with trace.recording() as rec:
        code = int(reference.dot(spec, one).reshape(-1)[at])
    index = tuple(int(x) for x in np.unravel_index(dot, vs.out_shape))
    consistent = () if observed is None or observed == code or one is vs else tuple(
        diagnose(spec, one, 0, observed))
    return Explanation(spec.name, dot, index, tuple(rec.dots.get(at, ())), code,
                       spec.d_format, observed, consistent, diagnosed=one is not vs)


@dataclass(frozen=True)
class Hypothesis:
    """A computation near the unit's: what it is, and the spec and vectors that make it."""
    what: str
    kind: str                                  #: "input" (vectors changed) or "spec"
    changes: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "kind": self.kind, "changes": self.changes}


def _hypotheses(spec: UnitSpec, vs: VectorSet):
    """Each nearby computation: (Hypothesis, spec, vector set) of the one dot ``vs`` holds."""
    k = vs.k
    fa = formats.get(vs.a_format)
    blocks = k // vs.block if vs.block else 0
    zero_a = int(fa.encode(np.array([0.0]), "rne")[0])
    if blocks > 1:
        for b in range(blocks):
            a = vs.a.copy()
            a[..., b * vs.block:(b + 1) * vs.block] = zero_a
            yield Hypothesis(f"the sum without block {b} (elements {b * vs.block} to "
                             f"{(b + 1) * vs.block - 1})", "input", {"drop_block": b}), \
                spec, vs.replace(a=a)
    if k <= 256:
        for kk in range(k):
            a = vs.a.copy()
            if int(a.reshape(-1)[kk]) == zero_a:
                continue
            a[..., kk] = zero_a
            yield Hypothesis(f"the sum without product {kk}", "input", {"drop_product": kk}), \
                spec, vs.replace(a=a)
    if vs.c is not None:
        yield Hypothesis("the sum without C (C = +0)", "input", {"c": 0}), spec, \
            vs.replace(c=np.zeros_like(vs.c))
    if vs.scale_format == "e8m0" and blocks:
        for b in range(blocks):
            for step in (-1, 1):
                a_scale = vs.a_scale.astype(np.int64)
                a_scale[..., b] += step
                if not (0 <= a_scale[..., b] <= 254).all():
                    continue
                yield Hypothesis(f"block {b} with its scale-exponent sum one "
                                 f"{'less' if step < 0 else 'more'} (scaled 2^{step:+d} times "
                                 f"the model's)", "input",
                                 {"block_scale": b, "exponent": step}), \
                    spec, vs.replace(a_scale=a_scale.astype(vs.a_scale.dtype))
    if vs.scale_format is not None and vs.scale_format in ("e8m0", "ue4m3"):
        one = int(formats.get(vs.scale_format).encode(np.array([1.0]), "rne")[0])
        for side in ("a_scale", "b_scale"):
            yield Hypothesis(f"{side.replace('_', ' ')}s read as 1 (ignored)", "input",
                             {side: "1"}), spec, vs.replace(**{side: np.full_like(
                                 getattr(vs, side), one)})
    for field_name, values in _spec_variants(spec):
        for v in values:
            if v == getattr(spec, field_name):
                continue
            try:
                other = spec.replace(**{field_name: v})
            except (ValueError, TypeError):
                continue
            shown = v.value if hasattr(v, "value") else v
            yield Hypothesis(f"{field_name} = {shown}", "spec", {field_name: shown}), other, vs


def _spec_variants(spec: UnitSpec):
    roundings = (Rounding.RNE, Rounding.RZ, Rounding.RD, Rounding.RU, Rounding.RNA)
    yield "acc_rounding", roundings
    if spec.c_mode.value == "after":
        yield "c_rounding", roundings
    if spec.promote_every is not None:
        yield "promote_rounding", roundings
    if spec.frac_bits is not None:
        yield "frac_bits", tuple(f for f in range(max(0, spec.frac_bits - 4),
                                                  spec.frac_bits + 5))
        yield "align", tuple(Align)
    yield "zero_sign", tuple(ZeroSign)
    if spec.scale_sum_bits is not None:
        yield "scale_sum_bits", tuple(range(max(2, spec.scale_sum_bits - 2),
                                            spec.scale_sum_bits + 3))
    yield "nan_code", (None, 0x7FC00000, 0xFFC00000, 0x7FFFFFFF, 0xFFFFFFFF)


def diagnose(spec: UnitSpec, vs: VectorSet, dot: int, observed: int) -> list[Hypothesis]:
    """The nearby computations (:func:`_hypotheses`) whose result for dot ``dot`` of ``vs`` is
    ``observed``, bit for bit: what an observed result that differs from the model's is
    consistent with (empty where none is)."""
    one = vs.take_dots([dot]) if vs.num_dots > 1 else vs
    found = []
    for hyp, other_spec, other_vs in _hypotheses(spec, one):
        try:              # the fast engine: tests hold it equal to the reference, bit for bit
            got = int(fast.dot(other_spec, other_vs).reshape(-1)[0])
        except (ValueError, TypeError):
            continue
        if got == observed:
            found.append(hyp)
    # One node computed otherwise (the reference engine, told which node to change).
    with trace.recording() as rec:
        reference.dot(spec, one)
    tried = 0
    for node in rec.dots.get(0, ()):
        for hyp, change in _node_changes(node):
            tried += 1
            if tried > NODE_HYPOTHESES:
                return found
            with trace.recording({node.name: change}):
                if int(reference.dot(spec, one).reshape(-1)[0]) == observed:
                    found.append(hyp)
    return found


#: At most this many one-node hypotheses are computed per dot (each a reference run).
NODE_HYPOTHESES = 96


def _node_changes(node: trace.Node):
    """(Hypothesis, change) of one tree node rounded another way or to one bit more or
    less."""
    if node.op != "tree":
        return
    now = node.info["rounding"]
    for r in ("rne", "rz", "rd", "ru", "rna"):
        if r != now:
            yield Hypothesis(f"tree node {node.name} rounded {r} instead of {now}", "node",
                             {"node": node.name, "rounding": r}), {"rounding": r}
    for ulps in (-1, 1):
        yield Hypothesis(f"tree node {node.name} one unit in its last place "
                         f"{'smaller' if ulps < 0 else 'larger'} in magnitude", "node",
                         {"node": node.name, "ulp": ulps}), {"ulp": ulps}
    fmt = formats.get(node.info["format"])
    if fmt.kind == "float":
        for dm in (-1, 1):
            other = f"e{fmt.exp_bits}m{fmt.man_bits + dm}"
            try:
                formats.get(other)
            except (KeyError, ValueError):
                continue
            yield Hypothesis(f"tree node {node.name} rounded to {fmt.man_bits + dm + 1} "
                             f"significant bits instead of {fmt.man_bits + 1} ({other})",
                             "node", {"node": node.name, "format": other}), {"format": other}
