"""Where inside a foreign design a failing dot product first goes wrong.

A port map's ``[probes]`` name internal signals and the model nodes they hold
(:mod:`testbenches.foreign.portmap.probes`); a run samples them
(:mod:`testbenches.foreign.probing`). For each failing dot product, :func:`localise` has the
reference engine record the dot (:func:`mxsim.engine.explain.explain`), walks its nodes in the
order the engine computed them (each node after its inputs), compares every probed node's
value with the design's, exactly in value (+0 equals -0, NaN equals NaN), and names the first
that differs, with its inputs and both values. Where the design has no probes, or every
probed node agrees, it says which nearby computation the design's result is consistent with
(:func:`mxsim.engine.explain.diagnose`). :func:`format_localised` prints the findings.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

import numpy as np

from mxsim import formats, vectors
from mxsim.engine.explain import explain
from mxsim.engine.reference import trace
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

from ..sim.localised import format_localised

__all__ = ["localise", "format_localised", "unit_nodes", "exact_value"]

_INSTRUCTION = re.compile(r"i(\d+)\.(.+)\Z")


def exact_value(text: str) -> Fraction | str:
    """A node's value text (``-5*2^3``, ``3/7``, ``-0``, ``nan``, ``+inf``) as a Fraction
    (a zero of either sign is 0), or "nan", "+inf", "-inf"."""
    if text in ("nan", "+inf", "-inf"):
        return text
    sig, _, e = text.partition("*2^")
    return Fraction(sig) * Fraction(2) ** int(e or 0)


def _text(v: Fraction | str) -> str:
    """A value as node values are written (``-817*2^-1``), with a decimal beside it."""
    if isinstance(v, str):
        return v
    shown = trace.exact(v)
    return f"{shown} (~{float(v):.9g})" if "*2^" in shown or "/" in shown else shown


def unit_nodes(spec: UnitSpec) -> list[str] | None:
    """The nodes ``spec`` computes in an instruction, named within it (``g8``, ``L1.n0``),
    from a dot product of random normal values and one of zeros (None where no vector set of
    the spec can be made here)."""
    c_format = spec.d_format if spec.d_format in ("fp32", "fp16", "bf16") else "fp32"
    names: dict[str, None] = {}
    for family in ("normal", "zeros"):
        try:
            vs = vectors.generate(family, a_format=spec.a_format, b_format=spec.b_format, m=1,
                                  n=1, k=spec.k, scale_format=spec.scale_format,
                                  block=spec.block, c_format=c_format, seed=0)
            nodes = explain(spec, vs, 0).nodes
        except (ValueError, TypeError):
            return None
        for n in nodes:
            found = _INSTRUCTION.match(n.name)
            if found and found.group(1) == "0":
                names[found.group(2)] = None
    return list(names)


def _observed(spec: UnitSpec, run: Any, dot: int) -> int | None:
    """The design's result of ``dot`` as a code of the spec's d_format: a fixed-point value
    only where that format holds it exactly (checked in Fractions), else None (nothing to
    compare bit for bit), as where no result was read."""
    res = run.results
    if res is None or dot >= len(res):
        return None
    one = res.take(np.array([dot]))
    if one.encoding != "fixed":
        return int(one.codes[0])
    if one.nan is not None and bool(np.asarray(one.nan).reshape(-1)[0]):
        return None
    value = Fraction(int(one.mant[0])) * Fraction(2) ** int(one.exp[0])
    fmt = formats.get(spec.d_format)
    try:
        code = fmt.encode(np.array([float(value)]), "rne", saturate=False)
    except OverflowError:
        return None
    back = float(fmt.decode(code)[0])
    return int(code[0]) if np.isfinite(back) and Fraction(back) == value else None


def localise(pm: Any, spec: UnitSpec, vs: VectorSet, run: Any, dots: list[int], *,
             diagnose: bool = True) -> list[dict[str, Any]]:
    """For each dot product ``dots`` (flat indices of ``vs``, run through the design of port
    map ``pm`` as ``run``, a :class:`~testbenches.foreign.backend.ForeignRun`), where it
    first goes wrong.

    Returns one dict per dot: ``dot``; ``node`` (the first probed node whose value differs,
    ``i0.L1.n1``, or None), ``probe`` (its probe's name), ``model`` and ``design`` (both
    values, exact text), ``inputs`` (``[{name, value}]``: the node's inputs as the model has
    them, with ``design`` where an input is probed too); ``agree`` (the probed nodes before it,
    all equal); ``missing`` (probes the run holds no sample of for this dot). With no differing
    node: ``result`` (the design's and the model's result codes) and ``consistent`` (the nearby
    computations the design's result matches, :func:`mxsim.engine.explain.diagnose`; not
    tried with ``diagnose=False``, or where the design's result is a fixed-point value its
    format cannot hold exactly: ``result.design`` is then None).
    """
    pm = pm.resolve(spec)
    per_dot = vs.k // pm.k
    probes = {p.node: p for p in pm.probes if p.name in (run.probes or {})}
    return [_one(pm, spec, vs, run, int(dot), per_dot, probes, diagnose) for dot in dots]


def _one(pm: Any, spec: UnitSpec, vs: VectorSet, run: Any, dot: int, per_dot: int,
         probes: dict[str, Any], diagnose: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"dot": dot, "node": None, "probe": None, "agree": [], "missing": []}
    e = None
    if probes:
        e = explain(spec, vs, dot)
        values = {n.name: n.value for n in e.nodes}
        seen: dict[str, Fraction | str] = {}
        for n in e.nodes:
            found = _INSTRUCTION.match(n.name)
            probe = probes.get(found.group(2)) if found else None
            if probe is None:
                continue
            samples, inst = run.probes[probe.name], dot * per_dot + int(found.group(1))
            if inst >= len(samples):
                out["missing"].append(probe.name)
                continue
            design, model = samples.value(probe, inst), exact_value(n.value)
            seen[n.name] = design
            if design == model:            # exactly in value: Fractions, or nan/+inf/-inf
                out["agree"].append(n.name)
                continue
            out.update(node=n.name, probe=probe.name, model=_text(model), design=_text(design),
                       inputs=[{"name": x, "value": _text(exact_value(values[x])),
                                **({"design": _text(seen[x])} if x in seen else {})}
                               for x in n.inputs if x in values])
            return out
    observed = _observed(spec, run, dot)
    if not diagnose:
        out["result"] = {"design": None if observed is None else hex(observed), "model": None}
        out["consistent"] = []
        return out
    if e is None or (observed is not None and observed != e.code):
        e = explain(spec, vs, dot, observed=observed)
    out["result"] = {"design": None if observed is None else hex(observed),
                     "model": hex(e.code)}
    out["consistent"] = [h.to_dict() for h in e.consistent]
    return out
