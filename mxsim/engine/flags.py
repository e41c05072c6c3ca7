"""IEEE 754 status flags of a unit's results, in RISC-V ``fflags`` order.

:func:`status_flags` gives, for every dot of a vector set, the flags the unit raises: NV
(invalid), DZ (divide by zero: a dot product never raises it), OF (overflow), UF (underflow)
and NX (inexact), as the bits of :data:`FLAG_BITS`. They are modelled for units that round
once per instruction (one exact fused step, ``d_format`` = ``acc_format``, no fold_scales,
promotion or epilogue); with ``c_mode = "after"`` the step's rounding and that of ``C + step``
each raise their own, ORed, as two adders in sequence would. Flags accrue (OR) over the
instructions of a chain, as ``fflags`` does.

- **NX**: the rounded result differs from the exact value.
- **OF**: the exact value rounded with an unbounded exponent range exceeds ``acc_format``'s
  largest finite magnitude (whatever ``overflow`` then delivers); NX is set too.
- **UF**: the result is tiny (non-zero and, rounded with an unbounded exponent range, below
  the smallest normal magnitude: tininess after rounding, as RISC-V) and inexact.
- **NV**: the result is NaN because of Inf x 0 or Inf - Inf among the products and C, or an
  element NaN code or a NaN scale (E8M0 0xFF) is present, or C is a signaling NaN (exponent
  all ones, fraction non-zero, its top bit clear). A quiet-NaN C alone raises nothing, and an
  Inf or NaN result from Inf or NaN inputs raises no OF, UF or NX. With ``specials = "none"``
  the inputs hold no NaN or Inf, so NV comes only from Inf - Inf of results that overflowed
  (C after the step, in a chain).

The fast engine computes them for whole batches (:func:`mxsim.engine.fast.exception_flags`);
``engine="reference"`` computes them from the exact reference
(:func:`mxsim.engine.reference.exception_flags`), and tests hold the two equal.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ..errors import UnitError
from ..spec import Reduce, SpecError, UnitSpec
from ..vectors import VectorSet
from . import fast, reference

__all__ = ["FLAG_BITS", "ENGINES", "flags_problem", "check_flags", "status_flags"]

#: Each flag's bit in the result, RISC-V ``fflags`` order.
FLAG_BITS = {"nv": 0x10, "dz": 0x08, "of": 0x04, "uf": 0x02, "nx": 0x01}
#: The engines that compute flags.
ENGINES = ("fast", "reference")


def flags_problem(spec: UnitSpec) -> str | None:
    """What keeps ``spec`` from rounding once per instruction (as a phrase), or None."""
    if spec.k is None:
        return "the exact unit (k null)"
    if spec.reduce is Reduce.TREE:
        return "a reduction tree (reduce tree)"
    if len(spec.steps()) > 1:
        return f"a schedule of {len(spec.steps())} fused steps"
    if spec.frac_bits is not None:
        return f"a truncated step (frac_bits = {spec.frac_bits})"
    if spec.d_format != spec.acc_format:
        return f"acc_format {spec.acc_format} with d_format {spec.d_format}"
    if spec.fold_scales:
        return "operands rounded with their scales first (fold_scales)"
    if spec.promote_every is not None:
        return "promotion (promote_every)"
    if spec.epilogue is not None:
        return f"an epilogue ({spec.epilogue})"
    return None


def check_flags(spec: UnitSpec) -> None:
    """Raise SpecError, one line, unless status flags are modelled for ``spec``."""
    problem = flags_problem(spec)
    if problem:
        raise SpecError(f"Unit spec {spec.name!r}: flags are modelled for units that round "
                        f"once per instruction (one fused step, frac_bits null, d_format = "
                        f"acc_format, no fold_scales, promote_every or epilogue), not "
                        f"{problem}")


def status_flags(spec: UnitSpec, vs: VectorSet, engine: str = "fast") -> npt.NDArray[np.uint8]:
    """The status flags each dot of ``vs`` raises on ``spec``: ``np.uint8`` of
    ``vs.out_shape`` (D's shape), the bits of :data:`FLAG_BITS` (see the module docstring).

    Raises
    ------
    SpecError
        ``spec`` does not round once per instruction.
    UnitError
        ``engine`` is not ``fast`` or ``reference``, or ``vs`` does not fit ``spec``.
    """
    if engine not in ENGINES:
        raise UnitError(f"Engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    check_flags(spec)
    nv, of, uf, nx = (fast if engine == "fast" else reference).exception_flags(spec, vs)
    bits = (nv * FLAG_BITS["nv"] | of * FLAG_BITS["of"] | uf * FLAG_BITS["uf"]
            | nx * FLAG_BITS["nx"])
    return np.asarray(bits, np.uint8)
