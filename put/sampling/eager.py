"""The eager sampler (supplementary Algorithm 1 and its variants): `sample_iterative`, one full forward per step,
batched, and `sample_all_at_once` (PUT_all, argmax). A step is `choose` then `write_back`, which the captured
engine (put/sampling/engine.py) replays on fixed buffers; the top-K draw is Gumbel-max over noise of (seed,
step), so both draw the same tokens (docs/model.md, "Sampling")."""

from __future__ import annotations

import torch

from put.models.put_model import PUTModel
from put.models.seeding import run_seed, step_uniform
from put.sampling.schedules import Progress, SamplingOptions, plan, static_shape


def draw_top_k(logits: torch.Tensor, top_k: int, temperature: float, uniform: torch.Tensor) -> torch.Tensor:
    """(..., K) logits -> (...) tokens drawn from the softmax over the top_k largest logits (times temperature).

    Gumbel-max: the candidate with the largest logit + Gumbel noise, -log(-log u), is a draw from that
    softmax; `uniform` (..., top_k) holds the u (put/models/seeding.py), so the draw is a pure function of them."""
    values, candidates = logits.float().topk(min(top_k, logits.shape[-1]), dim=-1)
    gumbel = -torch.log(-torch.log(uniform[..., :values.shape[-1]]))
    choice = (values * temperature + gumbel).argmax(-1, keepdim=True)
    return candidates.gather(-1, choice).squeeze(-1)


def position_scores(logits: torch.Tensor, rule: str) -> torch.Tensor:
    """(B, L, K) -> (B, L) confidence of each position: max logit (released code) or max probability (paper text).
    fp32 whatever the caller's autocast (the transformer's head already returns fp32 logits)."""
    logits = logits.float()
    max_logit = logits.amax(-1)
    return max_logit if rule == "logit" else torch.exp(max_logit - logits.logsumexp(-1))


def sampler_inputs(model: PUTModel, features: torch.Tensor, known_fraction: torch.Tensor | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """features (B, C, h, w) (and each patch's known fraction (B, h, w), for a transformer with a mask
    embedding) -> transformer inputs x (B, L, D), each code's input emb_proj(e) (K, D) and the position
    embeddings (L, D), all fp32. A sampled position's input is its code's: no mask embedding (released)."""
    transformer = model.transformer
    grid = tuple(features.shape[-2:])
    fraction = known_fraction.flatten(1) if known_fraction is not None else None
    x = transformer.embed(features.flatten(2).transpose(1, 2), grid, fraction)
    return x, transformer.project(model.pvqvae.codebook.unmasked_book), transformer.position_embedding(grid)[0]


def choose(logits: torch.Tensor, remaining: torch.Tensor, count: torch.Tensor, uniform: torch.Tensor,
           options: SamplingOptions) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step's decisions: the `width` (uniform's second dimension) most confident masked positions of each
    row, of which the first count[b] are taken (`valid`), and a top-K draw for each. Static shapes, no host
    sync: the engine captures it as it is."""
    width = uniform.shape[1]
    scores = position_scores(logits, options.position_rule).masked_fill(~remaining, float("-inf"))
    best, where = scores.topk(width, dim=1)                                        # (B, width)
    # rows with fewer positions to fix this step fill up with picks they do not take
    valid = (torch.arange(width, device=where.device) < count[:, None]) & (best > float("-inf"))
    picked = logits.gather(1, where.unsqueeze(-1).expand(-1, -1, logits.shape[-1]))
    return where, draw_top_k(picked, options.top_k, options.temperature, uniform), valid


def write_back(x: torch.Tensor, tokens: torch.Tensor, remaining: torch.Tensor, where: torch.Tensor,
               drawn: torch.Tensor, valid: torch.Tensor, code_inputs: torch.Tensor, positions: torch.Tensor) -> None:
    """Fix the valid picks in place: their tokens, their masked flag, and their input, now the drawn code's."""
    drawn = torch.where(valid, drawn, tokens.gather(1, where))
    tokens.scatter_(1, where, drawn)
    remaining.scatter_(1, where, remaining.gather(1, where) & ~valid)
    index = where.unsqueeze(-1).expand(-1, -1, x.shape[-1])
    new_inputs = (code_inputs[drawn] + positions[where]).to(x.dtype)
    x.scatter_(1, index, torch.where(valid.unsqueeze(-1), new_inputs, x.gather(1, index)))


@torch.inference_mode()
def sample_iterative(model: PUTModel, features: torch.Tensor, known: torch.Tensor, tokens: torch.Tensor,
                     options: SamplingOptions = SamplingOptions(), seed: int | None = None,
                     progress: Progress | None = None, known_fraction: torch.Tensor | None = None) -> torch.Tensor:
    """features (B, C, h, w), known (B, h, w), tokens (B, h, w) valid where known -> tokens everywhere.
    `seed` (None: one from torch's global generator) fixes every draw; `progress(done, total)` is called after each
    step; `known_fraction` (B, h, w): see `sampler_inputs`."""
    b, _, h, w = features.shape
    x, code_inputs, positions = sampler_inputs(model, features, known_fraction)
    tokens = torch.where(known, tokens, torch.zeros_like(tokens)).flatten(1).clone()
    remaining = ~known.flatten(1)
    seed = run_seed(seed)
    _, width = static_shape(options, h * w)
    uniform = torch.empty(b, width, min(options.top_k, code_inputs.shape[0]), device=x.device)
    counts = plan(remaining, options)
    for step, count in enumerate(counts):
        logits = model.transformer.forward_embedded(x)                            # (B, L, K)
        where, drawn, valid = choose(logits, remaining, count, step_uniform(seed, step, uniform), options)
        write_back(x, tokens, remaining, where, drawn, valid, code_inputs, positions)
        if progress is not None:
            progress(step + 1, len(counts))
    return tokens.view(b, h, w)


@torch.inference_mode()
def sample_all_at_once(model: PUTModel, features: torch.Tensor, known: torch.Tensor, tokens: torch.Tensor,
                       known_fraction: torch.Tensor | None = None) -> torch.Tensor:
    """Deterministic PUT_all: argmax for every masked position from a single forward."""
    logits = model.transformer(features, known_fraction)
    best = logits.argmax(-1).view_as(tokens)
    return torch.where(known, tokens, best)
