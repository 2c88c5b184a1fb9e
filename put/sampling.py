"""Token sampling for masked patches (supplementary Algorithm 1 and its variants).

- `sample_iterative`: each step is one full forward; among still-masked positions take the one(s)
  with the largest max-logit (or max probability), draw from its top-K, and replace that position's
  input by the code's embedding. One token per step is the paper's setting; N per step trades
  quality for speed, as the paper's conclusion proposes. Pluralistic results: replicate the input B
  times. All of it is batched: no Python loop over batch elements or positions inside a step.
- `sample_all_at_once`: deterministic PUT_all, every masked position from one forward, argmax.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from put.models.put_model import PUTModel


@dataclass(frozen=True)
class SamplingOptions:
    top_k: int = 50
    temperature: float = 1.0  # multiplies the logits, as the released code does (so > 1 sharpens)
    tokens_per_step: int = 1
    position_rule: Literal["logit", "prob"] = "logit"

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {self.top_k}")
        if self.tokens_per_step < 1:
            raise ValueError(f"tokens_per_step must be >= 1, got {self.tokens_per_step}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.position_rule not in ("logit", "prob"):
            raise ValueError(f"position_rule must be 'logit' or 'prob', got {self.position_rule!r}")


def draw_top_k(logits: torch.Tensor, top_k: int, temperature: float, generator: torch.Generator | None) -> torch.Tensor:
    """(..., K) logits -> (...) tokens drawn from the softmax over the top_k largest logits."""
    values, candidates = logits.float().topk(min(top_k, logits.shape[-1]), dim=-1)
    probs = torch.softmax(values * temperature, dim=-1)
    choice = torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1, generator=generator)
    return candidates.reshape(-1, candidates.shape[-1]).gather(1, choice).view(logits.shape[:-1])


def position_scores(logits: torch.Tensor, rule: str) -> torch.Tensor:
    """(B, L, K) -> (B, L) confidence of each position: max logit (released code) or max probability (paper text).
    fp32 whatever the caller's autocast (the transformer's head already returns fp32 logits)."""
    logits = logits.float()
    max_logit = logits.amax(-1)
    return max_logit if rule == "logit" else torch.exp(max_logit - logits.logsumexp(-1))


@torch.inference_mode()
def sample_iterative(model: PUTModel, features: torch.Tensor, known: torch.Tensor, tokens: torch.Tensor,
                     options: SamplingOptions = SamplingOptions(),
                     generator: torch.Generator | None = None) -> torch.Tensor:
    """features (B, C, h, w), known (B, h, w), tokens (B, h, w) valid where known -> tokens everywhere."""
    transformer = model.transformer
    b, _, h, w = features.shape
    x = transformer.embed(features.flatten(2).transpose(1, 2), (h, w))           # (B, L, D)
    code_inputs = transformer.project(model.pvqvae.codebook.unmasked_book)       # (K, D): emb_proj(e), fp32
    positions = transformer.position_embedding((h, w))[0]                         # (L, D)
    tokens = torch.where(known, tokens, torch.zeros_like(tokens)).flatten(1).clone()
    remaining = ~known.flatten(1)
    n = min(options.tokens_per_step, h * w)
    steps = -(-int(remaining.sum(1).max()) // n)
    for _ in range(steps):
        logits = transformer.forward_embedded(x)                                  # (B, L, K)
        scores = position_scores(logits, options.position_rule).float().masked_fill(~remaining, float("-inf"))
        best, where = scores.topk(n, dim=1)                                        # (B, n)
        valid = best > float("-inf")  # rows with fewer than n positions left
        picked = logits.gather(1, where.unsqueeze(-1).expand(-1, -1, logits.shape[-1]))
        drawn = draw_top_k(picked, options.top_k, options.temperature, generator)
        drawn = torch.where(valid, drawn, tokens.gather(1, where))
        tokens.scatter_(1, where, drawn)
        remaining.scatter_(1, where, remaining.gather(1, where) & ~valid)
        new_inputs = (code_inputs[drawn] + positions[where]).to(x.dtype)
        x.scatter_(1, where.unsqueeze(-1).expand(-1, -1, x.shape[-1]),
                   torch.where(valid.unsqueeze(-1), new_inputs, x.gather(1, where.unsqueeze(-1).expand_as(new_inputs))))
    return tokens.view(b, h, w)


@torch.inference_mode()
def sample_all_at_once(model: PUTModel, features: torch.Tensor, known: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Deterministic PUT_all: argmax for every masked position from a single forward."""
    logits = model.transformer(features)
    best = logits.argmax(-1).view_as(tokens)
    return torch.where(known, tokens, best)


@torch.inference_mode()
def inpaint_batch(model: PUTModel, images: torch.Tensor, keep_mask: torch.Tensor, mode: str = "iterative",
                  options: SamplingOptions = SamplingOptions(), generator: torch.Generator | None = None,
                  composite: bool = False) -> torch.Tensor:
    """images (B, 3, H, W) in [-1, 1], keep_mask (B, 1, H, W) -> inpainted images in [-1, 1]."""
    features, known, tokens = model.transformer_inputs(images, keep_mask)
    if mode == "all":
        tokens = sample_all_at_once(model, features, known, tokens)
    elif mode == "iterative":
        tokens = sample_iterative(model, features, known, tokens, options, generator)
    else:
        raise ValueError(f"sampling mode must be 'iterative' or 'all', got {mode!r}")
    return model.decode(tokens, keep_mask, images, composite=composite)
