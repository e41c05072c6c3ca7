"""Every instruction MMA-Sim models (PyPI ``mmasim``), the preset that computes it, and a run.

:func:`instructions` reads MMA-Sim's own ISA lists (``nv_ptx/isa_mma.py``, ``isa_wgmma.py``,
``isa_tcgen05mma.py``, ``amd/isa_mfma.py``) and gives one :class:`Instruction` per name, with
the N (and M) variants of ``wgmma`` and ``tcgen05.mma`` folded into one (the shape's M and N
change no dot product). Each is mapped to the mxsim preset that computes it, or carries the
reason none does. :func:`run` computes ``d`` of a vector set with MMA-Sim's model of one
instruction, chaining it along K (the D of one call the C of the next), as a GEMM would.

torch and mmasim are imported inside functions: ``import gpu.peers.mmasim_ops`` needs neither.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

__all__ = ["Instruction", "instructions", "run", "FORMATS", "OUT_OF_SCOPE"]

#: MMA-Sim's type names (PTX and AMD spellings) as mxsim's format names.
FORMATS = {"f16": "fp16", "bf16": "bf16", "tf32": "tf32", "xf32": "tf32", "f32": "fp32",
           "f64": "fp64", "e4m3": "e4m3", "e5m2": "e5m2", "e3m2": "e3m2", "e2m3": "e2m3",
           "e2m1": "e2m1", "fp8": "e4m3fnuz", "bf8": "e5m2fnuz"}

OUT_OF_SCOPE = ("FP64/FP32 FMA: MMA-Sim models these as one fused multiply-add per k, not a "
                "dot-product unit; mxsim's operands are MX elements, fp16, bf16 and tf32")
_CDNA2 = ("not expressible: CDNA2's FTZ mul-add (MMA-Sim MMA_FTZ_MUL_ADD, P={p}) flushes "
          "subnormal inputs and C to +0 and every FP32 product and sum that is subnormal to a "
          "signed zero; a UnitSpec has no flush-to-zero policy (and no scale-free tree of "
          "rounded FP32 adds)")
_CDNA3 = ("not expressible: CDNA3's TR-FDPA (F=24, F2=31) aligns the products' truncated sum "
          "and C again with floor rounding at two widths (F2+1 bits for the sum, F for C), "
          "floors the result to 31 fraction bits and then rounds it to FP32 (RNE): a UnitSpec "
          "has one alignment width and one rounding per step")
_FNUZ = ("not expressible: the FNUZ FP8 formats (E4M3FNUZ, E5M2FNUZ: bias 8/16, one NaN, no "
         "-0) are not mxsim formats, and the GTR-FDPA (even and odd products summed apart, "
         "then TR-FDPA's two-level floor rounding) has no UnitSpec form")


@dataclass(frozen=True)
class Instruction:
    """One MMA-Sim instruction and the mxsim preset that computes it.

    ``name`` is MMA-Sim's ``shape_and_type`` (or AMD suffix) with N folded to ``N`` (and M to
    ``M``); ``example`` is one real name, to build MMA-Sim's op; ``variants`` how many names
    it stands for. ``preset`` None: ``note`` says why no preset computes it; else ``note``
    says how the preset is run (a C widened to FP32, a chain of short instructions).
    """
    api: str             #: mma, mma-block-scale, wgmma, tcgen05, tcgen05-block-scale, mfma
    arch: str            #: MMA-Sim's architecture name
    name: str
    example: str
    variants: int
    a_format: str
    b_format: str
    c_format: str
    d_format: str
    k: int
    scale_format: str | None = None
    block: int | None = None
    preset: str | None = None
    note: str = ""

    @property
    def key(self) -> str:
        return f"{self.api} {self.arch} {self.name}"


_NV_ARCH = {"Volta": "volta", "Turing": "turing", "Ampere": "ampere", "Ada Lovelace": "ada",
            "Hopper": "hopper", "Blackwell": "blackwell", "RTX Blackwell": "blackwell"}
#: The instruction k each NVIDIA family preset is built for (shorter shapes: see _nv_preset).
_FAMILY_K = {"fp16": 16, "bf16": 16, "tf32": 8}
_FAMILY_K_OLD = {"volta": 4, "turing": 8}


def _nv_preset(api: str, arch: str, a: str, k: int,
               kind: str | None) -> tuple[str | None, str]:
    """The preset for an NVIDIA mma/wgmma/tcgen05 instruction of A in ``a`` and shape k."""
    if a == "fp64":
        return None, OUT_OF_SCOPE
    if kind in ("f8f6f4", "mxf8f6f4", "mxf4", "mxf4nvf4"):
        return f"blackwell-{kind}", ""
    short = _NV_ARCH[arch]
    if a in ("e4m3", "e5m2"):
        if arch == "Ada Lovelace":
            return "ada-mma-f8", "" if k == 32 else "k16 chained twice: ada-mma-f8's two steps"
        if arch == "RTX Blackwell":
            return ("rtx-blackwell-mma-sync-f8" + ("" if k == 32 else "-k16")), ""
        return "hopper-wgmma", ""
    if short == "turing" and k == 4:
        return "volta-mma-f16", "Turing runs m8n8k4 with Volta's parameters (MMA-Sim)"
    fmt = {"fp16": "f16", "bf16": "bf16", "tf32": "tf32"}[a]
    if api == "wgmma":
        return f"hopper-wgmma-{fmt}", ""
    if short in _FAMILY_K_OLD:
        return f"{short}-mma-{fmt}", ""
    family_k = _FAMILY_K[a]
    if k == family_k or kind is not None:
        return f"{short}-mma-{fmt}", ""
    if short in ("ampere", "ada"):
        return f"{short}-mma-{fmt}", f"k{k} chained twice: the k{family_k} preset's steps"
    return f"{short}-mma-{fmt}-k{k}", ""


def _mnk(shape: str) -> tuple[int, int, int]:
    m, n, k = re.fullmatch(r"m(\d+)n(\d+)k(\d+)", shape).groups()
    return int(m), int(n), int(k)


def _fold(shape: str) -> str:
    """``m64n128k16`` -> ``m64nNk16`` (tcgen05's m64/m128 too: ``mMnNk16``)."""
    m, _, k = _mnk(shape)
    return f"m{m}nNk{k}"


def _nvidia(api: str, arch: str, names: list[str]) -> list[Instruction]:
    groups: dict[str, list[str]] = {}
    for name in names:
        shape, rest = name.split(".", 1)
        folded = name if api.startswith("mma") else f"{_fold(shape)}.{rest}"
        if api.startswith("tcgen05"):
            folded = re.sub(r"^m\d+", "mM", folded)
        groups.setdefault(folded, []).append(name)
    out = []
    for folded, members in groups.items():
        q = folded.split(".")
        kind = q[1].removeprefix("kind::") if q[1].startswith("kind::") else None
        q = [x for x in q if not x.startswith("kind::")]
        _, _, k = _mnk(members[0].split(".")[0])
        scale = block = None
        if "block_scale" in api:
            block = int(q[1].removeprefix("block"))
            scale = "e8m0" if q[-1] == "ue8m0" else "ue4m3"
            q = q[:1] + q[2:]
        d, a, b = q[1], q[2], q[3]
        c = q[4] if len(q) > 4 and api == "mma" else d
        a_f, b_f = FORMATS[a], FORMATS[b]
        preset, note = _nv_preset(api, arch, a_f, k, kind)
        if c != d and preset is not None:
            note = ("C in FP16, D in FP32: the preset takes C as FP32; run with C widened "
                    "exactly, one instruction (K = k)")
        out.append(Instruction(api, arch, folded, members[0], len(members), a_f, b_f,
                               FORMATS[c], FORMATS[d], k, scale, block, preset, note))
    return out


def _amd_preset(arch: str, a: str, suffix: str) -> tuple[str | None, str]:
    if a in ("fp32", "fp64"):
        return None, OUT_OF_SCOPE
    if a in ("e4m3fnuz", "e5m2fnuz"):
        return None, _FNUZ
    if arch == "CDNA1":
        return f"cdna1-mfma-{'f16' if a == 'fp16' else 'bf16'}", ""
    if arch == "CDNA2":
        return None, _CDNA2.format(p=2 if a == "bf16" and not suffix.endswith("_1k") else 4)
    return None, _CDNA3


def _amd(arch: str, suffixes: list[str]) -> list[Instruction]:
    out = []
    for suffix in suffixes:
        parts = suffix.split("_")
        shape = next(p for p in parts if re.fullmatch(r"\d+x\d+x\d+\w*", p))
        m, n, k = (int(re.match(r"\d+", x).group()) for x in shape.split("x"))
        types = [p for p in parts[1:] if p in FORMATS] or [re.sub(r"^\d+", "", shape.split(
            "x")[2])]
        a = FORMATS[types[0]]
        b = FORMATS[types[1]] if len(types) > 1 else a
        d = FORMATS[parts[0]]
        preset, note = _amd_preset(arch, a, suffix)
        out.append(Instruction("mfma", arch, suffix, suffix, 1, a, b, d, d, k, preset=preset,
                               note=note))
    return out


def instructions() -> list[Instruction]:
    """Every instruction MMA-Sim 2.1.1 models, folded over N (and tcgen05's M), in its order."""
    from mmasim.amd import isa_mfma
    from mmasim.nv_ptx import isa_mma, isa_tcgen05mma, isa_wgmma

    out: list[Instruction] = []
    for arch, names in isa_mma.mma_shape_and_type.items():
        out += _nvidia("mma", arch, names)
    for arch, names in isa_mma.mma_block_scale_shape_and_type.items():
        out += _nvidia("mma-block_scale", arch, names)
    for arch, names in isa_wgmma.wgmma_shape_and_type.items():
        out += _nvidia("wgmma", arch, names)
    for arch, names in isa_tcgen05mma.tcgen05mma_shape_and_type.items():
        out += _nvidia("tcgen05", arch, names)
    for arch, names in isa_tcgen05mma.tcgen05mma_block_scale_shape_and_type.items():
        out += _nvidia("tcgen05-block_scale", arch, names)
    for arch, suffixes in isa_mfma.arch_mfma_suffix.items():
        out += _amd(arch, suffixes)
    return out


# -- running MMA-Sim ----------------------------------------------------------------------------

def _operand(torch, codes: np.ndarray, fmt: str):
    """MMA-Sim's operand convention: FP8 as torch float8, fp16/bf16 as their dtypes, tf32 as
    FP32 words (MMA-Sim keeps their top 19 bits), FP6 in bits 5:0 and FP4 in bits 5:2 of a
    uint8."""
    codes = np.ascontiguousarray(codes)
    if fmt == "tf32":
        bits = codes.astype(np.uint32) << np.uint32(13)
        return torch.from_numpy(bits.view(np.int32)).view(torch.float32)
    if fmt in ("fp16", "bf16"):
        return torch.from_numpy(codes.view(np.int16)).view(
            torch.float16 if fmt == "fp16" else torch.bfloat16)
    t = torch.from_numpy(codes)
    if fmt in ("e4m3", "e5m2"):
        return t.view(torch.float8_e4m3fn if fmt == "e4m3" else torch.float8_e5m2)
    return t << 2 if fmt == "e2m1" else t


def _fp4_packed(torch, codes: np.ndarray, axis: int):
    """FP4 two per byte along ``axis``, the FIRST element in the HIGH nibble (MMA-Sim)."""
    c = np.moveaxis(codes, axis, -1)
    packed = (c[..., 0::2] << 4) | c[..., 1::2]
    return torch.from_numpy(np.ascontiguousarray(np.moveaxis(packed, -1, axis)))


def _op(ins: Instruction):
    from mmasim.amd import sim as amd
    from mmasim.nv_ptx import sim

    make = {"mma": sim.MMA, "mma-block_scale": sim.MMABlockScale, "wgmma": sim.WGMMA,
            "tcgen05": sim.TCGen05MMA, "tcgen05-block_scale": sim.TCGen05MMABlockScale,
            "mfma": amd.MFMA}[ins.api]
    return make(ins.arch, ins.example)


def _c_tensor(torch, bits: np.ndarray, fmt: str):
    raw = np.int16 if fmt == "fp16" else np.int32
    return torch.from_numpy(np.ascontiguousarray(bits).view(raw)).view(
        torch.float16 if fmt == "fp16" else torch.float32)


def run(ins: Instruction, vs) -> np.ndarray:
    """``d`` bit patterns of MMA-Sim's model of ``ins`` on an unbatched vector set, one MMA-Sim
    call per ``ins.k`` of K, the D of each the C of the next (C: the set's, in ``ins``'s C
    format). The block-scaled kinds get the scales of their k slice."""
    import torch

    op = _op(ins)
    out = _c_tensor(torch, vs.c, ins.c_format)
    packed = ins.k == 64 and ins.scale_format is not None    # kind::mxf4 / mxf4nvf4
    for k0 in range(0, vs.k, ins.k):
        ks = slice(k0, k0 + ins.k)
        if packed:
            a, b = _fp4_packed(torch, vs.a[:, ks], 1), _fp4_packed(torch, vs.b[ks], 0)
        else:
            a, b = _operand(torch, vs.a[:, ks], ins.a_format), _operand(torch, vs.b[ks],
                                                                         ins.b_format)
        if ins.scale_format is None:
            out = op(a, b, out)
            continue
        sdt = torch.float8_e8m0fnu if ins.scale_format == "e8m0" else torch.float8_e4m3fn
        bs = slice(k0 // vs.block, (k0 + ins.k) // vs.block)
        alpha = torch.from_numpy(np.ascontiguousarray(vs.a_scale[:, bs])).view(sdt)
        beta = torch.from_numpy(np.ascontiguousarray(vs.b_scale[bs])).view(sdt)
        out = op(a, b, out, alpha, beta)
    f16 = out.dtype == torch.float16
    raw = out.contiguous().view(torch.int16 if f16 else torch.int32).numpy()
    return raw.view(np.uint16 if f16 else np.uint32)
