"""The coverage study (`put coverage`): every check of put/stats/coverage.py over a grid of n, the minimum number
of units it supports, and docs/coverage.md (the table, the command that made it, what it means)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from put.stats.bootstrap import Bootstrap
from put.stats.coverage import (
    DISTRIBUTIONS,
    SEED_SHARE,
    GaussianPair,
    Result,
    difference_coverage,
    expected_fid,
    fid_coverage,
    fwer,
    mean_coverage,
    replicate_coverage,
)
from put.stats.multiplicity import METHODS

SIZES = (5, 10, 20, 30, 50, 100, 200)
TOLERANCE = 0.02  # coverage within 2 points of nominal: the precision the study measures to
CLUSTERED = next(name for name in DISTRIBUTIONS if name.startswith("clustered"))
FAMILY_SIZES_FROM = 10  # the null families are simulated at the grid's n from this one on


REPLICATES = (2, 3, 5)  # seed replicates per variant of the replicate rows (`seeds: [1, 2]` gives 3)
# the study's parts, each the rows it makes (by check name): `--only` reruns some and keeps the others' rows
PARTS = {"means": lambda check: check.startswith(("mean", "paired")),
         "families": lambda check: check.startswith("family-wise"),
         "fid": lambda check: check.startswith("FID"),
         "replicates": lambda check: check.startswith("seed replicates")}


def run_study(sets: int, resamples: int, fid_sets: dict[int, int], fid_dim: int, fid_resamples: int,
              families: int, sizes: tuple[int, ...] = SIZES, seed: int = 0, level: float = 0.95,
              parts: tuple[str, ...] = tuple(PARTS)) -> pd.DataFrame:
    """Every check of `parts`; one row each (put.stats.coverage.Result)."""
    boot = Bootstrap(level, resamples, seed, 2)
    results: list[Result] = []
    if "means" in parts:
        for n in sizes:
            for name in DISTRIBUTIONS:
                results += [mean_coverage(name, n, sets, boot, seed), difference_coverage(name, n, sets, boot, seed)]
            results.append(mean_coverage(CLUSTERED, n, sets, boot, seed, ignore_units=True))
            print(f"coverage at n = {n} done", flush=True)
    if "replicates" in parts:
        results += [replicate_coverage(r, sets, boot, seed) for r in REPLICATES]
    if "families" in parts:
        results += [r for n in sizes if n >= FAMILY_SIZES_FROM for r in fwer(n, families, boot, METHODS, seed)]
    if "fid" in parts:
        pair = GaussianPair(fid_dim)
        for n, count in fid_sets.items():
            expected = expected_fid(pair, n, max(count, 200), seed)
            results += fid_coverage(pair, n, count, Bootstrap(level, fid_resamples, seed, 2), expected, seed,
                                    progress=True)
    return pd.DataFrame([r.row() for r in results])


GRIDDED = ("means", "families")  # the parts run over the grid of n (the others at their own n)


def merge_parts(earlier: pd.DataFrame, rerun: pd.DataFrame, parts: tuple[str, ...],
                sizes: tuple[int, ...] = SIZES) -> pd.DataFrame:
    """The rows of an earlier study with those of `parts` (gridded parts: at `sizes`) replaced by a rerun's (the
    streams of a check do not depend on what else runs, so the rows are those a full run would make)."""
    def rerun_row(row: pd.Series) -> bool:
        return any(PARTS[p](row["check"]) and (p not in GRIDDED or row["n"] in sizes) for p in parts)

    replaced = earlier.apply(rerun_row, axis=1).astype(bool)
    merged = pd.concat([earlier[~replaced], rerun], ignore_index=True)
    order = {check: i for i, check in enumerate(dict.fromkeys([*earlier["check"], *rerun["check"]]))}
    return merged.sort_values(["check", "n"], key=lambda c: c.map(order) if c.name == "check" else c,
                              kind="stable").reset_index(drop=True)


def minimum_units(frame: pd.DataFrame, tolerance: float = TOLERANCE) -> int | None:
    """The smallest n of the grid from which on every mean and paired-difference interval (sources respected)
    covers within `tolerance` of its nominal level, and Holm's family-wise error rate (where simulated) stays
    within `tolerance` of its nominal level; None if no n does."""
    intervals = frame[frame["check"].isin(["mean", "paired difference"])]
    holm = frame[frame["check"] == "family-wise error, holm"]
    ok = pd.concat([intervals.assign(ok=intervals["observed"] >= intervals["nominal"] - tolerance),
                    holm.assign(ok=holm["observed"] <= holm["nominal"] + tolerance)])
    ok = ok.groupby("n")["ok"].all().sort_index()
    for n in ok.index:
        if ok[ok.index >= n].all():
            return int(n)
    return None


MADE_BY = "Made by `{}`"
SOURCES = " (put/stats/coverage.py, put/report/coverage.py)"


def made_by(markdown: str) -> str:
    """The command an earlier docs/coverage.md was made by."""
    found = re.search(MADE_BY.format("(.+?)") + re.escape(SOURCES), markdown)  # `A`, then `B`: both
    if not found:
        raise ValueError("no 'Made by `...`' line in the coverage table; run the study again")
    return found.group(1)


def rows_at(frame: pd.DataFrame, n: int) -> pd.DataFrame:
    """The mean and paired-difference rows (sources respected) at n."""
    return frame[frame["check"].isin(["mean", "paired difference"]) & (frame["n"] == n)]


def replicate_section(rows: pd.DataFrame, level: float) -> list[str]:
    """The lines on differences over seed replicates that carry most of the variance (none without such rows)."""
    if rows.empty:
        return []
    return [
        "## Seed replicates that carry the variance",
        "",
        f"Percent of {int(rows['sets'].iloc[0])} simulated pairs of variants whose interval of the paired difference "
        f"over R seed replicates per variant holds the true difference (0.5), nominal {100 * level:.1f}%: "
        f"n = {int(rows['n'].iloc[0])} sources, each replicate shifting all its values at random (training "
        f"randomness) so that the replicates carry {SEED_SHARE:.0%} of the difference's variance; the crossed "
        "bootstrap of sources and replicates, Student's t on its standard error with the (R - 1) / R shrink "
        "undone and Satterthwaite's degrees of freedom (docs/statistics.md, \"With seed replicates\"), "
        f"{int(rows['resamples'].iloc[0])} resamples.",
        "",
        "| replicates per variant | holds the true difference (%) |",
        "|---:|---:|",
        *(f"| {d.split()[0]} | {100 * v:.1f} |" for d, v in zip(rows["distribution"], rows["observed"])),
        "",
        f"From {rows['observed'].min():.1%} to {rows['observed'].max():.1%}: with 2 or 3 replicates the "
        "effective degrees of freedom are about 2 to 4, and the interval is wide, as it should be: what training "
        "randomness does to a difference is measured by so few replicates.",
        "",
    ]


def pct(v: float) -> str:
    return f"{100 * v:.1f}"


def coverage_markdown(frame: pd.DataFrame, command: str) -> str:
    """docs/coverage.md: the tables and what they mean."""
    level = frame["nominal"].iloc[0]
    means = frame[frame["check"].str.startswith(("mean", "paired"))]
    minimum = minimum_units(frame)
    return "\n".join([
        "# Coverage of the evaluation's intervals",
        "",
        "<!-- generated by `put coverage`; do not edit by hand -->",
        MADE_BY.format(command) + SOURCES + ". Every row runs the "
        "evaluation's own "
        "interval functions on synthetic test sets whose truth is known and counts how often the "
        f"{level:.0%} interval holds it.",
        "",
        *means_section(means, level, minimum),
        *family_section(frame[frame["check"].str.startswith("family-wise")], level, minimum),
        *replicate_section(frame[frame["check"].map(PARTS["replicates"])], level),
        *fid_section(frame[frame["check"].str.startswith("FID")]),
    ])


def means_section(means: pd.DataFrame, level: float, minimum: int | None) -> list[str]:
    """The coverage of the means' and paired differences' intervals per n, and the minimum n it sets."""
    wide = means.pivot_table(index=["check", "distribution"], columns="n", values="observed", sort=False)
    lines = ["| check | distribution | " + " | ".join(f"n = {n}" for n in wide.columns) + " |",
             "|---|---|" + "---:|" * len(wide.columns)]
    lines += [f"| {check} | {dist} | " + " | ".join(pct(v) for v in row) + " |"
              for (check, dist), row in wide.iterrows()]
    sets = int(means["sets"].iloc[0])
    half = 1.96 * np.sqrt(level * (1 - level) / sets)
    smallest = int(means["n"].min())
    worst_small = rows_at(means, smallest)["observed"].min()
    ignored = means.loc[means["check"] == "mean, sources ignored", "observed"]
    per_n = means.groupby("n")["resamples"].max()
    more = ", ".join(f"n = {n}: {r}" for n, r in per_n.items() if r > per_n.min())
    return [
        f"## Means and paired differences (nominal {pct(level)}%)",
        "",
        f"Percent of {sets} simulated test sets whose interval holds the true value (each estimate within "
        f"+-{100 * half:.1f} points, 95% confidence); expanded percentile bootstrap (put/stats/bootstrap.py), "
        f"{int(per_n.min())} resamples" + (f" (more where the expanded level needs them: {more})" if more else "")
        + "; n: independent "
        "units (images, or sources for the clustered rows, each with 3 images sharing half their variance). The "
        "paired difference: two variants on the same images, a true difference of 0.5 on top of a shared "
        "per-image difficulty.",
        "",
        *lines,
        "",
        f"**Minimum n: {minimum}.** The smallest n of the grid from which every mean and paired-difference interval "
        f"above (normal, skewed, heavy-tailed and clustered values, sources respected) covers within "
        f"{100 * TOLERANCE:.0f} points of {pct(level)}% and Holm keeps a null family's family-wise error rate "
        f"within {100 * TOLERANCE:.0f} points of {pct(1 - level)}% (below); under it the bootstrap covers "
        f"less than its label (at n = {smallest} as little as {pct(worst_small)}%). `evaluate.min_units` is set to "
        "it: below that many sources a cell prints no interval and sets no mark, and says why. The row 'mean, "
        "sources ignored' resamples the images of the clustered sets as if independent, as the evaluation did "
        f"before sources were recorded: {pct(ignored.min())} to {pct(ignored.max())}%, which is why the bootstrap "
        "resamples sources.",
        "",
    ]


def family_section(family: pd.DataFrame, level: float, minimum: int | None) -> list[str]:
    """The family-wise error rate of a null family of 45 comparisons under each correction."""
    rates = family.assign(method=family["check"].str.split(", ").str[1]).pivot_table(
        index="method", columns="n", values="observed", sort=False)
    big = [n for n in rates.columns if minimum is not None and n >= minimum]
    return [
        "## Multiplicity: a null family of 45 comparisons",
        "",
        f"{int(family['sets'].iloc[0])} simulated Table-3-like families per n (5 variants x 9 metric-group cells, "
        "each against the same reference, n images per cell, no true difference anywhere): the percent of families "
        f"with at least one mark (the family-wise error rate), nominal {pct(1 - level)}%; p-values from the same "
        "bootstrap (Student's t on its standard error), whose far tail must be right too: Holm's strictest "
        "threshold over 45 differences is 5% / 45 = 0.11%.",
        "",
        "| method | " + " | ".join(f"n = {n}" for n in rates.columns) + " |",
        "|---|" + "---:|" * len(rates.columns),
        *(f"| {method} | " + " | ".join(pct(v) for v in row) + " |" for method, row in rates.iterrows()),
        "",
        f"From n = {minimum} on, Holm keeps the chance of any false mark at {pct(rates.loc['holm', big].max())}% "
        f"or less and Bonferroni at {pct(rates.loc['bonferroni', big].max())}% or less (at n = {rates.columns[0]}: "
        f"{pct(rates.loc['holm'].iloc[0])}% and {pct(rates.loc['bonferroni'].iloc[0])}%). Benjamini-Hochberg "
        "controls the false "
        "discovery rate instead, which on a family with no true difference equals the family-wise rate. Without "
        f"correction {pct(rates.loc['none', big].min())}% or more of the null families get at least one mark."
        if minimum is not None else "No n of the grid keeps the family-wise error rate near its level.",
        "",
    ]


def fid_section(fid: pd.DataFrame) -> list[str]:
    """Whether FID's interval holds the population FID, and the FID expected of n images."""
    population = fid.loc[fid["check"] == "FID: population FID", "observed"]
    of_n = fid.loc[fid["check"] != "FID: population FID", "observed"]
    return [
        "## FID",
        "",
        f"Paired Gaussian features ({fid['distribution'].iloc[0]}) whose population FID is known in closed form; "
        f"the bias-shifted expanded percentile interval, {int(fid['resamples'].iloc[0])} resamples.",
        "",
        "| n | sets | holds the population FID (%) | holds the expected FID of n images (%) |",
        "|---:|---:|---:|---:|",
        *(f"| {n} | {int(rows['sets'].iloc[0])} | {pct(rows['observed'].iloc[0])} | {pct(rows['observed'].iloc[1])} |"
          for n, rows in fid.groupby("n")),
        "",
        "FID is biased upwards at any finite n (the estimated covariances are noisy, and the noise adds to the trace "
        f"terms): the interval held the population FID in {pct(population.min())} to {pct(population.max())}% of "
        f"the sets and the FID expected of n images in {pct(of_n.min())} to {pct(of_n.max())}%. So the interval is an "
        "interval for the FID of another set of n test images drawn the same way (FID's own bias included), which "
        "is what comparing models at the same n needs, as every FID of the report is; it is not an interval for "
        "FID at infinite n, and an FID of one n is not comparable with an FID of another.",
        "",
    ]
