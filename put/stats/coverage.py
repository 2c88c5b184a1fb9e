"""How often the intervals hold the truth: simulations where the truth is known (docs/coverage.md, `put coverage`).
Each check draws many synthetic test sets and runs the evaluation's own functions (docs/statistics.md, "How
often the intervals hold the truth")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from put.stats.bootstrap import Bootstrap, difference_interval, mean_interval, resamples_for
from put.stats.fid_interval import Grams, fid_interval, fid_weighted
from put.stats.multiplicity import mark

Draw = Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]  # n units -> values, unit of each

IMAGES_PER_SOURCE = 3  # the clustered distribution: images per source
SOURCE_SHARE = 0.5  # ... and the share of a value's variance its source carries (intra-class correlation)
SEED_SHARE = 0.9  # the replicate rows: the share of a difference's variance its seed replicates carry
REPLICATE_UNITS = 50  # ... over this many sources (evaluate.min_units: the fewest an interval is drawn from)


def _clustered(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    units = np.repeat(np.arange(n), IMAGES_PER_SOURCE)
    values = (np.sqrt(SOURCE_SHARE) * rng.normal(size=n)[units]
              + np.sqrt(1 - SOURCE_SHARE) * rng.normal(size=len(units)))
    return values, units


# name -> draw of n units with mean 0: values and the unit of each value
DISTRIBUTIONS: dict[str, Draw] = {
    "normal": lambda rng, n: (rng.normal(size=n), np.arange(n)),
    "skewed (exponential)": lambda rng, n: (rng.exponential(size=n) - 1.0, np.arange(n)),
    "heavy-tailed (t, 3 df)": lambda rng, n: (rng.standard_t(3, size=n), np.arange(n)),
    f"clustered ({IMAGES_PER_SOURCE} images per source)": _clustered,
}


@dataclass(frozen=True)
class Result:
    """One row of the study: what was checked, on what, how many sets, and how often it held."""

    check: str
    distribution: str
    n: int
    sets: int
    nominal: float
    observed: float
    resamples: int

    @property
    def standard_error(self) -> float:
        return float(np.sqrt(max(self.observed * (1 - self.observed), 1e-12) / self.sets))

    def row(self) -> dict:
        return {"check": self.check, "distribution": self.distribution, "n": self.n, "sets": self.sets,
                "resamples": self.resamples, "nominal": self.nominal, "observed": self.observed,
                "standard_error": self.standard_error}


def enough(boot: Bootstrap, units: int, seed: int) -> Bootstrap:
    """`boot` with `seed`, and at least the resamples that place its expanded bounds over `units` units (at 5 units
    the 95% interval takes its 99.8% percentiles: 26,203 resamples)."""
    return Bootstrap(boot.level, max(boot.resamples, resamples_for(boot.level, units)), seed, 2)


def _stream(seed: int, name: str, n: int) -> np.random.Generator:
    """One generator per check, distribution and n (independent of the order the study runs them in)."""
    return np.random.default_rng([seed, n, *name.encode()])


def mean_coverage(distribution: str, n: int, sets: int, boot: Bootstrap, seed: int = 0,
                  ignore_units: bool = False) -> Result:
    """Fraction of intervals of the mean (true mean 0) that contain it. `ignore_units`: resample images as if
    independent (what the evaluation did before sources were recorded; the study's counter-example)."""
    rng, draw = _stream(seed, "mean " + distribution, n), DISTRIBUTIONS[distribution]
    hits, resamples = 0, 0
    for k in range(sets):
        values, units = draw(rng, n)
        used = enough(boot, len(values) if ignore_units else n, k)
        found = mean_interval(values, None if ignore_units else units, used)
        hits, resamples = hits + (found.lo <= 0.0 <= found.hi), used.resamples
    return Result("mean" + (", sources ignored" if ignore_units else ""), distribution, n, sets, boot.level,
                  hits / sets, resamples)


def difference_coverage(distribution: str, n: int, sets: int, boot: Bootstrap, seed: int = 0,
                        effect: float = 0.5) -> Result:
    """Fraction of paired intervals of mean(a) - mean(b) that contain the true difference `effect`: b is each
    image's difficulty (shared, large), a the same plus the effect plus noise of `distribution`."""
    rng, draw = _stream(seed, "difference " + distribution, n), DISTRIBUTIONS[distribution]
    hits = 0
    for k in range(sets):
        noise, units = draw(rng, n)
        difficulty = rng.normal(20.0, 3.0, size=int(units.max()) + 1)[units]
        found = difference_interval([difficulty + effect + noise], [units], [difficulty], [units], enough(boot, n, k))
        hits += found.lo <= effect <= found.hi
    return Result("paired difference", distribution, n, sets, boot.level, hits / sets, enough(boot, n, 0).resamples)


def replicate_coverage(replicates: int, sets: int, boot: Bootstrap, seed: int = 0, n: int = REPLICATE_UNITS,
                       effect: float = 0.5) -> Result:
    """Fraction of crossed-bootstrap intervals of a difference over `replicates` seed replicates per variant that
    hold the true difference `effect`, where the replicates carry SEED_SHARE of its variance: each replicate of
    either variant shifts all its values by N(0, tau^2) (training randomness), each value adds N(0, 1), and
    tau^2 = SEED_SHARE / (1 - SEED_SHARE) / n; both share each image's difficulty."""
    rng = _stream(seed, f"replicates {replicates}", n)
    tau = np.sqrt(SEED_SHARE / (1 - SEED_SHARE) / n)
    units, hits = np.arange(n), 0
    for k in range(sets):
        difficulty = rng.normal(20.0, 3.0, size=n)
        a, b = ([difficulty + shift + rng.normal(0, tau) + rng.normal(size=n) for _ in range(replicates)]
                for shift in (effect, 0.0))
        found = difference_interval(a, [units] * replicates, b, [units] * replicates, enough(boot, n, k))
        hits += found.lo <= effect <= found.hi
    return Result("seed replicates, paired difference", f"{replicates} replicates per variant", n, sets, boot.level,
                  float(hits / sets), enough(boot, n, 0).resamples)


def fwer(n: int, families: int, boot: Bootstrap, methods: tuple[str, ...], seed: int = 0, variants: int = 5,
         cells: int = 9) -> list[Result]:
    """Per method, the fraction of null families (every variant as good as the reference) with at least one mark:
    `variants` compared with one reference in `cells` metric x group cells each, n images per cell, normal
    per-image noise; the methods see the same p-values."""
    rng = _stream(seed, "fwer", n)
    any_mark = np.zeros(len(methods))
    units = np.arange(n)
    for k in range(families):
        difficulty = rng.normal(20.0, 3.0, size=(cells, n))
        reference = difficulty + rng.normal(size=(cells, n))
        p = np.array([difference_interval([difficulty[c] + rng.normal(size=n)], [units], [reference[c]], [units],
                                          enough(boot, n, k * 1000 + v * cells + c)).p
                      for v in range(variants) for c in range(cells)])
        any_mark += [bool(mark(p, method, boot.level)[1].any()) for method in methods]
    return [Result(f"family-wise error, {method}", f"null family of {variants * cells}", n, families, 1 - boot.level,
                   float(hits / families), enough(boot, n, 0).resamples) for method, hits in zip(methods, any_mark)]


@dataclass(frozen=True)
class GaussianPair:
    """Paired features: target ~ N(0, I), result = rho * target + sqrt(1 - rho^2) * scale * z + shift (z ~ N(0, I)),
    so the result's covariance is diagonal, diag(rho^2 + (1 - rho^2) scale^2), and the population FID between the
    two is known: |shift|^2 + sum(1 + s2 - 2 sqrt(s2)) over the dimensions."""

    dim: int
    rho: float = 0.6
    shift: float = 0.05

    @property
    def scale(self) -> np.ndarray:
        return np.linspace(0.5, 1.5, self.dim)

    @property
    def population_fid(self) -> float:
        variance = self.rho ** 2 + (1 - self.rho ** 2) * self.scale ** 2
        return float(self.dim * self.shift ** 2 + np.sum(1 + variance - 2 * np.sqrt(variance)))

    def draw(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        target = rng.normal(size=(n, self.dim))
        result = self.rho * target + np.sqrt(1 - self.rho ** 2) * self.scale * rng.normal(size=(n, self.dim)) \
            + self.shift
        return result, target


def expected_fid(pair: GaussianPair, n: int, sets: int, seed: int = 0) -> float:
    """The mean FID of n-image sets (its small-sample bias included), estimated from `sets` draws."""
    rng = _stream(seed, "expected fid", n)
    return float(np.mean([fid_weighted(Grams.of(*pair.draw(rng, n)), np.ones(n))[0] for _ in range(sets)]))


def fid_coverage(pair: GaussianPair, n: int, sets: int, boot: Bootstrap, expected: float,
                 seed: int = 0, progress: bool = False) -> list[Result]:
    """Fractions of FID intervals containing the population FID, and the FID expected of n images (`expected`)."""
    rng = _stream(seed, "fid", n)
    hits = np.zeros(2)
    for k in tqdm(range(sets), desc=f"FID coverage, n = {n}", disable=not progress):
        found = fid_interval(*pair.draw(rng, n), None, enough(boot, n, k))
        hits += [found.lo <= truth <= found.hi for truth in (pair.population_fid, expected)]
    name, resamples = f"Gaussian features, {pair.dim}-d", enough(boot, n, 0).resamples
    return [Result("FID: population FID", name, n, sets, boot.level, float(hits[0] / sets), resamples),
            Result(f"FID: expected FID of {n} images", name, n, sets, boot.level, float(hits[1] / sets),
                   resamples)]
