"""A stage's MLflow writer for tests/test_tracking.py's parallel writers: a process of its own per stage instance,
forked from a server that has imported MLflow and logged a run once (tests/tracking_writer_server.py; importing
MLflow in each of 12 processes took a minute on 2 cores)."""

from __future__ import annotations

import multiprocessing
import os

from put.tracking.runs import MlflowTracker


def write(uri: str, folder: str, variant: str, stage: str) -> None:
    """One stage's run as a stage logs it: params, 20 metric steps, finished."""
    os.environ["MLFLOW_TRACKING_URI"] = uri
    os.chdir(folder)
    t = MlflowTracker.open("demo", variant, stage, "dag0001aaaaa", {"snakemake_rule": f"{stage}@{variant}"})
    t.log_params({"lr": 0.1, "nested": {"a": 1}})
    for step in range(20):
        t.log_metrics({"train/loss": 1.0 / (step + 1)}, step)
    t.finish()


def writers() -> multiprocessing.context.BaseContext:
    """Processes forked from a fork server that has imported tests.tracking_writer_server."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tests.tracking_writer_server"])
    return context
