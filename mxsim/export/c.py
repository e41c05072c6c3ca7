"""A unit spec as C99: the spec's data for the shared C engine, and its typed API.

:func:`unit_files` gives the text of ``PREFIX.h`` and ``PREFIX.c`` for one spec: every field
the arithmetic reads, written as a ``const mxsim_unit`` (formats as tables of codes taken from
:mod:`mxsim.formats` itself, the schedule, the roundings), the spec's provenance in a comment
block, and wrappers (one instruction, a whole dot, a batch, an instruction with its
intermediates) over the engine in ``mxsim_dot.c``, which every exported unit shares.
"""

from __future__ import annotations

import re
import textwrap
from fractions import Fraction

import numpy as np

from .. import formats
from ..errors import MxsimError
from ..spec import Reduce, UnitSpec

__all__ = ["unit_files", "default_prefix", "check_exportable", "MAX_STEP_TERMS", "layout",
           "provenance_comment"]

#: Terms of one fused step the C engine holds (its stack buffer, ``MAX_TERMS``).
MAX_STEP_TERMS = 1024

_ROUNDING = {"rne": "MXSIM_RNE", "rz": "MXSIM_RZ", "rna": "MXSIM_RNA", "ru": "MXSIM_RU",
             "rd": "MXSIM_RD"}
_ALIGN = {"rz": "MXSIM_ALIGN_RZ", "rd": "MXSIM_ALIGN_RD", "rne": "MXSIM_ALIGN_RNE",
          "rz-jam": "MXSIM_ALIGN_RZ_JAM"}
_OVERFLOW = {"inf": "MXSIM_OVF_INF", "saturate": "MXSIM_OVF_SATURATE", "ieee": "MXSIM_OVF_IEEE"}
_ZERO = {"positive": "MXSIM_ZERO_POSITIVE", "ieee": "MXSIM_ZERO_IEEE", "c": "MXSIM_ZERO_C"}
_EPILOGUE = {None: "MXSIM_EPI_NONE", "alpha": "MXSIM_EPI_ALPHA", "col-row": "MXSIM_EPI_COL_ROW",
             "block-fma": "MXSIM_EPI_BLOCK_FMA"}
_C_TYPES = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t"}


def default_prefix(spec: UnitSpec) -> str:
    """A C identifier naming the spec: its name, operand formats, scales and D's format."""
    parts = [spec.name, spec.a_format, spec.b_format]
    if spec.scale_format is not None:
        parts.append(f"{spec.scale_format}_{spec.block}" if spec.block else spec.scale_format)
    if spec.epilogue is not None:
        parts.append(spec.epilogue)
    if spec.d_format != "fp32":
        parts.append(spec.d_format)
    text = re.sub(r"[^0-9A-Za-z]+", "_", "_".join(parts)).strip("_").lower()
    return text if text[:1].isalpha() else f"mx_{text}"


def check_exportable(spec: UnitSpec, prefix: str) -> None:
    """Raise MxsimError (one line) unless the C engine computes ``spec`` under ``prefix``."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", prefix):
        raise MxsimError(f"--prefix {prefix!r} is not a C identifier (letters, digits and _, "
                         f"not starting with a digit, at most 63 characters)")
    if not spec.exact and spec.k is None:
        raise MxsimError(f"Unit {spec.name}: k is null but frac_bits is not; the C export "
                         f"needs a fixed instruction K or the exact unit")
    if not spec.exact:
        longest = max(len(s) for s in spec.steps())
        if longest > MAX_STEP_TERMS:
            raise MxsimError(f"Unit {spec.name}: a fused step of {longest} terms; the C export "
                             f"holds at most {MAX_STEP_TERMS} (split the schedule)")
    for name in _format_names(spec):
        f = formats.get(name)
        if f.bits > 8 and (f.kind != "float" or f.specials is not formats.Specials.IEEE):
            raise MxsimError(f"Unit {spec.name}: format {name} is wider than 8 bits without "
                             f"IEEE-style fields; the C export cannot decode it")


def _format_names(spec: UnitSpec) -> list[str]:
    names = [spec.a_format, spec.b_format, spec.acc_format, spec.d_format, "fp32"]
    if spec.scale_format in ("e8m0", "ue4m3"):
        names.append(spec.scale_format)
    if spec.upcast is not None:
        names.append(spec.upcast)
    if spec.reduce is Reduce.TREE:
        names += list(spec.tree_level_formats())
    return list(dict.fromkeys(names))


def _ident(name: str) -> str:
    return "fmt_" + re.sub(r"[^0-9A-Za-z]", "_", name)


def _max_parts(f: formats.Format) -> tuple[int, int]:
    """(sig, exp): the format's largest finite value as sig * 2**exp, sig odd."""
    q = Fraction(f.max)
    exp = 0
    while q.denominator != 1:
        q *= 2
        exp -= 1
    sig = q.numerator
    while sig % 2 == 0:
        sig //= 2
        exp += 1
    return sig, exp


def _format_c(name: str) -> str:
    """A format as C data: its fields, and for formats of 8 bits or fewer the table of every
    code's (sign, class, e, sig) from :meth:`mxsim.formats.Format.fields` and ``classify``."""
    f = formats.get(name)
    ident = _ident(name)
    sig, exp = _max_parts(f)
    ieee = f.kind == "float" and f.specials is formats.Specials.IEEE
    out = []
    table = "NULL"
    if f.bits <= 8:
        codes = np.arange(1 << f.bits, dtype=f.code_dtype)
        sign, e, s = f.fields(codes)
        cls = f.classify(codes)
        rows = [f"{{{int(a)},{int(c)},{int(b)},{int(d)}}}"
                for a, b, d, c in zip(sign, e, s, cls, strict=True)]
        body = textwrap.fill(", ".join(rows), 92, initial_indent="    ",
                             subsequent_indent="    ")
        out.append(f"static const mxsim_code {ident}_codes[{1 << f.bits}] = {{\n{body}\n}};")
        table = f"{ident}_codes"
    inf_code = f.code_of_inf if ieee else 0
    out.append(
        f"static const mxsim_format {ident} = {{\n"
        f"    \"{name}\", {f.bits}, {f.man_bits}, {f.exp_bits}, {f.emin}, {f.emax},\n"
        f"    {int(f.kind == 'int')}, {int(ieee)}, 0x{f.value_mask:X}u, {sig}u, {exp}, "
        f"0x{inf_code:X}u, {table}\n}};")
    return "\n".join(out)


def layout(spec: UnitSpec) -> dict:
    """How the API lays a dot out: element bytes, scales per instruction and their C type."""
    fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)
    fp32_scales = spec.scale_format == "fp32"
    return {"a_size": fa.code_dtype.itemsize, "b_size": fb.code_dtype.itemsize,
            "a_type": _C_TYPES[fa.code_dtype.itemsize], "b_type": _C_TYPES[fb.code_dtype.itemsize],
            "scale_type": "uint32_t" if fp32_scales else "uint8_t",
            "fp32_scales": fp32_scales, "k": spec.k or 0,
            "scales_per_instruction": (spec.k // spec.block if spec.k and spec.block and
                                       not fp32_scales else 0)}


def _steps(spec: UnitSpec) -> tuple[list[int], list[int]]:
    if spec.exact:
        return [0, 0], [0]
    steps = spec.steps() if spec.reduce is Reduce.CHAIN else (tuple(range(spec.k)),)
    starts, index = [0], []
    for s in steps:
        index += list(s)
        starts.append(len(index))
    return starts, index


def provenance_comment(spec: UnitSpec, source: str) -> str:
    """A C comment block: the unit, its digest, where it came from, its TOML."""
    lines = [f"Unit {spec.name}: {spec.instruction}" if spec.instruction else f"Unit {spec.name}",
             f"Spec digest {spec.digest()} (mxsim UnitSpec; its TOML below). From {source}.",
             "Provenance: " + (spec.provenance or "not stated"), ""]
    lines += spec.dumps("toml").splitlines()
    wrapped = []
    for line in lines:
        wrapped += textwrap.wrap(line, 92) or [""]
    return "/*\n" + "\n".join(" * " + w.replace("*/", "* /") for w in wrapped) + "\n */"


def _unit_struct(spec: UnitSpec, prefix: str) -> str:
    fmt = _ident
    starts, index = _steps(spec)
    tree = spec.reduce is Reduce.TREE
    levels = list(spec.tree_level_formats() or (spec.acc_format,)) if tree else []
    lay = layout(spec)
    fp32_block = spec.block if spec.scale_format == "fp32" else None
    block = fp32_block or (spec.block if spec.scale_format in ("e8m0", "ue4m3") else 0)
    if spec.scale_format == "fp32" and fp32_block != 128:
        block = 0                          # per tensor or row-wise: one scale per operand
    scale = fmt(spec.scale_format) if spec.scale_format in ("e8m0", "ue4m3") else None
    parts = [
        f"static const int32_t step_start[] = {{{', '.join(map(str, starts))}}};",
        "static const int32_t step_index[] = {\n" + textwrap.fill(
            ", ".join(map(str, index)), 92, initial_indent="    ", subsequent_indent="    ")
        + "\n};"]
    tree_ref = "NULL"
    if tree:
        parts.append(f"static const mxsim_format *const tree_formats[] = {{"
                     f"{', '.join('&' + fmt(n) for n in levels)}}};")
        tree_ref = "tree_formats"

    def ref(name):
        return f"&{fmt(name)}" if name else "NULL"

    fields = [
        f'"{spec.name}"', ref(spec.a_format), ref(spec.b_format),
        f"&{scale}" if scale else "NULL", ref(spec.upcast), ref(spec.acc_format),
        ref(spec.d_format), ref("fp32"), lay["a_size"], lay["b_size"], block,
        int(lay["fp32_scales"]), spec.k or 0, len(starts) - 1, "step_start", "step_index",
        -1 if spec.frac_bits is None else spec.frac_bits, _ALIGN[spec.align.value],
        int(spec.product.value == "normalized"), int(spec.fold_scales),
        int(spec.upcast_specials == "finite"), int(spec.specials.value == "none"),
        spec.group or 0, int(tree), len(levels), tree_ref, int(spec.c_mode.value == "after"),
        _ROUNDING[spec.c_rounding.value], _ROUNDING[spec.acc_rounding.value], spec.e_zero,
        _OVERFLOW[spec.overflow.value], _ZERO[spec.zero_sign.value], f"0x{spec.d_nan:X}u",
        spec.promote_every or 0, _ROUNDING[spec.promote_rounding.value],
        _EPILOGUE[spec.epilogue], spec.scale_sum_bits or 0,
        int(spec.scale_sum_overflow.value == "saturate"), int(spec.exact)]
    body = textwrap.fill(", ".join(map(str, fields)), 92, initial_indent="    ",
                         subsequent_indent="    ")
    parts.append(f"const mxsim_unit {prefix}_unit = {{\n{body}\n}};")
    return "\n".join(parts)


def _api(spec: UnitSpec, prefix: str, k: int) -> tuple[str, str]:
    """The unit's typed API: (prototypes for the header, definitions)."""
    lay = layout(spec)
    p = prefix
    ops = (f"const {p}_a_t *a, const {p}_b_t *b, const {p}_scale_t *a_scale, "
           f"const {p}_scale_t *b_scale")
    proto = [
        f"/* One instruction: {p.upper()}_K elements of A's row and B's column, the block "
        f"scales\n * ({p.upper()}_SCALES per operand; NULL without), C's code -> D's code. */",
        f"uint32_t {p}_instr({ops}, uint32_t c);",
        "/* The same, filling *trace with the instruction's intermediates. */",
        f"uint32_t {p}_instr_trace({ops}, uint32_t c, mxsim_trace *trace);",
        f"/* A dot product of k elements (a multiple of {p.upper()}_K): instructions chained, "
        f"promotions\n * and FP32-scale epilogues as mxsim's engines run a GEMM's K. */",
        f"uint32_t {p}_dot(size_t k, {ops}, uint32_t c);",
        f"/* n dots, each contiguous: a[n][k], b[n][k], scales [n][{p}_scales_per_dot(k)], "
        f"c[n]\n * (NULL: +0), d[n]. */",
        f"void {p}_dot_batch(size_t n, size_t k, {ops}, const uint32_t *c, uint32_t *d);",
        "/* Scales per operand of a k-element dot. */",
        f"size_t {p}_scales_per_dot(size_t k);"]
    ts = spec.exact and spec.scale_format == "ue4m3"
    if ts:
        proto += ["/* A dot with the NVFP4 per-tensor scale (FP32 bits) applied exactly. */",
                  f"uint32_t {p}_dot_tensor_scaled(size_t k, {ops}, uint32_t c, "
                  f"uint32_t tensor_scale);"]
    if lay["fp32_scales"]:
        per_dot = "k / 128" if spec.block == 128 else "1"
    elif lay["scales_per_instruction"] or (spec.exact and spec.block):
        per_dot = f"k / {spec.block}"
    else:
        per_dot = "0"
    u = f"&{p}_unit"
    defs = [
        f"uint32_t {p}_instr({ops}, uint32_t c)\n{{\n"
        f"    return mxsim_instruction({u}, {k}, a, b, (const uint8_t *)a_scale, "
        f"(const uint8_t *)b_scale, c, NULL);\n}}",
        f"uint32_t {p}_instr_trace({ops}, uint32_t c, mxsim_trace *trace)\n{{\n"
        f"    return mxsim_instruction({u}, {k}, a, b, (const uint8_t *)a_scale, "
        f"(const uint8_t *)b_scale, c, trace);\n}}",
        f"uint32_t {p}_dot(size_t k, {ops}, uint32_t c)\n{{\n"
        f"    return mxsim_dot({u}, k, a, b, a_scale, b_scale, c, NULL);\n}}",
        f"size_t {p}_scales_per_dot(size_t k)\n{{\n    (void)k;\n    return {per_dot};\n}}",
        f"void {p}_dot_batch(size_t n, size_t k, {ops}, const uint32_t *c, uint32_t *d)\n{{\n"
        f"    mxsim_dot_batch({u}, n, k, a, b, a_scale, b_scale, {p}_scales_per_dot(k), c, d);"
        f"\n}}"]
    if ts:
        defs.append(f"uint32_t {p}_dot_tensor_scaled(size_t k, {ops}, uint32_t c, "
                    f"uint32_t tensor_scale)\n{{\n    return mxsim_dot({u}, k, a, b, a_scale, "
                    f"b_scale, c, &tensor_scale);\n}}")
    return "\n".join(proto), "\n\n".join(defs)


def unit_files(spec: UnitSpec, prefix: str, *, source: str, k_exact: int = 32
               ) -> dict[str, str]:
    """The text of ``PREFIX.h`` and ``PREFIX.c`` for ``spec`` (``k_exact``: the instruction K
    the API gives the exact unit, whose K is free). ``source``: where the spec came from."""
    check_exportable(spec, prefix)
    lay = layout(spec)
    k = spec.k or k_exact
    per = lay["scales_per_instruction"] or (k // spec.block if spec.exact and spec.block
                                           and spec.scale_format != "fp32" else 0)
    guard = f"{prefix.upper()}_H"
    head = provenance_comment(spec, source)
    proto, defs = _api(spec, prefix, k)
    header = f"""{head}
/* Generated by `mxsim export-c`; do not edit (export again instead). */
#ifndef {guard}
#define {guard}

#include "mxsim_dot.h"

#ifdef __cplusplus
extern "C" {{
#endif

#define {prefix.upper()}_K {k}            /* elements per instruction */
#define {prefix.upper()}_A_BITS {formats.get(spec.a_format).bits}       /* bits of an A code */
#define {prefix.upper()}_B_BITS {formats.get(spec.b_format).bits}       /* bits of a B code */
#define {prefix.upper()}_BLOCK {spec.block if spec.scale_format in ("e8m0", "ue4m3") else 0}\
        /* elements per block scale (0: none) */
#define {prefix.upper()}_SCALES {per}       /* block scale codes per instruction and operand */
#define {prefix.upper()}_C_BITS {formats.get(spec.d_format).bits}      /* bits of C and D */

typedef {lay['a_type']} {prefix}_a_t;
typedef {lay['b_type']} {prefix}_b_t;
typedef {lay['scale_type']} {prefix}_scale_t;

extern const mxsim_unit {prefix}_unit;

{proto}

#ifdef __cplusplus
}}
#endif
#endif
"""
    formats_c = "\n\n".join(_format_c(n) for n in _format_names(spec))
    source_c = f"""{head}
/* Generated by `mxsim export-c`; do not edit (export again instead). */
#include "{prefix}.h"

{formats_c}

{_unit_struct(spec, prefix)}

{defs}
"""
    return {f"{prefix}.h": header, f"{prefix}.c": source_c}
