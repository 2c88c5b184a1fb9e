"""Stage `evaluate`: one variant's samples -> metrics (Table 1 / Table 3 cells and the hole-ratio curves), each
with its 95% bootstrap interval over the sources of the test images or the reason it has none. This module reads
and writes files (`<label>.json`, `_info.json`, `_bins.csv`, `_images.csv`; names in put.config.paths); the
numbers come from put/metrics/summary.py. What each file holds (docs/pipeline.md, "The evaluation's files")."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from put.config.bins import BINS, FINE_BINS, TABLE_GROUPS
from put.config.evaluation import RANKED_RULE, MetricProtocol
from put.config.params import Params
from put.config.paths import metrics_bins_file, metrics_images_file, metrics_info_file, pasted_metrics_file
from put.data.images import read_rgb, write_png
from put.errors import FileMismatchError
from put.io.files import atomic_write_text
from put.masks.evaluation import MANIFEST, read_manifest
from put.masks.io import read_mask
from put.metrics import MetricValue
from put.metrics.cells import BOUNDS, Cells
from put.metrics.diversity import diversity_lpips_per_input
from put.metrics.fid import fid_features
from put.metrics.files import log_evaluation
from put.metrics.image import metrics_table, paste_known
from put.metrics.per_image import IMAGE_COLUMNS, MASKS, masks_record
from put.metrics.summary import PIXEL_METRICS, fid_summary, mean_summary, pixel_summaries, unmeasured
from put.sampling.jobs import TABLE_MODES, read_samples
from put.stats.bootstrap import Bootstrap
from put.tracking.base import tracked
from put.tracking.factory import stage_tracker


def mode_label(mode: str, top_k: int) -> str:
    """Column labels of the paper: `all` (deterministic) and `k50` (top-K sampling, K = 50)."""
    return "all" if mode == "all" else f"k{top_k}"


def run_evaluate(params: Params, variant: str, samples: Path, masks: Path, out: Path,
                 tags: dict[str, str] | None = None) -> dict:
    with tracked(stage_tracker(params.preset, variant, "evaluate", params.dag_id(), tags,
                               labels=params.evaluated_labels(), seed=params.seed)) as tracker:
        started = time.perf_counter()
        metrics = evaluate_variant(params, variant, samples, masks, out)
        # Table 1 ranks methods under one rule: the same results, known pixels pasted back (docs/external.md).
        evaluate_variant(params, variant, samples, masks, pasted_metrics_file(out), rule=RANKED_RULE,
                         fine_bins=False)
        tracker.log_metrics({"stage/wall_seconds": time.perf_counter() - started}, step=0)
        log_evaluation(tracker, params, Path(masks), Path(out))
        return metrics


def evaluation_jobs(samples: Path, masks: Path) -> pd.DataFrame:
    """The sample stage's results, each with its target and its test image's source."""
    sources = read_manifest(masks).drop_duplicates("image").set_index("image")["image_source"]
    jobs = read_samples(samples)
    jobs["result"] = [samples / o for o in jobs["output"]]
    jobs["target"] = [masks / "gt" / f"{Path(m).stem}.png" for m in jobs["mask"]]
    jobs["source"] = jobs["image"].map(sources)
    if jobs["source"].isna().any():
        raise FileMismatchError(f"{samples}: image {jobs.loc[jobs['source'].isna(), 'image'].iloc[0]!r} is not in "
                                f"{Path(masks) / MANIFEST}: samples and masks of different runs")
    return jobs


def pasted_results(jobs: pd.DataFrame, masks: Path, scratch: Path) -> list[Path]:
    """Every result of `jobs` with its input's known pixels pasted back (put.metrics.image.paste_known), written
    under `scratch` by its output name: the compositing rule "pasted", the same for every method's results."""
    paths = []
    for row in jobs.itertuples():
        gt = read_rgb(row.target)
        keep = read_mask(masks / row.mask, "hole-white", gt.shape[:2])[0].numpy()
        try:
            pasted = paste_known(read_rgb(row.result), gt, keep)
        except ValueError as err:
            raise FileMismatchError(f"{row.result} vs {row.target}: {err}") from None
        paths.append(scratch / row.output)
        paths[-1].parent.mkdir(parents=True, exist_ok=True)
        write_png(paths[-1], pasted)
    return paths


def evaluate_variant(params: Params, variant: str, samples: Path, masks: Path, out: Path, rule: str | None = None,
                     fine_bins: bool = True) -> dict:
    """Writes the four files; returns the metrics file's content. `rule`: the compositing rule to score under
    (default: the protocol's `known_pixels`), recorded in the protocol of the info file; `fine_bins` False scores
    the Table 1 groups only."""
    preset = params.resolved()
    protocol = preset.evaluate if rule is None else preset.evaluate.model_copy(update={"known_pixels": rule})
    samples, masks, out = Path(samples), Path(masks), Path(out)
    jobs = evaluation_jobs(samples, masks)
    if not fine_bins:
        jobs = jobs[jobs["mode"].isin(TABLE_MODES)].reset_index(drop=True)
    with tempfile.TemporaryDirectory(prefix="put-pasted-") as scratch:
        if protocol.known_pixels == "pasted":
            jobs = jobs.assign(result=pasted_results(jobs, masks, Path(scratch)))
        return _write_evaluation(params, variant, protocol, jobs, masks, out)


def _write_evaluation(params: Params, variant: str, protocol: MetricProtocol, jobs: pd.DataFrame, masks: Path,
                      out: Path) -> dict:
    preset = params.resolved()
    top_k = preset.sample.top_k
    boot, fid_boot = Bootstrap.of(protocol), Bootstrap.of(protocol, fid=True)
    cells, per_image = Cells(), []

    def measure(rows: pd.DataFrame, keys: tuple[str, str], fid_rows: pd.DataFrame) -> pd.DataFrame:
        """PSNR/SSIM/MAE of every result of `rows` and FID of `fid_rows` (one result per image), with their
        intervals; returns the per-image values."""
        values = metrics_table(list(zip(rows["result"], rows["target"])), protocol)
        summaries = pixel_summaries(values, rows["source"].to_numpy(), boot, rows["image"].nunique())
        for metric, summary in summaries.items():
            cells.put(keys, metric, summary)
        features = fid_features(list(fid_rows["result"]), list(fid_rows["target"]), protocol)
        cells.put(keys, "fid", fid_summary(features, fid_rows["source"].to_numpy(), fid_boot))
        cells.count(keys, rows["image"].nunique())
        frame = rows[["image", "source", "sample"]].reset_index(drop=True).assign(mode=keys[0], group=keys[1])
        return pd.concat([frame, values[list(PIXEL_METRICS)]], axis=1)

    for (group, mode), rows in jobs[jobs["mode"].isin(TABLE_MODES)].groupby(["group", "mode"], sort=False):
        per_image.append(measure(rows, (mode_label(mode, top_k), group), rows))

    diversity = jobs[jobs["mode"] == "diversity"]
    for bin_name in FINE_BINS:
        rows = diversity[diversity["group"] == bin_name]
        if rows.empty:
            continue
        keys = (BINS, bin_name)
        frame = measure(rows, keys, rows[rows["sample"] == 0])
        inputs = list(rows.groupby("image", sort=True))
        # A deterministic method (an external one, docs/external.md) has one result per input: no pair to compare.
        lpips = (diversity_lpips_per_input([list(g["result"]) for _, g in inputs], protocol, seed=preset.sample.seed)
                 if max(len(g) for _, g in inputs) > 1 else
                 MetricValue.missing("one result per input (a deterministic method): no diversity to measure"))
        if isinstance(lpips, MetricValue):
            cells.put(keys, "lpips", unmeasured(lpips))
        else:
            sources = np.array([g["source"].iloc[0] for _, g in inputs])
            cells.put(keys, "lpips", mean_summary(lpips, sources, boot, len(inputs)))
            first_rows = frame.index[frame["sample"] == 0]
            frame.loc[first_rows, "lpips"] = pd.Series(lpips, index=[name for name, _ in inputs]).reindex(
                frame.loc[first_rows, "image"]).to_numpy()
        per_image.append(frame)

    images = pd.concat(per_image, ignore_index=True).reindex(columns=list(IMAGE_COLUMNS))
    info = evaluation_info(params, variant, protocol, jobs, masks, cells)
    atomic_write_text(metrics_info_file(out), json.dumps(info, indent=2) + "\n")
    atomic_write_text(metrics_bins_file(out), bins_frame(variant, cells.values.get(BINS, {})).to_csv(index=False))
    atomic_write_text(metrics_images_file(out), images.to_csv(index=False))
    atomic_write_text(out, json.dumps(cells.values, indent=2, allow_nan=False) + "\n")  # last: the DAG's output
    return cells.values


def evaluation_info(params: Params, variant: str, protocol: MetricProtocol, jobs: pd.DataFrame, masks: Path,
                    cells: Cells) -> dict:
    """The evaluation's record (`<variant>_info.json`): what was evaluated, how, on which masks, and each cell's
    sample size, intervals and what could not be measured."""
    return {"variant": variant, "seed": params.seed, "preset": params.preset, "dag_id": params.dag_id(),
            "protocol": protocol.model_dump(), "sampling": params.resolved().sample.model_dump(),
            MASKS: masks_record(masks / MANIFEST),
            "groups": {name: list(bounds) for name, bounds in {**TABLE_GROUPS, **FINE_BINS}.items()},
            "interval": f"{protocol.interval_level:.0%} expanded percentile bootstrap over the sources of the test "
                        "images "
                        f"({jobs['source'].nunique()} sources of {jobs['image'].nunique()} images; "
                        f"{protocol.bootstrap_resamples} resamples, FID {protocol.fid_bootstrap_resamples}, "
                        f"seed {protocol.bootstrap_seed}; none below {protocol.min_units} sources)",
            "n": cells.counts, "unavailable": cells.unavailable, "intervals": cells.intervals}


def bins_frame(variant: str, bins: dict) -> pd.DataFrame:
    """One row per fine bin: variant, bin, hole_ratio (bin centre), then every metric with its interval (blank
    when absent)."""
    rows = [{"variant": variant, "bin": name, "hole_ratio": round(sum(FINE_BINS[name]) / 2, 4), **bins[name]}
            for name in FINE_BINS if name in bins]
    columns = ["variant", "bin", "hole_ratio", *(f"{m}{end}" for m in (*PIXEL_METRICS, "fid", "lpips")
                                                for end in ("", *(f"_{b}" for b in BOUNDS)))]
    return pd.DataFrame(rows, columns=columns)


