"""MLflow: one parent per DAG configuration with one named child per stage instance, runs found again instead
of duplicated, parallel writers on SQLite lose nothing, checkpoints logged as registered models with their
metrics, datasets and system metrics."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import subprocess
import time
import uuid
import zlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from put.config import VARIANTS
from put.tracking.base import tracked
from put.tracking.names import DUPLICATE_OF, VARIANTS_VIEW, metric_names, parent_name
from put.tracking.resilient import ResilientTracker
from put.tracking.runs import MlflowTracker
from tests.tracking_helpers import all_runs


def runs(client):
    experiment = client.get_experiment_by_name("put-demo")
    return client.search_runs([experiment.experiment_id], max_results=1000)


def test_parallel_writers_on_sqlite_lose_no_run(tracking, mlflow_db, tmp_path, monkeypatch):
    """12 processes (a stage instance each) log at once to one SQLite file."""
    from tests.tracking_writer import write, writers

    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[1]))  # the fork server imports `tests`
    variants = ["put", "conv", "one", "no_ref", "tok", "qua0"]
    context = writers()
    procs = [context.Process(target=write, args=(mlflow_db, str(tmp_path), v, stage))
             for v in variants for stage in ("train_transformer", "sample")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * len(procs)
    found = runs(tracking)
    parents = [r for r in found if r.data.tags["put.level"] == "dag"]
    children = [r for r in found if r.data.tags["put.level"] == "stage"]
    assert len(parents) == 1 and parents[0].info.run_name == f"demo · {len(VARIANTS)} variants · dag0001"
    assert sorted(r.info.run_name for r in children) == sorted(f"{s} {v}" for v in variants
                                                               for s in ("train_transformer", "sample"))
    for child in children:
        assert child.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        stage, variant = child.info.run_name.split()
        assert child.data.tags["snakemake_rule"] == f"{stage}@{variant}"  # its own, never another stage's
        assert child.data.params["nested.a"] == "1"
        assert child.data.metrics["train/loss"] == pytest.approx(1 / 20)
    assert "snakemake_rule" not in parents[0].data.tags


def race(monkeypatch, ids: str, both_see_both: bool) -> tuple[MlflowTracker, MlflowTracker]:
    """Hosts A and B start `evaluate conv` of one configuration at once on a tracking server (no file lock), A's
    clock an hour behind B's, and neither finds the configuration's parent. By default B's whole start (its parent
    and stage run created) lands before A's first creation; with `both_see_both`, A's parent lands first but B's
    lookup ran before it, so each host's search after creating sees both parents. The store hands out run ids in
    `ids` order ("ascending" or "descending" with creation). Returns A and B."""
    import mlflow.store.tracking.sqlalchemy_store as store
    from mlflow.tracking import MlflowClient

    import put.tracking.runs

    monkeypatch.setattr(put.tracking.runs, "_lock", lambda uri: contextlib.nullcontext())  # a server: no lock
    created, sign = itertools.count(1), 1 if ids == "ascending" else -1
    monkeypatch.setattr(store, "uuid", SimpleNamespace(uuid4=lambda: uuid.UUID(int=2**127 + sign * next(created))))
    clock, hosts, first, blind = {"skew_ms": -3_600_000}, {}, [True], []
    create_run, search = MlflowClient.create_run, MlflowTracker._search

    def start_b() -> None:
        clock["skew_ms"] = 0
        hosts["B"] = MlflowTracker.open("demo", "conv", "evaluate", "dag0003race")
        clock["skew_ms"] = -3_600_000

    def racing_create(client, experiment_id, start_time=None, tags=None, run_name=None):
        ours = first and first.pop()  # A's first creation, its parent
        if ours and not both_see_both:
            start_b()
        run = create_run(client, experiment_id, start_time=int(time.time() * 1000) + clock["skew_ms"], tags=tags,
                         run_name=run_name)
        if ours and both_see_both:
            blind.append(True)
            start_b()
        return run

    monkeypatch.setattr(MlflowClient, "create_run", racing_create)
    monkeypatch.setattr(MlflowTracker, "_search", lambda tracker, tags: [] if blind and blind.pop()
                        else search(tracker, tags))
    a = MlflowTracker.open("demo", "conv", "evaluate", "dag0003race")
    return a, hosts["B"]


@pytest.mark.parametrize("ids", ["ascending", "descending"])
def test_a_host_that_created_a_run_late_deletes_no_run_and_both_end_under_one_parent_whatever_the_ids(
        tracking, monkeypatch, ids):
    """B has created the parent and stage run and uses them; then A, which found no parent before B's landed,
    creates its own, an hour 'older' by its clock. Resolved by start_time, A deleted B's parent (and B's end failed
    on it); by the smallest run id nothing is deleted. Where A's parent has the smaller id, A marks B's as its
    duplicate and moves B's stage run under its own, and B follows the mark at its end: each host kept its own
    parent before (descending), splitting the DAG's children between two parents (the whole-DAG Slurm suite's
    failure in CI, November 29)."""
    a, b = race(monkeypatch, ids, both_see_both=False)
    assert all(r.info.lifecycle_stage == "active" for r in all_runs(tracking))  # main: B's parent deleted
    assert a.run_id == b.run_id  # the stage run: A found B's
    a.finish()
    b.finish()
    parents = {r.info.run_id: r for r in all_runs(tracking) if r.data.tags["put.level"] == "dag"}
    kept, lost = min(parents), max(parents)
    assert len(parents) == 2 and a.parent == b.parent == kept and parents[kept].info.status == "FINISHED"
    assert parents[lost].data.tags[DUPLICATE_OF] == kept and parents[lost].info.status == "KILLED"
    assert tracking.get_run(a.run_id).data.tags["mlflow.parentRunId"] == kept


def test_a_stage_run_made_under_a_parent_marked_later_moves_to_the_kept_one_at_its_end(tracking, monkeypatch):
    """A host made its stage run under its parent; a racing host then marked that parent a duplicate, and its move
    of the children ran before the stage run existed (here: it found none). The stage's end follows the mark."""
    import put.tracking.runs

    monkeypatch.setattr(put.tracking.runs, "_lock", lambda uri: contextlib.nullcontext())
    a = MlflowTracker.open("demo", "conv", "evaluate", "dag0004late")
    other = tracking.create_run(a.experiment, tags={"put.dag_id": "dag0004late", "put.preset": "demo",
                                                    "put.level": "dag"}).info.run_id
    tracking.set_tag(a.parent, DUPLICATE_OF, other)  # what the racer's mark leaves, its move having found nothing
    a.finish()
    assert a.parent == other and tracking.get_run(a.run_id).data.tags["mlflow.parentRunId"] == other
    assert tracking.get_run(other).info.status == "FINISHED"


@pytest.mark.parametrize("ids", ["ascending", "descending"])
def test_hosts_that_both_see_both_created_runs_keep_the_same_one(tracking, monkeypatch, ids):
    """Both hosts created a parent and each one's search sees both: they keep the same one (the smallest id, not
    the one A's slow clock makes oldest); the other is marked (out of the saved view's filter) and ended, never
    deleted, for a third host might be using it."""
    a, b = race(monkeypatch, ids, both_see_both=True)
    assert (a.parent, a.run_id) == (b.parent, b.run_id)
    parents = {r.info.run_id: r for r in all_runs(tracking) if r.data.tags["put.level"] == "dag"}
    assert a.parent == min(parents) and len(parents) == 2
    lost = parents[max(parents)]
    assert lost.info.lifecycle_stage == "active" and lost.info.status == "KILLED"
    assert lost.data.tags[DUPLICATE_OF] == a.parent
    kept = tracking.search_runs([lost.info.experiment_id],
                                f"tags.`put.level` = 'dag' and tags.`{DUPLICATE_OF}` IS NULL")
    assert [r.info.run_id for r in kept] == [a.parent]


def test_rerunning_a_stage_reuses_its_runs_and_tags_each_with_its_source(tracking):
    for _ in range(2):
        tracker = MlflowTracker.open("demo", "put", "evaluate", "dag0002aaaaa", {"dvc_stage": "evaluate@put"})
        tracker.log_params({"ssim_window": 51})
        tracker.log_metrics({"k50/10-60/psnr": 20.0}, 0)
        tracker.finish()
    found = runs(tracking)
    assert len(found) == 2  # one parent, one stage child
    child = next(r for r in found if r.data.tags["put.level"] == "stage")
    assert child.info.run_name == "evaluate put" and child.info.status == "FINISHED"
    assert child.data.tags["dvc_stage"] == "evaluate@put"
    assert child.data.tags["mlflow.source.name"] == "put evaluate put"
    assert len(child.data.tags["mlflow.source.git.commit"]) == 40
    assert child.data.tags["put.version.torch"] and child.data.tags["put.version.mlflow"]
    assert "torch==" in Path(tracking.download_artifacts(child.info.run_id, "environment.txt", ".")).read_text()
    experiment = tracking.get_experiment_by_name("put-demo")
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"


def test_the_report_has_its_own_run_under_the_parent(tracking, tmp_path):
    artefact = tmp_path / "table1.tex"
    artefact.write_text("% table\n")
    tracker = MlflowTracker.open("demo", None, "report", "dag0003aaaaa", labels=["put", "conv", "official_x"])
    tracker.log_artifact(artefact)
    tracker.finish()
    parent, child = sorted(runs(tracking), key=lambda r: r.data.tags["put.level"])
    assert parent.info.run_name == "demo · 2 variants + 1 official · dag0003"
    assert parent.data.tags["put.variants"] == "put,conv,official_x"
    assert child.info.run_name == "report" and parent.info.status == "FINISHED"
    assert [a.path for a in tracking.list_artifacts(child.info.run_id)] == ["environment.txt", "table1.tex"]


def test_metric_names_end_with_what_they_measure():
    nested = {"k50": {"10-60": {"psnr": 20.5, "ssim": 0.5}}, "bins": {"10-20": {"mae": 0.1}}}
    assert metric_names(nested) == {"k50/10-60/psnr": 20.5, "k50/10-60/ssim": 0.5, "bins/10-20/mae": 0.1}
    assert parent_name("ffhq", "0123456789ab", None) == f"ffhq · {len(VARIANTS)} variants · 0123456"


def test_a_checkpoint_becomes_a_registered_model_whose_evaluation_is_linked(tracking, tmp_path, monkeypatch):
    checkpoint = tmp_path / "transformer.pt"
    checkpoint.write_bytes(b"weights" * 1000)
    split = tmp_path / "train.csv"
    split.write_text("path,sha256\na.png,00\n")
    masks = tmp_path / "masks"
    masks.mkdir()
    (masks / "manifest.csv").write_text("image,mask,group\na.png,m.png,10-60\n")

    init = {"preset": "demo", "variant": "conv", "stage": "train_transformer", "dag_id": "dag0004aaaaa"}
    with tracked(ResilientTracker(MlflowTracker.open, init, system_metrics=True)) as t:
        t.log_dataset(split, "demo train split", "training")
        model_id = t.log_model(checkpoint, "transformer", {"eval/masked_token_loss": 3.5}, {"lr": 0.001})
        assert t.log_model(checkpoint, "transformer", {}, {}) == model_id  # a re-run reuses it
    monkeypatch.setenv("PUT_MLFLOW_MODEL_COPY_MB", "0")  # above the limit: a reference, no copy
    with tracked(MlflowTracker.open("demo", "one", "train_transformer", "dag0004aaaaa")) as t:
        referenced = t.log_model(checkpoint, "transformer", {}, {})
    with tracked(MlflowTracker.open("demo", "conv", "evaluate", "dag0004aaaaa")) as t:
        t.log_evaluation({"k50": {"10-60": {"psnr": 21.0, "ssim": 0.7}}, "all": {"10-60": {"psnr": 22.0}}},
                         masks / "manifest.csv")

    model = tracking.get_logged_model(model_id)
    assert model.name == "transformer-conv" and str(model.status).endswith("READY")
    linked = {m.key: m for m in model.metrics}
    assert linked["eval/masked_token_loss"].value == 3.5
    assert linked["k50/10-60/psnr"].value == 21.0 and linked["k50/10-60/psnr"].dataset_name == "demo test masks"
    files = {f.path for f in tracking.list_logged_model_artifacts(model_id)}
    assert files == {"MLmodel", "transformer.pt"}
    version = tracking.get_model_version_by_alias("put-demo-conv-transformer", "current")
    assert version.source == f"models:/{model_id}"
    # what the Models tab lists under "Registered models"
    assert json.loads(model.tags["mlflow.modelVersions"]) == [{"name": "put-demo-conv-transformer", "version": "1"}]
    assert {f.path for f in tracking.list_logged_model_artifacts(referenced)} == {"MLmodel"}

    by_name = {r.info.run_name: r for r in runs(tracking)}
    train = by_name["train_transformer conv"]
    assert [d.dataset.name for d in train.inputs.dataset_inputs] == ["demo train split"]
    assert any(k.startswith("system/cpu_utilization") for k in train.data.metrics)
    evaluate = tracking.get_run(by_name["evaluate conv"].info.run_id)
    assert [m.model_id for m in evaluate.inputs.model_inputs] == [model_id]
    digest = evaluate.inputs.dataset_inputs[0].dataset.digest
    assert len(digest) == 16
    view = json.loads(tracking.get_experiment_by_name("put-demo").tags[f"mlflow.sharedViewState.{VARIANTS_VIEW}"])
    assert view["name"].startswith("Variants side by side") and view["state"].startswith("deflate;")


def saved_view(client) -> dict:
    """The state of the experiment's saved view of the evaluations (MLflow's packed `deflate;base64` JSON)."""
    tag = json.loads(client.get_experiment_by_name("put-demo").tags[f"mlflow.sharedViewState.{VARIANTS_VIEW}"])
    return json.loads(zlib.decompress(base64.b64decode(tag["state"].removeprefix("deflate;"))))


def test_the_saved_view_keeps_every_evaluations_columns(tracking, tmp_path):
    """A deterministic method (an external baseline: mode `all` only) evaluated after the variants leaves their
    top-K columns in the view and its order by top-K PSNR (it replaced them once, and the UI lost the column)."""
    manifest = tmp_path / "manifest.csv"
    manifest.write_text("image,mask,group\na.png,m.png,10-60\n")
    cell = {"10-60": {"psnr": 21.0, "ssim": 0.7}}
    for variant, metrics in (("put", {"k50": cell, "all": cell}), ("external_telea", {"all": cell})):
        with tracked(MlflowTracker.open("demo", variant, "evaluate", "dag0004aaaaa")) as tracker:
            tracker.log_evaluation(metrics, manifest)
    view = saved_view(tracking)
    assert [c for c in view["columnOrder"] if "/" in c] == [
        "metrics.`k50/10-60/psnr`", "metrics.`k50/10-60/ssim`", "metrics.`all/10-60/psnr`", "metrics.`all/10-60/ssim`"]
    assert view["orderByKey"] == "metrics.`k50/10-60/psnr`"


def test_seed_replicates_have_their_own_runs_grouped_by_configuration_with_versions(tracking):
    for seed in (0, 1, 2):
        MlflowTracker.open("demo", "conv", "evaluate", "dag0005aaaaa", seed=seed).finish()
    MlflowTracker.open("demo", "conv", "evaluate", "dag0005aaaaa", seed=1).finish()  # a re-run: the same run
    children = [r for r in runs(tracking) if r.data.tags["put.level"] == "stage"]
    assert sorted(r.data.tags["put.seed"] for r in children) == ["0", "1", "2"]
    assert {r.data.tags["put.replicates"] for r in children} == {"dag0005aaaaa/conv"}
    assert {r.info.run_name for r in children} == {"evaluate conv", "evaluate conv seed 1", "evaluate conv seed 2"}
    tags = children[0].data.tags
    assert tags["put.version.python"].count(".") == 2 and tags["put.version.torch"].startswith("2.")
    assert "requirements.lock" in tags["put.version.environment"]


def test_a_code_change_gets_a_new_run_linked_to_the_earlier_one_and_no_change_reuses_it(tracking, monkeypatch):
    from put.io.code import command_sources
    from put.tracking import runs as runs_module
    from put.tracking.source import code_version

    def evaluate() -> str:
        tracker = MlflowTracker.open("demo", "put", "evaluate", "dag0006aaaaa")
        tracker.log_metrics({"k50/10-60/psnr": 20.0}, 0)
        tracker.finish()
        return tracker.run_id

    first = evaluate()
    assert evaluate() == first  # the same code: the same run
    assert tracking.get_run(first).data.tags["put.code"] == code_version(command_sources("evaluate"))
    monkeypatch.setattr(runs_module, "code_version", lambda files: "0123456789ab")  # the stage's code edited
    second = evaluate()
    assert second != first and evaluate() == second
    old, new = tracking.get_run(first).data.tags, tracking.get_run(second).data.tags
    assert new["put.code"] == "0123456789ab" and new["put.previous_run"] == first
    assert new["put.previous_code"] == old["put.code"] and old["put.superseded_by"] == second
    for run_id in (first, second):  # each run its own environment file
        assert [a.path for a in tracking.list_artifacts(run_id)] == ["environment.txt"]
    assert [r.info.run_id for r in runs(tracking) if r.data.tags["put.level"] == "stage"
            and "put.superseded_by" not in r.data.tags] == [second]


def test_code_version_follows_the_files_and_dirty_ignores_the_pipelines_products(tmp_path, monkeypatch):
    from put.tracking import source

    monkeypatch.setattr(source, "CODE_ROOT", tmp_path)
    for name, text in (("put/stage.py", "x = 1\n"), ("params.yaml", "preset: demo\n"), ("results/m.json", "{}\n")):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    version = source.code_version(["put/stage.py"])
    assert len(version) == 12 and source.code_version(["put/stage.py"]) == version
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c"], cwd=tmp_path,
                   check=True)
    (tmp_path / "results/m.json").write_text('{"psnr": 20}\n')  # a product the stage rewrote
    (tmp_path / "put/new_helper.py").write_text("")  # not the stage's code
    assert not source.git_dirty(["put/stage.py", "params.yaml"])
    (tmp_path / "params.yaml").write_text("preset: ffhq\n")
    assert source.git_dirty(["put/stage.py", "params.yaml"])
    (tmp_path / "params.yaml").write_text("preset: demo\n")
    (tmp_path / "put/stage.py").write_text("x = 2\n")
    assert source.git_dirty(["put/stage.py", "params.yaml"]) and source.code_version(["put/stage.py"]) != version


def test_a_stage_dvc_skipped_is_logged_from_its_outputs_and_marked(tracking, tmp_path):
    from put.config import VARIANT_COLOURS
    from put.config.params import load_params
    from put.metrics.files import log_evaluation as log_outputs
    from put.tracking.lookup import finished_run

    params = load_params(None, preset="demo")
    masks, out = tmp_path / "masks", tmp_path / "metrics" / "put.json"
    masks.mkdir()
    (masks / "manifest.csv").write_text("image,mask,group\na.png,m.png,10-60\n")
    out.parent.mkdir()
    out.write_text(json.dumps({"k50": {"10-60": {"psnr": 21.5, "ssim": 0.7}}, "bins": {"10-20": {"psnr": 25.0}}}))
    for name in ("put_info.json", "put_bins.csv", "put_images.csv"):
        (out.parent / name).write_text("{}\n" if name.endswith("json") else "a\n1\n")
    dag_id = params.dag_id()
    assert finished_run("demo", "put", "evaluate", dag_id) is None
    with tracked(MlflowTracker.open("demo", "put", "evaluate", dag_id, {"dvc_stage": "evaluate@put"},
                               from_outputs=True)) as tracker:
        log_outputs(tracker, params, masks, out)
    run = tracking.get_run(tracker.run_id)
    assert finished_run("demo", "put", "evaluate", dag_id) == tracker.run_id
    assert run.data.tags["put.logged_from"] == "outputs" and "put track" in run.data.tags["mlflow.note.content"]
    assert run.data.tags["mlflow.runColor"] == VARIANT_COLOURS["put"]  # the variant's colour in the UI
    assert run.data.metrics["k50/10-60/psnr"] == 21.5 and run.data.params["ssim_window"] == "51"
    assert {a.path for a in tracking.list_artifacts(run.info.run_id)} >= {"put.json", "put_images.csv"}
    view = json.loads(tracking.get_experiment_by_name("put-demo").tags[f"mlflow.sharedViewState.{VARIANTS_VIEW}"])
    assert view["name"].startswith("Variants side by side")
    # The stage runs after all (dvc repro --force): the same run, no longer marked.
    again = MlflowTracker.open("demo", "put", "evaluate", dag_id)
    again.finish()
    assert again.run_id == tracker.run_id and "put.logged_from" not in tracking.get_run(again.run_id).data.tags


def test_logging_a_model_leaves_the_tracking_uri_and_every_later_run_in_the_store(tracking, mlflow_db, tmp_path,
                                                                                  monkeypatch):
    """Issue 43, 1: MLflow's `_use_tracking_uri` restored its module's URI (None) and so unset
    MLFLOW_TRACKING_URI: every later run of the process went to ./mlflow.db, and a spool recorded that file."""
    import os

    import requests

    from put.tracking.factory import stage_tracker

    work = tmp_path / "work"  # where a default ./mlflow.db would land: not the test's store
    work.mkdir()
    monkeypatch.chdir(work)
    checkpoint = tmp_path / "pvqvae.pt"
    checkpoint.write_bytes(b"weights" * 100)
    with tracked(MlflowTracker.open("demo", "conv", "train_pvqvae", "dag0009aaaaa")) as t:
        t.log_model(checkpoint, "pvqvae", {"eval/loss": 0.5}, {"lr": 0.001}, step=1)
    assert os.environ.get("MLFLOW_TRACKING_URI") == mlflow_db
    with tracked(MlflowTracker.open("demo", "conv", "evaluate", "dag0009aaaaa")) as later:
        later.log_metrics({"k50/10-60/psnr": 20.0}, 0)
    assert later.uri == mlflow_db and tracking.get_run(later.run_id).data.metrics == {"k50/10-60/psnr": 20.0}

    class Dead:  # the server goes away: the spool records the store the stage wrote to
        def __getattr__(self, name):
            def call(*args, **kwargs):
                raise requests.ConnectionError("Connection refused")
            return call

    monkeypatch.setenv("PUT_TRACKING", "1")
    monkeypatch.setenv("PUT_MLFLOW_SPOOL", str(tmp_path / "spool"))
    spooled = stage_tracker("demo", "conv", "external", "dag0009aaaaa")
    spooled.inner.client = Dead()
    spooled.log_metrics({"k50/10-60/psnr": 19.0}, 0)
    assert json.loads(spooled.spool.read_text().splitlines()[0])["uri"] == mlflow_db
    assert not list(work.iterdir())  # no mlflow.db, no mlruns/ beside the workspace
