"""MLflow: runs found again instead of duplicated, parallel writers on SQLite lose nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from put.tracking import MlflowTracker

WRITER = """
import sys
from put.tracking import MlflowTracker
variant, stage = sys.argv[1], sys.argv[2]
t = MlflowTracker("demo", variant, stage, "dag0001", {"snakemake_rule": stage})
t.log_params({"lr": 0.1, "nested": {"a": 1}})
for step in range(20):
    t.log_metrics({"loss": 1.0 / (step + 1)}, step)
t.finish()
"""


@pytest.fixture
def tracking(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    return uri


def runs(uri):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("put-demo")
    return client.search_runs([experiment.experiment_id], max_results=1000)


def test_parallel_writers_on_sqlite_lose_no_run(tracking):
    variants = ["put", "conv", "one", "no_ref", "tok", "qua0"]
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, v, stage])
             for v in variants for stage in ("train_transformer", "sample")]
    assert all(p.wait(timeout=300) == 0 for p in procs)
    found = runs(tracking)
    parents = [r for r in found if r.data.tags["put.level"] == "dag"]
    children = [r for r in found if r.data.tags["put.level"] == "variant"]
    assert len(parents) == 1
    assert sorted(r.data.tags["put.variant"] for r in children) == sorted(variants)
    for child in children:
        assert child.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        assert child.data.params["train_transformer.nested.a"] == "1"
        assert child.data.params["sample.lr"] == "0.1"
        assert child.data.metrics["train_transformer/loss"] == pytest.approx(1 / 20)


def test_rerunning_a_stage_reuses_its_runs(tracking):
    for _ in range(2):
        tracker = MlflowTracker("demo", "put", "evaluate", "dag0002", {"dvc_stage": "evaluate@put"})
        tracker.log_params({"ssim_window": 51})
        tracker.log_metrics({"psnr": 20.0}, 0)
        tracker.finish()
    found = runs(tracking)
    assert len(found) == 2  # one parent, one variant child
    child = next(r for r in found if r.data.tags["put.level"] == "variant")
    assert child.data.tags["put.stage.evaluate.dvc_stage"] == "evaluate@put"
    assert child.info.status == "FINISHED"


def test_report_logs_into_the_parent(tracking, tmp_path):
    artefact = tmp_path / "table1.tex"
    artefact.write_text("% table\n")
    tracker = MlflowTracker("demo", None, "report", "dag0003")
    tracker.log_artifact(artefact)
    tracker.finish()
    (parent,) = runs(tracking)
    assert parent.data.tags["put.level"] == "dag"


def test_seed_replicates_are_children_grouped_by_configuration_with_versions(tracking):
    for seed in (0, 1, 2):
        MlflowTracker("demo", "conv", "evaluate", "dag0004", seed=seed).finish()
    MlflowTracker("demo", "conv", "sample", "dag0004", seed=1).finish()  # another stage of replicate 1: same run
    children = [r for r in runs(tracking) if r.data.tags["put.level"] == "variant"]
    assert sorted(r.data.tags["put.seed"] for r in children) == ["0", "1", "2"]
    assert {r.data.tags["put.replicates"] for r in children} == {"dag0004/conv"}
    assert {r.info.run_name for r in children} == {"conv", "conv seed 1", "conv seed 2"}
    tags = children[0].data.tags
    assert tags["put.version.python"].count(".") == 2 and tags["put.version.torch"].startswith("2.")
    assert "requirements.lock" in tags["put.version.environment"]
