"""Room on disk for a training's saves: estimated when it starts (a warning if short), checked before each save.

A save writes the new state beside the old one, so at its peak the folder holds two states."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from put.io.diskspace import free_bytes, human
from put.models.checkpoint import Checkpoint, tensor_bytes


def unstarted_moments_bytes(task: object) -> int:
    """Adam's two moments of every weight whose optimizer holds no state yet (before its first step), for the
    task's optimizers: what the saved state will hold once training runs."""
    total = 0
    for optimizer in (v for v in vars(task).values() if isinstance(v, torch.optim.Optimizer)):
        for group in optimizer.param_groups:
            total += sum(2 * p.nelement() * p.element_size() for p in group["params"] if p not in optimizer.state)
    return total


def state_bytes(ckpt: Checkpoint, task: object) -> int:
    """About the size of the saved state `ckpt` (weights, optimizer and other training tensors)."""
    return tensor_bytes(ckpt.model) + tensor_bytes(ckpt.training) + unstarted_moments_bytes(task)


def warn_if_short(out: Path, partial: Path, state: int) -> None:
    """Warns now, not at the first save hours later, when the folder lacks room for two states."""
    held = partial.stat().st_size if partial.exists() else 0
    needed, free = 2 * state - held, free_bytes(out)
    if free is not None and free < needed:
        print(f"warning: {out.parent} has {human(free)} free, but this training's saves need about {human(needed)} "
              f"more ({human(state)} per state, and a save writes the new state beside the old one); it will stop "
              "with exit status 2 at the first save that does not fit, keeping the last good state", file=sys.stderr)
