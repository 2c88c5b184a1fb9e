"""Paired differences: each ablation against PUT on the same test images, masks and sample draws, bootstrapped
over the sources for both at once (and over seed replicates, crossed, when both have them); each family's
p-values are adjusted by `evaluate.multiplicity` (docs/statistics.md, "Which ablations differ from PUT")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from put.config.evaluation import one_rule
from put.stats.bootstrap import Bootstrap, Interval, difference_interval, finite_mean
from put.stats.multiplicity import mark

KEYS = ["mode", "group", "image", "sample"]
COLUMNS = ["variant", "reference", "mode", "group", "metric", "n", "units", "replicates", "difference", "lo", "hi",
           "p", "p_adjusted", "significant", "family", "family_size", "method", "resamples", "variation",
           "no_interval", "rule"]


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


def paired_differences(images: dict[tuple[str, int], pd.DataFrame], metrics: tuple[str, ...], boot: Bootstrap,
                       method: str = "holm", reference: str = "put", name: str = "") -> pd.DataFrame:
    """One row per variant (other than `reference`) x mode x group x metric: the difference of the means
    (variant - reference; over seed replicates where both have several), its paired interval, raw and adjusted
    p-value, whether it survives the family's correction, which sources of variation the interval covers, and the
    compositing rule of both sides.
    `images`: the per-image values of each (variant, seed); every mode of them is one family (`name` labels it).
    Rows the two variants do not share, and metrics either lacks, are left out. Frames with a `rule` column (the
    compositing rule of their evaluation, put.stages.evaluate.read_images) are paired only with frames of the
    same rule: MixedRulesError otherwise."""
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
            cells = [[f[(f["mode"] == mode) & (f["group"] == group)] for f in side] for side in sides]
            for metric in metrics:
                a, b = ([c[[metric, "source", "image"]].dropna() for c in side] for side in cells)
                if any(c.empty for c in (*a, *b)):
                    continue
                values = [[c[metric].to_numpy(float) for c in side] for side in (a, b)]
                units = [[c["source"].to_numpy() for c in side] for side in (a, b)]
                bounds = difference_interval(values[0], units[0], values[1], units[1], boot,
                                             images=a[0]["image"].nunique())
                counts = (len(a), len(b))
                rows.append({"variant": variant, "reference": reference, "mode": mode, "group": group,
                             "metric": metric, "n": a[0]["image"].nunique(), "units": bounds.units,
                             "replicates": min(counts),
                             "difference": (np.mean([finite_mean(c[metric]) for c in a])
                                            - np.mean([finite_mean(c[metric]) for c in b])),
                             **interval_fields(bounds), "variation": variation(counts), "rule": rule})
    frame = pd.DataFrame(rows, columns=COLUMNS)
    families = []
    for mode, family in frame.groupby("mode", sort=False):
        label = f"{name + ', ' if name else ''}{mode}: {len(family)} differences from {reference}"
        families.append(mark_family(family, method, boot.level).assign(
            family_size=int(family["p"].notna().sum()), family=label, method=method))
    return pd.concat(families, ignore_index=True) if families else frame
