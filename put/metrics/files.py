"""The evaluate stage's files read back (`<label>.json`, `_info.json`, `_images.csv`; names in put.config.paths):
the report's table and curve rows, each result's per-image values, and the evaluation's MLflow run logged from
them. What each file holds (docs/pipeline.md, "The evaluation's files")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from put.config.bins import BINS
from put.config.params import Params
from put.config.paths import metrics_bins_file, metrics_images_file, metrics_info_file, pasted_metrics_file
from put.errors import FileMismatchError
from put.io.files import read_json
from put.masks.evaluation import MANIFEST
from put.metrics.cells import BOUNDS
from put.metrics.per_image import read_per_image, rule_of
from put.metrics.summary import PIXEL_METRICS
from put.tracking.base import Tracker

METRICS = ("fid", "lpips", *PIXEL_METRICS)
NO_INTERVAL = "no_interval"  # <metric>_no_interval: why a measured value has no interval (read_metrics)


def log_evaluation(tracker: Tracker, params: Params, masks: Path, out: Path) -> None:
    """The evaluation's run, from its files (the stage at its end; `put track` when DVC skipped the stage): its
    parameters, the metrics named <mode>/<group>/<metric> (k50/10-60/psnr) on the frozen masks' manifest as
    dataset, and the four files."""
    tracker.log_params(params.resolved().evaluate.model_dump())
    tracker.log_evaluation(read_json(out, "the metrics file `put evaluate` writes"), masks / MANIFEST)
    for main in (out, pasted_metrics_file(out)):
        for path in (main, metrics_info_file(main), metrics_bins_file(main), metrics_images_file(main)):
            if path.is_file() or main == out:  # an evaluation of before the pasted files has none
                tracker.log_artifact(Path(path))


def read_images(metrics: Path) -> pd.DataFrame:
    """The per-image values written beside a metrics file, with the compositing rule they were scored under
    (`rule`, from the info file's protocol: put/stats/differences.py pairs only values of one rule)."""
    frame = read_per_image(metrics_images_file(metrics))
    info = read_json(metrics_info_file(metrics), f"the `put evaluate` record written beside {Path(metrics).name}")
    return frame.assign(rule=rule_of(info) if isinstance(info, dict) else "raw")


def read_metrics(files: list[Path], preset: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The evaluate stage's files (of `preset`, when given) -> (table rows, curve rows): per variant x seed x group x
    mode (resp. fine bin), `rule`, each metric with `_lo`, `_hi`, `_mc`, `_units`, `n`, NaN where absent, and
    `_unavailable` / `_no_interval` saying why."""
    table, curves = [], []
    for path in map(Path, files):
        values = read_json(path, "a metrics file written by `put evaluate`")
        info = read_json(metrics_info_file(path), f"the `put evaluate` record written beside {path.name}")
        if not (isinstance(values, dict) and isinstance(info, dict) and isinstance(info.get("unavailable"), dict)
                and isinstance(info.get("n"), dict)):
            raise FileMismatchError(f"{path}: not a metrics file of `put evaluate` "
                                    f"(or its {metrics_info_file(path).name} "
                             "is not) -- re-run the evaluate stage")
        if preset is not None and info.get("preset") != preset:
            raise FileMismatchError(f"{path}: metrics of the {info.get('preset')!r} preset, expected {preset!r}")
        reasons: dict[tuple[str, str], dict] = {}
        for key, reason in info["unavailable"].items():
            *cell, metric = key.split("/")
            reasons.setdefault(tuple(cell), {})[f"{metric}_unavailable"] = reason
        for key, record in info.get("intervals", {}).items():
            *cell, metric = key.split("/")
            reasons.setdefault(tuple(cell), {}).update(
                {f"{metric}_units": record.get("units"), f"{metric}_mc": record.get("mc_error"),
                 f"{metric}_{NO_INTERVAL}": record.get("reason") or ""})
        cells = {tuple(cell) for cell in reasons} | {(mode, group) for mode, groups in values.items()
                                                      for group in groups}
        for mode, group in sorted(cells):
            row = {"variant": info["variant"], "seed": int(info.get("seed", 0)), "rule": rule_of(info),
                   **values.get(mode, {}).get(group, {}),
                   **reasons.get((mode, group), {}), "n": info["n"].get(mode, {}).get(group, np.nan)}
            if mode == BINS:
                curves.append({**row, "bin": group})
            else:
                table.append({**row, "group": group, "mode": mode})
    return _complete(pd.DataFrame(table), ("fid", *PIXEL_METRICS)), _complete(pd.DataFrame(curves), METRICS)


def _complete(frame: pd.DataFrame, metrics: tuple[str, ...]) -> pd.DataFrame:
    """Every metric, bound and reason column present (NaN / "" where nothing was recorded)."""
    for metric in metrics:
        for column in (metric, *(f"{metric}_{end}" for end in (*BOUNDS, "mc", "units"))):
            frame[column] = frame[column].astype(float) if column in frame else np.nan
        for reason in (f"{metric}_unavailable", f"{metric}_{NO_INTERVAL}"):
            frame[reason] = frame[reason].fillna("") if reason in frame else ""
    return frame
