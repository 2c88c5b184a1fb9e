"""Token sampling for masked patches (supplementary Algorithm 1 and its variants): the eager sampler.

- `sample_iterative`: each step is one full forward; among still-masked positions take the one(s)
  with the largest max-logit (or max probability), draw from its top-K, and replace that position's
  input by the code's embedding. One token per step is the paper's setting; N per step trades
  quality for speed, as the paper's conclusion proposes; a confidence schedule (`steps`) instead fixes
  every masked position in exactly S steps, with per-step counts following a cosine (MaskGIT); the TPAMI
  release's schedules (`schedule`: cosine_S, linear_S, average_S) fix them in S steps by its own arithmetic.
  How many positions each step fixes is one pure function, `step_counts`. Pluralistic results: replicate
  the input B times. All of it is batched: no Python loop over batch elements or positions inside a step.
- `sample_all_at_once`: deterministic PUT_all, every masked position from one forward, argmax.

A step is `choose` (positions and tokens, fp32, static shapes) then `write_back`; the captured engine
(put/sampling_engine.py, used on GPUs) replays exactly these two on fixed buffers. The top-K draw is
Gumbel-max over noise that is a pure function of (seed, step) (put/seeding.py), so the two draw the same
tokens for the same seed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import torch

from put.config.evaluation import parse_schedule
from put.errors import InputError
from put.models.put_model import PUTModel
from put.seeding import run_seed, step_uniform


# Called as progress(done, total) after each forward pass of a sampling call (a server's progress display).
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class SamplingOptions:
    top_k: int = 50
    temperature: float = 1.0  # multiplies the logits, as the released code does (so > 1 sharpens)
    tokens_per_step: int = 1
    position_rule: Literal["logit", "prob"] = "logit"
    steps: int | None = None  # cosine schedule over exactly this many steps; replaces tokens_per_step
    # A TPAMI release schedule string (cosine_S, linear_S, average_S, an integer): replaces tokens_per_step;
    # an integer is stored as tokens_per_step. Its counts come from each image's masked count (`image`) or, as
    # released, from the batch's largest (`batch`: an image's schedule then depends on its batch-mates).
    schedule: str | None = None
    schedule_scope: Literal["image", "batch"] = "image"

    def __post_init__(self) -> None:
        if self.schedule is not None:
            if self.steps is not None:
                raise ValueError("give steps or schedule, not both")
            kind, value = parse_schedule(self.schedule)
            if kind == "tokens":  # one form of the same thing: N tokens per step
                object.__setattr__(self, "tokens_per_step", value)
                object.__setattr__(self, "schedule", None)
        if self.schedule_scope not in ("image", "batch"):
            raise ValueError(f"schedule_scope must be 'image' or 'batch', got {self.schedule_scope!r}")
        if self.top_k < 1:
            raise InputError(f"top_k must be >= 1, got {self.top_k}")
        if self.tokens_per_step < 1:
            raise InputError(f"tokens_per_step must be >= 1, got {self.tokens_per_step}")
        if self.temperature <= 0:
            raise InputError(f"temperature must be > 0, got {self.temperature}")
        if self.position_rule not in ("logit", "prob"):
            raise InputError(f"position_rule must be 'logit' or 'prob', got {self.position_rule!r}")
        if self.steps is not None and self.steps < 1:
            raise InputError(f"steps must be >= 1 (or None for tokens_per_step), got {self.steps}")


def released_counts(name: str, steps: int, masked: int) -> list[int]:
    """The TPAMI release's positions per step for `masked` positions under schedule NAME_steps, with its arithmetic
    (masked_image_inpainting_transformer.py `sample`): weights per step, scaled to `masked` and rounded half to
    even, the rounding error then moved one position at a time, starting at the second step. Where theirs fails
    (average with fewer positions than steps: a division by zero), one position per step."""
    if name == "average" and masked < steps:
        return [1] * masked + [0] * (steps - masked)
    if name.startswith("cosine"):
        weights: list = [math.cos(math.pi * s / steps) + 1 for s in range(steps)]
    elif name.startswith("linear"):
        weights = list(range(steps, 0, -1))
    else:  # average: in their code these are tensors, so the scaling runs in float32
        weights = [torch.tensor(masked) // steps for _ in range(steps)]
    factor = float(masked) / sum(weights)
    counts = [round(float(w * factor)) for w in weights]
    diff, index = sum(counts) - masked, 0
    while diff != 0:
        index = (index + 1) % len(counts)
        counts[index] += 1 if diff < 0 else -1
        diff += 1 if diff < 0 else -1
    return counts[::-1] if name.endswith("-1") else counts


@lru_cache(maxsize=32)
def released_table(name: str, steps: int, length: int) -> torch.Tensor:
    """(length + 1, steps + 1) positions fixed after each step, for every masked count 0..length."""
    done = [[0, *itertools.accumulate(released_counts(name, steps, m))] for m in range(length + 1)]
    return torch.tensor(done)


def step_counts(masked: torch.Tensor, tokens_per_step: int = 1, steps: int | None = None,
                schedule: str | None = None, scope: str = "image", length: int | None = None) -> torch.Tensor:
    """(B,) masked-position counts -> (S, B): how many positions step s fixes in row b; columns sum to `masked`.

    Without `steps`: `tokens_per_step` per step until none is left (the released code's N per step).
    With `steps` = S: exactly S steps (S_b = min(S, masked_b) for rows with fewer positions than steps),
    each fixing at least one; beyond that one, the other masked_b - S positions are spread so that the
    share still masked after step s follows cos(pi/2 * s/S), MaskGIT's cosine schedule.
    With `schedule` NAME_S: the TPAMI release's counts for each row's masked count (scope image), or those of
    the batch's largest, each row fixing what it has left (scope batch, as released); `length`, the positions
    of a row, sizes the table of counts (default: the largest masked count).
    """
    masked = masked.long()
    if schedule is not None:
        name, count = parse_schedule(schedule)
        size = length if length is not None else int(masked.max()) if masked.numel() else 0
        table = released_table(name, count, size).to(masked.device)
        if scope == "batch":
            done = table[masked.max()].unsqueeze(1).minimum(masked)
        else:
            done = table[masked].t()
        return done.diff(dim=0)
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


def static_shape(options: SamplingOptions, length: int) -> tuple[int, int]:
    """(most steps, most positions per step) any run over `length` positions can take under `options`: the
    static shapes of the captured engine, and the number of positions every step ranks (eager and engine
    alike, so that both break ties between equal scores the same way)."""
    if options.schedule is not None:
        name, steps = parse_schedule(options.schedule)
        return steps, int(released_table(name, steps, length).diff(dim=1).max())
    if options.steps is None:
        per_step = min(options.tokens_per_step, length)
        return -(-length // per_step), per_step
    return min(options.steps, length), _cosine_width(options.steps, length)


@lru_cache(maxsize=64)
def _cosine_width(steps: int, length: int) -> int:
    """The most positions one step of the S-step cosine schedule fixes, over every masked count 0..length."""
    return int(step_counts(torch.arange(length + 1), steps=steps).max())


def plan(remaining: torch.Tensor, options: SamplingOptions) -> torch.Tensor:
    """(B, L) positions still masked -> (S, B) positions each step fixes per row; a step no row needs is
    dropped (it would cost a forward for nothing). One host sync."""
    counts = step_counts(remaining.sum(1), min(options.tokens_per_step, remaining.shape[1]), options.steps,
                         options.schedule, options.schedule_scope, remaining.shape[1])
    return counts[counts.amax(1) > 0]


def draw_top_k(logits: torch.Tensor, top_k: int, temperature: float, uniform: torch.Tensor) -> torch.Tensor:
    """(..., K) logits -> (...) tokens drawn from the softmax over the top_k largest logits (times temperature).

    Gumbel-max: the candidate with the largest logit + Gumbel noise, -log(-log u), is a draw from that
    softmax; `uniform` (..., top_k) holds the u (put/seeding.py), so the draw is a pure function of them."""
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
