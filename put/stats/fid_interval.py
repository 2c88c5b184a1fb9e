"""FID's bootstrap interval, exact and fast enough for a real evaluation (1,000 images, 2048-d features): a
resample is a vector of weights, and FID of the weighted features comes from n x n Gram matrices through one
symmetric eigenvalue decomposition per resample, resamples spread over the CPU cores; the interval is shifted back
by the bootstrap's bias. The derivation and its timings (docs/statistics.md, "FID's interval")."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from put.stats.bootstrap import Bootstrap, Interval, interval, too_few, unit_counts, workers

BATCH_PER_WORKER = 8  # resamples per thread per statistic call
THREADED = 128  # from this many images on, resamples are spread over threads (below, the overhead dominates)
# From this many images per feature dimension, a resample's FID uses d x d covariances (linear in n) instead of
# n x n Gram matrices (O(n^3)); docs/statistics.md, "FID's interval".
MOMENTS_FROM = 2
CHUNK_ROWS = 4096  # feature rows per block of a weighted covariance: its temporary memory, whatever n


@dataclass(frozen=True)
class Grams:
    """The Gram matrices of two paired feature sets (row i of each: the result and the target of image i)."""

    k11: np.ndarray
    k22: np.ndarray
    k12: np.ndarray

    @classmethod
    def of(cls, features1: np.ndarray, features2: np.ndarray) -> Grams:
        f1, f2 = np.asarray(features1, dtype=np.float64), np.asarray(features2, dtype=np.float64)
        if f1.shape != f2.shape or f1.ndim != 2:
            raise ValueError(f"paired features differ in shape: {f1.shape} and {f2.shape}")
        return cls(f1 @ f1.T, f2 @ f2.T, f1 @ f2.T)

    @property
    def n(self) -> int:
        return len(self.k11)


@dataclass(frozen=True)
class Moments:
    """Two paired feature sets kept as rows, both shifted by their pooled mean (FID does not change): FID of a
    weighted resample from its d x d weighted covariances, O(n d^2 + d^3) time per resample and O(n d) memory."""

    f1: np.ndarray
    f2: np.ndarray

    @classmethod
    def of(cls, features1: np.ndarray, features2: np.ndarray) -> Moments:
        f1, f2 = np.asarray(features1, dtype=np.float64), np.asarray(features2, dtype=np.float64)
        if f1.shape != f2.shape or f1.ndim != 2:
            raise ValueError(f"paired features differ in shape: {f1.shape} and {f2.shape}")
        centre = (f1.mean(axis=0) + f2.mean(axis=0)) / 2  # fewer digits lost in the second moments below
        return cls(f1 - centre, f2 - centre)

    @property
    def n(self) -> int:
        return len(self.f1)


def paired_statistics(features1: np.ndarray, features2: np.ndarray) -> Grams | Moments:
    """What FID's resamples are computed from: the Gram matrices while n is small beside the dimension, else the
    features themselves."""
    n, dim = np.shape(features1)
    return Moments.of(features1, features2) if n >= MOMENTS_FROM * dim else Grams.of(features1, features2)


def _weighted_moments(features: np.ndarray, drawn: np.ndarray, weights: np.ndarray,
                      total: float) -> tuple[np.ndarray, np.ndarray]:
    """Weighted mean and (unbiased) covariance of the drawn rows, summed over blocks of CHUNK_ROWS rows."""
    dim = features.shape[1]
    mean, second = np.zeros(dim), np.zeros((dim, dim))
    for i in range(0, len(drawn), CHUNK_ROWS):
        rows, row_weights = features[drawn[i:i + CHUNK_ROWS]], weights[i:i + CHUNK_ROWS]
        mean += row_weights @ rows
        second += rows.T @ (rows * row_weights[:, None])
    mean /= total
    return mean, (second - total * np.outer(mean, mean)) / (total - 1)


def trace_sqrt_product(s1: np.ndarray, s2: np.ndarray) -> float:
    """tr sqrt(S1 S2) of two covariance matrices: the eigenvalues of S1 S2 are those of R^T S2 R for any
    R R^T = S1 (a Cholesky factor, or the eigendecomposition's where S1 is singular)."""
    try:
        root = np.linalg.cholesky(s1)
    except np.linalg.LinAlgError:
        values, vectors = np.linalg.eigh(s1)
        root = vectors * np.sqrt(np.clip(values, 0.0, None))
    return float(np.sqrt(np.clip(np.linalg.eigvalsh(root.T @ s2 @ root), 0.0, None)).sum())


def fid_moments(moments: Moments, w: np.ndarray) -> float:
    """FID of one weighted resample (w: how often each image was drawn) from its covariances."""
    drawn = np.flatnonzero(w)
    weights, total = w[drawn], float(w[drawn].sum())
    m1, s1 = _weighted_moments(moments.f1, drawn, weights, total)
    m2, s2 = _weighted_moments(moments.f2, drawn, weights, total)
    return float(((m1 - m2) ** 2).sum() + np.trace(s1) + np.trace(s2) - 2 * trace_sqrt_product(s1, s2))


def trace_sqrt(k12: np.ndarray, w: np.ndarray) -> float:
    """tr sqrt(S1 S2) of one weighted resample, from the cross Gram matrix."""
    drawn = np.flatnonzero(w)
    weights, total = w[drawn], w[drawn].sum()
    k = k12[np.ix_(drawn, drawn)]
    rows, cols = k @ weights / total, weights @ k / total
    centred = k - rows[:, None] - cols[None, :] + weights @ rows / total
    root = np.sqrt(weights)
    m = centred * root[:, None] * root[None, :] / (total - 1)
    return float(np.sqrt(np.clip(np.linalg.eigvalsh(m @ m.T), 0.0, None)).sum())


def fid_weighted(grams: Grams | Moments, weights: np.ndarray, pool: ThreadPoolExecutor | None = None) -> np.ndarray:
    """FID of the weighted feature sets, one per row of `weights` (b, n): how often each image was drawn;
    the rows spread over `pool`'s threads when one is given."""
    w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    if isinstance(grams, Moments):
        return np.fromiter((pool.map if pool is not None else map)(lambda row: fid_moments(grams, row), w),
                           dtype=np.float64, count=len(w))
    total = w.sum(axis=1)
    quad = {name: ((w @ k) * w).sum(axis=1) for name, k in (("11", grams.k11), ("22", grams.k22), ("12", grams.k12))}
    gap = (quad["11"] + quad["22"] - 2 * quad["12"]) / total ** 2
    tr1 = (w @ np.diag(grams.k11) - quad["11"] / total) / (total - 1)
    tr2 = (w @ np.diag(grams.k22) - quad["22"] / total) / (total - 1)
    roots = (pool.map if pool is not None else map)(lambda row: trace_sqrt(grams.k12, row), w)
    return gap + tr1 + tr2 - 2 * np.fromiter(roots, dtype=np.float64, count=len(w))


@contextmanager
def resample_pool(n: int) -> Iterator[ThreadPoolExecutor | None]:
    """Threads for the resamples of n images, one BLAS thread each (None for small n: not worth it)."""
    if n < THREADED or workers() < 2:
        yield None
        return
    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(workers()) as pool:
        yield pool


def image_weights(idx: np.ndarray, units: np.ndarray, n_units: int) -> np.ndarray:
    """Resampled unit indices (b, k) -> how often each image was drawn (b, images): its unit's count."""
    return unit_counts(idx, n_units)[:, units]


def _units(units: np.ndarray | None, n: int) -> tuple[np.ndarray, int]:
    """Each image's unit index, and the number of units (default: each image its own unit)."""
    if units is None:
        return np.arange(n), n
    labels, inverse = np.unique(np.asarray(units), return_inverse=True)
    if len(inverse) != n:
        raise ValueError(f"{len(inverse)} units given for {n} images")
    return inverse, len(labels)


def fid_interval(features1: np.ndarray, features2: np.ndarray, units: np.ndarray | None,
                 boot: Bootstrap) -> Interval:
    """Interval of FID between two paired feature sets, resampling the units (sources) of the images."""
    grams = paired_statistics(features1, features2)
    inverse, n_units = _units(units, grams.n)
    if reason := too_few(n_units, grams.n, boot):
        return Interval.missing(reason, n_units)
    estimate = float(fid_weighted(grams, np.ones(grams.n))[0])
    with resample_pool(grams.n) as pool:
        return interval(lambda idx: fid_weighted(grams, image_weights(idx, inverse, n_units), pool), [n_units], boot,
                        batch=BATCH_PER_WORKER * workers(), estimate=estimate)


def fid_difference_interval(features_a: np.ndarray, features_b: np.ndarray, targets: np.ndarray,
                            units: np.ndarray | None, boot: Bootstrap) -> Interval:
    """Paired interval (and p-value) of FID(a, targets) - FID(b, targets): two settings' results on the same
    images, both FIDs on the same resampled images; each bias-shifted, as `fid_interval`."""
    grams_a, grams_b = paired_statistics(features_a, targets), paired_statistics(features_b, targets)
    inverse, n_units = _units(units, grams_a.n)
    if reason := too_few(n_units, grams_a.n, boot):
        return Interval.missing(reason, n_units)
    ones = np.ones(grams_a.n)
    estimate = float(fid_weighted(grams_a, ones)[0] - fid_weighted(grams_b, ones)[0])

    with resample_pool(grams_a.n) as pool:
        def statistic(idx: np.ndarray) -> np.ndarray:
            w = image_weights(idx, inverse, n_units)
            return fid_weighted(grams_a, w, pool) - fid_weighted(grams_b, w, pool)

        return interval(statistic, [n_units], boot, batch=BATCH_PER_WORKER * workers(), estimate=estimate, null=0.0)
