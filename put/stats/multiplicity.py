"""Error control over a family of comparisons (`evaluate.multiplicity`): raw p-values to adjusted ones by Holm
(family-wise error rate, the default), Bonferroni, Benjamini-Hochberg (false discovery rate) or none; a
comparison is marked where its adjusted p-value is at most 1 - level (docs/statistics.md, "Multiplicity")."""

from __future__ import annotations

import numpy as np
from scipy import stats

METHODS: tuple[str, ...] = ("holm", "bonferroni", "bh", "none")
CONTROLS = {"holm": "family-wise error rate", "bonferroni": "family-wise error rate", "bh": "false discovery rate",
            "none": "nothing: each comparison on its own"}
NAMES = {"holm": "Holm's step-down procedure", "bonferroni": "Bonferroni's correction",
         "bh": "the Benjamini-Hochberg procedure", "none": "no correction"}


def adjust(p_values: np.ndarray, method: str) -> np.ndarray:
    """Adjusted p-values of one family (NaN entries, comparisons that were not tested, stay NaN and do not
    count in the family's size)."""
    if method not in METHODS:
        raise ValueError(f"unknown multiplicity method {method!r}; expected one of {', '.join(METHODS)}")
    p = np.asarray(p_values, dtype=float)
    adjusted = np.full(p.shape, np.nan)
    tested = np.isfinite(p)
    raw = p[tested]
    if not len(raw):
        return adjusted
    if method == "none":
        adjusted[tested] = raw
    elif method == "bonferroni":
        adjusted[tested] = np.minimum(1.0, raw * len(raw))
    elif method == "bh":
        adjusted[tested] = stats.false_discovery_control(raw, method="bh")
    else:  # Holm: the i-th smallest times (m - i), made monotone from the smallest up
        order = np.argsort(raw, kind="stable")
        steps = np.minimum(1.0, np.maximum.accumulate(raw[order] * (len(raw) - np.arange(len(raw)))))
        adjusted[np.flatnonzero(tested)[order]] = steps
    return adjusted


def mark(p_values: np.ndarray, method: str, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Adjusted p-values of one family and whether each comparison survives (adjusted p at most 1 - level)."""
    adjusted = adjust(p_values, method)
    return adjusted, np.nan_to_num(adjusted, nan=1.0) <= 1 - level
