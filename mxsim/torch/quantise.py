"""Training operands quantised where the tensor lives (a GPU's tensors on the GPU), bit for bit
as :func:`mxsim.quantize.training.quantise` does on the host.

Torch integer and FP32 operations that round the same on any device carry the recipes' own
arithmetic: MX scales by the ``floor`` rule (the FP32 exponent field) and the ``rceil`` rule
(``fl32(amax / max)``, then torch's FP32 ``log2`` rounded up, decided by the same per-binade
thresholds :mod:`mxsim.quantize.rules` derives), NVFP4's FP32 scale arithmetic (1-D and 2-D),
the elements ``fl32(x * 2**-k)`` or ``fl32(x * r)`` rounded by the same 17-bit tables
(:func:`mxsim.quantize.elements.lut`), and the random Hadamard transform's butterflies.

:func:`quantise` returns None where it does not apply (stochastic rounding, whose bits come
from the host's generator; a block holding Inf or NaN; another kind or rule): the caller then
quantises on the host. ``tests/mxsim/test_torch_quantise.py`` holds the two paths equal on CPU
tensors, on random and adversarial blocks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import formats
from ..quantize import training as tr
from ..quantize.elements import lut
from ..quantize.recipes import Quantised
from ..quantize.rules import log2_up_thresholds

__all__ = ["quantise", "rht", "MX_RULES"]

MX_RULES = ("floor", "rceil")
_INF = 0x7F800000
_TABLES: dict = {}


def _table(name: str, device: Any, specials: str = "zero"):
    """An element table of :func:`mxsim.quantize.elements.lut` (or the log2 thresholds) as a
    tensor on ``device``, made once."""
    import torch
    key = (name, specials, str(device))
    if key not in _TABLES:
        arr = (log2_up_thresholds()[1].astype(np.int64) if name == "log2-up"
               else lut(name, "rne", specials))
        _TABLES[key] = torch.from_numpy(np.array(arr, copy=True)).to(device)
    return _TABLES[key]


def _keys(y):
    """:func:`mxsim.quantize.elements.lut_keys` in torch (int64 arithmetic)."""
    import torch
    yb = y.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    t = ((yb & 0x7FFF) + 0x7FFF) | yb
    return t >> 15


def _log2_ceil(bits):
    """``ceil(torch.log2(x))`` of positive FP32 bit patterns (int64), as
    :func:`mxsim.quantize.rules._torch_log2_ceil` (0 gives -1000)."""
    import torch
    kmin = log2_up_thresholds()[0]
    up = _table("log2-up", bits.device)
    k, j = (bits >> 23) - 127, bits & 0x7FFFFF
    sub = k == -127
    if bool(sub.any()):
        man = torch.clamp(j, min=1)
        bl = torch.floor(torch.log2(man.to(torch.float64))).to(torch.int64) + 1
        bl = torch.where((1 << (bl - 1)) > man, bl - 1, bl)       # exact bit length
        bl = torch.where((1 << bl) <= man, bl + 1, bl)
        k = torch.where(sub, bl - 150, k)
        j = torch.where(sub, (man << torch.clamp(24 - bl, 0, 63)) & 0x7FFFFF, j)
    idx = torch.clamp(k - kmin, 0, up.numel() - 1)
    out = torch.where((j == 0) | (j <= up[idx]), k, k + 1)
    return torch.where(bits == 0, torch.full_like(out, -1000), out)


def _pow2(e):
    """``2**e`` as FP32, from its bits (``e`` int64 in [-149, 127])."""
    import torch
    normal = (e + 127) << 23
    sub = torch.ones_like(e) << torch.clamp(e + 149, 0, 22)
    return torch.where(e >= -126, normal, sub).to(torch.int32).view(torch.float32)


def _blocks(x, role: str, block: int):
    """``x`` (2-D FP32) with K last, as rows of ``block``; and how to put codes back."""
    t = x if role == "a" else x.transpose(0, 1)
    t = t.contiguous()
    shape = t.shape
    return t.reshape(-1, block), shape


def _back(codes, shape, role: str, block: int, scale=None):
    c = codes.reshape(shape)
    if scale is not None:
        s = scale.reshape(shape[0], shape[1] // block)
        return (c, s) if role == "a" else (c.transpose(0, 1), s.transpose(0, 1))
    return c if role == "a" else c.transpose(0, 1)


def _mx(x, op: tr.Operand, role: str, stats: tr.OperandStats | None):
    import torch
    fmt = formats.get(op.format)
    rows, shape = _blocks(x, role, op.block)
    bits = rows.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    amax = (bits & 0x7FFFFFFF).amax(dim=1)
    if bool((amax >= _INF).any()):
        return None
    if op.scale_rule == "floor":
        u = torch.clamp((amax >> 23) - 127 - fmt.emax, -127, 128)
        code, k = u + 127, torch.clamp(u, min=-126)
    else:
        a32 = amax.to(torch.int32).view(torch.float32)
        descale = a32 / torch.tensor(fmt.max, dtype=torch.float32, device=x.device)
        c = _log2_ceil(descale.view(torch.int32).to(torch.int64) & 0xFFFFFFFF)
        code = torch.clamp(c, -127, 127) + 127
        k = torch.where(code == 0, torch.zeros_like(code), code - 127)
    y = rows * _pow2(-k)[:, None]
    elems = _table(fmt.name, x.device)[_keys(y)]
    if stats is not None:           # as tr.quantise counts them: |x| > max * the scale
        limit = _pow2(code - 127).to(torch.float64) * fmt.max
        stats.saturated += int((rows.abs().to(torch.float64) > limit[:, None]).sum())
    codes, scale = _back(elems, shape, role, op.block, code.to(torch.uint8))
    return Quantised(codes.cpu().numpy(), op.format, scale.cpu().numpy(), "e8m0", op.block)


def _e4m3_rne(v):
    """E4M3 codes of positive finite FP32 values within [2**-6, 448] (the clamp's range)."""
    return _table("e4m3", v.device)[_keys(v)]


def _nvfp4(x, op: tr.Operand, role: str):
    import torch
    t = x if role == "a" else x.transpose(0, 1)
    t = t.contiguous()
    if not bool(torch.isfinite(t).all()):
        return None
    shape, blk = t.shape, op.block
    rows = t.reshape(-1, blk)
    mag = rows.abs()
    if op.two_d:
        tiles = t.abs().reshape(shape[0] // blk, blk, shape[1] // blk, blk)
        amax = tiles.amax(dim=(1, 3))                           # (R/16, C/16)
        amax = amax.repeat_interleave(blk, dim=0).reshape(-1)    # each row's block's tile
    else:
        amax = mag.amax(dim=1)
    full = float(t.abs().amax()) if t.numel() else 0.0
    f32 = torch.float32
    pts = np.float32(1.0) if full == 0 else np.float32(np.float32(full) /
                                                        np.float32(448.0 * 6.0))
    p = torch.tensor(pts, dtype=f32, device=x.device)
    s = torch.clamp((amax / torch.tensor(6.0, dtype=f32, device=x.device)) / p,
                    min=2.0 ** -6, max=448.0)
    scode = _e4m3_rne(s.to(f32))
    sval = torch.from_numpy(formats.get("e4m3").decode(np.arange(256, dtype=np.uint8))
                            .astype(np.float32)).to(x.device)[scode.long()]
    r = (torch.tensor(1.0, dtype=f32, device=x.device) / p) / sval
    y = rows * r[:, None]
    elems = _table("e2m1", x.device, "torchao")[_keys(y)]
    codes, scale = _back(elems, shape, "a", blk, scode)
    if role == "b":
        codes, scale = codes.transpose(0, 1), scale.transpose(0, 1)
    return Quantised(codes.cpu().numpy(), "e2m1", scale.cpu().numpy(), "ue4m3", blk,
                     np.float32(pts))


def quantise(x: Any, op: tr.Operand, role: str, stats: tr.OperandStats | None = None
             ) -> Quantised | None:
    """``x`` (a 2-D float32 torch tensor, any device) quantised as ``op`` says, or None where
    this path does not apply (see the module docstring); ``stats`` counts as the host's."""
    if op.sr or x.dim() != 2:
        return None
    q = None
    if op.kind == "mx" and op.scale_rule in MX_RULES:
        q = _mx(x, op, role, stats)
    elif op.kind == "nvfp4":
        q = _nvfp4(x, op, role)
    if q is not None and stats is not None:
        stats.elements += x.numel()
    return q


def rht(x: Any, signs: np.ndarray, axis: int) -> Any:
    """:func:`mxsim.quantize.training.rht` in torch: the same FP32 operations in the same
    order."""
    import torch
    v = x.to(torch.float32)
    ax = axis % v.dim()
    if v.shape[ax] % tr.RHT_SIZE:
        raise ValueError(f"The random Hadamard transform takes blocks of {tr.RHT_SIZE}: "
                         f"axis {axis} has length {v.shape[ax]}")
    moved = v.movedim(ax, -1).contiguous()
    b = moved.reshape(-1, tr.RHT_SIZE) * torch.from_numpy(np.array(signs, np.float32)).to(v.device)
    h = 1
    while h < tr.RHT_SIZE:
        b = b.reshape(-1, tr.RHT_SIZE // (2 * h), 2, h)
        u, w = b[:, :, 0, :], b[:, :, 1, :]
        b = torch.stack([u + w, u - w], dim=2)
        h *= 2
    out = b.reshape(moved.shape) * 0.25
    return out.movedim(-1, ax).contiguous()
