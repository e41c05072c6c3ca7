"""Vector sets: the ``mxsim.vectors/1`` file schema, its validation, and seeded generators.

One ``.npz`` file carries the operands of a batch of GEMMs as codes, their scales, an optional
accumulator ``c`` and an optional result ``d``. The same file feeds the model, the RTL testbench
and the GPU runners, and results come back in it (see ``docs/vectors.md``, field by field).

Files are read with ``allow_pickle=False``; unknown arrays, wrong dtypes, mismatched shapes,
unknown formats and codes outside a format are all rejected with a one-line
:class:`~mxsim.errors.VectorFileError`. Writes go to a temporary file that is renamed into place,
so a failed write never leaves half a file.
"""

from __future__ import annotations

import json
import math
import os
import zipfile
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from . import formats
from .errors import VectorFileError
from .output import open_output

__all__ = [
    "SCHEMA", "ELEMENT_FORMATS", "SCALE_FORMATS", "ACC_FORMATS", "FAMILIES",
    "RANDOM_FAMILIES", "DIRECTED_FAMILIES",
    "LARGE_BYTES", "LARGE_PRODUCTS",
    "VectorSet", "load", "save", "check_size", "npy_header", "from_arrays", "to_arrays", "generate",
    "generate_suite",
]

SCHEMA = "mxsim.vectors/1"
ELEMENT_FORMATS = formats.ELEMENT_FORMATS
SCALE_FORMATS = ("e8m0", "ue4m3", "fp32")
ACC_FORMATS = ("fp32", "fp16", "bf16")
_ARRAYS = ("a", "b", "c", "d", "a_scale", "b_scale", "tensor_scale", "meta")
_COMPRESS_LIMIT = 16 << 20    # bytes of arrays above which a set is written uncompressed
#: A set larger than either is refused by :func:`load` and the generators unless asked
#: (``allow_large=True``, ``--allow-large``): 256 MiB of arrays (generating or running a set
#: takes several times its size in memory), and 2^34 products (dots x K), which bounds the
#: time ``mxsim run`` takes to minutes (an hour at most, for the slowest units).
LARGE_BYTES = 1 << 28
LARGE_PRODUCTS = 1 << 34
_META_REQUIRED = ("schema", "a_format", "b_format", "scale_format", "block", "producer")


def _err(path: str | None, msg: str) -> VectorFileError:
    return VectorFileError(f"{path}: {msg}" if path else msg)


@dataclass
class VectorSet:
    """Operands (and optionally results) of a batch of block-scaled GEMMs, as codes.

    ``a`` is ``(..., M, K)`` and ``b`` is ``(..., K, N)``, one code per ``np.uint8``; ``c`` and
    ``d`` are ``(..., M, N)`` bit patterns of ``c_format``/``d_format`` (``np.uint32`` for fp32,
    ``np.uint16`` for fp16/bf16). ``a_scale``/``b_scale`` are E8M0/UE4M3 codes of shape
    ``(..., M, K/block)``/``(..., K/block, N)``, or float32 FP32 scales whose shape gives the
    granularity: per tensor ``()``, row-wise ``(..., M, 1)``/``(..., 1, N)``, block-wise
    ``(..., M, K/128)``/``(..., K/128, N/128)``. ``tensor_scale`` is the NVFP4 FP32 per-tensor
    factor (a float32 scalar) that multiplies ``A·B`` before ``C`` is added.
    """
    a: npt.NDArray[np.uint8]
    b: npt.NDArray[np.uint8]
    a_format: str = "e4m3"
    b_format: str = "e4m3"
    c: npt.NDArray | None = None
    d: npt.NDArray | None = None
    a_scale: npt.NDArray | None = None
    b_scale: npt.NDArray | None = None
    tensor_scale: npt.NDArray[np.float32] | None = None
    scale_format: str | None = None
    block: int | None = None
    c_format: str = "fp32"
    d_format: str = "fp32"
    producer: str = "mxsim"
    extra: dict[str, Any] = field(default_factory=dict)

    # -- shape ------------------------------------------------------------------------------

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self.a.shape[:-2]

    @property
    def m(self) -> int:
        return self.a.shape[-2]

    @property
    def k(self) -> int:
        return self.a.shape[-1]

    @property
    def n(self) -> int:
        return self.b.shape[-1]

    @property
    def num_dots(self) -> int:
        """Number of dot products (outputs) in the set."""
        return int(np.prod(self.batch_shape, dtype=np.int64)) * self.m * self.n

    @property
    def meta(self) -> dict[str, Any]:
        """The ``meta`` record as written to the file."""
        meta = dict(self.extra)
        meta.update(schema=SCHEMA, a_format=self.a_format, b_format=self.b_format,
                    scale_format=self.scale_format, block=self.block, producer=self.producer,
                    c_format=self.c_format, d_format=self.d_format)
        return meta

    def with_result(self, d: npt.NDArray, *, d_format: str = "fp32", producer: str,
                    **provenance: Any) -> VectorSet:
        """A copy with ``d`` filled in and its producer and provenance recorded."""
        extra = dict(self.extra)
        extra.update(provenance)
        out = replace(self, d=d, d_format=d_format, producer=producer, extra=extra)
        out.validate()
        return out

    def replace(self, **changes: Any) -> VectorSet:
        """A validated copy with the fields in ``changes`` replaced."""
        return replace(self, **changes).validate()

    def subset(self, rows: slice = slice(None), cols: slice = slice(None)) -> VectorSet:
        """The dot products of rows ``rows`` of A and columns ``cols`` of B (every batch entry).

        Scales, C and D are cut to match. Block-wise FP32 scales of B cover 128 columns, so
        ``cols`` must then start and stop on multiples of 128.
        """
        a_scale, b_scale = self.a_scale, self.b_scale
        if self.scale_format is not None:
            if a_scale.ndim >= 2:
                a_scale = a_scale[..., rows, :]
            if b_scale.ndim >= 2:
                if self.scale_format == "fp32" and self.block == 128:
                    start, stop, step = cols.indices(self.n)
                    if start % 128 or stop % 128 or step != 1:
                        raise VectorFileError("Columns of a set with block-wise fp32 scales "
                                              "must be cut on multiples of 128")
                    b_scale = b_scale[..., slice(start // 128, stop // 128)]
                elif b_scale.shape[-1] == self.n:
                    b_scale = b_scale[..., cols]
        out = replace(self, a=self.a[..., rows, :], b=self.b[..., cols],
                      c=None if self.c is None else self.c[..., rows, cols],
                      d=None if self.d is None else self.d[..., rows, cols],
                      a_scale=a_scale, b_scale=b_scale, extra=dict(self.extra))
        return out.validate()

    def inputs_equal(self, other: VectorSet) -> bool:
        """True when both sets hold the same operands, scales, C and formats."""
        if (self.a_format, self.b_format, self.scale_format, self.block, self.c_format) != (
                other.a_format, other.b_format, other.scale_format, other.block, other.c_format):
            return False
        for name in ("a", "b", "c", "a_scale", "b_scale", "tensor_scale"):
            x, y = getattr(self, name), getattr(other, name)
            if (x is None) != (y is None):
                return False
            if x is None:
                continue
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            # Same-width unsigned views compare bits (NaN payloads, -0) and, unlike a uint8
            # view, work for 0-d scalars (tensor_scale) and strided arrays (after subset).
            bits = np.dtype(f"u{x.dtype.itemsize}")
            if not np.array_equal(x.view(bits), y.view(bits)):
                return False
        return True

    # -- validation -------------------------------------------------------------------------

    def validate(self, path: str | None = None) -> VectorSet:
        """Check every rule of ``mxsim.vectors/1``; raise VectorFileError naming the first."""
        def fail(msg: str) -> VectorFileError:
            return _err(path, msg)

        for name, allowed in (("a_format", ELEMENT_FORMATS), ("b_format", ELEMENT_FORMATS)):
            value = getattr(self, name)
            if value not in allowed:
                raise fail(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
        for name in ("c_format", "d_format"):
            if getattr(self, name) not in ACC_FORMATS:
                raise fail(f"{name} must be one of {', '.join(ACC_FORMATS)}, "
                           f"not {getattr(self, name)!r}")
        for name in ("a", "b"):
            arr = getattr(self, name)
            if not isinstance(arr, np.ndarray) or arr.dtype != np.uint8:
                raise fail(f"array {name!r} must be uint8 codes, not "
                           f"{getattr(arr, 'dtype', type(arr).__name__)}")
            if arr.ndim < 2:
                raise fail(f"array {name!r} must have at least 2 dimensions, not shape "
                           f"{arr.shape}")
            fmt = formats.get(getattr(self, f"{name}_format"))
            if arr.size and int(arr.max()) >= (1 << fmt.bits):
                raise fail(f"array {name!r} holds code {int(arr.max()):#x}, outside "
                           f"{fmt.name} ({fmt.bits} bits)")
        if self.a.shape[:-2] != self.b.shape[:-2]:
            raise fail(f"batch dimensions of a {self.a.shape[:-2]} and b {self.b.shape[:-2]} "
                       f"differ")
        if self.a.shape[-1] != self.b.shape[-2]:
            raise fail(f"K of a ({self.a.shape[-1]}) and b ({self.b.shape[-2]}) differ: a is "
                       f"(..., M, K) and b is (..., K, N)")
        if min(self.m, self.n, self.k) == 0:
            raise fail(f"M, N and K must be at least 1, not {self.m}, {self.n}, {self.k}")
        if 0 in self.batch_shape:
            raise fail(f"batch dimensions must be at least 1, not {self.batch_shape}: the set "
                       f"holds no dot product")
        out_shape = self.batch_shape + (self.m, self.n)
        for name, fmt_name in (("c", self.c_format), ("d", self.d_format)):
            arr = getattr(self, name)
            if arr is None:
                continue
            want = formats.get(fmt_name).code_dtype
            if not isinstance(arr, np.ndarray) or arr.dtype != want:
                raise fail(f"array {name!r} must be {want} bit patterns of {fmt_name}, not "
                           f"{getattr(arr, 'dtype', type(arr).__name__)}")
            if arr.shape != out_shape:
                raise fail(f"array {name!r} must have shape {out_shape}, not {arr.shape}")
        self._validate_scales(fail)
        return self

    def _validate_scales(self, fail) -> None:
        sf, block = self.scale_format, self.block
        has = self.a_scale is not None, self.b_scale is not None
        if sf is None:
            if any(has) or block is not None:
                raise fail("scales or block given but scale_format is null")
        elif sf not in SCALE_FORMATS:
            raise fail(f"scale_format must be null or one of {', '.join(SCALE_FORMATS)}, "
                       f"not {sf!r}")
        elif not all(has):
            raise fail(f"scale_format is {sf} but array "
                       f"{'a_scale' if not has[0] else 'b_scale'!r} is missing")
        if self.tensor_scale is not None:
            ts = self.tensor_scale
            if not isinstance(ts, np.ndarray) or ts.dtype != np.float32 or ts.shape != ():
                raise fail("array 'tensor_scale' must be a float32 scalar")
            if sf != "ue4m3":
                raise fail("tensor_scale is the NVFP4 per-tensor scale and needs scale_format "
                           "ue4m3")
        if sf is None:
            return
        bt, m, n, k = self.batch_shape, self.m, self.n, self.k
        if sf in ("e8m0", "ue4m3"):
            if block not in (16, 32):
                raise fail(f"block must be 16 or 32 for {sf} scales, not {block!r}")
            if k % block:
                raise fail(f"K ({k}) must be a multiple of the block ({block})")
            for name, want in (("a_scale", bt + (m, k // block)),
                               ("b_scale", bt + (k // block, n))):
                arr = getattr(self, name)
                if not isinstance(arr, np.ndarray) or arr.dtype != np.uint8:
                    raise fail(f"array {name!r} must be uint8 {sf} codes, not "
                               f"{getattr(arr, 'dtype', type(arr).__name__)}")
                if arr.shape != want:
                    raise fail(f"array {name!r} must have shape {want} for block {block}, "
                               f"not {arr.shape}")
            return
        # FP32 scales: the shape gives the granularity.
        for name in ("a_scale", "b_scale"):
            arr = getattr(self, name)
            if not isinstance(arr, np.ndarray) or arr.dtype != np.float32:
                raise fail(f"array {name!r} must be float32 for fp32 scales, not "
                           f"{getattr(arr, 'dtype', type(arr).__name__)}")
        if block not in (None, 128):
            raise fail(f"block must be null or 128 for fp32 scales, not {block!r}")
        if block == 128:
            if k % 128 or n % 128:
                raise fail(f"block-wise fp32 scales need K and N multiples of 128, not "
                           f"K={k}, N={n}")
            shapes = {"a_scale": [bt + (m, k // 128)], "b_scale": [bt + (k // 128, n // 128)]}
        else:
            shapes = {"a_scale": [(), bt + (m, 1)], "b_scale": [(), bt + (1, n)]}
        for name, wants in shapes.items():
            arr = getattr(self, name)
            if arr.shape not in wants:
                raise fail(f"array {name!r} must have shape "
                           f"{' or '.join(map(str, wants))} for fp32 scales with block "
                           f"{block}, not {arr.shape}")

    # -- scale access -----------------------------------------------------------------------

    def scale_values(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None:
        """Exact scale values per element: ``(..., M, K)`` for A and ``(..., K, N)`` for B."""
        if self.scale_format is None:
            return None
        a_s, b_s = self.a_scale, self.b_scale
        k, m, n = self.k, self.m, self.n
        if self.scale_format in ("e8m0", "ue4m3"):
            f = formats.get(self.scale_format)
            av = np.repeat(f.decode(a_s), self.block, axis=-1)
            bv = np.repeat(f.decode(b_s), self.block, axis=-2)
            return av, bv
        av = a_s.astype(np.float64)
        bv = b_s.astype(np.float64)
        if self.block == 128:
            av = np.repeat(av, 128, axis=-1)
            bv = np.repeat(np.repeat(bv, 128, axis=-2), 128, axis=-1)
        shape_a = self.batch_shape + (m, k)
        shape_b = self.batch_shape + (k, n)
        return np.broadcast_to(av, shape_a), np.broadcast_to(bv, shape_b)


# -- file I/O -------------------------------------------------------------------------------

def check_size(nbytes: int, products: int, allow_large: bool = False,
               source: str | None = None) -> None:
    """Refuse a set over :data:`LARGE_BYTES` of arrays or :data:`LARGE_PRODUCTS` products
    (dots x K) unless ``allow_large``; ``source`` names the set in the message."""
    if allow_large:
        return
    what = (f"{nbytes:,} bytes of arrays, above the limit of {LARGE_BYTES:,}"
            if nbytes > LARGE_BYTES else
            f"{products:,} products (dots x K), above the limit of {LARGE_PRODUCTS:,}"
            if products > LARGE_PRODUCTS else None)
    if what:
        subject = "the set holds" if source else "The set would hold"
        raise _err(source, f"{subject} {what} (see 'Size limits' in docs/vectors.md); pass "
                           f"--allow-large (allow_large=True) if you mean it")


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
    hint = "vector sets are written by `mxsim vectors gen` or `mxsim run`"
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
        raise _err(p, f"unknown array(s) {', '.join(map(repr, unknown))}; "
                      f"{SCHEMA} allows {', '.join(_ARRAYS)}")
    raw = sorted(k for k, h in heads.items() if h is None)
    if raw:
        raise _err(p, f"member(s) {', '.join(map(repr, raw))} are not .npy arrays; {hint}")
    if any(dtype.hasobject for _, dtype in heads.values()):
        raise _err(p, f"unreadable npz (Object arrays cannot be loaded when "
                      f"allow_pickle=False); {hint}")
    nbytes = sum(math.prod(shape) * dtype.itemsize for shape, dtype in heads.values())
    products = 0
    if "a" in heads and "b" in heads and min(len(heads["a"][0]), len(heads["b"][0])) >= 2:
        a, b = heads["a"][0], heads["b"][0]
        products = math.prod(a) * b[-1]             # batch x M x K x N
    check_size(nbytes, products, allow_large, p)


def load(path: str | os.PathLike, *, allow_large: bool = False) -> VectorSet:
    """Read and validate a vector-set file.

    The shapes and dtypes in the members' ``.npy`` headers are checked before any array is
    read; a set over the size limits (:func:`check_size`) is refused unless ``allow_large``.
    """
    p = str(path)
    if not Path(p).is_file():
        raise _err(p, "no such file")
    hint = "vector sets are written by `mxsim vectors gen` or `mxsim run`"
    try:
        # Our own handle: np.load leaks the one it opens when the zip directory is unreadable.
        with open(p, "rb") as fh:
            z = np.load(fh, allow_pickle=False)
            if not isinstance(z, np.lib.npyio.NpzFile):     # a bare .npy array
                raise _err(p, f"not an .npz file; {hint}")
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
        raise _err(p, f"{kind}; {hint}") from None
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


def from_arrays(arrays: dict[str, Any], source: str | None = None) -> VectorSet:
    """Build and validate a vector set from its named arrays (as an ``.npz`` holds them).

    ``source`` names where they came from in error messages.
    """
    p = source
    hint = "vector sets are written by `mxsim vectors gen` or `mxsim run`"
    arrays = dict(arrays)
    unknown = sorted(set(arrays) - set(_ARRAYS))
    if unknown:
        raise _err(p, f"unknown array(s) {', '.join(map(repr, unknown))}; "
                      f"{SCHEMA} allows {', '.join(_ARRAYS)}")
    # NpzFile hands back raw bytes for a member that lacks the .npy header.
    raw = sorted(name for name, arr in arrays.items() if not isinstance(arr, np.ndarray))
    if raw:
        raise _err(p, f"member(s) {', '.join(map(repr, raw))} are not .npy arrays; {hint}")
    for name in ("meta", "a", "b"):
        if name not in arrays:
            raise _err(p, f"array {name!r} is missing")
    meta_arr = arrays.pop("meta")
    if meta_arr.shape != () or meta_arr.dtype.kind != "U":
        raise _err(p, "array 'meta' must be a JSON string")
    try:
        meta = json.loads(str(meta_arr))
        too_deep = _depth(meta) > _META_DEPTH
    except json.JSONDecodeError as exc:
        raise _err(p, f"meta is not valid JSON ({exc.msg} at char {exc.pos})") from None
    except RecursionError:                           # deeper than the parser's stack
        too_deep = True
    if too_deep:
        raise _err(p, f"meta must be nested at most {_META_DEPTH} levels deep (it is a JSON "
                      f"object of names and values)")
    if not isinstance(meta, dict):
        raise _err(p, "meta must be a JSON object")
    if meta.get("schema") != SCHEMA:
        raise _err(p, f"meta.schema must be {SCHEMA!r}, not {meta.get('schema')!r}")
    missing = [k for k in _META_REQUIRED if k not in meta]
    if missing:
        raise _err(p, f"meta lacks {', '.join(missing)}")
    for key in ("a_format", "b_format", "producer"):
        if not isinstance(meta[key], str):
            raise _err(p, f"meta.{key} must be a string, not {meta[key]!r}")
    if meta["block"] is not None and (isinstance(meta["block"], bool)
                                      or not isinstance(meta["block"], int)):
        raise _err(p, f"meta.block must be null or an integer, not {meta['block']!r}")
    known = set(_META_REQUIRED) | {"c_format", "d_format"}
    vs = VectorSet(
        a=arrays["a"], b=arrays["b"], a_format=meta["a_format"], b_format=meta["b_format"],
        c=arrays.get("c"), d=arrays.get("d"), a_scale=arrays.get("a_scale"),
        b_scale=arrays.get("b_scale"), tensor_scale=arrays.get("tensor_scale"),
        scale_format=meta["scale_format"], block=meta["block"],
        c_format=meta.get("c_format", "fp32"), d_format=meta.get("d_format", "fp32"),
        producer=meta["producer"], extra={k: v for k, v in meta.items() if k not in known})
    return vs.validate(p)


def to_arrays(vs: VectorSet, source: str | None = None) -> dict[str, Any]:
    """The named arrays of a validated vector set, as :func:`save` writes them."""
    vs.validate(source)
    arrays: dict[str, Any] = {"a": vs.a, "b": vs.b, "meta": np.array(json.dumps(vs.meta))}
    for name in ("c", "d", "a_scale", "b_scale", "tensor_scale"):
        if getattr(vs, name) is not None:
            arrays[name] = getattr(vs, name)
    return arrays


def save(vs: VectorSet, path: str | os.PathLike) -> None:
    """Validate and write a vector set atomically (temporary file, then rename; see
    :mod:`mxsim.output`)."""
    p = Path(path)
    arrays = to_arrays(vs, str(p))
    with open_output(path, error=VectorFileError) as fh:
        # Compression pays for small sets; for large ones (results of millions of dots) it
        # costs seconds per write for little gain on near-random bits.
        big = sum(np.asarray(a).nbytes for a in arrays.values()) > _COMPRESS_LIMIT
        (np.savez if big else np.savez_compressed)(fh, **arrays)


# -- generators -----------------------------------------------------------------------------

RANDOM_FAMILIES = ("uniform", "normal", "llm")
DIRECTED_FAMILIES = ("zeros", "max", "subnormal", "specials", "nan-scale", "scale-extremes",
                     "cancellation", "one-large", "c-dominant", "c-negligible")
FAMILIES = RANDOM_FAMILIES + DIRECTED_FAMILIES


def _round_to_format(fmt: formats.Format, x: npt.NDArray[np.float64]) -> npt.NDArray[np.uint8]:
    return fmt.encode(x, "rne", saturate=True).astype(np.uint8)


def _finite_codes(fmt: formats.Format) -> npt.NDArray[np.uint8]:
    return fmt.finite_codes().astype(np.uint8)


def _subnormal_codes(fmt: formats.Format) -> npt.NDArray[np.uint8]:
    codes = _finite_codes(fmt)
    cls = fmt.classify(codes)
    sub = codes[cls == formats.Class.SUBNORMAL]
    if fmt.kind == "int":      # MXINT8 has no subnormals: its smallest steps stand in
        sub = codes[np.abs(fmt.decode(codes)) <= 4 / 64]
        sub = sub[sub != 0]
    return sub


def _operand(rng: np.random.Generator, fmt: formats.Format, family: str,
             shape: tuple[int, ...]) -> npt.NDArray[np.uint8]:
    """Element codes of one operand for a family (C and scales are drawn separately)."""
    finite = _finite_codes(fmt)
    if family == "uniform":
        return rng.choice(finite, size=shape)
    if family == "normal":
        return _round_to_format(fmt, rng.standard_normal(shape) * (fmt.max / 8))
    if family == "llm":
        # Heavy-tailed activations: Student-t(3) bulk, a few outlier channels 30x larger.
        x = rng.standard_t(3, size=shape)
        channels = rng.random(shape[-1]) < 0.03
        x = np.where(channels, x * 30, x) * (fmt.max / 200)
        return _round_to_format(fmt, x)
    if family == "zeros":
        zero = _round_to_format(fmt, np.array([0.0, -0.0]))
        return rng.choice(np.unique(zero), size=shape)
    if family == "max":
        mx = np.array([fmt.code_of_max, _round_to_format(fmt, np.array(-fmt.max))[()]], np.uint8)
        return rng.choice(mx, size=shape)
    if family == "subnormal":
        return rng.choice(_subnormal_codes(fmt), size=shape)
    if family == "specials":
        codes = rng.choice(finite, size=shape)
        special = []
        if fmt.has_nan:
            special += [fmt.code_of_nan, fmt.code_of_nan | (1 << fmt.sign_shift)]
        if fmt.has_inf:
            special += [fmt.code_of_inf, fmt.code_of_inf | (1 << fmt.sign_shift)]
        if special:
            hit = rng.random(shape) < 0.02
            codes = np.where(hit, rng.choice(np.array(special, np.uint8), size=shape), codes)
        return codes.astype(np.uint8)
    if family in ("nan-scale", "scale-extremes", "c-dominant", "c-negligible", "cancellation",
                  "one-large"):
        return _round_to_format(fmt, rng.standard_normal(shape) * (fmt.max / 8))
    raise AssertionError(family)


def _c_values(rng: np.random.Generator, family: str, shape: tuple[int, ...],
              typical: float) -> npt.NDArray[np.float64]:
    c = rng.standard_normal(shape) * typical
    if family == "c-dominant":
        c = c * 2.0 ** 30
    elif family == "c-negligible":
        c = c * 2.0 ** -40
    elif family == "zeros":
        c = rng.choice(np.array([0.0, -0.0, 1.0, -1.0]), size=shape)
    elif family == "specials":
        pick = rng.random(shape)
        c = np.where(pick < 0.03, np.nan, c)
        c = np.where((pick >= 0.03) & (pick < 0.06), np.inf, c)
        c = np.where((pick >= 0.06) & (pick < 0.09), -np.inf, c)
    elif family == "subnormal":
        c = np.ldexp(rng.integers(-(1 << 22), 1 << 22, size=shape).astype(np.float64), -149)
    return c


def _scales(rng: np.random.Generator, family: str, scale_format: str, block: int | None,
            batch: tuple[int, ...], m: int, n: int, k: int, granularity: str):
    """(a_scale, b_scale) for a family, in the dtype and shape the schema asks."""
    if scale_format in ("e8m0", "ue4m3"):
        sa_shape, sb_shape = batch + (m, k // block), batch + (k // block, n)
        if scale_format == "e8m0":
            draw = lambda shape: (127 + rng.integers(-8, 9, size=shape)).astype(np.uint8)  # noqa: E731
            extremes = np.array([0x00, 0x01, 0x7F, 0xFD, 0xFE], np.uint8)
            nan = 0xFF
        else:
            f = formats.get("ue4m3")
            positive = f.finite_codes()[1:].astype(np.uint8)     # UE4M3 > 0
            normal = positive[f.classify(positive) == formats.Class.NORMAL]
            draw = lambda shape: rng.choice(normal[(normal >= 0x30) & (normal <= 0x48)],  # noqa: E731
                                            size=shape)
            extremes = np.array([0x00, 0x01, 0x08, 0x7E], np.uint8)
            nan = 0x7F
        sa, sb = draw(sa_shape), draw(sb_shape)
        if family == "scale-extremes":
            sa = rng.choice(extremes, size=sa_shape)
            sb = rng.choice(extremes, size=sb_shape)
        elif family == "nan-scale":
            sa = np.where(rng.random(sa_shape) < 0.1, np.uint8(nan), sa).astype(np.uint8)
            sb = np.where(rng.random(sb_shape) < 0.1, np.uint8(nan), sb).astype(np.uint8)
        return sa, sb
    # FP32 scales.
    if granularity == "tensor":
        sa_shape, sb_shape = (), ()
    elif granularity == "row":
        sa_shape, sb_shape = batch + (m, 1), batch + (1, n)
    else:
        sa_shape, sb_shape = batch + (m, k // 128), batch + (k // 128, n // 128)

    def draw(shape):
        v = np.exp2(rng.uniform(-6, 6, size=shape)) * rng.uniform(1, 2, size=shape)
        if family == "scale-extremes":
            v = np.exp2(rng.choice(np.array([-126.0, -60.0, 0.0, 60.0, 126.0]), size=shape))
        elif family == "nan-scale":
            v = np.where(rng.random(shape) < 0.1, np.nan, v)
        return np.asarray(v, np.float32)
    return draw(sa_shape), draw(sb_shape)


def _set_bytes(entries: int, m: int, n: int, k: int, with_c: bool, c_format: str) -> int:
    """Bytes of A, B and C of a set (scales are at most A's and B's)."""
    return entries * (m * k + k * n + (m * n * (4 if c_format == "fp32" else 2) if with_c
                                       else 0))


def generate(family: str, *, a_format: str = "e4m3", b_format: str | None = None,
             m: int = 16, n: int = 8, k: int = 32, batch: tuple[int, ...] = (),
             scale_format: str | None = None, block: int | None = None,
             scale_granularity: str = "block", with_c: bool = True,
             c_format: str = "fp32", tensor_scale: float | None = None,
             seed: int = 0, allow_large: bool = False) -> VectorSet:
    """A seeded vector set of one generator family.

    Random families: ``uniform`` (uniform over every finite code), ``normal`` (N(0, (max/8)^2)
    rounded to the format), ``llm`` (Student-t(3) activations with 3% outlier channels 30x
    larger). Directed families: ``zeros``, ``max`` (±max finite), ``subnormal`` (subnormal
    codes; MXINT8's smallest steps), ``specials`` (2% NaN/Inf in A and B where the format has
    them, NaN/±Inf in C), ``nan-scale`` (10% NaN scales), ``scale-extremes`` (E8M0
    0x00/0x01/0x7F/0xFD/0xFE, UE4M3 0/min/max, FP32 2^±126), ``cancellation`` (B's second
    half of K negates its first half against the same A values), ``one-large`` (one max-size
    term among tiny ones), ``c-dominant`` and ``c-negligible`` (C 2^30 times larger or 2^40
    times smaller than a typical dot). The same arguments and seed give the same codes.
    ``scale_granularity`` picks FP32 scale shapes: ``tensor``, ``row`` or ``block`` (128).
    ``tensor_scale`` (NVFP4, UE4M3 scales only) is stored as the float32 nearest to it.
    ``c_format`` (fp32, fp16 or bf16) is C's format: its values are rounded to it (RNE).
    A set over the size limits (:func:`check_size`) is refused unless ``allow_large``.
    """
    if family not in FAMILIES:
        raise VectorFileError(f"Family must be one of {', '.join(FAMILIES)}, not {family!r}")
    b_format = b_format or a_format
    fa, fb = formats.get(a_format), formats.get(b_format)
    for name, f in (("a_format", fa), ("b_format", fb)):
        if f.name not in ELEMENT_FORMATS:
            raise VectorFileError(f"{name} must be one of {', '.join(ELEMENT_FORMATS)}, "
                                  f"not {f.name!r}")
    for v in (m, n, k, *batch):
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise VectorFileError(f"M, N, K and batch must be integers, not {v!r}")
    if min(m, n, k) < 1:
        raise VectorFileError(f"M, N and K must be at least 1, not {m}, {n}, {k}")
    if min(batch, default=1) < 1:
        raise VectorFileError(f"Batch dimensions must be at least 1, not {tuple(batch)}")
    entries = math.prod(batch)
    check_size(_set_bytes(entries, m, n, k, with_c, c_format), entries * m * n * k,
               allow_large)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise VectorFileError(f"Seed must be a non-negative integer, not {seed!r}")
    if family == "nan-scale" and scale_format is None:
        raise VectorFileError("Family 'nan-scale' needs block scales; pass a scale format")
    if scale_format == "fp32":
        if scale_granularity not in ("tensor", "row", "block"):
            raise VectorFileError(f"Scale granularity must be tensor, row or block, not "
                                  f"{scale_granularity!r}")
        implied = 128 if scale_granularity == "block" else None
        if block not in (None, implied):
            kind = {"tensor": "per-tensor", "row": "row-wise", "block": "block-wise"}
            raise VectorFileError(f"Block must be {implied or 'None'} for "
                                  f"{kind[scale_granularity]} fp32 scales, not {block!r}")
        block = implied
    elif scale_format is not None and block is None:
        block = 16 if scale_format == "ue4m3" else 32
    if scale_format in ("e8m0", "ue4m3") and block not in (16, 32):
        raise VectorFileError(f"Block must be 16 or 32 for {scale_format} scales, "
                              f"not {block!r}")
    batch = tuple(batch)
    shape_a, shape_b = batch + (m, k), batch + (k, n)
    rng = np.random.default_rng([seed, FAMILIES.index(family)])
    a = _operand(rng, fa, family, shape_a)
    b = _operand(rng, fb, family, shape_b)
    if family == "cancellation":
        if k % 2:
            raise VectorFileError("Family 'cancellation' needs an even K")
        h = k // 2
        a = a.copy()
        b = b.copy()
        a[..., h:] = a[..., :h]
        neg_b = fb.encode(-fb.decode(b[..., :h, :]), "rne").astype(np.uint8)
        b[..., h:, :] = neg_b
        # A few terms survive so the exact result is small but not always zero.
        keep = rng.random(shape_b) < 0.05
        b = np.where(keep, _operand(rng, fb, "normal", shape_b), b).astype(np.uint8)
    elif family == "one-large":
        # Tiny terms: about 4 smallest steps, but never above max/16, so that narrow formats
        # (E2M1 spans only 0.5..6) still have one term that stands out.
        def tiny(f: formats.Format, shape: tuple[int, ...]) -> npt.NDArray[np.uint8]:
            x = rng.standard_normal(shape) * f.min_subnormal * 4
            return f.encode(np.clip(x, -f.max / 16, f.max / 16), "rne")

        tiny_a, tiny_b = tiny(fa, shape_a), tiny(fb, shape_b)
        a, b = tiny_a.astype(np.uint8), tiny_b.astype(np.uint8)
        idx = rng.integers(0, k, size=batch + (m,))
        big_a = _round_to_format(fa, np.full(shape_a[:-1], fa.max * 0.75))
        np.put_along_axis(a, idx[..., None], big_a[..., None], axis=-1)
        idx_b = rng.integers(0, k, size=batch + (n,))
        big_b = _round_to_format(fb, np.full(batch + (n,), -fb.max * 0.75))
        np.put_along_axis(b, idx_b[..., None, :], big_b[..., None, :], axis=-2)
    a_scale = b_scale = None
    if scale_format is not None:
        if scale_format not in SCALE_FORMATS:
            raise VectorFileError(f"Scale format must be one of {', '.join(SCALE_FORMATS)}, "
                                  f"not {scale_format!r}")
        if scale_format != "fp32" and k % block:
            raise VectorFileError(f"K ({k}) must be a multiple of the block ({block})")
        if scale_format == "fp32" and block == 128 and (k % 128 or n % 128):
            raise VectorFileError(f"Block-wise fp32 scales need K and N multiples of 128, "
                                  f"not K={k}, N={n}")
        a_scale, b_scale = _scales(rng, family, scale_format, block, batch, m, n, k,
                                   scale_granularity)
    if c_format not in ACC_FORMATS:
        raise VectorFileError(f"C format must be one of {', '.join(ACC_FORMATS)}, not "
                              f"{c_format!r}")
    c = None
    if with_c:
        typical = float(np.sqrt(k)) * (fa.max / 8) * (fb.max / 8)
        cv = _c_values(rng, family, batch + (m, n), typical)
        c = cv.astype(np.float32).view(np.uint32)
        if c_format != "fp32":
            c = formats.get(c_format).encode(c.view(np.float32), "rne", saturate=False)
    ts = None if tensor_scale is None else np.array(tensor_scale, np.float32)
    vs = VectorSet(a=np.ascontiguousarray(a, np.uint8), b=np.ascontiguousarray(b, np.uint8),
                   a_format=fa.name, b_format=fb.name, c=c, a_scale=a_scale, b_scale=b_scale,
                   tensor_scale=ts, scale_format=scale_format, block=block, c_format=c_format,
                   extra={"family": family, "seed": int(seed)})
    return vs.validate()


def generate_suite(families: tuple[str, ...] | list[str] = FAMILIES, *, count: int = 1,
                   seed: int = 0, skip_inapplicable: bool = True, allow_large: bool = False,
                   **kwargs: Any) -> VectorSet:
    """Several families in one set: batch entry ``i`` is family ``families[i // count]``.

    With ``skip_inapplicable``, families that cannot apply to the options are left out
    (``nan-scale`` without a scale format, ``cancellation`` with an odd K); without it they
    raise, as :func:`generate` does. ``meta['families']`` lists the family of every batch entry.
    The whole set must be within the size limits unless ``allow_large``.
    """
    kwargs.pop("batch", None)
    if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 1:
        raise VectorFileError(f"Count must be a positive integer, not {count!r}")
    if skip_inapplicable:
        if kwargs.get("scale_format") is None:
            families = [f for f in families if f != "nan-scale"]
        if kwargs.get("k", 32) % 2:
            families = [f for f in families if f != "cancellation"]
    if not families:
        raise VectorFileError("No generator family applies to these options")
    m, n, k = kwargs.get("m", 16), kwargs.get("n", 8), kwargs.get("k", 32)
    if all(isinstance(v, int | np.integer) and v >= 1 for v in (m, n, k)):
        entries = count * len(families)
        check_size(_set_bytes(entries, m, n, k, kwargs.get("with_c", True),
                              kwargs.get("c_format", "fp32")), entries * m * n * k, allow_large)
    parts = [generate(f, batch=(count,), seed=seed, allow_large=True, **kwargs)
             for f in families]
    first = parts[0]

    def cat(name: str):
        arrs = [getattr(p, name) for p in parts]
        if arrs[0] is None or arrs[0].ndim == 0:
            return arrs[0]     # per-tensor scales and tensor_scale: one value for the set
        return np.concatenate(arrs, axis=0)

    tensor_scale_like = first.a_scale is not None and first.a_scale.ndim == 0
    if tensor_scale_like:
        raise VectorFileError("Per-tensor fp32 scales cannot be mixed across families; "
                              "generate one family at a time")
    return replace(first, a=cat("a"), b=cat("b"), c=cat("c"), a_scale=cat("a_scale"),
                   b_scale=cat("b_scale"),
                   extra={"families": [f for f in families for _ in range(count)],
                          "seed": int(seed)}).validate()
