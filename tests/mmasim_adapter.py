"""Run a vector set through MMA-Sim (PyPI ``mmasim``) for the matching instruction.

Used by the tests only: MMA-Sim is the published model our Blackwell and Hopper presets must
reproduce bit for bit. :func:`run` runs the FP8/FP6/FP4 presets; :func:`run_instruction` any
``mma``/``wgmma`` instruction of fp16, bf16 or tf32 operands, by MMA-Sim's own name.
"""

import numpy as np

PTX = {"e4m3": "e4m3", "e5m2": "e5m2", "e3m2": "e3m2", "e2m3": "e2m3", "e2m1": "e2m1"}


def _operand(torch, codes: np.ndarray, fmt: str):
    """MMA-Sim's operand convention: FP8 as torch float8; FP6 in bits 5:0 and FP4 in bits 5:2
    of a uint8."""
    t = torch.from_numpy(np.ascontiguousarray(codes))
    if fmt == "e4m3":
        return t.view(torch.float8_e4m3fn)
    if fmt == "e5m2":
        return t.view(torch.float8_e5m2)
    if fmt == "e2m1":
        return t << 2
    return t


def _fp4_packed(torch, codes: np.ndarray, axis: int):
    """FP4 two per byte along ``axis``, the FIRST element in the HIGH nibble (MMA-Sim)."""
    c = np.moveaxis(codes, axis, -1)
    packed = (c[..., 0::2] << 4) | c[..., 1::2]
    return torch.from_numpy(np.ascontiguousarray(np.moveaxis(packed, -1, axis)))


def _operand16(torch, codes: np.ndarray, fmt: str):
    """MMA-Sim's 16/19-bit operands: fp16 and bf16 as their torch dtypes; tf32 as float32
    tensors (MMA-Sim truncates them to their top 19 bits, which our codes are)."""
    if fmt == "tf32":
        bits = np.ascontiguousarray(codes.astype(np.uint32) << np.uint32(13))
        return torch.from_numpy(bits.view(np.int32)).view(torch.float32)
    t = torch.from_numpy(np.ascontiguousarray(codes).view(np.int16))
    return t.view(torch.float16 if fmt == "fp16" else torch.bfloat16)


#: Our operand format names as PTX spells them.
PTX16 = {"fp16": "f16", "bf16": "bf16", "tf32": "tf32"}


def run_instruction(kind: str, arch: str, shape_and_type: str, vs) -> np.ndarray:
    """d bit patterns of MMA-Sim's ``sim.MMA`` or ``sim.WGMMA`` (``kind``) for ``arch`` and
    ``shape_and_type`` (e.g. ``"m16n8k16.f32.f16.f16.f32"``) on an unbatched vector set of
    fp16, bf16 or tf32 operands. MMA-Sim sums any K in steps of its L, which chains the
    instruction along K as our engines do when K is a multiple of the instruction's k. C is
    the set's C (+0 when it has none), in the output's format."""
    import torch
    from mmasim.nv_ptx import sim

    f16 = shape_and_type.split(".")[1] == "f16"
    cdt, raw = (torch.float16, np.int16) if f16 else (torch.float32, np.int32)
    c = np.zeros(vs.out_shape, np.uint16 if f16 else np.uint32) if vs.c is None else vs.c
    op = {"mma": sim.MMA, "wgmma": sim.WGMMA}[kind](arch, shape_and_type)
    out = op(_operand16(torch, vs.a, vs.a_format), _operand16(torch, vs.b, vs.b_format),
             torch.from_numpy(np.ascontiguousarray(c).view(raw)).view(cdt))
    traw = torch.int16 if f16 else torch.int32
    return out.contiguous().view(traw).numpy().view(np.uint16 if f16 else np.uint32)


def run(preset: str, vs) -> np.ndarray:
    """d bit patterns of MMA-Sim's model of ``preset`` on an unbatched vector set."""
    import torch
    from mmasim.nv_ptx import sim

    a_fmt, b_fmt = vs.a_format, vs.b_format
    f16 = vs.c_format == "fp16"
    d = "f16" if f16 else "f32"
    c = torch.from_numpy(vs.c.copy()).view(torch.float16 if f16 else torch.float32)
    if preset in ("hopper-wgmma", "hopper-cublas-fast"):
        op = sim.WGMMA("Hopper", f"m64n8k32.{d}.{a_fmt}.{b_fmt}")
        out = op(_operand(torch, vs.a, a_fmt), _operand(torch, vs.b, b_fmt), c)
    elif preset == "blackwell-f8f6f4":
        op = sim.MMA("RTX Blackwell", f"m16n8k32.kind::f8f6f4.{d}.{a_fmt}.{b_fmt}.{d}")
        out = op(_operand(torch, vs.a, a_fmt), _operand(torch, vs.b, b_fmt), c)
    else:
        scale = "ue8m0" if vs.scale_format == "e8m0" else "ue4m3"
        sdt = torch.float8_e8m0fnu if scale == "ue8m0" else torch.float8_e4m3fn
        alpha = torch.from_numpy(vs.a_scale.copy()).view(sdt)
        beta = torch.from_numpy(vs.b_scale.copy()).view(sdt)
        if preset == "blackwell-mxf8f6f4":
            op = sim.MMABlockScale("RTX Blackwell", f"m16n8k32.kind::mxf8f6f4.block32.f32."
                                                    f"{a_fmt}.{b_fmt}.f32.ue8m0")
            # MMA-Sim's ST-FDPA hands every scale block to each k32 chunk, so it models one
            # instruction only: chain the instructions here, D of one the C of the next.
            out = c
            for i in range(vs.k // 32):
                ks = slice(32 * i, 32 * i + 32)
                out = op(_operand(torch, vs.a[:, ks], a_fmt), _operand(torch, vs.b[ks], b_fmt),
                         out, alpha[:, i:i + 1], beta[i:i + 1])
        else:
            kind = preset.removeprefix("blackwell-")
            op = sim.MMABlockScale("RTX Blackwell", f"m16n8k64.kind::{kind}.block{vs.block}."
                                                    f"f32.e2m1.e2m1.f32.{scale}")
            out = op(_fp4_packed(torch, vs.a, 1), _fp4_packed(torch, vs.b, 0), c, alpha, beta)
    raw = torch.int16 if f16 else torch.int32
    return out.contiguous().view(raw).numpy().view(np.uint16 if f16 else np.uint32)
