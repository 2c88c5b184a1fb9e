"""A table cell's numbers: each metric's point estimate with its bootstrap interval over the cell's sources (or
why there is none), from per-image values or Inception features. Pure functions: the stages read the files,
call these, and write what they return."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from put.metrics import MetricValue
from put.metrics.fid import Features, fid_of_features
from put.metrics.per_image import PIXEL_METRICS
from put.stats.bootstrap import Bootstrap, Interval, difference_interval, finite_mean, mean_interval
from put.stats.fid_interval import fid_difference_interval, fid_interval


@dataclass(frozen=True)
class Summary:
    """A metric's value (or why there is none) and its interval (or why there is none)."""

    value: MetricValue
    interval: Interval


def unmeasured(value: MetricValue) -> Summary:
    return Summary(value, Interval.missing(value.unavailable or "no value"))


def mean_summary(values: np.ndarray, units: np.ndarray | None, boot: Bootstrap,
                 images: int | None = None) -> Summary:
    """The mean of the finite values (over all samples of the images: a fine bin holds several per image) and its
    interval, resampling the units (default: each value its own); `images`: the test images behind them."""
    mean = finite_mean(values)
    if not np.isfinite(mean):
        return unmeasured(MetricValue.missing("no finite value"))
    return Summary(MetricValue(mean), mean_interval(values, units, boot, images))


def pixel_summaries(per_image: pd.DataFrame, units: np.ndarray, boot: Bootstrap,
                    images: int | None = None) -> dict[str, Summary]:
    """Mean PSNR, SSIM and MAE of a `metrics_table` (one row per result; `units`: each row's source; `images`:
    the test images behind the rows)."""
    return {m: mean_summary(per_image[m].to_numpy(float), units, boot, images) for m in PIXEL_METRICS}


def fid_summary(features: Features | MetricValue, units: np.ndarray | None, boot: Bootstrap) -> Summary:
    """FID of paired features (torch-fidelity's value) and its interval resampling the images' units."""
    value = fid_of_features(features)
    if not value.available:
        return unmeasured(value)
    return Summary(value, fid_interval(*features, units, boot))


def mean_difference(a: pd.Series, b: pd.Series, a_units: np.ndarray, b_units: np.ndarray, boot: Bootstrap,
                    images: int) -> tuple[float, Interval]:
    """Difference of two means of one replicate each (mean(a) - mean(b)) and its paired interval."""
    return (finite_mean(a) - finite_mean(b),
            difference_interval([a.to_numpy(float)], [a_units], [b.to_numpy(float)], [b_units], boot, images))


def fid_difference(features_a: Features, features_b: Features, units: np.ndarray | None,
                   boot: Bootstrap) -> tuple[float, Interval]:
    """FID(a) - FID(b) of two settings' results on the same targets (torch-fidelity's values), paired interval."""
    if not np.array_equal(features_a[1], features_b[1]):
        raise ValueError("a paired FID difference needs the same targets on both sides")
    difference = fid_of_features(features_a).value - fid_of_features(features_b).value
    return difference, fid_difference_interval(features_a[0], features_b[0], features_a[1], units, boot)
