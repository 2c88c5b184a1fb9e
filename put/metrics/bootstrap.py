"""Confidence intervals: a seeded percentile bootstrap over test images, and an interval over seed replicates.

The unit of resampling is the test image (its mask and every sample drawn for it travel with it), so an
interval says how much a metric would move on another test set of the same size from the same distribution.
Every statistic is a function of resampled image indices, evaluated for a whole batch of resamples at once
(scipy.stats.bootstrap with vectorized=True, its `batch` bounding memory); the seed makes it reproducible.

- `mean_interval`: a mean over images, or over all samples of the images (a fine bin holds several samples
  per image): the ratio of summed values to summed counts, infinite values (a perfect result's PSNR) left out
  as the point estimate leaves them out.
- `difference_interval`: paired, two variants on the same images and masks (the same resampled images for
  both): the interval of the difference of their means.
- `fid_interval`: FID recomputed on resampled Inception features, exactly and fast through n x n Gram
  matrices: tr sqrt(S1 S2) is the nuclear norm of C1 C2^T / (n - 1) (C: centred features), so no 2048 x 2048
  matrix square root per resample. A resample's duplicate images bias FID upwards; the interval is shifted
  back by that bias (see `interval`).
- `seed_interval`: mean, standard deviation and Student-t interval over seed replicates (training and
  sampling randomness, the spread that image resampling does not see).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

Statistic = Callable[[np.ndarray], np.ndarray]  # resampled indices (..., n) -> one value per resample (...)
MEMORY = 2 ** 22  # array entries per batch of resamples (about 32 MB per float64 array the statistic makes)


@dataclass(frozen=True)
class Bootstrap:
    """How an interval is drawn: its level, the number of resamples and the seed."""

    level: float = 0.95
    resamples: int = 20000
    seed: int = 0


def interval(statistic: Statistic, n: int, boot: Bootstrap, batch: int | None = None,
             estimate: float | None = None) -> tuple[float, float] | None:
    """Percentile bootstrap interval of `statistic` over n units; None for fewer than 2 units (no spread to
    resample) or a statistic that is not finite on some resample. With `estimate` (the statistic on the data),
    the interval is shifted by the bootstrap's bias, mean(resampled) - estimate: for a statistic that resampling
    with replacement biases (FID: a resample holds duplicates, fewer distinct images), so that the interval
    measures the spread around the estimate rather than the bias."""
    if n < 2:
        return None
    result = stats.bootstrap((np.arange(n),), lambda idx, axis=-1: statistic(np.moveaxis(idx, axis, -1)),
                             n_resamples=boot.resamples, batch=batch or max(1, MEMORY // n), vectorized=True,
                             confidence_level=boot.level, method="percentile", rng=np.random.default_rng(boot.seed))
    shift = float(np.mean(result.bootstrap_distribution)) - estimate if estimate is not None else 0.0
    lo, hi = (float(v) - shift for v in result.confidence_interval)
    return (lo, hi) if np.isfinite(lo) and np.isfinite(hi) else None


def unit_sums(values: np.ndarray, units: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per unit (image): the sum and the count of its finite values; returns (unit labels, sums, counts)."""
    values = np.asarray(values, dtype=float)
    labels, inverse = np.unique(np.asarray(units), return_inverse=True)
    finite = np.isfinite(values)
    sums = np.bincount(inverse, weights=np.where(finite, values, 0.0), minlength=len(labels))
    counts = np.bincount(inverse, weights=finite.astype(float), minlength=len(labels))
    return labels, sums, counts


def _ratio(sums: np.ndarray, counts: np.ndarray) -> Statistic:
    def statistic(idx: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return sums[idx].sum(axis=-1) / counts[idx].sum(axis=-1)
    return statistic


def mean_interval(values: np.ndarray, units: np.ndarray | None, boot: Bootstrap) -> tuple[float, float] | None:
    """Interval of the mean of the finite `values`, resampling the units (default: each value its own unit)."""
    units = np.arange(len(values)) if units is None else units
    _, sums, counts = unit_sums(values, units)
    return interval(_ratio(sums, counts), len(sums), boot)


def difference_interval(a: np.ndarray, b: np.ndarray, units: np.ndarray, boot: Bootstrap) -> tuple[float, float] | None:
    """Paired interval of mean(a) - mean(b): a and b are values of two variants on the same rows (image, mask,
    sample), `units` the image of each row; both means are taken over the same resampled images."""
    _, sums_a, counts_a = unit_sums(a, units)
    _, sums_b, counts_b = unit_sums(b, units)
    mean_a, mean_b = _ratio(sums_a, counts_a), _ratio(sums_b, counts_b)
    return interval(lambda idx: mean_a(idx) - mean_b(idx), len(sums_a), boot)


def _gathered(gram: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """gram[idx_r, idx_c] for every resample: (..., n, n)."""
    return gram[idx[..., :, None], idx[..., None, :]]


def fid_from_grams(k11: np.ndarray, k22: np.ndarray, k12: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """FID of the resampled features (rows idx of both sides, paired), from their Gram matrices
    k11 = F1 F1^T, k22 = F2 F2^T, k12 = F1 F2^T (each n x n): |mu1 - mu2|^2 + tr S1 + tr S2 - 2 tr sqrt(S1 S2)."""
    n = idx.shape[-1]
    g11, g22, g12 = _gathered(k11, idx), _gathered(k22, idx), _gathered(k12, idx)
    total = lambda g: g.sum(axis=(-2, -1))  # noqa: E731
    trace = lambda g: np.trace(g, axis1=-2, axis2=-1)  # noqa: E731
    mean_gap = (total(g11) + total(g22) - 2 * total(g12)) / n ** 2
    tr1 = (trace(g11) - total(g11) / n) / (n - 1)
    tr2 = (trace(g22) - total(g22) / n) / (n - 1)
    centred = (g12 - g12.mean(axis=-1, keepdims=True) - g12.mean(axis=-2, keepdims=True)
               + g12.mean(axis=(-2, -1), keepdims=True))
    tr_covmean = np.linalg.svd(centred / (n - 1), compute_uv=False).sum(axis=-1)
    return mean_gap + tr1 + tr2 - 2 * tr_covmean


def fid_interval(features1: np.ndarray, features2: np.ndarray, boot: Bootstrap) -> tuple[float, float] | None:
    """Interval of FID between two paired feature sets (row i of each: result and ground truth of image i)."""
    f1, f2 = np.asarray(features1, dtype=np.float64), np.asarray(features2, dtype=np.float64)
    if f1.shape != f2.shape:
        raise ValueError(f"paired features differ in shape: {f1.shape} and {f2.shape}")
    n = len(f1)
    k11, k22, k12 = f1 @ f1.T, f2 @ f2.T, f1 @ f2.T
    estimate = float(fid_from_grams(k11, k22, k12, np.arange(n)))
    return interval(lambda idx: fid_from_grams(k11, k22, k12, idx), n, boot, batch=max(1, MEMORY // n ** 2),
                    estimate=estimate)


@dataclass(frozen=True)
class SeedSummary:
    """A metric over seed replicates: their mean and standard deviation (ddof 1), and the Student-t interval
    of the mean (None with one replicate)."""

    n: int
    mean: float
    std: float
    lo: float | None
    hi: float | None


def seed_interval(values: np.ndarray, level: float = 0.95) -> SeedSummary:
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    n = len(values)
    if n == 0:
        return SeedSummary(0, float("nan"), float("nan"), None, None)
    mean = float(values.mean())
    if n == 1:
        return SeedSummary(1, mean, float("nan"), None, None)
    std = float(values.std(ddof=1))
    half = float(stats.t.ppf((1 + level) / 2, n - 1)) * std / np.sqrt(n)
    return SeedSummary(n, mean, std, mean - half, mean + half)
