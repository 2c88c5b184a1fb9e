"""A tracking server that does not answer: the stage completes, says in one line which run it could not log and
how to log it, and `put track-replay` logs it afterwards as completely as a run with the server up."""

from __future__ import annotations

import json
import shutil
import time

import pytest
import requests

from put.cli import main
from put.stages.train import train_pvqvae
from put.tracking.base import NullTracker
from put.tracking.resilient import ResilientTracker
from put.tracking.spool import replay
from tests.tiny_training import params
from tests.tracking_helpers import DAG, Dropping, attempt, closed_port, history, stage_runs


def run_contents(uri: str) -> dict:
    """What a tracking store holds of the demo's stage runs: params, every metric's history, models."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("put-demo").experiment_id
    (run,) = [r for r in client.search_runs([experiment]) if r.data.tags.get("put.level") == "stage"]
    histories = {key: [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, key)]
                 for key in run.data.metrics if not key.startswith("system/")}
    models = client.search_logged_models([experiment])
    return {"name": run.info.run_name, "status": run.info.status, "params": run.data.params, "metrics": histories,
            "models": [(m.name, m.status.to_proto() if hasattr(m.status, "to_proto") else str(m.status))
                       for m in models]}


@pytest.mark.slow
def test_a_dead_tracking_server_costs_one_line_and_a_replay(workdir, tmp_path, monkeypatch, capsys,
                                                            mlflow_db_template):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PUT_TRACKING", "1")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "0")
    dead = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", dead)
    began = time.monotonic()
    result = train_pvqvae(params(workdir), "put", workdir / "splits", tmp_path / "p.pt", device="cpu")
    assert result.step == 8 and (tmp_path / "p.pt").exists()  # the work is done
    assert time.monotonic() - began < 120
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("put: MLflow")]
    assert len(lines) == 1, lines
    assert f"put: MLflow at {dead} did not answer" in lines[0] and "run 'train_pvqvae put'" in lines[0]
    spool = tmp_path / lines[0].rsplit("put track-replay ", 1)[1]
    assert spool.parent == tmp_path / "mlflow-unsent" and spool.exists()

    # With no server still, the replay refuses in one line and keeps the file.
    assert main(["track-replay", str(spool)]) == 2
    assert "did not answer" in capsys.readouterr().err and spool.exists()
    # Logged afterwards: the same params, metric values and model as a run logged while it trains.
    for name in ("replayed.db", "direct.db"):  # two fresh stores, copies of the migrated template
        shutil.copyfile(mlflow_db_template, tmp_path / name)
    replayed, direct = f"sqlite:///{tmp_path / 'replayed.db'}", f"sqlite:///{tmp_path / 'direct.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", replayed)  # not the store the spool names: refused, unless --to
    assert main(["track-replay", str(spool)]) == 2 and spool.exists()
    assert main(["track-replay", "--to", replayed, str(spool)]) == 0 and not spool.exists()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", direct)
    train_pvqvae(params(workdir), "put", workdir / "splits", tmp_path / "q.pt", device="cpu")
    a, b = run_contents(replayed), run_contents(direct)
    assert a["metrics"].keys() == b["metrics"].keys() and len(a["metrics"]) > 4
    assert {k: [s for s, _ in v] for k, v in a["metrics"].items()} == \
        {k: [s for s, _ in v] for k, v in b["metrics"].items()}
    # identical training: identical values, but the wall-clock ones
    timed = ("data_wait", "seconds")
    assert {k: v for k, v in a["metrics"].items() if not any(t in k for t in timed)} == \
        {k: v for k, v in b["metrics"].items() if not any(t in k for t in timed)}
    assert a["params"] == b["params"] and a["models"] == b["models"] and len(a["models"]) == 1
    assert a["name"] == b["name"] and a["status"] == b["status"] == "FINISHED"


class Recorder(NullTracker):
    """A tracker whose server goes away after `up` calls."""

    calls: list = []

    def __init__(self, up: int = 10**9, **init):
        self.up = up

    def _record(self, *call):
        if len(Recorder.calls) >= self.up:
            try:
                raise requests.ConnectionError("connection refused")
            except requests.ConnectionError:
                raise RuntimeError("API request failed") from None  # as MLflow wraps it: the cause in __context__
        Recorder.calls.append(call)

    def log_metrics(self, metrics, step, **links):
        self._record("metrics", metrics, step)

    def finish(self, status="FINISHED"):
        self._record("finish", status)


def test_a_server_lost_mid_run_spools_the_rest_and_the_replay_continues_the_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PUT_MLFLOW_SPOOL", str(tmp_path / "spool"))
    Recorder.calls = []
    tracker = ResilientTracker(Recorder, {"up": 2, "preset": "demo", "stage": "train_pvqvae", "variant": "conv"})
    for step in range(5):
        tracker.log_metrics({"train/loss": 1.0 / (step + 1)}, step)
    tracker.finish()
    assert [c[2] for c in Recorder.calls] == [0, 1]  # what the server took before it went away
    (line,) = capsys.readouterr().err.splitlines()
    assert "run 'train_pvqvae conv' of put-demo is not logged in full" in line
    spool = next((tmp_path / "spool").glob("*.jsonl"))
    Recorder.calls = []
    assert replay(spool, lambda **init: Recorder(**{**init, "up": 10**9})) == 4  # the server is back
    assert Recorder.calls == [("metrics", {"train/loss": 1.0 / (s + 1)}, s) for s in (2, 3, 4)] + \
        [("finish", "FINISHED")]


def test_an_error_that_is_not_the_server_is_not_hidden(tmp_path, monkeypatch):
    monkeypatch.setenv("PUT_MLFLOW_SPOOL", str(tmp_path / "spool"))

    class Broken(NullTracker):
        def __init__(self, **init):
            pass

        def log_metrics(self, metrics, step, **links):
            raise KeyError("a bug")

    with pytest.raises(KeyError):
        ResilientTracker(Broken, {"preset": "demo", "stage": "x"}).log_metrics({"a": 1.0}, 0)
    assert not (tmp_path / "spool").exists()


# Replays into MLflow itself (SQLite stores under tmp_path): the same run, the same store, nothing logged twice.

def test_a_replay_cut_short_resumes_where_it_stopped_and_logs_no_point_twice(store, capsys):
    from put.tracking.runs import MlflowTracker

    _, run_id, spool = attempt(range(6), lost_at=2)  # steps 0-1 logged, 2-5 and the end spooled
    spooled = {r["args"][1]: r["time_ms"] for r in map(json.loads, spool.read_text().splitlines()[1:])
               if r["call"] == "log_metrics"}

    def dropping(**init):  # the server goes away again after two of the replay's batches
        tracker = MlflowTracker.open(**init)
        tracker.client = Dropping(tracker.client, 2)
        return tracker

    with pytest.raises(requests.ConnectionError):
        replay(spool, dropping)
    logged = replay(spool, MlflowTracker.open)  # the server is back: the rest
    points = history(store, run_id)
    assert [s for s, _ in points] == list(range(6))  # each step once
    assert {s: t for s, t in points if s >= 2} == spooled  # at the time the attempt logged them
    assert logged == 3  # steps 4, 5 and the end: 2 and 3 were logged by the first try, which noted so beside it
    assert json.loads(spool.with_name(spool.name + ".cursor").read_text()) == {store.tracking_uri: 5}
    assert replay(spool, MlflowTracker.open) == 0 and history(store, run_id) == points  # done: nothing again
    assert store.get_run(run_id).info.status == "FINISHED"


def test_a_replay_logs_to_the_store_the_spool_names_and_refuses_a_different_one(store, mlflow_db_template,
                                                                                 tmp_path, monkeypatch, capsys):
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db")  # the test's store, relative to tmp_path
    _, run_id, spool = attempt(range(3), lost_at=1)
    capsys.readouterr()
    other_db = tmp_path / "other.db"
    shutil.copyfile(mlflow_db_template, other_db)
    other = f"sqlite:///{other_db}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", other)
    assert main(["track-replay", str(spool)]) == 2  # refused in one line: the run is not in that store
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert "MLFLOW_TRACKING_URI" in line and f"--to {other}" in line and spool.exists()
    assert MlflowClient(other).get_experiment_by_name("put-demo") is None
    assert [s for s, _ in history(store, run_id)] == [0]

    monkeypatch.delenv("MLFLOW_TRACKING_URI")  # by default, the store the spool names (from any directory)
    monkeypatch.chdir(tmp_path / "spool")  # where no mlflow.db is
    assert main(["track-replay", str(spool)]) == 0 and not spool.exists()
    assert [s for s, _ in history(store, run_id)] == [0, 1, 2]

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.tracking_uri)
    _, _, spool = attempt(range(2), lost_at=0, variant="put")  # spooled from its first metric
    assert main(["track-replay", "--to", other, str(spool)]) == 0 and not spool.exists()
    (run,) = stage_runs(MlflowClient(other))
    assert run.info.run_name == "train_pvqvae put" and run.info.status == "FINISHED"
    assert [s for s, _ in history(MlflowClient(other), run.info.run_id)] == [0, 1]


def test_a_replay_after_a_code_change_logs_into_the_spooled_run(store, monkeypatch):
    from put.tracking import runs as runs_module
    from put.tracking.factory import stage_tracker
    from put.tracking.runs import MlflowTracker

    _, run_id, spool = attempt(range(3), lost_at=1)  # the run known when the server went away
    monkeypatch.setattr(runs_module, "code_version", lambda files: "0123456789ab")  # the stage's code edited
    assert replay(spool, MlflowTracker.open) == 3
    assert [r.info.run_id for r in stage_runs(store)] == [run_id]  # no run of today's code
    assert [s for s, _ in history(store, run_id)] == [0, 1, 2]

    # An attempt that never reached the server: its run is the one of the code it ran, not of today's.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{closed_port()}")
    later = stage_tracker("demo", "conv", "train_pvqvae", DAG)
    later.log_metrics({"train/loss": 0.1}, 3)
    later.finish()
    monkeypatch.setattr(runs_module, "code_version", lambda files: "ba9876543210")  # edited again
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.tracking_uri)
    assert replay(later.spool, MlflowTracker.open, to=store.tracking_uri) == 2
    (run,) = [r for r in stage_runs(store) if "put.superseded_by" not in r.data.tags]
    assert run.data.tags["put.code"] == "0123456789ab" and run.data.tags["put.previous_run"] == run_id
    assert [s for s, _ in history(store, run.info.run_id)] == [3]


def test_the_end_of_an_earlier_spooled_attempt_leaves_the_later_attempts_status(store, monkeypatch, capsys):
    from put.tracking.factory import stage_tracker
    from put.tracking.runs import MlflowTracker

    _, run_id, first = attempt(range(2), lost_at=1, status="KILLED")  # its time limit, spooled
    second, second_id, _ = attempt(range(1, 3), lost_at=None, finish=False)  # retried, still running
    assert second_id == run_id
    replay(first, MlflowTracker.open)
    assert store.get_run(run_id).info.status == "RUNNING"  # the second attempt's, not the first's KILLED
    second.finish("FINISHED")
    assert store.get_run(run_id).info.status == "FINISHED"

    # Both attempts spooled, replayed later one first: the later one's end stands.
    _, run_id, first = attempt(range(2), lost_at=1, status="KILLED", variant="put")
    _, _, second = attempt(range(1, 3), lost_at=1, variant="put")
    replay(second, MlflowTracker.open)
    replay(first, MlflowTracker.open)
    run = store.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["put.last_status"] == "FINISHED"
    parent = store.get_run(run.data.tags["mlflow.parentRunId"])
    assert parent.info.status == "FINISHED"

    # The first attempt never reached the server, the second finished: the first's replay adds its records only.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{closed_port()}")
    first = stage_tracker("demo", "one", "train_pvqvae", DAG)
    first.log_metrics({"train/loss": 1.0}, 0)
    first.finish("KILLED")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.tracking_uri)
    _, run_id, _ = attempt(range(1, 2), lost_at=None, variant="one")
    store.set_tag(run_id, "put.host", "the second attempt's host")
    replay(first.spool, MlflowTracker.open, to=store.tracking_uri)
    run = store.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["put.host"] == "the second attempt's host"
    assert [s for s, _ in history(store, run_id)] == [0, 1]


def test_a_model_whose_logging_was_cut_short_is_completed_once(store, tmp_path):
    from put.tracking.runs import MlflowTracker

    checkpoint = tmp_path / "pvqvae.pt"
    checkpoint.write_bytes(b"weights" * 100)
    tracker, run_id, spool = attempt(range(1), lost_at=0, finish=False)
    tracker.log_model(checkpoint, "pvqvae", {"eval/loss": 0.5}, {"lr": 0.001}, step=1)
    tracker.finish()

    def dropping(**init):  # the server goes away after the model's version is created, before its alias
        tracker = MlflowTracker.open(**init)
        tracker.client = Dropping(tracker.client, 0, "set_registered_model_alias")
        return tracker

    with pytest.raises(requests.ConnectionError):
        replay(spool, dropping)
    replay(spool, MlflowTracker.open)
    experiment = store.get_experiment_by_name("put-demo").experiment_id
    (model,) = store.search_logged_models([experiment])
    assert str(model.status).endswith("READY")
    versions = store.search_model_versions("name = 'put-demo-conv-pvqvae'")
    assert [str(v.version) for v in versions] == ["1"]
    assert str(store.get_model_version_by_alias("put-demo-conv-pvqvae", "current").version) == "1"
    assert json.loads(model.tags["mlflow.modelVersions"]) == [{"name": "put-demo-conv-pvqvae", "version": "1"}]
    assert [o.model_id for o in store.get_run(run_id).outputs.model_outputs] == [model.model_id]
    assert [(m.step, m.value) for m in store.get_metric_history(run_id, "eval/loss")] == [(1, 0.5)]
    assert [m.key for m in model.metrics] == ["eval/loss"]


def test_two_attempts_spooled_in_one_second_keep_a_file_each(tmp_path, monkeypatch):
    monkeypatch.setenv("PUT_MLFLOW_SPOOL", str(tmp_path / "spool"))
    Recorder.calls = []
    spools = []
    for loss in (1.0, 2.0):  # one process, well within a second
        tracker = ResilientTracker(Recorder, {"up": 0, "preset": "demo", "stage": "train_pvqvae", "variant": "conv"})
        tracker.log_metrics({"train/loss": loss}, 0)
        spools.append(tracker.spool)
    assert len(set(spools)) == 2 and all(len(s.read_text().splitlines()) == 2 for s in spools)


def test_a_replays_cursor_round_trips_its_counts_per_store(tmp_path):
    from put.tracking.spool import cursor_path, read_cursor, write_cursor

    spool = tmp_path / "demo-evaluate-put-1-20260101T000000.jsonl"
    assert read_cursor(spool) == {}  # no record logged yet
    counts = {"sqlite:////a/mlflow.db": 3, "http://server:5000": 7}
    write_cursor(spool, counts)
    assert read_cursor(spool) == counts and json.loads(cursor_path(spool).read_text()) == counts
