"""Replays in a cluster's configuration (issue 43): an outage part-way through a call, a replay into another store,
`put track` and `put track-replay` in either order, an old spool after new code, stray files among the spools.
Each point is in its store once, in the run where the user looks."""

from __future__ import annotations

import time

import pytest
import requests

from put.tracking.spool import replay
from tests.tracking_helpers import DAG, Dropping, attempt, history, stage_runs


class Late(Dropping):
    """A server that goes away after `up` calls of `method`, the failed call taking a while (MLflow's retries)."""

    def __getattr__(self, name):
        if name == self.method and self.up == 0:
            def call(*args, **kwargs):
                time.sleep(0.02)
                raise requests.ConnectionError("Connection refused")
            return call
        return super().__getattr__(name)


def test_points_logged_before_an_outage_inside_a_call_are_not_doubled_by_the_replay(store, tmp_path):
    """Issue 43, 2: the spooled record took the time of the spooling, not of the call, so the points that
    had gone through (a model's metrics, an evaluation's) were logged again at another time."""
    from put.tracking.runs import MlflowTracker

    checkpoint = tmp_path / "pvqvae.pt"
    checkpoint.write_bytes(b"weights" * 100)
    tracker, run_id, _ = attempt(range(1), lost_at=None, finish=False)
    tracker.inner.client = Late(tracker.inner.client, 0, "log_outputs")  # after the model's metrics went through
    tracker.log_model(checkpoint, "pvqvae", {"eval/loss": 0.5}, {"lr": 0.001}, step=1)
    tracker.finish()
    assert tracker.spool is not None
    assert [(m.step, m.value) for m in store.get_metric_history(run_id, "eval/loss")] == [(1, 0.5)]
    replay(tracker.spool, MlflowTracker.open)
    assert [(m.step, m.value) for m in store.get_metric_history(run_id, "eval/loss")] == [(1, 0.5)]
    assert store.get_run(run_id).info.status == "FINISHED"

    masks = tmp_path / "manifest.csv"
    masks.write_text("image,mask,group\na.png,m.png,10-60\n")
    from put.tracking.factory import stage_tracker

    evaluation = stage_tracker("demo", "conv", "evaluate", DAG)
    evaluation_id = evaluation.inner.run_id
    evaluation.inner.client = Late(evaluation.inner.client, 0, "set_experiment_tag")  # after its log_metrics
    evaluation.log_evaluation({"k50": {"10-60": {"psnr": 21.0, "ssim": 0.7}}}, masks)
    evaluation.finish()
    replay(evaluation.spool, MlflowTracker.open)
    points = store.get_metric_history(evaluation_id, "k50/10-60/psnr")
    assert [(m.step, m.value) for m in points] == [(0, 21.0)]


def test_a_replay_into_another_store_after_one_cut_short_logs_every_record_there(store, mlflow_db_template,
                                                                                   tmp_path):
    """Issue 43, 3: the cursor counted records whatever the store; a replay `--to B` after one cut short into A
    skipped in B the records A had taken."""
    import shutil

    from mlflow.tracking import MlflowClient

    from put.tracking.runs import MlflowTracker

    _, run_id, spool = attempt(range(6), lost_at=2)  # steps 0-1 logged into A, 2-5 and the end spooled

    def dropping(**init):  # A goes away again after two of the replay's batches (steps 2 and 3)
        tracker = MlflowTracker.open(**init)
        tracker.client = Dropping(tracker.client, 2)
        return tracker

    with pytest.raises(requests.ConnectionError):
        replay(spool, dropping)
    assert [s for s, _ in history(store, run_id)] == [0, 1, 2, 3]
    shutil.copyfile(mlflow_db_template, tmp_path / "b.db")
    other = f"sqlite:///{tmp_path / 'b.db'}"
    assert replay(spool, MlflowTracker.open, to=other) == 5  # every record: steps 2-5 and the end
    b = MlflowClient(other)
    (run,) = stage_runs(b)
    assert [s for s, _ in history(b, run.info.run_id)] == [2, 3, 4, 5] and run.info.status == "FINISHED"
    assert replay(spool, MlflowTracker.open) == 3  # A's rest: steps 4, 5 and the end, after A's own cursor
    assert [s for s, _ in history(store, run_id)] == list(range(6))


class Dead:
    """The client of a server that went away (past MLflow's retries)."""

    def __getattr__(self, name):
        def call(*args, **kwargs):
            raise requests.ConnectionError("Connection refused")
        return call


def test_put_track_and_the_replay_in_either_order_leave_one_point_per_step_and_the_stages_own_run(
        store, tmp_path, monkeypatch, capsys):
    """Issue 43, 4: `put track` before the replay logged the spooled stage again from its outputs (a second
    point at each step) and left the run marked as logged from outputs."""
    import json

    from put.cli import main
    from put.config.params import load_params
    from put.dag import graph
    from put.metrics.files import log_evaluation as log_outputs
    from put.tracking.factory import stage_tracker

    params = load_params(None, preset="demo")
    masks = tmp_path / "data" / "demo" / "masks"
    masks.mkdir(parents=True)
    (masks / "manifest.csv").write_text("image,mask,group\na.png,m.png,10-60\n")
    evaluations = {"put": 21.5, "conv": 20.5}
    for variant, psnr in evaluations.items():  # what each evaluation wrote
        out = tmp_path / "results" / "demo" / "metrics" / f"{variant}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"k50": {"10-60": {"psnr": psnr, "ssim": 0.7}}}))
        for name in (f"{variant}_info.json", f"{variant}_bins.csv", f"{variant}_images.csv"):
            (out.parent / name).write_text("{}\n" if name.endswith("json") else "a\n1\n")
    stages = [(stage, name) for stage, name in graph.instances(params)
              if stage.name == "evaluate" and name in evaluations]
    monkeypatch.setattr(graph, "instances", lambda params: iter(stages))
    spools, run_ids = {}, {}
    for variant in evaluations:  # each evaluation loses the server once its run exists
        tracker = stage_tracker("demo", variant, "evaluate", params.dag_id(), {"dvc_stage": f"evaluate@{variant}"},
                                labels=params.evaluated_labels())
        run_ids[variant] = tracker.inner.run_id
        tracker.inner.client = Dead()
        log_outputs(tracker, params, masks, tmp_path / "results" / "demo" / "metrics" / f"{variant}.json")
        tracker.finish()
        spools[variant] = tracker.spool
    capsys.readouterr()

    assert main(["track-replay", str(spools["conv"])]) == 0  # conv: the replay, then `put track`
    assert main(["track", "--preset", "demo"]) == 0  # put: `put track`, then the replay
    out = capsys.readouterr().out
    assert f"put track-replay {spools['put']}" in out and "logged from their outputs (the stage did not run): none" \
        in out
    assert main(["track-replay", str(spools["put"])]) == 0
    assert main(["track", "--preset", "demo"]) == 0
    assert "2 stage run(s) present" in capsys.readouterr().out
    for variant, psnr in evaluations.items():
        run = store.get_run(run_ids[variant])
        assert [(m.step, m.value) for m in store.get_metric_history(run_ids[variant], "k50/10-60/psnr")] == \
            [(0, psnr)], variant
        assert "put.logged_from" not in run.data.tags and run.info.status == "FINISHED"
    assert len(stage_runs(store)) == 2


def test_an_old_spool_replayed_after_the_new_codes_run_leaves_the_new_run_current(store, tmp_path, monkeypatch):
    """Issue 43, 5: the replay of a spool from before a code edit, after the edited code made its own run,
    marked the new run superseded by the old one (and moved the model's alias `current` to the old model)."""
    from put.tracking import runs as runs_module
    from put.tracking.factory import stage_tracker
    from put.tracking.runs import MlflowTracker
    from tests.tracking_helpers import closed_port

    old_checkpoint, new_checkpoint = tmp_path / "old.pt", tmp_path / "new.pt"
    old_checkpoint.write_bytes(b"old" * 100)
    new_checkpoint.write_bytes(b"new" * 100)
    monkeypatch.setattr(runs_module, "code_version", lambda files: "0ld0ld0ld0ld")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{closed_port()}")
    old = stage_tracker("demo", "conv", "train_pvqvae", DAG)  # never reached the server
    old.log_metrics({"train/loss": 1.0}, 0)
    old.log_model(old_checkpoint, "pvqvae", {"eval/loss": 0.9}, {"lr": 0.001}, step=1)
    old.finish()
    time.sleep(0.01)
    monkeypatch.setattr(runs_module, "code_version", lambda files: "new0new0new0")  # the code edited, run again
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.tracking_uri)
    new = stage_tracker("demo", "conv", "train_pvqvae", DAG)
    new.log_metrics({"train/loss": 0.5}, 0)
    new.log_model(new_checkpoint, "pvqvae", {"eval/loss": 0.4}, {"lr": 0.001}, step=1)
    new.finish()
    new_id = new.inner.run_id

    replay(old.spool, MlflowTracker.open, to=store.tracking_uri)
    current = [r for r in stage_runs(store) if "put.superseded_by" not in r.data.tags]
    assert [r.info.run_id for r in current] == [new_id] and current[0].data.tags["put.code"] == "new0new0new0"
    (replayed,) = [r for r in stage_runs(store) if r.info.run_id != new_id]
    assert replayed.data.tags["put.code"] == "0ld0ld0ld0ld" and replayed.data.tags["put.superseded_by"] == new_id
    version = store.get_model_version_by_alias("put-demo-conv-pvqvae", "current")
    assert store.get_logged_model(version.source.removeprefix("models:/")).source_run_id == new_id


def test_a_replay_over_the_spool_folder_skips_stray_files_and_live_spools_one_line_each(store, tmp_path,
                                                                                        monkeypatch, capsys):
    """Issue 43, 6: a `.npy`, an empty file or a cursor among the spools ended in a traceback; a spool that a
    running stage still appends to was replayed and deleted under it."""
    import json

    import numpy as np

    from put.cli import main
    from put.tracking import spool as spool_module

    tracker, run_id, done = attempt(range(3), lost_at=1, finish=False)
    tracker.log_image(np.zeros((4, 4, 3), np.uint8), "sample.png")  # an array beside the spool
    tracker.finish()
    live, live_id, running = attempt(range(2), lost_at=0, variant="put", finish=False)  # its stage runs still
    folder = done.parent
    (folder / "empty.jsonl").write_bytes(b"")
    np.save(folder / "stray.npy", np.arange(3))
    (folder / "notes.jsonl").write_bytes(b"\x93NUMPY\xff\xfe not a spool")
    (folder / "old.jsonl.cursor").write_text("3")
    header = json.loads(done.read_text().splitlines()[0]) | {"writer": {"host": "node-b", "pid": 1}}
    (folder / "other-node.jsonl").write_text(json.dumps(header) + "\n")  # not ended, on a node whose lock is
    monkeypatch.setattr(spool_module, "node_local_locks", lambda path: "nfs4 mounted with local_lock=all")  # unseen
    arrays = [str(p) for p in folder.glob(f"{done.stem}-*.npy")]
    capsys.readouterr()

    assert main(["track-replay", str(folder)]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and not err.strip()
    lines = out.splitlines()
    skipped = {line.split(": skipped, ")[0]: line.split(": skipped, ")[1] for line in lines if ": skipped, " in line}
    assert skipped.keys() == {str(folder / name) for name in ("empty.jsonl", "stray.npy", "notes.jsonl",
                                                              "old.jsonl.cursor", "other-node.jsonl")} | \
        {str(running), *arrays} and len(arrays) == 1
    assert skipped[str(running)].startswith("still being written by a running stage")
    assert skipped[str(folder / "other-node.jsonl")].startswith("not ended, and written on host node-b")
    assert skipped[str(folder / "empty.jsonl")] == "empty, not a spool"
    assert len(lines) == len(skipped) + 1 and f"{done}: 4 records logged" in out  # steps 1, 2, the image, the end
    assert not done.exists() and running.exists()  # the live spool kept
    assert [s for s, _ in history(store, run_id)] == [0, 1, 2]

    live.log_metrics({"train/loss": 0.5}, 2)  # the stage appends still, then ends: its spool is whole
    live.finish()
    assert main(["track-replay", str(running)]) == 0 and not running.exists()
    assert [s for s, _ in history(store, live_id)] == [0, 1, 2]
