"""A tracking server that does not answer: the stage completes, says in one line which run it could not log and
how to log it, and `put track-replay` logs it afterwards as completely as a run with the server up."""

from __future__ import annotations

import shutil
import socket
import time

import pytest
import requests

from put.cli import main
from put.stages.train import train_pvqvae
from put.tracking.base import NullTracker
from put.tracking.spool import ResilientTracker, replay
from tests.test_training import params, workdir  # noqa: F401 (the module's fixture)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
def test_a_dead_tracking_server_costs_one_line_and_a_replay(workdir, tmp_path, monkeypatch, capsys,  # noqa: F811
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
    monkeypatch.setenv("MLFLOW_TRACKING_URI", replayed)
    assert main(["track-replay", str(spool)]) == 0 and not spool.exists()
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
