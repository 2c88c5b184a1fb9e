"""A training's final values, linked to its model at the last step, are the points the run logged there, not a
second point at another time (found by the Slurm suite's exactly-once check, issue 43)."""

from __future__ import annotations

import time

from put.tracking.base import tracked
from put.tracking.runs import MlflowTracker


def test_the_final_metrics_of_a_model_are_the_runs_last_points_not_second_ones(mlflow_db, tmp_path):
    from mlflow.tracking import MlflowClient

    checkpoint = tmp_path / "pvqvae.pt"
    checkpoint.write_bytes(b"weights" * 100)
    with tracked(MlflowTracker.open("demo", "conv", "train_pvqvae", "dag0043final")) as t:
        t.log_metrics({"train/total": 1.5}, 10)  # the loop's last step: training, then evaluation
        t.log_metrics({"eval/loss": 0.5}, 10)
        time.sleep(0.01)  # the model is logged later: another time
        final = {"train/total": 1.5, "eval/loss": 0.5, "eval/new": 2.0}  # one value the run has no point of
        model_id = t.log_model(checkpoint, "pvqvae", final, {"lr": 0.001}, step=10)
    client = MlflowClient(mlflow_db)
    for key, value in final.items():
        assert [(m.step, m.value) for m in client.get_metric_history(t.run_id, key)] == [(10, value)], key
    linked = {m.key: (m.step, m.value) for m in client.get_logged_model(model_id).metrics}
    assert linked == {key: (10, value) for key, value in final.items()}
