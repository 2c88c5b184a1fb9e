"""Where randomness comes from: seeds derived from tuples of integers, and the sampler's per-step noise.

Every random draw is a pure function of a run seed and a position in the run, never of how the run was split,
resumed or replayed. Sampler noise comes from a torch generator seeded per step, so the eager sampler and the
captured engine agree on the same kind of device (CPU and CUDA generators differ).
"""

from __future__ import annotations

import numpy as np
import torch


def derive_seed(*keys: int) -> int:
    """A 63-bit seed from a tuple of integers (run seed, step, position ...), independent streams per tuple."""
    return int(np.random.SeedSequence([int(k) for k in keys]).generate_state(1, np.uint64)[0] >> 1)


def step_uniform(seed: int, step: int, out: torch.Tensor) -> torch.Tensor:
    """Fill `out` with uniform [0, 1) numbers, a pure function of (seed, step, out's shape and device type)."""
    generator = torch.Generator(out.device).manual_seed(derive_seed(seed, step))
    return out.uniform_(generator=generator)


def run_seed(seed: int | None) -> int:
    """The seed of a sampling run: the one given, or one drawn from torch's global generator."""
    return int(torch.randint(2 ** 62, (), dtype=torch.long)) if seed is None else int(seed)
