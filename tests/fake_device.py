"""A strict stand-in for CuPy, for tests on a machine without a GPU.

``fake`` is an array module (``fake.zeros``, ``fake.where``, ... as numpy's) whose arrays,
:class:`Dev`, behave as CuPy's do where it matters to array-module-generic code: numpy
functions and ufuncs dispatch to them (``__array_function__``, ``__array_ufunc__``),
reductions give 0-d arrays, and they refuse what CuPy refuses or gets wrong: float32
arithmetic (CuPy flushes subnormals to zero), an enum member as a scalar, an implicit
conversion to numpy (``np.asarray(dev)``, storing one in a numpy array) and a numpy array
mixed with them in one operation (``np.where(dev, np_array, 0)``, ``dev + np_array``,
indexing with one). Only ``fake.asarray`` / ``fake.array`` take numpy arrays in, and
``fake.asnumpy`` gives them back. :mod:`mxsim.formats.xp` finds the module through
``Dev.__xp__``.
"""

from __future__ import annotations

import enum
import types
from typing import Any

import numpy as np

__all__ = ["Dev", "fake", "to_fake"]

_ENTRY = {"asarray", "array", "ascontiguousarray"}      # numpy arrays may come in here


class Mixed(TypeError):
    """A numpy array met a device array, or a device array was turned into numpy."""


def _unwrap(x: Any, strict: bool = True) -> Any:
    if isinstance(x, Dev):
        return x._a
    if isinstance(x, np.ndarray):
        if strict:
            raise Mixed(f"a numpy array (shape {x.shape}) mixed with device arrays")
        return x
    if isinstance(x, enum.Enum):
        raise Mixed(f"{x!r}: CuPy takes only plain Python and numpy scalars")
    if isinstance(x, tuple | list):
        return type(x)(_unwrap(v, strict) for v in x)
    if isinstance(x, dict):
        return {k: _unwrap(v, strict) for k, v in x.items()}
    return x


def _wrap(x: Any) -> Any:
    if isinstance(x, np.ndarray | np.generic):
        return Dev(np.asarray(x))
    if isinstance(x, tuple | list):
        return type(x)(_wrap(v) for v in x)
    return x


def _no_float32(x: Any) -> None:
    """CuPy compiles its kernels with -ftz=true: float32 arithmetic (a cast included)
    flushes subnormals to zero, so exact code must not do any (views are fine)."""
    if isinstance(x, Dev) and x._a.dtype in (np.float32, np.float16):
        raise Mixed(f"{x._a.dtype} arithmetic on a device array (CuPy flushes subnormals)")


class Dev:
    """A device array: a numpy array that never leaves the fake device implicitly."""

    __array_priority__ = 1000
    __xp__: types.ModuleType

    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    def __array__(self, *args, **kwargs):
        raise Mixed("implicit conversion of a device array to numpy")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        for x in inputs:
            _no_float32(x)
        return _wrap(getattr(ufunc, method)(*_unwrap(inputs), **_unwrap(kwargs)))

    def __array_function__(self, func, types_, args, kwargs):
        return _wrap(func(*_unwrap(args), **_unwrap(kwargs)))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):          # no __array_interface__ etc.: nothing implicit
            raise AttributeError(name)
        value = getattr(self._a, name)
        if name == "astype":
            _no_float32(self)
        if callable(value):
            return lambda *a, **k: _wrap(value(*_unwrap(a), **_unwrap(k)))
        return _wrap(value) if isinstance(value, np.ndarray) else value

    def __getitem__(self, idx):
        return _wrap(self._a[_unwrap(idx)])

    def __setitem__(self, idx, value) -> None:
        self._a[_unwrap(idx)] = _unwrap(value)

    def __len__(self) -> int:
        return len(self._a)

    def __bool__(self) -> bool:
        return bool(self._a)

    def __int__(self) -> int:
        return int(self._a)

    def __float__(self) -> float:
        return float(self._a)

    def __index__(self) -> int:
        return int(self._a)

    def __repr__(self) -> str:
        return f"Dev({self._a!r})"


def _binary(name: str):
    def op(self, other):
        return _wrap(getattr(self._a, name)(_unwrap(other)))
    return op


for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
            "lshift", "rshift"):
    setattr(Dev, f"__{_op}__", _binary(f"__{_op}__"))
    setattr(Dev, f"__r{_op}__", _binary(f"__r{_op}__"))
for _op in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(Dev, f"__{_op}__", _binary(f"__{_op}__"))
for _op in ("neg", "pos", "invert", "abs"):
    setattr(Dev, f"__{_op}__", lambda self, _n=f"__{_op}__": _wrap(getattr(self._a, _n)()))


def _module_attr(name: str) -> Any:
    value = getattr(np, name)
    if isinstance(value, type) or not callable(value):
        return value                            # dtypes, constants
    strict = name not in _ENTRY
    return lambda *a, **k: _wrap(value(*_unwrap(a, strict), **_unwrap(k, strict)))


fake = types.ModuleType("fakedevice", "A strict stand-in for CuPy (tests only).")
fake.__getattr__ = _module_attr
fake.asnumpy = lambda x: x._a.copy() if isinstance(x, Dev) else np.asarray(x)
Dev.__xp__ = fake


def to_fake(vs):
    """A vector set with its arrays on the fake device (as ``mxsim.engine.gpu.array``
    moves them to the GPU)."""
    moved = {name: None if getattr(vs, name) is None else Dev(np.array(getattr(vs, name)))
             for name in ("a", "b", "c", "a_scale", "b_scale")}
    return vs._derived(d=None, **moved)


class FakeKernels:
    """The numba step kernels behind the GPU kernels' interface (``prepare_b``,
    ``step_sums`` on device arrays, results on the device), to run the engine's kernel path on
    the fake device. Operands are copied off the device explicitly, as a CUDA kernel reads
    them in place."""

    @staticmethod
    def _host(op):
        if op is None:
            return None
        return type(op)(*(fake.asnumpy(getattr(op, f)) for f in
                          ("sign", "sig", "lsb", "e", "zero", "nan", "inf")))

    @classmethod
    def prepare_b(cls, b, sb):
        from mxsim.engine import _kernels
        return _kernels.prepare_b(cls._host(b), cls._host(sb))

    @classmethod
    def step_sums(cls, a, sa, b_side, acc, *args):
        from mxsim.engine import _kernels
        out = _kernels.step_sums(cls._host(a), cls._host(sa), b_side, cls._host(acc), *args)
        return tuple(Dev(x) for x in out)
