"""A campaign task: one content-addressed unit of work, run by a worker.

A :class:`Task` names a top-level function by its dotted path (``package.module:function``),
the JSON-able ``args`` it is called with, and what determines its result. Its :attr:`Task.key`
is the SHA-256 of the canonical JSON (sorted keys, no spaces, ASCII) of the function name, the
``key_parts`` and the ``args``; ``key_parts={"all": True, ...}`` says the key parts are
everything that determines the result, and the ``args`` (paths of build caches, say) are left
out of the key.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

__all__ = ["Task", "canonical_json", "sources_digest"]

_FN = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON: sorted keys, no spaces, ASCII, no NaN (tuples as lists)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)


@lru_cache(maxsize=16)
def sources_digest(root: Path, folders: tuple[str, ...],
                   suffixes: tuple[str, ...] = (".py",)) -> str:
    """A hash (16 hex digits) of the source files (``suffixes``) under ``folders`` of ``root``,
    each by its path relative to ``root`` and its bytes: the code a task's result stands for,
    as a key part (kept per process: what a worker runs is what it imported)."""
    h = hashlib.sha256()
    for folder in folders:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in suffixes and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class Task:
    """One task: ``fn(args)`` returns a JSON-able dict.

    ``label`` names the task in progress lines and reports; ``replay`` is the command that
    reruns it alone (shown when it fails).
    """

    fn: str
    args: Mapping[str, Any] = field(default_factory=dict)
    key_parts: Mapping[str, Any] | None = None
    label: str = ""
    replay: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.fn, str) or not _FN.match(self.fn):
            raise ValueError(f"Task.fn must be 'package.module:function', not {self.fn!r}")
        if not isinstance(self.args, Mapping):
            raise TypeError(f"Task.args must be a mapping, not {type(self.args).__name__}")
        if self.key_parts is not None and not isinstance(self.key_parts, Mapping):
            raise TypeError("Task.key_parts must be a mapping or None")
        self.key                                  # noqa: B018 (JSON-able now, not on a worker)

    @cached_property
    def key(self) -> str:
        """The SHA-256 (hex) of everything that determines the result."""
        parts = dict(self.key_parts or {})
        payload: dict[str, Any] = {"fn": self.fn, "key_parts": parts}
        if parts.get("all") is not True:
            payload["args"] = dict(self.args)
        try:
            text = canonical_json(payload)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"Task {self.label or self.fn}: args and key_parts must be "
                            f"JSON-able ({exc})") from None
        return hashlib.sha256(text.encode("ascii")).hexdigest()

    @property
    def name(self) -> str:
        """The label, or the start of the key."""
        return self.label or self.key[:12]

    def __hash__(self) -> int:
        return hash(self.key)
