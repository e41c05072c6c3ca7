"""The fast engine's front door: which computation a unit's spec calls for."""

from __future__ import annotations

import numpy.typing as npt

from ...spec import UnitSpec
from ...vectors import VectorSet
from ..epilogue import without_epilogue
from .chain import chain_dot
from .exact import matmul_exact
from .scales import apply_epilogue, block_fma, block_slices
from .stack import stack_factor, stacked, unstacked

__all__ = ["dot"]


def dot(spec: UnitSpec, vs: VectorSet, *, kernel: bool | str = True, whole: bool = True
        ) -> npt.NDArray:
    """D = A·B + C of a vector set exactly as ``spec`` computes it; codes of ``spec.d_format``.

    A K longer than the instruction's chains instructions (D of one is C of the next), with
    promotion if the spec declares it. Raises UnitError when the vectors do not fit the spec.
    ``kernel=False`` computes every fused step in numpy instead of the compiled kernels, as a
    process without numba does (the same bits, ``NUMPY_SLOWDOWN`` slower; for tests and
    benchmarks); ``kernel=INTEGER_STEP`` in numpy's integer step, slower still (for the tests
    that hold the numpy paths equal); ``whole=False`` runs the
    step kernel over whole blocks even where the whole-dot kernel (:mod:`.fused`) applies (the
    same bits)."""
    spec.check_vectors(vs)
    if spec.exact:
        return matmul_exact(vs)
    if spec.epilogue == "block-fma":
        if hasattr(kernel, "block_fma"):        # a GPU's kernel module: the FMA in one pass
            return kernel.block_fma(spec, vs, lambda inner, plain: dot(
                inner, plain, kernel=kernel, whole=whole))
        inner, blocks = block_slices(spec, vs)
        return block_fma(spec, vs, ((dot(inner, plain, kernel=kernel, whole=whole), s)
                                    for plain, s in blocks))
    if spec.epilogue is not None:
        inner, plain = without_epilogue(spec, vs)
        return apply_epilogue(spec, vs, dot(inner, plain, kernel=kernel, whole=whole))
    g = stack_factor(vs)
    if g > 1:
        # Many small batch entries: computed as block-diagonal entries g at a time, the same
        # bits (each output depends only on its row, column and C).
        return unstacked(chain_dot(spec, stacked(vs, g), kernel, whole=whole), vs, g)
    return chain_dot(spec, vs, kernel, whole=whole)
