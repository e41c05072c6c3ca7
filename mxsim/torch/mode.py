"""``emulate()``: a TorchFunctionMode that routes a model's matmuls through a unit.

Inside ``with mxsim.torch.emulate(unit=..., recipe=...) as mode:``, every call of
``F.linear``, ``torch.matmul`` / ``Tensor.__matmul__`` / ``Tensor.matmul``, ``torch.mm`` /
``Tensor.mm``, ``torch.bmm`` / ``Tensor.bmm``, ``torch.addmm`` / ``Tensor.addmm`` and
``torch._scaled_mm`` is computed by :mod:`mxsim.torch`'s functions instead of torch's kernels;
``mode.calls`` counts them by op name. Every other op (and these ops on integer, bool or complex
tensors) runs as usual; attention inside ``F.scaled_dot_product_attention`` is not routed.
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


def _call(mode: Any, name: str, args: tuple, kwargs: dict) -> Any:
    from .functions import addmm, linear, matmul
    from .scaled import scaled_mm
    opts = dict(unit=mode.unit, recipe=mode.recipe, engine=mode.engine, **mode.opts)
    if kwargs.get("out") is not None:
        raise UnitError(f"emulate() does not route {name} with out=")
    kwargs = {k: v for k, v in kwargs.items() if k != "out"}
    if name == "_scaled_mm":
        return scaled_mm(*args, **kwargs, unit=mode.scaled_unit, engine=mode.engine)
    if name == "linear":
        return linear(*args, **kwargs, **opts)
    if name == "addmm":
        return addmm(*args, **kwargs, **opts)
    x, w = args
    if name in ("mm", "bmm") and (x.ndim, w.ndim) != ((2, 2) if name == "mm" else (3, 3)):
        raise UnitError(f"{name} takes {'2-D' if name == 'mm' else '3-D'} tensors, not "
                        f"{x.ndim}-D and {w.ndim}-D")
    return matmul(x, w, **opts)


def _floating(args: tuple) -> bool:
    """Whether every tensor argument is a floating-point one (FP8 included): integer, bool and
    complex products are not GEMMs a unit models and run as torch runs them."""
    import torch
    return all(a.is_floating_point() for a in args if isinstance(a, torch.Tensor))


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
            if name is None or not _floating(args):
                return func(*args, **(kwargs or {}))
            self.calls[name] += 1
            return _call(self, name, args, kwargs or {})

    return Emulate


def emulate(unit: Any = "exact", recipe: Any = "none", engine: str | None = None, *,
            scaled_unit: Any = None, **opts: Any) -> Any:
    """A context manager routing a model's matmuls through ``unit`` with ``recipe``.

    ``opts`` go to :func:`mxsim.torch.matmul` (``a_format``, ``scale_rule``, ...);
    ``torch._scaled_mm`` calls go to :func:`mxsim.torch.scaled_mm` with ``scaled_unit`` (None:
    the Hopper preset its scales and ``use_fast_accum`` call for). The returned mode's
    ``calls`` counts the routed calls by op name.
    """
    from .. import units
    from ..quantize.recipes import recipe as get_recipe
    units.get(unit)                        # fail here, in one line, on an unknown name
    get_recipe(recipe)
    return _mode_class()(unit, recipe, engine, scaled_unit, opts)
