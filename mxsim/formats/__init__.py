"""Element, scale and output formats, with bit-exact, vectorised decode and encode.

A format is data (:class:`Format`), looked up by name with :func:`get`. Codes are unsigned
integer arrays (``np.uint8`` for formats of 8 bits or fewer, ``np.uint16``, ``np.uint32``), one
code per array element; FP4 and FP6 are packed only at the interop edge (:func:`pack_fp4`,
:func:`pack_fp6`).

Decode, round and encode stay apart: :meth:`Format.decode` maps codes to exact float64 values,
:func:`round_to` is the only place that rounds (an integer significand, an exponent and a sticky
bit in; codes out), :func:`round_flags` gives the IEEE 754 flags of that rounding, and
:meth:`Format.encode` splits float64 values into those integers and calls it. Nothing here
rounds through a float.

Formats (OCP MX v1.0, OCP OFP8, IEEE 754):

======== ====== ==== ======================================================================
name     layout bias specials
======== ====== ==== ======================================================================
e4m3     1.4.3  7    no Inf; NaN is S.1111.111 (OCP E4M3, ``float8_e4m3fn``)
e5m2     1.5.2  15   IEEE: Inf is S.11111.00, NaN S.11111.{01,10,11}
e3m2     1.3.2  3    none (every code finite)
e2m3     1.2.3  1    none
e2m1     1.2.1  1    none
int8     8-bit  --   two's complement, value = i / 64 (MXINT8); 0x80 decodes to -2.0,
                     encode never produces it (it saturates to +-127/64)
e8m0     0.8.0  127  unsigned, no zero, no subnormals: value 2^(code - 127); NaN is 0xFF
ue4m3    0.4.3  7    unsigned E4M3 (NVFP4 scale) in an 8-bit container; NaN is 0x7F;
                     the top bit is ignored on decode, as NVIDIA hardware ignores it
fp16     1.5.10 15   IEEE binary16
bf16     1.8.7  127  bfloat16 (IEEE-style specials)
tf32     1.8.10 127  TensorFloat-32: the top 19 bits of an FP32 pattern (``bits >> 13``), in
                     a uint32 container; IEEE-style specials
fp32     1.8.23 127  IEEE binary32
======== ====== ==== ======================================================================

Modules: ``policy`` (rounding, overflow and special-value enums), ``layout`` (a format's
fields and limits), ``rounding`` (:func:`round_to`), ``format`` (:class:`Format`: decode and
encode), ``registry`` (the table and :func:`get`), ``packing`` (FP4/FP6 bytes) and ``interop``
(ml_dtypes and torch).
"""

from .format import Format
from .interop import from_ml_dtypes, from_torch, to_ml_dtypes, to_torch
from .layout import FormatLayout
from .packing import pack_fp4, pack_fp6, unpack_fp4, unpack_fp6
from .policy import DEFAULT_SR_BITS, Class, Fields, Overflow, Rounding, Specials, choice
from .registry import (
    ELEMENT_FORMATS,
    FORMATS,
    MAX_SCALE_BLOCK,
    OPERAND_FORMATS,
    SCALE_BLOCKS,
    get,
    is_scale_block,
    names,
)
from .rounding import bit_length, draw_random_bits, round_flags, round_to

__all__ = [
    "choice", "Rounding", "Overflow", "Specials", "Class", "Format", "FormatLayout", "Fields",
    "get", "names", "FORMATS", "ELEMENT_FORMATS", "OPERAND_FORMATS", "SCALE_BLOCKS",
    "MAX_SCALE_BLOCK", "is_scale_block",
    "round_to", "round_flags", "DEFAULT_SR_BITS", "bit_length", "draw_random_bits",
    "pack_fp4", "unpack_fp4", "pack_fp6", "unpack_fp6",
    "to_ml_dtypes", "from_ml_dtypes", "to_torch", "from_torch",
]
