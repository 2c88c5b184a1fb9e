"""Paired differences: each ablation against PUT on the same test images, masks and sample draws.

The evaluate stage keeps every per-image value (`<label>_images.csv`); here the values of an ablation and of
PUT are matched row by row (mode, group, image, sample) and the percentile bootstrap resamples the images for
both at once, so the interval of the difference of the means leaves out what the two share: which images
happened to be in the test set. An interval that excludes zero is a difference at the chosen level.
"""

from __future__ import annotations

import pandas as pd

from put.metrics.bootstrap import Bootstrap, difference_interval

KEYS = ["mode", "group", "image", "sample"]
COLUMNS = ["variant", "reference", "mode", "group", "metric", "n", "difference", "lo", "hi", "excludes_zero"]


def paired_differences(images: dict[str, pd.DataFrame], metrics: tuple[str, ...], boot: Bootstrap,
                       reference: str = "put") -> pd.DataFrame:
    """One row per variant (other than `reference`) x mode x group x metric: the difference of the means
    (variant - reference), its paired interval and whether that excludes zero. Rows the two variants do not
    share, and metrics either lacks, are left out."""
    if reference not in images:
        return pd.DataFrame(columns=COLUMNS)
    rows = []
    for variant, frame in images.items():
        if variant == reference:
            continue
        paired = frame.merge(images[reference], on=KEYS, suffixes=("", "_ref"))
        for (mode, group), cell in paired.groupby(["mode", "group"], sort=False):
            for metric in metrics:
                both = cell[[metric, f"{metric}_ref", "image"]].dropna()
                if both.empty:
                    continue
                a, b = both[metric].to_numpy(float), both[f"{metric}_ref"].to_numpy(float)
                bounds = difference_interval(a, b, both["image"].to_numpy(), boot)
                finite_a, finite_b = a[abs(a) != float("inf")], b[abs(b) != float("inf")]
                difference = float(finite_a.mean() - finite_b.mean())
                lo, hi = bounds if bounds is not None else (float("nan"), float("nan"))
                rows.append({"variant": variant, "reference": reference, "mode": mode, "group": group,
                             "metric": metric, "n": both["image"].nunique(), "difference": difference,
                             "lo": lo, "hi": hi, "excludes_zero": bounds is not None and (lo > 0 or hi < 0)})
    return pd.DataFrame(rows, columns=COLUMNS)
