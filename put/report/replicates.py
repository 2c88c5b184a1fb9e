"""Seed replicates in the report: each metric's mean, standard deviation and Student-t interval over the seeds
(training and sampling randomness), beside the image bootstrap's half width (test-image sampling), so a reader
sees which of the two spreads dominates."""

from __future__ import annotations

import numpy as np
import pandas as pd

from put.config.params import OFFICIAL_PREFIX
from put.report.latex import Table, latex_escape
from put.report.reported import METRICS
from put.report.tables import DECIMALS, GROUPS, METRIC_LABELS, NA, VARIANT_LABELS, VARIANT_ORDER, half_width_text
from put.stats.bootstrap import seed_interval

STATS = ("mean", "s.d.", r"$\pm$ seeds", r"$\pm$ images")


def seed_summary(metrics: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """One row per variant x mode x group x metric measured on more than one seed: replicates, seeds, mean, std,
    the interval over seeds (lo, hi) and the mean half width of the seeds' image bootstrap intervals."""
    rows = []
    ours = metrics[~metrics["variant"].astype(str).str.startswith(OFFICIAL_PREFIX)]
    for (variant, mode, group), cell in ours.groupby(["variant", "mode", "group"], sort=False):
        for metric in METRICS:
            measured = cell[cell[metric].notna()]
            if measured["seed"].nunique() < 2:
                continue
            summary = seed_interval(measured[metric].to_numpy(), level)
            halves = (measured.get(f"{metric}_hi", np.nan) - measured.get(f"{metric}_lo", np.nan)) / 2
            rows.append({"variant": variant, "mode": mode, "group": group, "metric": metric,
                         "replicates": summary.n, "seeds": " ".join(str(s) for s in sorted(measured["seed"])),
                         "mean": summary.mean, "std": summary.std, "lo": summary.lo, "hi": summary.hi,
                         "image_half_width": float(np.nanmean(halves)) if np.isfinite(halves).any() else np.nan})
    return pd.DataFrame(rows, columns=["variant", "mode", "group", "metric", "replicates", "seeds", "mean", "std",
                                       "lo", "hi", "image_half_width"])


def seeds_table(summary: pd.DataFrame, preset: str, mode: str = "k50", level: float = 0.95) -> Table:
    """Per metric, variant and mask group: the mean over seeds, their standard deviation, the half width of the
    interval over seeds and the mean half width of the image bootstrap intervals."""
    part = summary[summary["mode"] == mode].set_index(["variant", "metric", "group"])
    rows, index = [], []
    for metric in METRICS:
        for variant in VARIANT_ORDER:
            for group in GROUPS:
                if (variant, metric, group) not in part.index:
                    continue
                r = part.loc[(variant, metric, group)]
                floor = DECIMALS[metric] + 2  # a spread far below the printed precision prints as 0
                rows.append([f"{r['mean']:.{DECIMALS[metric]}f}", half_width_text(r["std"], floor),
                             half_width_text((r["hi"] - r["lo"]) / 2, floor),
                             half_width_text(r["image_half_width"], floor) if pd.notna(r["image_half_width"]) else NA])
                index.append((METRIC_LABELS[metric], VARIANT_LABELS[variant], group))
    names = ["Metric", "Variant", r"Mask ratio (\%)"]
    frame = pd.DataFrame(rows, index=pd.MultiIndex.from_tuples(index, names=names), columns=list(STATS))
    seeds = sorted({s for text in summary["seeds"] for s in text.split()}, key=int)
    styler = frame.style
    styler.hide(axis="index", names=True)
    styler.set_table_styles([{"selector": "scriptsize", "props": ":;"},
                             {"selector": "setlength", "props": ":{\\tabcolsep}{3pt};"},
                             {"selector": "column_format", "props": ":lll" + "r" * frame.shape[1] + ";"}],
                            overwrite=False)
    pct = f"{level:.0%}".replace("%", r"\%")
    return Table(styler.set_caption(
        f"Seed replicates, $\\mathcal{{K}}={mode[1:]}$, preset \\texttt{{{latex_escape(preset)}}}: seeds "
        f"{', '.join(seeds)} (seed 0: the base run of Tables 1 and 3; seed $S$ adds $S$ to every training and "
        f"sampling seed, on the same test images and masks). Mean and s.d.: over the seeds; $\\pm$ seeds: half the "
        f"width of the {pct} Student-$t$ interval of the mean over the seeds (training and sampling randomness); "
        f"$\\pm$ images: the mean half width of the seeds' {pct} bootstrap intervals over the test images "
        "(test-set sampling). A difference between variants smaller than both is noise."))
