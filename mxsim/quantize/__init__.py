"""Block quantisation of float arrays to OCP MX and NVFP4 codes, bit-exact with the peers.

:func:`to_mx` turns a float array into E8M0 block scales and element codes; :func:`from_mx`
turns them back into exact values. :func:`to_nvfp4`/:func:`from_nvfp4` do the same for NVFP4
(E2M1 elements, UE4M3 scales of 16 elements, one FP32 per-tensor scale).
:func:`quantise_operands` quantises a GEMM's two float operands by a named recipe. (The cuBLAS
128x4 "blocked" scale layout lives with its GPU users, in ``gpu/blackwell/blocked.py``.)

Each scale rule is the exact definition of one peer, so a user can see which recipe produced
which codes (``docs/quantize.md`` gives every definition and every documented difference):

============= =========================================================================
rule          definition (``amax`` is the block's largest magnitude, ``emax`` the
              element format's largest exponent)
============= =========================================================================
``floor``     torchao 0.18 ``ScaleCalculationMode.FLOOR`` (its CPU path)
``ceil``      torchao 0.18 ``CEIL``
``even``      torchao 0.18 ``EVEN``
``rceil``     torchao 0.18 ``RCEIL`` (its eager fallback: ``ceil(log2(amax / max))`` in FP32)
``ocp``       the letter of OCP MX v1.0 §6.3: ``floor(log2(amax)) - emax``, exact (microxcaling
              computes it, up to three documented effects of its FP32 arithmetic)
``rceil-sat`` Transformer Engine's MXFP8 cast: ``amax * fl32(1/max)`` rounded up, ``.satfinite``
============= =========================================================================

Element rounding goes through :mod:`mxsim.formats` on exact values: each element is
``x * 2**-k`` for the block's power of two ``2**k`` (exact in float64), rounded once. The fast
path indexes a table that :func:`mxsim.formats.round_to` filled, keyed by the scaled FP32 value's
sign, exponent, top 8 mantissa bits and a sticky bit (enough for every element format, whose
guard bit lies at most 7 bits below the leading one); the exact path calls
:meth:`~mxsim.formats.Format.encode`; tests hold the two equal. The only FP32 roundings are the
peers' own, reproduced on purpose and named where they happen (torchao's ``amax / max``, TE's
``amax * fl32(1/max)``, the NVFP4 recipe's FP32 scale arithmetic).

Inputs are float32, bfloat16 (``ml_dtypes``), float16 or float64 arrays. float64 input is taken
only when every value is exactly an FP32 value (the peers all quantise FP32), and rejected
otherwise, so nothing is rounded before quantisation.

Modules: ``rules`` (scale rules and argument checks), ``blocks`` (FP32 input in blocks),
``elements`` (the element encoder), ``mx`` and ``nvfp4`` (the two pipelines), ``report``
(:func:`compare_rules`) and ``recipes`` (GEMM operands by recipe).
"""

from ..formats import ELEMENT_FORMATS
from .mx import from_mx, to_mx
from .nvfp4 import from_nvfp4, nvfp4_tensor_scale, to_nvfp4
from .recipes import RECIPE_SCALES, RECIPES, quantise_operands
from .report import compare_rules
from .rules import ROUNDINGS, RULE_FORMATS, NanBlocks, QuantizeError, ScaleRule, rules_for

__all__ = [
    "QuantizeError", "ScaleRule", "NanBlocks", "ELEMENT_FORMATS", "ROUNDINGS", "RULE_FORMATS",
    "rules_for", "to_mx", "from_mx", "to_nvfp4", "from_nvfp4", "nvfp4_tensor_scale",
    "compare_rules", "quantise_operands", "RECIPES", "RECIPE_SCALES",
]
