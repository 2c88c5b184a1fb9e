"""`put compare --mlflow`: a comparison as an MLflow run of the preset's experiment, beside the stage runs: the
results compared as parameters, each difference and its interval as metrics, the table as an artifact
(docs/mlflow.md)."""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path

from put.tracking.names import experiment_name
from put.tracking.runs import EXPERIMENT_KIND, locked_client
from put.tracking.source import environment_tags

LEVEL_TAG = "put.level"  # a comparison run: tags put.level = comparison, put.baseline, put.compared
BATCH = 1000  # metrics per log_batch call, MLflow's limit
KEY_CHARACTERS = re.compile(r"[^A-Za-z0-9_\-. /]")  # what MLflow accepts in a metric's name


def metric_key(*parts: str) -> str:
    return "/".join(KEY_CHARACTERS.sub("_", part) for part in parts)


def log_comparison(preset: str, baseline: str, compared: list[str], rows: list[dict], files: dict[str, str],
                   params: dict[str, str], command: str) -> str:
    """One run: `params` (what each result is), `rows` (result, mode, group, metric, difference, lo, hi,
    p_adjusted) as metrics named <result>/<mode>/<group>/<metric>/difference (lo, hi, p_adjusted beside it),
    `files` (name -> text) as artifacts; returns the run's id."""
    from mlflow.entities import Metric, Param

    tags = {**environment_tags(command), LEVEL_TAG: "comparison", "put.preset": preset, "put.baseline": baseline,
            "put.compared": ",".join(compared)}  # before the lock: git takes a while
    with locked_client() as client:  # the SQLite store's lock, as every stage's calls
        experiment = client.get_experiment_by_name(experiment_name(preset))
        experiment_id = experiment.experiment_id if experiment else client.create_experiment(
            experiment_name(preset), tags={"mlflow.experimentKind": EXPERIMENT_KIND})  # as the stages make it
        run = client.create_run(experiment_id, tags=tags,
                                run_name=f"compare {' '.join([baseline, *compared])}"[:250])
        run_id = run.info.run_id
        try:
            stamp = run.info.start_time
            metrics = [Metric(metric_key(row["result"], row["mode"], row["group"], row["metric"], field),
                              float(row[field]), stamp, 0)
                       for row in rows for field in ("difference", "lo", "hi", "p_adjusted")
                       if row.get(field) is not None and math.isfinite(row[field])]
            client.log_batch(run_id, params=[Param(k, v[:6000]) for k, v in params.items()])
            for start in range(0, len(metrics), BATCH):
                client.log_batch(run_id, metrics=metrics[start:start + BATCH])
            with tempfile.TemporaryDirectory() as folder:
                for name, text in files.items():
                    (Path(folder) / name).write_text(text)
                    client.log_artifact(run_id, str(Path(folder) / name))
        except BaseException:
            client.set_terminated(run_id, "FAILED")
            raise
        client.set_terminated(run_id, "FINISHED")
    return run_id
