"""Stage `evaluate`: one variant's samples -> metrics (Table 1 / Table 3 cells and the hole-ratio curves).

Per table group and mode: mean PSNR, SSIM, MAE (scikit-image, under the recorded protocol) and FID
(torch-fidelity) against the ground truth. Per fine bin: mean PSNR, SSIM, MAE over all samples, FID of
each image's first sample and the mean pairwise LPIPS of its samples (diversity).

Three files (names in put.paths):
- `<variant>.json`: only numbers, nested {mode: {group: {metric: value}}} plus {"bins": {bin: {...}}},
  which is what `dvc metrics show` lists; a metric that could not be measured is absent.
- `<variant>_info.json`: the protocol, the sampling settings and why each absent value is absent.
- `<variant>_bins.csv`: one row per fine bin, x = hole-ratio bin centre (`hole_ratio`), for `dvc plots`.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from put.config.evaluation import MetricProtocol
from put.config.params import Params
from put.fileio import atomic_write_text, read_json
from put.masks.bins import FINE_BINS, TABLE_GROUPS
from put.masks.evaluation import read_manifest
from put.metrics import MetricValue
from put.metrics.diversity import diversity_lpips
from put.metrics.fid import fid
from put.metrics.image import metrics_table
from put.paths import metrics_bins_file, metrics_info_file
from put.stages.sample import TABLE_MODES, read_samples
from put.tracking import stage_tracker, tracked

PIXEL_METRICS = ("psnr", "ssim", "mae")
BINS = "bins"  # the key of the fine-bin curves in the metrics file


def mode_label(mode: str, top_k: int) -> str:
    """Column labels of the paper: `all` (deterministic) and `k50` (top-K sampling, K = 50)."""
    return "all" if mode == "all" else f"k{top_k}"


def linked_folder(files: list[Path], root: Path) -> Path:
    """A folder holding exactly `files` (as symlinks): FID compares whole folders."""
    root.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(files):
        (root / f"{i:05d}.png").symlink_to(Path(f).resolve())
    return root


def pixel_metrics(results: list[Path], targets: list[Path], protocol: MetricProtocol) -> dict[str, float]:
    """Mean PSNR, SSIM and MAE over result/target pairs (a perfect result's infinite PSNR left out)."""
    per_image = metrics_table(list(zip(results, targets)), protocol)
    return {m: float(per_image[m].replace(np.inf, np.nan).mean()) for m in PIXEL_METRICS}


def files_fid(results: list[Path], targets: list[Path], protocol: MetricProtocol) -> MetricValue:
    with tempfile.TemporaryDirectory() as tmp:
        return fid(linked_folder(results, Path(tmp) / "result"), linked_folder(targets, Path(tmp) / "target"),
                   protocol)


class Cells:
    """Numbers by key path (for the metrics file) and, for each value that could not be measured, why."""

    def __init__(self) -> None:
        self.values: dict = {}
        self.unavailable: dict[str, str] = {}

    def put(self, keys: tuple[str, ...], name: str, value: float | MetricValue) -> None:
        if isinstance(value, MetricValue):
            if not value.available:
                self.unavailable["/".join((*keys, name))] = value.unavailable
                return
            value = value.value
        if np.isfinite(value):
            node = self.values
            for key in keys:
                node = node.setdefault(key, {})
            node[name] = value if isinstance(value, int) else float(value)


def run_evaluate(params: Params, variant: str, samples: Path, masks: Path, out: Path,
                 tags: dict[str, str] | None = None) -> dict:
    with tracked(stage_tracker(params.preset, variant, "evaluate", params.dag_id(), tags)) as tracker:
        tracker.log_params(params.resolved().evaluate.model_dump())
        metrics = evaluate_variant(params, variant, samples, masks, out)
        tracker.log_evaluation(metrics, masks)  # metric names <mode>/<group>/<metric>, e.g. k50/10-60/psnr
        for path in (out, metrics_info_file(out), metrics_bins_file(out)):
            tracker.log_artifact(Path(path))
        return metrics


def evaluate_variant(params: Params, variant: str, samples: Path, masks: Path, out: Path) -> dict:
    """Writes the three files; returns the metrics file's content."""
    preset = params.resolved()
    protocol, top_k = preset.evaluate, preset.sample.top_k
    samples, masks, out = Path(samples), Path(masks), Path(out)
    read_manifest(masks)  # the folder `put masks` wrote, or an error saying so
    jobs = read_samples(samples)
    jobs["result"] = [samples / o for o in jobs["output"]]
    jobs["target"] = [masks / "gt" / f"{Path(m).stem}.png" for m in jobs["mask"]]
    cells = Cells()

    for (group, mode), rows in jobs[jobs["mode"].isin(TABLE_MODES)].groupby(["group", "mode"], sort=False):
        keys = (mode_label(mode, top_k), group)
        results, targets = list(rows["result"]), list(rows["target"])
        for metric, value in pixel_metrics(results, targets, protocol).items():
            cells.put(keys, metric, value)
        cells.put(keys, "fid", files_fid(results, targets, protocol))
        cells.put(keys, "n", len(rows))

    diversity = jobs[jobs["mode"] == "diversity"]
    for bin_name in FINE_BINS:
        rows = diversity[diversity["group"] == bin_name]
        if rows.empty:
            continue
        keys = (BINS, bin_name)
        for metric, value in pixel_metrics(list(rows["result"]), list(rows["target"]), protocol).items():
            cells.put(keys, metric, value)
        first = rows[rows["sample"] == 0]
        cells.put(keys, "fid", files_fid(list(first["result"]), list(first["target"]), protocol))
        groups = [list(g["result"]) for _, g in rows.groupby("image", sort=True)]
        cells.put(keys, "lpips", diversity_lpips(groups, protocol, seed=preset.sample.seed))
        cells.put(keys, "n", len(groups))

    info = {"variant": variant, "preset": params.preset, "dag_id": params.dag_id(),
            "protocol": protocol.model_dump(), "sampling": preset.sample.model_dump(),
            "groups": {name: list(bounds) for name, bounds in {**TABLE_GROUPS, **FINE_BINS}.items()},
            "unavailable": cells.unavailable}
    atomic_write_text(metrics_info_file(out), json.dumps(info, indent=2) + "\n")
    atomic_write_text(metrics_bins_file(out), bins_frame(variant, cells.values.get(BINS, {})).to_csv(index=False))
    atomic_write_text(out, json.dumps(cells.values, indent=2, allow_nan=False) + "\n")  # last: the DAG's output
    return cells.values


def bins_frame(variant: str, bins: dict) -> pd.DataFrame:
    """One row per fine bin: variant, bin, hole_ratio (bin centre), then every metric (blank when absent)."""
    rows = [{"variant": variant, "bin": name, "hole_ratio": round(sum(FINE_BINS[name]) / 2, 4), **bins[name]}
            for name in FINE_BINS if name in bins]
    columns = ["variant", "bin", "hole_ratio", *PIXEL_METRICS, "fid", "lpips", "n"]
    return pd.DataFrame(rows, columns=columns)


def read_metrics(files: list[Path], preset: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The evaluate stage's files (all of `preset`, when given) -> (table rows, curve rows) for the report: one
    row per variant x group x mode (resp. variant x fine bin) with each metric, NaN where absent, and
    `<metric>_unavailable` saying why."""
    table, curves = [], []
    for path in map(Path, files):
        values = read_json(path, "a metrics file written by `put evaluate`")
        info = read_json(metrics_info_file(path), f"the `put evaluate` record written beside {path.name}")
        if not (isinstance(values, dict) and isinstance(info, dict) and isinstance(info.get("unavailable"), dict)):
            raise ValueError(f"{path}: not a metrics file of `put evaluate` (or its {metrics_info_file(path).name} "
                             "is not) -- re-run the evaluate stage")
        if preset is not None and info.get("preset") != preset:
            raise ValueError(f"{path}: metrics of the {info.get('preset')!r} preset, expected {preset!r}")
        reasons: dict[tuple[str, str], dict[str, str]] = {}
        for key, reason in info["unavailable"].items():
            *cell, metric = key.split("/")
            reasons.setdefault(tuple(cell), {})[f"{metric}_unavailable"] = reason
        cells = {tuple(cell) for cell in reasons} | {(mode, group) for mode, groups in values.items()
                                                      for group in groups}
        for mode, group in sorted(cells):
            row = {"variant": info["variant"], **values.get(mode, {}).get(group, {}), **reasons.get((mode, group), {})}
            if mode == BINS:
                curves.append({**row, "bin": group})
            else:
                table.append({**row, "group": group, "mode": mode})
    metrics = ("fid", "lpips", *PIXEL_METRICS)
    return _complete(pd.DataFrame(table), ("fid", *PIXEL_METRICS)), _complete(pd.DataFrame(curves), metrics)


def _complete(frame: pd.DataFrame, metrics: tuple[str, ...]) -> pd.DataFrame:
    """Every metric and reason column present (NaN / "" where nothing was recorded)."""
    for metric in metrics:
        reason = f"{metric}_unavailable"
        frame[metric] = frame[metric].astype(float) if metric in frame else np.nan
        frame[reason] = frame[reason].fillna("") if reason in frame else ""
    return frame
