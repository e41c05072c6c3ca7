"""Training through a unit: a drop-in ``Linear`` whose three GEMMs (forward, dgrad, wgrad) each
run through a unit with a training recipe's quantisation of each operand along that GEMM's K.

:func:`convert` swaps a model's ``torch.nn.Linear`` layers for :class:`Linear` in place (as
torchao's ``quantize_`` does), sharing their parameters; the layers the recipe keeps in BF16
(:attr:`~mxsim.quantize.training.TrainingRecipe.bf16_layers`) get the ``bf16`` recipe. Each
GEMM runs

- through a unit (``unit``: a preset or spec name, the recipe's own by default, or a
  :class:`~mxsim.units.Unit`): the codes and scales go to the unit, which computes every FP32
  bit of D as its spec says (:func:`mxsim.torch.functions.compute`, any engine); or
- ``unit="plain"``: the emulation the papers use: codes dequantised (times their block
  scales) to FP32, multiplied in FP32 by NumPy's BLAS, an NVFP4 product then multiplied by
  ``fl32(ta * tb)``.

A run's random state lives in a :class:`TrainContext` (one per model): stochastic rounding
draws ``SR_BITS`` bits per element from ``sr_rng`` in the C order of the operand as that GEMM
takes it (A, or B as (K, N)), and the random Hadamard transform's 16 signs are drawn once per
run from their own generator (:attr:`TrainContext.signs`, recorded by ``mxsim train-eval``),
so switching one technique off leaves the other's random numbers as they were. The context
also keeps each tensor's FP8 amax history and counts saturated elements per step.

A GPU's tensors are transformed and quantised on the GPU (:mod:`.quantise`, bit for bit
the host's), except where that path does not apply (stochastic rounding, FP8 and BF16
operands, blocks with Inf or NaN): those are quantised on the host. The unit's GEMM runs on
``engine`` (``gpu`` by default for CUDA tensors where the GPU engine is available).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import units
from ..errors import UnitError
from ..quantize import training as tr
from ..quantize.recipes import Quantised
from . import quantise as tq
from .functions import compute, pick_engine

__all__ = ["convert", "TrainContext", "context_of", "PLAIN", "gemm"]    # and Linear (lazily)

#: ``unit=PLAIN``: the papers' emulation (dequantise, multiply in FP32).
PLAIN = "plain"


@dataclass
class TrainContext:
    """A run's random state and counters, shared by a converted model's layers."""
    seed: int = 0
    sr_rng: np.random.Generator = field(init=False)
    signs: npt.NDArray[np.float32] = field(init=False)
    histories: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, not {self.seed!r}")
        sr, signs = np.random.SeedSequence(self.seed).spawn(2)
        self.sr_rng = np.random.default_rng(sr)
        self.signs = tr.rht_signs(np.random.default_rng(signs))

    def take_stats(self) -> dict[str, int]:
        """Elements quantised and saturated since the last call (then reset)."""
        out = {"elements": sum(s.elements for s in self.stats.values()),
               "saturated": sum(s.saturated for s in self.stats.values())}
        self.stats.clear()
        return out


def gemm(a: Any, b: Any, ops: tuple, *, unit: Any, engine: str, context: TrainContext,
         key: str = "") -> npt.NDArray[np.float32]:
    """``a (M, K) @ b (K, N)`` with ``ops`` (the GEMM's two :class:`Operand`), through
    ``unit`` (a :class:`~mxsim.units.Unit`) or ``PLAIN``; FP32 values. ``a`` and ``b`` are
    NumPy arrays, or torch tensors (a GPU's): these are transformed and quantised where they
    are (:mod:`.quantise`, the same bits), falling back to the host where that path does not
    apply."""
    oa, ob = ops
    if oa.rht != ob.rht:
        raise ValueError("A random Hadamard transform must be applied to both operands")
    if oa.rht:
        rht = tr.rht if isinstance(a, np.ndarray) else tq.rht
        a = rht(a, context.signs, -1)
        b = rht(b, context.signs, -2)
    qa = _quantise(a, oa, "a", context, f"{key}.a")
    qb = _quantise(b, ob, "b", context, f"{key}.b")
    if unit == PLAIN:
        return _plain(qa, qb)
    return compute(unit, qa, qb, engine).view(np.float32)


def _quantise(x: npt.NDArray, op: tr.Operand, role: str, context: TrainContext,
              key: str) -> Quantised:
    stats = context.stats.setdefault(key, tr.OperandStats())
    if not isinstance(x, np.ndarray):
        q = tq.quantise(x, op, role, stats)
        if q is not None:
            return q
        x = x.detach().to("cpu").numpy()
    history = context.histories.setdefault(key, []) if op.scaling == "delayed" else None
    return tr.quantise(x, op, role, rng=context.sr_rng, amax_history=history, stats=stats)


def _plain(qa: Quantised, qb: Quantised) -> npt.NDArray[np.float32]:
    a, b = tr.dequantise(qa, "a"), tr.dequantise(qb, "b")
    with np.errstate(over="ignore", invalid="ignore"):
        d = np.matmul(a, b).astype(np.float32)
        if qa.tensor_scale is not None:
            d = d * np.float32(np.float32(qa.tensor_scale) * np.float32(qb.tensor_scale))
    return d


class _LinearFunction:
    """Built on first use (torch is imported only then): a torch.autograd.Function whose
    forward, dgrad and wgrad each call :func:`gemm`."""
    _cls = None

    @classmethod
    def get(cls):
        if cls._cls is None:
            cls._cls = _build_function()
        return cls._cls


def _build_function():
    import torch

    def host(t):
        return t.detach().to("cpu", torch.float32).contiguous().numpy()

    def operand(t):
        """A GPU's tensor stays there (quantised on it); any other goes to the host."""
        t = t.detach()
        return t.to(torch.float32).contiguous() if t.is_cuda else host(t)

    def transposed(t):
        return t.transpose(0, 1).contiguous() if isinstance(t, torch.Tensor) else \
            np.ascontiguousarray(t.T)

    class LinearFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, bias, layer):
            x2 = operand(x.reshape(-1, x.shape[-1]))
            y = layer.run("fprop", x2, transposed(operand(weight)))
            if bias is not None:
                y = (y + host(bias)).astype(np.float32)
            ctx.save_for_backward(x, weight)
            ctx.layer, ctx.has_bias = layer, bias is not None
            out = torch.from_numpy(y).to(x.device)
            return out.reshape(*x.shape[:-1], weight.shape[0]).to(x.dtype)

        @staticmethod
        def backward(ctx, dy):
            x, weight = ctx.saved_tensors
            layer = ctx.layer
            dy2 = operand(dy.reshape(-1, dy.shape[-1]))
            dx = dw = db = None
            if ctx.needs_input_grad[0]:
                d = layer.run("dgrad", dy2, operand(weight))
                dx = torch.from_numpy(d).to(x.device).reshape(x.shape).to(x.dtype)
            if ctx.needs_input_grad[1]:
                x2 = operand(x.reshape(-1, x.shape[-1]))
                d = layer.run("wgrad", transposed(dy2), x2)
                dw = torch.from_numpy(d).to(weight.device).to(weight.dtype)
            if ctx.has_bias and ctx.needs_input_grad[2]:
                db = torch.from_numpy(host(dy).reshape(-1, dy.shape[-1]).sum(
                    axis=0, dtype=np.float32)).to(weight.device)
            return dx, dw, db, None

    return LinearFunction


_MODULE = None


def __getattr__(name: str) -> Any:
    # ``Linear`` is a torch.nn.Linear subclass, built when first asked for, so that importing
    # this module does not import torch.
    if name == "Linear":
        return _module_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _module_class():
    global _MODULE
    if _MODULE is None:
        _MODULE = _build_module()
    return _MODULE


def _build_module():
    import torch

    class MxLinear(torch.nn.Linear):
        """``torch.nn.Linear`` whose GEMMs run through a unit and a training recipe.

        ``Linear(in_features, out_features, bias=True, *, recipe="mxfp8", unit=None,
        engine=None, context=None, name="")``: ``unit`` None is the recipe's own unit,
        ``PLAIN`` the papers' emulation; ``engine`` (``fast``, ``reference``, ``gpu``) None
        picks ``gpu`` for CUDA tensors where it is available; ``context`` shares a
        :class:`TrainContext`."""

        def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                     recipe: Any = "mxfp8", unit: Any = None, engine: str | None = None,
                     context: TrainContext | None = None, name: str = "",
                     device: Any = None, dtype: Any = None):
            super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
            self.configure(recipe, unit, engine, context, name)

        def configure(self, recipe: Any, unit: Any, engine: str | None,
                      context: TrainContext | None, name: str) -> None:
            self.recipe = tr.training_recipe(recipe)
            self.unit = PLAIN if unit == PLAIN else units.get(unit or self.recipe.unit)
            if engine is not None:
                units.check_engine(engine)
            self.engine = engine
            self.context = context if context is not None else TrainContext()
            self.layer_name = name

        def run(self, which: str, a, b):
            engine = self.engine or pick_engine(None, self.weight)
            return gemm(a, b, self.recipe.gemm(which), unit=self.unit, engine=engine,
                        context=self.context, key=f"{self.layer_name}.{which}")

        def forward(self, x):
            if x.shape[-1] != self.in_features:
                raise UnitError(f"Layer {self.layer_name or 'Linear'} takes {self.in_features} "
                                f"input features, not {x.shape[-1]}")
            return _LinearFunction.get().apply(x, self.weight, self.bias, self)

        def extra_repr(self) -> str:
            unit = self.unit if self.unit == PLAIN else self.unit.name
            return f"{super().extra_repr()}, recipe={self.recipe.name}, unit={unit}"

    MxLinear.__name__ = MxLinear.__qualname__ = "Linear"
    return MxLinear


def convert(model: Any, recipe: Any = "mxfp8", unit: Any = None, *, engine: str | None = None,
            seed: int = 0) -> Any:
    """Swap every ``torch.nn.Linear`` of ``model`` for :class:`Linear` in place (the
    parameters shared, not copied) and return ``model``. Layers whose name (or last name
    part) is in the recipe's ``bf16_layers`` get the ``bf16`` recipe, through its unit (or
    ``PLAIN`` where ``unit`` is). Raises ValueError for an unknown recipe or unit."""
    import torch
    rec = tr.training_recipe(recipe)
    if unit not in (None, PLAIN):
        unit = units.get(unit)
    context = TrainContext(seed)
    cls = _module_class()
    for name, mod in list(model.named_modules()):
        for child_name, child in list(mod.named_children()):
            if type(child) is not torch.nn.Linear:
                continue
            full = f"{name}.{child_name}" if name else child_name
            bf16 = full in rec.bf16_layers or child_name in rec.bf16_layers
            new = cls.__new__(cls)
            torch.nn.Module.__init__(new)
            new.in_features, new.out_features = child.in_features, child.out_features
            new.weight, new.bias = child.weight, child.bias
            new.configure("bf16" if bf16 else rec, PLAIN if unit == PLAIN else
                          (None if bf16 else unit), engine, context, full)
            setattr(mod, child_name, new)
    return model


def context_of(model: Any) -> TrainContext | None:
    """The :class:`TrainContext` a converted model's layers share (None if not converted)."""
    cls = _module_class()
    for mod in model.modules():
        if isinstance(mod, cls):
            return mod.context
    return None
