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
import stat
import zipfile
import zlib
from typing import Any, BinaryIO

import numpy as np

from ..errors import MxsimError, VectorFileError
from ..output import open_output
from .schema import SCHEMA, VectorSet, check_size, located

__all__ = ["load", "save", "from_arrays", "to_arrays", "npy_header", "open_input"]

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


def open_input(path: str | os.PathLike, error: type[MxsimError] = VectorFileError) -> BinaryIO:
    """``path`` opened for reading in binary, or a one-line ``error`` naming it: ``no such
    file`` for a missing path or one that is not a regular file (a FIFO would block, a device
    never end), ``cannot read (Permission denied)`` and the like for one the user may not
    read."""
    p = os.fspath(path)
    try:
        st = os.stat(p)
    except (FileNotFoundError, NotADirectoryError):
        raise error(f"{p}: no such file") from None
    except OSError as exc:                       # a folder the user may not search, a loop
        raise error(f"{p}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{p}: no such file")
    try:
        return open(p, "rb")
    except OSError as exc:
        raise error(f"{p}: cannot read ({exc.strerror or exc})") from None


def _members(p: str, zf: zipfile.ZipFile, allow_large: bool) -> dict[str, zipfile.ZipInfo]:
    """The member that holds each array of an .npz, checked from its ``.npy`` header before
    any array is read, so that a small file cannot declare a huge array and have it allocated.

    Every member is its own array: two members that name one array (``a`` and ``a.npy``, or
    ``meta.npy`` twice) are refused, since a reader would pick one of them and a check another;
    the sizes counted are those of the very members :func:`load` reads.
    """
    members: dict[str, zipfile.ZipInfo] = {}
    for info in zf.infolist():
        key = info.filename.removesuffix(".npy")
        if key in members:
            first = members[key].filename
            what = (f"member {first!r} is stored twice" if first == info.filename else
                    f"members {first!r} and {info.filename!r} both hold array {key!r}")
            raise located(p, f"{what}; each array must be stored once ({_HINT})")
        members[key] = info
    unknown = sorted(k for k in members if k not in _ARRAYS)
    if unknown:
        raise located(p, f"unknown array(s) {', '.join(map(repr, unknown))}; "
                         f"{SCHEMA} allows {', '.join(_ARRAYS)}")
    heads, room = {}, {}
    for key, info in members.items():
        with zf.open(info) as f:
            heads[key] = npy_header(f)
            room[key] = info.file_size - f.tell()      # bytes of the member after its header
    raw = sorted(k for k, h in heads.items() if h is None)
    if raw:
        raise located(p, f"member(s) {', '.join(map(repr, raw))} are not .npy arrays; {_HINT}")
    if any(dtype.hasobject for _, dtype in heads.values()):
        raise located(p, f"unreadable npz (Object arrays cannot be loaded when "
                         f"allow_pickle=False); {_HINT}")
    for key, (shape, _) in heads.items():
        if any(d < 0 for d in shape):
            raise located(p, f"array {key!r} declares shape {shape}, with a negative "
                             f"dimension; {_HINT}")
    nbytes = sum(math.prod(shape) * dtype.itemsize for shape, dtype in heads.values())
    products = 0
    if "a" in heads and "b" in heads and min(len(heads["a"][0]), len(heads["b"][0])) >= 2:
        a, b = heads["a"][0], heads["b"][0]
        products = math.prod(a) * b[-1]             # batch x M x K x N
    check_size(nbytes, products, allow_large, p)
    for key, (shape, dtype) in heads.items():
        # A header may declare any shape (even with --allow-large): the data after it must
        # hold that array before the array is allocated.
        if math.prod(shape) * dtype.itemsize > room[key]:
            raise located(p, f"array {key!r} declares shape {shape} of {dtype} "
                             f"({math.prod(shape) * dtype.itemsize:,} bytes), but its member "
                             f"holds {max(room[key], 0):,} bytes of data; {_HINT}")
    return members


#: The first bytes of a zip file (a local file header, or the end record of an empty zip), as
#: numpy's loader tells an .npz from an .npy.
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


def load(path: str | os.PathLike, *, allow_large: bool = False) -> VectorSet:
    """Read a vector-set file and build its (checked) VectorSet.

    The members' names, and the shapes and dtypes in their ``.npy`` headers, are checked
    before any array is read (see :func:`_members`); a set over the size limits
    (:func:`check_size`) is refused unless ``allow_large``. Arrays are read with
    ``allow_pickle=False``.
    """
    p = str(path)
    with open_input(p) as fh:
        try:
            if fh.read(4) not in _ZIP_MAGIC:
                raise located(p, f"not an .npz file; {_HINT}")
            fh.seek(0)
            with zipfile.ZipFile(fh) as zf:
                members = _members(p, zf, allow_large)
                arrays = {}
                for key, info in members.items():
                    with zf.open(info) as f:
                        arrays[key] = np.lib.format.read_array(f, allow_pickle=False)
        # zlib.error: a member whose compressed stream is corrupt; NotImplementedError and
        # RuntimeError: zipfile's "compression method not supported" and "encrypted".
        except (zipfile.BadZipFile, zlib.error, ValueError, OSError, EOFError,
                NotImplementedError, RuntimeError) as exc:
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
