"""Which code computes a unit's fused steps: the compiled kernel (numba) or numpy.

The two give the same bits (the tests hold them equal); the caller chooses with an explicit
``kernel`` argument, never a module switch.
"""

from __future__ import annotations

import numpy as np

from ...spec import UnitSpec
from .. import _kernels, wide

__all__ = ["INTEGER_STEP", "NUMPY_SLOWDOWN", "kernel_applies", "kernel_available", "path",
           "step_kernels", "use_kernel"]

#: How much slower the numpy fallback is than the compiled kernels, as said to the user:
#: hopper-wgmma, 1M dots of K = 32, numba 0.68, 2 shared cores, 2026-12-06, the fallback in a
#: process without numba (engine.wide) against the whole-dot kernel: 4.4x in
#: docs/data/bench_engine_2026-12-06_run5.json (``python benchmarks/bench_engine.py``); 9.9x in
#: run4, after the kernel's vectorised column loops and before the fallback's float32 step and
#: float64 rounding; 4.7x in run3. Before engine.wide the fallback was numpy's integer step,
#: 43-50x slower in three runs.
NUMPY_SLOWDOWN = "about 5x"


#: ``kernel=INTEGER_STEP`` computes every fused step with :mod:`.alignment`'s integer terms
#: (no compiled kernel, no :mod:`mxsim.engine.wide`): the slowest numpy path, for tests and
#: benchmarks.
INTEGER_STEP = "integer-step"


def kernel_available() -> bool:
    """True when numba can be imported, so the compiled kernel can run."""
    return _kernels.available()


def kernel_applies(spec: UnitSpec) -> bool:
    """True when ``spec``'s fused steps are ones the compiled kernel computes (truncated
    alignment, no product groups, scale exponents summed exactly: the kernel folds each
    operand's scales into it); exact steps and the exact unit have no kernel."""
    return (not spec.exact and spec.frac_bits is not None and spec.group is None
            and spec.scale_sum_bits is None)


def use_kernel(spec: UnitSpec, kernel: bool = True) -> bool:
    """Whether ``spec``'s steps run in the compiled kernel: it applies, it is wanted
    (``kernel``) and numba is installed."""
    return kernel_applies(spec) and kernel is True and _kernels.available()


def step_kernels(spec: UnitSpec, kernel, xp=np):
    """The module whose ``prepare_b`` and ``step_sums`` compute ``spec``'s fused steps on
    arrays of module ``xp``, or None (:mod:`.alignment`'s integer step).

    ``kernel`` is True (numpy: the numba kernel where it applies and numba is installed, else
    :mod:`mxsim.engine.wide`), False (numpy: ``wide``, the numpy fallback),
    :data:`INTEGER_STEP` (numpy: the integer step, for the tests that hold the three equal),
    or such a module itself (the GPU engine passes ``mxsim.engine.gpu.kernels`` for CuPy
    arrays); other array modules run the integer step unless given one."""
    if not kernel_applies(spec) or kernel is INTEGER_STEP:
        return None
    if xp is np:
        if isinstance(kernel, bool):
            return _kernels if kernel and _kernels.available() else wide
        return kernel
    return None if isinstance(kernel, bool) else kernel


def path(spec: UnitSpec, kernel: bool = True) -> dict:
    """Which code computes ``spec``'s dots in this process: ``{"path": "numba" | "numpy",
    "compiled": bool, "numba": version or None, "note": why}``; ``kernel=False`` is the
    numpy path asked for explicitly."""
    numba_version = _kernels.version()
    if not kernel_applies(spec):
        what = ("a scale-exponent sum per product (scale_sum_bits)"
                if spec.scale_sum_bits is not None else "exact sums")
        return {"path": "numpy", "compiled": False, "numba": numba_version,
                "note": f"numpy, {what} (no compiled kernel for this spec)"}
    if kernel and _kernels.available():
        return {"path": "numba", "compiled": True, "numba": numba_version,
                "note": f"numba kernel (compiled, numba {numba_version})"}
    why = "numba is not installed" if numba_version is None else "the kernel is switched off"
    return {"path": "numpy", "compiled": False, "numba": numba_version,
            "note": f"numpy fallback, {NUMPY_SLOWDOWN} slower: {why} "
                    f"(pip install 'mxsim[fast]')"}
