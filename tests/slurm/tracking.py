"""What the Slurm suite checks on the tracking server alone, after the DAG ran through an outage and every spool was
replayed (tests/slurm/test_cluster.py): each tracked stage instance has exactly one run, finished, a child of the
configuration's parent run, with every parameter it logs; each metric has exactly one point per step it logged,
counted against what the stage's outputs hold (the curves of a training, the metrics file of an evaluation or a
frontier); each training's model is READY with its files and registered; nothing was left in the workspace (no
`mlflow.db`, no `mlruns/`, no spool)."""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from put.config.params import Params
from put.config.paths import EVAL_CURVE, FRONTIER_METRICS, TRAIN_CURVE, path_of
from put.dag.declaration import FRONTIER, FRONTIER_TPAMI
from put.tracking.names import DUPLICATE_OF, LOGGED_FROM, experiment_name, flatten, metric_names
from put.tracking.spool import SPOOL_DIR
from tests.helpers import metrics_file, pvqvae_checkpoint, transformer_checkpoint

TIMING = ("data_wait", "seconds")  # wall-clock values: a point per step, its value each attempt's own
SYSTEM = "system/"  # sampled per attempt from its start (steps 0, 1, ...), not values the outputs hold


@dataclass
class Rerun:
    """A training killed without warning (kill -9) re-trains, and logs again, the steps after the state its retry
    resumed from: there, and only there, a point may come twice, with the same value (a deterministic resume)."""

    run_name: str
    resumed_at: int


@dataclass
class Counts:
    runs: int = 0
    params: int = 0
    points: int = 0
    models: int = 0
    relogged: dict[str, int] = field(default_factory=dict)  # run name -> points logged again after a kill -9


def client_of(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri)


def dag_runs(uri: str, preset: str, dag_id: str) -> tuple[list, list]:
    """The parent runs (put.level dag) and the stage runs of one DAG configuration, race losers (tagged
    put.duplicate_of, ended KILLED: put/tracking/runs.py) left out of the parents."""
    client = client_of(uri)
    experiment = client.get_experiment_by_name(experiment_name(preset)).experiment_id
    runs = client.search_runs([experiment], f"tags.`put.dag_id` = '{dag_id}'", max_results=5000)
    parents = [r for r in runs if r.data.tags.get("put.level") == "dag" and DUPLICATE_OF not in r.data.tags]
    return parents, [r for r in runs if r.data.tags.get("put.level") == "stage"]


def stage_runs(uri: str, preset: str, dag_id: str) -> dict:
    """Run name -> run, of every stage run of the configuration; a name twice fails (a stage logged twice)."""
    _, runs = dag_runs(uri, preset, dag_id)
    named = {r.info.run_name: r for r in runs}
    assert len(named) == len(runs), sorted(Counter(r.info.run_name for r in runs).items())
    return named


class Histories:
    """(step, value) points of a run's metric on the server, each history asked for once (the checks below come
    back to a key: a stage's own metrics, then every metric of the run)."""

    def __init__(self, client):
        self.client, self.fetched = client, {}

    def __call__(self, run, key: str) -> list[tuple[int, float]]:
        if (run.info.run_id, key) not in self.fetched:
            self.fetched[run.info.run_id, key] = sorted(
                (m.step, m.value) for m in self.client.get_metric_history(run.info.run_id, key))
        return self.fetched[run.info.run_id, key]


def once_per_step(points: list[tuple[int, float]], steps: set[int], what: tuple, rerun: Rerun | None = None,
                  values: dict[int, float] | None = None) -> int:
    """`points` hold exactly `steps`, each once (twice where `rerun` allows it, the same value twice), with
    `values` where given; returns how many points a rerun logged again."""
    counted = Counter(step for step, _ in points)
    assert set(counted) == steps, (*what, "steps logged but not in the outputs, or missing:",
                                   sorted(set(counted) ^ steps)[:10])
    again = {step: n for step, n in counted.items() if n > 1}
    allowed = rerun is not None and all(n == 2 and step > rerun.resumed_at for step, n in again.items())
    assert not again or allowed, (*what, "points logged more than once (step: count):", sorted(again.items())[:10])
    if values is not None:
        for step, value in points:
            assert math.isclose(value, values[step], rel_tol=1e-6, abs_tol=1e-9), (*what, step, value, values[step])
    return len(again)


def check_training(history: Histories, run, curves: Path, rerun: Rerun | None, ran: bool = True) -> tuple[int, int]:
    """Every column of the curves (train.csv as train/<column>, eval.csv as eval/<column>) at its steps, once;
    the loader's wall-clock figures at the steps of train.csv where the training logged (`ran`), not `put track`
    from the curves. Returns (points checked, points logged again)."""
    points = again = 0
    name = run.info.run_name
    for csv_name, prefix in ((TRAIN_CURVE, "train/"), (EVAL_CURVE, "eval/")):
        rows = list(csv.DictReader((curves / csv_name).open()))
        for column in rows[0].keys() - {"step"}:
            written = {int(r["step"]): float(r[column]) for r in rows  # an empty cell: a term not started yet
                       if r[column] != "" and math.isfinite(float(r[column]))}
            timing = any(t in column for t in TIMING)
            again += once_per_step(history(run, prefix + column), set(written), (name, prefix + column),
                                   rerun, None if timing else written)
            points += len(written)
        if prefix == "train/" and ran:
            steps = {int(r["step"]) for r in rows}
            for key in ("train/data_wait_s", "train/data_wait_fraction"):
                again += once_per_step(history(run, key), steps, (name, key), rerun)
                points += len(steps)
    return points, again


def check_step_zero(history: Histories, run, values: dict[str, float]) -> int:
    """A stage that logs its results once (an evaluation, a frontier): each value at step 0, once (a value that
    is not finite, none: MLflow keeps no NaN point, put's tracker sends none)."""
    finite = {key: value for key, value in values.items() if math.isfinite(value)}
    for key, value in finite.items():
        once_per_step(history(run, key), {0}, (run.info.run_name, key), values={0: value})
    return len(finite)


def check_model(client, run, checkpoint: Path, dag_id: str, models: list) -> None:
    """The run's one logged model: READY, its MLmodel and checkpoint (the same size as the workspace's) among its
    artefacts, registered (each version READY; the alias `current` on one of them)."""
    own = [m for m in models if m.source_run_id == run.info.run_id]
    name = run.info.run_name
    assert len(own) == 1 and str(own[0].status).endswith("READY"), (name, [(m.model_id, m.status) for m in own])
    model = own[0]
    assert model.tags.get("put.dag_id") == dag_id, (name, model.tags)
    files = {f.path: f.file_size for f in client.list_logged_model_artifacts(model.model_id)}
    assert "MLmodel" in files and files.get(checkpoint.name) == checkpoint.stat().st_size, (name, files)
    registered = json.loads(model.tags["mlflow.modelVersions"])
    assert registered and len({r["name"] for r in registered}) == 1, (name, registered)
    for entry in registered:  # each version READY, of this model
        version = client.get_model_version(entry["name"], entry["version"])
        assert (version.source, version.status) == (f"models:/{model.model_id}", "READY"), (name, version)
    current = client.get_model_version_by_alias(registered[0]["name"], "current")
    assert current.version in {r["version"] for r in registered}, (name, current.version, registered)


def frontier_metrics(preset: str, variant: str) -> Path:
    """The metrics file of the frontier of `variant` (put's, or the TPAMI model's)."""
    folder = {FRONTIER.variant or "put": FRONTIER, FRONTIER_TPAMI.variant: FRONTIER_TPAMI}[variant].outputs["--out"]
    return path_of(f"{folder.pattern}/{Path(FRONTIER_METRICS).name}", preset)


def check_server(uri: str, repo: Path, params: Params, expected: list[str], rerun: Rerun | None = None,
                 from_outputs: frozenset[str] = frozenset()) -> Counts:
    """On the server alone: the runs `expected` ("stage variant", put.commands.track's names) and no other of the
    configuration, each once, FINISHED, a child of the one parent run, marked as logged from its outputs if and only
    if it is one of `from_outputs` (`put track` logged it: its spool was lost), with its parameters, every metric
    point once per step, and (a training) its model."""
    client = client_of(uri)
    history = Histories(client)
    preset, dag_id = params.preset, params.dag_id()
    parents, _ = dag_runs(uri, preset, dag_id)
    runs = stage_runs(uri, preset, dag_id)
    assert sorted(runs) == sorted(expected), (sorted(set(runs) - set(expected)), sorted(set(expected) - set(runs)))
    assert len(parents) == 1, [(p.info.run_id, p.info.run_name) for p in parents]
    parent = parents[0].info.run_id
    experiment = client.get_experiment_by_name(experiment_name(preset)).experiment_id
    models = client.search_logged_models([experiment], f"tags.`put.dag_id` = '{dag_id}'", max_results=1000)
    resolved = params.resolved()
    counts = Counts()
    for name, run in sorted(runs.items()):
        tags = run.data.tags
        assert run.info.status == "FINISHED", (name, run.info.status)
        assert tags.get("mlflow.parentRunId") == parent, (name, tags.get("mlflow.parentRunId"), parent)
        assert (tags.get(LOGGED_FROM) == "outputs") == (name in from_outputs), (name, tags.get(LOGGED_FROM))
        stage_name, _, variant = name.partition(" ")
        counts.runs += 1
        if stage_name.startswith("train_"):
            kind = stage_name.removeprefix("train_")
            train = getattr(params.resolved_for(variant), f"{kind}_train")
            expected_params = flatten({"model": params.variant_config(variant).model_dump(),
                                       "train": train.model_dump()})
            checkpoint = repo / (pvqvae_checkpoint(preset, variant) if kind == "pvqvae"
                                 else transformer_checkpoint(preset, variant))
            points, again = check_training(history, run, checkpoint.parent / f"{kind}_curves",
                                           rerun if rerun is not None and rerun.run_name == name else None,
                                           ran=name not in from_outputs)
            counts.points += points
            if again:
                counts.relogged[name] = again
            check_model(client, run, checkpoint, dag_id, models)
            counts.models += 1
        elif stage_name in ("evaluate", "frontier"):
            values = metric_names(json.loads((repo / (metrics_file(preset, variant) if stage_name == "evaluate"
                                                      else frontier_metrics(preset, variant))).read_text()))
            counts.points += check_step_zero(history, run, values)
            expected_params = flatten(getattr(resolved, stage_name).model_dump())
        elif stage_name == "sample":
            expected_params = flatten(resolved.sample.model_dump())
        else:
            expected_params = {}
        # every other metric (the stage's wall time, say) once per step too; system metrics are per attempt
        for key in run.data.metrics:
            if not key.startswith(SYSTEM):
                points = history(run, key)
                once_per_step(points, {step for step, _ in points}, (name, key),
                              rerun if rerun is not None and rerun.run_name == name else None)
        assert {k: str(v)[:6000] for k, v in expected_params.items()}.items() <= run.data.params.items(), name
        counts.params += len(expected_params)
    return counts


def left_in_workspace(repo: Path) -> list[str]:
    """What tracking left in the workspace: a local store (mlflow.db, mlruns/) or a spool's files."""
    found = list(repo.rglob("mlflow.db*")) + [p for p in repo.rglob("mlruns") if p.is_dir()]
    found += [p for p in (repo / SPOOL_DIR).rglob("*") if p.is_file()] if (repo / SPOOL_DIR).is_dir() else []
    return sorted(str(p.relative_to(repo)) for p in found)
