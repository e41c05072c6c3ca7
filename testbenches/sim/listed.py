"""The mismatches a verify report lists, from a chunk's census records: unwaived and waived
apart, each list capped and closed by one entry that stands for the rest, so that
:func:`~testbenches.sim.backend.count` of a list is its true count (the census,
:mod:`testbenches.sim.census`, has every one by class)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt

from .backend import VALUE_LIMIT, Mismatch, MismatchKind, Run, count, not_listed
from .census import Records

__all__ = ["split_listed"]


def split_listed(run: Run, rec: Records, waived_by: npt.NDArray, chunk: int
                 ) -> tuple[list[Mismatch], list[Mismatch]]:
    """A chunk's listed mismatches, unwaived and waived apart, each list closed by an entry
    that stands for the rest (:func:`~testbenches.sim.backend.not_listed`), so that
    :func:`~testbenches.sim.backend.count` of each is its true count. The run's own entries
    are kept (its cocotb scoreboard's value entries, per cycle, become one entry per dot)."""
    value = MismatchKind.VALUE
    n = int(rec.dot.max(initial=-1)) + 1
    waived_dot = {k: np.zeros(n, bool) for k in ("value", "flags")}
    for k in waived_dot:
        hit = rec.of(k) & (waived_by >= 0)
        waived_dot[k][rec.dot[hit]] = True
    from_list = np.flatnonzero(rec.entry >= 0)
    by_entry = dict(zip(rec.entry[from_list].tolist(), waived_by[from_list].tolist(),
                        strict=True))
    lists: tuple[list[Mismatch], list[Mismatch]] = ([], [])
    for j, m in enumerate(run.mismatches):
        if m.kind is value and (m.unlisted is not None or m.cycle is not None):
            continue                  # closing entries, and a scoreboard's per-cycle ones
        if m.kind is value and m.dot is not None:
            k = "flags" if m.note == "status flags differ" else "value"
            waived = m.dot < n and bool(waived_dot[k][m.dot])
        else:
            waived = by_entry.get(j, -1) >= 0
        lists[waived].append(m)
    for waived, out in enumerate(lists):
        _fill(out, rec, (waived_by >= 0) == bool(waived))
    for waived, out in enumerate(lists):
        mine = (waived_by >= 0) == bool(waived)
        total = int(rec.weight[mine & rec.of("value", "flags", "missing")].sum())
        listed = count(out, value)
        if total > listed:
            out.append(not_listed(value, total, listed))
    return tuple([m if m.chunk is not None else _at(m, chunk) for m in out] for out in lists)


def _fill(out: list[Mismatch], rec: Records, mine: npt.NDArray[np.bool_]) -> None:
    """Up to VALUE_LIMIT value mismatches of a dot in ``out``: those the run listed, then
    more of ``mine`` from the records (where codes are known): a cocotb scoreboard lists per
    cycle, and a run's list loses what a waiver takes."""
    value = MismatchKind.VALUE
    listed = [m for m in out if m.kind is value and m.dot is not None]
    room = VALUE_LIMIT - len(listed)
    if room <= 0:
        return
    shown = {m.dot for m in listed}
    code = rec.env["got"]["code"]
    pick = np.flatnonzero(rec.of("value") & mine & np.asarray(code.defined, bool))
    pick = [i for i in pick[:room + len(shown)].tolist() if int(rec.dot[i]) not in shown]
    digits = 2 + rec.bits // 4
    want = rec.env["want"]["code"].values
    more = [Mismatch(value, dot=int(rec.dot[i]), rtl=f"{int(code.values[i]):#0{digits}x}",
                     model=f"{int(want[i]):#0{digits}x}") for i in pick[:room]]
    if more:
        rest = [m for m in out if m not in listed]
        out[:] = sorted(listed + more, key=lambda m: m.dot) + rest


def _at(m: Mismatch, chunk: int) -> Mismatch:
    return replace(m, chunk=chunk)
