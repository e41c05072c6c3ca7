"""The registry of named formats: the table of every format mxsim knows, and lookup by name.

One registry holds the named instances (:data:`FORMATS`); :func:`get` also builds IEEE-style
accumulator formats on demand: ``e8m1`` .. ``e8m22`` (FP32's exponent range), and ``eXmY`` of
5 to 11 exponent bits in at most 32 bits (``e10m11``: adder-tree nodes wider than FP32).
:data:`ELEMENT_FORMATS` names the MX element formats, the one list every layer above checks
element formats against; :data:`OPERAND_FORMATS` adds what tensor cores also multiply (fp16,
bf16, tf32).
"""

from __future__ import annotations

import re

from ..errors import FormatError
from .format import Format
from .policy import Specials

__all__ = ["FORMATS", "ELEMENT_FORMATS", "OPERAND_FORMATS", "SCALE_BLOCKS", "MAX_SCALE_BLOCK",
           "names", "get", "is_scale_block"]


FORMATS: dict[str, Format] = {f.name: f for f in [
    Format(name="e4m3", exp_bits=4, man_bits=3, bias=7, specials=Specials.FN,
           ml_dtypes_name="float8_e4m3fn", torch_name="float8_e4m3fn",
           description="FP8 E4M3 (OCP), no Inf, NaN S.1111.111"),
    Format(name="e5m2", exp_bits=5, man_bits=2, bias=15, specials=Specials.IEEE,
           ml_dtypes_name="float8_e5m2", torch_name="float8_e5m2",
           description="FP8 E5M2 (OCP), IEEE-style Inf/NaN"),
    Format(name="e3m2", exp_bits=3, man_bits=2, bias=3,
           ml_dtypes_name="float6_e3m2fn", description="FP6 E3M2 (OCP MX), all finite"),
    Format(name="e2m3", exp_bits=2, man_bits=3, bias=1,
           ml_dtypes_name="float6_e2m3fn", description="FP6 E2M3 (OCP MX), all finite"),
    Format(name="e2m1", exp_bits=2, man_bits=1, bias=1,
           ml_dtypes_name="float4_e2m1fn", torch_name="float4_e2m1fn_x2",
           description="FP4 E2M1 (OCP MX), all finite"),
    Format(name="int8", exp_bits=0, man_bits=6, bias=0, kind="int",
           description="MXINT8: two's complement, value = i/64"),
    Format(name="e8m0", exp_bits=8, man_bits=0, bias=127, signed=False, specials=Specials.FN,
           subnormals=False, ml_dtypes_name="float8_e8m0fnu", torch_name="float8_e8m0fnu",
           description="E8M0 scale (OCP MX): 2^(code-127), NaN 0xFF"),
    Format(name="ue4m3", exp_bits=4, man_bits=3, bias=7, signed=False, specials=Specials.FN,
           container_bits=8, description="UE4M3 scale (NVFP4): unsigned E4M3, NaN 0x7F"),
    Format(name="fp16", exp_bits=5, man_bits=10, bias=15, specials=Specials.IEEE,
           ml_dtypes_name="float16", torch_name="float16", description="IEEE binary16"),
    Format(name="bf16", exp_bits=8, man_bits=7, bias=127, specials=Specials.IEEE,
           ml_dtypes_name="bfloat16", torch_name="bfloat16", description="bfloat16"),
    Format(name="tf32", exp_bits=8, man_bits=10, bias=127, specials=Specials.IEEE,
           description="TensorFloat-32 (NVIDIA): the top 19 bits of an FP32 pattern"),
    Format(name="fp32", exp_bits=8, man_bits=23, bias=127, specials=Specials.IEEE,
           ml_dtypes_name="float32", torch_name="float32", description="IEEE binary32"),
]}

#: The MX element formats (OCP MX v1.0 and MXINT8), in table order.
ELEMENT_FORMATS = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "int8")
#: What A and B of a unit may be: the MX element formats and the 16/19-bit tensor-core operand
#: formats (without block scales). A TF32 code is the top 19 bits of its FP32 pattern
#: (``fp32_bits >> 13``), held in uint32.
OPERAND_FORMATS = ELEMENT_FORMATS + ("fp16", "bf16", "tf32")
#: The blocks hardware uses (elements per E8M0/UE4M3 block scale): OCP MX's 32, NVFP4's 16, and
#: 8 (MX units whose instruction holds 8 elements and one scale per operand, e.g. RISC-V MX
#: coprocessors). Probes and quantisers pick from these; unit specs and vector sets take any
#: block :func:`is_scale_block` allows.
SCALE_BLOCKS = (8, 16, 32)
#: The largest block a unit spec or vector set may take (one scale pair for the widest k).
MAX_SCALE_BLOCK = 1 << 16


def is_scale_block(block: object) -> bool:
    """Whether ``block`` (an int) is a block a unit spec or vector set may take: a power of two
    from 1 to :data:`MAX_SCALE_BLOCK` (one scale pair for 64 FP4 elements is ``64``)."""
    return (isinstance(block, int) and not isinstance(block, bool)
            and 1 <= block <= MAX_SCALE_BLOCK and block & (block - 1) == 0)

_ALIASES = {
    "fp8_e4m3": "e4m3", "float8_e4m3fn": "e4m3", "fp8_e5m2": "e5m2", "float8_e5m2": "e5m2",
    "fp6_e3m2": "e3m2", "float6_e3m2fn": "e3m2", "fp6_e2m3": "e2m3", "float6_e2m3fn": "e2m3",
    "fp4": "e2m1", "fp4_e2m1": "e2m1", "float4_e2m1fn": "e2m1", "mxint8": "int8",
    "float8_e8m0fnu": "e8m0", "float16": "fp16", "half": "fp16", "bfloat16": "bf16",
    "float32": "fp32", "float": "fp32", "tensorfloat32": "tf32", "tfloat32": "tf32",
    "tensorfloat-32": "tf32",
}


def names() -> list[str]:
    """Names of every registered format, in table order."""
    return list(FORMATS)


_ACCUMULATORS: dict[str, Format] = {}
#: Exponent widths of the ``eXmY`` accumulator formats other than E8 (whose mantissa is 1..22).
_WIDE_EXP_BITS = range(5, 12)


def _accumulator(exp_bits: int, man_bits: int) -> Format:
    """``e<exp_bits>m<man_bits>``: an IEEE-style format (bias 2**(exp_bits-1) - 1, subnormals,
    Inf/NaN). ``e8mN`` is FP32's exponent range with a shorter mantissa, as tensor-core
    accumulators keep it (Hopper FP8: E8M13); wider exponents hold adder-tree nodes."""
    name = f"e{exp_bits}m{man_bits}"
    if name not in _ACCUMULATORS:
        what = ("FP32 exponent range" if exp_bits == 8 else f"{exp_bits} exponent bits")
        _ACCUMULATORS[name] = Format(
            name=name, exp_bits=exp_bits, man_bits=man_bits, bias=(1 << (exp_bits - 1)) - 1,
            specials=Specials.IEEE,
            description=f"accumulator: {what}, {man_bits} mantissa bits")
    return _ACCUMULATORS[name]


def get(name: str | Format) -> Format:
    """Look a format up by name (``e4m3``, ``e8m0``, ``fp32`` ...) or common alias.

    Besides the registered formats, ``e8m1`` .. ``e8m22`` name accumulator formats with FP32's
    exponent range and a shorter mantissa (``e8m13`` is Hopper's FP8 accumulator), and ``eXmY``
    with 5 to 11 exponent bits, at least one mantissa bit and at most 32 bits in all: IEEE-style
    formats of that layout (``e10m11``); a registered name (``e5m2``) is the registered format.
    """
    if isinstance(name, Format):
        return name
    if not isinstance(name, str):
        raise TypeError(f"Format name must be a string, not {name!r}")
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key.startswith("e8m") and key[3:].isdigit() and 1 <= int(key[3:]) <= 22:
        return _accumulator(8, int(key[3:]))
    wide = re.fullmatch(r"e(\d{1,2})m(\d{1,2})", key)
    if key not in FORMATS and wide:
        exp_bits, man_bits = int(wide[1]), int(wide[2])
        if exp_bits in _WIDE_EXP_BITS and exp_bits != 8 and man_bits >= 1 \
                and 1 + exp_bits + man_bits <= 32:
            return _accumulator(exp_bits, man_bits)
    try:
        return FORMATS[key]
    except KeyError:
        raise FormatError(f"Unknown format {name!r}; choose one of "
                          f"{', '.join(FORMATS)} (see `mxsim formats`)") from None
