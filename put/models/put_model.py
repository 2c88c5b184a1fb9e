"""PUT = P-VQVAE + UQ-Transformer: what the transformer sees, what it must predict, and decoding."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from put.config import ModelConfig
from put.models.pvqvae import PVQVAE
from put.models.transformer import UQTransformer


class PUTModel(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.pvqvae = PVQVAE(config.pvqvae)
        self.transformer = UQTransformer(config.transformer, config.pvqvae.embed_dim,
                                         config.pvqvae.codebook_size, config.token_grid)

    def transformer_inputs(self, images: torch.Tensor, keep_mask: torch.Tensor, random_quant_prob: float = 0.0,
                           draws: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Encode the masked image. Returns (features (B, C, h, w), known (B, h, w) bool, tokens (B, h, w)).

        `features` are un-quantized (PUT) or quantized everywhere (`tok`); with random_quant_prob > 0 each fully
        known patch is replaced by its code with that probability (`draws`: uniform (B, h, w); None: fresh).
        `tokens` index book `e` wherever `known`.
        """
        features = self.pvqvae.encode(images, keep_mask)
        quantized = self.pvqvae.quantize(features, keep_mask)
        known = self.pvqvae.patch_known(keep_mask)
        if self.config.transformer.input == "quantized":
            features = quantized.vectors
        elif random_quant_prob > 0:
            draws = torch.rand(known.shape, device=known.device) if draws is None else draws
            swap = (known & (draws < random_quant_prob)).unsqueeze(1)
            features = torch.where(swap, quantized.vectors, features)
        return features, known, quantized.indices

    @torch.no_grad()
    def transformer_batch(self, images: torch.Tensor, keep_mask: torch.Tensor,
                          draws: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Training inputs of the frozen P-VQVAE: (features, known, target tokens of the full image in `e`)."""
        target = self.pvqvae.target_tokens(images)
        features, known, _ = self.transformer_inputs(images, keep_mask, self.config.transformer.random_quant_prob,
                                                     draws)
        return features, known, target

    def transformer_loss(self, images: torch.Tensor, keep_mask: torch.Tensor, draws: torch.Tensor | None = None,
                         poly_epsilon: float = 0.0) -> torch.Tensor:
        features, known, target = self.transformer_batch(images, keep_mask, draws)
        logits = self.transformer(features, self.pvqvae.known_fraction(keep_mask))
        return masked_token_loss(logits, target, known, poly_epsilon=poly_epsilon)

    def decode(self, tokens: torch.Tensor, keep_mask: torch.Tensor, images: torch.Tensor,
               composite: bool = False) -> torch.Tensor:
        """Tokens of book `e` -> image in [-1, 1]; `composite` pastes the known pixels back."""
        out = self.pvqvae.decode_tokens(tokens, keep_mask, images).clamp(-1, 1)
        return paste_known(out, keep_mask, images) if composite else out


def paste_known(out: torch.Tensor, keep_mask: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
    """The decoder's output in the holes, the input's pixels where the keep-mask is 1 (shapes broadcast)."""
    return torch.where(keep_mask.bool(), images, out)


def masked_token_loss(logits: torch.Tensor, target: torch.Tensor, known: torch.Tensor,
                      num_masked: torch.Tensor | None = None, poly_epsilon: float = 0.0) -> torch.Tensor:
    """Cross-entropy against the full image's tokens, averaged over masked patches (paper Eq. 5); with
    poly_epsilon > 0 the PolyLoss of TPAMI, ce + epsilon * (1 - p(target)), where p(target) = exp(-ce).
    `num_masked` overrides the count (DDP passes the global count per process)."""
    ce = F.cross_entropy(logits.flatten(0, 1).float(), target.flatten(), reduction="none")
    if poly_epsilon:
        ce = ce + poly_epsilon * (1 - torch.exp(-ce))
    masked = (~known).flatten().float()
    count = masked.sum() if num_masked is None else num_masked
    return (ce * masked).sum() / count.clamp_min(1)
