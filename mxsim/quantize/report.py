"""How the scale rules compare on one input: scale changes and error against the input."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..formats import Format
from .blocks import fp32_bits
from .mx import from_mx, to_mx
from .rules import TORCHAO_FORMATS, ScaleRule, element_format, rule_for, rules_for

__all__ = ["compare_rules"]


def compare_rules(x: Any, elem_format: str | Format, block: int = 32, axis: int = -1,
                  rules: list[ScaleRule | str] | None = None) -> list[dict[str, Any]]:
    """How each scale rule quantises ``x``: scale changes and error against the input.

    For each rule (default: every rule defined for the format), the blocks whose scale code
    differs from the baseline (``floor``, or ``ocp`` for int8), and the absolute and relative
    error of :func:`from_mx` of its codes against ``x`` over the finite inputs whose result is
    finite (relative error over the non-zero ones). NaN-only blocks are quantised, not refused.
    """
    fmt = element_format(elem_format)
    chosen = rules_for(fmt) if rules is None else [rule_for(r, fmt) for r in rules]
    bits = fp32_bits(x)
    ref = bits.view(np.float32).astype(np.float64)
    base_rule = ScaleRule.FLOOR if fmt.name in TORCHAO_FORMATS else ScaleRule.OCP
    base, _ = to_mx(bits.view(np.float32), fmt, block, base_rule, axis=axis,
                    nan_blocks="quantize")
    rows = []
    for rule in chosen:
        s, e = to_mx(bits.view(np.float32), fmt, block, rule, axis=axis, nan_blocks="quantize")
        deq = from_mx(s, e, fmt, block, axis)
        ok = np.isfinite(ref) & np.isfinite(deq)
        err = np.abs(deq[ok] - ref[ok])
        nz = ref[ok] != 0
        rel = err[nz] / np.abs(ref[ok][nz])
        rows.append({
            "rule": rule.value, "blocks": int(s.size),
            "scale_differs": int((s != base).sum()), "baseline": base_rule.value,
            "max_abs_err": float(err.max()) if err.size else 0.0,
            "mean_abs_err": float(err.mean()) if err.size else 0.0,
            "max_rel_err": float(rel.max()) if rel.size else 0.0,
            "mean_rel_err": float(rel.mean()) if rel.size else 0.0,
            "nonfinite_outputs": int((~np.isfinite(deq)).sum()),
        })
    return rows
