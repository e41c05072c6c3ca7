"""``train-eval``'s loop: one training run per recipe and path, from one seed, on one corpus.

Each run builds the model from the seed (the same weights for every run), converts its linear
layers to the recipe (:func:`mxsim.torch.training.convert`) through the papers' plain
emulation (``emulation``) or through the recipe's exact unit (``unit``, or a unit the caller
names), and trains it with AdamW on batches drawn from the seed (the same batches for every
run): a step's loss, its saturated elements (MX and FP8 operands clamped at the format's
largest) and the elements quantised, and the validation loss every ``eval_every`` steps and
at the end, on fixed validation windows, through the same converted model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import units
from ..errors import MxsimError
from ..quantize import training as tr
from .corpus import Corpus
from .model import Config, build

__all__ = ["PATHS", "train_one", "train_eval", "summary"]

#: The two ways a recipe's GEMMs run.
PATHS = ("emulation", "unit")
_VAL_WINDOWS = 8
_TAIL = 10


def _batches(corpus: Corpus, config: Config, seed: int, steps: int):
    rng = np.random.default_rng(seed)
    hi = corpus.train.size - config.context - 1
    for _ in range(steps):
        starts = rng.integers(0, hi, config.batch)
        yield np.stack([corpus.train[s:s + config.context + 1] for s in starts])


def _val_windows(corpus: Corpus, config: Config) -> np.ndarray:
    n = corpus.val.size - config.context - 1
    if n < _VAL_WINDOWS:
        raise MxsimError(f"the validation text ({corpus.val.size} characters) is shorter than "
                         f"{_VAL_WINDOWS} windows of {config.context + 1}")
    starts = np.linspace(0, n, _VAL_WINDOWS).astype(int)
    return np.stack([corpus.val[s:s + config.context + 1] for s in starts])


def _loss(net: Any, windows: np.ndarray) -> Any:
    import torch
    from torch.nn import functional as F
    ids = torch.from_numpy(windows.astype(np.int64))
    logits = net(ids[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def train_one(corpus: Corpus, config: Config, recipe: str, path: str, *, unit: Any = None,
              engine: str = "fast", steps: int = 100, seed: int = 0, lr: float = 3e-3,
              eval_every: int = 50) -> dict[str, Any]:
    """One run (see the module docstring): its losses per step, validation losses, saturated
    and quantised elements per step, seconds and tokens."""
    import torch

    from ..torch import training as mt
    if path not in PATHS:
        raise MxsimError(f"path must be one of {', '.join(PATHS)}, not {path!r}")
    rec = tr.training_recipe(recipe)
    net = build(config, seed)
    mt.convert(net, rec, mt.PLAIN if path == "emulation" else unit, engine=engine, seed=seed)
    ctx = mt.context_of(net)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    val = _val_windows(corpus, config)
    out: dict[str, Any] = {"recipe": rec.name, "path": path, "unit": _unit_name(net),
                           "loss": [], "val": [], "saturated": [], "elements": []}
    t0 = time.perf_counter()
    for step, batch in enumerate(_batches(corpus, config, seed, steps), 1):
        loss = _loss(net, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        stats = ctx.take_stats()
        out["loss"].append(float(loss.detach()))     # FP32, exactly
        out["saturated"].append(stats["saturated"])
        out["elements"].append(stats["elements"])
        if step % eval_every == 0 or step == steps:
            with torch.no_grad():
                out["val"].append([step, float(_loss(net, val))])
            ctx.take_stats()
    out["seconds"] = round(time.perf_counter() - t0, 2)
    out["tokens"] = steps * config.tokens
    out["rht_signs"] = ctx.signs.astype(int).tolist()
    return out


def _unit_name(net: Any) -> str:
    from ..torch import training as mt
    names = sorted({m.unit if m.unit == mt.PLAIN else m.unit.name for m in net.modules()
                    if hasattr(m, "recipe")})
    return ", ".join(names)


def train_eval(corpus: Corpus, config: Config, recipes: Sequence[str],
               paths: Sequence[str] = PATHS, *, unit: Any = None, engine: str = "fast",
               steps: int = 100, seed: int = 0, lr: float = 3e-3, eval_every: int = 50,
               progress: Callable[[str], None] | None = None,
               on_run: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Every recipe through every path: the report (JSON-ready, ``complete`` True). After
    each run, ``on_run`` gets the report so far (``complete`` False), so that a long run
    stopped part way keeps what it finished."""
    parsed = [tr.training_recipe(r) for r in recipes]          # bad names fail before a run
    if unit is not None:
        unit = units.get(unit)
    report = {"what": "mxsim train-eval: a character-level GPT trained under each recipe, "
                      "through the plain emulation and through exact units",
              "corpus": corpus.describe(), "model": config.as_dict(), "steps": steps,
              "seed": seed, "lr": lr, "engine": engine,
              "recipes": [tr.describe(r) for r in parsed], "runs": [], "complete": False}
    for rec in parsed:
        for path in paths:
            run = train_one(corpus, config, rec.name, path, unit=unit, engine=engine,
                            steps=steps, seed=seed, lr=lr, eval_every=eval_every)
            report["runs"].append(run)
            if progress:
                progress(f"{rec.name:34} {path:9} loss {run['loss'][-1]:.4f} val "
                         f"{run['val'][-1][1]:.4f}  {run['seconds']:.1f} s")
            if on_run:
                on_run(report)
    report["complete"] = True
    return report


def summary(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Per run: the mean loss of the last 10 steps, the final validation loss, and the
    difference of each to the same recipe's other path and to the first recipe's run on the
    same path (the baseline)."""
    runs = report["runs"]
    tail = {(r["recipe"], r["path"]): float(np.mean(r["loss"][-_TAIL:])) for r in runs}
    base = runs[0]["recipe"] if runs else None
    rows = []
    for r in runs:
        key = (r["recipe"], r["path"])
        other = [p for p in PATHS if p != r["path"]][0]
        rows.append({"recipe": r["recipe"], "path": r["path"], "unit": r["unit"],
                     "loss_tail": round(tail[key], 4), "val": r["val"][-1][1],
                     "vs_other_path": (round(tail[key] - tail[r["recipe"], other], 4) + 0.0
                                       if (r["recipe"], other) in tail else None),
                     "vs_baseline": (round(tail[key] - tail[base, r["path"]], 4) + 0.0
                                     if (base, r["path"]) in tail else None),
                     "saturated": int(sum(r["saturated"])), "seconds": r["seconds"]})
    return rows
