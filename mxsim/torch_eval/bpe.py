"""A byte-level BPE tokenizer (GPT-2 style) from a GGUF file's vocabulary and merges.

Enough for a fixed English sample: bytes are mapped to GPT-2's printable characters, the text
is split as llama.cpp's ``smollm`` pre-tokenizer does (each digit alone, then GPT-2's pattern;
Python's ``re`` stands in for ``\\p{L}`` / ``\\p{N}`` with ``[^\\W\\d_]`` / ``\\d``, the same on
ASCII text), and each piece is merged by rank. No special tokens are added.
"""

from __future__ import annotations

import re
from functools import cache

__all__ = ["Tokenizer"]

_PIECE = re.compile(r"\d|'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+")


@cache
def _byte_chars() -> dict[int, str]:
    """GPT-2's map from bytes to printable characters."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + \
        list(range(0xAE, 0x100))
    chars = keep[:]
    extra = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(keep, chars, strict=True)}


class Tokenizer:
    """``encode(text) -> list[int]`` and ``decode(ids) -> str`` for a GPT-2 style vocabulary."""

    def __init__(self, tokens: list[str], merges: list[str]):
        self.tokens = tokens
        self.ids = {t: i for i, t in enumerate(tokens)}
        self.ranks = {tuple(m.split(" ", 1)): i for i, m in enumerate(merges)}
        self.chars = _byte_chars()
        self.bytes_of = {c: b for b, c in self.chars.items()}

    def _bpe(self, piece: str) -> list[str]:
        parts = list(piece)
        while len(parts) > 1:
            pairs = [(self.ranks.get((a, b), 1 << 30), i)
                     for i, (a, b) in enumerate(zip(parts, parts[1:], strict=False))]
            rank, i = min(pairs)
            if rank == 1 << 30:
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        return parts

    def encode(self, text: str) -> list[int]:
        out = []
        for piece in _PIECE.findall(text):
            mapped = "".join(self.chars[b] for b in piece.encode("utf-8"))
            out += [self.ids[p] for p in self._bpe(mapped)]
        return out

    def decode(self, ids: list[int]) -> str:
        raw = bytes(self.bytes_of[c] for i in ids for c in self.tokens[i])
        return raw.decode("utf-8", "replace")
