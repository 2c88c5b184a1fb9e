"""UQ-Transformer: un-quantized P-VQVAE features in, distributions over the codebook `e` out.

Read top to bottom: input projection + learned position embedding, n' pre-LN blocks of bidirectional
multi-head self-attention (SDPA) and a GELU2 MLP, final LayerNorm + linear head onto K tokens.

The input projection and the head always run in fp32, also inside a caller's bf16 autocast: the
sampler ranks positions and tokens by these logits, and bf16 would flip near-ties (they cost ~1% of
a forward). Only the blocks follow the caller's precision.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from put.config import TransformerConfig

GELU2_SCALE = 1.702


def gelu2(x: torch.Tensor) -> torch.Tensor:
    """The released code's GELU approximation x * sigmoid(1.702 x)."""
    return x * torch.sigmoid(GELU2_SCALE * x)


class SelfAttention(nn.Module):
    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.proj = nn.Linear(config.n_embd, config.n_embd)
        self.dropout = config.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_head, d // self.n_head).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.proj = nn.Linear(4 * config.n_embd, config.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """proj(gelu2(fc(x))) with gelu2(z) = silu(1.702 z) / 1.702: both scalings ride on the matmuls'
        alpha/beta, which leaves one fused elementwise op (the hot spot of CPU sampling otherwise)."""
        flat = x.reshape(-1, x.shape[-1])
        z = torch.addmm(self.fc.bias, flat, self.fc.weight.t(), beta=GELU2_SCALE, alpha=GELU2_SCALE)
        z = F.silu(z, inplace=not torch.is_grad_enabled())
        out = torch.addmm(self.proj.bias, z, self.proj.weight.t(), alpha=1 / GELU2_SCALE)
        return out.view(*x.shape[:-1], -1)


class Block(nn.Module):
    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.n_embd)
        self.attn = SelfAttention(config)
        self.ln2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.attn(self.ln1(x)))
        return x + self.drop(self.mlp(self.ln2(x)))


class UQTransformer(nn.Module):
    def __init__(self, config: TransformerConfig, feature_dim: int, codebook_size: int, grid: tuple[int, int]):
        super().__init__()
        self.config = config
        self.grid = grid
        self.input_proj = nn.Linear(feature_dim, config.n_embd)
        # Learned absolute positions, zero at init (released code); no [MASK] token.
        self.pos_emb = nn.Parameter(torch.zeros(1, grid[0] * grid[1], config.n_embd))
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.head = nn.Linear(config.n_embd, codebook_size)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0.0, 0.02)
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def position_embedding(self, grid: tuple[int, int]) -> torch.Tensor:
        """(1, h*w, D); bicubically resized when the token grid differs from the training grid."""
        if tuple(grid) == tuple(self.grid):
            return self.pos_emb
        pos = self.pos_emb.view(1, *self.grid, -1).permute(0, 3, 1, 2)
        pos = F.interpolate(pos, size=tuple(grid), mode="bicubic", align_corners=False)
        return pos.flatten(2).transpose(1, 2)

    def project(self, features: torch.Tensor) -> torch.Tensor:
        """(..., C) encoder features or code vectors -> (..., D), in fp32 (the released emb_proj)."""
        with torch.autocast(features.device.type, enabled=False):
            return self.input_proj(features.float())

    def embed(self, features: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
        """(B, L, C) encoder features or code vectors -> (B, L, D) transformer inputs."""
        return self.project(features) + self.position_embedding(grid)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """(B, L, D) last hidden states -> (B, L, K) fp32 logits."""
        with torch.autocast(x.device.type, enabled=False):
            return self.head(self.ln_f(x.float()))

    def forward_embedded(self, x: torch.Tensor) -> torch.Tensor:
        x = self.drop(x)
        for block in self.blocks:
            x = block(x)
        return self.logits(x)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """(B, C, h, w) features -> (B, h*w, K) logits over book `e`."""
        grid = tuple(features.shape[-2:])
        return self.forward_embedded(self.embed(features.flatten(2).transpose(1, 2), grid))

    def flops_per_forward(self, num_tokens: int) -> int:
        """Multiply-add FLOPs (x2) of one forward pass over num_tokens, matmuls only (they dominate)."""
        d, t = self.config.n_embd, num_tokens
        per_block = 2 * t * 12 * d * d + 2 * 2 * t * t * d  # qkv+proj+mlp, then QK^T and AV
        io = 2 * t * (self.input_proj.in_features * d + d * self.head.out_features)
        return self.config.n_layer * per_block + io

    def optimizer_groups(self, weight_decay: float) -> list[dict]:
        """Weight decay on Linear weights only (not biases, norms or the position embedding)."""
        decay = [m.weight for m in self.modules() if isinstance(m, nn.Linear)]
        decay_ids = {id(p) for p in decay}
        rest = [p for p in self.parameters() if id(p) not in decay_ids]
        return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())



