"""Hostile calls of ``mxsim.torch`` held to torch itself (issue 31; DEFECTS.md D-TORCH-*).

Each :class:`Call` row is one call (the function, its tensors, unit, recipe, options, and
whether it goes through ``torch`` under :func:`mxsim.torch.emulate` or through ``mxsim.torch``
directly) and what must come out:

- ``same``: what torch returns for the same call, in shape, dtype, device and bits (the inputs
  are small integers, so every sum is exact and torch's CPU kernels round it once, as the
  ``exact`` unit does); on the meta device, shape, dtype and device;
- ``nan``: torch's shape and dtype, and NaN exactly where torch's result is NaN (MX recipes:
  docs/torch.md, "NaN and Inf");
- an exception class: the one torch raises (a call the mode leaves to torch);
- any other text: a one-line :class:`~mxsim.MxsimError` that starts with it; ``torch_raises``
  then names the class torch raises for the same call (a refusal that follows torch's), or is
  None where torch has nothing to refuse (a unit, a recipe, an option).

``ref`` replaces torch's call where docs/torch.md documents another answer (F.linear's refusal
of a bias with a 1-D weight, the sign of K = 0 with a -0 bias). Row ids name the defect and,
after a slash, the case or its neighbour.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import mxsim.torch as mt  # noqa: E402
from mxsim.errors import MxsimError  # noqa: E402
from mxsim.torch import functions  # noqa: E402

SEED = 20261204
F8 = torch.float8_e4m3fn
NAN, INF = float("nan"), float("inf")


@dataclass(frozen=True)
class Call:
    """One call and its expected outcome (see the module docstring)."""

    id: str
    op: str                               # matmul, linear, mm, bmm, addmm, scaled_mm
    args: Callable[[], tuple]             # the tensors, built afresh for each run
    expect: Any = "same"
    emulate: bool = False
    unit: str | None = "exact"
    recipe: str = "none"
    kwargs: dict[str, Any] = field(default_factory=dict)
    opts: dict[str, Any] = field(default_factory=dict)     # unit options (a_format, ...)
    torch_raises: type[BaseException] | None = None
    ref: Callable[..., Any] | None = None


_TORCH = {"matmul": torch.matmul, "linear": F.linear, "mm": torch.mm, "bmm": torch.bmm,
          "addmm": torch.addmm, "scaled_mm": torch._scaled_mm}
_MXSIM = {"matmul": mt.matmul, "linear": mt.linear, "mm": functions.mm, "bmm": functions.bmm,
          "addmm": functions.addmm, "scaled_mm": mt.scaled_mm}


def _ints(*shape: int, dtype: Any = torch.float32, lo: int = -8, hi: int = 9) -> Any:
    """Small integers: products and sums of K <= 64 are exact in FP32 and BF16 holds them."""
    rng = np.random.default_rng([SEED, *shape])
    return torch.from_numpy(rng.integers(lo, hi, size=shape).astype(np.float32)).to(dtype)


def _with(t: Any, index: Any, value: float) -> Any:
    t = t.clone()
    t[index] = value
    return t


def _f8(*shape: int) -> Any:
    return _ints(*shape, lo=-4, hi=5).to(F8)


def _one() -> Any:
    return torch.ones((), dtype=torch.float32)


def _nested() -> Any:
    with warnings.catch_warnings():                 # "nested tensors are in prototype stage"
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([_ints(2, 64), _ints(3, 64)])


def _meta(t: Any) -> Any:
    return t.to("meta")


def _run_mxsim(c: Call) -> Any:
    args = c.args()
    if c.emulate:
        with mt.emulate(unit=c.unit, recipe=c.recipe, **c.opts):
            return _TORCH[c.op](*args, **c.kwargs)
    if c.op == "scaled_mm":
        return mt.scaled_mm(*args, **c.kwargs, unit=c.unit, **c.opts)
    return _MXSIM[c.op](*args, **c.kwargs, unit=c.unit, recipe=c.recipe, **c.opts)


def _bits(t: Any) -> np.ndarray:
    """The stored bits of a result (integers as they are, complex as its float pairs)."""
    t = torch.view_as_real(t) if t.is_complex() else t
    if not t.is_floating_point():
        return t.numpy()
    width = {torch.float32: torch.int32, torch.float64: torch.int64,
             torch.bfloat16: torch.int16, torch.float16: torch.int16}[t.dtype]
    return t.contiguous().view(width).numpy()


def _same(got: Any, want: Any) -> None:
    assert (tuple(got.shape), got.dtype, got.device, got.layout) == \
        (tuple(want.shape), want.dtype, want.device, want.layout)
    if got.device.type != "meta":
        np.testing.assert_array_equal(_bits(got), _bits(want))


# -- the table --------------------------------------------------------------------------------

_E = "D-TORCH-EMPTY"
_B = "D-TORCH-BMM"
_X = "D-TORCH-NONMXSIM-EXC"
_L = "D-TORCH-LINEAR-1D"
_N = "issue-31-nan-inf"
_BW = dict(unit="blackwell-mxf8f6f4", recipe="mxfp8")
_SCALED = dict(unit=None, recipe="none")

CALLS = [
    # D-TORCH-EMPTY: zero dimensions give torch's empty result, K = 0 its zeros (plus C).
    Call(f"{_E}/m0", "matmul", lambda: (_ints(0, 64), _ints(64, 16))),
    Call(f"{_E}/n0", "matmul", lambda: (_ints(4, 64), _ints(64, 0))),
    Call(f"{_E}/k0", "matmul", lambda: (_ints(4, 0), _ints(0, 16))),
    Call(f"{_E}/m0-n0-k0", "matmul", lambda: (_ints(0, 0), _ints(0, 0))),
    Call(f"{_E}/batch0", "matmul", lambda: (_ints(0, 4, 64), _ints(0, 64, 16))),
    Call(f"{_E}/batch0-2d-w", "matmul", lambda: (_ints(0, 4, 64), _ints(64, 16))),
    Call(f"{_E}/batch0-broadcast", "matmul", lambda: (_ints(0, 1, 4, 64), _ints(3, 64, 16))),
    Call(f"{_E}/vector-k0", "matmul", lambda: (_ints(0), _ints(0))),
    Call(f"{_E}/vector-k0-2d", "matmul", lambda: (_ints(0), _ints(0, 16))),
    Call(f"{_E}/m0-bf16", "matmul", lambda: (_ints(0, 64, dtype=torch.bfloat16),
                                             _ints(64, 16, dtype=torch.bfloat16))),
    Call(f"{_E}/k0-fp16", "matmul", lambda: (_ints(4, 0, dtype=torch.float16),
                                             _ints(0, 16, dtype=torch.float16))),
    Call(f"{_E}/m0-mxfp8", "matmul", lambda: (_ints(0, 64), _ints(64, 16)), **_BW),
    Call(f"{_E}/k0-mxfp8", "matmul", lambda: (_ints(4, 0), _ints(0, 16)), **_BW),
    Call(f"{_E}/k0-nvfp4", "matmul", lambda: (_ints(4, 0), _ints(0, 16)), recipe="nvfp4"),
    Call(f"{_E}/k0-fp8-tensor", "matmul", lambda: (_ints(4, 0), _ints(0, 16)),
         unit="hopper-cublas", recipe="fp8-tensor"),
    Call(f"{_E}/m0-fp8-row", "matmul", lambda: (_ints(0, 64), _ints(64, 16)),
         unit="hopper-cublas-rowwise", recipe="fp8-row"),
    Call(f"{_E}/n0-fp8-block", "matmul", lambda: (_ints(4, 128), _ints(128, 0)),
         unit="hopper-cublas-blockwise", recipe="fp8-block"),
    Call(f"{_E}/linear-m0-bias", "linear", lambda: (_ints(0, 64), _ints(16, 64), _ints(16))),
    Call(f"{_E}/linear-k0-bias", "linear", lambda: (_ints(3, 0), _ints(16, 0), _ints(16))),
    Call(f"{_E}/linear-out0-bias0", "linear", lambda: (_ints(3, 64), _ints(0, 64), _ints(0))),
    Call(f"{_E}/linear-k0-minus0-bias", "linear",
         lambda: (_ints(3, 0), _ints(4, 0), torch.full((4,), -0.0)),
         ref=lambda x, w, b: torch.zeros(3, 4)),            # fl32(+0 + -0) = +0 (docs/torch.md)
    Call(f"{_E}/emulate-x[:0]@w", "matmul", lambda: (_ints(8, 64)[:0], _ints(64, 16)),
         emulate=True),
    Call(f"{_E}/emulate-linear-batch0", "linear",
         lambda: (_ints(0, 5, 64), _ints(16, 64), _ints(16)), emulate=True, **_BW),
    Call(f"{_E}/emulate-mm-n0", "mm", lambda: (_ints(4, 64), _ints(64, 0)), emulate=True),
    Call(f"{_E}/emulate-bmm-batch0", "bmm", lambda: (_ints(0, 4, 64), _ints(0, 64, 16)),
         emulate=True),
    Call(f"{_E}/emulate-addmm-k0", "addmm", lambda: (_ints(4, 16), _ints(4, 0), _ints(0, 16)),
         emulate=True),
    Call(f"{_E}/emulate-addmm-m0", "addmm", lambda: (_ints(16), _ints(0, 64), _ints(64, 16)),
         emulate=True),
    Call(f"{_E}/scaled_mm-m0", "scaled_mm", lambda: (_f8(0, 64), _f8(16, 64).t(), _one(),
                                                     _one()),
         kwargs=dict(out_dtype=torch.float32), **_SCALED),
    Call(f"{_E}/scaled_mm-n0-row", "scaled_mm",
         lambda: (_f8(16, 64), _f8(0, 64).t(), torch.ones(16, 1), torch.ones(1, 0)),
         kwargs=dict(out_dtype=torch.float32), **_SCALED),
    Call(f"{_E}/scaled_mm-k0-bias", "scaled_mm",
         lambda: (_f8(16, 0), _f8(16, 0).t(), _one(), _one(),
                  _ints(16, dtype=torch.bfloat16)),
         kwargs=dict(out_dtype=torch.bfloat16), **_SCALED,
         # torch's CPU kernel leaves a K = 0 output uninitialised and drops the bias
         ref=lambda a, b, sa, sb, bias: torch.zeros(16, 16, dtype=torch.bfloat16) + bias),
    Call(f"{_E}/emulate-scaled_mm-m0", "scaled_mm",
         lambda: (_f8(0, 64), _f8(16, 64).t(), _one(), _one()),
         kwargs=dict(out_dtype=torch.bfloat16), emulate=True),
    # An empty product is held to the unit as any other is.
    Call(f"{_E}/m0-unit-refuses-recipe", "matmul", lambda: (_ints(0, 64), _ints(64, 16)),
         "Unit hopper-cublas takes", unit="hopper-cublas", recipe="mxfp8"),
    Call(f"{_E}/m0-k-not-instruction-multiple", "matmul", lambda: (_ints(0, 48), _ints(48, 8)),
         "K (48) must be a multiple of unit hopper-cublas's instruction k (32)",
         unit="hopper-cublas"),
    Call(f"{_E}/m0-mx-k-not-block-multiple", "matmul", lambda: (_ints(0, 48), _ints(48, 8)),
         "Block (32) must divide", **_BW),
    Call(f"{_E}/m0-bad-engine", "matmul", lambda: (_ints(0, 64), _ints(64, 8)),
         "Engine must be one of fast, reference, gpu, not 'bogus'", opts=dict(engine="bogus")),

    # D-TORCH-BMM: bmm does not broadcast; matmul does.
    Call(f"{_B}/bmm-broadcast-b", "bmm", lambda: (_ints(2, 8, 64), _ints(1, 64, 16)),
         "bmm takes (B, M, K) and (B, K, N) with the same B (it does not broadcast), not "
         "(2, 8, 64) and (1, 64, 16)", emulate=True, torch_raises=RuntimeError),
    Call(f"{_B}/bmm-broadcast-a", "bmm", lambda: (_ints(1, 8, 64), _ints(2, 64, 16)),
         "bmm takes (B, M, K)", emulate=True, torch_raises=RuntimeError),
    Call(f"{_B}/bmm-2d", "bmm", lambda: (_ints(8, 64), _ints(64, 16)), "bmm takes (B, M, K)",
         emulate=True, torch_raises=RuntimeError),
    Call(f"{_B}/bmm-4d", "bmm", lambda: (_ints(1, 2, 8, 64), _ints(1, 2, 64, 16)),
         "bmm takes (B, M, K)", emulate=True, torch_raises=RuntimeError),
    Call(f"{_B}/bmm-k-mismatch", "bmm", lambda: (_ints(2, 8, 64), _ints(2, 63, 16)),
         "bmm: x (2, 8, 64) and w (2, 63, 16) do not chain (K 64 against 63)", emulate=True,
         torch_raises=RuntimeError),
    Call(f"{_B}/bmm-direct", "bmm", lambda: (_ints(2, 8, 64), _ints(1, 64, 16)),
         "bmm takes (B, M, K)", torch_raises=RuntimeError),
    Call(f"{_B}/bmm-same-b", "bmm", lambda: (_ints(2, 8, 64), _ints(2, 64, 16)), emulate=True),
    Call(f"{_B}/matmul-broadcasts-b", "matmul", lambda: (_ints(2, 8, 64), _ints(1, 64, 16)),
         emulate=True),
    Call(f"{_B}/matmul-broadcasts-4d", "matmul", lambda: (_ints(2, 1, 8, 64), _ints(3, 64, 16))),
    Call(f"{_B}/matmul-vector-x-batched-w", "matmul", lambda: (_ints(64), _ints(2, 64, 16))),
    Call(f"{_B}/matmul-batched-x-vector-w", "matmul", lambda: (_ints(2, 8, 64), _ints(64))),
    Call(f"{_B}/matmul-vector-vector", "matmul", lambda: (_ints(64), _ints(64)), emulate=True),
    Call(f"{_B}/matmul-vector-matrix", "matmul", lambda: (_ints(64), _ints(64, 16))),
    Call(f"{_B}/matmul-batch-mismatch", "matmul", lambda: (_ints(2, 8, 64), _ints(3, 64, 16)),
         "matmul: the batch dimensions of x (2, 8, 64) and w (3, 64, 16) do not broadcast",
         torch_raises=RuntimeError),
    Call(f"{_B}/matmul-k-mismatch", "matmul", lambda: (_ints(8, 64), _ints(63, 16)),
         "matmul: x (8, 64) and w (63, 16) do not chain (K 64 against 63)",
         torch_raises=RuntimeError),
    Call(f"{_B}/matmul-0d", "matmul", lambda: (_ints(), _ints(64)),
         "matmul needs tensors of at least one dimension", torch_raises=RuntimeError),
    Call(f"{_B}/mm-3d", "mm", lambda: (_ints(2, 8, 64), _ints(64, 16)),
         "mm takes matrices (M, K) and (K, N), not (2, 8, 64) and (64, 16)", emulate=True,
         torch_raises=RuntimeError),
    Call(f"{_B}/mm-vector", "mm", lambda: (_ints(64), _ints(64, 16)), "mm takes matrices",
         emulate=True, torch_raises=RuntimeError),

    # D-TORCH-NONMXSIM-EXC: one exception type, with one line naming the shapes.
    Call(f"{_X}/linear-bias-17", "linear", lambda: (_ints(8, 64), _ints(16, 64), _ints(17)),
         "bias (17,) does not fit the output (8, 16)", torch_raises=RuntimeError),
    Call(f"{_X}/linear-bias-17-emulate", "linear",
         lambda: (_ints(8, 64), _ints(16, 64), _ints(17)), "bias (17,) does not fit",
         emulate=True, torch_raises=RuntimeError),
    Call(f"{_X}/linear-bias-rows", "linear", lambda: (_ints(8, 64), _ints(16, 64),
                                                      _ints(2, 16)),
         "bias (2, 16) does not fit the output (8, 16)", torch_raises=RuntimeError),
    Call(f"{_X}/linear-bias-more-dims", "linear",
         lambda: (_ints(8, 64), _ints(16, 64), _ints(2, 8, 16)),
         "bias (2, 8, 16) does not fit the output (8, 16)", torch_raises=RuntimeError),
    Call(f"{_X}/linear-bias-full", "linear", lambda: (_ints(8, 64), _ints(16, 64),
                                                      _ints(8, 16))),
    Call(f"{_X}/linear-bias-scalar", "linear", lambda: (_ints(8, 64), _ints(16, 64), _ints())),
    Call(f"{_X}/linear-bias-1", "linear", lambda: (_ints(8, 64), _ints(16, 64), _ints(1))),
    Call(f"{_X}/linear-3d-x-bias", "linear", lambda: (_ints(2, 3, 64), _ints(16, 64),
                                                      _ints(16))),
    Call(f"{_X}/linear-k-mismatch", "linear", lambda: (_ints(8, 64), _ints(16, 63)),
         "linear: x (8, 64) and weight (16, 63) do not chain", torch_raises=RuntimeError),
    Call(f"{_X}/addmm-c-17", "addmm", lambda: (_ints(17), _ints(8, 64), _ints(64, 16)),
         "c (17,) does not fit the output (8, 16)", emulate=True, torch_raises=RuntimeError),
    Call(f"{_X}/addmm-c-3d", "addmm", lambda: (_ints(1, 8, 16), _ints(8, 64), _ints(64, 16)),
         "c (1, 8, 16) does not fit", emulate=True, torch_raises=RuntimeError),
    Call(f"{_X}/addmm-c-column", "addmm", lambda: (_ints(8, 1), _ints(8, 64), _ints(64, 16)),
         emulate=True),
    Call(f"{_X}/addmm-x-3d", "addmm", lambda: (_ints(16), _ints(1, 8, 64), _ints(64, 16)),
         "addmm takes matrices (M, K) and (K, N)", emulate=True, torch_raises=RuntimeError),
    Call(f"{_X}/scaled_mm-bias-15", "scaled_mm",
         lambda: (_f8(16, 64), _f8(16, 64).t(), _one(), _one(),
                  _ints(15, dtype=torch.bfloat16)),
         "bias (15,) does not fit the output (16, 16)", kwargs=dict(out_dtype=torch.bfloat16),
         torch_raises=RuntimeError, **_SCALED),
    Call(f"{_X}/sparse-x", "matmul", lambda: (_ints(8, 64).to_sparse(), _ints(64, 16))),
    Call(f"{_X}/sparse-x-emulate-mm", "mm", lambda: (_ints(8, 64).to_sparse(), _ints(64, 16)),
         emulate=True),
    Call(f"{_X}/sparse-weight", "linear", lambda: (_ints(8, 64), _ints(16, 64).to_sparse())),
    Call(f"{_X}/sparse-bmm", "bmm", lambda: (_ints(2, 8, 64).to_sparse(), _ints(2, 64, 16)),
         emulate=True),
    Call(f"{_X}/sparse-bf16", "mm", lambda: (_ints(8, 64, dtype=torch.bfloat16).to_sparse(),
                                             _ints(64, 16, dtype=torch.bfloat16)),
         ref=lambda x, w: x.to_dense() @ w),    # torch's sparse kernel rounds in BF16 as it goes
    Call(f"{_X}/meta", "matmul", lambda: (_meta(_ints(8, 64)), _meta(_ints(64, 16)))),
    Call(f"{_X}/meta-bf16-mxfp8", "matmul",
         lambda: (_meta(_ints(8, 64, dtype=torch.bfloat16)),
                  _meta(_ints(64, 16, dtype=torch.bfloat16))), **_BW),
    Call(f"{_X}/meta-x-cpu-w", "mm", lambda: (_meta(_ints(8, 64)), _ints(64, 16)), emulate=True),
    Call(f"{_X}/meta-linear-emulate", "linear",
         lambda: (_meta(_ints(2, 5, 64)), _meta(_ints(16, 64)), _meta(_ints(16))), emulate=True),
    Call(f"{_X}/meta-scaled_mm", "scaled_mm",
         lambda: (_meta(_f8(16, 64)), _meta(_f8(16, 64)).t(), _meta(_one()), _meta(_one())),
         kwargs=dict(out_dtype=torch.bfloat16), **_SCALED),
    Call(f"{_X}/meta-k-mismatch", "matmul", lambda: (_meta(_ints(8, 64)), _meta(_ints(63, 16))),
         "matmul: x (8, 64) and w (63, 16) do not chain", torch_raises=RuntimeError),
    Call(f"{_X}/meta-bad-option", "matmul", lambda: (_meta(_ints(8, 64)), _meta(_ints(64, 16))),
         "Recipe mxfp8 takes no option 'pow2_scales'", recipe="mxfp8",
         opts=dict(pow2_scales=True)),
    Call(f"{_X}/nested-linear", "linear", lambda: (_nested(), _ints(16, 64)),   # torch's runs
         "x is a nested tensor, which mxsim.torch does not take", emulate=True),
    Call(f"{_X}/nested-matmul", "matmul", lambda: (_nested(), _ints(64, 16)),
         "x is a nested tensor", torch_raises=RuntimeError),
    Call(f"{_X}/not-a-tensor", "matmul", lambda: (_ints(8, 64).tolist(), _ints(64, 16)),
         "x must be a torch.Tensor, not list", torch_raises=TypeError),
    Call(f"{_X}/int-direct", "matmul", lambda: (_ints(8, 64).int(), _ints(64, 16).int()),
         "x must be float32, bfloat16, float16 or float64, not int32"),
    Call(f"{_X}/int-emulate-is-torch's", "matmul",
         lambda: (_ints(8, 64).int(), _ints(64, 16).int()), emulate=True),
    Call(f"{_X}/complex-emulate-is-torch's", "mm",
         lambda: (_ints(8, 64).to(torch.complex64), _ints(64, 16).to(torch.complex64)),
         emulate=True),
    Call(f"{_X}/matmul-list-emulate-is-torch's", "matmul",
         lambda: (_ints(8, 64), _ints(64, 16).tolist()), TypeError, emulate=True,
         torch_raises=TypeError),
    Call(f"{_X}/format-not-a-name", "matmul", lambda: (_ints(8, 64), _ints(64, 16)),
         "Element format must be a format name such as 'e4m3', not 5", opts=dict(a_format=5)),
    Call(f"{_X}/pow2-not-a-bool", "matmul", lambda: (_ints(8, 64), _ints(64, 16)),
         "pow2_scales must be True or False, not 'no'", unit="hopper-cublas-rowwise",
         recipe="fp8-row", opts=dict(pow2_scales="no")),
    Call(f"{_X}/emulate-bad-option", "matmul", lambda: (_ints(8, 64), _ints(64, 16)),
         "Recipe none takes no option 'bogus'", emulate=True, opts=dict(bogus=1)),
    Call(f"{_X}/emulate-unit-refuses-recipe", "matmul", lambda: (_ints(8, 64), _ints(64, 16)),
         "Unit hopper-cublas takes", emulate=True, unit="hopper-cublas", recipe="mxfp8"),

    # D-TORCH-LINEAR-1D: a 1-D weight is F.linear's x @ weight.
    Call(f"{_L}/x2d-w1d", "linear", lambda: (_ints(8, 64), _ints(64))),
    Call(f"{_L}/x1d-w1d", "linear", lambda: (_ints(64), _ints(64))),
    Call(f"{_L}/x3d-w1d", "linear", lambda: (_ints(2, 3, 64), _ints(64))),
    Call(f"{_L}/x3d-w1d-bias0d", "linear", lambda: (_ints(2, 3, 64), _ints(64), _ints())),
    Call(f"{_L}/emulate-x2d-w1d", "linear", lambda: (_ints(8, 64), _ints(64)), emulate=True),
    Call(f"{_L}/x2d-w1d-bias0d", "linear", lambda: (_ints(8, 64), _ints(64), _ints()),
         torch_raises=RuntimeError, ref=lambda x, w, b: x @ w + b),   # F.linear's addmm path
    Call(f"{_L}/x2d-w1d-bias-n", "linear", lambda: (_ints(8, 64), _ints(64), _ints(16)),
         "bias (16,) does not fit the output (8,)", torch_raises=RuntimeError),
    Call(f"{_L}/w1d-k-mismatch", "linear", lambda: (_ints(8, 63), _ints(64)),
         "linear: x (8, 63) and weight (64,) do not chain (in features 63 against 64)",
         torch_raises=RuntimeError),
    Call(f"{_L}/w3d", "linear", lambda: (_ints(8, 64), _ints(2, 16, 64)),
         "linear takes a weight (out, in) or (in,), not (2, 16, 64)", torch_raises=RuntimeError),
    Call(f"{_L}/w0d", "linear", lambda: (_ints(8, 64), _ints()),
         "linear takes a weight (out, in) or (in,), not ()", torch_raises=RuntimeError),
    Call(f"{_L}/x0d", "linear", lambda: (_ints(), _ints(16, 64)),
         "linear needs an x of at least one dimension", torch_raises=RuntimeError),

    # Issue 31: NaN and Inf under MX recipes do what docs/torch.md says.
    Call(f"{_N}/nan-mxfp8", "matmul", lambda: (_with(_ints(4, 64), (1, 3), NAN), _ints(64, 8)),
         "nan", **_BW),
    Call(f"{_N}/nan-only-block-mxfp8", "matmul",
         lambda: (_with(_ints(4, 64), (2, slice(0, 32)), NAN), _ints(64, 8)), "nan", **_BW),
    Call(f"{_N}/nan-w-mxfp8-rceil", "matmul",
         lambda: (_ints(4, 64), _with(_ints(64, 8), (40, 5), NAN)), "nan", **_BW,
         opts=dict(scale_rule="rceil")),
    Call(f"{_N}/nan-mxfp8-ocp", "matmul", lambda: (_with(_ints(4, 64), (0, 0), NAN),
                                                   _ints(64, 8)),
         "nan", **_BW, opts=dict(scale_rule="ocp")),
    Call(f"{_N}/nan-mxfp8-rceil-sat", "matmul",
         lambda: (_with(_ints(4, 64), (3, 63), NAN), _ints(64, 8)), "nan", **_BW,
         opts=dict(scale_rule="rceil-sat")),
    Call(f"{_N}/nan-mxfp4-emulate", "linear",
         lambda: (_with(_ints(4, 64), (1, 7), NAN), _ints(8, 64)), "nan", emulate=True,
         recipe="mxfp4"),
    Call(f"{_N}/nan-none", "matmul", lambda: (_with(_ints(4, 64), (1, 3), NAN), _ints(64, 8)),
         "nan"),
    Call(f"{_N}/inf-mxfp8-runs", "matmul",
         lambda: (_with(_ints(4, 64), (1, 3), INF), _ints(64, 8)), "shape", **_BW),
    Call(f"{_N}/nan-nvfp4", "matmul", lambda: (_with(_ints(4, 64), (1, 3), NAN), _ints(64, 8)),
         "The nvfp4 recipe needs finite inputs", recipe="nvfp4"),
    Call(f"{_N}/inf-nvfp4-w", "matmul", lambda: (_ints(4, 64), _with(_ints(64, 8), (0, 0), INF)),
         "The nvfp4 recipe needs finite inputs", recipe="nvfp4"),
    Call(f"{_N}/inf-fp8-tensor", "matmul",
         lambda: (_with(_ints(4, 64), (1, 3), -INF), _ints(64, 8)),
         "The fp8 amax recipe needs finite inputs", unit="hopper-cublas", recipe="fp8-tensor"),
    Call(f"{_N}/nan-fp8-row-emulate", "linear",
         lambda: (_with(_ints(4, 64), (1, 3), NAN), _ints(8, 64)),
         "The fp8 amax recipe needs finite inputs", emulate=True,
         unit="hopper-cublas-rowwise", recipe="fp8-row"),
    Call(f"{_N}/nan-fp8-block", "matmul",
         lambda: (_with(_ints(4, 128), (1, 3), NAN), _ints(128, 128)),
         "The fp8-block recipe needs finite inputs", unit="hopper-cublas-blockwise",
         recipe="fp8-block"),
]


@pytest.mark.parametrize("call", [pytest.param(c, id=c.id) for c in CALLS])
def test_torch_api_follows_torch(call: Call) -> None:
    if isinstance(call.expect, type):                      # a call torch answers itself
        with pytest.raises(call.expect):
            _TORCH[call.op](*call.args(), **call.kwargs)
        with pytest.raises(call.expect):
            _run_mxsim(call)
        return
    if call.torch_raises is not None:                       # torch refuses this call too
        with pytest.raises(call.torch_raises):
            _TORCH[call.op](*call.args(), **call.kwargs)
    if call.expect not in ("same", "nan", "shape"):
        with pytest.raises(MxsimError) as info:
            _run_mxsim(call)
        message = str(info.value)
        assert isinstance(info.value, ValueError)
        assert "\n" not in message and message.startswith(call.expect), message
        return
    got = _run_mxsim(call)
    want = call.ref(*call.args()) if call.ref is not None else \
        _TORCH[call.op](*call.args(), **call.kwargs)
    if call.expect == "same":
        _same(got, want)
        return
    assert (tuple(got.shape), got.dtype) == (tuple(want.shape), want.dtype)
    if call.expect == "nan":
        np.testing.assert_array_equal(got.isnan().numpy(), want.isnan().numpy())
        assert got.isnan().any()


def test_torch_api_table_covers_every_defect() -> None:
    ids = [c.id for c in CALLS]
    assert len(ids) == len(set(ids))
    for prefix in (_E, _B, _X, _L, _N):
        assert sum(i.startswith(prefix + "/") for i in ids) >= 5, prefix


def test_emulate_counts_calls_passed_by_torch_names() -> None:
    x, w, c = _ints(2, 64), _ints(64, 3), _ints(3)
    with mt.emulate() as mode:
        got = [torch.mm(input=x, mat2=w), torch.matmul(x, other=w),
               torch.addmm(input=c, mat1=x, mat2=w, beta=1), F.linear(x, weight=w.t(), bias=c),
               torch._scaled_mm(_f8(16, 32), mat2=_f8(16, 32).t(), scale_a=_one(),
                                scale_b=_one(), out_dtype=torch.float32)]
    want = [x @ w, x @ w, x @ w + c, x @ w + c,
            torch._scaled_mm(_f8(16, 32), _f8(16, 32).t(), _one(), _one(),
                             out_dtype=torch.float32)]
    for g, ref in zip(got, want, strict=True):
        _same(g, ref)
    assert dict(mode.calls) == {"mm": 1, "matmul": 1, "addmm": 1, "linear": 1, "_scaled_mm": 1}
