"""``emulate()``: a TorchFunctionMode that routes a model's matmuls through a unit.

Inside ``with mxsim.torch.emulate(unit=..., recipe=...) as mode:``, every call of
``F.linear``, ``torch.matmul`` / ``Tensor.__matmul__`` / ``Tensor.matmul``, ``torch.mm`` /
``Tensor.mm``, ``torch.bmm`` / ``Tensor.bmm``, ``torch.addmm`` / ``Tensor.addmm`` and
``torch._scaled_mm`` is computed by :mod:`mxsim.torch`'s functions instead of torch's kernels;
``mode.calls`` counts them by op name. Arguments may be passed by position or by torch's
names. Every other op (and these ops on integer, bool or complex tensors, or on something that
is not a tensor) runs as usual; attention inside ``F.scaled_dot_product_attention`` is not
routed.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any

from ..errors import UnitError

__all__ = ["emulate", "routed_ops"]


@functools.cache
def routed_ops() -> dict[Any, str]:
    """The torch callables the mode routes, each to the name it is counted under."""
    import torch
    import torch.nn.functional as F
    ops = {F.linear: "linear", torch.matmul: "matmul", torch.Tensor.__matmul__: "matmul",
           torch.Tensor.matmul: "matmul", torch.mm: "mm", torch.Tensor.mm: "mm",
           torch.bmm: "bmm", torch.Tensor.bmm: "bmm", torch.addmm: "addmm",
           torch.Tensor.addmm: "addmm", torch._scaled_mm: "_scaled_mm"}
    return ops


#: Each routed op's parameters, in torch's order and under torch's names (a call may pass any
#: of them by name), how many of the first are required tensors, and how many are tensors
#: (required, or optional: None or a tensor).
_PARAMS: dict[str, tuple[tuple[str, ...], int, int]] = {
    "matmul": (("input", "other"), 2, 2),
    "mm": (("input", "mat2"), 2, 2),
    "bmm": (("input", "mat2"), 2, 2),
    "addmm": (("input", "mat1", "mat2"), 3, 3),
    "linear": (("input", "weight", "bias"), 2, 3),
    "_scaled_mm": (("input", "mat2", "scale_a", "scale_b", "bias", "scale_result", "out_dtype",
                    "use_fast_accum"), 4, 6),
}


def _bind(name: str, args: tuple, kwargs: dict) -> dict[str, Any]:
    """A routed call's arguments by torch's parameter names (``self`` is ``input``)."""
    bound = dict(zip(_PARAMS[name][0], args, strict=False))
    for key, value in kwargs.items():
        bound["input" if key == "self" else key] = value
    return bound


def _routed(name: str, bound: dict[str, Any]) -> bool:
    """Whether a call is a GEMM a unit models: its required tensors are floating-point tensors
    (FP8 included) and its optional ones such tensors or None. Integer, bool and complex
    products, and calls with something else where a tensor goes, run as torch runs them (and
    torch answers them as it does)."""
    import torch
    params, required, tensors = _PARAMS[name]
    for i, p in enumerate(params[:tensors]):
        t = bound.get(p)
        if t is None and i >= required:
            continue
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            return False
    return True


def _call(mode: Any, name: str, bound: dict[str, Any]) -> Any:
    from .functions import addmm, bmm, linear, matmul, mm
    from .scaled import scaled_mm
    if bound.pop("out", None) is not None:
        raise UnitError(f"emulate() does not route {name} with out=")
    if name == "_scaled_mm":
        return scaled_mm(bound.pop("input"), bound.pop("mat2"), **bound, unit=mode.scaled_unit,
                         engine=mode.engine)
    opts = dict(unit=mode.unit, recipe=mode.recipe, engine=mode.engine, **mode.opts)
    if name == "linear":
        return linear(bound.pop("input"), bound.pop("weight"), bound.pop("bias", None), **opts)
    if name == "addmm":
        return addmm(bound.pop("input"), bound.pop("mat1"), bound.pop("mat2"), **bound, **opts)
    second = _PARAMS[name][0][1]
    return {"matmul": matmul, "mm": mm, "bmm": bmm}[name](bound["input"], bound[second], **opts)


@functools.cache
def _mode_class() -> type:
    from torch.overrides import TorchFunctionMode

    class Emulate(TorchFunctionMode):
        """Routes the ops of :func:`routed_ops` through mxsim.torch (see :func:`emulate`)."""

        def __init__(self, unit: Any, recipe: Any, engine: str | None, scaled_unit: Any,
                     opts: dict[str, Any]) -> None:
            super().__init__()
            self.unit, self.recipe, self.engine = unit, recipe, engine
            self.scaled_unit, self.opts = scaled_unit, opts
            self.calls: Counter[str] = Counter()

        def __torch_function__(self, func: Any, types: Any, args: tuple = (),
                               kwargs: dict | None = None) -> Any:
            name = routed_ops().get(func)
            bound = None if name is None else _bind(name, args, kwargs or {})
            if bound is None or not _routed(name, bound):
                return func(*args, **(kwargs or {}))
            self.calls[name] += 1
            return _call(self, name, bound)

    return Emulate


def emulate(unit: Any = "exact", recipe: Any = "none", engine: str | None = None, *,
            scaled_unit: Any = None, **opts: Any) -> Any:
    """A context manager routing a model's matmuls through ``unit`` with ``recipe``.

    ``opts`` go to :func:`mxsim.torch.matmul` (``a_format``, ``scale_rule``, ...);
    ``torch._scaled_mm`` calls go to :func:`mxsim.torch.scaled_mm` with ``scaled_unit`` (None:
    the Hopper preset its scales and ``use_fast_accum`` call for). The returned mode's
    ``calls`` counts the routed calls by op name.
    """
    import numpy as np

    from .. import units
    from .functions import gemm_bits, pick_engine
    # Fail here, in one line, on what every routed call would refuse: an unknown unit, recipe,
    # option, format or engine, or a unit that does not take the recipe (the checks of a
    # product with nothing to compute).
    if scaled_unit is not None:
        units.get(scaled_unit)
    empty = np.zeros((0, 0), np.float32)
    gemm_bits(empty, empty, unit, recipe, pick_engine(engine), opts)
    return _mode_class()(unit, recipe, engine, scaled_unit, opts)
