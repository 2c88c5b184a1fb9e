"""The coverage study, small: intervals that hold the truth about as often as they say, a check that catches one
that does not, and Holm keeping a null family's chance of any false mark near 5% where uncorrected tests do not.
The full study (`put coverage`, docs/coverage.md) runs the same functions over more sets and sizes."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from put.config.evaluation import MetricProtocol
from put.report.coverage import CLUSTERED, REPLICATES, merge_parts, minimum_units
from put.stats.bootstrap import Bootstrap
from put.stats.coverage import (
    DISTRIBUTIONS,
    GaussianPair,
    Result,
    difference_coverage,
    expected_fid,
    fid_coverage,
    fwer,
    mean_coverage,
    replicate_coverage,
)

ROOT = Path(__file__).resolve().parents[1]
BOOT = Bootstrap(resamples=1000)


def undercovers(result: Result, sigmas: float = 3.0) -> bool:
    """Whether a measured coverage lies more than `sigmas` binomial standard errors (of its nominal level) below
    that level; for a family-wise error rate, above it."""
    error = sigmas * np.sqrt(result.nominal * (1 - result.nominal) / result.sets)
    if result.check.startswith("family-wise"):
        return result.observed > result.nominal + error
    return result.observed < result.nominal - error


@pytest.mark.parametrize("check", [mean_coverage, difference_coverage])
def test_intervals_of_30_units_cover_about_95_percent(check):
    result = check("normal", 30, 300, BOOT)
    assert not undercovers(result), result  # within 3 standard errors (+-3.8 points) of 95%
    clustered = check(CLUSTERED, 30, 300, BOOT)
    assert not undercovers(clustered), clustered  # sources resampled: the crops of one source travel together


def test_the_check_fails_an_interval_that_undercovers():
    """Resampling crops as if independent (sources ignored), or 5 skewed values, covers far less than 95%: the
    check that the intervals above pass fails these."""
    ignored = mean_coverage(CLUSTERED, 30, 300, BOOT, ignore_units=True)
    few = mean_coverage("skewed (exponential)", 5, 300, BOOT)
    assert undercovers(ignored) and ignored.observed < 0.9, ignored
    assert undercovers(few) and few.observed < 0.88, few


@pytest.mark.parametrize("replicates", [2, 3])
def test_a_difference_over_few_seed_replicates_that_carry_its_variance_covers_about_95_percent(replicates):
    """Seed replicates carry 90% of the difference's variance: on the sources' 49 degrees of freedom, with the
    replicates' variance shrunk by (R - 1) / R, the crossed bootstrap covered far less than 95%."""
    result = replicate_coverage(replicates, 300, BOOT)
    assert not undercovers(result) and result.observed <= 0.995, result


def test_each_interval_of_the_study_draws_the_resamples_its_expanded_level_needs():
    """At 5 units the 95% interval takes its 99.81% percentiles: 26,203 resamples place 25 beyond each."""
    assert mean_coverage("normal", 5, 2, BOOT).resamples == 26203
    assert mean_coverage("normal", 50, 2, Bootstrap(resamples=2000)).resamples == 2000


def test_the_committed_study_has_the_replicate_rows():
    study = (ROOT / "docs" / "coverage.md").read_text()
    assert all(re.search(rf"\| {r} \| (9[3-9]|100)\.\d \|", study) for r in REPLICATES), REPLICATES


def test_holm_keeps_a_null_family_near_its_level_and_no_correction_does_not():
    holm, none = fwer(50, 24, Bootstrap(resamples=2000), ("holm", "none"))
    assert not undercovers(holm) and holm.observed <= 0.15, holm
    assert undercovers(none) and none.observed > 0.5, none  # 45 tests at 5% each: most families get a mark


def test_fid_intervals_hold_the_fid_of_n_images_not_the_population_fid():
    pair = GaussianPair(8)
    expected = expected_fid(pair, 30, 300)
    assert expected > pair.population_fid  # FID's small-sample bias
    population, of_n = fid_coverage(pair, 30, 25, Bootstrap(resamples=1000), expected)
    assert of_n.observed >= 0.8 and population.observed < of_n.observed


def test_the_minimum_of_units_is_the_one_the_committed_study_found():
    """evaluate.min_units (and the number params.yaml states beside it) is the study's minimum n."""
    default = MetricProtocol().min_units
    study = (ROOT / "docs" / "coverage.md").read_text()
    assert re.search(rf"\*\*Minimum n: {default}\.\*\*", study)
    assert re.search(rf"# {default} \(the preset's value\): no interval", (ROOT / "params.yaml").read_text())
    assert all(f"| mean | {name} |" in study and f"| paired difference | {name} |" in study for name in DISTRIBUTIONS)


def test_minimum_units_is_the_smallest_n_from_which_every_row_covers():
    import pandas as pd

    rows = [{"check": "mean", "n": n, "observed": v, "nominal": 0.95} for n, v in ((5, 0.8), (10, 0.94), (20, 0.92),
                                                                                    (30, 0.94), (50, 0.95))]
    assert minimum_units(pd.DataFrame(rows)) == 30  # 10 covers, but 20 does not again
    assert minimum_units(pd.DataFrame(rows[:1])) is None


def test_a_partial_rerun_replaces_only_its_parts_rows_at_its_sizes():
    import pandas as pd

    row = lambda check, n, v: {"check": check, "n": n, "observed": v}  # noqa: E731
    earlier = pd.DataFrame([row("mean", 5, 0.8), row("mean", 50, 0.95), row("family-wise error, holm", 10, 0.05),
                            row("FID: population FID", 100, 0.0)])
    rerun = pd.DataFrame([row("mean", 5, 0.9), row("seed replicates, paired difference", 50, 0.96)])
    merged = merge_parts(earlier, rerun, ("means", "replicates"), (5,))
    assert list(zip(merged["check"], merged["n"], merged["observed"])) == [
        ("mean", 5, 0.9), ("mean", 50, 0.95), ("family-wise error, holm", 10, 0.05), ("FID: population FID", 100, 0.0),
        ("seed replicates, paired difference", 50, 0.96)]
