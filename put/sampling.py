"""Token sampling for masked patches (supplementary Algorithm 1 and its variants).

- `sample_iterative`: each step is one full forward; among still-masked positions take the one(s)
  with the largest max-logit (or max probability), draw from its top-K, and replace that position's
  input by the code's embedding. One token per step is the paper's setting; N per step trades
  quality for speed, as the paper's conclusion proposes; a confidence schedule (`steps`) instead fixes
  every masked position in exactly S steps, with per-step counts following a cosine (MaskGIT). How many
  positions each step fixes is one pure function, `step_counts`. Pluralistic results: replicate the
  input B times. All of it is batched: no Python loop over batch elements or positions inside a step.
- `sample_all_at_once`: deterministic PUT_all, every masked position from one forward, argmax.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

from put.models.put_model import PUTModel


# Called as progress(done, total) after each forward pass of a sampling call (a server's progress display).
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class SamplingOptions:
    top_k: int = 50
    temperature: float = 1.0  # multiplies the logits, as the released code does (so > 1 sharpens)
    tokens_per_step: int = 1
    position_rule: Literal["logit", "prob"] = "logit"
    steps: int | None = None  # cosine schedule over exactly this many steps; replaces tokens_per_step

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {self.top_k}")
        if self.tokens_per_step < 1:
            raise ValueError(f"tokens_per_step must be >= 1, got {self.tokens_per_step}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.position_rule not in ("logit", "prob"):
            raise ValueError(f"position_rule must be 'logit' or 'prob', got {self.position_rule!r}")
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"steps must be >= 1 (or None for tokens_per_step), got {self.steps}")


def step_counts(masked: torch.Tensor, tokens_per_step: int = 1, steps: int | None = None) -> torch.Tensor:
    """(B,) masked-position counts -> (S, B): how many positions step s fixes in row b; columns sum to `masked`.

    Without `steps`: `tokens_per_step` per step until none is left (the released code's N per step).
    With `steps` = S: exactly S steps (S_b = min(S, masked_b) for rows with fewer positions than steps),
    each fixing at least one; beyond that one, the other masked_b - S positions are spread so that the
    share still masked after step s follows cos(pi/2 * s/S), MaskGIT's cosine schedule.
    """
    masked = masked.long()
    if steps is None:
        total = -(-int(masked.max()) // tokens_per_step) if masked.numel() else 0
        done = (torch.arange(total + 1, device=masked.device)[:, None] * tokens_per_step).minimum(masked)
    else:
        s = torch.arange(steps + 1, device=masked.device, dtype=torch.float64)[:, None]
        extra = (masked - steps).clamp_min(0)
        # floor(extra * cos) never exceeds extra, and cos(pi/2) ~ 6e-17 floors to 0: done[S] == masked.
        still = torch.floor(extra * torch.cos(math.pi / 2 * s / steps)).long()
        done = (s.long() + extra - still).minimum(masked)
    return done.diff(dim=0)


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
                     options: SamplingOptions = SamplingOptions(), generator: torch.Generator | None = None,
                     progress: Progress | None = None) -> torch.Tensor:
    """features (B, C, h, w), known (B, h, w), tokens (B, h, w) valid where known -> tokens everywhere."""
    transformer = model.transformer
    b, _, h, w = features.shape
    x = transformer.embed(features.flatten(2).transpose(1, 2), (h, w))           # (B, L, D)
    code_inputs = transformer.project(model.pvqvae.codebook.unmasked_book)       # (K, D): emb_proj(e), fp32
    positions = transformer.position_embedding((h, w))[0]                         # (L, D)
    tokens = torch.where(known, tokens, torch.zeros_like(tokens)).flatten(1).clone()
    remaining = ~known.flatten(1)
    counts = step_counts(remaining.sum(1), min(options.tokens_per_step, h * w), options.steps)   # (S, B)
    widths = counts.amax(1).tolist()  # one host sync for all steps
    steps = [(c, n) for c, n in zip(counts, widths) if n]  # a step no row needs costs no forward
    for step, (count, n) in enumerate(steps, 1):
        logits = transformer.forward_embedded(x)                                  # (B, L, K)
        scores = position_scores(logits, options.position_rule).float().masked_fill(~remaining, float("-inf"))
        best, where = scores.topk(n, dim=1)                                        # (B, n)
        # the first count[b] picks of row b; rows with fewer positions left fill up with -inf picks
        valid = (torch.arange(n, device=where.device) < count[:, None]) & (best > float("-inf"))
        picked = logits.gather(1, where.unsqueeze(-1).expand(-1, -1, logits.shape[-1]))
        drawn = draw_top_k(picked, options.top_k, options.temperature, generator)
        drawn = torch.where(valid, drawn, tokens.gather(1, where))
        tokens.scatter_(1, where, drawn)
        remaining.scatter_(1, where, remaining.gather(1, where) & ~valid)
        new_inputs = (code_inputs[drawn] + positions[where]).to(x.dtype)
        x.scatter_(1, where.unsqueeze(-1).expand(-1, -1, x.shape[-1]),
                   torch.where(valid.unsqueeze(-1), new_inputs, x.gather(1, where.unsqueeze(-1).expand_as(new_inputs))))
        if progress is not None:
            progress(step, len(steps))
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
                  composite: bool = False, progress: Progress | None = None) -> torch.Tensor:
    """images (B, 3, H, W) in [-1, 1], keep_mask (B, 1, H, W) -> inpainted images in [-1, 1]."""
    features, known, tokens = model.transformer_inputs(images, keep_mask)
    if mode == "all":
        tokens = sample_all_at_once(model, features, known, tokens)
        if progress is not None:
            progress(1, 1)
    elif mode == "iterative":
        tokens = sample_iterative(model, features, known, tokens, options, generator, progress)
    else:
        raise ValueError(f"sampling mode must be 'iterative' or 'all', got {mode!r}")
    return model.decode(tokens, keep_mask, images, composite=composite)
