"""Validation records: what ``gpu.runs.collect --what validate|heldout`` writes, read back anywhere.

A run folder (``tests/data/h200/<run>/``) holds ``records.jsonl.gz`` (or ``records.jsonl`` when
the run was cut short): one JSON object per line, ``kind`` telling which:

- ``header``: versions (GPU, driver, CUDA, torch, cuBLAS, Triton, numpy, ml_dtypes, numba,
  the checkout's git commit), salt, command, start time;
- ``set``: one vector set run on the GPU and compared with a preset by the fast engine: its
  path, preset, formats, M, N, K, family, salt and seed (``gen`` and ``seed`` regenerate it
  with :func:`mxsim.vectors.generate`), dots, bit-equal count, ulp histogram of the differing
  outputs, the SHA-256 of the inputs, of the GPU's ``d`` and of the model's ``d``, and the
  first mismatches;
- ``error``: a set that could not run, and why;
- ``footer``: how many sets were planned and run, and whether a deadline stopped the run.

Nothing here needs a GPU: the tests and ``gpu.runs.figures`` read the records, and
:func:`regenerate` plus :func:`model_d` re-derive any set's model output on a CPU.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mxsim import presets, vectors
from mxsim.engine import fast
from mxsim.formats import Rounding
from mxsim.spec import UnitSpec

__all__ = ["Run", "read", "runs", "d_sha256", "inputs_sha256", "regenerate", "model_d",
           "model_spec", "split_k", "DATA"]

#: Where the committed runs live.
DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "h200"


def d_sha256(d: np.ndarray) -> str:
    """SHA-256 of result bit patterns, little-endian, C order (``uint32`` or ``uint16``)."""
    d = np.asarray(d)
    if d.dtype.kind != "u" or d.dtype.itemsize not in (2, 4):
        raise ValueError(f"Results must be uint16 or uint32 bit patterns, not {d.dtype}")
    return hashlib.sha256(np.ascontiguousarray(d, d.dtype.newbyteorder("<")).tobytes()
                          ).hexdigest()


def inputs_sha256(vs: vectors.VectorSet) -> str:
    """SHA-256 over a set's operands, scales and C (names, shapes, dtypes and bytes)."""
    h = hashlib.sha256()
    for name in ("a", "b", "c", "a_scale", "b_scale", "tensor_scale"):
        x = getattr(vs, name)
        if x is None:
            h.update(f"{name}:none;".encode())
            continue
        x = np.asarray(x)
        x = np.ascontiguousarray(x, x.dtype.newbyteorder("<"))
        h.update(f"{name}:{x.dtype.str}:{x.shape};".encode())
        h.update(x.tobytes())
    return h.hexdigest()


@dataclass
class Run:
    """One run folder's records."""
    name: str
    header: dict[str, Any]
    sets: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    footer: dict[str, Any] | None = None


def read(folder: str | Path) -> Run:
    """The records of one run folder (``records.jsonl.gz``, else ``records.jsonl``)."""
    folder = Path(folder)
    gz, plain = folder / "records.jsonl.gz", folder / "records.jsonl"
    if gz.exists():
        with gzip.open(gz, "rt", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    else:
        lines = plain.read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    if not rows or rows[0].get("kind") != "header":
        raise ValueError(f"{folder}: the first record must be the header")
    run = Run(folder.name, rows[0])
    for row in rows[1:]:
        kind = row.get("kind")
        if kind == "set":
            run.sets.append(row)
        elif kind == "error":
            run.errors.append(row)
        elif kind == "footer":
            run.footer = row
        else:
            raise ValueError(f"{folder}: unknown record kind {kind!r}")
    return run


def runs(what: str | None = None) -> list[Run]:
    """Every committed run (``what``: only those whose header's ``what`` is that), by folder.

    A run's name is its folder relative to :data:`DATA` (``2026-12-01/validate``).
    """
    out = []
    for folder in sorted({p.parent for p in DATA.rglob("records.jsonl*")}):
        run = read(folder)
        run.name = folder.relative_to(DATA).as_posix()
        if what is None or run.header.get("what") == what:
            out.append(run)
    return out


def regenerate(rec: dict[str, Any]) -> vectors.VectorSet:
    """The inputs of a set record, rebuilt from its generator arguments and seed."""
    gen = dict(rec["gen"])
    if "operand_map" in gen:
        from .sets import operand_map_sets
        return operand_map_sets(gen["operand_map"])[gen["side"]]
    return vectors.generate(gen.pop("family"), seed=rec["seed"], **gen)


def split_k(spec: UnitSpec, parts: int, k: int) -> UnitSpec:
    """``spec`` over a K of ``k`` split in ``parts`` equal parts, as a split-K GEMM runs it:
    each part from +0 through the instructions, the partials added into an FP32 total (which
    starts as C) with RNE. A part shorter than one instruction is one instruction on that
    part (the rest of its K zero)."""
    chunk = k // parts
    if parts < 1 or chunk * parts != k or spec.k is None:
        raise ValueError(f"cannot split a K of {k} in {parts} parts of {spec.name}")
    step = dict(k=chunk, promote_every=1) if chunk < spec.k else dict(
        promote_every=chunk // spec.k)
    return spec.replace(**step, promote_rounding=Rounding.RNE,
                        instruction=f"{spec.instruction}, K split in {parts} (split-K): "
                                    f"partials added in FP32 (RNE)")


def model_spec(preset: str, vs: vectors.VectorSet, parts: int | None = None) -> UnitSpec:
    """The spec a record compares with: ``preset``'s for ``vs``, split-K in ``parts`` if
    given."""
    spec = presets.get(preset).spec_for(vs)
    return spec if parts is None else split_k(spec, parts, vs.k)


def model_d(rec: dict[str, Any], vs: vectors.VectorSet | None = None) -> np.ndarray:
    """The record's preset (split-K as recorded) applied to its inputs by the fast engine."""
    vs = regenerate(rec) if vs is None else vs
    return fast.dot(model_spec(rec["preset"], vs, rec.get("split_k")), vs)
