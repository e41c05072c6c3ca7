"""Where a failing dot product goes wrong, as verification reports show it: the first wrong
node a design's probes show (:mod:`testbenches.foreign.localise`), or what its result is
consistent with (:func:`mxsim.engine.explain.diagnose`) — for any backend."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from mxsim.engine.explain import NONE_TRIED, Explanation, explain
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

__all__ = ["explained", "shared", "format_localised", "intermediates", "LOCALISED"]

#: Failing dots a report explains (the first chunk with a value mismatch, its first dots).
LOCALISED = 5


def explained(spec: UnitSpec, vs: VectorSet, outputs: Any, dots: list[int]
              ) -> list[dict[str, Any]]:
    """For each failing dot of ``vs`` (``outputs``: the design's result codes of the spec's
    d_format, flat), the nearby computations its result is consistent with, in the shape
    :func:`testbenches.foreign.localise.localise` gives (no probed node)."""
    flat = np.asarray(outputs).reshape(-1)
    if flat.size != vs.num_dots:                 # a result missing: order unknown
        return []
    out = []
    for dot in dots:
        e = explain(spec, vs, dot, observed=int(flat[dot]))
        out.append({"dot": dot, "node": None, "probe": None, "agree": [], "missing": [],
                    "result": {"design": hex(int(flat[dot])), "model": hex(e.code)},
                    "consistent": [h.to_dict() for h in e.consistent]})
    return out


#: The nodes a report shows of a failing dot's intermediates (not each product or term kept
#: whole: ``mxsim explain`` and the JSON report have every node).
SHOWN = ("c", "scale", "group", "acc", "step", "tree", "convert", "promote", "zero", "epilogue",
         "result")


def intermediates(e: Explanation, most: int = 24) -> str:
    """The structure of one dot's computation, as a report shows it: its scales, group sums,
    steps, tree nodes, conversions and result, and each term the alignment cut (at most
    ``most`` lines)."""
    rows = [n for n in e.nodes if n.op in SHOWN or (n.op == "align" and n.info.get("lost")
                                                     not in (None, "0"))]
    width = max((len(n.name) for n in rows), default=4)
    lines = [f"dot {e.dot} through {e.unit} (D = {e.code:#x}):"]
    for n in rows[:most]:
        extra = {k: v for k, v in n.info.items() if k in ("format", "rounding", "exponent_sum",
                                                          "lost", "exact", "code")}
        lines.append(f"  {n.name:<{width}}  {n.op:<8} {n.value}"
                     + (f"  [{', '.join(f'{k} {v}' for k, v in extra.items())}]"
                        if extra else ""))
    if len(rows) > most:
        lines.append(f"  ... {len(rows) - most} more")
    return "\n".join(lines)


def shared(found: list[dict[str, Any]]) -> list[str]:
    """The hypotheses every explained dot without a probed node is consistent with (a node
    named without its instruction: the same adder in every instruction), where there are two
    dots or more: the likely cause, where coincidences differ from dot to dot."""
    sets = []
    for f in found:
        if f["node"] is not None:
            continue
        sets.append({_general(h["what"]) for h in f["consistent"]})
    if len(sets) < 2:
        return []
    return sorted(set.intersection(*sets))


def _general(what: str) -> str:
    """A hypothesis named without its instruction (``tree node i1.L1.n1`` -> ``L1.n1``)."""
    return re.sub(r"\bi\d+\.", "", what)


def format_localised(found: list[dict[str, Any]]) -> str:
    """:func:`localise`'s findings as text, one paragraph a dot."""
    lines = []
    for f in found:
        head = f"dot {f['dot']}: "
        if f["node"] is not None:
            ins = "; ".join(f"{x['name']} = {x['value']}" + (" (probed: the design agrees)"
                                                           if "design" in x else "")
                            for x in f["inputs"])
            lines.append(f"{head}the first wrong node is {f['node']} (probe {f['probe']}): "
                         f"the design holds {f['design']}, the model {f['model']}; its "
                         f"inputs: {ins or 'none'}")
            continue
        res = f["result"]
        what = ("; ".join(h["what"] for h in f["consistent"]) if f["consistent"] else
                NONE_TRIED)
        before = (f"every probed node agrees with the model ({', '.join(f['agree'])}), so "
                  f"the difference comes after them; " if f["agree"] else "")
        if res["design"] is None:
            lines.append(f"{head}{before}the design gave no result in the unit's format to "
                         f"compare (a fixed-point value it cannot hold exactly, or none read)")
        else:
            lines.append(f"{head}{before}the design's result {res['design']} (the model's "
                         f"{res['model']}) is consistent with {what}")
        if f["missing"]:
            lines.append(f"  (no sample of probe{'s' if len(f['missing']) > 1 else ''} "
                         f"{', '.join(f['missing'])} for this dot: its strobe fired fewer "
                         f"times than instructions were issued)")
    common = shared(found)
    if common:
        lines.append(f"every dot explained is consistent with: {'; '.join(common)}")
    return "\n".join(lines)
