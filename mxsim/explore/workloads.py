"""A sweep's workloads: the GEMMs of a layer, their seeded float inputs and the recipe's codes.

A workload's whole shape is what the throughput runs; accuracy runs on a sample of its outputs
at the full K, from float operands drawn by a seeded generator and quantised by a recipe
(:mod:`mxsim.api`'s, the one chosen by the unit's block scales unless the workload names one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..quantize import RECIPE_SCALES, quantise_operands
from ..spec import UnitSpec
from ..vectors import VectorSet

__all__ = ["LAYERS", "DISTRIBUTIONS", "RECIPES", "Workload", "recipe", "problem", "floats",
           "quantised"]

#: (N, K) of the GEMMs of a transformer layer (M is the number of tokens). Llama 3 8B: hidden
#: 4096, 8 KV heads of 128, FFN 14336; Llama 3 70B: hidden 8192, FFN 28672.
LAYERS = {
    "llama3-8b.qkv": (6144, 4096),
    "llama3-8b.attn-out": (4096, 4096),
    "llama3-8b.ffn-up": (28672, 4096),          # gate and up projections as one GEMM
    "llama3-8b.ffn-down": (4096, 14336),
    "llama3-70b.ffn-down": (8192, 28672),
}
DISTRIBUTIONS = {
    "normal": "activations and weights N(0, 1)",
    "llm": "activations Student-t (4 dof) with a log-normal scale per token and 0.5 % of "
           "channels 20-60x larger (outlier features, as in LLM.int8()); weights Student-t "
           "(8 dof) x 0.02 with a log-normal scale per output channel",
}
#: The recipes a workload may name (besides "auto"), in the order errors list them.
RECIPES = tuple(RECIPE_SCALES)


@dataclass(frozen=True)
class Workload:
    """A GEMM of a layer: its whole shape (throughput) and the outputs sampled (accuracy)."""
    name: str
    shape: tuple[int, int, int]          #: M, N, K of the whole GEMM
    sample: tuple[int, int] = (64, 64)   #: m x n outputs computed at the full K
    distribution: str = "llm"
    recipe: str = "auto"                 #: "auto" (from the unit's scales), mx, nvfp4, fp8-tensor
    scale_rule: str = "rceil"            #: MX scale rule (mxsim.quantize)
    seed: int = 0
    layer: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "sample": list(self.sample),
                "distribution": self.distribution, "recipe": self.recipe,
                "scale_rule": self.scale_rule, "seed": self.seed, "layer": self.layer}

    def inputs_dict(self) -> dict[str, Any]:
        """What decides the workload's float inputs (the name does not)."""
        d = self.to_dict()
        del d["name"], d["layer"]
        d["shape"] = d["shape"][2:]                # only K: M and N are the throughput's
        return d

    @property
    def k(self) -> int:
        return self.shape[2]


def recipe(w: Workload, spec: UnitSpec) -> str:
    """The recipe that quantises ``w`` for ``spec``: the workload's, or for "auto" the one
    whose block scales the unit takes ("?" when none does)."""
    if w.recipe != "auto":
        return w.recipe
    by_scales = {scales: name for name, scales in RECIPE_SCALES.items()}
    return by_scales.get(spec.scale_format, "?")


def problem(w: Workload, spec: UnitSpec) -> str | None:
    """Why ``spec`` cannot run ``w`` (recipe, formats, K against k and the block), or None."""
    name = recipe(w, spec)
    if name not in RECIPE_SCALES:
        return (f"no recipe quantises for {spec.scale_format} scales (the recipes are "
                f"{', '.join(RECIPE_SCALES)})")
    if RECIPE_SCALES[name] != spec.scale_format:
        return (f"recipe {name} gives {RECIPE_SCALES[name] or 'no'} block scales, but the unit "
                f"takes {spec.scale_format or 'none'}")
    if name == "nvfp4" and (spec.a_format, spec.b_format) != ("e2m1", "e2m1"):
        return f"recipe nvfp4 gives e2m1 elements, not {spec.a_format} x {spec.b_format}"
    if spec.k is not None and w.k % spec.k:
        return f"K = {w.k} is not a multiple of the unit's k ({spec.k})"
    if spec.block is not None and w.k % spec.block:
        return f"K = {w.k} is not a multiple of the scale block ({spec.block})"
    return None


def floats(w: Workload) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """The float32 activations x (m, K) and weights w (K, n) of a workload's sample."""
    rng = np.random.default_rng(w.seed)
    (m, n), k = w.sample, w.k
    if w.distribution == "normal":
        x = rng.standard_normal((m, k))
        y = rng.standard_normal((k, n))
    else:
        x = rng.standard_t(4, (m, k)) * rng.lognormal(0.0, 0.5, (m, 1))
        outliers = rng.choice(k, max(1, k // 200), replace=False)
        x[:, outliers] *= rng.uniform(20.0, 60.0, outliers.size)
        y = rng.standard_t(8, (k, n)) * 0.02 * rng.lognormal(0.0, 0.3, (1, n))
    return x.astype(np.float32), y.astype(np.float32)


def quantised(w: Workload, spec: UnitSpec) -> tuple[VectorSet, float, npt.NDArray[np.float64]]:
    """The workload's codes for ``spec`` (a VectorSet), the factor that turns the unit's output
    into the GEMM's value, and the unquantised float64 GEMM."""
    x, y = floats(w)
    vs, (fx, fy) = quantise_operands(x, y, recipe(w, spec), spec.a_format, spec.b_format,
                                     block=spec.block, scale_rule=w.scale_rule)
    return vs, float(fx) * float(fy), x.astype(np.float64) @ y.astype(np.float64)
