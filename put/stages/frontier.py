"""Stage `frontier`: the frontier study (put/study/frontier.py) of one variant, written as its CSV, LaTeX table,
figure and metrics file, and tracked."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd

from put.config import paths
from put.config.params import Params
from put.io.files import atomic_write_text, read_json
from put.masks.evaluation import MANIFEST
from put.report.frontier import FRONTIER_FIGURE, FRONTIER_TABLE, frontier_table, plot_frontier
from put.report.latex import write_latex
from put.study.frontier import measure_frontier
from put.tracking.base import Tracker, tracked
from put.tracking.factory import stage_tracker
from put.tracking.names import metric_names
from put.tracking.source import git_commit

METRICS_FILE = Path(paths.FRONTIER_METRICS).name
CSV_FILE = Path(paths.FRONTIER_CSV).name


def run_frontier(params: Params, variant: str, checkpoint: Path, masks: Path, out_dir: Path, samples_dir: Path,
                 device: str | None = None, tags: dict[str, str] | None = None,
                 pvqvae: Path | None = None, command: str = "put frontier") -> pd.DataFrame:
    out_dir = Path(out_dir)
    with tracked(stage_tracker(params.preset, variant, "frontier", params.dag_id(), tags,
                               labels=params.evaluated_labels(), system_metrics=True)) as tracker:
        started = time.perf_counter()
        frame, cells = measure_frontier(params, variant, checkpoint, masks, samples_dir, device, pvqvae)
        atomic_write_text(out_dir / CSV_FILE, frame.to_csv(index=False))
        write_latex(frontier_table(frame, params.preset, variant, params.resolved().evaluate.interval_level),
                    out_dir / FRONTIER_TABLE, None, "tab:frontier", command,
                    git_commit() or "unknown")
        plot_frontier(frame, out_dir / FRONTIER_FIGURE)
        atomic_write_text(out_dir / METRICS_FILE, json.dumps(cells.values, indent=2, allow_nan=False) + "\n")
        tracker.log_metrics({"stage/wall_seconds": time.perf_counter() - started}, step=0)
        log_outputs(tracker, params, Path(masks), out_dir)
        return frame


def log_outputs(tracker: Tracker, params: Params, masks: Path, out_dir: Path) -> None:
    """The frontier's run, from its files (the stage at its end; `put track` when DVC skipped the stage): its
    parameters, the frozen masks' manifest as dataset, the transformer it read, the metrics named
    <setting>/<group>/<metric>, and its files."""
    tracker.log_params(params.resolved().frontier.model_dump())
    tracker.log_dataset(masks / MANIFEST, f"{params.preset} test masks", "evaluation")
    tracker.use_model("transformer")
    tracker.log_metrics(metric_names(read_json(out_dir / METRICS_FILE, "the frontier's metrics")), step=0)
    for name in (METRICS_FILE, CSV_FILE, FRONTIER_TABLE, FRONTIER_FIGURE):
        tracker.log_artifact(out_dir / name)
