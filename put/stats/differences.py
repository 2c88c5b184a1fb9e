"""Paired differences: each ablation against PUT on the same test images, masks and sample draws, bootstrapped
over the sources for both at once (and over seed replicates, crossed, when both have them); each family's
p-values are adjusted by `evaluate.multiplicity` (docs/statistics.md, "Which ablations differ from PUT")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from put.config.evaluation import one_rule
from put.stats.bootstrap import Bootstrap, Interval, difference_interval
from put.stats.multiplicity import mark

KEYS = ["mode", "group", "image", "sample"]
COLUMNS = ["variant", "reference", "mode", "group", "metric", "n", "dropped", "units", "replicates", "mean_reference",
           "mean", "difference", "lo", "hi", "p", "p_adjusted", "significant", "family", "family_size", "method",
           "resamples", "variation", "no_interval", "rule"]


def interval_fields(bounds: Interval) -> dict[str, Any]:
    """A difference row's interval: its bounds, p-value, resamples (NaN for none) and why it has none ("" if it
    has one)."""
    return {"lo": bounds.lo, "hi": bounds.hi, "p": bounds.p, "resamples": bounds.resamples or np.nan,
            "no_interval": bounds.reason or ""}


def mark_family(family: pd.DataFrame, method: str, level: float) -> pd.DataFrame:
    """The differences of one family (a `p` column) with their adjusted p-values (`p_adjusted`) and whether each
    survives the family's correction (`significant`)."""
    adjusted, significant = mark(family["p"].to_numpy(float), method, level)
    return family.assign(p_adjusted=adjusted, significant=significant)


def variation(replicates: tuple[int, int]) -> str:
    """Which sources of variation an interval covers, and with replicates which interval (the caption says so:
    docs/statistics.md, "With seed replicates")."""
    images = "test images (sources resampled)"
    if min(replicates) > 1:
        return f"{images}; training and sampling randomness ({replicates[0]} and {replicates[1]} seed replicates " \
               "resampled; Student's t on the bootstrap standard error with Satterthwaite's degrees of freedom " \
               "from the sources' and the replicates' variance)"
    return images


def finite_pairs(frames: list[pd.DataFrame], metric: str) -> tuple[pd.Index, int]:
    """The rows (indexed by KEYS) where every frame's `metric` is finite, and how many of the rows of the first
    frame are left out: an infinite PSNR (a perfect fill) or a missing value on one side drops the pair from both,
    so that both means are over the same rows."""
    values = pd.concat([frame[metric].astype(float) for frame in frames], axis=1)  # aligned by row
    finite = np.isfinite(values.to_numpy()).all(axis=1)
    return values.index[finite], int(len(frames[0]) - finite.sum())


def _paired_row(cells: list[list[pd.DataFrame]], metric: str, boot: Bootstrap) -> dict[str, Any]:
    """One cell's difference of `metric` (cells: per side, variant then reference, its replicates' rows indexed
    by KEYS) over the pairs where every value is finite: the means, their difference and its interval, the
    images used (`n`) and the pairs left out (`dropped`)."""
    used, dropped = finite_pairs([c for side in cells for c in side], metric)
    a, b = ([c.loc[used] for c in side] for side in cells)
    counts = (len(a), len(b))
    sources = cells[0][0]["source"].nunique()
    fields = {"n": used.get_level_values("image").nunique(), "dropped": dropped, "replicates": min(counts),
              "variation": variation(counts)}
    if not len(used):
        reason = (f"no pair of finite values ({dropped} of {dropped} pairs: a value is infinite, e.g. a perfect "
                  "fill's PSNR, or missing on one side)")
        return {**fields, "units": sources, "mean_reference": np.nan, "mean": np.nan, "difference": np.nan,
                **interval_fields(Interval.missing(reason, sources))}
    bounds = difference_interval([c[metric].to_numpy(float) for c in a], [c["source"].to_numpy() for c in a],
                                 [c[metric].to_numpy(float) for c in b], [c["source"].to_numpy() for c in b], boot,
                                 images=fields["n"])
    means = [float(np.mean([c[metric].mean() for c in side])) for side in (a, b)]
    return {**fields, "units": bounds.units, "mean_reference": means[1], "mean": means[0],
            "difference": means[0] - means[1], **interval_fields(bounds)}


def paired_differences(images: dict[tuple[str, int], pd.DataFrame], metrics: tuple[str, ...], boot: Bootstrap,
                       method: str = "holm", reference: str = "put", name: str = "") -> pd.DataFrame:
    """One row per variant (not `reference`) x mode x group x metric: the difference of the means (over seed
    replicates where both have several), its paired interval, raw and adjusted p-value, survival of the family's
    correction, the variation covered, and the rule. `images`: per-image values per (variant, seed); each mode is
    a family (`name`). Unshared rows are left out; pairs must be finite (`n`, `dropped`). Frames of different
    `rule`s raise MixedRulesError."""
    labels = sorted({variant for variant, _ in images})
    if reference not in labels:
        return pd.DataFrame(columns=COLUMNS)
    replicates = {v: [frame for (variant, _), frame in sorted(images.items()) if variant == v] for v in labels}
    rule = one_rule({f"{v} (seed {seed})": ", ".join(sorted(map(str, frame["rule"].unique())))
                     if "rule" in frame else "unrecorded" for (v, seed), frame in sorted(images.items())},
                    f"paired differences from {reference}{' (' + name + ')' if name else ''}")
    rows = []
    for variant in labels:
        if variant == reference:
            continue
        # the rows the base runs of both have; every replicate is cut to them. Replicates count only where both
        # variants have several: one side's seed spread without the other's would be half the story.
        shared = replicates[variant][0][KEYS].merge(replicates[reference][0][KEYS], on=KEYS)
        both = min(len(replicates[variant]), len(replicates[reference])) > 1
        sides = [[f.merge(shared, on=KEYS) for f in (replicates[v] if both else replicates[v][:1])]
                 for v in (variant, reference)]
        for (mode, group), _ in shared.groupby(["mode", "group"], sort=False):
            cells = [[f[(f["mode"] == mode) & (f["group"] == group)].set_index(KEYS) for f in side] for side in sides]
            for metric in metrics:
                if all(c[metric].isna().all() for side in cells for c in side):
                    continue  # a metric neither measured here (LPIPS of a deterministic mode)
                rows.append({"variant": variant, "reference": reference, "mode": mode, "group": group,
                             "metric": metric, **_paired_row(cells, metric, boot), "rule": rule})
    frame = pd.DataFrame(rows, columns=COLUMNS)
    families = []
    for mode, family in frame.groupby("mode", sort=False):
        label = f"{name + ', ' if name else ''}{mode}: {len(family)} differences from {reference}"
        families.append(mark_family(family, method, boot.level).assign(
            family_size=int(family["p"].notna().sum()), family=label, method=method))
    return pd.concat(families, ignore_index=True) if families else frame
