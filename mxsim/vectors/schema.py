"""The ``mxsim.vectors/1`` schema: :class:`VectorSet`, checked once, when it is built.

A VectorSet is frozen and every rule of the schema is checked in ``__post_init__``, so a set
that exists is valid: engines, the RTL testbenches and :func:`~mxsim.vectors.save` take it as
it is. Variants come from :meth:`VectorSet.replace` (checked again), :meth:`~VectorSet.subset`,
:meth:`~VectorSet.take_dots`, :meth:`~VectorSet.flat` and :meth:`~VectorSet.with_result`.
The arrays themselves are numpy arrays and are not copied: writing into them in place is not
checked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import formats
from ..errors import VectorFileError

__all__ = ["SCHEMA", "ELEMENT_FORMATS", "OPERAND_FORMATS", "SCALE_FORMATS", "ACC_FORMATS",
           "LARGE_BYTES", "LARGE_PRODUCTS", "VectorSet", "check_size", "located"]

SCHEMA = "mxsim.vectors/1"
ELEMENT_FORMATS = formats.ELEMENT_FORMATS
OPERAND_FORMATS = formats.OPERAND_FORMATS
SCALE_FORMATS = ("e8m0", "ue4m3", "fp32")
ACC_FORMATS = ("fp32", "fp16", "bf16")
#: A set larger than either is refused by :func:`load` and the generators unless asked
#: (``allow_large=True``, ``--allow-large``): 256 MiB of arrays (generating or running a set
#: takes several times its size in memory), and 2^34 products (dots x K), which bounds the
#: time ``mxsim run`` takes to minutes (an hour at most, for the slowest units).
LARGE_BYTES = 1 << 28
LARGE_PRODUCTS = 1 << 34


def located(source: str | None, msg: str) -> VectorFileError:
    """A VectorFileError whose message names ``source`` (a file) first, when there is one."""
    return VectorFileError(f"{source}: {msg}" if source else msg)


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
        raise located(source, f"{subject} {what} (see 'Size limits' in docs/vectors.md); pass "
                              f"--allow-large (allow_large=True) if you mean it")


@dataclass(frozen=True)
class VectorSet:
    """Operands (and optionally results) of a batch of block-scaled GEMMs, as codes.

    ``a`` is ``(..., M, K)`` and ``b`` is ``(..., K, N)``, one code per element in its format's
    code dtype (``np.uint8`` for the MX element formats, ``np.uint16`` for fp16/bf16,
    ``np.uint32`` for tf32, whose code is the top 19 bits of the FP32 pattern); ``c`` and
    ``d`` are ``(..., M, N)`` bit patterns of ``c_format``/``d_format`` (``np.uint32`` for fp32,
    ``np.uint16`` for fp16/bf16). ``a_scale``/``b_scale`` are E8M0/UE4M3 codes of shape
    ``(..., M, K/block)``/``(..., K/block, N)``, or float32 FP32 scales whose shape gives the
    granularity: per tensor ``()``, row-wise ``(..., M, 1)``/``(..., 1, N)``, block-wise
    ``(..., M, K/128)``/``(..., K/128, N/128)``; scales go with MX element formats only.
    ``tensor_scale`` is the NVFP4 FP32 per-tensor factor (a float32 scalar) that multiplies
    ``A·B`` before ``C`` is added. ``extra`` holds the other ``meta`` entries (provenance), as
    a read-only copy of the mapping given.

    Raises VectorFileError, naming the first rule of ``mxsim.vectors/1`` broken, when built
    from fields that break one.
    """
    a: npt.NDArray[np.unsignedinteger]
    b: npt.NDArray[np.unsignedinteger]
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
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))
        _check_formats(self)
        _check_operands(self)
        for name, fmt_name in (("c", self.c_format), ("d", self.d_format)):
            _check_result(name, getattr(self, name), fmt_name, self.out_shape)
        _check_scale_format(self)
        if self.scale_format in ("e8m0", "ue4m3"):
            _check_block_scales(self)
        elif self.scale_format == "fp32":
            _check_fp32_scales(self)

    # A mappingproxy cannot be pickled: pickle (and copy) the plain dict it wraps.
    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "extra": dict(self.extra)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, extra=MappingProxyType(dict(state["extra"])))

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
    def out_shape(self) -> tuple[int, ...]:
        """Shape of C and D: ``batch_shape + (M, N)``."""
        return self.batch_shape + (self.m, self.n)

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

    # -- variants ---------------------------------------------------------------------------

    def replace(self, **changes: Any) -> VectorSet:
        """A copy with the fields in ``changes`` replaced, checked as a new set is."""
        return dataclasses.replace(self, **changes)

    def with_result(self, d: npt.NDArray, *, d_format: str = "fp32", producer: str,
                    **provenance: Any) -> VectorSet:
        """A copy with ``d`` filled in and its producer and provenance (``extra`` entries)
        recorded.

        Only ``d`` and ``d_format`` are checked: the rest is this set's, checked when it was
        built.
        """
        _check_acc_format("d_format", d_format)
        _check_result("d", d, d_format, self.out_shape)
        return self._derived(d=d, d_format=d_format, producer=producer,
                             extra=MappingProxyType({**self.extra, **provenance}))

    def flat(self) -> VectorSet:
        """The same dot products, in the same order, with the batch dimensions folded into
        one: ``a`` is ``(B, M, K)``, ``b`` ``(B, K, N)``, C and D ``(B, M, N)`` and the scales
        to match (``B`` is the product of ``batch_shape``, 1 for a set without one). Arrays
        are reshaped (views where numpy can); per-tensor scales and ``tensor_scale`` stay
        scalars."""
        batch = len(self.batch_shape)
        nb = int(np.prod(self.batch_shape, dtype=np.int64))

        def fold(x: npt.NDArray | None) -> npt.NDArray | None:
            return x if x is None or x.ndim == 0 else x.reshape((nb,) + x.shape[batch:])

        return self._derived(**{name: fold(getattr(self, name))
                                for name in ("a", "b", "c", "d", "a_scale", "b_scale")})

    def take_dots(self, dots: Sequence[int] | slice | npt.ArrayLike) -> VectorSet:
        """The dot products ``dots`` as a set of their own: batch entry ``i`` is the 1 x 1
        dot product ``dots[i]``, with its row of A, column of B, and its C, D and scales.

        ``dots`` are flat indices in batch, row, column order (as ``d.reshape(-1)`` numbers
        the outputs), or a slice of them (``slice(0, n)``: the first ``n``). ``extra`` becomes
        ``{"dots": [...]}``; the formats, producer and ``tensor_scale`` are kept. Raises
        VectorFileError for an index outside the set, for no index, and for block-wise fp32
        scales (a scale of B covers 128 columns, so one column cannot be cut out).
        """
        total = self.num_dots
        idx = (np.arange(total)[dots] if isinstance(dots, slice)
               else np.asarray(dots, dtype=np.int64).reshape(-1))
        if idx.size == 0:
            raise VectorFileError("take_dots needs at least one dot index")
        if idx.min() < 0 or idx.max() >= total:
            bad = int(idx[(idx < 0) | (idx >= total)][0])
            raise VectorFileError(f"Dot indices must be from 0 to {total - 1}, not {bad}")
        if self.scale_format == "fp32" and self.block == 128:
            raise VectorFileError("Dots of a set with block-wise fp32 scales cannot be taken "
                                  "one by one (a scale of B covers 128 columns)")
        f = self.flat()
        t, i, j = idx // (self.m * self.n), idx // self.n % self.m, idx % self.n

        def row(x: npt.NDArray | None) -> npt.NDArray | None:        # (..., M, X) -> (D, 1, X)
            return x if x is None or x.ndim == 0 else x[t, i][:, None, :]

        def col(x: npt.NDArray | None) -> npt.NDArray | None:        # (..., X, N) -> (D, X, 1)
            return x if x is None or x.ndim == 0 else x[t, :, j][:, :, None]

        def out(x: npt.NDArray | None) -> npt.NDArray | None:
            return None if x is None else x[t, i, j][:, None, None]

        return self.replace(a=row(f.a), b=col(f.b), c=out(f.c), d=out(f.d),
                            a_scale=row(f.a_scale), b_scale=col(f.b_scale),
                            extra={"dots": [int(x) for x in idx]})

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
        return self.replace(a=self.a[..., rows, :], b=self.b[..., cols],
                            c=None if self.c is None else self.c[..., rows, cols],
                            d=None if self.d is None else self.d[..., rows, cols],
                            a_scale=a_scale, b_scale=b_scale)

    def _derived(self, **changes: Any) -> VectorSet:
        """A copy with ``changes`` set without the checks: for variants that are valid
        because this set is (the caller checks what it changes)."""
        out = object.__new__(type(self))
        out.__dict__.update(self.__dict__, **changes)
        return out

    # -- comparison and scales ----------------------------------------------------------------

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


# -- the rules of mxsim.vectors/1, in the order a broken set names them ----------------------

def _dtype_name(arr: Any) -> str:
    return str(getattr(arr, "dtype", type(arr).__name__))


def _check_acc_format(name: str, value: Any) -> None:
    if value not in ACC_FORMATS:
        raise VectorFileError(f"{name} must be one of {', '.join(ACC_FORMATS)}, not {value!r}")


def _check_formats(vs: VectorSet) -> None:
    for name in ("a_format", "b_format"):
        value = getattr(vs, name)
        if value not in OPERAND_FORMATS:
            raise VectorFileError(f"{name} must be one of {', '.join(OPERAND_FORMATS)}, not "
                                  f"{value!r}")
    for name in ("c_format", "d_format"):
        _check_acc_format(name, getattr(vs, name))
    if vs.scale_format is not None:
        for name in ("a_format", "b_format"):
            if getattr(vs, name) not in ELEMENT_FORMATS:
                raise VectorFileError(f"scales go with MX element formats only; {name} is "
                                      f"{getattr(vs, name)}, so scale_format must be null, not "
                                      f"{vs.scale_format!r}")


def _check_operands(vs: VectorSet) -> None:
    """A and B: codes of their formats in its code dtype, (..., M, K) and (..., K, N), nothing
    empty."""
    for name in ("a", "b"):
        arr = getattr(vs, name)
        fmt = formats.get(getattr(vs, f"{name}_format"))
        if not isinstance(arr, np.ndarray) or arr.dtype != fmt.code_dtype:
            of = "" if fmt.code_dtype == np.uint8 else f" of {fmt.name}"
            raise VectorFileError(f"array {name!r} must be {fmt.code_dtype} codes{of}, not "
                                  f"{_dtype_name(arr)}")
        if arr.ndim < 2:
            raise VectorFileError(f"array {name!r} must have at least 2 dimensions, not shape "
                                  f"{arr.shape}")
        if arr.size and int(arr.max()) >= (1 << fmt.bits):
            raise VectorFileError(f"array {name!r} holds code {int(arr.max()):#x}, outside "
                                  f"{fmt.name} ({fmt.bits} bits)")
    if vs.a.shape[:-2] != vs.b.shape[:-2]:
        raise VectorFileError(f"batch dimensions of a {vs.a.shape[:-2]} and b "
                              f"{vs.b.shape[:-2]} differ")
    if vs.a.shape[-1] != vs.b.shape[-2]:
        raise VectorFileError(f"K of a ({vs.a.shape[-1]}) and b ({vs.b.shape[-2]}) differ: a "
                              f"is (..., M, K) and b is (..., K, N)")
    if min(vs.m, vs.n, vs.k) == 0:
        raise VectorFileError(f"M, N and K must be at least 1, not {vs.m}, {vs.n}, {vs.k}")
    if 0 in vs.batch_shape:
        raise VectorFileError(f"batch dimensions must be at least 1, not {vs.batch_shape}: "
                              f"the set holds no dot product")


def _check_result(name: str, arr: Any, fmt_name: str, shape: tuple[int, ...]) -> None:
    """C or D (when given): bit patterns of ``fmt_name`` in its code dtype, of ``shape``."""
    if arr is None:
        return
    want = formats.get(fmt_name).code_dtype
    if not isinstance(arr, np.ndarray) or arr.dtype != want:
        raise VectorFileError(f"array {name!r} must be {want} bit patterns of {fmt_name}, not "
                              f"{_dtype_name(arr)}")
    if arr.shape != shape:
        raise VectorFileError(f"array {name!r} must have shape {shape}, not {arr.shape}")


def _check_scale_format(vs: VectorSet) -> None:
    """The scale format, that both scales come with it, and the NVFP4 tensor_scale."""
    sf, has = vs.scale_format, (vs.a_scale is not None, vs.b_scale is not None)
    if sf is None:
        if any(has) or vs.block is not None:
            raise VectorFileError("scales or block given but scale_format is null")
    elif sf not in SCALE_FORMATS:
        raise VectorFileError(f"scale_format must be null or one of {', '.join(SCALE_FORMATS)}"
                              f", not {sf!r}")
    elif not all(has):
        raise VectorFileError(f"scale_format is {sf} but array "
                              f"{'a_scale' if not has[0] else 'b_scale'!r} is missing")
    ts = vs.tensor_scale
    if ts is not None:
        if not isinstance(ts, np.ndarray) or ts.dtype != np.float32 or ts.shape != ():
            raise VectorFileError("array 'tensor_scale' must be a float32 scalar")
        if sf != "ue4m3":
            raise VectorFileError("tensor_scale is the NVFP4 per-tensor scale and needs "
                                  "scale_format ue4m3")


def _check_block_scales(vs: VectorSet) -> None:
    """E8M0/UE4M3 scales: uint8 codes, one per block along K (a power of two up to 65536)."""
    sf, block, bt = vs.scale_format, vs.block, vs.batch_shape
    if not formats.is_scale_block(block):
        raise VectorFileError(f"block must be a power of two from 1 to "
                              f"{formats.MAX_SCALE_BLOCK} for {sf} scales, not {block!r}")
    if vs.k % block:
        raise VectorFileError(f"K ({vs.k}) must be a multiple of the block ({block})")
    for name, want in (("a_scale", bt + (vs.m, vs.k // block)),
                       ("b_scale", bt + (vs.k // block, vs.n))):
        arr = getattr(vs, name)
        if not isinstance(arr, np.ndarray) or arr.dtype != np.uint8:
            raise VectorFileError(f"array {name!r} must be uint8 {sf} codes, not "
                                  f"{_dtype_name(arr)}")
        if arr.shape != want:
            raise VectorFileError(f"array {name!r} must have shape {want} for block {block}, "
                                  f"not {arr.shape}")


def _check_fp32_scales(vs: VectorSet) -> None:
    """FP32 scales: float32, with the shape giving the granularity (tensor, row, 128-block)."""
    block, bt, m, n, k = vs.block, vs.batch_shape, vs.m, vs.n, vs.k
    for name in ("a_scale", "b_scale"):
        arr = getattr(vs, name)
        if not isinstance(arr, np.ndarray) or arr.dtype != np.float32:
            raise VectorFileError(f"array {name!r} must be float32 for fp32 scales, not "
                                  f"{_dtype_name(arr)}")
    if block not in (None, 128):
        raise VectorFileError(f"block must be null or 128 for fp32 scales, not {block!r}")
    if block == 128:
        if k % 128 or n % 128:
            raise VectorFileError(f"block-wise fp32 scales need K and N multiples of 128, not "
                                  f"K={k}, N={n}")
        shapes = {"a_scale": [bt + (m, k // 128)], "b_scale": [bt + (k // 128, n // 128)]}
    else:
        shapes = {"a_scale": [(), bt + (m, 1)], "b_scale": [(), bt + (1, n)]}
    for name, wants in shapes.items():
        arr = getattr(vs, name)
        if arr.shape not in wants:
            raise VectorFileError(f"array {name!r} must have shape "
                                  f"{' or '.join(map(str, wants))} for fp32 scales with block "
                                  f"{block}, not {arr.shape}")
