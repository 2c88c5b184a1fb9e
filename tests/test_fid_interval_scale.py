"""FID's interval at many images per feature dimension (issue 46): computed from the d x d covariances of each
resample, whose cost grows linearly with the images, instead of n x n Gram matrices (cubic time, square memory)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from scipy import linalg

from put.stats.bootstrap import Bootstrap
from put.stats.fid_interval import Grams, Moments, fid_difference_interval, fid_interval, fid_weighted


def frechet(f1: np.ndarray, f2: np.ndarray) -> float:
    """FID by its definition (scipy's matrix square root), as a reference."""
    s1, s2 = np.cov(f1, rowvar=False), np.cov(f2, rowvar=False)
    return float(((f1.mean(0) - f2.mean(0)) ** 2).sum() + np.trace(s1) + np.trace(s2)
                 - 2 * np.trace(linalg.sqrtm(s1 @ s2)).real)


def test_a_resample_from_covariances_is_the_same_fid_as_from_gram_matrices():
    rng = np.random.default_rng(3)
    f1, f2 = rng.normal(2.0, 1.0, size=(200, 6)), rng.normal(2.4, 1.3, size=(200, 6))
    assert fid_weighted(Moments.of(f1, f2), np.ones(200))[0] == pytest.approx(frechet(f1, f2), rel=1e-9)
    idx = rng.integers(0, 200, size=(4, 200))
    weights = np.stack([np.bincount(row, minlength=200) for row in idx])
    expected = [frechet(f1[row], f2[row]) for row in idx]  # a resample is its drawn rows, duplicates included
    assert fid_weighted(Moments.of(f1, f2), weights) == pytest.approx(expected, rel=1e-9)
    assert fid_weighted(Grams.of(f1, f2), weights) == pytest.approx(expected, rel=1e-5)  # sqrt of a null space's noise


def test_the_interval_of_many_images_holds_no_n_by_n_matrix():
    # 6,000 images: n x n Gram matrices would take 3 x 288 MB (and an eigenproblem of ~3,800 rows per resample)
    rng = np.random.default_rng(0)
    f1, f2 = rng.normal(size=(6000, 4)), rng.normal(0.1, 1.1, size=(6000, 4))
    tracemalloc.start()
    try:
        found = fid_interval(f1, f2, None, Bootstrap(resamples=1100))
        difference = fid_difference_interval(f1, f2 * 1.05, f2, None, Bootstrap(resamples=1100))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * 2 ** 20, f"peak {peak / 2 ** 20:.0f} MiB"
    assert found.lo < frechet(f1, f2) < found.hi
    assert difference.available
