"""The result store: one JSON file per finished task, in a directory (local or shared).

``<root>/<key[:2]>/<key>.json`` holds ``{"key", "label", "fn", "seconds", "result"}``. Files
are written whole or not at all (:mod:`mxsim.output`: a temporary file renamed over the
target), so a reader, a second campaign or a resumed one sees finished results only. Two
workers that finish the same task write the same bytes; the last rename wins.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import MxsimError
from ..output import write_text

__all__ = ["Store", "StoreError"]


class StoreError(MxsimError, ValueError):
    """A store path that is not a directory, or cannot be created."""


class Store:
    """A directory of finished results, keyed by :attr:`mxsim.campaign.Task.key`."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(f"{path}: the result store must be a directory")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{path}: cannot create the result store ({exc.strerror})") from None

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    def _file(self, key: str) -> Path:
        if len(key) < 3 or not all(c in "0123456789abcdef" for c in key):
            raise ValueError(f"Not a task key: {key!r}")
        return self.path / key[:2] / f"{key}.json"

    def record(self, key: str) -> dict[str, Any] | None:
        """The stored record of ``key`` (result and metadata), or None."""
        try:
            text = self._file(key).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            record = json.loads(text)
        except ValueError:                      # not written by put(): treat as absent
            return None
        return record if isinstance(record, dict) and "result" in record else None

    def get(self, key: str) -> dict[str, Any] | None:
        """The result of ``key``, or None when it has not finished."""
        record = self.record(key)
        return None if record is None else record["result"]

    def put(self, key: str, result: dict[str, Any], **meta: Any) -> None:
        """Store ``result`` under ``key`` atomically; ``meta`` (label, fn, seconds) beside it."""
        path = self._file(key)
        path.parent.mkdir(exist_ok=True)
        text = json.dumps({"key": key, **meta, "result": result}, sort_keys=True,
                          allow_nan=False)
        write_text(path, text + "\n", error=StoreError)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.record(key) is not None

    def keys(self) -> Iterator[str]:
        """The keys of the stored results."""
        for path in sorted(self.path.glob("??/*.json")):
            yield path.stem

    def __len__(self) -> int:
        return sum(1 for _ in self.keys())
