"""Fast, vectorised engine: whole batches of dot products with numpy, bit-exact.

:func:`dot` computes any unit spec; :func:`matmul_exact` computes the ``exact`` unit (every
product, scale and C combined without rounding in a superaccumulator, the sum rounded once to
FP32 by :func:`mxsim.formats.round_to`). Its twin, :mod:`mxsim.engine.reference`, computes the
same with Python fractions; a test holds them equal.

Modules: ``operands`` (exact fields of the codes), ``alignment`` (a step's terms aligned to
its LSB), ``step`` (one fused step over rows, compiled kernel or numpy: without numba,
:mod:`mxsim.engine.wide`'s exact float64 sums), ``tree`` (reduction
trees), ``sums`` (an instruction's terms summed exactly), ``chain`` (instructions chained along
K), ``scales`` (FP32 arithmetic and scale epilogues), ``exact`` (the exact unit), ``paths``
(which code runs), ``dispatch`` (:func:`dot`), ``status`` (:func:`exception_flags`, the IEEE
754 flags of a unit that rounds once).
"""

from .dispatch import dot
from .exact import matmul_exact
from .paths import INTEGER_STEP, NUMPY_SLOWDOWN, kernel_available, path
from .scales import block_slices, fma_fp32, mul_fp32
from .status import exception_flags

__all__ = ["matmul_exact", "dot", "exception_flags", "path", "INTEGER_STEP", "NUMPY_SLOWDOWN",
           "kernel_available", "fma_fp32", "mul_fp32", "block_slices"]
