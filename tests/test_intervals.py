"""Confidence intervals: the bootstrap against closed forms, paired differences that find a planted effect and
nothing else, FID recomputed on resampled features, intervals over seeds, and how the report prints them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from put.metrics.bootstrap import (Bootstrap, difference_interval, fid_from_grams, fid_interval, mean_interval,
                                   seed_interval, unit_sums)
from put.report.differences import paired_differences
from put.report.plots import plot_curves
from put.report.replicates import seed_summary, seeds_table
from put.report.tables import half_width_text, render_latex, table1, table3

BOOT = Bootstrap(level=0.95, resamples=20000, seed=0)


def test_the_bootstrap_of_a_mean_of_normal_data_is_the_normal_interval():
    """For the mean of n normal values the percentile bootstrap converges to mean +- z * s / sqrt(n) (its
    standard error is s * sqrt((n - 1) / n) / sqrt(n)); n = 400 puts the two within a few percent."""
    x = np.random.default_rng(1).normal(3.0, 2.0, size=400)
    lo, hi = mean_interval(x, None, BOOT)
    z, se = stats.norm.ppf(0.975), x.std(ddof=0) / np.sqrt(len(x))
    assert lo == pytest.approx(x.mean() - z * se, abs=0.04 * z * se)
    assert hi == pytest.approx(x.mean() + z * se, abs=0.04 * z * se)
    assert mean_interval(x, None, BOOT) == (lo, hi)  # seeded
    assert mean_interval(x, None, Bootstrap(resamples=20000, seed=1)) != (lo, hi)
    # 20000 resamples: another bootstrap seed moves the half width by well under 1% (two printed digits)
    other = mean_interval(x, None, Bootstrap(resamples=20000, seed=7))
    assert abs((other[1] - other[0]) / (hi - lo) - 1) < 0.01


def test_a_narrower_level_is_narrower_and_one_image_has_no_interval():
    x = np.random.default_rng(2).normal(size=50)
    wide, narrow = mean_interval(x, None, BOOT), mean_interval(x, None, Bootstrap(level=0.5, resamples=5000))
    assert wide[0] < narrow[0] < x.mean() < narrow[1] < wide[1]
    assert mean_interval(np.array([1.0]), None, BOOT) is None


def test_samples_of_one_image_are_resampled_together_and_infinities_left_out():
    """A fine bin holds several samples per image: the statistic is the mean over every sample of the resampled
    images (the point estimate's definition), and an infinite PSNR counts in neither."""
    values = np.array([1.0, 3.0, np.inf, 10.0, 12.0, 11.0])
    images = np.array(["a", "a", "a", "b", "b", "b"])
    labels, sums, counts = unit_sums(values, images)
    assert list(labels) == ["a", "b"] and list(sums) == [4.0, 33.0] and list(counts) == [2, 3]
    lo, hi = mean_interval(values, images, Bootstrap(resamples=2000))
    assert lo == pytest.approx(2.0) and hi == pytest.approx(11.0)  # all a's samples, or all b's
    # per-sample units would make the interval far narrower: the images are the independent units
    independent = mean_interval(np.array([1.0, 3.0, 10.0, 12.0, 11.0]), None, Bootstrap(resamples=2000))
    assert independent[1] - independent[0] < hi - lo


def test_the_paired_interval_excludes_zero_for_a_planted_difference_and_includes_it_for_none():
    rng = np.random.default_rng(3)
    difficulty = rng.normal(20.0, 3.0, size=24)  # what the test images share, far larger than the effect
    images = np.arange(24)
    reference = difficulty + rng.normal(0.0, 0.2, size=24)
    planted = difficulty + 0.5 + rng.normal(0.0, 0.2, size=24)
    none = difficulty + rng.normal(0.0, 0.2, size=24)
    lo, hi = difference_interval(planted, reference, images, BOOT)
    assert 0 < lo < 0.5 < hi
    lo, hi = difference_interval(none, reference, images, BOOT)
    assert lo < 0 < hi
    # unpaired, the image spread would hide the planted difference: pairing is what finds it
    a, b = mean_interval(planted, None, BOOT), mean_interval(reference, None, BOOT)
    assert a[0] < b[1]


def test_paired_differences_match_rows_of_two_variants():
    rng = np.random.default_rng(4)
    rows = [{"mode": "k50", "group": g, "image": f"im{i}", "sample": 0} for g in ("20-40", "40-60") for i in range(20)]
    base = pd.DataFrame(rows).assign(psnr=rng.normal(20, 2, size=40), ssim=rng.uniform(0.5, 0.8, size=40))
    worse = base.assign(psnr=base["psnr"] - 1.0 + rng.normal(0, 0.1, size=40),
                        ssim=base["ssim"] + rng.normal(0, 0.01, size=40))
    shuffled = worse.sample(frac=1.0, random_state=0)  # rows matched by key, not by position
    found = paired_differences({"put": base, "conv": shuffled}, ("psnr", "ssim"), Bootstrap(resamples=4000))
    found = found.set_index(["metric", "group"])
    assert found.loc[("psnr", "20-40"), "excludes_zero"] and found.loc[("psnr", "40-60"), "excludes_zero"]
    assert found.loc[("psnr", "20-40"), "difference"] == pytest.approx(-1.0, abs=0.1)
    assert not found.loc[("ssim", "20-40"), "excludes_zero"] and (found["n"] == 20).all()


def test_fid_from_gram_matrices_is_torch_fidelitys_fid_and_resampling_keeps_the_estimate_inside():
    from torch_fidelity.metric_fid import fid_features_to_statistics, fid_statistics_to_metric

    rng = np.random.default_rng(5)
    f1, f2 = rng.normal(size=(30, 64)), rng.normal(0.3, 1.2, size=(30, 64))
    reference = fid_statistics_to_metric(*(fid_features_to_statistics(torch.from_numpy(f)) for f in (f1, f2)),
                                         verbose=False)["frechet_inception_distance"]
    grams = f1 @ f1.T, f2 @ f2.T, f1 @ f2.T
    assert fid_from_grams(*grams, np.arange(30)[None])[0] == pytest.approx(reference, rel=1e-7)
    lo, hi = fid_interval(f1, f2, Bootstrap(resamples=1000))
    assert lo < reference < hi
    same = fid_interval(f1, f1, Bootstrap(resamples=200))  # identical sets: FID 0 on every resample
    assert same == pytest.approx((0.0, 0.0), abs=1e-6)


def test_fid_with_its_interval_through_torch_fidelitys_features(tmp_path, monkeypatch):
    """The real feature path (torch-fidelity's Inception on the PNG folders), on stand-in weights: the
    pretrained file is not on this machine, so a randomly initialised network of the same architecture is
    saved where the file would be. The number means nothing; the plumbing and the pairing are what is tested."""
    from PIL import Image
    import torch_fidelity
    import torch_fidelity.feature_extractor_inceptionv3 as inception

    from put.config.evaluation import MetricProtocol
    from put.metrics.fid import fid_with_interval
    from put.pretrained import INCEPTION_FID

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    torch.manual_seed(0)
    with monkeypatch.context() as patched:
        patched.setattr(torch.nn.Module, "load_state_dict", lambda self, state, *a, **k: None)
        patched.setattr(inception, "load_state_dict_from_url", lambda *a, **k: {})
        network = inception.FeatureExtractorInceptionV3("inception-v3-compat", ["2048"])
    for layer in network.modules():  # random weights shrink activations layer by layer: keep them alive
        if isinstance(layer, torch.nn.BatchNorm2d):
            layer.weight.data.fill_(2.6)
    INCEPTION_FID.path.parent.mkdir(parents=True)
    torch.save(network.state_dict(), INCEPTION_FID.path)
    rng = np.random.default_rng(6)
    for side in ("result", "target"):
        (tmp_path / side).mkdir()
        for i in range(3):
            Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(tmp_path / side / f"{i:05d}.png")
    protocol = MetricProtocol(fid_bootstrap_resamples=200)
    value, bounds = fid_with_interval(tmp_path / "result", tmp_path / "target", protocol)
    expected = torch_fidelity.calculate_metrics(
        input1=str(tmp_path / "result"), input2=str(tmp_path / "target"), fid=True, cuda=False, verbose=False,
        feature_extractor_weights_path=str(INCEPTION_FID.path), cache=False)["frechet_inception_distance"]
    assert value.value == pytest.approx(expected, rel=1e-6) and value.value > 1  # features that differ
    assert bounds is not None and bounds[0] < bounds[1]


def test_the_interval_over_seeds_is_students_t():
    summary = seed_interval(np.array([1.0, 2.0, 3.0]))
    half = stats.t.ppf(0.975, 2) * 1.0 / np.sqrt(3)
    assert (summary.n, summary.mean, summary.std) == (3, 2.0, 1.0)
    assert (summary.lo, summary.hi) == pytest.approx((2.0 - half, 2.0 + half))
    one = seed_interval(np.array([5.0]))
    assert one.mean == 5.0 and one.lo is None


# ----------------------------------------------------------------------------------------- in the report

def measured(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for variant in ("put", "conv", "one", "no_ref", "tok", "qua0"):
        for mode in ("all", "k50"):
            for group in ("20-40", "40-60", "10-60"):
                row = {"variant": variant, "seed": seed, "mode": mode, "group": group, "n": 16,
                       "fid": np.nan, "fid_unavailable": "Inception weights missing"}
                for metric, centre, spread in (("psnr", 20, 1.5), ("ssim", 0.7, 0.05), ("mae", 0.1, 0.01)):
                    value = centre + rng.normal(0, spread)
                    row |= {metric: value, f"{metric}_lo": value - spread, f"{metric}_hi": value + 0.5 * spread,
                            f"{metric}_unavailable": ""}
                rows.append(row)
    return pd.DataFrame(rows)


def test_tables_print_each_half_width_in_small_type_and_say_what_it_is():
    metrics = measured()
    latex = render_latex(table1(metrics, "demo"))
    put = metrics.set_index(["variant", "mode", "group"]).loc[("put", "k50", "40-60")]
    assert f"{put['psnr']:.3f}" + r"{\scriptsize$\pm$1.1}" in latex.replace(r"\textbf{", "").replace("}{", "{")
    assert r"Small type: $\pm$ half the width of the 95\% percentile bootstrap interval" in latex
    assert [half_width_text(h) for h in (1.125, 0.0213, 0.0007449, 123.4, 0.5)] == ["1.1", "0.021", "0.00074",
                                                                                     "123", "0.50"]


def test_table3_marks_the_differences_whose_interval_excludes_zero():
    metrics = measured()
    differences = pd.DataFrame([
        {"variant": "conv", "mode": "k50", "group": "20-40", "metric": "psnr", "excludes_zero": True},
        {"variant": "one", "mode": "k50", "group": "20-40", "metric": "psnr", "excludes_zero": False}])
    latex = render_latex(table3(metrics, "demo", differences))
    conv = f"{metrics.set_index(['variant', 'mode', 'group']).loc[('conv', 'k50', '20-40'), 'psnr']:.3f}"
    assert conv + r"$^{\dagger}$" in latex.replace(r"\textbf{", "").replace("}$^", "$^")
    assert latex.count(r"$^{\dagger}$") == 2  # the cell, and the caption's explanation
    assert "excludes zero (1 of 2 differences tested)" in latex and "FID has no per-image value" in latex


def test_seed_replicates_are_aggregated_beside_the_image_spread(tmp_path):
    metrics = pd.concat([measured(0), measured(1), measured(2)], ignore_index=True)
    summary = seed_summary(metrics)
    row = summary.set_index(["variant", "mode", "group", "metric"]).loc[("conv", "k50", "40-60", "psnr")]
    values = metrics.set_index(["variant", "mode", "group"]).loc[("conv", "k50", "40-60"), "psnr"]
    assert row["replicates"] == 3 and row["seeds"] == "0 1 2"
    assert row["mean"] == pytest.approx(values.mean()) and row["std"] == pytest.approx(values.std(ddof=1))
    assert row["image_half_width"] == pytest.approx(0.75 * 1.5)
    assert "fid" not in set(summary["metric"])  # measured on no seed
    latex = render_latex(seeds_table(summary, "demo"))
    assert "seeds 0, 1, 2" in latex and r"$\pm$ images" in latex and r"Student-$t$" in latex
    assert half_width_text(1.4e-17, 5) == "0.00000"
    assert f"{row['mean']:.3f}" in latex
    assert seed_summary(measured(0)).empty  # one seed: nothing to aggregate


def test_curves_draw_their_intervals_as_bands(tmp_path):
    from matplotlib.collections import PolyCollection
    from matplotlib.figure import Figure

    drawn = []
    original = Figure.savefig
    curves = pd.DataFrame([{"variant": v, "bin": b, "psnr": 20.0 + i, "psnr_lo": 19.0 + i, "psnr_hi": 21.0 + i}
                           for v in ("put", "conv") for i, b in enumerate(("10-20", "20-30", "30-40"))])

    def spy(fig, *args, **kwargs):
        drawn.extend(c for ax in fig.axes for c in ax.collections if isinstance(c, PolyCollection))
        return original(fig, *args, **kwargs)

    Figure.savefig = spy
    try:
        plot_curves(curves, ["psnr"], tmp_path / "curves.png")
    finally:
        Figure.savefig = original
    assert len(drawn) == 2  # one band per variant
    with pytest.raises(ValueError, match="one seed replicate"):
        plot_curves(pd.concat([curves, curves]), ["psnr"], tmp_path / "twice.png")
