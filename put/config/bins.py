"""Hole-ratio bins of the evaluation protocol (docs/fidelity.md, "Metric protocol"): half-open [lo, hi) at the
working resolution, named from integer percentages (`_bin`) so that a name and its bounds cannot disagree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # torch is not imported to read the configuration (the Snakefile, every DAG job's start)
    import torch

Bounds = tuple[float, float]


def _bin(lo_pct: int, hi_pct: int) -> tuple[str, Bounds]:
    return f"{lo_pct}-{hi_pct}", (lo_pct / 100, hi_pct / 100)


# Fine bins for the curves, table groups for the paper's Table 1.
BINS = "bins"  # the fine bins' key in an evaluation's metrics file (beside the table groups' modes)
FINE_BINS: dict[str, Bounds] = dict(_bin(lo, lo + 10) for lo in range(10, 60, 10))
TABLE_GROUPS: dict[str, Bounds] = dict(_bin(lo, hi) for lo, hi in ((20, 40), (40, 60), (10, 60)))
EVAL_GROUPS: dict[str, Bounds] = {**TABLE_GROUPS, **FINE_BINS}


def hole_ratio(keep: np.ndarray | torch.Tensor) -> float:
    """Fraction of hole pixels (keep < 0.5) of a keep-mask of any shape, e.g. (H, W) or (1, H, W)."""
    if hasattr(keep, "detach"):  # a torch.Tensor
        keep = keep.detach().cpu().numpy()
    keep = np.asarray(keep)
    if keep.size == 0:
        raise ValueError("hole_ratio: empty mask")
    # An exact count over the size: the same value for the same mask however it is stored.
    return int(np.count_nonzero(keep < 0.5)) / keep.size
