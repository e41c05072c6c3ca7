"""``[[waive]]`` tables of a port map: the design's known deviations, each a name and a
predicate (the language of :mod:`testbenches.sim.waive`), checked when the map is read.

```toml
[[waive]]
name = "exact-zero result, C = -0: sign may differ"
when = "want.zero and got.zero and c.neg_zero"
```

A problem is a :class:`~testbenches.foreign.portmap.parts.MapError` naming the line of the
entry's key: an unknown key, a missing or empty ``when``, a predicate outside the language.
"""

from __future__ import annotations

import re

from ...sim.waive import Waiver, WaiverError, compile_when
from .parts import MapError
from .reader import Reader

__all__ = ["parse_waivers", "KEYS"]

#: The keys of one ``[[waive]]`` table.
KEYS = ("name", "when")


def parse_waivers(r: Reader) -> tuple[Waiver, ...]:
    """The waivers of the map ``r`` reads, in the order written (none without ``[[waive]]``);
    MapError for the first problem."""
    data = r.get(("waive",))
    if data is None:
        return ()
    if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
        raise r.fail(("waive",), "waive must be [[waive]] tables, each with name and when "
                                 "(see 'Census and waivers' in docs/foreign-rtl.md)")
    lines = _key_lines(r)
    out = []
    for i, entry in enumerate(data):
        where = lines[i] if i < len(lines) else {}

        def line(key: str | None = None, i=i, where=where) -> int:
            return where.get(key, where.get(None, r.line(("waive", str(i)))))

        for key in entry:
            if key not in KEYS:
                raise MapError(f"{r.name}:{line(key)}: unknown key 'waive.{key}'; [[waive]] "
                               f"takes {', '.join(KEYS)}")
        when, name = entry.get("when"), entry.get("name")
        if not isinstance(when, str) or not when.strip():
            raise MapError(f"{r.name}:{line('when')}: waive.when must be a predicate string, "
                           f"e.g. when = \"want.zero and got.zero and c.neg_zero\"" + (
                               "" if "when" in entry else "; add it to this [[waive]]"))
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise MapError(f"{r.name}:{line('name')}: waive.name must be a non-empty string")
        try:
            compile_when(when)
        except WaiverError as exc:
            raise MapError(f"{r.name}:{line('when')}: waive.when: {exc}") from None
        out.append(Waiver.of((name or when).strip(), when.strip(), f"{r.name}:{line('when')}"))
    return tuple(out)


def _key_lines(r: Reader) -> list[dict[str | None, int]]:
    """For each ``[[waive]]`` header, in order: its line (key None) and those of its keys."""
    try:
        text = r.path.read_text(encoding="utf-8")
    except OSError:
        return []
    out: list[dict[str | None, int]] = []
    current: dict[str | None, int] | None = None
    for n, raw in enumerate(text.splitlines(), 1):
        if re.match(r"\s*\[\[\s*waive\s*\]\]", raw):
            current = {None: n}
            out.append(current)
        elif re.match(r"\s*\[", raw):
            current = None
        elif current is not None:
            hit = re.match(r"\s*([A-Za-z_][A-Za-z0-9_-]*)\s*=", raw)
            if hit:
                current.setdefault(hit.group(1), n)
    return out
