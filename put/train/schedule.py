"""Learning-rate schedule as a pure function of the step: nothing to save or restore when resuming."""

from __future__ import annotations

import math


def warmup_cosine(step: int, total: int, warmup: int, peak: float, floor: float) -> float:
    """Linear warm-up from 0 to `peak` over `warmup` steps, then cosine decay to `floor` at `total`."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return floor + (peak - floor) * 0.5 * (1 + math.cos(math.pi * progress))

