"""Runs created twice by hosts racing on a tracking server (no file lock), simulated against a SQLite store: a host
whose stage run was marked a duplicate follows the mark as it follows its parent's, every child ends under the kept
parent whatever the order of three racers, and a mark to a deleted run, a second resolution or a re-run of `put
track` leave the runs where the saved view looks. And every MLflow call of `put compare --mlflow` waits for the
store's lock."""

from __future__ import annotations

import ast
import contextlib
import itertools
import json
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from put.tracking.names import DUPLICATE_OF, SUPERSEDED
from put.tracking.runs import MlflowTracker
from tests.tracking_helpers import all_runs

PARENT = "mlflow.parentRunId"
DAG = "dag0010race"


def ordered_ids(monkeypatch, order: str) -> None:
    """The store hands out run ids ascending or descending with creation."""
    import mlflow.store.tracking.sqlalchemy_store as store

    created, sign = itertools.count(1), 1 if order == "ascending" else -1
    monkeypatch.setattr(store, "uuid", SimpleNamespace(uuid4=lambda: uuid.UUID(int=2**127 + sign * next(created))))


def no_lock_and_ids(monkeypatch, order: str) -> None:
    """Hosts on a tracking server (no file lock), run ids in `order` (ordered_ids)."""
    import put.tracking.runs

    monkeypatch.setattr(put.tracking.runs, "_lock", lambda uri: contextlib.nullcontext())
    ordered_ids(monkeypatch, order)


def saved_view_runs(client, experiment: str) -> list:
    """The evaluation runs the saved view shows (its filter, put/tracking/names.py)."""
    return client.search_runs([experiment], f"tags.`put.stage` = 'evaluate' and tags.`{SUPERSEDED}` IS NULL "
                                            f"and tags.`{DUPLICATE_OF}` IS NULL")


def stage_race(monkeypatch, stage: str = "evaluate", first=None) -> tuple[MlflowTracker, MlflowTracker, str]:
    """Two hosts run `evaluate conv` of one configuration at once (a requeued job beside its dying predecessor).
    X searched for the stage's run and found none; before its own lands, Y's whole start runs (it finds none
    either, creates one, logs its parameters and a first point). X's run gets the smaller id, so X, which sees both,
    marks Y's run a duplicate of its own: Y has taken the run that was marked. `first(Y)`: what else Y logs
    before the mark. Returns X, Y and Y's first run."""
    from mlflow.tracking import MlflowClient

    no_lock_and_ids(monkeypatch, "descending")
    create_run, hosts = MlflowClient.create_run, {}

    def racing_create(client, experiment_id, start_time=None, tags=None, run_name=None):
        if (tags or {}).get("put.level") == "stage" and not hosts:
            hosts["Y"] = None  # Y's own creation lands at once
            hosts["Y"] = MlflowTracker.open("demo", "conv", stage, DAG)
            hosts["Y"].log_params({"ssim_window": 51})
            hosts["Y"].log_metrics({"k50/10-60/psnr": 20.0}, 0)
            if first:
                first(hosts["Y"])
        return create_run(client, experiment_id, start_time=start_time, tags=tags, run_name=run_name)

    monkeypatch.setattr(MlflowClient, "create_run", racing_create)
    x = MlflowTracker.open("demo", "conv", stage, DAG)
    return x, hosts["Y"], hosts["Y"].run_id


def test_a_host_whose_stage_run_was_marked_logs_into_the_kept_run_and_leaves_the_duplicate_killed(
        tracking, monkeypatch, tmp_path):
    """Y's run is marked a duplicate of X's while Y runs. Y kept logging into the KILLED run and its end set it
    back to FINISHED; its points lived only there, out of the saved view. Now Y moves into the kept run with what
    it had logged, and the duplicate stays KILLED."""
    x, y, marked = stage_race(monkeypatch)
    kept = x.run_id
    assert kept != marked and tracking.get_run(marked).data.tags[DUPLICATE_OF] == kept
    manifest = tmp_path / "manifest.csv"
    manifest.write_text("image,mask,group\na.png,m.png,10-60\n")
    y.log_metrics({"k50/10-60/psnr": 21.0}, 1)  # after the mark
    y.log_dataset(manifest, "demo test masks", "evaluation")
    y.finish()
    x.log_metrics({"k50/10-60/ssim": 0.7}, 0)
    x.finish()
    assert y.run_id == kept
    duplicate = tracking.get_run(marked)
    assert duplicate.info.status == "KILLED" and duplicate.data.tags[DUPLICATE_OF] == kept
    run = tracking.get_run(kept)
    assert sorted((m.step, m.value) for m in tracking.get_metric_history(kept, "k50/10-60/psnr")) == \
        [(0, 20.0), (1, 21.0)]
    assert run.data.params["ssim_window"] == "51" and run.info.status == "FINISHED"
    assert [d.dataset.name for d in run.inputs.dataset_inputs] == ["demo test masks"]
    shown = saved_view_runs(tracking, run.info.experiment_id)
    assert [r.info.run_id for r in shown] == [kept] and shown[0].data.metrics["k50/10-60/psnr"] == 21.0


def test_a_model_logged_into_a_run_marked_later_is_an_output_of_the_kept_run(tracking, monkeypatch, tmp_path):
    """Y logged its checkpoint before X marked Y's run: the kept run lists the model among its outputs, and the
    model's registered version keeps the alias `current`."""
    checkpoint = tmp_path / "pvqvae.pt"
    checkpoint.write_bytes(b"weights" * 100)
    models = []
    x, y, marked = stage_race(monkeypatch, "train_pvqvae",
                              lambda y: models.append(y.log_model(checkpoint, "pvqvae", {"eval/loss": 0.5}, {}, 1)))
    y.finish()
    x.finish()
    outputs = tracking.get_run(x.run_id).outputs.model_outputs
    assert [m.model_id for m in outputs] == models
    assert [(m.step, m.value) for m in tracking.get_metric_history(x.run_id, "eval/loss")] == [(1, 0.5)]
    assert tracking.get_model_version_by_alias("put-demo-conv-pvqvae", "current").source == f"models:/{models[0]}"


def test_the_same_stage_run_resolved_twice_keeps_each_record_once(tracking, monkeypatch, tmp_path):
    """A third host of the same instance resolves the pair again after Y followed the mark: the duplicate's
    records are moved again, and the kept run still holds each point, parameter and dataset input once."""
    x, y, marked = stage_race(monkeypatch)
    manifest = tmp_path / "manifest.csv"
    manifest.write_text("image,mask,group\na.png,m.png,10-60\n")
    y.log_dataset(manifest, "demo test masks", "evaluation")
    y.finish()
    z = MlflowTracker.open("demo", "conv", "evaluate", DAG)
    z.log_metrics({"k50/10-60/psnr": 20.0}, 0)
    z.finish()
    x.finish()
    assert z.run_id == x.run_id == y.run_id
    run = tracking.get_run(x.run_id)
    assert [(m.step, m.value) for m in tracking.get_metric_history(x.run_id, "k50/10-60/psnr")] == [(0, 20.0)] * 2
    assert len({m.timestamp for m in tracking.get_metric_history(x.run_id, "k50/10-60/psnr")}) == 2  # Y's, Z's
    assert len(run.inputs.dataset_inputs) == 1 and run.data.params == {"ssim_window": "51"}
    assert tracking.get_run(marked).info.status == "KILLED"
    stage = [r for r in all_runs(tracking) if r.data.tags["put.level"] == "stage"]
    assert sorted(DUPLICATE_OF in r.data.tags for r in stage) == [False, True]


def test_three_racing_hosts_end_with_every_child_under_the_kept_parent(tracking, monkeypatch):
    """C made its parent P3 and finished its stage under it. B, blind to P3, made P2, marked P3 a duplicate of it
    and, before it moved C's child, A, blind to both, made P1 and resolved all three (P2 marked, C's child moved from
    P3 to P1). Then B's move put C's child under P2, a duplicate: it stayed there for good, no host following it
    again (C had finished) and every later resolver skipping P2, already marked."""
    from mlflow.tracking import MlflowClient

    no_lock_and_ids(monkeypatch, "descending")  # P3 > P2 > P1: the last parent made is kept
    search, blind, hosts = MlflowTracker._search, [], {}
    monkeypatch.setattr(MlflowTracker, "_search", lambda tracker, tags: [] if tags.get("put.level") == "dag"
                        and blind and blind.pop() else search(tracker, tags))
    c = MlflowTracker.open("demo", "tok", "evaluate", DAG)
    c.finish()
    set_tag = MlflowClient.set_tag

    def racing_set_tag(client, run_id, key, value, *args, **kwargs):
        if key == PARENT and run_id == c.run_id and value == hosts["B"] and "A" not in hosts:
            blind.append(True)
            hosts["A"] = MlflowTracker.open("demo", "put", "evaluate", DAG)
        return set_tag(client, run_id, key, value, *args, **kwargs)

    monkeypatch.setattr(MlflowClient, "set_tag", racing_set_tag)
    create_run = MlflowClient.create_run

    def noting_create(client, experiment_id, start_time=None, tags=None, run_name=None):
        run = create_run(client, experiment_id, start_time=start_time, tags=tags, run_name=run_name)
        if (tags or {}).get("put.level") == "dag" and "B" not in hosts:
            hosts["B"] = run.info.run_id
        return run

    monkeypatch.setattr(MlflowClient, "create_run", noting_create)
    blind.append(True)
    b = MlflowTracker.open("demo", "conv", "evaluate", DAG)
    a = hosts["A"]
    b.finish()
    a.finish()
    parents = sorted(r.info.run_id for r in all_runs(tracking) if r.data.tags["put.level"] == "dag")
    assert len(parents) == 3 and a.parent == b.parent == parents[0]
    children = {r.info.run_name: r.data.tags[PARENT] for r in all_runs(tracking) if r.data.tags["put.level"] == "stage"}
    assert children == {"evaluate tok": parents[0], "evaluate conv": parents[0], "evaluate put": parents[0]}


def test_a_resolver_moves_the_children_of_a_parent_marked_before(tracking, monkeypatch):
    """A parent marked a duplicate, with a finished child under it (its host gone): the next stage's resolution of
    the parents moves that child under the kept one too."""
    no_lock_and_ids(monkeypatch, "ascending")
    first = MlflowTracker.open("demo", "put", "evaluate", DAG)
    first.finish()
    tags = {"put.dag_id": DAG, "put.preset": "demo", "put.level": "dag"}
    duplicate = tracking.create_run(first.experiment, tags={**tags, DUPLICATE_OF: first.parent}).info.run_id
    tracking.set_terminated(duplicate, "KILLED")
    child = tracking.create_run(first.experiment, run_name="evaluate tok",
                                tags={PARENT: duplicate, "put.level": "stage", "put.dag_id": DAG}).info.run_id
    tracking.set_terminated(child, "FINISHED")
    MlflowTracker.open("demo", "conv", "evaluate", DAG).finish()
    assert tracking.get_run(child).data.tags[PARENT] == first.parent


def test_a_mark_pointing_at_a_deleted_run_is_resolved_among_the_runs_left(tracking, monkeypatch):
    """A racer marked this host's stage run and its parent duplicates of runs that a user then deleted: the host
    stays in its own runs, their marks cleared (back in the saved view), rather than moving into deleted runs (or
    staying hidden)."""
    no_lock_and_ids(monkeypatch, "descending")  # the racers' runs, made later, have the smaller ids
    host = MlflowTracker.open("demo", "conv", "evaluate", DAG)
    experiment = host.experiment
    for run_id in (host.parent, host.run_id):
        tags = tracking.get_run(run_id).data.tags
        other = tracking.create_run(experiment, tags={k: v for k, v in tags.items() if k.startswith("put.")
                                                      and k not in ("put.attempt",)}).info.run_id
        tracking.set_tag(run_id, DUPLICATE_OF, other)  # as a racer whose run id was smaller would mark it
        tracking.set_terminated(run_id, "KILLED")
        tracking.delete_run(other)
    host.log_metrics({"k50/10-60/psnr": 20.0}, 0)
    host.finish()
    parent, run = tracking.get_run(host.parent), tracking.get_run(host.run_id)
    assert DUPLICATE_OF not in parent.data.tags and DUPLICATE_OF not in run.data.tags
    assert run.data.tags[PARENT] == parent.info.run_id and run.info.status == parent.info.status == "FINISHED"
    assert [r.info.run_id for r in saved_view_runs(tracking, experiment)] == [run.info.run_id]


@pytest.fixture
def evaluations(tracking, tmp_path, monkeypatch):
    """Two evaluations' outputs in the workspace (tmp_path), the DAG reduced to them; their params."""
    from put.config.params import load_params
    from put.dag import graph

    params = load_params(None, preset="demo")
    masks = tmp_path / "data" / "demo" / "masks"
    masks.mkdir(parents=True)
    (masks / "manifest.csv").write_text("image,mask,group\na.png,m.png,10-60\n")
    for variant, psnr in {"put": 21.5, "conv": 20.5}.items():
        for folder in ("metrics", "metrics/pasted"):  # the raw results and those with the known pixels pasted
            out = tmp_path / "results" / "demo" / folder / f"{variant}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps({"k50": {"10-60": {"psnr": psnr, "ssim": 0.7}}}))
            for name in (f"{variant}_info.json", f"{variant}_bins.csv", f"{variant}_images.csv"):
                (out.parent / name).write_text("{}\n" if name.endswith("json") else "a\n1\n")
    stages = [(s, n) for s, n in graph.instances(params) if s.name == "evaluate" and n in ("put", "conv")]
    monkeypatch.setattr(graph, "instances", lambda params: iter(stages))
    monkeypatch.setenv("PUT_TRACKING", "1")
    return params


def test_put_track_run_again_with_the_same_arguments_logs_nothing_again(tracking, evaluations, capsys):
    from put.cli import main

    assert main(["track", "--preset", "demo"]) == 0
    assert "logged from their outputs (the stage did not run): evaluate@put, evaluate@conv" in capsys.readouterr().out
    assert main(["track", "--preset", "demo"]) == 0
    assert "2 stage run(s) present; logged from their outputs (the stage did not run): none" in \
        capsys.readouterr().out
    stage = [r for r in all_runs(tracking) if r.data.tags["put.level"] == "stage"]
    assert len(stage) == 2 and all(len(tracking.get_metric_history(r.info.run_id, "k50/10-60/psnr")) == 1
                                   for r in stage)


def test_put_track_logs_the_kept_run_of_an_instance_whose_only_finished_run_is_a_duplicate(
        tracking, evaluations, capsys, monkeypatch):
    """A duplicate left FINISHED (by a host that logged into it after the mark) is not the instance's run:
    `put track` logs the kept run, which the saved view shows, instead of counting the instance as present."""
    from put.cli import main

    ordered_ids(monkeypatch, "ascending")
    kept = MlflowTracker.open("demo", "put", "evaluate", evaluations.dag_id())  # its stage never ended here
    tags = {k: v for k, v in tracking.get_run(kept.run_id).data.tags.items()
            if k.startswith("put.") and k != "put.attempt"}
    duplicate = tracking.create_run(kept.experiment, tags={**tags, PARENT: kept.parent, DUPLICATE_OF: kept.run_id})
    tracking.set_terminated(duplicate.info.run_id, "FINISHED")
    assert main(["track", "--preset", "demo"]) == 0
    assert "evaluate@put, evaluate@conv" in capsys.readouterr().out
    run = tracking.get_run(kept.run_id)
    assert run.info.status == "FINISHED" and run.data.metrics["k50/10-60/psnr"] == 21.5


HOLD_LOCK = """
import sys
from filelock import FileLock
lock = FileLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
sys.stdin.read()
"""


def test_put_compare_mlflow_waits_for_the_store_lock_another_process_holds(tracking, mlflow_db):
    """Another process holds the SQLite store's lock (a stage writing): the comparison's run is written once it
    is released, not meanwhile (a bare client wrote at once)."""
    from put.tracking.comparison import log_comparison

    database = Path(mlflow_db.removeprefix("sqlite:///"))
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, f"{database}.lock"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        rows = [{"result": "result_1", "mode": "k50", "group": "10-60", "metric": "psnr", "difference": 0.5,
                 "lo": 0.1, "hi": 0.9, "p_adjusted": 0.01}]
        done: list[str] = []
        writer = threading.Thread(target=lambda: done.append(log_comparison(
            "demo", "base", ["new"], rows, {"comparison.txt": "table\n"}, {"baseline": "HEAD"}, "put compare")))
        writer.start()
        writer.join(timeout=5)
        assert writer.is_alive() and not done  # waiting for the lock
        assert tracking.get_experiment_by_name("put-demo") is None  # nothing written meanwhile
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    writer.join(timeout=120)
    run = tracking.get_run(done[0])
    assert run.info.status == "FINISHED" and run.data.metrics["result_1/k50/10-60/psnr/difference"] == 0.5


def test_every_mlflow_client_of_the_package_is_made_under_the_store_lock():
    """MlflowClient is built in two places, each inside the store's lock: locked_client, and MlflowTracker.start,
    after which its every call holds its lock; no `mlflow.<call>` touches a store (mlflow.data.from_pandas builds a
    dataset)."""
    root = Path(__file__).resolve().parents[1] / "put"
    made, calls = set(), set()
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "MlflowClient":
                    made.add((path.relative_to(root).as_posix(), function.name))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                chain, value = [node.func.attr], node.func.value
                while isinstance(value, ast.Attribute):
                    chain.append(value.attr)
                    value = value.value
                if getattr(value, "id", None) == "mlflow":
                    calls.add(".".join(["mlflow", *reversed(chain)]))
    assert made == {("tracking/runs.py", "locked_client"), ("tracking/runs.py", "start")}
    assert calls == {"mlflow.data.from_pandas"}
