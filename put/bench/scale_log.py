"""The evaluate stage's MLflow logging alone, as `put bench scale` times it (put/bench/scale_tools.py): one
evaluation's run logged from its files, in the workspace's params.yaml. Usage: python -m put.bench.scale_log LABEL
MASKS METRICS_FILE."""

from __future__ import annotations

import sys
from pathlib import Path

from put.config.params import load_params
from put.metrics.files import log_evaluation
from put.tracking.base import tracked
from put.tracking.factory import stage_tracker


def log_one_evaluation(label: str, masks: Path, metrics: Path) -> None:
    params = load_params("params.yaml")
    with tracked(stage_tracker(params.preset, label, "evaluate", params.dag_id(), {"bench": "scale"},
                               labels=params.evaluated_labels(), seed=params.seed, from_outputs=True)) as tracker:
        log_evaluation(tracker, params, masks, metrics)


if __name__ == "__main__":
    log_one_evaluation(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
