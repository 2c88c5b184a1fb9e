"""The frontier stage and the evaluate stage's files, end to end on a tiny random model (32 px)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from put.config.evaluation import FrontierConfig, MetricProtocol
from put.config.params import load_params
from put.config.paths import metrics_bins_file, metrics_images_file, metrics_info_file
from put.data.images import write_image
from put.masks.evaluation import write_eval_masks
from put.metrics.files import read_metrics
from put.sampling.schedules import SamplingOptions
from put.stages import frontier as stage
from put.stages.evaluate import evaluate_variant
from put.stages.sample import sample_variant
from put.study import frontier as study
from tests.conftest import TINY

IMAGES = [f"img{i}.png" for i in range(3)]


@pytest.fixture
def masks(tmp_path) -> Path:
    """Evaluation masks at 32 px for three test images, with their ground truth in gt/."""
    out = tmp_path / "masks"
    write_eval_masks(IMAGES, out, (TINY.image_size,) * 2, seed=0, progress=False)
    g = torch.Generator().manual_seed(0)
    for name in IMAGES:
        write_image(out / "gt" / f"{Path(name).stem}.png", torch.rand(3, 32, 32, generator=g) * 2 - 1)
    return out


@pytest.fixture
def params(tmp_path):
    path = tmp_path / "params.yaml"  # the paper's 51-px SSIM window does not fit 32-px images
    # 2 units: a 95% interval would take its 100% percentiles (no resample count places them); a 50% one its 84%
    path.write_text("preset: demo\noverrides: {evaluate: {ssim_window: 7, min_units: 2, interval_level: 0.5}, "
                    "sample: {diversity_samples: 2}}\n")
    return load_params(path)


def only_numbers(node) -> bool:
    if isinstance(node, dict):
        return all(isinstance(k, str) and only_numbers(v) for k, v in node.items())
    return isinstance(node, (int, float)) and not isinstance(node, bool)


def test_settings_names_and_forward_passes():
    config = FrontierConfig(tokens_per_step=[1, 4], schedule_steps=[3], top_k=[50, 200])
    chosen = study.settings(config, SamplingOptions())
    assert [s.name for s in chosen] == ["argmax", "tps1_k50", "tps4_k50", "cosine3_k50", "tps1_k200", "tps4_k200",
                                        "cosine3_k200"]
    masked = torch.tensor([1, 2, 9])
    passes = {s.name: study.forward_passes(masked, s).tolist() for s in chosen}
    assert passes["argmax"] == [1, 1, 1] and passes["tps1_k50"] == [1, 2, 9]
    assert passes["tps4_k50"] == [1, 1, 3] and passes["cosine3_k200"] == [1, 2, 3]


def test_bad_frontier_config_names_the_value():
    with pytest.raises(ValueError, match="expected one or more of"):
        FrontierConfig(groups=["40-70"])
    with pytest.raises(ValueError, match=">= 1"):
        FrontierConfig(tokens_per_step=[0])


def test_diversity_needs_enough_samples_and_is_none_for_argmax():
    config = FrontierConfig(tokens_per_step=[1], schedule_steps=[], top_k=[50])
    argmax, sampled = study.settings(config, SamplingOptions())
    protocol = MetricProtocol()  # 5 pairs per input
    assert "deterministic" in study.diversity(argmax, [], protocol, samples=10, seed=0).unavailable
    assert "frontier.samples = 3 gives 3" in study.diversity(sampled, [], protocol, samples=3, seed=0).unavailable


def test_a_frontier_difference_leaves_out_the_images_either_side_filled_perfectly():
    """One infinite PSNR (a perfect fill) among a setting's results: the difference is over the images both sides
    have finite, by image (argmax has one sample where its reference has several), not a finite mean per side."""
    from put.stats.bootstrap import Bootstrap

    rng = np.random.default_rng(0)
    images = [f"img{i:02d}.png" for i in range(60)]

    def frame(samples: int, shift: float) -> pd.DataFrame:
        rows = [{"image": im, "source": im, "sample": s, "psnr": 20 + i / 10 + shift + rng.normal(0, 0.1)}
                for i, im in enumerate(images) for s in range(samples)]
        return pd.DataFrame(rows)

    exact, argmax = frame(3, 0.0), frame(1, 0.5)
    argmax.loc[0, "psnr"] = np.inf
    measured = [study.Measured(f, None, None) for f in (argmax, exact)]
    boot = Bootstrap.of(MetricProtocol(bootstrap_resamples=2000))
    value, bounds = study.difference("psnr", *measured, boot, boot)
    kept = argmax["image"] != images[0]
    expected = argmax.loc[kept, "psnr"].mean() - exact.loc[exact["image"] != images[0], "psnr"].mean()
    assert value == pytest.approx(expected) and np.isfinite(bounds.lo) and np.isfinite(bounds.hi)


@pytest.mark.parametrize("repeats", [1, 2])  # 1: timed once (a TypeError before; the Slurm suite's setting)
def test_frontier_stage_end_to_end(tmp_path, masks, params, tiny_checkpoints, monkeypatch, repeats):
    samples = 4
    model, _, transformer = tiny_checkpoints
    config = FrontierConfig(tokens_per_step=[1, 3], schedule_steps=[2], schedules=["linear_2"], top_k=[5],
                            groups=["20-40", "40-60"], images=2, samples=samples, batch_size=3,
                            timing_repeats=repeats)
    raw = yaml.safe_load(params.source and Path(params.source).read_text())
    raw["overrides"]["frontier"] = config.model_dump(mode="json")
    Path(params.source).write_text(yaml.safe_dump(raw))
    params = load_params(params.source)
    # LPIPS's VGG16 weights are not here: a stand-in distance, so that the table's mixed column is exercised.
    monkeypatch.setattr(study, "diversity_lpips_per_input", lambda groups, protocol, seed: np.full(len(groups), 0.125))
    out, samples_dir = tmp_path / "frontier", tmp_path / "frontier_samples"
    frame = stage.run_frontier(params, "put", transformer, masks, out, samples_dir, device="cpu")

    metrics = json.loads((out / stage.METRICS_FILE).read_text())
    assert only_numbers(metrics)  # what `dvc metrics show` can list: no lists, no strings
    assert set(metrics) == {"argmax", "tps1_k5", "tps3_k5", "cosine2_k5", "linear_2_k5"}
    assert all(set(groups) == {"20-40", "40-60"} for groups in metrics.values())
    for group in ("20-40", "40-60"):
        cell = {name: metrics[name][group] for name in metrics}
        assert cell["argmax"]["forward_passes"] == 1 and cell["cosine2_k5"]["forward_passes"] == 2
        assert cell["linear_2_k5"]["forward_passes"] == 2  # the TPAMI release's schedule: 2 forwards
        assert cell["tps1_k5"]["forward_passes"] > cell["tps3_k5"]["forward_passes"] > 1
        assert all({"psnr", "ssim", "mae", "seconds_per_image"} <= set(c) for c in cell.values())
        assert not any("n" in c for c in cell.values())  # a count, not a metric: it is in the CSV
    # PNGs: argmax once per input, the other settings `samples` times
    assert len(list((samples_dir / "argmax").rglob("*.png"))) == 4
    assert len(list((samples_dir / "tps1_k5").rglob("*.png"))) == 4 * samples
    assert not (out / "samples").exists()  # the folder kept in git holds no images

    csv = pd.read_csv(out / stage.CSV_FILE)
    assert len(csv) == len(frame) == 10
    assert set(csv["n"]) == {2}
    lpips = csv.set_index(["setting", "group"])["lpips_unavailable"].fillna("")
    assert "deterministic" in lpips[("argmax", "20-40")]
    assert lpips[("tps1_k5", "20-40")] == ""
    # every setting but the exact schedule has its paired difference from it, its interval and p-values
    rows = csv.set_index(["setting", "group"])
    assert rows["reference"].isna()[("tps1_k5", "20-40")] and (rows["reference"].dropna() == "tps1_k5").all()
    compared = rows.loc[[("tps3_k5", "20-40"), ("cosine2_k5", "40-60"), ("argmax", "20-40")]]
    assert compared["psnr_diff"].to_numpy() == pytest.approx((compared["psnr"] - rows.loc[
        [("tps1_k5", "20-40"), ("tps1_k5", "40-60"), ("tps1_k5", "20-40")], "psnr"].to_numpy()).to_numpy())
    assert (compared["psnr_diff_lo"] <= compared["psnr_diff"]).all() and compared["psnr_p"].between(0, 1).all()
    assert (compared["psnr_p_adjusted"] >= compared["psnr_p"]).all() and (csv["method"] == "holm").all()
    assert rows["fid_diff"].isna().all() and pd.isna(rows.loc[("argmax", "20-40"), "lpips_diff"])  # no value
    table = (out / "frontier.tex").read_text()
    assert "1 token/step" in table and r"cosine, 2 steps, $\mathcal{K}=5$" in table
    # bold only where the difference from Algorithm 1 survives the family's correction (two units, allowed by
    # min_units = 2 here, make many differences look certain: why the default minimum is far higher)
    assert re.findall(r"\\textbf\{[^}]*\}(\$\^\{\\dagger\}\$)?", table) and all(
        re.findall(r"\\textbf\{[^}]*\}(\$\^\{\\dagger\}\$)?", table))
    assert "the setting differs from Algorithm 1: a mark where" in table
    assert "Bold: the best quality per column and mask group, only where" in table
    assert r"TPAMI linear, 2 steps, $\mathcal{K}=5$" in table
    assert table.count("argmax is deterministic") == 1  # one footnote per reason, not per cell
    assert r"FID not measured: Inception" in table and "FID $" not in table  # no column of n/a
    assert "n/a$^{a}$" in table and r"LPIPS $\uparrow$" in table and "0.1250" in table
    assert (out / "frontier.png").stat().st_size > 10_000


def frontier_frame(significant: bool) -> pd.DataFrame:
    """Three settings of one group: Algorithm 1 (the reference), 4 tokens per step (best PSNR), argmax."""
    rows = []
    for setting, label, family, value, top_k, psnr, diff in (("tps1_k50", "1 token/step", "tokens_per_step", 1, 50,
                                                               20.0, None),
                                                              ("tps4_k50", "4 tokens/step", "tokens_per_step", 4, 50,
                                                               20.5, 0.5),
                                                              ("argmax", "argmax, all at once", "argmax", 1, None, 19.0,
                                                               -1.0)):
        row = {"setting": setting, "label": label, "family": family, "value": value, "top_k": top_k, "group": "40-60",
               "n": 100, "forward_passes": 100.0 / value, "seconds_per_image": 0.01 * value, "psnr": psnr,
               "ssim": 0.5, "mae": 0.1, "lpips": np.nan, "fid": np.nan, "lpips_unavailable": "no", "fid_unavailable":
               "no", "reference": None if diff is None else "tps1_k50", "method": "holm"}
        if diff is not None:
            row.update(psnr_diff=diff, psnr_diff_lo=diff - 0.3, psnr_diff_hi=diff + 0.3, psnr_p=0.001,
                       psnr_p_adjusted=0.003, psnr_significant=significant, psnr_resamples=20000,
                       psnr_no_interval="")
        rows.append(row)
    return pd.DataFrame(rows)


@pytest.mark.parametrize("significant", [True, False])
def test_the_frontier_bolds_a_best_only_where_it_survives_and_draws_error_bars(tmp_path, significant):
    from matplotlib.container import ErrorbarContainer
    from matplotlib.figure import Figure

    from put.report.frontier import frontier_table, plot_frontier
    from put.report.latex import render_latex

    frame = frontier_frame(significant)
    latex = render_latex(frontier_table(frame, "ffhq"))
    assert (r"\textbf{20.500}$^{\dagger}${\scriptsize$\pm$0.30}" in latex) == significant
    assert (r"\textbf" in latex) == significant and "20.500" in latex
    assert "1 tested; " not in latex and "2 tested; " in latex  # PSNR of two settings (the others unmeasured)
    drawn, original = [], Figure.savefig

    def spy(fig, *args, **kwargs):
        drawn.extend(c for ax in fig.axes for c in ax.containers if isinstance(c, ErrorbarContainer))
        return original(fig, *args, **kwargs)

    Figure.savefig = spy
    try:
        plot_frontier(frame, tmp_path / "frontier.png")
    finally:
        Figure.savefig = original
    bars = [np.asarray(seg) for c in drawn for collection in c.lines[2] for seg in collection.get_segments()]
    spans = sorted(round(float(b[:, 1].max() - b[:, 1].min()), 6) for b in bars)
    assert spans.count(0.6) == 2  # the two compared settings' +-0.3, around Algorithm 1's value plus the difference


def test_evaluate_writes_flat_metrics_info_and_bins(tmp_path, masks, params, tiny_checkpoints, monkeypatch):
    _, _, transformer = tiny_checkpoints
    samples = tmp_path / "samples"
    sample_variant(params, "put", transformer, masks, samples, device="cpu")
    out = tmp_path / "metrics" / "put.json"
    evaluate_variant(params, "put", samples, masks, out)

    metrics = json.loads(out.read_text())
    assert only_numbers(metrics)
    assert set(metrics) == {"all", "k50", "bins"}
    assert set(metrics["k50"]) == {"20-40", "40-60", "10-60"} and set(metrics["bins"]) == {
        "10-20", "20-30", "30-40", "40-50", "50-60"}
    cell = metrics["k50"]["40-60"]
    assert {"psnr", "ssim", "mae", "psnr_lo", "psnr_hi", "mae_lo", "mae_hi"} <= set(cell) and "fid" not in cell
    assert "n" not in cell and all(cell[f"{m}_lo"] <= cell[m] <= cell[f"{m}_hi"] for m in ("psnr", "ssim", "mae"))
    info = json.loads(metrics_info_file(out).read_text())
    assert info["protocol"]["ssim_window"] == 7 and "put weights --download" in info["unavailable"]["k50/40-60/fid"]
    assert info["n"]["k50"]["40-60"] == 3 and info["seed"] == 0 and "percentile bootstrap" in info["interval"]
    assert info["intervals"]["k50/40-60/psnr"]["units"] == 3
    assert info["intervals"]["k50/40-60/psnr"]["resamples"] == 20000
    bins = pd.read_csv(metrics_bins_file(out))
    assert list(bins["hole_ratio"]) == [0.15, 0.25, 0.35, 0.45, 0.55]
    assert bins["psnr"].notna().all() and bins["psnr_lo"].notna().all() and bins["lpips"].isna().all()
    # every per-image value behind the means: the mean of the file's rows is the metrics file's value
    images = pd.read_csv(metrics_images_file(out), dtype={"group": str})
    assert set(images["source"]) == set(IMAGES)  # no source named: each image its own
    rows = images[(images["mode"] == "k50") & (images["group"] == "40-60")]
    assert len(rows) == 3 and rows["psnr"].replace(np.inf, np.nan).mean() == pytest.approx(cell["psnr"])
    fine = images[(images["mode"] == "bins") & (images["group"] == "40-50")]
    assert len(fine) == fine["image"].nunique() * params.resolved().sample.diversity_samples

    table, curves = read_metrics([out])
    row = table.set_index(["mode", "group"]).loc[("k50", "40-60")]
    assert row["psnr"] == metrics["k50"]["40-60"]["psnr"] and "put weights" in row["fid_unavailable"]
    assert len(curves) == 5 and curves["lpips_unavailable"].str.contains("LPIPS|VGG16").all()

    # The report of every variant and a seed replicate: intervals, paired differences, seeds (stand-in files for
    # the other variants: PUT's, conv's PSNR lowered by 1 dB on every image, the replicate's by 0.5 dB).
    from put.config.paths import pasted_metrics_file
    from put.stages.report import run_report

    # the Table 1 groups with the known pixels pasted back, as the stage writes them beside (Table 1's ranked rule)
    pasted = evaluate_variant(params, "put", samples, masks, pasted_metrics_file(out), rule="pasted", fine_bins=False)
    assert set(pasted) == {"all", "k50"} and pasted["k50"]["40-60"]["psnr"] != metrics["k50"]["40-60"]["psnr"]
    assert json.loads(metrics_info_file(pasted_metrics_file(out)).read_text())["protocol"]["known_pixels"] == "pasted"
    folder = out.parent
    for label, shift, seed in (("conv", -1.0, 0), ("one", 0.0, 0), ("no_ref", 0.0, 0), ("tok", 0.0, 0),
                               ("qua0", 0.0, 0), ("put_seed1", -0.5, 1)):
        variant = label.split("_seed")[0]
        values = json.loads(out.read_text())
        for cell in (c for groups in values.values() for c in groups.values()):
            cell.update({k: v + shift for k, v in cell.items() if k.startswith("psnr")})
        (folder / f"{label}.json").write_text(json.dumps(values))
        info["variant"], info["seed"] = variant, seed
        (folder / f"{label}_info.json").write_text(json.dumps(info))
        frame = images.assign(psnr=images["psnr"] + shift)
        frame.to_csv(metrics_images_file(folder / f"{label}.json"), index=False)
    labels = ("put", "conv", "one", "no_ref", "tok", "qua0", "put_seed1")
    (tmp_path / "bench").mkdir()
    monkeypatch.chdir(tmp_path)  # the PDF goes to reports/<preset>.pdf
    report = run_report(params, [folder / f"{label}.json" for label in labels], samples, masks, tmp_path / "bench",
                        tmp_path / "report")
    table3 = (report / "table3.tex").read_text()
    assert r"$^{\dagger}${\scriptsize$\pm$" in table3 and r"\scriptsize$\pm$" in (report / "table1.tex").read_text()
    differences = pd.read_csv(report / "differences.csv")
    conv = differences[(differences["variant"] == "conv") & (differences["metric"] == "psnr")]
    assert conv["difference"].to_numpy() == pytest.approx(-1.0) and conv["significant"].all()
    assert not differences[differences["variant"] == "one"]["significant"].any()
    assert (differences["p_adjusted"] >= differences["p"]).all() and (differences["method"] == "holm").all()
    seeds = pd.read_csv(report / "seeds.csv", dtype={"seeds": str})
    row = seeds[(seeds["variant"] == "put") & (seeds["metric"] == "psnr")].iloc[0]
    assert row["replicates"] == 2 and row["std"] == pytest.approx(0.5 / np.sqrt(2))
    assert (report / "seeds.tex").is_file() and r"\section{Software}" in (report / "report.tex").read_text()

    metrics_info_file(out).unlink()
    with pytest.raises(FileNotFoundError, match="put.json"):
        read_metrics([out])
