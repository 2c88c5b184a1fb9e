"""What the tracking tests share: every run of the demo's experiment, deleted ones included (tests/test_tracking.py,
test_tracking_races.py), and the replays' configuration, clients of a server that goes away, a training attempt
that loses its server, a run's logged points (tests/test_tracking_spool.py, test_tracking_replay.py). Their
fixtures (`tracking`, `store`) are in conftest.py."""

from __future__ import annotations

import socket

import requests


def all_runs(client) -> list:
    from mlflow.entities import ViewType

    experiment = client.get_experiment_by_name("put-demo")
    return client.search_runs([experiment.experiment_id], run_view_type=ViewType.ALL, max_results=1000)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


DAG = "dag0006aaaaa"


class Dead:
    """The client of a server that went away (past MLflow's retries)."""

    def __getattr__(self, name):
        def call(*args, **kwargs):
            raise requests.ConnectionError("Connection refused")
        return call


class Dropping:
    """The client of a server that goes away after `up` more calls of `method`."""

    def __init__(self, client, up: int, method: str = "log_batch"):
        self.client, self.up, self.method = client, up, method

    def __getattr__(self, name):
        if name == self.method:
            if self.up == 0:
                return Dead().log_batch
            self.up -= 1
        return getattr(self.client, name)


def attempt(steps: range, lost_at: int | None, status: str = "FINISHED", variant: str = "conv",
            finish: bool = True):
    """A training attempt logging `steps` whose server goes away before step `lost_at` (None: it stays);
    returns the tracker, its run id and its spool (None when nothing was spooled)."""
    from put.tracking.factory import stage_tracker

    tracker = stage_tracker("demo", variant, "train_pvqvae", DAG)
    run_id = tracker.inner.run_id
    for step in steps:
        if step == lost_at:
            tracker.inner.client = Dead()
        tracker.log_metrics({"train/loss": 1.0 / (step + 1)}, step)
    if finish:
        tracker.finish(status)
    return tracker, run_id, tracker.spool


def history(client, run_id: str) -> list[tuple[int, int]]:
    return sorted((m.step, m.timestamp) for m in client.get_metric_history(run_id, "train/loss"))


def stage_runs(client) -> list:
    experiment = client.get_experiment_by_name("put-demo").experiment_id
    return [r for r in client.search_runs([experiment]) if r.data.tags.get("put.level") == "stage"]
