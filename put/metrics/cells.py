"""The values of a metrics file by key path, with their intervals, what could not be measured and why, and the
number of test images behind each cell (what the evaluate stage and the frontier study write)."""

from __future__ import annotations

import numpy as np

from put.metrics import MetricValue
from put.metrics.summary import Summary

BOUNDS = ("lo", "hi")  # <metric>_lo, <metric>_hi: the interval's ends beside each value


class Cells:
    """Numbers by key path (for the metrics file), each with its interval's bounds when there is one; for each
    value that could not be measured, why; for each interval, what it resampled or why there is none; and the
    number of test images behind each cell."""

    def __init__(self) -> None:
        self.values: dict = {}
        self.unavailable: dict[str, str] = {}
        self.intervals: dict[str, dict] = {}
        self.counts: dict = {}

    def put(self, keys: tuple[str, ...], name: str, value: float | MetricValue | Summary) -> None:
        interval = value.interval if isinstance(value, Summary) else None
        value = value.value if isinstance(value, Summary) else value
        if isinstance(value, MetricValue):
            if not value.available:
                self.unavailable["/".join((*keys, name))] = value.unavailable
                return
            value = value.value
        if np.isfinite(value):
            node = self.values
            for key in keys:
                node = node.setdefault(key, {})
            node[name] = value if isinstance(value, int) else float(value)
            if interval is not None:
                self.intervals["/".join((*keys, name))] = interval.record()
                if interval.available:
                    node.update({f"{name}_{end}": float(b) for end, b in zip(BOUNDS, (interval.lo, interval.hi))})

    def count(self, keys: tuple[str, ...], n: int) -> None:
        node = self.counts
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = int(n)
