"""A model's matmuls through a unit and a quantisation recipe, on torch tensors.

:func:`matmul`, :func:`linear` and :func:`scaled_mm` (``torch._scaled_mm``'s signature) take
torch tensors (CPU or CUDA) and return what the named unit computes, in the dtype and shape the
real kernel returns; :func:`emulate` is a context manager (a ``TorchFunctionMode``) that routes
``F.linear``, ``torch.matmul`` / ``@``, ``mm``, ``bmm``, ``addmm`` and ``torch._scaled_mm`` of a
model through them. Forward only. docs/torch.md is the guide.

A library path name as the unit (``unit="cublas-bf16"``, :mod:`mxsim.plans.table`) computes
what that library call does at the product's shape: the plan the H200 table records for it,
or its rule's; :func:`library_plan` says which, and the torch flags assumed.

``import mxsim.torch`` does not import torch; each function imports it when called.
"""

from ..quantize.recipes import OPERAND_RECIPES as RECIPES
from ..quantize.recipes import Recipe
from .functions import ASSUMED_FLAGS, library_plan, linear, matmul
from .mode import emulate
from .scaled import scaled_mm

__all__ = ["matmul", "linear", "scaled_mm", "emulate", "RECIPES", "Recipe", "library_plan",
           "ASSUMED_FLAGS"]
