"""How a sampling run proceeds: its options and how many masked positions each step fixes.

One token per step (the paper's Algorithm 1), N per step (speed for quality), a cosine schedule over S steps
(MaskGIT, `steps`) or the TPAMI release's (`schedule`); `step_counts` is the one function of them all.
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

# Called as progress(done, total) after each forward pass of a sampling call (a server's progress display).
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class SamplingOptions:
    top_k: int = 50
    temperature: float = 1.0  # multiplies the logits, as the released code does (so > 1 sharpens)
    tokens_per_step: int = 1
    position_rule: Literal["logit", "prob"] = "logit"
    steps: int | None = None  # cosine schedule over exactly this many steps; replaces tokens_per_step
    # A TPAMI release schedule (cosine_S, linear_S, average_S; an integer is stored as tokens_per_step), counted per
    # image (`image`) or, as released, from the batch's largest (`batch`: it then depends on batch-mates).
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

    Without `steps`: `tokens_per_step` per step (the released N per step). `steps` = S: min(S, masked_b) steps,
    each fixing at least one, the share still masked after step s following cos(pi/2 * s/S) (MaskGIT).
    `schedule` NAME_S: the TPAMI release's counts per row (scope image) or of the batch's largest (scope batch,
    as released); `length` sizes the count table (default: the largest masked count).
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
