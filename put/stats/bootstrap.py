"""Confidence intervals from a seeded cluster bootstrap over the test images' sources: means, paired differences
with p-values, intervals over seed replicates. Expanded percentile intervals; with replicates, Student's t with
Satterthwaite's degrees of freedom (docs/statistics.md, "Intervals", "With seed replicates")."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from put.config.evaluation import MIN_TAIL, MetricProtocol, check_resamples, resamples_needed

Statistic = Callable[..., np.ndarray]  # per resampled sample, unit indices (b, k) -> one value per resample (b,)
MEMORY = 2 ** 22  # array entries per batch of resamples (about 32 MB per float64 array the statistic makes)
HALF_WIDTH_DIGITS = 2  # a half width is printed to two significant digits (or fewer: see `printed_decimals`)


def finite_mean(values: np.ndarray | Sequence[float]) -> float:
    """The mean of the finite values (a perfect result's PSNR is +inf); NaN when there is none. Every estimate
    and bootstrap statistic of a mean uses it."""
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if len(finite) else float("nan")


def workers() -> int:
    """The CPU cores this process may use (a Slurm job's, a container's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@dataclass(frozen=True)
class Bootstrap:
    """How an interval is drawn: level, resamples, seed, and the fewest independent units it needs."""

    level: float = 0.95
    resamples: int = 20000
    seed: int = 0
    min_units: int = 2

    def __post_init__(self) -> None:
        check_resamples(self.resamples, self.level)

    @classmethod
    def of(cls, protocol: MetricProtocol, fid: bool = False) -> Bootstrap:
        """The bootstrap `protocol` (params.yaml's evaluate section) asks for: FID's has its own resample count."""
        return cls(protocol.interval_level, protocol.fid_bootstrap_resamples if fid else protocol.bootstrap_resamples,
                   protocol.bootstrap_seed, protocol.min_units)


@dataclass(frozen=True)
class Interval:
    """A bootstrap interval (lo, hi), or why there is none (`reason`). `p`: two-sided p-value of zero (differences);
    `units`: units resampled; `mc_error`: the bounds' larger Monte-Carlo standard error (seed-to-seed movement)."""

    lo: float | None = None
    hi: float | None = None
    p: float | None = None
    units: int = 0
    resamples: int = 0
    mc_error: float | None = None
    reason: str | None = None

    @property
    def available(self) -> bool:
        return self.reason is None

    @classmethod
    def missing(cls, reason: str, units: int = 0) -> Interval:
        return cls(units=units, reason=reason)

    def record(self) -> dict:
        """What the metrics record keeps of an interval beside its bounds."""
        if not self.available:
            return {"units": self.units, "reason": self.reason}
        return {"units": self.units, "resamples": self.resamples, "mc_error": self.mc_error,
                **({"p": self.p} if self.p is not None else {})}


def too_few(units: int, images: int, boot: Bootstrap) -> str | None:
    """Why no interval is drawn from `units` independent units holding `images` images, or None."""
    if units >= max(boot.min_units, 2):
        return None
    plural = lambda count, noun: f"{count} {noun}{'s' * (count != 1)}"  # noqa: E731
    what = plural(units, "image") if units == images else f"{plural(units, 'source')} ({plural(images, 'image')})"
    return f"n = {what}: too few for an interval (evaluate.min_units = {boot.min_units})"


def quantile_error(distribution: np.ndarray, q: float) -> float:
    """Monte-Carlo standard error of the q-quantile of a bootstrap distribution, distribution-free: half the gap
    between the order statistics one binomial standard deviation either side of its rank."""
    ordered = np.sort(distribution)
    count = len(ordered)
    spread = np.sqrt(count * q * (1 - q))
    lo, hi = (int(np.clip(np.round(count * q + s), 0, count - 1)) for s in (-spread, spread))
    return float(ordered[hi] - ordered[lo]) / 2


def expanded_level(level: float, units: int) -> float:
    """The level whose percentile interval is the expanded percentile interval of `level` over `units` units."""
    z = np.sqrt(units / (units - 1)) * stats.t.ppf((1 + level) / 2, units - 1)
    return float(2 * stats.norm.cdf(z) - 1)


@dataclass(frozen=True)
class Spread:
    """One unbiased variance component per independently resampled sample (sources; each variant's replicates)
    and its size k. Resampling k values keeps (k - 1) / k of their variance: `inflation` undoes that, and `df` is
    Satterthwaite's effective degrees of freedom of the sum. Sources alone: n / (n - 1) and n - 1."""

    variances: tuple[float, ...]
    sizes: tuple[int, ...]

    @property
    def replicated(self) -> bool:
        return len(self.sizes) > 1

    @property
    def inflation(self) -> float:
        shrunk = sum(v * (k - 1) / k for v, k in zip(self.variances, self.sizes))
        total = sum(self.variances)
        return total / shrunk if shrunk > 0 else self.sizes[0] / (self.sizes[0] - 1)

    @property
    def df(self) -> float:
        total = sum(self.variances)
        spread = sum(v * v / (k - 1) for v, k in zip(self.variances, self.sizes))
        return total * total / spread if spread > 0 else float(self.sizes[0] - 1)


def p_value(distribution: np.ndarray, units: int, null: float = 0.0, spread: Spread | None = None) -> float:
    """Two-sided p-value of `null`: Student's t (units - 1 df, or `spread`'s) of the centre's distance over the
    standard deviation times sqrt(units / (units - 1)) (or `spread`'s inflation). No spread: 1 at the null, else 0."""
    replicated = spread is not None and spread.replicated
    inflation, df = (spread.inflation, spread.df) if replicated else (units / (units - 1), units - 1)
    centre, sd = float(distribution.mean()), float(distribution.std(ddof=1)) * np.sqrt(inflation)
    if sd == 0:
        return 1.0 if centre == null else 0.0
    return float(2 * stats.t.sf(abs(centre - null) / sd, df))


def resamples_for(level: float, units: int) -> int:
    """The fewest resamples that place the bounds of the expanded `level` interval over `units` units."""
    return resamples_needed(expanded_level(level, units))


def check_expanded(boot: Bootstrap, level: float, units: int) -> None:
    """Enough resamples to place the bounds at the expanded `level` actually used (MIN_TAIL beyond each), not
    only at the nominal one: at 20 units the 95% interval takes the 96.8% percentiles."""
    needed = resamples_needed(level) if level < 1 else None  # 2 units: the expansion is infinite
    if needed is None or boot.resamples < needed:
        nominal = f"{boot.level:.{max(0, int(np.ceil(-np.log10(1 - boot.level))) - 2)}%}"  # 95%, 99.96%
        raise ValueError(f"{boot.resamples} resamples cannot place the bounds of the expanded {nominal} interval "
                         f"over {units} units (its {level:.3%} percentiles); "
                         + (f"at least {needed} are needed ({MIN_TAIL} beyond each bound)" if needed else
                            "no number of resamples can"))


def interval(statistic: Statistic, sizes: Sequence[int], boot: Bootstrap, batch: int | None = None,
             estimate: float | None = None, null: float | None = None, spread: Spread | None = None) -> Interval:
    """Interval of `statistic` over independent samples of `sizes` units (first: the sources; further: seed
    replicates): the expanded percentile interval, or with `spread` over replicates, Student's t on the inflated
    bootstrap standard error (a percentile interval of 2 or 3 replicates cannot reach beyond their range).

    `estimate`: shift by the bootstrap's bias (FID: a resample holds duplicates). `null`: carry its p-value.
    A statistic not finite on some resample gives no interval."""
    units = sizes[0]
    replicated = spread is not None and spread.replicated
    level = boot.level if replicated else expanded_level(boot.level, units)
    if not replicated:
        check_expanded(boot, level, units)
    result = stats.bootstrap(tuple(np.arange(k) for k in sizes),
                             lambda *idx, axis=-1: statistic(*(np.moveaxis(i, axis, -1) for i in idx)),
                             n_resamples=boot.resamples,
                             batch=batch or max(1, MEMORY // sum(sizes)), vectorized=True, paired=False,
                             confidence_level=level, method="percentile", rng=np.random.default_rng(boot.seed))
    distribution = np.asarray(result.bootstrap_distribution, dtype=float)
    if not np.isfinite(distribution).all():
        return Interval.missing("the statistic is not finite on some resample", units)
    shift = float(distribution.mean()) - estimate if estimate is not None else 0.0
    distribution = distribution - shift
    p = p_value(distribution, units, null, spread) if null is not None else None
    if replicated:
        sd = float(distribution.std(ddof=1)) * np.sqrt(spread.inflation)
        half = float(stats.t.ppf((1 + boot.level) / 2, spread.df)) * sd
        centre = float(distribution.mean())
        # the bounds move with the standard error's Monte-Carlo error, about sd / sqrt(2 (B - 1)) relative
        return Interval(centre - half, centre + half, p, units, boot.resamples,
                        half / np.sqrt(2 * (boot.resamples - 1)))
    lo, hi = (float(v) - shift for v in result.confidence_interval)
    tail = (1 - level) / 2
    error = max(quantile_error(distribution, tail), quantile_error(distribution, 1 - tail))
    return Interval(float(lo), float(hi), p, units, boot.resamples, error)


# --------------------------------------------------------------------------------------------- units

@dataclass(frozen=True)
class Sums:
    """Per unit (source), the sum and the count of the finite values of its rows, over the units `labels`."""

    labels: np.ndarray
    sums: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, values: np.ndarray, units: np.ndarray, labels: np.ndarray | None = None) -> Sums:
        values, units = np.asarray(values, dtype=float), np.asarray(units)
        labels = np.unique(units) if labels is None else labels
        position = np.searchsorted(labels, units)
        if (position >= len(labels)).any() or (labels[np.minimum(position, len(labels) - 1)] != units).any():
            raise ValueError("a row's unit is not among the labels")
        finite = np.isfinite(values)
        sums = np.bincount(position, weights=np.where(finite, values, 0.0), minlength=len(labels))
        counts = np.bincount(position, weights=finite.astype(float), minlength=len(labels))
        return cls(labels, sums, counts)


def unit_counts(idx: np.ndarray, units: int) -> np.ndarray:
    """Resampled unit indices (b, k) -> how often each unit was drawn (b, units)."""
    idx = np.asarray(idx).reshape(-1, idx.shape[-1])
    rows = np.arange(len(idx))[:, None] * units
    return np.bincount((rows + idx).ravel(), minlength=len(idx) * units).reshape(len(idx), units).astype(float)


def _ratio(drawn: np.ndarray, sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Means over the resampled units: drawn (b, units) and sums, counts (units,) or (units, replicates)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (drawn @ sums) / (drawn @ counts)


def mean_interval(values: np.ndarray, units: np.ndarray | None, boot: Bootstrap,
                  images: int | None = None) -> Interval:
    """Interval of the mean of the finite `values`, resampling the units (default: each value its own unit).
    `images`: the test images behind the units (for the reason when they are too few)."""
    values = np.asarray(values, dtype=float)
    units = np.arange(len(values)) if units is None else np.asarray(units)
    s = Sums.of(values, units)
    if reason := too_few(len(s.labels), images if images is not None else len(s.labels), boot):
        return Interval.missing(reason, len(s.labels))
    return interval(lambda idx: _ratio(unit_counts(idx, len(s.labels)), s.sums, s.counts), [len(s.labels)], boot)


def difference_interval(a: Sequence[np.ndarray], a_units: Sequence[np.ndarray], b: Sequence[np.ndarray],
                        b_units: Sequence[np.ndarray], boot: Bootstrap, images: int | None = None) -> Interval:
    """Paired interval of mean(a) - mean(b) and its p-value. `a`, `b`: per seed replicate, the rows' values, with
    each row's unit (source); both means are over the same resampled units. Several replicates are resampled too,
    crossed with the units, so the interval covers training and sampling randomness; the estimate is the
    difference of the means over replicates. `images`: the test images behind the units (for the reason)."""
    labels = np.unique(np.concatenate([*map(np.asarray, a_units), *map(np.asarray, b_units)]))
    if reason := too_few(len(labels), images if images is not None else len(labels), boot):
        return Interval.missing(reason, len(labels))
    sides = []
    for values, units in ((a, a_units), (b, b_units)):
        sums = [Sums.of(v, u, labels) for v, u in zip(values, units)]
        sides.append((np.stack([s.sums for s in sums], 1), np.stack([s.counts for s in sums], 1)))
    resampled = [len(s[0][0]) > 1 for s in sides]  # which sides' replicates are resampled

    def statistic(idx: np.ndarray, *replicates: np.ndarray) -> np.ndarray:
        drawn = unit_counts(idx, len(labels))
        drawn_replicates = iter(replicates)
        means = []
        for (sums, counts), resample in zip(sides, resampled):
            per_replicate = _ratio(drawn, sums, counts)  # (b, replicates)
            if resample:
                chosen = np.asarray(next(drawn_replicates)).reshape(len(drawn), -1)
                per_replicate = np.take_along_axis(per_replicate, chosen, 1)
            means.append(per_replicate.mean(1))
        return means[0] - means[1]

    sizes = [len(labels), *(len(s[0][0]) for s, r in zip(sides, resampled) if r)]
    return interval(statistic, sizes, boot, null=0.0, spread=replicate_spread(sides, resampled) if any(resampled)
                    else None)


def replicate_spread(sides: Sequence[tuple[np.ndarray, np.ndarray]], resampled: Sequence[bool]) -> Spread:
    """The variance components of a difference of means over replicates (`sides`: per variant, sums and counts
    (units, replicates)): the sources' from each source's influence on the difference (its linearisation, the
    replicates averaged), each resampled side's from the spread of its replicates' means (ddof 1, over R)."""
    influence, components, sizes = [], [], []
    for (sums, counts), resample in zip(sides, resampled):
        totals = counts.sum(0)
        means = sums.sum(0) / totals
        influence.append(((sums - means * counts) / (totals / len(sums))).mean(1))
        if resample:
            components.append(float(np.var(means, ddof=1)) / len(means))
            sizes.append(len(means))
    difference = influence[0] - influence[1]
    units = len(difference)
    return Spread((float(np.var(difference, ddof=1)) / units, *components), (units, *sizes))


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


def printed_decimals(half: float, mc_error: float | None = None, max_decimals: int = 6) -> int:
    """Decimals for a half width: HALF_WIDTH_DIGITS significant digits, none finer than the bounds' Monte-Carlo
    error, so that no printed digit changes with the bootstrap seed alone."""
    if not half > 0:
        return 0
    decimals = max(0, HALF_WIDTH_DIGITS - 1 - int(np.floor(np.log10(abs(half)))))
    if mc_error is not None and mc_error > 0:
        decimals = min(decimals, max(0, int(np.floor(-np.log10(mc_error)))))
    return min(decimals, max_decimals)
