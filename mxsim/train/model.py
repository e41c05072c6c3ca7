"""A small character-level GPT (pre-LayerNorm blocks of causal self-attention and a GELU MLP)
whose linear layers are plain ``torch.nn.Linear``, for :func:`mxsim.torch.training.convert` to
swap: ``qkv``, ``proj``, ``fc``, ``out`` in each block and ``lm_head``. Attention's own
products (``q k^T``, the weights times ``v``), LayerNorm, GELU and softmax run in FP32, as the
recipes keep them out of the quantised GEMMs.

Every width is a multiple of 64, so each GEMM's K (widths for fprop and dgrad, tokens per step
for wgrad) fits every unit's instruction K and every recipe's blocks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Config", "MODELS", "build"]


@dataclass(frozen=True)
class Config:
    layers: int
    width: int
    heads: int
    context: int
    batch: int
    vocab: int = 128

    @property
    def tokens(self) -> int:
        """Tokens per step: wgrad's K."""
        return self.context * self.batch

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"tokens_per_step": self.tokens}


MODELS = {
    "tiny": Config(layers=2, width=64, heads=2, context=64, batch=4),
    "small": Config(layers=4, width=128, heads=4, context=64, batch=8),
}


def build(config: Config, seed: int) -> Any:
    """The model, its weights drawn from ``torch.manual_seed(seed)`` (N(0, 0.02), the
    residual projections scaled by 1/sqrt(2 layers), biases 0)."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Block(nn.Module):
        def __init__(self, c: Config):
            super().__init__()
            self.heads = c.heads
            self.ln1, self.ln2 = nn.LayerNorm(c.width), nn.LayerNorm(c.width)
            self.qkv = nn.Linear(c.width, 3 * c.width)
            self.proj = nn.Linear(c.width, c.width)
            self.fc = nn.Linear(c.width, 4 * c.width)
            self.out = nn.Linear(4 * c.width, c.width)

        def forward(self, x):
            b, t, w = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(w, dim=-1)
            q, k, v = (z.view(b, t, self.heads, w // self.heads).transpose(1, 2)
                       for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, w))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class CharGPT(nn.Module):
        def __init__(self, c: Config):
            super().__init__()
            self.config = c
            self.embed = nn.Embedding(c.vocab, c.width)
            self.pos = nn.Embedding(c.context, c.width)
            self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
            self.ln = nn.LayerNorm(c.width)
            self.lm_head = nn.Linear(c.width, c.vocab)

        def forward(self, ids):
            x = self.embed(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
            for blk in self.blocks:
                x = blk(x)
            return self.lm_head(self.ln(x))

    torch.manual_seed(seed)
    net = CharGPT(config)
    for name, p in net.named_parameters():
        if p.dim() == 1 and "ln" not in name:
            nn.init.zeros_(p)
        elif p.dim() == 2:
            std = 0.02 / (2 * config.layers) ** 0.5 if name.endswith(("proj.weight",
                                                                      "out.weight")) else 0.02
            nn.init.normal_(p, 0.0, std)
    return net
