"""Reading and writing ``mxsim.vectors/1`` files (``.npz``), and their named arrays.

Files are read with ``allow_pickle=False``; members are checked from their ``.npy`` headers
before any array is read, and unknown arrays, wrong dtypes, mismatched shapes, unknown formats
and codes outside a format are all rejected with a one-line
:class:`~mxsim.errors.VectorFileError` that names the file. Writes go to a temporary file that
is renamed into place, so a failed write never leaves half a file.
"""

from __future__ import annotations

import json
import math
import os
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import VectorFileError
from ..output import open_output
from .schema import SCHEMA, VectorSet, check_size, located

__all__ = ["load", "save", "from_arrays", "to_arrays", "npy_header"]

_ARRAYS = ("a", "b", "c", "d", "a_scale", "b_scale", "tensor_scale", "meta")
_COMPRESS_LIMIT = 16 << 20    # bytes of arrays above which a set is written uncompressed
_META_REQUIRED = ("schema", "a_format", "b_format", "scale_format", "block", "producer")
_HINT = "vector sets are written by `mxsim vectors gen` or `mxsim run`"


def npy_header(f: Any) -> tuple[tuple[int, ...], np.dtype] | None:
    """Shape and dtype from the header of an .npy stream, or None when it has no .npy magic."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
    except ValueError:
        return None
    read = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}.get(version)
    if read is None:
        raise ValueError(f".npy format version {version[0]}.{version[1]} is not supported")
    shape, _, dtype = read(f)
    return tuple(shape), dtype


def _check_members(p: str, zf: zipfile.ZipFile, allow_large: bool) -> None:
    """Names, dtypes and sizes of an .npz's members, from their headers, before any array is
    read: a small file cannot declare a huge array and have it allocated."""
    heads: dict[str, tuple[tuple[int, ...], np.dtype] | None] = {}
    for info in zf.infolist():
        key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
        if key not in _ARRAYS:
            heads[key] = None
            continue
        with zf.open(info) as f:
            heads[key] = npy_header(f)
    unknown = sorted(k for k in heads if k not in _ARRAYS)
    if unknown:
        raise located(p, f"unknown array(s) {', '.join(map(repr, unknown))}; "
                         f"{SCHEMA} allows {', '.join(_ARRAYS)}")
    raw = sorted(k for k, h in heads.items() if h is None)
    if raw:
        raise located(p, f"member(s) {', '.join(map(repr, raw))} are not .npy arrays; {_HINT}")
    if any(dtype.hasobject for _, dtype in heads.values()):
        raise located(p, f"unreadable npz (Object arrays cannot be loaded when "
                         f"allow_pickle=False); {_HINT}")
    nbytes = sum(math.prod(shape) * dtype.itemsize for shape, dtype in heads.values())
    products = 0
    if "a" in heads and "b" in heads and min(len(heads["a"][0]), len(heads["b"][0])) >= 2:
        a, b = heads["a"][0], heads["b"][0]
        products = math.prod(a) * b[-1]             # batch x M x K x N
    check_size(nbytes, products, allow_large, p)


def load(path: str | os.PathLike, *, allow_large: bool = False) -> VectorSet:
    """Read a vector-set file and build its (checked) VectorSet.

    The shapes and dtypes in the members' ``.npy`` headers are checked before any array is
    read; a set over the size limits (:func:`check_size`) is refused unless ``allow_large``.
    """
    p = str(path)
    if not Path(p).is_file():
        raise located(p, "no such file")
    try:
        # Our own handle: np.load leaks the one it opens when the zip directory is unreadable.
        with open(p, "rb") as fh:
            z = np.load(fh, allow_pickle=False)
            if not isinstance(z, np.lib.npyio.NpzFile):     # a bare .npy array
                raise located(p, f"not an .npz file; {_HINT}")
            with z:
                _check_members(p, z.zip, allow_large)
                arrays = {name: z[name] for name in z.files}
    # zlib.error: a member whose compressed stream is corrupt; NotImplementedError and
    # RuntimeError: zipfile's "compression method not supported" and "encrypted".
    except (zipfile.BadZipFile, zlib.error, ValueError, OSError, EOFError, NotImplementedError,
            RuntimeError) as exc:
        if isinstance(exc, VectorFileError):
            raise
        kind = "not an .npz file" if not zipfile.is_zipfile(p) else f"unreadable npz ({exc})"
        raise located(p, f"{kind}; {_HINT}") from None
    return from_arrays(arrays, p)


_META_DEPTH = 32


def _depth(obj: Any) -> int:
    """How deeply lists and objects nest in parsed JSON (without recursion)."""
    deepest, todo = 0, [(obj, 1)]
    while todo:
        x, d = todo.pop()
        if isinstance(x, dict | list):
            deepest = max(deepest, d)
            if d <= _META_DEPTH:
                todo += [(v, d + 1) for v in (x.values() if isinstance(x, dict) else x)]
    return deepest


def _read_meta(meta_arr: np.ndarray, p: str | None) -> dict[str, Any]:
    """The ``meta`` member as a dict, with the entries every set needs of the right types."""
    if meta_arr.shape != () or meta_arr.dtype.kind != "U":
        raise located(p, "array 'meta' must be a JSON string")
    try:
        meta = json.loads(str(meta_arr))
        too_deep = _depth(meta) > _META_DEPTH
    except json.JSONDecodeError as exc:
        raise located(p, f"meta is not valid JSON ({exc.msg} at char {exc.pos})") from None
    except RecursionError:                           # deeper than the parser's stack
        too_deep = True
    if too_deep:
        raise located(p, f"meta must be nested at most {_META_DEPTH} levels deep (it is a JSON "
                         f"object of names and values)")
    if not isinstance(meta, dict):
        raise located(p, "meta must be a JSON object")
    if meta.get("schema") != SCHEMA:
        raise located(p, f"meta.schema must be {SCHEMA!r}, not {meta.get('schema')!r}")
    missing = [k for k in _META_REQUIRED if k not in meta]
    if missing:
        raise located(p, f"meta lacks {', '.join(missing)}")
    for key in ("a_format", "b_format", "producer"):
        if not isinstance(meta[key], str):
            raise located(p, f"meta.{key} must be a string, not {meta[key]!r}")
    if meta["block"] is not None and (isinstance(meta["block"], bool)
                                      or not isinstance(meta["block"], int)):
        raise located(p, f"meta.block must be null or an integer, not {meta['block']!r}")
    return meta


def from_arrays(arrays: dict[str, Any], source: str | None = None) -> VectorSet:
    """Build a vector set from its named arrays (as an ``.npz`` holds them).

    ``source`` names where they came from in error messages.
    """
    p = source
    arrays = dict(arrays)
    unknown = sorted(set(arrays) - set(_ARRAYS))
    if unknown:
        raise located(p, f"unknown array(s) {', '.join(map(repr, unknown))}; "
                         f"{SCHEMA} allows {', '.join(_ARRAYS)}")
    # NpzFile hands back raw bytes for a member that lacks the .npy header.
    raw = sorted(name for name, arr in arrays.items() if not isinstance(arr, np.ndarray))
    if raw:
        raise located(p, f"member(s) {', '.join(map(repr, raw))} are not .npy arrays; {_HINT}")
    for name in ("meta", "a", "b"):
        if name not in arrays:
            raise located(p, f"array {name!r} is missing")
    meta = _read_meta(arrays.pop("meta"), p)
    known = set(_META_REQUIRED) | {"c_format", "d_format"}
    try:
        return VectorSet(
            a=arrays["a"], b=arrays["b"], a_format=meta["a_format"], b_format=meta["b_format"],
            c=arrays.get("c"), d=arrays.get("d"), a_scale=arrays.get("a_scale"),
            b_scale=arrays.get("b_scale"), tensor_scale=arrays.get("tensor_scale"),
            scale_format=meta["scale_format"], block=meta["block"],
            c_format=meta.get("c_format", "fp32"), d_format=meta.get("d_format", "fp32"),
            producer=meta["producer"], extra={k: v for k, v in meta.items() if k not in known})
    except VectorFileError as exc:
        raise located(p, str(exc)) from None


def to_arrays(vs: VectorSet) -> dict[str, Any]:
    """The named arrays of a vector set, as :func:`save` writes them."""
    arrays: dict[str, Any] = {"a": vs.a, "b": vs.b, "meta": np.array(json.dumps(vs.meta))}
    for name in ("c", "d", "a_scale", "b_scale", "tensor_scale"):
        if getattr(vs, name) is not None:
            arrays[name] = getattr(vs, name)
    return arrays


def save(vs: VectorSet, path: str | os.PathLike) -> None:
    """Write a vector set atomically (temporary file, then rename; see :mod:`mxsim.output`)."""
    arrays = to_arrays(vs)
    with open_output(path, error=VectorFileError) as fh:
        # Compression pays for small sets; for large ones (results of millions of dots) it
        # costs seconds per write for little gain on near-random bits.
        big = sum(np.asarray(a).nbytes for a in arrays.values()) > _COMPRESS_LIMIT
        (np.savez if big else np.savez_compressed)(fh, **arrays)
