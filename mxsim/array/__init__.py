"""Arrays of dot-product units: one description (:class:`ArraySpec`) and its views.

``mxsim.array.spec`` is the description; ``mxsim.array.cycle`` steps the array a cycle at a
time; ``mxsim.array.analytic`` gives closed-form throughput and ``mxsim.array.gemm`` a GEMM's
numbers beside its timing. The Amaranth RTL of the array is ``hdl.array``. docs/array.md
explains the fields, the timing contract and the evidence that the views agree.
"""

from .spec import (
                   AccKind,
                   Accumulators,
                   ArrayError,
                   ArraySpec,
                   Buffer,
                   Dataflow,
                   Scales,
    check_rtl,
                   from_dict,
                   load,
)

__all__ = ["ArraySpec", "ArrayError", "Buffer", "Accumulators", "Dataflow", "Scales",
           "AccKind", "from_dict", "load", "check_rtl"]
