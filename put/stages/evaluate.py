"""Stage `evaluate`: one variant's samples -> metrics JSON (Table 1 / Table 3 cells and the curves).

Per table group and mode: mean PSNR, SSIM, MAE (scikit-image, under the recorded protocol) and FID
(torch-fidelity) against the ground truth. Per fine bin: FID of each image's first sample and the mean
pairwise LPIPS of its samples (diversity). Metrics whose pretrained network is missing are recorded
as unavailable with the reason.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from put.config.params import Params
from put.fileio import atomic_write_text, read_json
from put.masks.bins import FINE_BINS, TABLE_GROUPS
from put.masks.evaluation import read_manifest
from put.metrics import MetricValue
from put.metrics.diversity import diversity_lpips
from put.metrics.fid import fid
from put.metrics.image import metrics_table
from put.stages.sample import TABLE_MODES, read_samples
from put.tracking import stage_tracker, tracked


def mode_label(mode: str, top_k: int) -> str:
    """Column labels of the paper: `all` (deterministic) and `k50` (top-K sampling, K = 50)."""
    return "all" if mode == "all" else f"k{top_k}"


def linked_folder(files: list[Path], root: Path) -> Path:
    """A folder holding exactly `files` (as symlinks): FID compares whole folders."""
    root.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(files):
        (root / f"{i:05d}.png").symlink_to(Path(f).resolve())
    return root


def value_fields(name: str, metric: MetricValue) -> dict:
    return {name: metric.value if metric.available else float("nan"), f"{name}_unavailable": metric.unavailable or ""}


def run_evaluate(params: Params, variant: str, samples: Path, masks: Path, out: Path,
                 tags: dict[str, str] | None = None) -> dict:
    with tracked(stage_tracker(params.preset, variant, "evaluate", params.dag_id(), tags)) as tracker:
        tracker.log_params(params.resolved().evaluate.model_dump())
        result = evaluate_variant(params, variant, samples, masks, out)
        for row in result["table"]:
            tracker.log_metrics({f"{m}/{row['group']}/{row['mode']}": row[m] for m in ("psnr", "ssim", "mae", "fid")
                                 if row[m] is not None}, step=0)
        for row in result["curves"]:
            tracker.log_metrics({f"{m}/{row['bin']}": row[m] for m in ("fid", "lpips") if row[m] is not None}, step=0)
        tracker.log_artifact(Path(out))
        return result


def evaluate_variant(params: Params, variant: str, samples: Path, masks: Path, out: Path) -> dict:
    preset = params.resolved()
    protocol, top_k = preset.evaluate, preset.sample.top_k
    samples, masks = Path(samples), Path(masks)
    read_manifest(masks)  # the folder `put masks` wrote, or an error saying so
    jobs = read_samples(samples)
    jobs["result"] = [samples / o for o in jobs["output"]]
    jobs["target"] = [masks / "gt" / f"{Path(m).stem}.png" for m in jobs["mask"]]

    table = []
    for (group, mode), rows in jobs[jobs["mode"].isin(TABLE_MODES)].groupby(["group", "mode"], sort=False):
        per_image = metrics_table(list(zip(rows["result"], rows["target"])), protocol)
        with tempfile.TemporaryDirectory() as tmp:
            fid_value = fid(linked_folder(list(rows["result"]), Path(tmp) / "result"),
                            linked_folder(list(rows["target"]), Path(tmp) / "target"), protocol)
        table.append({"variant": variant, "group": group, "mode": mode_label(mode, top_k), "n": len(rows),
                      **{m: float(per_image[m].replace(np.inf, np.nan).mean()) for m in ("psnr", "ssim", "mae")},
                      **value_fields("fid", fid_value)})

    curves = []
    diversity = jobs[jobs["mode"] == "diversity"]
    for bin_name in FINE_BINS:
        rows = diversity[diversity["group"] == bin_name]
        if rows.empty:
            continue
        first = rows[rows["sample"] == 0]
        with tempfile.TemporaryDirectory() as tmp:
            fid_value = fid(linked_folder(list(first["result"]), Path(tmp) / "result"),
                            linked_folder(list(first["target"]), Path(tmp) / "target"), protocol)
        groups = [list(g["result"]) for _, g in rows.groupby("image", sort=True)]
        lpips_value = diversity_lpips(groups, protocol, seed=preset.sample.seed)
        curves.append({"variant": variant, "bin": bin_name, "n": len(groups),
                       **value_fields("fid", fid_value), **value_fields("lpips", lpips_value)})

    result = {"variant": variant, "preset": params.preset, "dag_id": params.dag_id(),
              "protocol": protocol.model_dump(), "sampling": preset.sample.model_dump(),
              "groups": {name: list(bounds) for name, bounds in TABLE_GROUPS.items()},
              "table": table, "curves": curves}
    atomic_write_text(out, json.dumps(without_nan(result), indent=2, allow_nan=False) + "\n")
    return without_nan(result)


def without_nan(value):
    """NaN -> null: strict JSON, which DVC's metrics and other tools parse."""
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: without_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_nan(v) for v in value]
    return value


def read_metrics(files: list[Path], preset: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The evaluate stage's JSON files (all of `preset`, when given) -> (table rows, curve rows) for the report."""
    expected = "a metrics file written by `put evaluate`"
    records = [read_json(f, expected) for f in files]
    for path, record in zip(files, records):
        if not (isinstance(record, dict) and isinstance(record.get("table"), list)
                and isinstance(record.get("curves"), list)):
            raise ValueError(f"{path}: not {expected} (expected an object with 'table' and 'curves' lists)")
        if preset is not None and record.get("preset") != preset:
            raise ValueError(f"{path}: metrics of the {record.get('preset')!r} preset, expected {preset!r}")
    table = pd.DataFrame([row for r in records for row in r["table"]])
    curves = pd.DataFrame([row for r in records for row in r["curves"]])
    return table.fillna({"fid_unavailable": ""}), curves.fillna({"fid_unavailable": "", "lpips_unavailable": ""})
