"""UQ-Transformer: un-quantized P-VQVAE features in, distributions over codebook `e` out (TPAMI's ViT-base: four
switches of TransformerConfig). Input projection and head run in fp32 even under bf16 (docs/model.md, "The
networks")."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from put.config import TransformerConfig

GELU2_SCALE = 1.702


def gelu2(x: torch.Tensor) -> torch.Tensor:
    """The released code's GELU approximation x * sigmoid(1.702 x)."""
    return x * torch.sigmoid(GELU2_SCALE * x)


def drop_path(x: torch.Tensor, p: float, training: bool, draws: torch.Tensor | None = None) -> torch.Tensor:
    """Stochastic depth: drop a sample's whole residual branch with probability p, scale the kept ones by
    1 / (1 - p) (timm's DropPath, which the released code uses). `draws` (B,) uniform [0, 1) numbers decide
    (kept where < 1 - p); without them, torch's global generator does."""
    if p == 0 or not training:
        return x
    shape = (x.shape[0], *(1,) * (x.dim() - 1))
    if draws is None:
        keep = x.new_empty(shape).bernoulli_(1 - p)
    else:
        keep = (draws < 1 - p).to(x.dtype).view(shape)
    return x * keep / (1 - p)


class SelfAttention(nn.Module):
    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.n_head = config.n_head
        d = config.n_embd
        self.qkv = nn.Linear(d, 3 * d, bias=config.attention_bias == "qkv")
        if config.attention_bias == "qv":  # BEiT: no key bias (it would shift every score of a query alike)
            self.q_bias = nn.Parameter(torch.zeros(d))
            self.v_bias = nn.Parameter(torch.zeros(d))
        self.proj = nn.Linear(d, d)
        self.dropout = config.dropout

    def input_projection(self, x: torch.Tensor) -> torch.Tensor:
        if self.qkv.bias is not None:
            return self.qkv(x)
        return F.linear(x, self.qkv.weight, torch.cat([self.q_bias, torch.zeros_like(self.q_bias), self.v_bias]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.input_projection(x).view(b, t, 3, self.n_head, d // self.n_head).permute(2, 0, 3, 1, 4)
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
    def __init__(self, config: TransformerConfig, drop_path: float = 0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.n_embd)
        self.attn = SelfAttention(config)
        self.ln2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)
        self.drop = nn.Dropout(config.dropout)
        self.drop_path = drop_path

    def forward(self, x: torch.Tensor, path_draws: torch.Tensor | None = None) -> torch.Tensor:
        """`path_draws` (B, 2): the stochastic-depth draws of the attention and the MLP branch."""
        attn_draws, mlp_draws = (None, None) if path_draws is None else path_draws.unbind(1)
        x = x + drop_path(self.drop(self.attn(self.ln1(x))), self.drop_path, self.training, attn_draws)
        return x + drop_path(self.drop(self.mlp(self.ln2(x))), self.drop_path, self.training, mlp_draws)


class UQTransformer(nn.Module):
    def __init__(self, config: TransformerConfig, feature_dim: int, codebook_size: int, grid: tuple[int, int]):
        super().__init__()
        self.config = config
        self.grid = grid
        self.input_proj = nn.Linear(feature_dim, config.n_embd)
        # Learned absolute positions, zero at init (released code); no [MASK] token.
        self.pos_emb = nn.Parameter(torch.zeros(1, grid[0] * grid[1], config.n_embd))
        if config.mask_embedding:  # zero at init (released)
            self.mask_emb = nn.Parameter(torch.zeros(config.n_embd))
        self.drop = nn.Dropout(config.dropout)
        n = config.n_layer  # deeper blocks drop more: linspace(0, drop_path, n)
        rates = [config.drop_path * i / max(1, n - 1) for i in range(n)]
        self.blocks = nn.ModuleList(Block(config, rate) for rate in rates)
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.head = nn.Linear(config.n_embd, codebook_size)
        self.apply(self._init_weights)
        if config.init == "beit":  # each residual branch's output scaled down by its depth
            for depth, block in enumerate(self.blocks, start=1):
                block.attn.proj.weight.data.div_(math.sqrt(2.0 * depth))
                block.mlp.proj.weight.data.div_(math.sqrt(2.0 * depth))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0.0, 0.02)
            if module.bias is not None:
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

    def embed(self, features: torch.Tensor, grid: tuple[int, int],
              known_fraction: torch.Tensor | None = None) -> torch.Tensor:
        """(B, L, C) encoder features or code vectors -> (B, L, D) transformer inputs. With a mask embedding,
        `known_fraction` (B, L) (the share of each patch's pixels that are known) is required."""
        x = self.project(features)
        if self.config.mask_embedding:
            if known_fraction is None:
                raise ValueError("this transformer mixes a mask embedding into each patch by its known fraction: "
                                 "pass known_fraction")
            known = known_fraction.unsqueeze(-1).to(x.dtype)
            x = x * known + self.mask_emb * (1 - known)
        return x + self.position_embedding(grid)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """(B, L, D) last hidden states -> (B, L, K) fp32 logits."""
        with torch.autocast(x.device.type, enabled=False):
            return self.head(self.ln_f(x.float()))

    def forward_embedded(self, x: torch.Tensor, path_draws: torch.Tensor | None = None) -> torch.Tensor:
        """`path_draws` (B, n_layer, 2) uniform [0, 1): the stochastic-depth draws of each block's two branches
        (training passes those of its rows of the global batch, so that any number of processes drops alike)."""
        x = self.drop(x)
        for i, block in enumerate(self.blocks):
            x = block(x, None if path_draws is None else path_draws[:, i])
        return self.logits(x)

    def forward(self, features: torch.Tensor, known_fraction: torch.Tensor | None = None,
                path_draws: torch.Tensor | None = None) -> torch.Tensor:
        """(B, C, h, w) features (and (B, h, w) known fractions, see `embed`) -> (B, h*w, K) logits over book `e`."""
        grid = tuple(features.shape[-2:])
        fraction = known_fraction.flatten(1) if known_fraction is not None else None
        return self.forward_embedded(self.embed(features.flatten(2).transpose(1, 2), grid, fraction), path_draws)

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



