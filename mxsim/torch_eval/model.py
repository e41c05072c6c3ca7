"""A Llama decoder in plain torch, every matmul of weights an ``nn.Linear``.

Built from a GGUF file (llama.cpp's tensor names and layout: q and k rows permuted for
llama.cpp's rotary embedding of adjacent pairs, so the rotation here pairs ``(2i, 2i+1)``) or
drawn at random for a tiny test model. The projections (q, k, v, o, gate, up, down of every
block, and the output head) are ``nn.Linear`` and so go through :func:`mxsim.torch.emulate`;
attention's two batched products run in ``F.scaled_dot_product_attention``, which the
emulation leaves in float32 (FP8 recipes, Transformer Engine's among them, quantise the linear
layers and leave attention in higher precision).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import MxsimError

__all__ = ["Config", "Llama", "from_gguf", "tiny"]


@dataclass(frozen=True)
class Config:
    vocab: int
    dim: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    rope_base: float = 10000.0
    eps: float = 1e-5

    def as_dict(self) -> dict:
        return asdict(self)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rope(x: torch.Tensor, base: float) -> torch.Tensor:
    """Rotary embedding of adjacent pairs; x is (heads, tokens, head_dim)."""
    _, t, hd = x.shape
    inv = base ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
    # Computed on the CPU in float64 (the same bits wherever the model runs), then moved.
    cos, sin = torch.cos(ang).float().to(x.device), torch.sin(ang).float().to(x.device)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        hd = c.dim // c.heads
        self.c = c
        self.attn_norm = RMSNorm(c.dim, c.eps)
        self.q = nn.Linear(c.dim, c.heads * hd, bias=False)
        self.k = nn.Linear(c.dim, c.kv_heads * hd, bias=False)
        self.v = nn.Linear(c.dim, c.kv_heads * hd, bias=False)
        self.o = nn.Linear(c.heads * hd, c.dim, bias=False)
        self.ffn_norm = RMSNorm(c.dim, c.eps)
        self.gate = nn.Linear(c.dim, c.hidden, bias=False)
        self.up = nn.Linear(c.dim, c.hidden, bias=False)
        self.down = nn.Linear(c.hidden, c.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.c
        t, hd = x.shape[0], c.dim // c.heads
        h = self.attn_norm(x)
        q = self.q(h).view(t, c.heads, hd).transpose(0, 1)
        k = self.k(h).view(t, c.kv_heads, hd).transpose(0, 1)
        v = self.v(h).view(t, c.kv_heads, hd).transpose(0, 1)
        q, k = _rope(q, c.rope_base), _rope(k, c.rope_base)
        rep = c.heads // c.kv_heads
        k, v = k.repeat_interleave(rep, dim=0), v.repeat_interleave(rep, dim=0)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(0, 1).reshape(t, c.heads * hd))
        h = self.ffn_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    """``forward(ids) -> logits``: ids (tokens,) int64, logits (tokens, vocab) float32."""

    def __init__(self, c: Config):
        super().__init__()
        self.config = c
        self.embed = nn.Embedding(c.vocab, c.dim)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.dim, c.eps)
        self.head = nn.Linear(c.dim, c.vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x))


_GGUF_NAMES = {"attn_norm": "attn_norm", "attn_q": "q", "attn_k": "k", "attn_v": "v",
               "attn_output": "o", "ffn_norm": "ffn_norm", "ffn_gate": "gate", "ffn_up": "up",
               "ffn_down": "down"}


def from_gguf(g) -> Llama:
    """The Llama a GGUF file describes (``general.architecture = llama``)."""
    m = g.meta
    if m.get("general.architecture") != "llama":
        raise MxsimError(f"model file: architecture {m.get('general.architecture')!r}; "
                         f"torch-eval runs llama models")
    c = Config(vocab=len(m["tokenizer.ggml.tokens"]), dim=m["llama.embedding_length"],
               hidden=m["llama.feed_forward_length"], layers=m["llama.block_count"],
               heads=m["llama.attention.head_count"],
               kv_heads=m.get("llama.attention.head_count_kv", m["llama.attention.head_count"]),
               rope_base=float(m.get("llama.rope.freq_base", 10000.0)),
               eps=float(m["llama.attention.layer_norm_rms_epsilon"]))
    state = {"embed.weight": g.tensors["token_embd.weight"],
             "norm.weight": g.tensors["output_norm.weight"],
             "head.weight": g.tensors.get("output.weight", g.tensors["token_embd.weight"])}
    for name, t in g.tensors.items():
        parts = name.split(".")
        if parts[0] == "blk" and parts[2] in _GGUF_NAMES:
            state[f"blocks.{parts[1]}.{_GGUF_NAMES[parts[2]]}.weight"] = t
    model = Llama(c)
    model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v))
                           for k, v in state.items()})
    return model.eval()


def tiny(*, vocab: int = 256, dim: int = 64, hidden: int = 128, layers: int = 2, heads: int = 4,
         kv_heads: int = 2, seed: int = 0) -> Llama:
    """A small Llama with random weights: N(0, 0.02) as Llama's and GPT-2's initialisation
    (``initializer_range = 0.02``), norms one."""
    model = Llama(Config(vocab, dim, hidden, layers, heads, kv_heads))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.endswith("norm.weight"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    return model.eval()
